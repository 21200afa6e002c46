"""A line on stderr while a judge is slow, so that a long wait is never a silent one."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

from .._deadline import QueryDeadline

DEFAULT_NOTICE_AFTER = 5.0  # seconds without an answer before the first line
_POLL = 0.25  # how often the watcher looks at the clock


@contextlib.contextmanager
def notice_when_slow(scope: QueryDeadline, after: float = DEFAULT_NOTICE_AFTER,
                     out: TextIO | None = None, what: str = "the judge") -> Iterator[None]:
    """While the block runs, print a line once the judge has been waited for `after`
    seconds, and every `after` seconds more: how long, how long it may still wait, retries
    and the last problem. The wait counts from the first request (`QueryDeadline.waited`):
    opening the tree and loading a model are not waiting for the judge. `what` names what
    is waited for ("the judge or the answer model" while `answer` runs)."""
    stream = out or sys.stderr
    done = threading.Event()

    def watch() -> None:
        notices = 0
        while not done.wait(min(_POLL, after)):
            waited = scope.waited()
            if waited is not None and waited >= after * (notices + 1):
                notices = int(waited // after)
                stream.write(_line(scope, waited, what) + "\n")
                stream.flush()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1.0)


def _line(scope: QueryDeadline, waited: float, what: str = "the judge") -> str:
    parts = [f"decisionrag: still waiting for {what} after {waited:.0f}s"]
    if scope.seconds is not None:
        parts.append(f"deadline in {max(0.0, scope.remaining()):.0f}s")
    if scope.retries:
        parts.append(f"{scope.retries} retr{'y' if scope.retries == 1 else 'ies'}")
    line = ", ".join(parts)
    if scope.problems:
        line += f"; last problem: {scope.problems[-1]}"
    return line
