"""Pacing a slow self-hosted server: calls sized to what it answers in time.

A System One server on a small CPU (``transformers serve`` on two cores) may take a minute for
one call of 48 questions: it reads the context once per question. The request timeout then
cuts the call, the retries repeat it, and the walk fails although every question alone
would have been answered. `Pacer` learns the server's speed from the calls it answers
(seconds per question-with-its-context, estimated tokens) and sizes the calls of a request
so that each should take at most `seconds`; calls it had to make smaller than the request
are sent one after another, so none waits behind its siblings on a server that works on one
at a time. The first request of more than `PROBE` questions sends a probe of `PROBE`
questions first, so that even the first large request is sized from a measurement.
A fast server is never slowed: its calls stay as large as the limits allow. Pacing is asked
for (``jev-compatible:URL`` with ``seconds_per_call=S``): the probe is one more round trip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._base import estimate_tokens

PROBE = 4  # questions of the first call, when nothing is known of the server's speed yet


class Pacer:
    """Call sizes for a server, from its measured speed; `seconds`: what one call should take."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.rate: float | None = None  # seconds per token of (context + question), per question

    @staticmethod
    def units(context: str, questions: Sequence[str]) -> int:
        """Tokens a server reads for `questions` when it reads the context once per question."""
        return sum(estimate_tokens(context) + estimate_tokens(q) for q in questions)

    def size(self, context: str, questions: Sequence[str], cap: int) -> tuple[int, bool]:
        """How many of `questions` the next call takes (at most `cap`), and whether that is
        fewer than the limits alone would send (the call is paced)."""
        most = min(cap, len(questions))
        if self.rate is None:
            return (PROBE, True) if most > PROBE else (most, False)
        per_question = self.rate * self.units(context, questions[:most]) / most
        fits = max(1, math.floor(self.seconds / per_question)) if per_question > 0 else most
        return (fits, True) if fits < most else (most, False)

    def observe(self, context: str, questions: Sequence[str], seconds: float) -> None:
        units = self.units(context, questions)
        if units <= 0 or seconds <= 0:
            return
        rate = seconds / units
        self.rate = rate if self.rate is None else 0.5 * self.rate + 0.5 * rate

    def predicted(self, context: str, questions: Sequence[str]) -> float | None:
        return None if self.rate is None else self.rate * self.units(context, questions)
