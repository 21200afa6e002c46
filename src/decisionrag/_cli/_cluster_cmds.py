"""`decisionrag add` (new documents into an existing tree) and `decisionrag rebalance`.

`add_describe_arguments` and `describer_from_args` are shared with `build --cluster`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._errors import InputError


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    _register_add(subparsers)
    _register_rebalance(subparsers)


def add_describe_arguments(parser: argparse.ArgumentParser) -> None:
    """Options choosing how cluster groups are described (offline unless a model is named)."""
    group = parser.add_argument_group(
        "group descriptions",
        "By default every group is described offline by its distinctive terms and most typical "
        "titles. Name a model to have an OpenAI-compatible chat endpoint write one sentence per "
        "group instead (answers are cached, so an interrupted run resumes where it stopped).")
    group.add_argument("--describe-url", metavar="URL",
                       help="base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1 "
                       "(default: $OPENAI_BASE_URL when --describe-model is given)")
    group.add_argument("--describe-model", metavar="NAME",
                       help="chat model that writes the descriptions (enables the endpoint); "
                       "the API key, if any, is read from $OPENAI_API_KEY")
    group.add_argument("--describe-prompt", metavar="TEXT|@FILE",
                       help="instruction sent before the group's titles (default: the paper's "
                       "prompt); @FILE reads it from a file")
    group.add_argument("--describe-concurrency", type=_positive, default=8, metavar="N",
                       help="requests in flight at once (default 8)")
    group.add_argument("--cache-dir", metavar="DIR",
                       help="cache for embeddings and descriptions (default: "
                       "$DECISIONRAG_CACHE_DIR or ~/.cache/decisionrag)")


def describer_from_args(args: argparse.Namespace) -> Any:
    from .._cluster import make_describer

    prompt = args.describe_prompt
    if prompt and prompt.startswith("@"):
        try:
            prompt = Path(prompt[1:]).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"{prompt[1:]}: cannot read the prompt file ({exc.strerror})") from exc
    return make_describer(args.describe_url, args.describe_model, prompt=prompt,
                          concurrency=args.describe_concurrency, cache=args.cache_dir)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


# -- add -----------------------------------------------------------------------------------

def _register_add(subparsers: argparse._SubParsersAction[Any]) -> None:
    from .._build import FORMATS

    parser = subparsers.add_parser(
        "add", help="add documents to an existing tree",
        description="Add documents to an existing tree file. In a tree built with --cluster, "
        "each new document goes to the group whose centroid is nearest to its embedding (title "
        "and first sentence, same model as the clustering); nothing is re-clustered. Run "
        "`decisionrag rebalance` when groups have grown past their size bounds. A document "
        "already in the tree (same id, or same source file) is replaced in its place instead "
        "of being duplicated. The tree is replaced atomically: on an error nothing changes.")
    parser.add_argument("tree", metavar="TREE", help="the tree file to extend")
    parser.add_argument("sources", nargs="+", metavar="SRC",
                        help="files or folders with the new documents (as for `build`)")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="source format, as for `build` (default: by extension)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="embedding cache (default: $DECISIONRAG_CACHE_DIR or "
                        "~/.cache/decisionrag)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    parser.set_defaults(func=_run_add)


def _warn_skipped(file: str, reason: str) -> None:
    print(f"decisionrag: warning: skipped {file}: {reason}", file=sys.stderr)


def _run_add(args: argparse.Namespace) -> int:
    from .._app import add_sources, editing

    with editing(args.tree):  # the tree and its vectors published together, one writer at a time
        report = add_sources(args.tree, args.sources, format=args.format, cache=args.cache_dir,
                             progress=not args.quiet, on_skip=_warn_skipped)
        if report.added == 0 and not report.replaced:
            raise InputError(f"no documents found in {', '.join(args.sources)}; {args.tree} "
                             "unchanged")
        if not args.quiet:
            print(report.summary())
        _refresh_vectors(args.tree, args.quiet)
    return 0


def _refresh_vectors(tree: str, quiet: bool) -> None:
    """Bring every vector set stored beside `tree` in step with it (new passages encoded)."""
    from .._app._build import refresh_vectors

    for report in refresh_vectors(tree, progress=not quiet):
        if not quiet:
            print(report.summary())


# -- rebalance -----------------------------------------------------------------------------

def _register_rebalance(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "rebalance", help="split oversize and dissolve tiny cluster groups",
        description="Re-cluster the leaf groups of a clustered tree that have drifted past "
        "their size bounds (e.g. after `decisionrag add`): groups below --min-size are "
        "dissolved into their documents' nearest other groups, groups above --max-size are "
        "split in halves along their main direction until they fit, and the new parts are "
        "described. Other groups are left as they are. Prints which groups were split/merged.")
    parser.add_argument("tree", metavar="TREE", help="a tree file built with --cluster")
    parser.add_argument("--min-size", type=_positive, metavar="N",
                        help="smallest acceptable group (default: the bound used when the tree "
                        "was clustered, a fifth of the mean group size)")
    parser.add_argument("--max-size", type=_positive, metavar="N",
                        help="largest acceptable group (default: the bound used when the tree "
                        "was clustered, three times the mean group size)")
    add_describe_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    parser.set_defaults(func=_run_rebalance)


def _run_rebalance(args: argparse.Namespace) -> int:
    from .._app import editing
    from .._cluster import rebalance

    with editing(args.tree):
        report = rebalance(args.tree, min_size=args.min_size, max_size=args.max_size,
                           describer=describer_from_args(args), cache=args.cache_dir,
                           progress=not args.quiet)
        if not args.quiet:
            print(report.summary())
        _refresh_vectors(args.tree, args.quiet)
    return 0
