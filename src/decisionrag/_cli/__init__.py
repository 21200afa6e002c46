"""The `decisionrag` command: a thin shell over the Python API."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .._errors import DecisionRAGError
from ._terminal import SafeStream, printable

# each module defines register(subparsers); its commands set `func(args) -> int`
_COMMAND_MODULES = ("_tree_cmds", "_cluster_cmds", "_edit_cmds", "_ask", "_answer", "_eval",
                    "_judge_cmds", "_serve_cmds")


class _Parser(argparse.ArgumentParser):
    """Flags are never abbreviated (`--state` must not be read as `--state-dir`): every
    command's parser is of this class, since subparsers take their parent's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="decisionrag",
        description="Retriever-free retrieval: build a tree of your documents, then let a "
        "decision model walk it to find the passages that answer a question.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(subparsers)
    return parser


def _version() -> str:
    from .._version import __version__

    return __version__


def _exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that writers still remove their temporary files."""

    def _exit(signum: int, _frame: object) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def main(argv: Sequence[str] | None = None) -> int:
    out = sys.stdout  # stderr stays raw: progress bars draw there with \r
    sys.stdout = SafeStream(out)
    try:
        return _main(argv)
    finally:
        sys.stdout = out


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    _exit_on_sigterm()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except DecisionRAGError as exc:
        print(printable(f"decisionrag: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("decisionrag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
