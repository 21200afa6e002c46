"""The Navigator: Algorithm 1 of the paper, generalised, over a tree store and a judge.

It holds what outlives one query: the tree's `TreeView` (caches, reading order), the judge,
the preset and the optional hybrid retriever. Each retrieval is a `Walk` (the stages),
whose levels the `LevelEngine` judges.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from .._deadline import QueryDeadline, active_deadline
from .._judges import Judge
from .._memory import release_freed
from .._query import Query, Turn
from .._sync import run_sync
from .._tree import Tree
from .._tree._vectors import (
    NodeVectors,
    VectorsError,
    available_sets,
    open_query_vectors,
    read_lexicon_terms,
)
from .._words import Lexicon, TermRows
from ._config import Preset, get_preset
from ._filters import Filter, parse_filters
from ._render import candidate_budget
from ._result import Result
from ._retriever import Retriever
from ._view import CHILDREN_CACHE_NODES, READ_AHEAD_SHARE, Children, TreeView
from ._walk import Walk

# A walk that judged this many candidates (an NQ-sized tree's 17,500: its page level is
# 16,293) hands the memory it freed back to the system after it (2 ms of a 430 ms walk there;
# a 3,939-page level's walk of 50 ms does not).
RELEASE_AFTER_CANDIDATES = 10_000

__all__ = ["CHILDREN_CACHE_NODES", "READ_AHEAD_SHARE", "Children", "Navigator", "Retriever"]


def stored_vectors(tree: Tree, judge: Judge) -> NodeVectors | None:
    """The tree's vectors in the judge's space, or None when the judge reads text only.
    Vectors of another model are refused, and of another precision unless the judge's is
    float32 (`open_query_vectors`); a tree without vectors warns once (the judge then embeds
    candidate texts at query time)."""
    space = judge.reads.vectors
    if space is None:
        return None
    try:
        return open_query_vectors(tree, model=space.model, precision=space.precision)
    except VectorsError:
        if available_sets(tree.file):
            raise
        warnings.warn(f"{tree.file} has no stored vectors, so {judge.name} embeds every "
                      f"candidate at query time (slow); store them with `decisionrag vectors "
                      f"{tree.file}`", RuntimeWarning, stacklevel=3)
        return None


def stored_lexicon(tree: Tree) -> Lexicon | None:
    """The corpus's word statistics stored with its vectors (None when absent), with the
    passages' term counts when they are stored too."""
    found = read_lexicon_terms(tree.file, tree.meta)
    if found is None or not found[0]:
        return None
    text, arrays = found
    lexicon = Lexicon.from_json(text)
    if arrays is not None:
        lexicon.rows = TermRows.stored(list(lexicon.frequencies), arrays)
    return lexicon


class Navigator:
    """Walks `tree` with `judge` under `preset` (a name from PRESET_NAMES, or a Preset).

    >>> navigator = Navigator(Tree.open("corpus.tree"), load_judge("embedded"), preset="auto")
    >>> result = navigator.retrieve("How do I renew my passport?", k=10)

    `retriever` (optional) adds its top passages to the passage stage (hybrid candidates);
    `concurrency` bounds the requests in flight within one query (None: the judge's own bound).
    """

    def __init__(
        self,
        tree: Tree,
        judge: Judge,
        preset: str | Preset = "auto",
        *,
        retriever: Retriever | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.tree = tree
        self.judge = judge
        self.preset = get_preset(preset, tree, judge)
        self.retriever = retriever
        self.concurrency = concurrency
        vectors = stored_vectors(tree, judge)
        lexicon = stored_lexicon(tree) if judge.reads.statistics else None
        self.view = TreeView(tree, judge.count_tokens, candidate_budget(judge.limits.max_tokens),
                             vectors=vectors, lexicon=lexicon, renders=judge.reads.context)

    def __repr__(self) -> str:
        return f"<Navigator {self.tree.file.name} judge={self.judge.name} preset={self.preset.name}>"

    # -- public API -----------------------------------------------------------------------

    async def aretrieve(
        self,
        query: str | Query,
        history: Sequence[Turn | dict[str, Any]] | None = None,
        k: int = 10,
        notepad: Sequence[str] | None = None,
        filters: Mapping[str, Any] | Filter | None = None,
        *,
        deadline: float | QueryDeadline | None = None,
        max_input_tokens: int | None = None,
    ) -> Result:
        """Rank passages for `query`: walk the tree, judge the passages, rerank the top.

        `filters` (see `decisionrag._navigate._filters`) keep only passages whose metadata
        (their document's, overlaid with their own) match; a group or document that no
        document below it can match is removed before it is judged.

        `deadline` (seconds, or a `QueryDeadline` to watch from outside) bounds the whole
        query: every judge request, retry and wait fits in it, or `DeadlineExceeded` names the
        stage that was running. Without one, a `QueryDeadline` already active applies.

        `max_input_tokens` bounds what the whole query sends: the passage stage and the
        choice shortlist shrink to fit it (the trace says by how much); a group, page or
        heading level that alone does not fit is refused with a `NavigationError`."""
        walk = self._walk(Query.of(query, history).check(), k, tuple(notepad or ()),
                          parse_filters(filters), max_input_tokens)
        result = await within_deadline(walk, walk.retrieve(), deadline)
        if sum(stage.n_candidates for stage in result.trace.stages) >= RELEASE_AFTER_CANDIDATES:
            release_freed()  # what the big levels freed, back to the system (`_memory`)
        return result

    def retrieve(
        self,
        query: str | Query,
        history: Sequence[Turn | dict[str, Any]] | None = None,
        k: int = 10,
        notepad: Sequence[str] | None = None,
        filters: Mapping[str, Any] | Filter | None = None,
        *,
        deadline: float | QueryDeadline | None = None,
        max_input_tokens: int | None = None,
    ) -> Result:
        """The synchronous twin of `aretrieve` (safe inside a running event loop too)."""
        return run_sync(self.aretrieve(query, history, k, notepad, filters, deadline=deadline,
                                       max_input_tokens=max_input_tokens))

    async def arerank(self, query: str | Query, passage_ids: Sequence[str], k: int = 10,
                      *, deadline: float | QueryDeadline | None = None) -> Result:
        """Only the last stages over the given passages: binary judgments in shared contexts
        (grouped by page and section, in reading order), then the multiple-choice rerank."""
        passages = [self.view.passage(key) for key in dict.fromkeys(passage_ids)]
        walk = self._walk(Query.of(query).check(), k, ())
        return await within_deadline(walk, walk.rerank(passages), deadline)

    def rerank(self, query: str | Query, passage_ids: Sequence[str], k: int = 10,
               *, deadline: float | QueryDeadline | None = None) -> Result:
        return run_sync(self.arerank(query, passage_ids, k, deadline=deadline))

    def warm(self) -> int:
        """Read every group's children and build their candidate entries now, so that later
        queries read nothing from the tree on the group and page levels (a server calls
        this once at start-up; the NQ shape's 109,000 groups and pages take about a second).
        Stops when the caches are READ_AHEAD_SHARE full; returns the number of nodes cached."""
        return self.view.warm(self.preset)

    def _walk(self, query: Query, k: int, notepad: tuple[str, ...],
              filters: Filter | None = None, max_input_tokens: int | None = None) -> Walk:
        return Walk(self.view, self.judge, self.preset, query, k, notepad,
                    retriever=self.retriever, concurrency=self.concurrency, filters=filters,
                    max_input_tokens=max_input_tokens)


async def within_deadline(
    walk: Walk, work: Coroutine[Any, Any, Result], deadline: float | QueryDeadline | None
) -> Result:
    """Run `work` (one walk) inside `deadline` (seconds or a `QueryDeadline`; else the one
    already active); a backstop timer cuts what the HTTP layer cannot (a local judge)."""
    outer = active_deadline()
    if deadline is None and outer is None:
        return await work
    scope = deadline if isinstance(deadline, QueryDeadline) else (
        QueryDeadline(deadline) if deadline is not None else outer)
    assert scope is not None
    with scope if scope is not outer else nullcontext(scope):
        limit = scope.remaining()
        try:
            async with asyncio.timeout(None if limit == float("inf") else max(limit, 0.0)):
                return await work
        except TimeoutError as exc:
            raise scope.expired_error(walk.judge.name, f"during the {walk.current_stage} stage") from exc
