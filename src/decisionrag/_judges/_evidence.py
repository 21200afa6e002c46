"""The embedded judge's vector evidence over stored rows: a candidate's own similarity to the
query and its best part's, computed for a whole level at once, and the plans kept for
candidate lists that recur query after query (a page level).

The products are the ones `block @ q` computes per candidate, batched per block length, so
the floats are the same bit for bit (one product over all rows stacked would not be: BLAS
rounds a row by where it falls in the matrix).
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._embed import RowIndex, RowSimilarities
from ._base import Candidate, VectorRows

FILL_BYTES = 1 << 20  # a kept plan's rows multiplied at once: about one core's L2 cache
ROWS_PER_PRODUCT = 2_048  # stored rows gathered per product (3 MB of 384-d float32)
_TEXT, _VECTORS = operator.attrgetter("text"), operator.attrgetter("vectors")
_START, _STOP = operator.attrgetter("start"), operator.attrgetter("stop")
_COUNTED = operator.attrgetter("counted")


class RecurringLists:
    """What is worth keeping for a list of candidates that comes back query after query (a
    page level): a list seen once is only remembered by a hash of its key; seen again, its
    plan is made and kept, with the items it was made from (so that the ids in its key stay
    theirs), least recently used dropped first beyond `budget` bytes (keys counted). Lists
    seen once (a passage stage's, or an NQ-sized page level's 16,000 pages, which differ
    query by query) cost an integer each and nothing else."""

    SEEN = 256  # hashes of keys of lists seen once, remembered

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._sketches: OrderedDict[int, None] = OrderedDict()  # `get_listed`'s
        self._kept: OrderedDict[tuple[Any, ...], tuple[Any, Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(tag: tuple[Any, ...], members: Sequence[Any]) -> tuple[Any, ...]:
        """The key of a list: `tag` and its members' ids packed 8 bytes each (a tuple of
        16,000 ints would take half a megabyte)."""
        return (*tag, np.fromiter(map(id, members), np.uint64, len(members)).tobytes())

    def get_listed(self, tag: tuple[Any, ...], members: Sequence[Any], make: Callable[[], Any]) -> Any:
        """`get(key(tag, members), members, make)`, but a list whose sketch (its tag, length
        and first, middle and last members) was never seen is only remembered by it: a long
        list that differs query by query (an NQ-sized page level's 16,000 pages) costs four
        lookups instead of its packed key. A list that recurs is then kept from its third
        sighting on, not its second."""
        n = len(members)
        sketch = hash((*tag, n, *(id(members[i]) for i in (0, n // 2, n - 1)))) if n else 0
        with self._lock:
            if self._first_sighting(self._sketches, sketch):
                return None
            self._sketches.move_to_end(sketch)
        return self.get(self.key(tag, members), members, make)

    def _first_sighting(self, remembered: OrderedDict[int, None], value: int) -> bool:
        """Whether `value` is new to `remembered` (then remembered, the oldest of more than
        `SEEN` forgotten). Under the lock."""
        if value in remembered:
            return False
        remembered[value] = None
        if len(remembered) > self.SEEN:
            remembered.popitem(last=False)
        return True

    def get(self, key: tuple[Any, ...], items: Any, make: Callable[[], Any]) -> Any:
        """The plan kept for `key`, made by `make()` on the list's second sighting; None the
        first time (and for a plan larger than the budget)."""
        seen = hash(key)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return kept[1]
            if self._first_sighting(self._seen, seen):
                return None
        plan = make()
        size = int(getattr(plan, "nbytes", 0)) + sum(len(k) for k in key if isinstance(k, bytes))
        with self._lock:
            if plan is not None and size <= self.budget and key not in self._kept:
                self._kept[key] = (items, plan, size)
                self._bytes += size
                while self._bytes > self.budget:
                    _, (_, _, dropped) = self._kept.popitem(last=False)
                    self._bytes -= dropped
        return plan


@dataclass(frozen=True, slots=True)
class _Stacked:
    """Blocks of one length (a `RowsPlan`'s, kept; or one product of `fill_own_and_best`):
    their rows stacked, and what of them is present worked out once (rows not all zero)."""

    stack: np.ndarray  # (blocks, rows, dim)
    has_parts: np.ndarray  # per block: some part row present
    parts_present: np.ndarray | None  # present[:, 1:], None when every part row is present
    without_own: tuple[tuple[int, np.ndarray], ...]  # blocks with no own row: (block, parts present)

    @classmethod
    def of(cls, stack: np.ndarray) -> _Stacked:
        present = np.any(stack != 0, axis=2)
        parts = present[:, 1:]
        without_own = tuple((b, parts[b].copy()) for b in np.flatnonzero(~present[:, 0]).tolist())
        return cls(stack, parts.any(axis=1), None if parts.all() else parts.copy(), without_own)

    @property
    def nbytes(self) -> int:
        mask = self.parts_present.nbytes if self.parts_present is not None else 0
        return self.stack.nbytes + self.has_parts.nbytes + mask + sum(m.nbytes for _, m in self.without_own)

    def own_and_best(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`own_and_best` of every block, as float64 arrays: one batched product (block b's
        row equals stack[b] @ q exactly); a block without a row of its own takes its parts'
        mean."""
        sims = np.matmul(self.stack, q)
        own = sims[:, 0].astype(np.float64)
        for b, parts_present in self.without_own:
            parts = sims[b, 1:][parts_present]
            own[b] = float(parts.mean()) if parts.size else 0.0
        if sims.shape[1] == 1:
            return own, own
        if self.parts_present is None:
            highest = sims[:, 1:].max(axis=1)
        else:
            highest = np.where(self.parts_present, sims[:, 1:], np.float32(-np.inf)).max(axis=1)
        return own, np.where(self.has_parts, highest.astype(np.float64), own)


@dataclass(frozen=True, slots=True)
class RowsPlan:
    """A list of candidates' stored rows, gathered: per block length, the candidates'
    rows stacked (float32) with which rows are present (all query-independent), and the
    candidates' positions in stack order. `fill` then runs the products of
    `fill_own_and_best`, the same ones, so the same floats, each stack's into its place in
    one flat array of similarities, and reads every block's own and best part from there
    at once (one gather, one segmented maximum), written in one scatter."""

    stacks: tuple[_Stacked, ...]
    order: np.ndarray  # candidate positions, the stacks' blocks in turn
    firsts: np.ndarray  # each block's first row in the flat array, blocks in turn
    segments: np.ndarray  # per block, where its parts begin and end: the maximum's bounds
    has_parts: np.ndarray  # per block: some part row present
    absent: np.ndarray  # flat positions of part rows not present (all zero: never a best)
    without_own: tuple[tuple[int, np.ndarray], ...]  # (block, its present parts' positions)
    nbytes: int
    index: RowIndex | None = None  # which stored rows `fill` multiplies (all of one set)

    @classmethod
    def of(cls, rows_of: Sequence[VectorRows | np.ndarray | None], read_parts: bool
           ) -> RowsPlan | None:
        """The plan of `rows_of`; None when some cannot be gathered (arrays in a request made
        by hand, rows past the stored set), which `fill_own_and_best` reads one by one.
        (One stack per block length: a batched product computes each block on its own,
        however many are stacked, so stacking them all changes no float.)"""
        if not all(rows is None or _gatherable(rows) for rows in rows_of):
            return None
        stacks, order, firsts, absent, has_parts = [], [], [], [], []
        without_own: list[tuple[int, np.ndarray]] = []
        row = block = 0
        groups = _stored_groups(rows_of, read_parts)
        stored_rows, places = [], []
        for source, n, members, starts in groups:
            stacked = _Stacked.of(source.blocks(starts, n))
            stacks.append(stacked)
            order.extend(members)
            first = row + n * np.arange(len(members), dtype=np.int64)
            firsts.append(first)
            stored_rows.append((np.asarray(starts, dtype=np.int64)[:, None] + np.arange(n)).ravel())
            places.append((first[:, None] + np.arange(n)).ravel())
            has_parts.append(stacked.has_parts)
            if stacked.parts_present is not None:
                gone = np.argwhere(~stacked.parts_present)
                absent.append(first[gone[:, 0]] + 1 + gone[:, 1])
            for b, present in stacked.without_own:
                without_own.append((block + b, first[b] + 1 + np.flatnonzero(present)))
            row += n * len(members)
            block += len(members)
        flat_firsts = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
        ends = np.append(flat_firsts[1:], row) if flat_firsts.size else flat_firsts
        segments = np.stack([flat_firsts + 1, ends], axis=1).ravel()
        arrays = (np.asarray(order, dtype=np.int64), flat_firsts, segments,
                  np.concatenate(has_parts) if has_parts else np.zeros(0, bool),
                  np.concatenate(absent) if absent else np.zeros(0, np.int64))
        matrices = {str(getattr(source, "path", "")) for source, *_ in groups}
        index = (RowIndex(matrices.pop(), np.concatenate(stored_rows), np.concatenate(places))
                 if len(matrices) == 1 and "" not in matrices else None)
        size = (sum(a.nbytes for a in arrays) + sum(s.nbytes for s in stacks)
                + (index.nbytes if index is not None else 0))
        return cls(tuple(stacks), *arrays, tuple(without_own), size, index)

    def fill(self, own: np.ndarray, best: np.ndarray, q: np.ndarray) -> RowSimilarities | None:
        """Fill `own` and `best`; the similarities of every row multiplied, by stored row,
        when the rows are all of one stored set (`index`)."""
        if not self.stacks:
            return None
        # one spare element past the end: a last block without parts has an empty segment
        # there, whose (unused) maximum reads it
        sims = np.empty(int(self.segments[-1]) + 1, dtype=np.float32)
        at = 0
        for stacked in self.stacks:
            stack = stacked.stack
            blocks, n, dim = stack.shape
            step = max(1, FILL_BYTES // (n * dim * stack.itemsize))
            for first in range(0, blocks, step):
                part = stack[first:first + step]
                # a byte of each 64-byte cache line read first: the rows come in at streaming
                # speed, and the products, one small BLAS call per block, then find them cached
                np.bitwise_or.reduce(part.reshape(-1).view(np.uint8)[::64])
                rows = len(part) * n
                np.matmul(part, q, out=sims[at:at + rows].reshape(len(part), n))
                at += rows
        shared = None if self.index is None else RowSimilarities(self.index, q, sims[:-1].copy())
        sims[-1] = 0.0
        sims[self.absent] = -np.inf
        mine = sims[self.firsts].astype(np.float64)
        for b, present in self.without_own:
            parts = sims[present]
            mine[b] = float(parts.mean()) if parts.size else 0.0
        highest = np.maximum.reduceat(sims, self.segments)[::2].astype(np.float64)
        own[self.order] = mine
        best[self.order] = np.where(self.has_parts, highest, mine)
        return shared


def _gatherable(rows: VectorRows | np.ndarray) -> bool:
    """Stored rows (`StoredRows`: a `source` with `blocks`), at least one."""
    return hasattr(getattr(rows, "source", None), "blocks") and len(rows) > 0


def _stored_groups(rows_of: Sequence[VectorRows | np.ndarray | None], read_parts: bool
                   ) -> list[tuple[Any, int, list[int], list[int]]]:
    """`rows_of` (`StoredRows` or None) grouped by source and block length: (source,
    length, candidate positions, first rows)."""
    groups: dict[tuple[int, int], tuple[Any, list[int], list[int]]] = {}
    for i, rows in enumerate(rows_of):
        if rows is None:
            continue
        n = len(rows) if read_parts else 1
        source = getattr(rows, "source")  # noqa: B009 - a StoredRows attribute
        _, members, starts = groups.setdefault((id(source), n), (source, [], []))
        members.append(i)
        starts.append(int(getattr(rows, "start")))  # noqa: B009 - a StoredRows attribute
    return [(source, n, members, starts) for (_, n), (source, members, starts) in groups.items()]


def fill_own_and_best(own: np.ndarray, best: np.ndarray,
                       rows_of: Sequence[VectorRows | np.ndarray | None], q: np.ndarray,
                       read_parts: bool) -> None:
    """`own[i]` and `best[i]` for every candidate i with vectors (`own_and_best`'s values,
    bit for bit). Stored rows (`StoredRows`: a `source` with `blocks`) are read per level
    in one gather and multiplied in one product per block length: a batched `np.matmul`
    runs the same matrix-vector product per block as `block @ q` does (one product over
    all rows stacked would not: BLAS rounds a row by where it falls in the matrix, and the
    scores, hence the run files, would change in their last bits). A block is gathered,
    multiplied and let go before the next (an NQ-sized page level's rows would take tens of
    megabytes at once). Other rows (arrays in requests made by hand) go one by one."""
    stored: list[VectorRows | np.ndarray | None] = []
    for i, rows in enumerate(rows_of):
        if rows is not None and not _gatherable(rows):
            own[i], best[i] = own_and_best(rows, q, read_parts)
            rows = None
        stored.append(rows)
    for source, n, members, starts in _stored_groups(stored, read_parts):
        step = max(1, ROWS_PER_PRODUCT // n)
        for at in range(0, len(members), step):  # one block gathered at a time: bounded memory
            chosen = members[at:at + step]
            stacked = _Stacked.of(source.blocks(starts[at:at + step], n))
            own[chosen], best[chosen] = stacked.own_and_best(q)


def own_and_best(rows: VectorRows | np.ndarray, q: np.ndarray, read_parts: bool) -> tuple[float, float]:
    block = np.asarray(rows if read_parts else rows[:1], dtype=np.float32)
    sims = block @ q
    present = np.any(block != 0, axis=1)
    parts = sims[1:][present[1:]]
    if present[0]:
        own = float(sims[0])
    elif parts.size:
        own = float(parts.mean())
    else:
        own = 0.0
    return own, float(parts.max()) if parts.size else own


@dataclass(slots=True)
class Level:
    """A level's candidates as the judge reads them (query-independent): their texts,
    stored rows, row counts, token estimates and where their term counts are stored, and
    `listed`, their ids packed (`RecurringLists.key`), the key the level's plans are kept
    under. Holds the candidates, so that the ids stay theirs."""

    candidates: list[Candidate]
    listed: bytes
    texts: list[str]
    rows_of: list[Any]
    row_counts: np.ndarray
    tokens: np.ndarray  # each text's `estimate_tokens`
    starts: np.ndarray | None  # each candidate's first stored row (None: not all stored)
    counted: list[Any]  # where each text's term counts are stored (`Candidate.counted`)
    _by_start: np.ndarray | None = None  # positions sorted by first row, made on first `find`

    @classmethod
    def of(cls, candidates: list[Candidate], listed: bytes) -> Level:
        texts = list(map(_TEXT, candidates))
        rows_of = list(map(_VECTORS, candidates))
        n = len(rows_of)
        try:  # stored rows' bounds read in C (their `__len__` is a Python call)
            starts = np.fromiter(map(_START, rows_of), np.int64, n)
            counts = np.fromiter(map(_STOP, rows_of), np.int64, n) - starts
        except AttributeError:  # arrays given by hand (or no rows): measured one by one
            counts = np.fromiter((0 if rows is None else len(rows) for rows in rows_of), np.int64, n)
            starts = None
        return cls(candidates, listed, texts, rows_of, counts, token_estimates(texts), starts,
                   list(map(_COUNTED, candidates)))

    @property
    def nbytes(self) -> int:
        arrays = (self.row_counts, self.tokens, self.starts, self._by_start)
        return 16 * len(self.texts) + sum(a.nbytes for a in arrays if a is not None)

    def find(self, rows_of: Sequence[Any]) -> np.ndarray | None:
        """The positions in this level of candidates with the same stored rows as `rows_of`
        (same vectors, same first and last row), or None when one has none there."""
        if self.starts is None or not len(self.starts):
            return None
        n = len(rows_of)
        try:
            starts = np.fromiter(map(_START, rows_of), np.int64, n)
            stops = np.fromiter(map(_STOP, rows_of), np.int64, n)
        except AttributeError:
            return None
        if self._by_start is None:
            self._by_start = np.argsort(self.starts, kind="stable")
        by_start = self._by_start
        at = np.minimum(np.searchsorted(self.starts[by_start], starts), len(by_start) - 1)
        positions = by_start[at]
        if not ((self.starts[positions] == starts).all()
                and (self.starts[positions] + self.row_counts[positions] == stops).all()):
            return None
        found = self.rows_of
        pairs = zip(rows_of, positions.tolist(), strict=True)
        if any(rows.source is not found[p].source for rows, p in pairs):
            return None
        return positions


def token_estimates(texts: list[str]) -> np.ndarray:
    """Each text's `estimate_tokens` (characters / 4, plus one), as an array."""
    return np.fromiter(map(len, texts), np.int64, len(texts)) // 4 + 1
