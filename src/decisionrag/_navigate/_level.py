"""The level engine: a level of candidate entries through pack → send → pool → account, for
one query, and the multiple-choice request. Every judgment of navigation passes here — the
walk's levels, its rescoring pass, recovery, the choice — and so does reranking given texts.
It knows nothing of trees or of which stage runs.

A `LevelEngine` lives for one walk: it holds the walk's trace and usage, the concurrency
slots, the query's token budget and the clock that splits a stage's time into judge wait
and local work.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, TypeVar, cast

from .._errors import (
    DeadlineExceeded,
    DecisionRAGError,
    JudgeProtocolError,
    JudgeUnavailable,
    NavigationError,
)
from .._judges import (
    BinaryRequest,
    BinaryResult,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    LevelAnswers,
    Usage,
)
from .._judges._evidence import RecurringLists
from .._words import Lexicon
from ._config import OnFailure, StageSettings
from ._pack import pack
from ._render import (
    LIST_TOKENS,
    PREAMBLE,
    Entry,
    EntryRuns,
    Kind,
    QuestionForm,
    RequestPart,
    TaskWording,
)
from ._result import StageTrace, Trace

# work for a judge wait (until the future is done); True when it has nothing left to do
ReadAhead = Callable[["asyncio.Future[Any]"], Awaitable[bool]]
R = TypeVar("R")
UNJUDGED = 0.0  # the score of a candidate whose request failed: after every judged one


class LevelEngine:
    """Judges candidates for one query (`query_text`, rendered for `task`; `search_text` is
    what similarity judges embed). `count_tokens` counts an entry's text for the judge (a
    navigator's cached counter), `statistics` are the corpus's word statistics every request
    carries (when the judge reads them), `candidate_tokens` the length candidates were cut to."""

    def __init__(self, judge: Judge, query_text: str, task: TaskWording, *,
                 count_tokens: Callable[[str], int] | None = None,
                 statistics: Lexicon | None = None, search_text: str = "",
                 candidate_tokens: int | None = None, concurrency: int | None = None,
                 form: QuestionForm = "paper", on_failure: OnFailure = "degrade",
                 max_input_tokens: int | None = None,
                 recurring: RecurringLists | None = None) -> None:
        self.judge = judge
        self.recurring = recurring  # what is kept for levels that recur (the view's)
        self.count_tokens = count_tokens or judge.count_tokens
        self.statistics = statistics
        self.candidate_tokens = candidate_tokens
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
        self._deferred: list[Callable[[], object]] = []  # see `defer`
        # what a judge wait with no reading ahead of its own does (the walk sets it to read
        # the groups not yet cached: a cold cache then fills in every wait, not only the first)
        self.idle: ReadAhead | None = None
        # a judge that answers from elsewhere leaves the waits idle here: the collector's
        # young generations are collected in them (not in the walk's own work, where the
        # allocations of a 16,000-page level would otherwise start a collection); a judge
        # that computes in this process would be held up by it
        self.collects_in_waits = not judge.computes_here

    def new_stage(self, name: str, candidates: list[str], n: int | None = None) -> StageTrace:
        """The next stage, judging `candidates` (or `n` of them, listed later)."""
        return StageTrace(name, len(self.trace.stages) + 1,
                          len(candidates) if n is None else n, candidates)

    async def judge_entries(
        self,
        stage: StageTrace,
        kind: Kind,
        entries: Sequence[Entry],
        settings: StageSettings,
        notepad: Sequence[str],
        read_ahead: ReadAhead | None = None,
    ) -> list[float]:
        """Split `entries` into requests within the caps, send them all at once (`read_ahead`
        uses the wait for them); their P(yes), in the order of `entries`."""
        limits = self.judge.limits
        max_tokens = _smallest(settings.max_tokens_per_request, limits.max_tokens)
        rendered = self.renders_context()
        parts = self.packed(
            entries,
            kind,
            overhead=(self.judge.count_tokens(PREAMBLE + self.query_text) + LIST_TOKENS
                      if max_tokens is not None else 0),  # only a token cap reads it
            max_candidates=_smallest(settings.max_candidates_per_request, limits.max_questions),
            max_tokens=max_tokens,
            keep_siblings=settings.keep_siblings,
        )
        requests = [part.request(self.query_text, kind, self.task, notepad, self.form,
                                 self.statistics, self.search_text, rendered=rendered)
                    for part in parts]
        if self.max_input_tokens is not None:
            self.check_budget(stage, sum(map(self.request_tokens, requests)))
        cut = (entries.truncated() if isinstance(entries, EntryRuns)
               else [e for e in entries if e.truncated_from is not None])
        if cut:
            stage.notes.append(
                f"{len(cut)} candidate(s) cut to their first {self.candidate_tokens or 0:,} tokens "
                f"(the longest had {max(e.truncated_from or 0 for e in cut):,}; the judge takes "
                f"{limits.max_tokens:,} per request)")
        stage.contexts += len(requests)
        start = self.sending(stage)
        pending = self.send_all(requests)
        await self.use_wait(pending, read_ahead if read_ahead is not None else self.idle)
        results = await pending
        if isinstance(results, LevelAnswers):
            return self._level_values(stage, requests, results, start)
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

    def _level_values(self, stage: StageTrace, requests: list[BinaryRequest],
                      answers: LevelAnswers, start: float) -> list[float]:
        """`judge_entries`' values from a level answered at once, accounted as its requests'
        results one by one."""
        self.account(stage, answers.usage, requests[0], None)
        self._idle_since = time.perf_counter()
        stage.seconds += self._idle_since - start
        listed: list[float] = answers.probabilities.tolist()
        return listed

    def packed(self, entries: Sequence[Entry], kind: Kind, *, overhead: int,
               max_candidates: int | None, max_tokens: int | None,
               keep_siblings: bool) -> Sequence[RequestPart]:
        """`entries` cut into requests (`pack`), as their query-independent parts; kept in
        `recurring` for a level that comes back query after query (a page level's 4,000
        pages are cut the same way every time)."""
        def cut() -> _PackedLevel:
            chunks = pack(entries, self.count_tokens, overhead=overhead,
                          max_candidates=max_candidates, max_tokens=max_tokens,
                          keep_siblings=keep_siblings)
            return _PackedLevel(map(RequestPart.of, chunks))

        if self.recurring is None:
            return cut()
        # not keyed by the wording (a conversation's first turn is asked as a question, the
        # next as turns): the same candidates in the same requests either way, which the
        # judge then reads through the same kept plans
        tag = ("packed", overhead, max_candidates, max_tokens, keep_siblings, id(self.count_tokens))
        runs = entries.whole_runs if isinstance(entries, EntryRuns) else None
        # a level of whole runs is keyed by them (kept by the view, they fix its entries):
        # one id for 3,939 pages of one parent, not 3,939
        kept = (self.recurring.get_listed((*tag, "runs"), runs, cut) if runs is not None
                else self.recurring.get_listed(tag, entries, cut))
        return kept if kept is not None else cut()

    def defer(self, work: Callable[[], object]) -> None:
        """Leave `work` (bookkeeping no request needs, such as a page level's scores dict)
        for the next judge wait; `run_deferred` does what is left when the walk ends."""
        self._deferred.append(work)

    def run_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)()

    def unjudged(self, stage: StageTrace, error: BaseException, n: int, of: int) -> None:
        """Book a request that failed after its retries: its `n` candidates go unjudged when
        the preset degrades and the failure is one that may pass; else the walk stops."""
        degradable = isinstance(error, (JudgeUnavailable, JudgeProtocolError)) and not isinstance(
            error, DeadlineExceeded)
        if not degradable or self.on_failure != "degrade":
            raise in_stage(error, stage, f"a request of {of} failed") from None
        stage.unjudged += n
        stage.errors.append(str(error))

    def renders_context(self) -> bool:
        """Whether requests carry their rendered shared context: the judge reads it, or the
        query's token budget is counted on it. A judge that scores candidates from their own
        texts, vectors and statistics (`Reads.context` False) otherwise gets requests with an
        empty context: the rendering would be built for no reader."""
        return self.judge.reads.context or self.max_input_tokens is not None

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
                result = await self._using_wait(self.judge.choice(request))
        except (JudgeUnavailable, JudgeProtocolError) as exc:
            self.unjudged(stage, exc, len(request.options), 1)
            self._idle_since = time.perf_counter()
            return None
        self.account(stage, result.usage, request, start)
        self._idle_since = time.perf_counter()
        return result

    async def _using_wait(self, answer: Awaitable[R]) -> R:
        """`answer`, awaited while `use_wait` uses the wait (for reading ahead or collecting;
        deferred work alone waits for the next level, or the walk's end, as before)."""
        if self.idle is None and not self.collects_in_waits:
            return await answer
        pending = asyncio.ensure_future(answer)
        await self.use_wait(pending, self.idle)
        return await pending

    async def use_wait(self, pending: asyncio.Future[Any], read_ahead: ReadAhead | None) -> None:
        """Use the wait for `pending` (requests just sent): the deferred bookkeeping, the
        collector's young generations (`collect_young`), then `read_ahead` until `pending`
        is done. `pending` is cancelled if this fails."""
        if read_ahead is None and not self._deferred and not self.collects_in_waits:
            return
        try:
            # let the requests go out first: the work below would otherwise run before
            # any of them started (and their answers come back that much later)
            await asyncio.sleep(0)
            self.run_deferred()
            if self.collects_in_waits:
                collect_young()
            if read_ahead is not None and await read_ahead(pending) and read_ahead is self.idle:
                self.idle = None  # every later wait of this walk would find nothing to do
        except BaseException:
            pending.cancel()
            raise

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

    def send_all(self, requests: list[BinaryRequest]) -> asyncio.Future[Any]:
        """All of a level's requests at once, each answered by a result or its error: in one
        call to a judge that computes them together (`Judge.batches`), else one call each
        within the walk's concurrency."""
        if self.judge.batches and len(requests) > 1:
            return asyncio.ensure_future(self._send_batch(requests))
        return asyncio.gather(*(self.send(request) for request in requests), return_exceptions=True)

    async def _send_batch(self, requests: list[BinaryRequest]) -> list[Any] | LevelAnswers:
        async with self._slots:
            at_once = getattr(self.judge, "binary_level", None)
            if at_once is not None:  # one array for the level where it can, not a list per request
                found = await at_once(requests)
                return found if isinstance(found, LevelAnswers) else list(found)
            return list(await self.judge.binary_many(requests))

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

def in_stage(error: BaseException, stage: StageTrace, what: str) -> BaseException:
    """`error`, its message prefixed with the stage it stopped (same class, same fields)."""
    if isinstance(error, DecisionRAGError) and error.args and isinstance(error.args[0], str):
        error.args = (f"the {stage.name} stage: {what}: {error.args[0]}", *error.args[1:])
    return error


def _text_of(request: BinaryRequest | ChoiceRequest) -> str:
    if isinstance(request, BinaryRequest):
        return request.context + "".join(request.questions)
    return request.context


class _PackedLevel(tuple[RequestPart, ...]):
    """A level's request parts, with what keeping them costs (`RecurringLists` budgets)."""

    __slots__ = ()

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self)


def _smallest(*limits: int | None) -> int | None:
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None


def collect_young() -> None:
    """Collect now the young generation the allocator would collect next (the middle one
    with it when that one is due), unless collection is off or left to the program
    (`gc.disable`, a zero threshold). Nothing else changes: thresholds and the oldest
    generation are left to Python."""
    thresholds = gc.get_threshold()
    if not gc.isenabled() or thresholds[0] <= 0:
        return
    gc.collect(1 if gc.get_count()[1] >= thresholds[1] else 0)
