"""A level made of kept runs (`NodeRuns` → `EntryRuns`) is cut, listed and rendered exactly
as the same entries given one by one: oracle tests against the plain-list path, and a walk
whose requests are compared with the plain path's."""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path

import pytest

from _navigate_helpers import preset
from decisionrag._judges import ScriptedJudge
from decisionrag._judges._base import estimate_tokens
from decisionrag._judges._testing import hashed_score
from decisionrag._navigate import Navigator, StageSettings, _walk
from decisionrag._navigate._pack import pack
from decisionrag._navigate._render import Entry, EntryRun, EntryRuns, RequestPart, render_context
from decisionrag._navigate._view import NodeRuns
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter

WORDS = ["alpha", "beta", "gamma", "delta", "[Page", "3]", "epsilon\u200b", "zeta", "eta", "theta"]


def family(rng: random.Random, parent: int, label: str, n: int) -> list[Entry]:
    entries = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))
        entry = Entry(f"p{parent}-{i}", text, (label,) if label else (), parent)
        entry.tokens = estimate_tokens(text)
        if rng.random() < 0.05:
            entry.truncated_from = entry.tokens + 10
        if rng.random() < 0.5:
            entry.line  # noqa: B018 - some lines made before, some at rendering
        entries.append(entry)
    return entries


def level(seed: int) -> tuple[list[list[Entry]], list[Entry]]:
    rng = random.Random(seed)
    runs = [family(rng, parent, rng.choice(["", "Cats", "Dogs", f"Group {parent}"]), rng.randint(1, 40))
            for parent in range(rng.randint(1, 12))]
    if len(runs) > 2 and rng.random() < 0.5:  # a parent's pages in two runs in a row
        runs.insert(1, family(rng, 0, runs[0][0].block[0] if runs[0][0].block else "", 3))
    return runs, [e for run in runs for e in run]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("caps", [(None, 400), (7, None), (5, 250), (None, None), (64, 20_000)])
@pytest.mark.parametrize("keep_siblings", [True, False])
def test_runs_pack_and_render_as_the_entries_one_by_one(
        seed: int, caps: tuple[int | None, int | None], keep_siblings: bool) -> None:
    runs, flat = level(seed)
    as_runs = EntryRuns.of([run for run in (EntryRun.of(r) for r in runs) if run is not None])
    assert list(as_runs) == flat and as_runs.keys() == [e.key for e in flat]
    assert [as_runs[i] for i in range(-len(flat), len(flat))] == flat + flat
    assert as_runs[2:-3] == flat[2:-3] and as_runs[::-2] == flat[::-2]
    with pytest.raises(IndexError):
        as_runs[len(flat)]
    assert as_runs.truncated() == [e for e in flat if e.truncated_from is not None]
    max_candidates, max_tokens = caps
    kwargs = dict(overhead=30, max_candidates=max_candidates, max_tokens=max_tokens,
                  keep_siblings=keep_siblings)
    expected = pack(flat, estimate_tokens, **kwargs)  # type: ignore[arg-type]
    found = pack(as_runs, estimate_tokens, **kwargs)  # type: ignore[arg-type]
    assert [list(chunk) for chunk in found] == expected
    assert all(isinstance(chunk, EntryRuns) for chunk in found)
    for chunk, plain in zip(found, expected, strict=True):
        part = RequestPart.of(chunk)
        assert part.candidates == RequestPart.of(plain).candidates
        assert chunk.keys() == [e.key for e in plain]
        assert chunk.truncated() == [e for e in plain if e.truncated_from is not None]
        for kind in ("document", "passage"):
            assert (render_context("Q?", chunk, kind, "qa", notepad=[plain[-1].key])
                    == render_context("Q?", plain, kind, "qa", notepad=[plain[-1].key]))


@pytest.mark.parametrize("seed", range(60))
def test_runs_cut_from_within_pack_as_their_entries(seed: int) -> None:
    """Segments that begin or end inside a run (and empty ones) are measured per run as the
    entries they hold are one by one: the same cuts under both caps."""
    runs, _ = level(seed)
    rng = random.Random(seed)
    segments = []
    for run in (EntryRun.of(r) for r in runs):
        assert run is not None
        start = rng.randint(0, len(run.entries))
        end = rng.randint(start, len(run.entries))
        segments.append((run, start, end))
    flat = [e for run, start, end in segments for e in run.entries[start:end]]
    if not flat:
        return
    as_runs = EntryRuns(segments)
    assert list(as_runs) == flat
    for caps in [(None, 300), (4, 120), (9, None), (None, 60)]:
        for keep_siblings in (True, False):
            kwargs = dict(overhead=25, max_candidates=caps[0], max_tokens=caps[1],
                          keep_siblings=keep_siblings)
            expected = pack(flat, estimate_tokens, **kwargs)  # type: ignore[arg-type]
            assert [list(c) for c in pack(as_runs, estimate_tokens, **kwargs)] == expected  # type: ignore[arg-type]


def test_a_run_is_one_header_path_and_one_sibling() -> None:
    rng = random.Random(0)
    one = family(rng, 1, "Cats", 4)
    assert EntryRun.of(one) is not None and EntryRun.of([]) is None
    assert EntryRun.of([*one, *family(rng, 2, "Cats", 1)]) is None  # another sibling
    other = family(rng, 1, "Dogs", 1)
    assert EntryRun.of([*one, *other]) is None  # another header path
    untold = Entry("x", "text", ("Cats",), 1)  # no token count: packing counts it
    run = EntryRun.of([*one, untold])
    assert run is not None and run.costs is None
    flat = [*one, untold]
    assert [list(c) for c in pack(EntryRuns.of([run]), estimate_tokens, overhead=10, max_candidates=2,
                                  max_tokens=None, keep_siblings=False)] == pack(
        flat, estimate_tokens, overhead=10, max_candidates=2, max_tokens=None, keep_siblings=False)


def grouped_tree(path: Path) -> Tree:
    with TreeWriter(path) as writer:
        for g in range(6):
            for d in range(5 + g):
                passages = [PassageSpec(f"group {g} page {d} passage {i} text", key=f"g{g}d{d}p{i}")
                            for i in range(3)]
                writer.add_document(DocumentSpec(f"Page {g}.{d} title", passages, key=f"g{g}d{d}",
                                                 groups=(f"Group {g}",)))
    return Tree.open(path)


@pytest.mark.parametrize("route_groups", [True, False])
def test_a_walk_sends_what_the_plain_level_sends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 route_groups: bool) -> None:
    """A page level given as runs (the kept groups' pages; every page, in runs of one group,
    when groups are not routed) sends and ranks what the plain list of its pages does."""
    tree = grouped_tree(tmp_path / "t.tree")
    settings = preset(groups=(StageSettings(top_k=4, max_candidates_per_request=3),),
                      documents=StageSettings(top_k=3, max_candidates_per_request=7, rescore_top=4),
                      route_groups=route_groups)

    def walk() -> tuple[list[object], list[tuple[str, float]]]:
        judge = ScriptedJudge(hashed_score)
        navigator = Navigator(tree, judge, settings)
        hits = []
        for question in ("first question", "second question", "first question"):
            result = asyncio.run(navigator.aretrieve(question, k=5))
            hits += [(hit.key, hit.score) for hit in result.hits]
        return [(c.context, c.candidates) for c in judge.binary_calls], hits

    levels: list[type] = []
    made = NodeRuns.__init__

    def counted(self: NodeRuns, runs: list[list[object]]) -> None:
        levels.append(type(self))
        made(self, runs)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeRuns, "__init__", counted)
    with_runs = walk()
    assert levels, "the page level came as runs"
    monkeypatch.setattr(_walk, "NodeRuns", lambda runs: [n for run in runs for n in run])
    assert walk() == with_runs


def test_a_level_of_distinct_nodes_ranks_as_before_and_makes_its_dict_later(tmp_path: Path) -> None:
    from decisionrag._navigate._ranking import Ranking
    from decisionrag._navigate._result import StageTrace

    rng = random.Random(3)
    nodes = list(grouped_tree(tmp_path / "t.tree").documents())
    values = [rng.choice([0.1, 0.5, 0.5, 0.9, float(i % 7) / 7]) for i in range(len(nodes))]
    keys = [n.key for n in nodes]
    eager = Ranking.of(nodes, values, keys)
    lazy = Ranking.of(nodes, values, keys, distinct=True)
    stage = StageTrace("page", 1, len(nodes), keys)
    lazy.share_with(stage)
    assert lazy.waiting and stage._scores is not None and not isinstance(stage._scores, dict)
    settings = StageSettings(top_k=7, max_candidates_per_request=None)
    assert lazy.keep_count(settings) == eager.keep_count(settings)
    assert [(s.node.key, s.score) for s in lazy.top(9)] == [(s.node.key, s.score) for s in eager.top(9)]
    assert lazy.waiting  # the best were read by position
    lazy.scores = {**lazy.scores, keys[0]: 2.0}  # a rescoring pass replaces the dict...
    assert stage.scores == eager.scores and stage.scores[keys[0]] == values[0]  # ...the stage keeps its own
    assert lazy.score_at(0) == 2.0 and not lazy.waiting


def test_a_rescored_level_makes_its_dicts_only_when_asked_each_with_its_own_scores(
        tmp_path: Path) -> None:
    """A rescoring pass over a level whose dict waits leaves both dicts unmade: the stage's,
    when read, holds the judged scores; the ranking's, the rescored ones at their keys; the
    ranking's made before any rescoring is the stage's too. The keys are listed for the
    stage while the judge answers (a level of runs lists them through a callable)."""
    import numpy as np

    from decisionrag._navigate._ranking import Ranking
    from decisionrag._navigate._result import StageTrace

    nodes = list(grouped_tree(tmp_path / "t.tree").documents())
    keys = [n.key for n in nodes]
    values = [((i * 7) % 11) / 11 for i in range(len(nodes))]
    listings: list[int] = []

    def listed() -> list[str]:
        listings.append(1)
        return list(keys)

    ranking = Ranking.of(nodes, values, listed, distinct=True)
    stage = StageTrace("page", 1, len(nodes), [])
    ranking.share_with(stage)
    ranking.list_keys(stage)  # (deferred to the judge's next wait in a walk)
    assert stage.candidates == keys and listings == [1] and ranking.waiting
    positions = np.asarray([2, 5, 9], dtype=np.int64)
    fresh = {keys[i]: 0.99 - i / 100 for i in positions.tolist()}
    ranking.values = ranking.values.copy()
    ranking.values[positions] = list(fresh.values())
    ranking.rescored(positions, fresh)
    assert ranking.waiting and ranking.score_at(5) == fresh[keys[5]] and ranking.score_at(0) == values[0]
    assert stage.scores == dict(zip(keys, values, strict=True))  # the judged ones
    assert ranking.scores == {**dict(zip(keys, values, strict=True)), **fresh}
    assert all(type(v) is float for v in ranking.scores.values()) and listings == [1]

    again = Ranking.of(nodes, values, list(keys), distinct=True)
    shared = StageTrace("page", 1, len(nodes), list(keys))
    again.share_with(shared)
    assert again.scores is shared.scores  # the ranking's made first: the stage's too
    first = StageTrace("page", 1, len(nodes), list(keys))
    Ranking.of(nodes, values, list(keys), distinct=True).share_with(first)
    assert first.scores == dict(zip(keys, values, strict=True))  # the stage's read first


def test_a_page_level_s_scores_are_made_during_the_next_wait(tmp_path: Path) -> None:
    tree = grouped_tree(tmp_path / "t.tree")
    seen: list[int] = []

    class Slow(ScriptedJudge):
        async def binary(self, request):  # type: ignore[no-untyped-def]
            await asyncio.sleep(0.01)
            if re.fullmatch(r"g\d+d\d+p\d+", request.candidates[0].id):  # a passage request
                page_stage = walk_trace[0].stages[1]
                seen.append(len(page_stage.scores) + len(page_stage.candidates))
            return await super().binary(request)

    walk_trace: list[object] = []
    settings = preset(groups=(StageSettings(top_k=4, max_candidates_per_request=None),),
                      documents=StageSettings(top_k=3, max_candidates_per_request=None))
    navigator = Navigator(tree, Slow(hashed_score), settings)
    from decisionrag._navigate import _level

    made = _level.LevelEngine.__init__

    def keep(self: _level.LevelEngine, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        walk_trace.append(self.trace)

    _level.LevelEngine.__init__ = keep  # type: ignore[method-assign]
    try:
        result = asyncio.run(navigator.aretrieve("a question", k=5))
    finally:
        _level.LevelEngine.__init__ = made  # type: ignore[method-assign]
    page = result.trace.stages[1]
    assert page.name == "page" and len(page.scores) == page.n_candidates > 0
    assert seen and seen[0] == 2 * page.n_candidates  # made while the passage request was out
    assert page.candidates == [node.key for node in page.nodes] == list(page.scores)


def test_work_left_for_the_passage_wait_changes_no_hit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Propagation's weakest page and the duplicate hashes, taken during the passage stage's
    wait, give the walk it gives without them."""
    import dataclasses

    tree = grouped_tree(tmp_path / "t.tree")
    settings = preset(groups=(StageSettings(top_k=4, max_candidates_per_request=3),),
                      documents=StageSettings(top_k=3, max_candidates_per_request=5, propagate=True))
    settings = dataclasses.replace(settings, collapse_duplicates=True, hybrid_k=4)

    class Fixed:  # passages of every group, most of whose pages the walk does not judge
        def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
            return [(f"g{g}d{g % 4}p1", 1.0) for g in range(6)][:k]
    noted: list[bool] = []
    note = _walk.Walk._note_weakest_page

    def noting(self: _walk.Walk) -> None:
        note(self)
        noted.append(self._weakest_page is not None)

    def walk() -> list[tuple[str, float]]:
        navigator = Navigator(tree, ScriptedJudge(hashed_score), settings, retriever=Fixed())
        hits = []
        for question in ("first question", "second question"):
            hits += [(hit.key, hit.score) for hit in asyncio.run(navigator.aretrieve(question, k=40)).hits]
        return hits

    monkeypatch.setattr(_walk.Walk, "_note_weakest_page", noting)
    with_notes = walk()
    assert noted and all(noted)
    monkeypatch.setattr(_walk.Walk, "prepare_finish", lambda self, passages: None)
    assert walk() == with_notes
