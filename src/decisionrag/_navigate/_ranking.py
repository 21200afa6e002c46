"""Ranking a judged level and deciding what survives it: pruning and the rescoring pass.

A level's nodes are judged by the `LevelEngine` (`_level`); here their scores become a
`Ranking` (best first, ties in reading order), the level's budget (`StageSettings`) says
how many are kept, and a level that was split into several requests has its pooled top N
rescored together in one request (`rescore`) before keeping, so candidates judged in
different contexts are compared in one.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._tree import Node, NodeKind
from ._config import POOLED, StageSettings
from ._level import LevelEngine, ReadAhead
from ._render import EntryRuns, Kind
from ._result import Stage, StageTrace
from ._view import NodeRuns, TreeView

_KEY = operator.attrgetter("key")


@dataclass(slots=True)
class Scored:
    """A judged candidate: its node, its own P(yes) and its ranking score."""

    node: Node
    binary: float
    score: float


class Ranking:
    """A judged level: its nodes in reading order and their scores (`values` in that order).
    Best first means by descending score, ties in reading order; `order` fixes that order
    when it is not the scores' (after a rescoring pass). Node lists and `Scored` items are
    made only for the prefix a caller keeps (levels can be 16,000 pages).

    A level of distinct nodes (`Ranking.of(..., distinct=True)`: their keys unique) makes
    its `scores` dict on first use: its best are read by position, its keys are listed while
    the judge answers the next level (`LevelEngine.defer`), and the dict of a page level's
    16,000 scores (its stage's too) is made only if something asks for it."""

    __slots__ = ("_keys", "_raw", "_scores", "_stage", "nodes", "order", "values")

    def __init__(self, nodes: list[Node], scores: dict[str, float] | None,
                 values: npt.NDArray[np.float64],
                 order: npt.NDArray[np.int64] | list[int] | None = None) -> None:
        self.nodes = nodes
        self._scores = scores
        self.values = values
        self.order: npt.NDArray[np.int64] | list[int] | RescoredOrder | None = order
        self._keys: Sequence[str] | Callable[[], list[str]] = ()
        self._raw: Sequence[float] | npt.NDArray[np.float64] = ()
        self._stage: StageTrace | None = None  # given the scores when they are made

    @classmethod
    def of(cls, nodes: list[Node], values: Sequence[float],
           keys: Sequence[str] | Callable[[], list[str]] | None = None,
           *, distinct: bool = False) -> Ranking:
        """`nodes` judged `values`; `keys`, their keys when already listed (a stage's
        candidates: a page level's 16,000 keys are not read again), or what lists them.
        `distinct`: the nodes are distinct nodes of one tree, so their keys are unique (the
        dict can wait; listed keys then go to the stage with it, see `share_with`)."""
        array = np.asarray(values, dtype=np.float64)
        if distinct and keys is not None:
            ranking = cls(nodes, None, array)
            ranking._keys, ranking._raw = keys, values
            return ranking
        named = map(_KEY, nodes) if keys is None else keys() if callable(keys) else keys
        return cls(nodes, dict(zip(named, values, strict=True)), array)

    @property
    def scores(self) -> dict[str, float]:
        """Each key's score (made now if it was left for later)."""
        if self._scores is None:
            stage = self._stage
            if stage is not None:
                self.list_keys(stage)
            self._scores = _judged_scores(self._keys, self._raw)  # (keys listed if no stage waits)
            self._keys, self._raw = (), ()
            self._stage = None
            if stage is not None:
                stage.scores = self._scores
        return self._scores

    @scores.setter
    def scores(self, scores: dict[str, float]) -> None:
        self.scores  # noqa: B018 - a stage waiting for the judged scores gets them first
        self._scores = scores

    @property
    def waiting(self) -> bool:
        """Whether the scores dict is still to be made."""
        return self._scores is None

    def share_with(self, stage: StageTrace) -> None:
        """Let `stage` hold the scores as judged: this ranking's dict, now or once made (before
        a rescoring pass changes it); or, when the stage's are read first, a dict of their own
        made then."""
        if self._scores is not None:
            stage.scores = self._scores
            return
        self._stage = stage
        # (neither the stage nor this ranking in the maker: a finished walk is in no cycle)
        stage.scores_when_read(functools.partial(_judged_scores, self._keys, self._raw))

    def list_keys(self, stage: StageTrace) -> None:
        """List the keys left to a callable, as the candidates of `stage` (whose list waited
        for them too)."""
        if callable(self._keys):
            self._keys = stage.candidates = listed = self._keys()
            if self._stage is stage and self._scores is None:  # its dict, when read, from them
                stage.scores_when_read(functools.partial(_judged_scores, listed, self._raw))

    def rescored(self, positions: npt.NDArray[np.int64], fresh: dict[str, float]) -> None:
        """Take the rescored scores (`fresh`, by key) of the nodes at `positions` (distinct
        keys), whose new values `values` already holds; the stage that shared the judged
        scores keeps those. A dict not yet made is made with them when first asked for."""
        if self._scores is not None:
            self.scores = {**self._scores, **fresh}  # a new dict: the stage keeps its own
            return
        self._stage = None
        self._raw = self.values

    def score_at(self, position: int) -> float:
        """The score of the node at `position` (its key's)."""
        if self._scores is None:  # keys unique: the position's own value
            return float(self._raw[position])
        return self._scores[self.nodes[position].key]

    def positions(self, n: int | None = None) -> list[int]:
        if isinstance(self.order, RescoredOrder):
            return self.order.prefix(n)
        if self.order is not None:
            order = self.order if n is None else self.order[:n]
            return order if isinstance(order, list) else order.tolist()
        return best_first(self.values, n)

    def ranked(self, n: int | None = None) -> list[Node]:
        return list(map(self.nodes.__getitem__, self.positions(n)))

    def top(self, n: int | None = None) -> list[Scored]:
        found = []
        for position in self.positions(n):
            score = self.score_at(position)
            found.append(Scored(self.nodes[position], score, score))
        return found

    def keep_count(self, settings: StageSettings) -> int:
        """How many survive: the level's budget (pruning)."""
        return settings.keep_count(len(self.nodes), [self.score_at(i) for i in self.positions(1)])


def _judged_scores(keys: Sequence[str] | Callable[[], list[str]],
                   judged: Sequence[float] | npt.NDArray[np.float64]) -> dict[str, float]:
    """A level's scores by key as judged (a stage's dict, made when first read)."""
    values = judged.tolist() if isinstance(judged, np.ndarray) else judged
    return dict(zip(keys() if callable(keys) else keys, values, strict=True))


def best_first(values: npt.NDArray[np.float64], n: int | None = None) -> list[int]:
    """Positions of the `n` (default all) best `values`: by descending value, ties in their
    given (reading) order. In numpy: Python's sort of 16,000 pages compares float objects
    scattered over the heap, and a page level keeps only its top 30 (partitioned first)."""
    negated = -values
    if n is not None and n < len(negated):
        if n <= 0:
            return []
        cut = np.partition(negated, n - 1)[n - 1]
        if cut == cut:  # (a NaN n-th, which sorts last, compares with nothing: sorted in full)
            chosen = np.flatnonzero(negated <= cut)  # the n best and all tied with the n-th
            best: list[int] = chosen[np.argsort(negated[chosen], kind="stable")][:n].tolist()
            return best
        first: list[int] = np.argsort(negated, kind="stable")[:n].tolist()
        return first
    order: list[int] = np.argsort(negated, kind="stable").tolist()
    return order


async def judge_level(
    levels: LevelEngine,
    view: TreeView,
    kind: Kind,
    nodes: list[Node],
    settings: StageSettings,
    name: str,
    notepad: Sequence[str] = (),
    read_ahead: ReadAhead | None = None,
) -> tuple[Ranking, StageTrace]:
    """Judge `nodes` (reading order) as `view` renders them and rank them best first, ties
    in reading order; a split level's pooled top `settings.rescore_top` is rescored."""
    if not nodes:
        stage = levels.new_stage(name, [])
        levels.trace.stages.append(stage)
        return Ranking([], {}, np.zeros(0)), stage
    entries = view.entries(kind, nodes, settings.render)
    if isinstance(entries, EntryRuns):  # its keys listed with its scores, after its requests
        stage = levels.new_stage(name, [], len(entries))
        values = await levels.judge_entries(stage, kind, entries, settings, notepad, read_ahead)
        ranking = Ranking.of(nodes, values, entries.keys, distinct=True)
    else:
        stage = levels.new_stage(name, list(map(_KEY, nodes)))
        values = await levels.judge_entries(stage, kind, entries, settings, notepad, read_ahead)
        ranking = Ranking.of(nodes, values, stage.candidates, distinct=isinstance(nodes, NodeRuns))
    # shared, not copied: what changes a ranking's scores later (`rescore`, recovery in the
    # walk) replaces its dict, so the stage keeps the scores it was judged with
    ranking.share_with(stage)
    stage.nodes = nodes
    if ranking.waiting:  # its keys listed while the judge answers; its dict when first asked for
        levels.defer(functools.partial(ranking.list_keys, stage))
    if settings.rescore_top and stage.requests > 1:
        stage = await rescore(levels, view, stage, kind, ranking, settings.rescore_top, notepad)
    return ranking, stage


async def rescore(levels: LevelEngine, view: TreeView, first: StageTrace, kind: Kind,
                  ranking: Ranking, n: int, notepad: Sequence[str]) -> StageTrace:
    """Rescore the pooled top `n` of a split level together, with their full descriptions,
    in reading order; the rescored ones then rank first, by their new scores. A level whose
    scores dict waits (distinct keys) has it made while the judge answers (`defer`): only
    the merge with the fresh scores needs it."""
    unique = ranking.waiting  # distinct keys (else: keys that repeat, their last score counts)
    if not unique:
        unique = len(ranking.scores) == len(first.candidates)
    top = ranking.positions(n)
    best = [ranking.nodes[i] for i in top]
    first.kept = [(node.key, ranking.score_at(i)) for i, node in zip(top, best, strict=True)]
    first.titles = {node.key: display(node) for node in best}
    levels.trace.stages.append(first)
    reading = [ranking.nodes[i] for i in sorted(top)]
    stage = levels.new_stage(Stage.rescore(first.name), list(map(_KEY, reading)))
    entries = view.entries(kind, reading, "description")
    values = await levels.judge_entries(stage, kind, entries, POOLED, notepad)
    fresh = dict(zip(map(_KEY, reading), values, strict=True))
    stage.scores, stage.nodes = fresh, reading
    if unique:
        rescored = np.asarray(sorted(top), dtype=np.int64)  # `reading`'s positions
        ranking.values = ranking.values.copy()
        ranking.values[rescored] = values
        ranking.rescored(rescored, fresh)
        ranking.order = RescoredOrder(ranking.values, rescored)
        return stage
    ranking.scores = {**ranking.scores, **fresh}  # a new dict: `first` keeps its own
    keys = first.candidates  # the keys of `ranking.nodes`
    ranking.values = np.fromiter(map(ranking.scores.__getitem__, keys), np.float64, len(keys))
    order = ranking.positions()
    ranking.order = [i for i in order if keys[i] in fresh] + [i for i in order if keys[i] not in fresh]
    return stage


def rescored_first(values: npt.NDArray[np.float64], rescored: npt.NDArray[np.int64]
                   ) -> npt.NDArray[np.int64]:
    """The positions of `values`, best first (ties in reading order), with the `rescored`
    positions (ascending) moved to the front, each part in that order: `best_first` of
    each part, and nothing listed in Python."""
    others = _not_rescored(len(values), rescored)
    return np.concatenate([rescored[np.argsort(-values[rescored], kind="stable")],
                           others[np.argsort(-values[others], kind="stable")]])


def _not_rescored(n: int, rescored: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The positions below `n` that are not in `rescored`, ascending."""
    rest = np.ones(n, dtype=bool)
    rest[rescored] = False
    return np.flatnonzero(rest)


class RescoredOrder:
    """`rescored_first`'s order, made as far as it is read: the walk reads the first 30 or so
    of a page level's thousands of positions (keeping, recovery), and sorts no more."""

    __slots__ = ("_values", "first", "rescored")

    def __init__(self, values: npt.NDArray[np.float64], rescored: npt.NDArray[np.int64]) -> None:
        self._values = values
        self.rescored = rescored
        self.first = rescored[np.argsort(-values[rescored], kind="stable")]

    def prefix(self, n: int | None = None) -> list[int]:
        """The first `n` positions (all when None)."""
        wanted = len(self._values) if n is None else max(n, 0)
        if wanted <= len(self.first):
            return self.first[:wanted].tolist()
        others = _not_rescored(len(self._values), self.rescored)
        best = others[best_first(self._values[others], wanted - len(self.first))]
        return [*self.first.tolist(), *best.tolist()]


def display(node: Node) -> str:
    """How the trace names a kept candidate: a passage's text, a section's heading path,
    otherwise the node's label."""
    if node.kind == NodeKind.PASSAGE:
        return node.text
    if node.kind == NodeKind.SECTION:
        return " > ".join(node.heading)
    return node.label


def close_stage(levels: LevelEngine, stage: StageTrace, kept: Sequence[Scored],
                opened: list[str]) -> None:
    """Record on `stage` what was kept (and shown as titles) and opened."""
    stage.filtered = levels.trace.filtered.get(stage.name, 0)
    stage.kept = [(s.node.key, s.score) for s in kept]
    stage.opened = opened
    stage.titles = {s.node.key: display(s.node) for s in kept}
    if stage not in levels.trace.stages:
        levels.trace.stages.append(stage)
