"""`decisionrag build`, `decisionrag tree` and `decisionrag stats`."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from typing import Any

from .._errors import InputError
from .._tree import Node, NodeKind, Tree
from ._cluster_cmds import add_describe_arguments, describer_from_args

_KIND_LABELS = {NodeKind.ROOT: "root", NodeKind.GROUP: "group", NodeKind.DOCUMENT: "doc",
                NodeKind.SECTION: "section", NodeKind.PASSAGE: "passage"}


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    _register_build(subparsers)
    _register_vectors(subparsers)
    _register_index(subparsers)
    _register_tree(subparsers)
    _register_stats(subparsers)


# -- build ---------------------------------------------------------------------------------

def _cluster_arg(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        number = int(value)
    except ValueError:
        message = f"expected a number of groups or 'auto', got {value!r}"
        raise argparse.ArgumentTypeError(message) from None
    if number < 2:
        raise argparse.ArgumentTypeError("the number of groups must be at least 2")
    return number


def _register_build(subparsers: argparse._SubParsersAction[Any]) -> None:
    from .._build import FORMATS

    parser = subparsers.add_parser(
        "build", help="build a tree file from documents",
        description="Build a corpus tree from files and folders. Folders become group nodes; "
        "documents are split into sections (headings) and passages. Unreadable, undecodable "
        "or empty documents are skipped and counted in one warning. The tree file is written "
        "atomically, together with its vectors and indexes: on an error, Ctrl-C or a kill "
        "nothing new is left at the output path, and a tree that was there keeps its own "
        "vectors. One writer of a tree at a time: another waits (DECISIONRAG_LOCK_WAIT "
        "seconds, default 120) or is refused with a message naming the first.")
    parser.add_argument("sources", nargs="+", metavar="SRC",
                        help="files or folders to read (folders are walked recursively; hidden "
                        "entries are skipped)")
    parser.add_argument("-o", "--out", required=True, metavar="TREE",
                        help="the tree file to write (an existing tree there is replaced; any "
                        "other file is refused unless --force)")
    parser.add_argument("--force", action="store_true",
                        help="replace the output even if it is not a decisionrag tree (never a "
                        "source of this build, a folder or a device)")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="source format; 'auto' (default) picks by extension: .jsonl = the "
                        "benchmark format, .md/.markdown, .html/.htm, .txt/.text or no extension "
                        "= plain text, .pdf, .docx (Word). In folders only files of the chosen "
                        "format (any of these with 'auto') are read, others are ignored; a file "
                        "named on the command line is read in the chosen format whatever its extension")
    parser.add_argument("--cluster", type=_cluster_arg, metavar="N|auto",
                        help="group the documents into N topic clusters (or a number chosen from "
                        "the corpus size with 'auto') above the document level; for flat corpora "
                        "whose documents sit directly under the root")
    parser.add_argument("--cluster-model", metavar="NAME",
                        help="sentence-embedding model for --cluster (default: the bundled "
                        "all-MiniLM-L6-v2)")
    parser.add_argument("--cluster-branching", type=int, default=1000, metavar="B",
                        help="at most B groups per level; more get another level of groups above "
                        "(default 1000)")
    parser.add_argument("--cluster-seed", type=int, default=0, metavar="N",
                        help="random seed of the clustering (default 0: the same input gives the "
                        "same groups)")
    parser.add_argument("--no-vectors", action="store_true",
                        help="do not store node vectors beside the tree (TREE.vectors/); by "
                        "default they are embedded when decisionrag[embedded] is installed: the "
                        "embedded judge, dense search and hybrid candidates read them")
    add_vector_arguments(parser)
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar and no summary line (warnings are still printed)")
    add_describe_arguments(parser)
    _add_engine_arguments(parser)
    parser.set_defaults(func=_run_build)


def _add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("build engine")
    group.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="'local' (default): this process; 'ray': parse files and embed on "
                       "Ray Data workers (extra 'ray'), then write the tree here — the same tree "
                       "for the same seed and vectors")
    group.add_argument("--address", metavar="ADDR",
                       help="with --engine ray: the cluster to join (e.g. ray://head:10001 or "
                       "'auto'); default: start a local Ray instance")
    group.add_argument("--ray-batch-size", type=int, metavar="N",
                       help="with --engine ray: texts per encoder call (default 1024, the local "
                       "encoder's chunk: vectors bit-identical to a local build's)")
    group.add_argument("--ray-workers", type=int, metavar="N",
                       help="with --engine ray: encoder actors (default: one per GPU, else one "
                       "per two CPUs)")
    group.add_argument("--precision", choices=("auto", "float32", "bfloat16"),
                       help="with --engine ray: the workers' encoder precision (default auto)")


_SKIPS_LISTED = 20  # skipped files named one per line; the warning counts them all


def add_vector_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vectors-model", metavar="NAME",
                        help="sentence-embedding model of the stored vectors (default: the "
                        "bundled all-MiniLM-L6-v2; judges must use the same)")
    parser.add_argument("--vectors-precision", choices=("auto", "float32", "bfloat16"),
                        help="encoder precision (default auto: bfloat16 where the hardware has "
                        "it); the vectors are filed under it and judges must match")


def _register_vectors(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "vectors", help="embed a tree's nodes and store the vectors beside it",
        description="Embed every passage of a tree (pages and groups get the mean of what is "
        "below them) and store the vectors in TREE.vectors/, keyed by model and precision, "
        "written atomically, with the corpus's word statistics and each passage's term "
        "counts (what the embedded judge weighs words by). Passages whose text is unchanged "
        "since the last run are not encoded again.")
    parser.add_argument("tree", metavar="TREE", help="the tree file")
    add_vector_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    parser.set_defaults(func=_run_vectors)


def _run_vectors(args: argparse.Namespace) -> int:
    from .._app._build import embed_tree

    report = embed_tree(args.tree, model=args.vectors_model, precision=args.vectors_precision,
                        progress=not args.quiet)
    if not args.quiet:
        print(report.summary())
    return 0


def _register_index(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "index", help="rebuild the search indexes stored with a tree",
        description="Rebuild, from what the tree stores (nothing is embedded), the indexes "
        "`build` stores beside it: the BM25 index (TREE.bm25/, one streaming pass; needs "
        "decisionrag[eval]) and, for each stored vector set, its approximate-nearest-neighbour "
        "index (TREE.vectors/*.ann.json; faiss, decisionrag[ann]), trained afresh. By default "
        "an ANN index is built from 100,000 passages or where one exists.")
    parser.add_argument("tree", metavar="TREE", help="the tree file")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--ann", dest="ann", action="store_true", default=None,
                        help="build an ANN index whatever the tree's size")
    choice.add_argument("--no-ann", dest="ann", action="store_false",
                        help="no ANN index (an existing one is removed)")
    parser.add_argument("--quiet", action="store_true", help="no summary")
    parser.set_defaults(func=_run_index)


def _run_index(args: argparse.Namespace) -> int:
    from .._app._build import index_tree

    for report in index_tree(args.tree, ann=args.ann):
        if not args.quiet:
            print(report.summary())
    return 0


def _run_build(args: argparse.Namespace) -> int:
    from .._app import build_tree

    if args.cluster_model and args.cluster is None:
        raise InputError("--cluster-model needs --cluster")
    options: dict[str, Any] = {}
    if args.cluster is not None:
        options = {"branching": args.cluster_branching, "seed": args.cluster_seed,
                   "describer": describer_from_args(args), "cache": args.cache_dir}
    explicit = bool(args.vectors_model or args.vectors_precision)
    if explicit and args.no_vectors:
        raise InputError("--vectors-model/--vectors-precision contradict --no-vectors")
    vectors: bool | str = False if args.no_vectors else (True if explicit else "auto")
    if args.engine == "ray":
        from .._scale import RayOptions, build_on_ray

        ray_options = RayOptions(address=args.address, workers=args.ray_workers,
                                 precision=args.precision,
                                 **({"batch_size": args.ray_batch_size} if args.ray_batch_size else {}))
        report = build_on_ray(args.sources, args.out, options=ray_options, format=args.format,
                              cluster=args.cluster, cluster_model=args.cluster_model,
                              cluster_options=options, progress=not args.quiet,
                              force=args.force, vectors=vectors, vectors_model=args.vectors_model,
                              vectors_precision=args.vectors_precision)
    else:
        if args.address or args.ray_workers or args.precision:
            raise InputError("--address, --ray-workers and --precision go with --engine ray")
        report = build_tree(args.sources, args.out, format=args.format, cluster=args.cluster,
                            cluster_model=args.cluster_model, cluster_options=options,
                            progress=not args.quiet, force=args.force, vectors=vectors,
                            vectors_model=args.vectors_model,
                            vectors_precision=args.vectors_precision)
    for file, reason in report.skipped[:_SKIPS_LISTED]:
        print(f"decisionrag: skipped {file}: {reason}", file=sys.stderr)
    warning = report.warning()
    if warning:
        print(f"decisionrag: warning: {warning}", file=sys.stderr)
    for note in (report.vectors_note, report.bm25_note,
                 report.vectors.ann_note if report.vectors is not None else None):
        if note:
            print(f"decisionrag: note: {note}", file=sys.stderr)
    if not args.quiet:
        print(report.summary())
        if report.cluster is not None:
            print(report.cluster.summary())
        if report.vectors is not None:
            print(report.vectors.summary().split("\nnote: ")[0])
        if report.bm25 is not None:
            print(report.bm25.summary())
    return 0


# -- tree ----------------------------------------------------------------------------------

def _register_tree(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "tree", help="show a tree file as an indented outline",
        description="Show a tree as an indented outline: each line is '#ID kind title (counts)'. "
        "Use an ID or key with --node to look deeper into a branch.")
    parser.add_argument("tree", metavar="TREE", help="a tree file written by 'decisionrag build'")
    parser.add_argument("--node", metavar="ID",
                        help="start at this node (its #ID number or its key, e.g. a document id; "
                        "default: the root)")
    parser.add_argument("--depth", type=_non_negative, default=2, metavar="N",
                        help="levels shown below the start node (default: 2)")
    parser.add_argument("--max-children", type=_non_negative, default=8, metavar="N",
                        help="children shown per node before a '… N more' line (default: 8)")
    parser.add_argument("--metadata", action="store_true",
                        help="a line under each node with all of its metadata (by default a "
                        "node's line shows its metadata other than source and mtime)")
    parser.set_defaults(func=_run_tree)


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


def _find(tree: Tree, ref: str | None) -> Node:
    if ref is None:
        return tree.root
    try:
        return tree.find(ref)
    except KeyError:
        raise InputError(f"{tree.file}: no node with id or key {ref!r}") from None


_FILE_KEYS = ("source", "mtime")  # on every file's document: left to --metadata


def metadata_text(meta: dict[str, Any], *, everything: bool = False) -> str:
    """``{key: value, …}`` of a node's metadata (without source and mtime unless
    `everything`), or "" when there is nothing to show."""
    shown = {k: v for k, v in meta.items() if everything or k not in _FILE_KEYS}
    if not shown:
        return ""
    return "{" + ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}"
                           for k, v in shown.items()) + "}"


def node_label(node: Node) -> tuple[str, str]:
    """One line about a node, as (kind, metadata and title or text, counts)."""
    kind = _KIND_LABELS[node.kind]
    meta = metadata_text(node.meta)
    meta = f" {meta}" if meta else ""
    if node.kind == NodeKind.PASSAGE:
        return f"#{node.id} {kind}{meta} {' '.join(node.text.split())}", ""
    title = node.description if node.kind == NodeKind.DOCUMENT else node.title
    title = " ".join(title.split()) or "(untitled)"
    count = f"{node.n_passages:,} passage{'s' if node.n_passages != 1 else ''}"
    return f"#{node.id} {kind}{meta} {title}", f"  ({count})"


def _fit(prefix: str, label: tuple[str, str], width: int) -> str:
    """`prefix` + label, the title part cut so that the line fits in `width` with its counts."""
    head, tail = label
    room = max(width - len(prefix) - len(tail), 12)
    if len(head) > room:
        head = head[: room - 1] + "…"
    line = prefix + head + tail
    return line if len(line) <= width else line[: max(width - 1, 1)] + "…"


def render_tree(tree: Tree, start: Node, depth: int, max_children: int, width: int,
                metadata: bool = False) -> list[str]:
    """The outline of `start` and `depth` levels below it, each line cut to `width`; with
    `metadata`, each node followed by a line of all its metadata."""
    label = _root_label(tree, start) if start.kind == NodeKind.ROOT else node_label(start)
    lines = [_fit("", label, width)]
    if metadata:
        _metadata_line(start, "   ", lines)
    _render_children(tree, start, "", depth, max_children, width, lines, metadata)
    return lines


def _metadata_line(node: Node, prefix: str, lines: list[str]) -> None:
    text = metadata_text(node.meta, everything=True)
    if text:  # in full: this line is what --metadata asks for
        lines.append(f"{prefix}· metadata {text}")


def _root_label(tree: Tree, root: Node) -> tuple[str, str]:
    counts = tree.counts
    title = root.title or tree.file.name
    return (f"#{root.id} root {title}", f"  ({counts.get('document', 0):,} documents, "
            f"{counts.get('passage', 0):,} passages)")


def _render_children(tree: Tree, node: Node, prefix: str, depth: int, max_children: int,
                     width: int, lines: list[str], metadata: bool = False) -> None:
    if depth <= 0 or node.kind == NodeKind.PASSAGE:
        return
    shown = tree.children(node.id, limit=max_children)
    hidden = tree.count_children(node.id) - len(shown)
    for index, child in enumerate(shown):
        last = index == len(shown) - 1 and not hidden
        lines.append(_fit(prefix + ("└─ " if last else "├─ "), node_label(child), width))
        inner = prefix + ("   " if last else "│  ")
        if metadata:
            _metadata_line(child, inner, lines)
        _render_children(tree, child, inner, depth - 1, max_children, width, lines, metadata)
    if hidden:
        lines.append(_fit(prefix + "└─ ", (f"… {hidden:,} more", ""), width))


def _run_tree(args: argparse.Namespace) -> int:
    width = shutil.get_terminal_size((120, 24)).columns
    with Tree.open(args.tree) as tree:
        start = _find(tree, args.node)
        for line in render_tree(tree, start, args.depth, args.max_children, width,
                                args.metadata):
            print(line)
    return 0


# -- stats ---------------------------------------------------------------------------------

def _register_stats(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "stats", help="counts of a tree file",
        description="Counts of a tree: nodes by kind and by depth, passages per document "
        "(min/median/max), file size and schema version.")
    parser.add_argument("tree", metavar="TREE", help="a tree file written by 'decisionrag build'")
    parser.add_argument("--json", action="store_true", help="print the numbers as one JSON object")
    parser.add_argument("--metadata", action="store_true",
                        help="also the documents' metadata keys: how many documents have each, its "
                        "values and ranges (what filters can test)")
    parser.set_defaults(func=_run_stats)


def tree_stats(tree: Tree) -> dict[str, Any]:
    """The numbers `decisionrag stats` shows."""
    sizes = tree.document_sizes()
    return {
        "file": str(tree.file),
        "file_bytes": tree.file.stat().st_size,
        "schema_version": tree.meta.get("schema_version"),
        "written_at": tree.meta.get("written_at"),
        "counts": tree.counts,
        "by_depth": {str(depth): kinds for depth, kinds in tree.kind_depth_counts().items()},
        "passages_per_document": {
            "min": min(sizes, default=0), "median": statistics.median(sizes) if sizes else 0,
            "max": max(sizes, default=0),
        },
    }


def _format_stats(stats: dict[str, Any]) -> list[str]:
    size_mb = stats["file_bytes"] / 1e6
    lines = [f"{stats['file']}: {size_mb:,.1f} MB, schema version {stats['schema_version']}, "
             f"written {stats['written_at']}",
             "nodes by kind: " + ", ".join(f"{kind} {n:,}" for kind, n in stats["counts"].items()),
             "nodes by depth:"]
    for depth, kinds in stats["by_depth"].items():
        lines.append(f"  {depth:>2}  " + ", ".join(f"{kind} {n:,}" for kind, n in kinds.items()))
    per_doc = stats["passages_per_document"]
    lines.append(f"passages per document: min {per_doc['min']:,}, median {per_doc['median']:,}, "
                 f"max {per_doc['max']:,}")
    return lines


def _format_metadata(metadata: dict[str, Any]) -> list[str]:
    if not metadata["summarised"]:
        return ["metadata: this tree file predates metadata summaries (rebuild or sync it to list them)"]
    if not metadata["keys"]:
        return ["metadata: none"]
    lines = [f"metadata keys (over {metadata['documents']:,} documents):"]
    for entry in metadata["keys"]:
        parts = [f"{entry['documents']:,} documents"]
        values = entry["values"]
        if values is None:
            parts.append(f"more than {metadata['max_values']} values")
        else:
            shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in values[:8])
            parts.append(f"values {shown}{', …' if len(values) > 8 else ''}")
        if entry["numbers"] is not None:
            parts.append(f"numbers {entry['numbers'][0]:g}–{entry['numbers'][1]:g}")
        lines.append(f"  {entry['key']}: " + "; ".join(parts))
    return lines


def _run_stats(args: argparse.Namespace) -> int:
    from .._app import metadata_keys

    with Tree.open(args.tree) as tree:
        stats = tree_stats(tree)
        if args.metadata:
            stats["metadata"] = metadata_keys(tree)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        lines = _format_stats(stats)
        if args.metadata:
            lines += _format_metadata(stats["metadata"])
        print("\n".join(lines))
    return 0
