"""What a walk does with its judge waits and its own work between them: reading ahead in
every wait until the groups are held, the collector's young generations collected while a
judge reached over the network answers, kept parts rendered once, header costs kept by
depth, packing that leaves no reference cycle, kept pages looked up without the tree."""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _navigate_helpers import pets_tree, preset
from decisionrag._judges._embedded import EmbeddedJudge
from decisionrag._judges._local import LocalJudge
from decisionrag._judges._testing import ScriptedJudge, SimulatedJudge
from decisionrag._navigate import Navigator, _pack, _render
from decisionrag._navigate._level import LevelEngine, collect_young
from decisionrag._navigate._render import (
    Entry,
    EntryRun,
    EntryRuns,
    RequestPart,
    header_lines,
    header_lines_from,
    render_context,
    shared_depth,
)
from decisionrag._navigate._view import TreeView

# -- the collector's young generations ---------------------------------------------------------


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection while the test runs."""
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)


def test_collect_young_collects_what_is_due_next_and_nothing_when_collection_is_off(
        collections: list[int]) -> None:
    thresholds = gc.get_threshold()
    try:
        gc.set_threshold(thresholds[0], 1_000, thresholds[2])  # the middle one far from due
        collect_young()
        assert collections == [0]
        gc.set_threshold(thresholds[0], 1, thresholds[2])  # one young collection makes it due
        collect_young()
        assert collections[-1] == 1
        collections.clear()
        gc.disable()
        collect_young()
        gc.enable()
        gc.set_threshold(0)  # the program collects when it wants: left alone
        collect_young()
        assert collections == []
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)


def test_only_a_judge_reached_elsewhere_has_its_waits_collected_in() -> None:
    assert EmbeddedJudge.computes_here and LocalJudge.computes_here
    assert ScriptedJudge().computes_here  # answers at once: no wait to use
    simulated = SimulatedJudge(0.0)
    assert not simulated.computes_here
    assert LevelEngine(simulated, "q", "qa").collects_in_waits
    assert not LevelEngine(ScriptedJudge(), "q", "qa").collects_in_waits


def test_a_wait_collects_after_the_requests_went_out() -> None:
    """The young collection runs once the requests have started (their clocks run), before
    the answers come back; a judge that computes here is left alone."""

    async def wait_with(judge: Any) -> list[tuple[bool, bool]]:
        """(the request had started, it was done) at each collection during the wait."""
        engine = LevelEngine(judge, "q", "qa")
        started: list[bool] = []
        pending: asyncio.Future[None]

        async def request() -> None:
            started.append(True)
            await asyncio.sleep(0.01)

        def note(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                seen.append((bool(started), pending.done()))

        seen: list[tuple[bool, bool]] = []
        pending = asyncio.ensure_future(request())
        gc.callbacks.append(note)
        try:
            await engine.use_wait(pending, None)
        finally:
            gc.callbacks.remove(note)
        await pending
        return seen

    seen = asyncio.run(wait_with(SimulatedJudge(0.01)))
    assert seen and all(started and not done for started, done in seen)
    assert asyncio.run(wait_with(ScriptedJudge())) == []


# -- reading ahead in every wait -------------------------------------------------------------


def test_read_ahead_left_unfinished_goes_on_in_the_next_waits_until_done(tmp_path: Path) -> None:
    """The top group level's reading ahead, cut short by its answers, goes on in the walk's
    later waits (pages, passages, choice) and stops being asked once every group is held."""
    with pets_tree(tmp_path / "pets.tree") as tree:
        judge = SimulatedJudge(0.005)
        navigator = Navigator(tree, judge, preset())
        view = navigator.view
        real = view.read_ahead
        calls: list[bool] = []

        async def first_cut_short(*args: Any) -> bool:
            if not calls:  # as if the answers came back before the first group was read
                calls.append(False)
                return False
            finished = await real(*args)
            calls.append(finished)
            return finished

        view.read_ahead = first_cut_short  # type: ignore[method-assign]
        navigator.retrieve("dog food", k=3)
        assert calls == [False, True]  # once more, in the page level's wait, then no more
        groups = tree.children(tree.root.id)
        assert all(group.id in view._children for group in groups)


def test_a_wait_stops_asking_a_finished_idle_read_ahead_and_cancels_on_failure() -> None:
    async def run() -> None:
        engine = LevelEngine(ScriptedJudge(), "q", "qa")

        async def finished(pending: asyncio.Future[Any]) -> bool:
            return True

        async def unfinished(pending: asyncio.Future[Any]) -> bool:
            return False

        async def failing(pending: asyncio.Future[Any]) -> bool:
            raise RuntimeError("read failed")

        loop = asyncio.get_running_loop()
        engine.idle = unfinished
        await engine.use_wait(loop.create_future(), engine.idle)
        assert engine.idle is unfinished
        await engine.use_wait(loop.create_future(), finished)  # another's end is not idle's
        assert engine.idle is unfinished
        engine.idle = finished
        await engine.use_wait(loop.create_future(), engine.idle)
        assert engine.idle is None
        pending = loop.create_future()
        with pytest.raises(RuntimeError, match="read failed"):
            await engine.use_wait(pending, failing)
        assert pending.cancelled()

    asyncio.run(run())


# -- the walk's own work ---------------------------------------------------------------------


def test_kept_pages_held_by_the_view_give_reading_order_without_the_tree(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        view = TreeView(tree, len)
        page = tree.node("d2")
        view.node(tree.root.id)
        view.node(page.parent)  # type: ignore[arg-type]
        passage = tree.passages_of(page)[1]
        view.hold([page])
        reads: list[int] = []
        tree._one = lambda sql, params=(): reads.append(1)  # type: ignore[method-assign]
        assert view.reading_key(passage)[-1] == passage.id
        assert view.node(page.id) is page and reads == []


def test_a_kept_part_renders_its_list_once_and_the_same_context(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [Entry(f"k{i}", f"text {i}", ("Group",), 1) for i in range(5)]
    part = RequestPart.of(entries)
    rendered: list[int] = []
    real = _render.render_list

    def counting(*args: Any) -> str:
        rendered.append(1)
        return real(*args)

    monkeypatch.setattr(_render, "render_list", counting)
    for query in ("Q1?", "Q2?"):
        request = part.request(query, "document", "qa", (), "paper", None, "", rendered=True)
        assert request.context == render_context(query, entries, "document", "qa")
    assert len(rendered) == 1 + 2  # the part's list once, then the two checks' own
    assert part == RequestPart.of(entries)  # the kept text is not part of what it is


def test_header_costs_depend_on_the_shared_depth_and_the_next_path_alone() -> None:
    """Oracle: every pair of header paths, met in any order through one kept table, costs
    what counting its `header_lines` costs."""
    words = ["A", "B", "C"]
    paths = [tuple(p) for n in range(4) for p in itertools.product(words, repeat=n)]
    pairs = list(itertools.product(paths, repeat=2))
    random.Random(7).shuffle(pairs)

    def cost(text: str) -> int:
        return len(text) * 3 + 1

    counted = _pack._header_counter(cost)
    for previous, block in pairs:
        lines = header_lines(previous, block)
        assert lines == header_lines_from(shared_depth(previous, block), block)
        assert counted(previous, block) == sum(map(cost, lines)), (previous, block)


def test_packing_runs_leaves_no_reference_cycle() -> None:
    """A level given as runs is measured by views that do not point back at it: its costs
    are freed when packing ends, not left for the collector."""
    runs = []
    for group in range(6):
        entries = [Entry(f"g{group}-{i}", f"title {i}", (f"Group {group}",), group)
                   for i in range(40)]
        for entry in entries:
            entry.tokens = 5
        run = EntryRun.of(entries)
        assert run is not None
        runs.append(run)
    level = EntryRuns.of(runs)
    gc.collect()
    gc.disable()
    try:
        parts = _pack.pack(level, len, overhead=10, max_candidates=None, max_tokens=300,
                           keep_siblings=False)
        assert len(parts) > 1
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_kept_part_counts_the_list_it_renders() -> None:
    """A part kept across queries keeps the list it renders for a judge that reads context:
    what it costs to keep counts that text (its entries' lines made), else not."""
    entries = [Entry(f"k{i}", "word " * 50, ("Group",), 1) for i in range(4)]
    part = RequestPart.of(entries)
    bare = part.nbytes
    for entry in entries:
        entry.line  # noqa: B018 - made, as for a judge that reads context
    assert part.nbytes >= bare + sum(len(entry.line) for entry in entries)
