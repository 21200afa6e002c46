"""Progress of long steps, on stderr: one display per step, the same for every command.

A step (`Step`) is one thing a person waits for — a build's parsing, vectors, clustering and
writing; an eval's tree and each system's queries. On a terminal it is one line redrawn in
place, at most ten times a second, with the count, the share done and, where the total is
known, the time left::

    vectors  1,200/2,481 passages  48%  31s, about 33s left

Anywhere else (a log file, a pipe) redraws would pile up, so a plain line is written every
`interval` seconds (5 by default, ``$DECISIONRAG_PROGRESS_SECONDS``) and one when the step
ends::

    decisionrag: vectors: 2,481 passages in 64.2s

Other libraries' bars (sentence-transformers' "Batches", Hugging Face's downloads and loads)
are silenced by `silence_other_bars`; decisionrag's steps are the only progress shown.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TextIO

DEFAULT_INTERVAL = 5.0  # seconds between plain lines when stderr is not a terminal
REDRAW_EVERY = 0.1  # seconds between redraws on a terminal
INTERVAL_ENV = "DECISIONRAG_PROGRESS_SECONDS"


def plain_interval() -> float:
    """Seconds between plain lines: $DECISIONRAG_PROGRESS_SECONDS, else `DEFAULT_INTERVAL`."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def silence_other_bars() -> None:
    """No progress bars from the libraries decisionrag drives (Hugging Face hub downloads,
    transformers' weight loading); sentence-transformers' are turned off per call."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    transformers_logging = sys.modules.get("transformers.utils.logging")
    if transformers_logging is not None:
        transformers_logging.disable_progress_bar()


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"
    minutes, seconds = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _amount(value: float, unit: str) -> str:
    if unit == "B":
        for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if value >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B"
    return f"{value:,.0f}"


class Step:
    """One long step's display; a context manager. `total` (None: unknown) and `unit`
    ("B" counts bytes) shape the line; `advance(n)` counts work done; `note(text)` says
    which phase the step is in. Disabled (`enabled=False`), it shows nothing. Safe to
    advance from several threads."""

    def __init__(self, label: str, total: float | None = None, unit: str = "", *,
                 enabled: bool = True, stream: TextIO | None = None,
                 interval: float | None = None) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval if interval is not None else plain_interval()
        self.done = 0.0
        self.cost = 0.0  # work done, where items differ in cost (`expect`)
        self.expected_cost = 0.0
        self.phase = ""
        self.started = time.monotonic()
        self._last = -math.inf
        self._lock = threading.Lock()
        self._closed = False
        self._drawn = False
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())

    def __enter__(self) -> Step:
        self.started = time.monotonic()
        if self.enabled and self.terminal:
            self._draw(time.monotonic())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(failed=exc_type is not None)

    def expect(self, cost: float) -> None:
        """Work of unequal items ahead (e.g. characters to embed, longest texts first): the
        time left is then estimated from the cost done, not the count."""
        with self._lock:
            self.expected_cost += cost

    def advance(self, n: float = 1, cost: float = 0.0) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += n
            self.cost += cost
            self._maybe_show()

    def note(self, phase: str) -> None:
        """The phase the step is in now (shown after its label)."""
        if not self.enabled:
            return
        with self._lock:
            self.phase = phase
            self._maybe_show(force=self.terminal)

    def _maybe_show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.terminal:
            if force or now - self._last >= REDRAW_EVERY:
                self._draw(now)
        elif now - self.started >= self.interval * 0.999 and now - self._last >= self.interval:
            self.stream.write(f"decisionrag: {self.line(now)}\n")
            self.stream.flush()
            self._last = now

    def _draw(self, now: float) -> None:
        self.stream.write(f"\r{self.line(now)}\x1b[K")
        self.stream.flush()
        self._last = now
        self._drawn = True

    def line(self, now: float | None = None) -> str:
        """The step's state in one line: label, phase, count, share, time, time left."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        parts = [self.label + (f" ({self.phase})" if self.phase else "")]
        unit = f" {self.unit}" if self.unit and self.unit != "B" else ""
        if self.total:
            parts.append(f"{_amount(self.done, self.unit)}/{_amount(self.total, self.unit)}{unit}")
            share = min(1.0, self.done / self.total)
            parts.append(f"{share:.0%}")
            timing = _seconds(elapsed)
            if self.expected_cost:
                share = min(1.0, self.cost / self.expected_cost)
            if 0 < share < 1 and elapsed >= 1:
                timing += f", about {_seconds(elapsed * (1 - share) / share)} left"
            parts.append(timing)
        else:
            if self.done:
                parts.append(f"{_amount(self.done, self.unit)}{unit}")
            parts.append(_seconds(elapsed))
        return "  ".join(parts)

    def close(self, failed: bool = False) -> None:
        """End the step: on a terminal the line is cleared (or left, with a newline, when
        the step failed: what was done shows above the error); elsewhere one last line."""
        with self._lock:
            if self._closed or not self.enabled:
                self._closed = True
                return
            self._closed = True
            elapsed = time.monotonic() - self.started
            if self.terminal:
                if self._drawn:
                    self.stream.write("\n" if failed else "\r\x1b[K")
            else:
                unit = f" {self.unit}" if self.unit and self.unit != "B" else ""
                count = f"{_amount(self.done, self.unit)}{unit} " if self.done else ""
                ending = "stopped after" if failed else ("in" if count else "done in")
                self.stream.write(f"decisionrag: {self.label}: {count}{ending} "
                                  f"{_seconds(elapsed)}\n")
            self.stream.flush()


def step(label: str, total: float | None = None, unit: str = "", *, enabled: bool = True,
         stream: TextIO | None = None) -> Step:
    """A `Step` (see the module's docstring)."""
    return Step(label, total, unit, enabled=enabled, stream=stream)


def quiet() -> Step:
    """A disabled step, for code that advances one whether or not it is shown."""
    return Step("", enabled=False)


@contextlib.contextmanager
def within(progress: bool | Step | None, label: str, total: float | None = None,
           unit: str = "") -> Iterator[Step]:
    """The step to advance: `progress` itself when it is a `Step` (the caller's display,
    left open), else a step of its own, shown when `progress` is true, closed at the end."""
    if isinstance(progress, Step):
        yield progress
        return
    with Step(label, total, unit, enabled=bool(progress)) as own:
        yield own


__all__ = ["Step", "plain_interval", "quiet", "silence_other_bars", "step", "within"]
