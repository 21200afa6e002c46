"""The bound on judge requests in flight, its queue, and what each HTTP request spent.

Every request the server sends to its judge passes `JudgeGate.slot()`: at most
`max_judge_requests` are in flight; later ones wait in a queue of at most
`max_judge_queue`; past that the server is busy (503 + Retry-After). `GatedJudge` wraps the
configured judge with the gate, the metrics and the per-request `Ledger` (what was done
when a deadline cuts a request short).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .._judges import BinaryRequest, BinaryResult, ChoiceRequest, ChoiceResult, Judge, JudgeWrapper
from ._errors import ServeError
from ._metrics import Metrics


@dataclass(slots=True)
class Ledger:
    """The judge work of one HTTP request so far."""

    binary_requests: int = 0
    choice_requests: int = 0
    questions: int = 0
    input_tokens: int = 0
    failed_requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge_requests": self.binary_requests + self.choice_requests,
            "binary_requests": self.binary_requests,
            "choice_requests": self.choice_requests,
            "questions_judged": self.questions,
            "input_tokens": self.input_tokens,
            "failed_requests": self.failed_requests,
        }


LEDGER: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar("decisionrag_ledger", default=None)


class JudgeGate:
    def __init__(self, max_in_flight: int, max_queue: int, metrics: Metrics) -> None:
        self.max_in_flight = max_in_flight
        self.max_queue = max_queue
        self.metrics = metrics
        self.active = 0
        self.waiting = 0
        self._slots: asyncio.Semaphore | None = None
        self._mean_seconds = 0.2  # moving average of a judge request's latency

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        return self._slots

    @property
    def full(self) -> bool:
        return self.active >= self.max_in_flight and self.waiting >= self.max_queue

    def busy(self) -> ServeError:
        """The 503 for a full queue; Retry-After from the queue length and the mean latency."""
        rounds = (self.waiting + self.active) / self.max_in_flight
        retry = max(1, math.ceil(rounds * self._mean_seconds))
        self.metrics.busy.inc()
        return ServeError(
            503, "server_busy",
            f"the judge queue is full ({self.active} requests in flight, {self.waiting} waiting); "
            f"retry in {retry} s",
            headers={"Retry-After": str(retry)},
        )

    def admit(self) -> None:
        """Turn a new HTTP request away at once when the queue is already full."""
        if self.full:
            raise self.busy()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        slots = self._semaphore()
        if self.active >= self.max_in_flight or self.waiting:
            if self.waiting >= self.max_queue:
                raise self.busy()
            self.waiting += 1
            self.metrics.judge_queue.set(self.waiting)
            try:
                await slots.acquire()
            finally:
                self.waiting -= 1
                self.metrics.judge_queue.set(self.waiting)
        else:
            await slots.acquire()
        self.active += 1
        self.metrics.judge_in_flight.set(self.active)
        start = time.perf_counter()
        try:
            yield
        finally:
            self._mean_seconds = 0.9 * self._mean_seconds + 0.1 * (time.perf_counter() - start)
            self.active -= 1
            self.metrics.judge_in_flight.set(self.active)
            slots.release()


class GatedJudge(JudgeWrapper):
    """`inner` behind the server's gate, counted in the metrics and the request's ledger."""

    def __init__(self, inner: Judge, gate: JudgeGate, metrics: Metrics) -> None:
        super().__init__(inner)
        self.gate = gate
        self.metrics = metrics

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        async with self.gate.slot():
            result = await self._counted("binary", self.inner.binary(request))
        ledger = LEDGER.get()
        if ledger is not None:
            ledger.binary_requests += 1
            ledger.questions += len(request.questions)
            ledger.input_tokens += result.usage.input_tokens
        self.metrics.judge_tokens.inc(result.usage.input_tokens)
        return result

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        async with self.gate.slot():
            result = await self._counted("choice", self.inner.choice(request))
        ledger = LEDGER.get()
        if ledger is not None:
            ledger.choice_requests += 1
            ledger.input_tokens += result.usage.input_tokens
        self.metrics.judge_tokens.inc(result.usage.input_tokens)
        return result

    async def _counted(self, kind: str, pending: Any) -> Any:
        start = time.perf_counter()
        try:
            result = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.metrics.judge_errors.labels(type(exc).__name__).inc()
            ledger = LEDGER.get()
            if ledger is not None:
                ledger.failed_requests += 1
            raise
        self.metrics.judge_requests.labels(kind).inc()
        self.metrics.judge_seconds.observe(time.perf_counter() - start)
        return result
