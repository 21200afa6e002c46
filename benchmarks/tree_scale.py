"""Tree-store scale benchmark: write and query a Natural-Questions-sized synthetic tree.

    python benchmarks/tree_scale.py                      # 108,626 docs, 2.68 M passages
    python benchmarks/tree_scale.py --docs 10000 --passages 250000

Reports generation and write time separately (time inside the synthetic generator vs. inside
TreeWriter.add_document + commit; the end-to-end time too), build throughput in wall time and
in CPU time (the number that does not depend on other jobs on the machine), and,
from a separate process that only opens and queries the finished file: time to open, median
times of children lookups (the root's; a document's), of a document's passages and of a
lookup by key, and that process's peak RSS (VmHWM; getrusage off Linux).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from decisionrag import NodeKind, Tree, TreeWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

NQ_DOCUMENTS = 108_626
NQ_PASSAGES = 2_680_000


def build(out: Path, n_docs: int, n_passages: int, seed: int, groups: int) -> dict[str, float]:
    from _synthetic import synthetic_documents  # numpy stays out of the query process

    generate = generate_cpu = write = 0.0
    n_written = 0
    documents = synthetic_documents(n_docs, n_passages, seed)
    start, start_cpu = time.perf_counter(), time.process_time()
    with TreeWriter(out) as writer:
        while True:
            t0, c0 = time.perf_counter(), time.thread_time()
            spec = next(documents, None)
            t1 = time.perf_counter()
            generate, generate_cpu = generate + t1 - t0, generate_cpu + time.thread_time() - c0
            if spec is None:
                break
            if groups:  # round-robin: every group gets documents from the whole corpus
                spec.groups = (f"group {n_written % groups}",)
            n_written += 1
            writer.add_document(spec)
            write += time.perf_counter() - t1
        t2 = time.perf_counter()
    end = time.perf_counter()
    # the writing's CPU time: the process's (all threads) minus the main thread's inside the
    # generator (numpy may use helper threads; they only run inside the generator)
    write_cpu = time.process_time() - start_cpu - generate_cpu
    commit = end - t2
    return {"generate_s": generate, "add_s": write, "commit_s": commit,
            "total_s": end - start, "write_s": write + commit,
            "passages_per_s": n_passages / (write + commit),
            "passages_per_total_s": n_passages / (end - start),
            "write_cpu_s": write_cpu, "passages_per_cpu_s": n_passages / write_cpu,
            "file_mb": out.stat().st_size / 1e6}


def _median_ms(fn: object, args: list[object]) -> float:
    times = []
    for arg in args:
        t0 = time.perf_counter()
        fn(arg)  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def query(path: Path, repeats: int, seed: int) -> dict[str, float]:
    """Runs in its own process: open the tree and query it; nothing else is loaded."""
    t0 = time.perf_counter()
    tree = Tree.open(path)
    open_s = time.perf_counter() - t0
    n_docs = tree.counts["document"]
    rng = random.Random(seed)
    root_children = tree.children(tree.root.id)
    groups = [node.id for node in root_children if node.kind == NodeKind.GROUP]
    documents = [node.id for node in root_children if node.kind == NodeKind.DOCUMENT]
    for group in groups[:50]:
        documents += [node.id for node in tree.children(group)]
    doc_ids = [documents[rng.randrange(len(documents))] for _ in range(repeats)]
    doc_keys = [tree.node(i).key for i in doc_ids]
    result = {
        "open_s": open_s,
        "root_children_ms": _median_ms(tree.children, [tree.root.id] * max(3, repeats // 20)),
        "group_children_ms": _median_ms(tree.children, [rng.choice(groups) for _ in
                                                        range(repeats)]) if groups else None,
        "doc_children_ms": _median_ms(tree.children, doc_ids),
        "doc_passages_ms": _median_ms(tree.passages, doc_ids),
        "node_by_key_ms": _median_ms(tree.node, doc_keys),
        "root_children": len(root_children),
        "documents": n_docs,
    }
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f} ms"


def _table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| measure | value | target |", "|---|---:|---|"]
    lines += [f"| {name} | {value} | {target} |" for name, value, target in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=NQ_DOCUMENTS)
    parser.add_argument("--passages", type=int, default=NQ_PASSAGES)
    parser.add_argument("--out", type=Path,
                        default=Path(tempfile.gettempdir()) / "decisionrag-tree-scale.tree")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--groups", type=int, default=0,
                        help="put the documents into this many groups under the root (0: flat)")
    parser.add_argument("--repeats", type=int, default=200, help="lookups per measure")
    parser.add_argument("--keep", action="store_true", help="keep the tree file afterwards")
    parser.add_argument("--query", type=Path, help=argparse.SUPPRESS)  # the query process
    args = parser.parse_args()
    if args.query:
        print(json.dumps(query(args.query, args.repeats, args.seed)))
        return
    built = build(args.out, args.docs, args.passages, args.seed, args.groups)
    child = subprocess.run([sys.executable, __file__, "--query", str(args.out),
                            "--repeats", str(args.repeats)], capture_output=True, text=True,
                           check=True)
    queried = json.loads(child.stdout)
    if not args.keep:
        args.out.unlink()
    print(f"{args.docs:,} documents, {args.passages:,} passages ({queried['root_children']:,} "
          f"children under the root), file {built['file_mb']:,.0f} MB")
    print(_table([
        ("generation (synthetic corpus)", f"{built['generate_s']:.1f} s", ""),
        ("write: add_document", f"{built['add_s']:.1f} s", ""),
        ("write: commit (counts, indexes, ANALYZE)", f"{built['commit_s']:.1f} s", ""),
        ("generation + write, end to end", f"{built['total_s']:.1f} s", ""),
        ("build throughput (write wall time)",
         f"{built['passages_per_s']:,.0f} passages/s", "≥ 100,000"),
        ("build throughput (wall, end to end incl. generation)",
         f"{built['passages_per_total_s']:,.0f} passages/s", ""),
        ("build throughput (write CPU time)",
         f"{built['passages_per_cpu_s']:,.0f} passages/s", "≥ 100,000"),
        ("open the tree", f"{queried['open_s'] * 1e3:.1f} ms", "< 200 ms"),
        ("children of the root (median)", f"{queried['root_children_ms']:.1f} ms", ""),
        ("children of a group (median)", _ms(queried["group_children_ms"]), ""),
        ("children of a document (median)", f"{queried['doc_children_ms']:.3f} ms", ""),
        ("passages of a document (median)", f"{queried['doc_passages_ms']:.3f} ms", ""),
        ("node by key (median)", f"{queried['node_by_key_ms']:.3f} ms", ""),
        ("peak RSS of the query process", f"{queried['peak_rss_mb']:.0f} MB", "< 200 MB"),
    ]))


if __name__ == "__main__":
    main()
