"""`make demo`: build a tree from a real corpus that every Python install has, then ask it.

The corpus is the Python language reference's help topics (the stdlib module
``pydoc_data.topics``: about 80 pages such as "try", "exceptions", "for", "class"). They are
written as text files under ``out/demo/topics/``, built once into ``out/demo/pydoc.tree``,
and the question is answered by the offline embedded judge through the same code as
``decisionrag ask --trace``.

    python -m decisionrag.demo ["your question"] [--judge ID] [--preset NAME] [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ._errors import DecisionRAGError

_SUMMARY = "Build a tree of Python's help topics (once), then answer a question with it."
# A question the offline judge answers (break.txt: "It terminates the nearest enclosing
# loop"; tests/test_demo.py checks it). It does not answer "How do I catch several
# exceptions in one except clause?": docs/embedded-judge.md, "Known limits", says why.
DEFAULT_QUESTION = "How do I leave a loop early?"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def write_topics(folder: Path) -> int:
    """One .txt file per help topic (named after the topic); returns how many were written."""
    from pydoc_data.topics import topics

    folder.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(topics.items()):
        (folder / f"{_UNSAFE.sub('-', name)}.txt").write_text(text, encoding="utf-8")
    return len(topics)


def ensure_tree(out: Path) -> Path:
    """Build the demo tree (and its vectors) once; later runs reuse it."""
    from ._app import build_tree
    from ._build import BuildReport
    from ._build._vectors import store_vectors
    from ._tree._vectors import available_sets

    tree = out / "pydoc.tree"
    if tree.is_file():
        print(f"Using the tree built earlier: {tree}")
    else:
        topics = out / "topics"
        count = write_topics(topics)
        started = time.perf_counter()
        report = build_tree([topics], tree, format="text", vectors=False, progress=True)
        counts = report.counts
        print(f"Built {tree} from {count} Python help topics in "
              f"{time.perf_counter() - started:.1f} s: {counts.get('document', 0)} pages, "
              f"{counts.get('passage', 0)} passages")
    if not available_sets(tree):
        report = BuildReport(path=tree)
        store_vectors(report, required=False, progress=True)
        if report.vectors is not None:
            print(f"Stored the node vectors in {report.vectors.seconds:.1f} s "
                  f"({report.vectors.passages} passages)")
        elif report.vectors_note:
            print(f"Note: {report.vectors_note}")
    return tree


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m decisionrag.demo", description=_SUMMARY,
                                     allow_abbrev=False)
    parser.add_argument("question", nargs="?", default=DEFAULT_QUESTION)
    parser.add_argument("--judge", default="embedded", help="judge id (default: embedded, offline)")
    parser.add_argument("--preset", default="auto")
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    args = parser.parse_args(argv)
    from ._app import ask, print_result

    try:
        tree = ensure_tree(args.out)
        print(f"\nQuestion: {args.question}\n")
        result = ask(tree, args.question, judge_id=args.judge, preset=args.preset, k=5)
    except DecisionRAGError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    print_result(result, trace=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
