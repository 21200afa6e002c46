"""The `decisionrag` command: a thin shell over the Python API."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from .._errors import DeadlineExceeded, DecisionRAGError
from ._terminal import SafeStream, printable

# each module defines register(subparsers); its commands set `func(args) -> int`
_COMMAND_MODULES = ("_tree_cmds", "_cluster_cmds", "_edit_cmds", "_ask", "_answer", "_eval",
                    "_judge_cmds", "_serve_cmds", "_model_cmds")


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


def _plain_warning(message: Warning | str, category: type[Warning], filename: str,
                   lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """A Python warning as one plain line: what it says, not the source line that said it."""
    text = " ".join(str(message).split())
    print(printable(f"decisionrag: warning: {text}"), file=file or sys.stderr)


class _Outcome:
    deadline_passed = False  # the command failed because its deadline passed


def main(argv: Sequence[str] | None = None) -> int:
    """The command (`argv`, else the process's own arguments); its exit status. Run as the
    program (no `argv`), a command whose deadline passed ends the process at once: work it
    abandoned (a judge still embedding on a worker thread) is not waited for."""
    out = sys.stdout  # stderr stays raw: progress bars draw there with \r
    sys.stdout = SafeStream(out)
    shown: Any = warnings.showwarning
    warnings.showwarning = _plain_warning
    _Outcome.deadline_passed = False
    try:
        code = _main(argv)
    finally:
        sys.stdout = out
        warnings.showwarning = shown
    if argv is None and _Outcome.deadline_passed:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # nothing is being written: a query only read, and has failed
    return code


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
        _Outcome.deadline_passed = isinstance(exc, DeadlineExceeded)
        return 2
    except KeyboardInterrupt:
        print("decisionrag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
