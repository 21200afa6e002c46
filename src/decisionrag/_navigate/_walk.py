"""One retrieval: the sequence of stages for one query (state that lives for one query only).

Stages, in order (`Stage`): group levels (routing) → pages → recovery → headings of long
pages → passages (with notepad and hybrid candidates) → multiple choice. Where each lives:
requests (pack → send → pool → account) in `_level.LevelEngine`; ranking, pruning (a
level's budget) and the rescoring pass in `_ranking`; recovery in `_recovery`; the choice
step in `_choice`. The tree is read through the navigator's `TreeView`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

from .._errors import NavigationError
from .._judges import Judge
from .._query import Query, shared_work
from .._tree import Node
from ._choice import choose
from ._config import ONE_REQUEST, Preset
from ._filters import Filter
from ._level import LevelEngine, ReadAhead
from ._ranking import Ranking, Scored, close_stage, judge_level
from ._recovery import Recovery
from ._render import LINE_TOKENS, TaskWording, fit_query, query_budget
from ._result import Hit, Location, Result, Stage, Trace
from ._retriever import Retriever
from ._view import NodeRuns, TreeView, plain_hash, plain_text

NOTEPAD_PASSAGE_CAP = 100  # passages of one notepad page added to the passage stage, at most

__all__ = ["NOTEPAD_PASSAGE_CAP", "Walk", "collapse_duplicates"]


CHOICE_RESERVE = 0.2  # of the tokens left before the passage stage, kept for the choice


def collapse_duplicates(ranked: list[Scored], hashes: Sequence[int] | None = None
                        ) -> tuple[list[Scored], dict[str, list[Node]]]:
    """`ranked` (best first) with each passage whose text (whitespace aside) an earlier one
    has removed, and the removed ones by the key of the passage they repeat, in rank order.
    Identical texts are one piece of evidence (the paper counts them once): the multiple
    choice then weighs distinct passages, and k hits are k different texts. `hashes`: each
    passage's `plain_hash`, when known (`TreeView.plain_hashes`); passages whose hashes meet
    are compared by their texts."""
    if hashes is None:
        hashes = [plain_hash(item.node) for item in ranked]
    first: dict[int, list[Node]] = {}
    kept: list[Scored] = []
    copies: dict[str, list[Node]] = {}
    for item, found in zip(ranked, hashes, strict=True):
        owners = first.get(found)
        if owners is None:
            first[found] = [item.node]
            kept.append(item)
            continue
        owner = _same_text(item.node, owners)
        if owner is None:  # the same hash, another text
            owners.append(item.node)
            kept.append(item)
        else:
            copies.setdefault(owner.key, []).append(item.node)
    return kept, copies


def _same_text(node: Node, owners: list[Node]) -> Node | None:
    """The one of `owners` (texts that differ, whitespace aside) whose text is `node`'s,
    whitespace aside: found by equal texts first (copies mostly are), so that only texts
    that differ are collapsed (12 µs for 1,700 characters) to be compared."""
    same = next((owner for owner in owners if owner.text == node.text), None)
    if same is not None:
        return same
    text = plain_text(node)
    return next((owner for owner in owners if plain_text(owner) == text), None)


class Walk:
    """The stages of one retrieval over `view` with `judge` under `preset`."""

    def __init__(
        self, view: TreeView, judge: Judge, preset: Preset, query: Query, k: int,
        notepad: tuple[str, ...], *, retriever: Retriever | None = None,
        concurrency: int | None = None, filters: Filter | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        self.view = view
        self.filters = filters
        self.tree = view.tree
        self.judge = judge
        self.preset = preset
        self.retriever = retriever
        self.query = query
        self.k = k
        self.notepad = notepad
        self.task: TaskWording = self._task()
        self.query_text, query_note = fit_query(
            query, self.task, query_budget(judge.limits.max_tokens), judge.count_tokens)
        self.levels = LevelEngine(judge, self.query_text, self.task,
                                  count_tokens=view.count_tokens, statistics=view.lexicon,
                                  search_text=query.search_text,
                                  candidate_tokens=view.candidate_tokens,
                                  concurrency=concurrency, form=preset.questions,
                                  on_failure=preset.on_failure,
                                  max_input_tokens=max_input_tokens,
                                  recurring=view.recurring)
        self.trace = self.levels.trace
        self._page_scores: dict[str, float] | Ranking = {}  # see `page_scores`
        self._recovered: list[Scored] = []  # pages recovery added, not yet in that dict
        self.early_notes: list[str] = [query_note] if query_note else []  # before stage 1
        # the filter step as its own object, not a bound method of the walk: the walk holds
        # the recovery, and a recovery holding the walk would be a cycle that keeps each
        # finished walk (its 16,000-score traces) until a full garbage collection
        self.admission = Admission(view, filters, self.trace)
        self.recovery = Recovery(preset.recovery, self.levels, view, self.admission,
                                 preset.documents.render)
        self.passage_contexts = 0  # the shared contexts the passage stage was judged in
        self._weakest_page: tuple[dict[str, float], float] | None = None  # see `propagate`
        self.every_page = False  # the page stage holds every page of the tree (see `route`)

    @property
    def page_scores(self) -> dict[str, float]:
        """The page stage's scores by key (its ranking's, made on first use), with the
        pages recovery added (their own scores)."""
        if isinstance(self._page_scores, Ranking):
            self._page_scores = self._page_scores.scores
        if self._recovered:  # a new dict: the page stage's trace shares the one it was judged with
            scores = dict(self._page_scores)
            for item in self._recovered:
                scores.setdefault(item.node.key, item.score)
            self._page_scores, self._recovered = scores, []
        return self._page_scores

    @page_scores.setter
    def page_scores(self, scores: dict[str, float] | Ranking) -> None:
        self._page_scores = scores

    def _task(self) -> TaskWording:
        if self.preset.task == "auto":
            return "conversation" if self.query.is_conversational else "qa"
        return self.preset.task

    # -- the two entry points -----------------------------------------------------------

    # Both run inside one `shared_work()`: what the walk's parts would each compute (the
    # query's embedding, for the judge and the hybrid retriever) is computed once.

    async def retrieve(self) -> Result:
        start = time.perf_counter()
        with shared_work():
            documents = await self.route()
            kept_pages = await self.judge_pages(self.with_notepad_pages(documents))
            kept_pages = await self.recover(kept_pages)
            passages = await self.expand(kept_pages)
            ranked = await self.judge_passages(self.with_extra_passages(passages))
            return await self.finish(ranked, start)

    async def rerank(self, passages: list[Node]) -> Result:
        start = time.perf_counter()
        with shared_work():
            passages = self.admit(passages, Stage.PASSAGE.value)
            passages.sort(key=self.view.reading_key)
            ranked = await self.judge_passages(passages)
            return await self.finish(ranked, start)

    async def finish(self, ranked: list[Scored], start: float) -> Result:
        copies: dict[str, list[Node]] = {}
        if self.preset.collapse_duplicates:
            ranked, copies = collapse_duplicates(
                ranked, self.view.plain_hashes([item.node for item in ranked]))
        choice = await choose(self.levels, ranked, self.preset.choice,
                              entry_of=lambda node: self.view.entry("passage", node, "description"),
                              reading_key=self.view.reading_key,
                              one_context=self.passage_contexts == 1, note=self.trace_note)
        hits = [self.hit(item, choice.get(item.node.key), copies.get(item.node.key, ()))
                for item in ranked[: self.k]]
        self.levels.run_deferred()  # the trace complete before it is returned
        if self.early_notes and self.trace.stages:
            self.trace.stages[0].notes[:0] = self.early_notes
        return Result(self.query, hits, self.trace, self.levels.usage, time.perf_counter() - start)

    # -- group levels ---------------------------------------------------------------------

    async def route(self) -> list[Node]:
        """Judge group levels top-down; return the pages that reach the page stage, in
        reading order. Pages met at a group level pass through unjudged."""
        if not self.preset.route_groups:
            every = NodeRuns(self.view.document_runs())
            admitted = self.admit(every, Stage.PAGE.value)
            self.every_page = admitted is every
            return admitted
        level = [self.tree.root.id]  # the groups whose children form the next level
        runs: list[list[Node]] = []  # each family's admitted pages, in reading order
        depth = 0
        mixed = False
        kept_as_held = True  # every family's pages as the view holds them (no filter): NodeRuns
        every_group = True  # every group below the root reached (none filtered out or pruned)
        while level:
            families = [self.view.split_children(node_id) for node_id in level]
            for family in families:
                admitted = self.admit(family.documents, Stage.PAGE.value)
                runs.append(admitted)
                kept_as_held = kept_as_held and admitted is family.documents
            below = [group for family in families for group in family.groups]
            groups = self.admit(below, Stage.GROUP.at(depth))
            every_group = every_group and len(groups) == len(below)
            if not groups:
                break
            mixed = mixed or any(family.documents for family in families)
            kept = await self.judge_groups(groups, depth)
            level = [group.id for group in groups if group.key in kept]
            every_group = every_group and len(level) == len(groups)
            depth += 1
        self.every_page = kept_as_held and every_group  # none filtered out, no group pruned
        if kept_as_held and not mixed:
            return NodeRuns(runs)
        pages = [page for run in runs for page in run]
        return sorted(pages, key=self.view.reading_key) if mixed else pages

    async def judge_groups(self, groups: list[Node], depth: int) -> set[str]:
        settings = self.preset.group_settings(depth)
        read_ahead: ReadAhead | None = functools.partial(
            self.view.read_ahead, self.preset, groups, depth + 1)
        if depth == 0:  # the top level's reading ahead goes on in every later wait, until done
            self.levels.idle, read_ahead = read_ahead, None
        ranking, stage = await judge_level(self.levels, self.view, "group", groups, settings,
                                           Stage.GROUP.at(depth), read_ahead=read_ahead)
        kept = ranking.top(ranking.keep_count(settings))
        kept_keys = {s.node.key for s in kept}
        sticky = self.notepad_group(groups)
        if sticky is not None and sticky.key not in kept_keys:
            score = ranking.scores[sticky.key]
            kept.append(Scored(sticky, score, score))
            kept_keys.add(sticky.key)
        close_stage(self.levels, stage, kept, opened=[g.key for g in groups if g.key in kept_keys])
        self.recovery.remember_pruned(ranking, kept_keys)
        return kept_keys

    def notepad_group(self, groups: list[Node]) -> Node | None:
        """The group among `groups` above the most recent notepad page (md2d keeps it)."""
        settings = self.preset.notepad
        if not (settings and settings.keep_group and self.notepad):
            return None
        page = self.notepad_pages()[:1]
        if not page:
            return None
        above = {a.id for a in self.view.ancestors(page[0])}
        return next((g for g in groups if g.id in above), None)

    # -- pages ----------------------------------------------------------------------------

    def notepad_pages(self) -> list[Node]:
        # a key the tree lacks is a page of an older build of the tree: nothing to show
        return [page for page in map(self.view.page, self.notepad) if page is not None]

    def with_notepad_pages(self, documents: list[Node]) -> list[Node]:
        settings = self.preset.notepad
        if not (settings and settings.show_pages and self.notepad) or self.every_page:
            return documents  # (with every page there, the notepad's pages are among them)
        present = {d.key for d in documents}
        extra = self.admit([p for p in self.notepad_pages() if p.key not in present],
                           Stage.PAGE.value)
        if not extra:
            return documents
        return sorted([*documents, *extra], key=self.view.reading_key)

    async def judge_pages(self, documents: list[Node]) -> list[Scored]:
        """The page stage (with its rescoring pass when split); the kept pages, best first."""
        settings = self.preset.documents
        notepad = self.notepad if self.preset.notepad and self.preset.notepad.show_pages else ()
        ranking, stage = await judge_level(self.levels, self.view, "document", documents, settings,
                                           Stage.PAGE.value, notepad)
        kept = ranking.top(ranking.keep_count(settings))
        self.page_scores = ranking  # its scores dict is made when first needed
        close_stage(self.levels, stage, kept, opened=[s.node.key for s in kept])
        self.recovery.remember_pruned(ranking, {s.node.key for s in kept})
        return kept

    # -- recovery from pruning ------------------------------------------------------------

    async def recover(self, kept: list[Scored]) -> list[Scored]:
        """The kept pages, and after them those recovery reopens when the page stage is unsure
        (their own scores stand for their pages' in propagation)."""
        added = await self.recovery.recover(kept)
        self._recovered.extend(added)  # they join the page scores when those are read
        return [*kept, *added]

    # -- passages -------------------------------------------------------------------------

    async def expand(self, pages: list[Scored]) -> list[Node]:
        """Open the kept pages: partial expansion by rank, the heading stage for long pages."""
        headings = self.preset.headings
        passages: list[Node] = []
        long_pages: list[Node] = []
        self.view.hold([page.node for page in pages])
        for rank, page in enumerate(pages, 1):
            limit = self.preset.documents.expansion_limit(rank)
            if limit == 0:
                continue
            if limit is None and headings is not None and page.node.n_passages > headings.threshold:
                long_pages.append(page.node)
            else:
                passages.extend(self.view.passages_of(page.node, limit))
        if long_pages:
            passages.extend(await self.heading_stage(long_pages))
        return self.admit(passages, Stage.PASSAGE.value)

    async def heading_stage(self, pages: list[Node]) -> list[Node]:
        """Score the headings of long pages, keep `keep` per page, open at most `max_passages`
        passages under them per page, in document order."""
        assert self.preset.headings is not None
        settings = self.preset.headings
        pages.sort(key=self.view.reading_key)
        sections = {p.id: self.view.sections_of(p) for p in pages}
        candidates = self.admit([s for p in pages for s in sections[p.id]], Stage.HEADING.value)
        kept_by_page: dict[int, list[Node]] = {p.id: [] for p in pages}
        stage_kept: list[Scored] = []
        if candidates:
            ranking, stage = await judge_level(self.levels, self.view, "heading", candidates,
                                               ONE_REQUEST, Stage.HEADING.value)
            for item in ranking.top():
                bucket = kept_by_page[item.node.doc if item.node.doc is not None else -1]
                if len(bucket) < settings.keep:
                    bucket.append(item.node)
                    stage_kept.append(item)
            close_stage(self.levels, stage, stage_kept, opened=[s.node.key for s in stage_kept])
        opened: list[Node] = []
        for page in pages:
            opened.extend(self.passages_under(page, kept_by_page[page.id], settings.max_passages))
            if not sections[page.id]:
                self.trace_note(
                    f"page {page.key!r}: {page.n_passages:,} passages without headings; only the "
                    f"first {settings.max_passages} were judged (rebuild the tree: a build splits "
                    "such documents into parts)")
        return opened

    def trace_note(self, note: str) -> None:
        """A line on the latest stage's trace about what was capped, cut or windowed."""
        if self.trace.stages:
            self.trace.stages[-1].notes.append(note)
        else:
            self.early_notes.append(note)

    @property
    def current_stage(self) -> str:
        return self.levels.current_stage

    def passages_under(self, page: Node, sections: list[Node], cap: int) -> list[Node]:
        if not sections:  # a long page without headings: its first passages
            return self.view.passages_of(page, cap)
        chosen: dict[int, Node] = {}
        for section in sorted(sections, key=lambda s: s.id):
            for passage in self.view.passages_of(section):
                chosen.setdefault(passage.id, passage)
        return [chosen[i] for i in sorted(chosen)][:cap]

    def with_extra_passages(self, passages: list[Node]) -> list[Node]:
        """Add the notepad pages' passages and the retriever's top passages; deduplicate;
        sort everything into reading order (grouped by page and section)."""
        extra: list[Node] = []
        settings = self.preset.notepad
        if settings and settings.passage_pages and self.notepad:
            for page in self.notepad_pages()[: settings.passage_pages]:
                extra.extend(self.view.passages_of(page, NOTEPAD_PASSAGE_CAP))
        extra.extend(self.retrieved_passages())
        unique = {p.id: p for p in [*passages, *self.admit(extra, Stage.PASSAGE.value)]}
        return sorted(unique.values(), key=self.view.reading_key)

    def retrieved_passages(self) -> list[Node]:
        retriever = self.retriever
        if retriever is None or self.preset.hybrid_k <= 0:
            return []
        ranked_ids = getattr(retriever, "ranked_ids", None)
        if ranked_ids is not None and getattr(retriever, "tree", None) is self.tree:
            # node ids of this very tree: taken through the view's node cache, no key lookups
            found_ids = ranked_ids(self.query.search_text, self.preset.hybrid_k)
            if found_ids is not None:
                return self.view.nodes(found_ids[0].tolist())
        found = []
        for key, _score in retriever.retrieve(self.query.search_text, self.preset.hybrid_k):
            try:
                node = self.tree.node(key)
            except KeyError:
                raise NavigationError(
                    f"the retriever returned {key!r}, which is not in {self.tree.file}"
                ) from None
            found.append(node)
        return found

    async def judge_passages(self, passages: list[Node]) -> list[Scored]:
        settings = self.preset.passages
        passages = self.within_budget(passages)
        self.prepare_finish(passages)
        ranking, stage = await judge_level(self.levels, self.view, "passage", passages, settings,
                                           Stage.PASSAGE.value)
        self.passage_contexts = stage.contexts
        ranked = ranking.top()
        if self.preset.documents.propagate and self.page_scores:
            ranked = self.propagate(ranked)
        close_stage(self.levels, stage, ranked[: max(self.k, self.preset.choice.top)], opened=[])
        return ranked

    def prepare_finish(self, passages: list[Node]) -> None:
        """Leave for the passage stage's wait what its answers will need: the weakest page
        score (propagation) and the passages' text hashes (duplicates)."""
        if self.preset.documents.propagate:
            self.levels.defer(self._note_weakest_page)
        if self.preset.collapse_duplicates:
            self.levels.defer(functools.partial(self.view.plain_hashes, passages))

    def _note_weakest_page(self) -> None:
        scores = self.page_scores
        self._weakest_page = (scores, min(scores.values())) if scores else None

    def within_budget(self, passages: list[Node]) -> list[Node]:
        """The passages the query's `max_input_tokens` leaves room for (with a share kept for
        the choice): those of the best-ranked pages first, back in reading order; a note
        says how many were left out."""
        left = self.levels.remaining_tokens()
        if left is None or not passages:
            return passages
        entries = self.view.entries("passage", passages, self.preset.passages.render)
        overhead = self.judge.count_tokens(self.query_text) + 60
        room = int(left * (1 - CHOICE_RESERVE)) - overhead
        cost = [(e.tokens or 0) + LINE_TOKENS for e in entries]
        if sum(cost) <= room:
            return passages
        rank = {key: -score for key, score in self.page_scores.items()}
        order = sorted(range(len(passages)), key=lambda i: (
            rank.get(self.view.page_of(passages[i]).key, 0.0), i))
        chosen: list[int] = []
        for i in order:
            if cost[i] <= room:
                chosen.append(i)
                room -= cost[i]
        self.trace_note(f"max_input_tokens: {len(passages) - len(chosen):,} of {len(passages):,} "
                        "passages left out of the passage stage (the weakest pages' first)")
        return [passages[i] for i in sorted(chosen)]

    def propagate(self, ranked: list[Scored]) -> list[Scored]:
        """Multiply each passage's P(yes) by its page's (pages not judged count as the
        weakest kept page)."""
        weakest = self._weakest_page  # noted during the passage stage's wait, if it still holds
        neutral = (weakest[1] if weakest is not None and weakest[0] is self.page_scores
                   else min(self.page_scores.values()))
        order = {id(s): i for i, s in enumerate(ranked)}
        for item in ranked:
            page = self.view.page_of(item.node)
            item.score = item.binary * self.page_scores.get(page.key, neutral)
        return sorted(ranked, key=lambda s: (-s.score, order[id(s)]))

    # -- the hits ----------------------------------------------------------------------

    def hit(self, item: Scored, choice: float | None, copies: Sequence[Node] = ()) -> Hit:
        node = item.node
        page = self.view.page_of(node)
        return Hit(
            node=node,
            score=item.score,
            binary=item.binary,
            choice=choice,
            path=self.view.path(node),
            doc_key=page.key,
            metadata=self.view.metadata(node),
            also_at=tuple(Location(copy.key, self.view.page_of(copy).key, self.view.path(copy))
                          for copy in copies),
        )

    # -- metadata filters -----------------------------------------------------------------

    def admit(self, nodes: list[Node], stage: str) -> list[Node]:
        """`nodes` without those the filters rule out (see `Admission`)."""
        return self.admission(nodes, stage)


class Admission:
    """A walk's filter step: `nodes` without those the filters rule out
    (`TreeView.admissible`), counted under `stage` in the trace. Every candidate list of the
    walk passes through here."""

    __slots__ = ("filters", "trace", "view")

    def __init__(self, view: TreeView, filters: Filter | None, trace: Trace) -> None:
        self.view = view
        self.filters = filters
        self.trace = trace

    def __call__(self, nodes: list[Node], stage: str) -> list[Node]:
        if self.filters is None or not nodes:
            return nodes
        kept = self.view.admissible(nodes, self.filters)
        if len(kept) < len(nodes):
            filtered = self.trace.filtered
            filtered[stage] = filtered.get(stage, 0) + len(nodes) - len(kept)
        return kept
