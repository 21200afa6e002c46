"""Test doubles shipped with the package: a scripted judge and a simulated-latency judge."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping

from ._base import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    Usage,
    estimate_tokens,
)

Scorer = Callable[[str, Candidate], float]
Scores = Mapping[str, float] | Scorer

_WORD = re.compile(r"\w+")


def overlap_score(query: str, candidate: Candidate) -> float:
    """Share of the query's distinct words found in the candidate text (deterministic)."""
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 2}
    if not words:
        return 0.0
    text = {w.lower() for w in _WORD.findall(candidate.text)}
    return len(words & text) / len(words)


def _score(scores: Scores, default: float, query: str, candidate: Candidate) -> float:
    if callable(scores):
        return float(scores(query, candidate))
    return float(scores.get(candidate.id, default))


class ScriptedJudge(Judge):
    """A judge whose answers are given in advance: by candidate id, or by a function.

    Every request is recorded in `calls`, so tests can check exactly what was asked.
    Choice answers come from `choice_scores` (normalised), else from the binary scores.
    """

    def __init__(
        self,
        scores: Scores | None = None,
        *,
        default: float = 0.0,
        choice_scores: Scores | None = None,
        limits: Limits | None = None,
        name: str = "scripted",
    ) -> None:
        self.scores: Scores = scores if scores is not None else overlap_score
        self.default = default
        self.choice_scores = choice_scores
        self.limits = limits or Limits(max_questions=None, max_options=255, max_tokens=None)
        self.name = name
        self.calls: list[BinaryRequest | ChoiceRequest] = []

    def _usage(self, text: str) -> Usage:
        tokens = estimate_tokens(text)
        return Usage(requests=1, input_tokens=tokens, cost_usd=self.cost(tokens))

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        self.calls.append(request)
        probabilities = [
            min(1.0, max(0.0, _score(self.scores, self.default, request.query, c)))
            for c in request.candidates
        ]
        return BinaryResult(probabilities, self._usage(request.context + "".join(request.questions)))

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        self.calls.append(request)
        source = self.choice_scores if self.choice_scores is not None else self.scores
        weights = [max(0.0, _score(source, self.default, request.query, c)) for c in request.candidates]
        total = sum(weights)
        if total <= 0:
            probabilities = [1.0 / len(weights)] * len(weights)
        else:
            probabilities = [w / total for w in weights]
        return ChoiceResult(probabilities, self._usage(request.context + request.question))

    @property
    def binary_calls(self) -> list[BinaryRequest]:
        return [c for c in self.calls if isinstance(c, BinaryRequest)]

    @property
    def choice_calls(self) -> list[ChoiceRequest]:
        return [c for c in self.calls if isinstance(c, ChoiceRequest)]


class SimulatedJudge(ScriptedJudge):
    """A scripted judge that takes `latency` seconds per request, for performance work.

    Requests overlap like real HTTP requests do (asyncio sleep), up to `concurrency` at once.
    """

    def __init__(
        self,
        latency: float = 0.2,
        *,
        concurrency: int = 64,
        scores: Scores | None = None,
        limits: Limits | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(scores, limits=limits or Limits(max_questions=64, max_tokens=64_000),
                         name=name or f"simulated:latency={latency}")
        self.latency = latency
        self._slots = asyncio.Semaphore(concurrency)

    async def _wait(self) -> float:
        start = time.perf_counter()
        async with self._slots:
            await asyncio.sleep(self.latency)
        return time.perf_counter() - start

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        seconds = await self._wait()
        result = await super().binary(request)
        result.usage.seconds = seconds
        return result

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        seconds = await self._wait()
        result = await super().choice(request)
        result.usage.seconds = seconds
        return result
