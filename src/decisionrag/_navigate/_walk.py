"""One retrieval: the sequence of stages for one query (state that lives for one query only)."""

from __future__ import annotations

import asyncio
import functools
import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import JudgeProtocolError, NavigationError
from .._judges import BinaryRequest, BinaryResult, ChoiceRequest, Usage
from .._query import Query
from .._tree import Node, NodeKind
from ._config import StageSettings
from ._filters import Filter
from ._render import (
    PREAMBLE,
    Entry,
    Kind,
    TaskWording,
    binary_request,
    choice_request,
    pack,
    render_query,
)
from ._result import Hit, Result, StageTrace, Trace

if TYPE_CHECKING:
    from ._navigator import Navigator

ReadAhead = Callable[["asyncio.Future[Any]"], Awaitable[None]]
_KEY = operator.attrgetter("key")
NOTEPAD_PASSAGE_CAP = 100  # passages of one notepad page added to the passage stage, at most
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


class Walk:
    def __init__(self, navigator: Navigator, query: Query, k: int, notepad: tuple[str, ...],
                 filters: Filter | None = None) -> None:
        self.nav = navigator
        self.filters = filters
        self.tree = navigator.tree
        self.judge = navigator.judge
        self.preset = navigator.preset
        self.query = query
        self.k = k
        self.notepad = notepad
        self.task: TaskWording = self._task()
        self.query_text = render_query(query, self.task)
        self.trace = Trace()
        self.usage = Usage()
        self.page_scores: dict[str, float] = {}
        self._idle_since = time.perf_counter()  # when the last judge answer came back
        self._slots: AbstractAsyncContextManager[object] = (
            asyncio.Semaphore(navigator.concurrency) if navigator.concurrency else nullcontext()
        )

    def _task(self) -> TaskWording:
        if self.preset.task == "auto":
            return "conversation" if self.query.is_conversational else "qa"
        return self.preset.task

    # -- the two entry points -----------------------------------------------------------

    async def retrieve(self) -> Result:
        start = time.perf_counter()
        documents = await self.route()
        kept_pages = await self.judge_pages(self.with_notepad_pages(documents))
        passages = await self.expand(kept_pages)
        ranked = await self.judge_passages(self.with_extra_passages(passages))
        return await self.finish(ranked, start)

    async def rerank(self, passages: list[Node]) -> Result:
        start = time.perf_counter()
        passages = self.admit(passages, "passage")
        passages.sort(key=self.nav.reading_key)
        ranked = await self.judge_passages(passages)
        return await self.finish(ranked, start)

    async def finish(self, ranked: list[Scored], start: float) -> Result:
        choice = await self.choose(ranked)
        hits = [self.hit(item, choice.get(item.node.key)) for item in ranked[: self.k]]
        return Result(self.query, hits, self.trace, self.usage, time.perf_counter() - start)

    # -- group levels ---------------------------------------------------------------------

    async def route(self) -> list[Node]:
        """Judge group levels top-down; return the pages that reach the page stage, in
        reading order. Pages met at a group level pass through unjudged."""
        if not self.preset.route_groups:
            return self.admit(list(self.nav.all_documents()), "page")
        level = [self.tree.root.id]  # the groups whose children form the next level
        documents: list[Node] = []
        depth = 0
        mixed = False
        while level:
            families = [self.nav.split_children(node_id) for node_id in level]
            for family in families:
                documents.extend(self.admit(family.documents, "page"))
            groups = self.admit([group for family in families for group in family.groups],
                                f"group {depth + 1}")
            if not groups:
                break
            mixed = mixed or any(family.documents for family in families)
            kept = await self.judge_groups(groups, depth)
            level = [group.id for group in groups if group.key in kept]
            depth += 1
        return sorted(documents, key=self.nav.reading_key) if mixed else documents

    async def judge_groups(self, groups: list[Node], depth: int) -> set[str]:
        settings = self.preset.group_settings(depth)
        read_ahead = functools.partial(self.nav.read_ahead, groups, depth + 1)
        ranking, stage = await self.judge_level(
            "group", groups, settings, f"group {depth + 1}", read_ahead=read_ahead
        )
        kept = ranking.top(ranking.keep_count(settings))
        kept_keys = {s.node.key for s in kept}
        sticky = self.notepad_group(groups)
        if sticky is not None and sticky.key not in kept_keys:
            score = ranking.scores[sticky.key]
            kept.append(Scored(sticky, score, score))
            kept_keys.add(sticky.key)
        self.close_stage(stage, kept, opened=[g.key for g in groups if g.key in kept_keys])
        return kept_keys

    def notepad_group(self, groups: list[Node]) -> Node | None:
        """The group among `groups` above the most recent notepad page (md2d keeps it)."""
        settings = self.preset.notepad
        if not (settings and settings.keep_group and self.notepad):
            return None
        page = self.notepad_pages()[:1]
        if not page:
            return None
        above = {a.id for a in self.nav.ancestors(page[0])}
        return next((g for g in groups if g.id in above), None)

    # -- pages ----------------------------------------------------------------------------

    def notepad_pages(self) -> list[Node]:
        pages = []
        for key in self.notepad:
            try:
                node = self.tree.node(key)
            except KeyError:
                continue  # a page of an older build of the tree: nothing to show
            if node.kind == NodeKind.DOCUMENT:
                pages.append(node)
        return pages

    def with_notepad_pages(self, documents: list[Node]) -> list[Node]:
        settings = self.preset.notepad
        if not (settings and settings.show_pages and self.notepad):
            return documents
        present = {d.key for d in documents}
        extra = self.admit([p for p in self.notepad_pages() if p.key not in present], "page")
        if not extra:
            return documents
        return sorted([*documents, *extra], key=self.nav.reading_key)

    async def judge_pages(self, documents: list[Node]) -> list[Scored]:
        """The page stage (with its rescoring pass when split); the kept pages, best first."""
        settings = self.preset.documents
        notepad = self.notepad if self.preset.notepad and self.preset.notepad.show_pages else ()
        ranking, stage = await self.judge_level("document", documents, settings, "page", notepad)
        kept = ranking.top(ranking.keep_count(settings))
        self.page_scores = ranking.scores
        self.close_stage(stage, kept, opened=[s.node.key for s in kept])
        return kept

    # -- passages -------------------------------------------------------------------------

    async def expand(self, pages: list[Scored]) -> list[Node]:
        """Open the kept pages: partial expansion by rank, the heading stage for long pages."""
        headings = self.preset.headings
        passages: list[Node] = []
        long_pages: list[Node] = []
        for rank, page in enumerate(pages, 1):
            limit = self.preset.documents.expansion_limit(rank)
            if limit == 0:
                continue
            if limit is None and headings is not None and page.node.n_passages > headings.threshold:
                long_pages.append(page.node)
            else:
                passages.extend(self.tree.passages_of(page.node, limit))
        if long_pages:
            passages.extend(await self.heading_stage(long_pages))
        return self.admit(passages, "passage")

    async def heading_stage(self, pages: list[Node]) -> list[Node]:
        """Score the headings of long pages, keep `keep` per page, open at most `max_passages`
        passages under them per page, in document order."""
        assert self.preset.headings is not None
        settings = self.preset.headings
        pages.sort(key=self.nav.reading_key)
        sections = {p.id: [n for n in self.tree.subtree(p.id) if n.kind == NodeKind.SECTION] for p in pages}
        candidates = self.admit([s for p in pages for s in sections[p.id]], "heading")
        kept_by_page: dict[int, list[Node]] = {p.id: [] for p in pages}
        stage_kept: list[Scored] = []
        if candidates:
            level = StageSettings(top_k=None, max_candidates_per_request=None)
            ranking, stage = await self.judge_level("heading", candidates, level, "heading")
            for item in ranking.top():
                bucket = kept_by_page[item.node.doc if item.node.doc is not None else -1]
                if len(bucket) < settings.keep:
                    bucket.append(item.node)
                    stage_kept.append(item)
            self.close_stage(stage, stage_kept, opened=[s.node.key for s in stage_kept])
        opened: list[Node] = []
        for page in pages:
            opened.extend(self.passages_under(page, kept_by_page[page.id], settings.max_passages))
        return opened

    def passages_under(self, page: Node, sections: list[Node], cap: int) -> list[Node]:
        if not sections:  # a long page without headings: its first passages
            return self.tree.passages_of(page, cap)
        chosen: dict[int, Node] = {}
        for section in sorted(sections, key=lambda s: s.id):
            for passage in self.tree.passages_of(section):
                chosen.setdefault(passage.id, passage)
        return [chosen[i] for i in sorted(chosen)][:cap]

    def with_extra_passages(self, passages: list[Node]) -> list[Node]:
        """Add the notepad pages' passages and the retriever's top passages; deduplicate;
        sort everything into reading order (grouped by page and section)."""
        extra: list[Node] = []
        settings = self.preset.notepad
        if settings and settings.passage_pages and self.notepad:
            for page in self.notepad_pages()[: settings.passage_pages]:
                extra.extend(self.tree.passages_of(page, NOTEPAD_PASSAGE_CAP))
        extra.extend(self.retrieved_passages())
        unique = {p.id: p for p in [*passages, *self.admit(extra, "passage")]}
        return sorted(unique.values(), key=self.nav.reading_key)

    def retrieved_passages(self) -> list[Node]:
        retriever = self.nav.retriever
        if retriever is None or self.preset.hybrid_k <= 0:
            return []
        found = []
        for key, _score in retriever.retrieve(self.retriever_text(), self.preset.hybrid_k):
            try:
                node = self.tree.node(key)
            except KeyError:
                raise NavigationError(
                    f"the retriever returned {key!r}, which is not in {self.tree.file}"
                ) from None
            found.append(node)
        return found

    def retriever_text(self) -> str:
        if self.task == "conversation":
            return " ".join(turn.text for turn in self.query.last_turns(6))
        return f"{self.query.context} {self.query.text}".strip()

    async def judge_passages(self, passages: list[Node]) -> list[Scored]:
        settings = self.preset.passages
        ranking, stage = await self.judge_level("passage", passages, settings, "passage")
        ranked = ranking.top()
        if self.preset.documents.propagate and self.page_scores:
            ranked = self.propagate(ranked)
        self.close_stage(stage, ranked[: max(self.k, self.preset.choice.top)], opened=[])
        return ranked

    def propagate(self, ranked: list[Scored]) -> list[Scored]:
        """Multiply each passage's P(yes) by its page's (pages not judged count as the
        weakest kept page)."""
        neutral = min(self.page_scores.values())
        order = {id(s): i for i, s in enumerate(ranked)}
        for item in ranked:
            page = self.nav.node(item.node.doc) if item.node.doc is not None else item.node
            item.score = item.binary * self.page_scores.get(page.key, neutral)
        return sorted(ranked, key=lambda s: (-s.score, order[id(s)]))

    # -- multiple choice ------------------------------------------------------------------

    async def choose(self, ranked: list[Scored]) -> dict[str, float]:
        """Reorder `ranked` in place by one choice over its top m; return the choice odds."""
        settings = self.preset.choice
        m = min(settings.top, len(ranked), self.judge.limits.max_options, 255)
        if settings.mode == "off" or m < 2:
            return {}
        shortlist = ranked[:m]
        in_reading_order = sorted(shortlist, key=lambda s: self.nav.reading_key(s.node))
        entries = [self.entry("passage", s.node, "description") for s in in_reading_order]
        stage = StageTrace("choice", len(self.trace.stages) + 1, m, [e.key for e in entries])
        stage.nodes = [s.node for s in in_reading_order]
        request = choice_request(self.query_text, entries, self.task)
        start = self.sending(stage)
        async with self._slots:
            result = await self.judge.choice(request)
        self.account(stage, result.usage, request, start)
        self._idle_since = time.perf_counter()
        probabilities = {e.key: p for e, p in zip(entries, result.probabilities, strict=False)}
        stage.scores = probabilities
        if settings.mode == "order":
            ranked[:m] = sorted(shortlist, key=lambda s: -probabilities[s.node.key])
        else:
            best = max(shortlist, key=lambda s: probabilities[s.node.key])
            ranked.remove(best)
            ranked.insert(0, best)
        self.close_stage(stage, [Scored(s.node, s.binary, probabilities[s.node.key]) for s in ranked[:m]], [])
        return probabilities

    # -- one level: render, split, judge, pool, rescore -----------------------------------

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
        stage = StageTrace(name, len(self.trace.stages) + 1, len(nodes), keys)
        if not nodes:
            self.trace.stages.append(stage)
            return Ranking([], {}, np.zeros(0)), stage
        entries = self.nav.entries(kind, nodes, settings.render)
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
        first.titles = {n.key: self.display(n) for n in best}
        self.trace.stages.append(first)
        stage = StageTrace(
            f"{first.name} rescore", len(self.trace.stages) + 1, len(top), [n.key for n in top]
        )
        entries = [self.entry(kind, node, "description") for node in top]
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
        chunks = pack(
            entries,
            self.nav.count_tokens,
            overhead=self.judge.count_tokens(PREAMBLE + self.query_text) + LIST_TOKENS,
            max_candidates=_smallest(settings.max_candidates_per_request, self.judge.limits.max_questions),
            max_tokens=_smallest(settings.max_tokens_per_request, self.judge.limits.max_tokens),
            keep_siblings=settings.keep_siblings,
        )
        requests = [binary_request(self.query_text, chunk, kind, self.task, notepad) for chunk in chunks]
        start = self.sending(stage)
        pending = asyncio.gather(*(self.send(request) for request in requests))
        if read_ahead is not None:
            try:
                await read_ahead(pending)
            except BaseException:
                pending.cancel()
                raise
        results = await pending
        values: list[float] = []  # the requests are consecutive runs of `entries`
        for request, result in zip(requests, results, strict=True):
            if len(result.probabilities) != len(request.questions):
                raise JudgeProtocolError(
                    f"{self.judge.name}: {len(result.probabilities)} answers for "
                    f"{len(request.questions)} questions"
                )
            values.extend(result.probabilities)
            self.account(stage, result.usage, request, None)
        self._idle_since = time.perf_counter()
        stage.seconds += self._idle_since - start
        return values

    def sending(self, stage: StageTrace) -> float:
        """Book the local work since the last answer (tree reads, rendering, splitting) on
        `stage`, and return the moment its requests go out."""
        now = time.perf_counter()
        stage.local_seconds += now - self._idle_since
        return now

    async def send(self, request: BinaryRequest) -> BinaryResult:
        async with self._slots:
            return await self.judge.binary(request)

    def account(
        self, stage: StageTrace, usage: Usage, request: BinaryRequest | ChoiceRequest, start: float | None
    ) -> None:
        if not usage.requests:  # the judge did not say: count the request's text ourselves
            usage = Usage(requests=1, input_tokens=self.judge.count_tokens(_text_of(request))) + usage
        stage.requests += usage.requests
        stage.input_tokens += usage.input_tokens
        self.usage = self.usage + usage
        if start is not None:
            stage.seconds += time.perf_counter() - start

    # -- metadata filters -----------------------------------------------------------------

    def admit(self, nodes: list[Node], stage: str) -> list[Node]:
        """`nodes` without those the filters rule out (counted under `stage` in the trace):
        groups and documents by the summary of the documents below them, sections and
        passages exactly (a section when one of its passages matches)."""
        if self.filters is None or not nodes:
            return nodes
        kept = [node for node, ok in zip(nodes, self._admissible(nodes), strict=True) if ok]
        if len(kept) < len(nodes):
            filtered = self.trace.filtered
            filtered[stage] = filtered.get(stage, 0) + len(nodes) - len(kept)
        return kept

    def _admissible(self, nodes: list[Node]) -> list[bool]:
        assert self.filters is not None
        test = self.filters
        inner = [n for n in nodes if n.kind <= NodeKind.DOCUMENT]
        summaries = dict(zip((n.id for n in inner), self.nav.summaries(inner), strict=True))
        verdicts = []
        for node in nodes:
            if node.kind <= NodeKind.DOCUMENT:
                summary = summaries[node.id]
                verdicts.append(summary is None or test.may_match(summary))
            elif node.kind == NodeKind.SECTION:
                verdicts.append(any(test.matches(self.nav.metadata(p))
                                    for p in self.tree.passages_of(node)))
            else:
                verdicts.append(test.matches(self.nav.metadata(node)))
        return verdicts

    def close_stage(self, stage: StageTrace, kept: Sequence[Scored], opened: list[str]) -> None:
        stage.filtered = self.trace.filtered.get(stage.name, 0)
        stage.kept = [(s.node.key, s.score) for s in kept]
        stage.opened = opened
        stage.titles = {s.node.key: self.display(s.node) for s in kept}
        if stage not in self.trace.stages:
            self.trace.stages.append(stage)

    # -- what candidates look like ----------------------------------------------------------

    def entry(self, kind: Kind, node: Node, render: str) -> Entry:
        return self.nav.entry(kind, node, render)

    def display(self, node: Node) -> str:
        if node.kind == NodeKind.PASSAGE:
            return node.text
        if node.kind == NodeKind.SECTION:
            return " > ".join(node.heading)
        return node.title or node.description or node.key

    def hit(self, item: Scored, choice: float | None) -> Hit:
        node = item.node
        page = self.nav.node(node.doc) if node.doc is not None else node
        path = (
            *(a.title or a.description for a in self.nav.ancestors(page)),
            self.nav.page_title(page),
            *node.heading,
        )
        return Hit(
            node=node,
            score=item.score,
            binary=item.binary,
            choice=choice,
            path=path,
            doc_key=page.key,
            metadata=self.nav.metadata(node),
        )


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


def _text_of(request: BinaryRequest | ChoiceRequest) -> str:
    if isinstance(request, BinaryRequest):
        return request.context + "".join(request.questions)
    return request.context


def _smallest(*limits: int | None) -> int | None:
    present = [limit for limit in limits if limit is not None]
    return min(present) if present else None
