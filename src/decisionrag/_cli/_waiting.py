"""A line on stderr while a judge is slow, so that a long wait is never a silent one."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

from .._deadline import QueryDeadline

DEFAULT_NOTICE_AFTER = 5.0  # seconds without an answer before the first line


@contextlib.contextmanager
def notice_when_slow(scope: QueryDeadline, after: float = DEFAULT_NOTICE_AFTER,
                     out: TextIO | None = None) -> Iterator[None]:
    """While the block runs, print a line after `after` seconds and every `after` seconds
    more: how long it has waited, how long it may still wait, retries and the last problem."""
    stream = out or sys.stderr
    done = threading.Event()

    def watch() -> None:
        while not done.wait(after):
            stream.write(_line(scope) + "\n")
            stream.flush()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1.0)


def _line(scope: QueryDeadline) -> str:
    parts = [f"decisionrag: still waiting for the judge after {scope.elapsed():.0f}s"]
    if scope.seconds is not None:
        parts.append(f"deadline in {max(0.0, scope.remaining()):.0f}s")
    if scope.retries:
        parts.append(f"{scope.retries} retr{'y' if scope.retries == 1 else 'ies'}")
    line = ", ".join(parts)
    if scope.problems:
        line += f"; last problem: {scope.problems[-1]}"
    return line
