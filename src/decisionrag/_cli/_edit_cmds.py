"""`decisionrag remove` and `decisionrag sync`: documents changed or deleted in place."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    _register_remove(subparsers)
    _register_sync(subparsers)


def _register_remove(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "remove", help="remove documents from a tree",
        description="Remove documents (with their sections and passages) from a tree by their "
        "ids (`doc_id` for JSONL, the relative file path for files: see `decisionrag tree`). "
        "Groups left empty are removed too. The tree is replaced atomically; if any id is "
        "not in the tree, nothing changes.")
    parser.add_argument("tree", metavar="TREE", help="the tree file to change")
    parser.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="documents to remove")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    parser.set_defaults(func=_run_remove)


def _run_remove(args: argparse.Namespace) -> int:
    from .._app import editing, remove_documents
    from ._cluster_cmds import _refresh_vectors

    with editing(args.tree):  # the tree and its vectors published together
        report = remove_documents(args.tree, args.doc_ids)
        if not args.quiet:
            print(f"removed {len(report.removed):,} documents from {args.tree}"
                  + (f" ({report.removed_groups} groups left empty removed)"
                     if report.removed_groups else ""))
        _refresh_vectors(args.tree, args.quiet)
    return 0


def _register_sync(subparsers: argparse._SubParsersAction[Any]) -> None:
    from .._build import FORMATS

    parser = subparsers.add_parser(
        "sync", help="bring a tree in step with its source files",
        description="Read SRC as `decisionrag build` reads it (same document ids) and change "
        "the tree to match: new documents are added (to the nearest group in a clustered "
        "tree), documents whose content hash changed (title, passages, headings, metadata) "
        "are replaced in place, and documents no longer in SRC are removed. One atomic write: "
        "on an error nothing changes. Give SRC exactly as it was given to `build` (the "
        "`source` metadata records the path).")
    parser.add_argument("tree", metavar="TREE", help="the tree file to change")
    parser.add_argument("sources", nargs="+", metavar="SRC", help="files or folders, as for build")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="source format, as for `build` (default: by extension)")
    parser.add_argument("--dry-run", action="store_true",
                        help="only list what would be added, changed and removed")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="embedding cache for placing new documents in a clustered tree")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    parser.set_defaults(func=_run_sync)


def _warn_skipped(file: str, reason: str) -> None:
    print(f"decisionrag: warning: skipped {file}: {reason}", file=sys.stderr)


def _run_sync(args: argparse.Namespace) -> int:
    import contextlib

    from .._app import editing, sync_sources
    from ._cluster_cmds import _refresh_vectors

    with contextlib.nullcontext() if args.dry_run else editing(args.tree):
        report = sync_sources(args.tree, args.sources, format=args.format, cache=args.cache_dir,
                              dry_run=args.dry_run, on_skip=_warn_skipped,
                              progress=not args.quiet)
        if not args.dry_run:
            _refresh_vectors(args.tree, args.quiet)
    if args.quiet:
        return 0
    for label, keys in (("added", report.added), ("changed", report.changed),
                        ("removed", report.removed)):
        for key in keys[:20]:
            print(f"  {label:<8}{key}")
        if len(keys) > 20:
            print(f"  {label:<8}… {len(keys) - 20:,} more")
    print(report.summary())
    return 0
