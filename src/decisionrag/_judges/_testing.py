"""Test doubles shipped with the package: a scripted judge and a simulated-latency judge."""

from __future__ import annotations

import asyncio
import math
import re
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .._errors import JudgeConfigError
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
from ._options import JudgeOptions

Scorer = Callable[[str, Candidate], float]
Scores = Mapping[str, float] | Scorer
R = TypeVar("R")

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

    computes_here = True  # answers at once: a walk has no wait to use

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



# asyncio's timers wake late by up to about a millisecond (epoll waits whole milliseconds,
# rounded up, and the kernel adds its slack: 0.7 ms a 0.2 s sleep, median, on a 2-core VM);
# an answer arriving on a socket wakes the loop at once. The simulated judge sleeps to this
# much before its deadline and yields the rest, so that a request takes its latency.
_TIMER_SLACK = 0.002

HOSTED_LIMITS = Limits(max_questions=None, max_options=255, max_tokens=64_000)  # like hosted Jev


def hashed_score(query: str, candidate: Candidate) -> float:
    """A deterministic pseudo-random P(yes) from (query, candidate id): costs about a
    microsecond, so the double's own CPU stays far below the latency it simulates."""
    return (zlib.crc32(f"{query}|{candidate.id}".encode()) % 1000) / 1000


class SimulatedJudge(ScriptedJudge):
    """A hosted judge seen from the client: every request takes `latency` seconds, its own
    compute included (the answer is computed first, then only the rest of `latency` is
    slept). Up to `concurrency` requests are served at once (asyncio sleep, like HTTP).

    Defaults model hosted Jev: no question limit, 64,000 tokens per request, and enough
    capacity for a whole level in flight; pass `limits` (or the ids' ``max_questions=N``,
    ``max_tokens=N``) to mimic a self-hosted server. Scores default to `hashed_score`.
    """

    computes_here = False  # it stands for a judge reached over the network

    def __init__(
        self,
        latency: float = 0.2,
        *,
        concurrency: int = 256,
        scores: Scores | None = None,
        limits: Limits | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(
            scores if scores is not None else hashed_score,
            limits=limits or HOSTED_LIMITS,
            name=name or f"simulated:latency={latency}",
        )
        self.latency = latency
        self._slots = asyncio.Semaphore(concurrency)

    async def _served(self, answer: Callable[[], Awaitable[R]]) -> tuple[R, float]:
        """`answer`, returned `latency` seconds after a serving slot was free (or later, if
        computing it took longer); and the seconds since the request was made."""
        start = time.perf_counter()
        async with self._slots:
            deadline = time.perf_counter() + self.latency
            await asyncio.sleep(0)  # requests sent together start their clocks together
            result = await answer()
            await asyncio.sleep(max(0.0, deadline - time.perf_counter() - _TIMER_SLACK))
            while time.perf_counter() < deadline:  # the last stretch yielded away, not slept
                await asyncio.sleep(0)
        return result, time.perf_counter() - start

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        result, seconds = await self._served(lambda: ScriptedJudge.binary(self, request))
        result.usage.seconds = seconds
        return result

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        result, seconds = await self._served(lambda: ScriptedJudge.choice(self, request))
        result.usage.seconds = seconds
        return result


# ---------------------------------------------------------------- factories (`scripted`, `simulated`)


def scripted_judge(model: str, **options: Any) -> Judge:
    """``scripted``: keyword options are `ScriptedJudge`'s."""
    return ScriptedJudge(**options)


@dataclass(frozen=True)
class SimulatedOptions(JudgeOptions):
    """What a ``simulated:…`` id may set (``simulated:latency=0.2,concurrency=8``)."""

    latency: float = 0.2
    concurrency: int | None = None
    max_questions: int | None = None
    max_tokens: int | None = None


def simulated_judge(model: str, **options: Any) -> Judge:
    """``simulated:latency=0.2,concurrency=N,max_questions=N,max_tokens=N``; keyword options
    are `SimulatedJudge`'s (an id's settings do not override them)."""
    who = "simulated judge"
    given = SimulatedOptions.parse(parse_id_options(model), who)
    if not 0.0 <= given.latency < math.inf:
        raise JudgeConfigError(f"{who}: latency={given.latency!r} is not a number of seconds")
    for name in ("concurrency", "max_questions", "max_tokens"):
        value = getattr(given, name)
        if name in given.given and (value is None or value <= 0):
            raise JudgeConfigError(f"{who}: {name}={value!r} is not a positive integer")
    if given.concurrency is not None:
        options.setdefault("concurrency", given.concurrency)
    if {"max_questions", "max_tokens"} & given.given:
        options.setdefault("limits", Limits(
            max_questions=given.max_questions,
            max_tokens=given.chosen("max_tokens", HOSTED_LIMITS.max_tokens),
        ))
    return SimulatedJudge(given.latency, **options)


def parse_id_options(text: str) -> dict[str, str]:
    """``latency=0.2,concurrency=8`` -> {"latency": "0.2", "concurrency": "8"}."""
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise JudgeConfigError(f"judge option {part!r} is not of the form name=value")
        options[key.strip()] = value.strip()
    return options
