"""The level engine: one level of candidates through render → pack → send → pool → rescore
→ account, for one query. Stages (`_walk`) call it; it knows nothing about which stage runs.

A `LevelEngine` lives for one walk: it holds the walk's trace and usage, the concurrency
slots and the clock that splits a stage's time into judge wait and local work.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from .._errors import (
    DeadlineExceeded,
    DecisionRAGError,
    JudgeProtocolError,
    JudgeUnavailable,
    NavigationError,
)
from .._judges import BinaryRequest, BinaryResult, ChoiceRequest, ChoiceResult, Judge, Usage
from .._tree import Node, NodeKind
from ._config import OnFailure, StageSettings
from ._render import PREAMBLE, Entry, Kind, QuestionForm, TaskWording, binary_request, pack
from ._result import Stage, StageTrace, Trace
from ._view import TreeView

ReadAhead = Callable[["asyncio.Future[Any]"], Awaitable[None]]
_KEY = operator.attrgetter("key")
UNJUDGED = 0.0  # the score of a candidate whose request failed: after every judged one
LIST_TOKENS = 12  # "Pages:", "End of pages." and the notepad line around a candidate list


@dataclass(slots=True)
class Scored:
    """A judged candidate: its node, its own P(yes) and its ranking score."""

    node: Node
    binary: float
    score: float


@dataclass(slots=True)
class Ranking:
    """A judged level: its nodes in reading order and their scores (`values` in that order).
    Best first means by descending score, ties in reading order; `order` fixes that order
    when it is not the scores' (after a rescoring pass). Node lists and `Scored` items are
    made only for the prefix a caller keeps (levels can be 16,000 pages)."""

    nodes: list[Node]
    scores: dict[str, float]
    values: npt.NDArray[np.float64]
    order: list[int] | None = None

    def positions(self, n: int | None = None) -> list[int]:
        if self.order is not None:
            return self.order if n is None else self.order[:n]
        return best_first(self.values, n)

    def ranked(self, n: int | None = None) -> list[Node]:
        return list(map(self.nodes.__getitem__, self.positions(n)))

    def top(self, n: int | None = None) -> list[Scored]:
        return [Scored(node, self.scores[node.key], self.scores[node.key]) for node in self.ranked(n)]

    def keep_count(self, settings: StageSettings) -> int:
        return settings.keep_count(len(self.nodes), [self.scores[n.key] for n in self.ranked(1)])


class LevelEngine:
    """Judges levels of candidates for one query (`query_text`, rendered for `task`)."""

    def __init__(self, view: TreeView, judge: Judge, query_text: str, task: TaskWording,
                 concurrency: int | None = None, form: QuestionForm = "paper",
                 on_failure: OnFailure = "degrade", max_input_tokens: int | None = None,
                 search_text: str = "") -> None:
        self.view = view
        self.judge = judge
        self.query_text = query_text
        self.search_text = search_text
        self.task = task
        self.form: QuestionForm = form
        self.trace = Trace()
        self.usage = Usage()
        self._idle_since = time.perf_counter()  # when the last judge answer came back
        self.on_failure = on_failure
        self.max_input_tokens = max_input_tokens  # the query's token budget, all stages together
        self.current_stage = "start"  # the stage whose requests are out (for error messages)
        self._slots: AbstractAsyncContextManager[object] = (
            asyncio.Semaphore(concurrency) if concurrency else nullcontext()
        )

    def new_stage(self, name: str, candidates: list[str]) -> StageTrace:
        return StageTrace(name, len(self.trace.stages) + 1, len(candidates), candidates)

    async def judge_level(
        self,
        kind: Kind,
        nodes: list[Node],
        settings: StageSettings,
        name: str,
        notepad: Sequence[str] = (),
        read_ahead: ReadAhead | None = None,
    ) -> tuple[Ranking, StageTrace]:
        """Judge `nodes` (reading order) and rank them best first, ties in reading order."""
        keys = list(map(_KEY, nodes))
        stage = self.new_stage(name, keys)
        if not nodes:
            self.trace.stages.append(stage)
            return Ranking([], {}, np.zeros(0)), stage
        entries = self.view.entries(kind, nodes, settings.render)
        values = await self.judge_entries(stage, kind, entries, settings, notepad, read_ahead)
        scores = dict(zip(keys, values, strict=True))
        stage.scores, stage.nodes = scores, nodes
        ranking = Ranking(nodes, scores, np.asarray(values, dtype=np.float64))
        if settings.rescore_top and stage.requests > 1:
            top = ranking.positions(settings.rescore_top)
            best, reading = [nodes[i] for i in top], [nodes[i] for i in sorted(top)]
            stage = await self.rescore(stage, kind, best, reading, scores, notepad)
            ranking.values = np.fromiter(map(scores.__getitem__, keys), np.float64, len(keys))
            rescored = set(stage.candidates)
            order = ranking.positions()
            ranking.order = [i for i in order if keys[i] in rescored] + [
                i for i in order if keys[i] not in rescored
            ]
        return ranking, stage

    async def rescore(
        self,
        first: StageTrace,
        kind: Kind,
        best: list[Node],
        top: list[Node],
        scores: dict[str, float],
        notepad: Sequence[str],
    ) -> StageTrace:
        """Rescore the pooled top N of a split level (`best`: best first; `top`: the same in
        reading order) together, with their full descriptions."""
        first.scores = dict(scores)  # the rescoring pass below updates `scores` in place
        first.kept = [(n.key, scores[n.key]) for n in best]
        first.titles = {n.key: display(n) for n in best}
        self.trace.stages.append(first)
        stage = self.new_stage(Stage.rescore(first.name), [n.key for n in top])
        entries = [self.view.entry(kind, node, "description") for node in top]
        one_request = StageSettings(top_k=None, max_candidates_per_request=None, keep_siblings=False)
        values = await self.judge_entries(stage, kind, entries, one_request, notepad)
        scores.update(zip(map(_KEY, top), values, strict=True))
        stage.scores, stage.nodes = dict(zip(map(_KEY, top), values, strict=True)), top
        return stage

    async def judge_entries(
        self,
        stage: StageTrace,
        kind: Kind,
        entries: list[Entry],
        settings: StageSettings,
        notepad: Sequence[str],
        read_ahead: ReadAhead | None = None,
    ) -> list[float]:
        """Split `entries` into requests within the caps, send them all at once (`read_ahead`
        uses the wait for them); their P(yes), in the order of `entries`."""
        limits = self.judge.limits
        chunks = pack(
            entries,
            self.view.count_tokens,
            overhead=self.judge.count_tokens(PREAMBLE + self.query_text) + LIST_TOKENS,
            max_candidates=_smallest(settings.max_candidates_per_request, limits.max_questions),
            max_tokens=_smallest(settings.max_tokens_per_request, limits.max_tokens),
            keep_siblings=settings.keep_siblings,
        )
        requests = [binary_request(self.query_text, chunk, kind, self.task, notepad, self.form,
                                   self.view.lexicon, self.search_text)
                    for chunk in chunks]
        self.check_budget(stage, sum(map(self.request_tokens, requests)))
        cut = [e for e in entries if e.truncated_from is not None]
        if cut:
            stage.notes.append(
                f"{len(cut)} candidate(s) cut to their first {self.view.candidate_tokens:,} tokens "
                f"(the longest had {max(e.truncated_from or 0 for e in cut):,}; the judge takes "
                f"{limits.max_tokens:,} per request)")
        start = self.sending(stage)
        pending = asyncio.gather(*(self.send(request) for request in requests), return_exceptions=True)
        if read_ahead is not None:
            try:
                await read_ahead(pending)
            except BaseException:
                pending.cancel()
                raise
        results = await pending
        values: list[float] = []  # the requests are consecutive runs of `entries`
        for request, result in zip(requests, results, strict=True):
            if isinstance(result, BaseException):
                self.unjudged(stage, result, len(request.questions), len(requests))
                values.extend(itertools.repeat(UNJUDGED, len(request.questions)))
                continue
            if len(result.probabilities) != len(request.questions):
                raise JudgeProtocolError(
                    f"{self.judge.name}: {len(result.probabilities)} answers for "
                    f"{len(request.questions)} questions"
                )
            values.extend(result.probabilities)
            self.account(stage, result.usage, request, None)
        if stage.unjudged and stage.unjudged == len(entries):
            raise in_stage(cast(BaseException, results[0]), stage,
                           f"all {len(requests)} request(s) failed")
        self._idle_since = time.perf_counter()
        stage.seconds += self._idle_since - start
        return values

    def unjudged(self, stage: StageTrace, error: BaseException, n: int, of: int) -> None:
        """Book a request that failed after its retries: its `n` candidates go unjudged when
        the preset degrades and the failure is one that may pass; else the walk stops."""
        degradable = isinstance(error, (JudgeUnavailable, JudgeProtocolError)) and not isinstance(
            error, DeadlineExceeded)
        if not degradable or self.on_failure != "degrade":
            raise in_stage(error, stage, f"a request of {of} failed") from None
        stage.unjudged += n
        stage.errors.append(str(error))

    def request_tokens(self, request: BinaryRequest | ChoiceRequest) -> int:
        """What `request` will cost in input tokens, as the judge counts them."""
        return self.judge.count_tokens(_text_of(request))

    def remaining_tokens(self) -> int | None:
        if self.max_input_tokens is None:
            return None
        return self.max_input_tokens - self.usage.input_tokens

    def check_budget(self, stage: StageTrace, tokens: int) -> None:
        """Refuse a stage whose requests would pass the query's `max_input_tokens`."""
        left = self.remaining_tokens()
        if left is not None and tokens > left:
            raise NavigationError(
                f"max_input_tokens={self.max_input_tokens:,}: the {stage.name} stage needs about "
                f"{tokens:,} input tokens and {left:,} are left ({self.usage.input_tokens:,} "
                "used); the smallest walk does not fit: raise max_input_tokens")

    async def send_choice(self, stage: StageTrace, request: ChoiceRequest) -> ChoiceResult | None:
        """One multiple-choice request, accounted on `stage`; None when it failed after its
        retries and the walk degrades (the binary order then stands)."""
        self.check_budget(stage, self.request_tokens(request))
        start = self.sending(stage)
        try:
            async with self._slots:
                result = await self.judge.choice(request)
        except (JudgeUnavailable, JudgeProtocolError) as exc:
            self.unjudged(stage, exc, len(request.options), 1)
            self._idle_since = time.perf_counter()
            return None
        self.account(stage, result.usage, request, start)
        self._idle_since = time.perf_counter()
        return result

    def sending(self, stage: StageTrace) -> float:
        """Book the local work since the last answer (tree reads, rendering, splitting) on
        `stage`, and return the moment its requests go out."""
        now = time.perf_counter()
        self.current_stage = stage.name
        stage.local_seconds += now - self._idle_since
        return now

    async def send(self, request: BinaryRequest) -> BinaryResult:
        async with self._slots:
            return await self.judge.binary(request)

    def account(
        self, stage: StageTrace, usage: Usage, request: BinaryRequest | ChoiceRequest, start: float | None
    ) -> None:
        if not usage.requests and not usage.cached:  # the judge did not say: count it ourselves
            estimate = self.judge.count_tokens(_text_of(request))
            usage = Usage(requests=1, input_tokens=estimate, estimated=True) + usage
        stage.requests += usage.requests
        stage.input_tokens += usage.input_tokens
        self.usage = self.usage + usage
        if start is not None:
            stage.seconds += time.perf_counter() - start

    def close_stage(self, stage: StageTrace, kept: Sequence[Scored], opened: list[str]) -> None:
        stage.filtered = self.trace.filtered.get(stage.name, 0)
        stage.kept = [(s.node.key, s.score) for s in kept]
        stage.opened = opened
        stage.titles = {s.node.key: display(s.node) for s in kept}
        if stage not in self.trace.stages:
            self.trace.stages.append(stage)


def display(node: Node) -> str:
    """How the trace names a kept candidate: a passage's text, a section's heading path,
    otherwise the node's label."""
    if node.kind == NodeKind.PASSAGE:
        return node.text
    if node.kind == NodeKind.SECTION:
        return " > ".join(node.heading)
    return node.label


def best_first(values: npt.NDArray[np.float64], n: int | None = None) -> list[int]:
    """Positions of the `n` (default all) best `values`: by descending value, ties in their
    given (reading) order. In numpy: Python's sort of 16,000 pages compares float objects
    scattered over the heap, and a page level keeps only its top 30 (partitioned first)."""
    negated = -values
    if n is not None and n < len(negated):
        if n <= 0:
            return []
        cut = np.partition(negated, n - 1)[n - 1]
        chosen = np.flatnonzero(negated <= cut)  # the n best and all tied with the n-th
        best: list[int] = chosen[np.argsort(negated[chosen], kind="stable")][:n].tolist()
        return best
    order: list[int] = np.argsort(negated, kind="stable").tolist()
    return order


def in_stage(error: BaseException, stage: StageTrace, what: str) -> BaseException:
    """`error`, its message prefixed with the stage it stopped (same class, same fields)."""
    if isinstance(error, DecisionRAGError) and error.args and isinstance(error.args[0], str):
        error.args = (f"the {stage.name} stage: {what}: {error.args[0]}", *error.args[1:])
    return error


def _text_of(request: BinaryRequest | ChoiceRequest) -> str:
    if isinstance(request, BinaryRequest):
        return request.context + "".join(request.questions)
    return request.context


def _smallest(*limits: int | None) -> int | None:
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None
