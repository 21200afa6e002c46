"""Splitting a level into requests: `pack` cuts a level's entries (reading order) into
requests within the judge's caps, of balanced sizes, siblings kept together.

A level given as `EntryRuns` (a page level made of kept families) is measured from its
runs' lists, not entry by entry; the cuts are the same either way.
"""

from __future__ import annotations

import itertools
import operator
import weakref
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from ._render import LINE_TOKENS, Entry, EntryRuns, header_lines, header_lines_from, shared_depth

_TOKENS = operator.attrgetter("tokens")
_BLOCK = operator.attrgetter("block")
_SIBLING = operator.attrgetter("sibling")


def pack(
    entries: Sequence[Entry],
    cost: Callable[[str], int],
    *,
    overhead: int,
    max_candidates: int | None,
    max_tokens: int | None,
    keep_siblings: bool,
) -> list[Sequence[Entry]]:
    """Cut `entries` (reading order) into requests within both caps, of balanced sizes.

    Siblings (same `sibling`) stay in one request unless they alone exceed a cap (then they
    fill requests in order); a request is never empty. `cost(text)` is the judge's token
    count; `overhead` the tokens of the preamble and query that every request repeats.
    Greedy filling decides how many requests are needed; the level is then re-cut into that
    many requests of about equal size (79 candidates at a cap of 50 become 40 + 39, not
    50 + 29), so that no request is the slow one.
    """
    runs = entries if isinstance(entries, EntryRuns) else None  # read run by run
    if max_tokens is None:  # only counts cut a level: its token costs would be read by nothing
        costs = _Costs.uncounted(entries)
    elif runs is not None and _counted(runs):
        costs = _RunCosts(runs, cost)
    else:
        costs = _Costs(entries, cost)
    blocks = _blocks(entries, keep_siblings) if runs is None else _run_blocks(runs, keep_siblings)
    greedy = costs.cut(blocks, overhead, max_candidates, max_tokens)
    n = len(greedy) - 1
    if n >= 2:
        even_candidates = -(-len(entries) // n)
        even_tokens = None
        if max_tokens is not None:
            even_tokens = overhead + -(-costs.total() // n) + _SLACK_TOKENS
        balanced = costs.cut(
            blocks,
            overhead,
            _smaller(max_candidates, even_candidates),
            _smaller(max_tokens, even_tokens),
        )
        if len(balanced) == len(greedy):
            greedy = balanced
    if runs is not None:
        return list(runs.parts(greedy))
    return [list(entries[a:b]) for a, b in itertools.pairwise(greedy)]


def _counted(entries: EntryRuns) -> bool:
    """Whether every run of `entries` knows its entries' token costs."""
    return all(run.costs is not None for run, _, _ in entries.segments)


_SLACK_TOKENS = 40  # lets a balanced request absorb one header line more than the average


class _Costs:
    """Token costs of a level's entries: `line[i]`, entry i's line and question; `follow[i]`,
    the header lines printed before it after its reading-order predecessor (nonzero only where
    the header path changes); `opening(i)`, those printed before it when it opens a request;
    `steps[i]`, the prefix sum of line + follow over the entries before i (so that a run of
    entries is measured, and a request filled, without a loop over its entries)."""

    line: _Indexed
    follow: _Indexed
    steps: _Indexed
    blocks: list[tuple[str, ...]]

    def __init__(self, entries: Sequence[Entry], cost: Callable[[str], int]) -> None:
        tokens = list(map(_TOKENS, entries))
        if any(map(operator.is_, tokens, itertools.repeat(None))):
            tokens = [cost(e.text) if t is None else t for e, t in zip(entries, tokens, strict=True)]
        self.line = list(map(operator.add, tokens, itertools.repeat(LINE_TOKENS)))
        self.blocks = list(map(_BLOCK, entries))
        self.headers: dict[tuple[str, ...], int] = {}
        self.follow = [0] * len(self.line)
        previous: tuple[str, ...] = ()
        start = 0
        header_tokens = _header_counter(cost)
        for block, run in itertools.groupby(self.blocks):
            if block not in self.headers:
                self.headers[block] = header_tokens((), block)
            self.follow[start] = header_tokens(previous, block)
            previous = block
            start += len(list(run))
        self.steps = [0, *itertools.accumulate(map(operator.add, self.line, self.follow))]

    @classmethod
    def uncounted(cls, entries: Sequence[Entry]) -> _Costs:
        """Costs of zero tokens everywhere: what `cut` reads when there is no token cap (the
        boundaries then depend on candidate counts alone)."""
        costs = cls.__new__(cls)
        n = len(entries)
        costs.line, costs.follow, costs.steps = [0] * n, [0] * n, [0] * (n + 1)
        costs.blocks = [()] * n
        costs.headers = {(): 0}
        return costs

    def opening(self, i: int) -> int:
        return self.headers[self.blocks[i]]

    def measure(self, first: int, end: int) -> tuple[int, int]:
        """Entries first..end-1 as one block: their tokens after the first's header lines,
        and those header lines (printed when the block follows its predecessor)."""
        follow = self.follow[first]
        return self.steps[end] - self.steps[first] - follow, follow

    def total(self) -> int:
        return self.steps[-1]

    def cut(
        self,
        blocks: list[tuple[int, int]],
        overhead: int,
        max_candidates: int | None,
        max_tokens: int | None,
    ) -> list[int]:
        """Request boundaries (indexes into the entries, first 0, last len): a block joins
        the current request if it fits there, else opens the next one if it fits alone,
        else is cut entry by entry."""
        bounds = [0]
        count, used = 0, overhead
        for first, end in blocks:
            inner, follow = self.measure(first, end)
            joined = used + inner + follow
            if count and _fits(count + end - first, joined, max_candidates, max_tokens):
                count, used = count + end - first, joined
                continue
            alone = overhead + inner + self.opening(first)
            if _fits(end - first, alone, max_candidates, max_tokens):
                if count:
                    bounds.append(first)
                count, used = end - first, alone
                continue
            count, used = self._fill(first, end, (count, used, overhead), max_candidates, max_tokens, bounds)
        if bounds[-1] != len(self.line) or len(bounds) == 1:
            bounds.append(len(self.line))
        return bounds if len(self.line) else [0]

    def _fill(
        self,
        i: int,
        end: int,
        state: tuple[int, int, int],
        max_candidates: int | None,
        max_tokens: int | None,
        bounds: list[int],
    ) -> tuple[int, int]:
        """Entries i..end-1 into the current request and as many next ones as they need
        (`state`: candidates and tokens in the current request, a new request's tokens)."""
        count, used, overhead = state
        steps = self.steps
        while i < end:
            if count == 0:  # a request's first entry always goes in: never an empty request
                count, used, i = 1, used + self.line[i] + self.opening(i), i + 1
                continue
            last = end if max_candidates is None else min(end, i + max(0, max_candidates - count))
            if max_tokens is not None:  # the last j with steps[j] - steps[i] <= max_tokens - used
                last = min(last, bisect_right(steps, max_tokens - used + steps[i], i, last + 1) - 1)
            if last > i:
                count, used, i = count + last - i, used + steps[last] - steps[i], last
            if i < end:  # entry i does not fit: it opens the next request
                bounds.append(i)
                count, used = 0, overhead
        return count, used


class _RunCosts(_Costs):
    """`_Costs` of a level given as runs, read per run instead of per entry: `line`,
    `follow` and `steps` are views that find an entry's segment and read its run's own
    prefix sums (kept on the run, `EntryRun.cost_steps`), so a page level of 16,000 pages
    in 150 families is measured in 150 steps, and `cut`, which reads only block bounds
    and bisects within the blocks it splits, reads the same integers `_Costs` lists."""

    def __init__(self, entries: EntryRuns, cost: Callable[[str], int]) -> None:
        self.runs = entries
        self.headers: dict[tuple[str, ...], int] = {}
        self.follows: list[int] = []  # header tokens before each segment's first entry
        self.at: list[int] = [0]  # `steps` at each segment's first entry, then the total
        previous: tuple[str, ...] = ()
        header_tokens = _header_counter(cost)
        for run, start, end in entries.segments:
            if start == end:  # no entry: nothing printed (`locate` never lands on it)
                self.follows.append(0)
                self.at.append(self.at[-1])
                continue
            if run.block not in self.headers:
                self.headers[run.block] = header_tokens((), run.block)
            follow = header_tokens(previous, run.block)
            self.follows.append(follow)
            steps = run.cost_steps
            self.at.append(self.at[-1] + follow + steps[end] - steps[start])
            previous = run.block
        # the segment that begins at each start (a block's bounds are segments' starts)
        self.beginning = {at: k for k, at in enumerate(entries.starts)}
        # the per-entry views read a table of their own, not this object: no reference
        # cycle, so a level's costs are freed when packed, not by the next collection
        table = _RunTable(entries, self.follows, self.at)
        self.line = _PerEntry(table, _RunTable.line_at, len(entries))
        self.follow = _PerEntry(table, _RunTable.follow_at, len(entries))
        self.steps = _PerEntry(table, _RunTable.step_at, len(entries) + 1)

    def opening(self, i: int) -> int:
        k = self.beginning.get(i)
        if k is None:
            k, _ = self.runs.locate(i)
        return self.headers[self.runs.segments[k][0].block]

    def measure(self, first: int, end: int) -> tuple[int, int]:
        k, k_end = self.beginning.get(first), self.beginning.get(end)
        if k is None or k_end is None:  # a block cut inside a run (never by `_run_blocks`)
            return super().measure(first, end)
        return self.at[k_end] - self.at[k] - self.follows[k], self.follows[k]

    def total(self) -> int:
        return self.at[-1]


class _RunTable(NamedTuple):
    """What `_RunCosts`' per-entry views read: the runs, each segment's header tokens and
    the prefix sums at each segment's first entry (then the total)."""

    runs: EntryRuns
    follows: list[int]
    at: list[int]

    def line_at(self, i: int) -> int:
        k, at = self.runs.locate(i)
        return self.runs.segments[k][0].costs[at]  # type: ignore[index]  # `_counted`

    def follow_at(self, i: int) -> int:
        k, at = self.runs.locate(i)
        return self.follows[k] if at == self.runs.segments[k][1] else 0

    def step_at(self, i: int) -> int:
        if i == len(self.runs):
            return self.at[-1]
        k, at = self.runs.locate(i)
        run, start, _ = self.runs.segments[k]
        if at == start:
            return self.at[k]
        return self.at[k] + self.follows[k] + run.cost_steps[at] - run.cost_steps[start]


class _PerEntry:
    """A read-only per-entry list of `_RunCosts`, each item computed when read (what
    `bisect` and `cut` index into)."""

    __slots__ = ("_item", "_len", "_table")

    def __init__(self, table: _RunTable, item: Callable[[_RunTable, int], int], length: int) -> None:
        self._table, self._item, self._len = table, item, length

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self._len:
            raise IndexError("index out of range")
        return self._item(self._table, index)


class _Indexed(Protocol):
    """What `_Costs` reads of its per-entry lists: a list, or a `_PerEntry`."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> int: ...


# header costs (`_header_counter`), kept per cost function while it lives (a view's counter
# lives with its navigator; a bound method, made anew at each reading, keeps nothing)
_HeaderChange = tuple[int, tuple[str, ...]]  # (headers shared with the previous path, next path)
_HEADER_TOKENS: weakref.WeakKeyDictionary[Callable[[str], int], dict[_HeaderChange, int]] = (
    weakref.WeakKeyDictionary())
_HEADER_TOKENS_KEPT = 65_536  # header changes kept per cost function, at most


def _header_counter(cost: Callable[[str], int]) -> Callable[[tuple[str, ...], tuple[str, ...]], int]:
    """What the header lines printed between a previous header path and the next cost, for
    `cost`, kept: a page level passes the same header runs query after query (150 at NQ
    size), each line otherwise cleaned and counted again. The table is looked up once per
    level (a level given as runs asks twice per run)."""
    try:
        kept = _HEADER_TOKENS.setdefault(cost, {})
    except TypeError:  # a counter that takes no weak reference: counted each time
        return lambda previous, block: sum(cost(line) for line in header_lines(previous, block))

    def counted(previous: tuple[str, ...], block: tuple[str, ...]) -> int:
        # keyed by the shared depth, not the previous path: a page level's families follow
        # each other in a different order each query, yet print the same lines
        key = (shared_depth(previous, block), block)
        found = kept.get(key)
        if found is None:
            found = sum(cost(line) for line in header_lines_from(*key))
            if len(kept) >= _HEADER_TOKENS_KEPT:
                kept.clear()
            kept[key] = found
        return found

    return counted


def _smaller(cap: int | None, other: int | None) -> int | None:
    if cap is None:
        return other
    return cap if other is None else min(cap, other)


def _fits(n: int, tokens: int, max_candidates: int | None, max_tokens: int | None) -> bool:
    return (max_candidates is None or n <= max_candidates) and (max_tokens is None or tokens <= max_tokens)


def _blocks(entries: Sequence[Entry], keep_siblings: bool) -> list[tuple[int, int]]:
    """Index ranges that should share a request: runs of siblings, or (without
    `keep_siblings`) the whole level, which `cut` then fills entry by entry."""
    if not keep_siblings:
        return [(0, len(entries))] if entries else []
    blocks: list[tuple[int, int]] = []
    start = 0
    for _, run in itertools.groupby(map(_SIBLING, entries)):
        end = start + len(list(run))
        blocks.append((start, end))
        start = end
    return blocks


def _run_blocks(entries: EntryRuns, keep_siblings: bool) -> list[tuple[int, int]]:
    """`_blocks` read from `entries`' runs: one run's entries share a sibling id."""
    if not keep_siblings:
        return [(0, len(entries))] if entries else []
    blocks: list[tuple[int, int]] = []
    start = 0
    sibling: object = object()
    for run, first, end in entries.segments:
        if first == end:
            continue
        if blocks and run.sibling == sibling:
            blocks[-1] = (blocks[-1][0], start + end - first)
        else:
            blocks.append((start, start + end - first))
        sibling = run.sibling
        start += end - first
    return blocks
