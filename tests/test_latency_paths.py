"""The fast paths behind navigation latency: the simulated judge, the store's row path,
the Navigator's warm caches, and request splitting that jumps over whole runs."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from _navigate_helpers import pets_tree, preset
from decisionrag._errors import JudgeConfigError
from decisionrag._judges import BinaryRequest, Candidate, ChoiceRequest, Limits, load_judge
from decisionrag._judges._base import estimate_tokens
from decisionrag._judges._testing import HOSTED_LIMITS, SimulatedJudge, hashed_score
from decisionrag._navigate import Navigator
from decisionrag._navigate._pack import pack
from decisionrag._navigate._render import Entry
from decisionrag._tree import Node, NodeKind


def request(n: int, query: str = "q") -> BinaryRequest:
    candidates = tuple(Candidate(f"c{i}", f"text {i}") for i in range(n))
    return BinaryRequest("context", tuple(f"Q{i}?" for i in range(n)), query, candidates)


# -- the simulated judge ----------------------------------------------------------------------


def test_simulated_defaults_model_a_hosted_judge() -> None:
    judge = load_judge("simulated:latency=0.05")
    assert isinstance(judge, SimulatedJudge)
    assert judge.limits == HOSTED_LIMITS
    assert (judge.limits.max_questions, judge.limits.max_tokens) == (None, 64_000)
    result = judge.binary_sync(request(3, "where"))
    expected = [hashed_score("where", Candidate(f"c{i}", "")) for i in range(3)]
    assert result.probabilities == expected and len(set(expected)) == 3


def test_hashed_score_depends_on_query_and_id_only() -> None:
    a = hashed_score("q", Candidate("x", "one text"))
    assert a == hashed_score("q", Candidate("x", "another text"))
    assert 0.0 <= a < 1.0
    assert len({hashed_score(f"q{i}", Candidate("x", "")) for i in range(50)}) > 40


def test_limits_from_the_id() -> None:
    judge = load_judge("simulated:latency=0.1,max_questions=64,max_tokens=32000,concurrency=4")
    assert judge.limits.max_questions == 64 and judge.limits.max_tokens == 32_000
    only_questions = load_judge("simulated:max_questions=10")
    assert only_questions.limits.max_questions == 10 and only_questions.limits.max_tokens == 64_000


@pytest.mark.parametrize(
    "judge_id",
    ["simulated:max_questions=0", "simulated:max_tokens=many", "simulated:latency=-1",
     "simulated:latency=nan", "simulated:concurrency=0"],
)
def test_bad_numbers_are_config_errors(judge_id: str) -> None:
    with pytest.raises(JudgeConfigError, match="simulated judge"):
        load_judge(judge_id)


def test_latency_includes_the_judges_own_compute() -> None:
    def slow(query: str, candidate: Candidate) -> float:
        time.sleep(0.01)  # 30 candidates: 0.3 s of "compute" inside a 0.3 s latency
        return 0.5

    started = time.perf_counter()
    for i in range(30):
        slow("q", Candidate(f"c{i}", ""))
    compute = time.perf_counter() - started  # the compute alone, on this machine, now
    latency = 0.3
    judge = SimulatedJudge(latency, scores=slow)
    started = time.perf_counter()
    result = judge.binary_sync(request(30))
    elapsed = time.perf_counter() - started
    # overlapped, the request takes max(latency, compute) ~ 0.3 s; added, latency + compute
    # ~ 0.6 s. Measured as a ratio of the additive time, so a loaded machine cannot break it.
    additive = latency + compute
    assert latency <= elapsed < 0.75 * additive
    assert latency <= result.usage.seconds < 0.75 * additive


def test_a_request_takes_its_latency_not_the_timers_lateness() -> None:
    """asyncio's timers wake late (0.2-0.9 ms here: epoll's whole milliseconds, the kernel's
    slack); the simulated judge yields the last stretch instead, as an answer arriving on a
    socket would wake the loop at once. Never early; the best of 20 within 0.1 ms."""
    judge = SimulatedJudge(0.01)
    late = [judge.binary_sync(request(1)).usage.seconds - judge.latency for _ in range(20)]
    assert min(late) >= 0.0 and min(late) < 1e-4


def test_requests_sent_together_take_one_latency_and_slower_compute_shows() -> None:
    judge = SimulatedJudge(0.1)

    async def many() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(judge.binary(request(200)) for _ in range(30)))
        return time.perf_counter() - started

    # 30 requests in flight at once: one latency, not 30 (at most a quarter of serial time)
    assert asyncio.run(many()) < 0.25 * 30 * judge.latency
    overloaded = SimulatedJudge(0.01, scores=lambda q, c: time.sleep(0.001) or 0.5)
    started = time.perf_counter()
    overloaded.binary_sync(request(30))  # 0.03 s of compute > 0.01 s latency
    assert time.perf_counter() - started >= 0.03


def test_bounded_concurrency_serves_in_waves() -> None:
    judge = SimulatedJudge(0.05, concurrency=2)

    async def four() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(judge.binary(request(1)) for _ in range(4)))
        return time.perf_counter() - started

    assert asyncio.run(four()) >= 0.1


def test_choice_answers_sum_to_one() -> None:
    judge = SimulatedJudge(0.0)
    candidates = (Candidate("a", ""), Candidate("b", ""))
    result = judge.choice_sync(ChoiceRequest("ctx", "which?", ("A", "B"), "q", candidates))
    assert sum(result.probabilities) == pytest.approx(1.0)


# -- the store's row path ---------------------------------------------------------------------


def test_nodes_read_from_the_store_are_ordinary_read_only_nodes(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        for node in tree.subtree(tree.node("d2").id):
            rebuilt = Node(**{f.name: getattr(node, f.name) for f in dataclasses.fields(Node)})
            assert node == rebuilt and repr(node) == repr(rebuilt)
            with pytest.raises(dataclasses.FrozenInstanceError):
                node.title = "changed"  # type: ignore[misc]
        wet = tree.node("d2-p1")
        assert wet.kind is NodeKind.PASSAGE and wet.heading == ("Kibble", "Wet")
        assert wet.description == wet.text and wet.meta == {}


# -- the Navigator's caches -------------------------------------------------------------------


def test_warm_caches_every_group_and_page_and_changes_no_answer(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        scores = {"g:Dogs": 0.9, "d2": 0.8, "d2-p1": 0.7}
        cold = Navigator(tree, SimulatedJudge(0.0, scores=scores), preset())
        warm = Navigator(tree, SimulatedJudge(0.0, scores=scores), preset())
        assert warm.warm() == 3 + 5  # the root's three groups, their five pages
        assert warm.retrieve("dog food").ids == cold.retrieve("dog food").ids
        assert warm.view.entries("document", [tree.node("d2")], "description")[0].tokens is not None


def test_entries_are_built_once_per_node(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        navigator = Navigator(tree, SimulatedJudge(0.0), preset())
        pages = navigator.view.children(tree.node("g:Cats").id)
        first = navigator.view.entries("document", pages, "title")
        again = navigator.view.entries("document", pages, "title")
        assert all(a is b for a, b in zip(first, again, strict=True))
        assert first[0].block is first[1].block == ("Cats",)  # one header tuple per parent
        assert [e.text for e in first] == ["Cat food", "Cat health"]


# -- splitting --------------------------------------------------------------------------------


def test_pack_uses_an_entrys_own_token_count_when_set() -> None:
    entries = [Entry(f"e{i}", "word " * 10) for i in range(6)]
    for entry in entries:
        entry.tokens = 100  # far more than the text's estimate of 13
    chunks = pack(entries, estimate_tokens, overhead=0, max_candidates=None, max_tokens=300,
                  keep_siblings=False)
    assert [len(c) for c in chunks] == [2, 2, 2]  # 124 tokens a line: two per request


def test_pack_fills_long_runs_within_both_caps() -> None:
    entries = [Entry(f"e{i}", "w " * (i % 7 + 1), ("page",), 1) for i in range(500)]
    for max_candidates, max_tokens in [(None, 1000), (37, None), (37, 1000), (5, 100)]:
        chunks = pack(entries, estimate_tokens, overhead=20, max_candidates=max_candidates,
                      max_tokens=max_tokens, keep_siblings=True)
        assert [e.key for c in chunks for e in c] == [e.key for e in entries]
        for chunk in chunks:
            tokens = 20 + estimate_tokens("# page") + sum(estimate_tokens(e.text) + 24 for e in chunk)
            assert max_candidates is None or len(chunk) <= max_candidates
            assert max_tokens is None or tokens <= max_tokens or len(chunk) == 1


def test_header_costs_are_counted_once_per_counter_and_pack_as_before() -> None:
    """A level's header changes are counted once per token counter (a page level passes the
    same ones query after query); the cuts are those of counters that keep nothing (one
    that takes no weak reference is simply asked each time)."""
    from decisionrag._navigate import _pack

    asked: list[str] = []

    def counting(text: str) -> int:
        asked.append(text)
        return estimate_tokens(text)

    class Plain:
        __slots__ = ()

        def __call__(self, text: str) -> int:
            return estimate_tokens(text)

    entries = [Entry(f"e{i}", "w " * (i % 5 + 1), (f"group {i // 40}", f"page {i // 8}"), i // 8)
               for i in range(400)]

    def cut(cost: Any) -> list[list[str]]:
        chunks = pack(entries, cost, overhead=20, max_candidates=30, max_tokens=900,
                      keep_siblings=True)
        return [[e.key for e in chunk] for chunk in chunks]

    first = cut(counting)
    assert any(text.startswith("#") for text in asked)
    asked.clear()
    assert cut(counting) == first
    assert asked and not any(text.startswith("#") for text in asked)  # headers: kept counts
    assert cut(Plain()) == first and cut(lambda text: estimate_tokens(text)) == first
    assert _pack._HEADER_TOKENS.get(counting)


def test_limits_still_split_a_level(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        judge = SimulatedJudge(0.0, limits=Limits(max_questions=2))
        result = Navigator(tree, judge, preset(route_groups=False)).retrieve("q")
        assert result.trace.stage("page").requests == 3  # five pages, at most two a request



def test_passages_of_a_node_held_equal_passages_by_id(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        for key in ("c1", "d2", "f1"):
            page = tree.node(key)
            assert tree.passages_of(page) == tree.passages(page.id)
            assert tree.passages_of(page, 1) == tree.passages(page.id, 1)


def _every_id(tree: Any) -> list[int]:
    groups = [g.id for g in tree.children(tree.root.id)]
    return [tree.root.id, *groups, *(n.id for d in tree.documents() for n in tree.subtree(d.id))]


def test_nodes_by_id_in_one_read_equal_nodes_one_by_one(tmp_path: Path) -> None:
    """`Tree.nodes` reads many ids at once (past one query's 900 too), in the order asked,
    repeats kept; an absent id is a KeyError naming it, as `Tree.node`'s."""
    from decisionrag._navigate import _view
    from decisionrag._navigate._view import TreeView

    with pets_tree(tmp_path / "pets.tree") as tree:
        ids = _every_id(tree)
        asked = [*reversed(ids), ids[3], *ids * 200]
        assert len(asked) > 900
        assert tree.nodes(asked) == [tree.node(i) for i in asked]
        assert tree.nodes([]) == []
        with pytest.raises(KeyError) as missing:
            tree.nodes([ids[0], 10_000])
        assert missing.value.args == (10_000,)

        view = TreeView(tree, len)
        view.node(ids[2])  # one cached, the rest read together
        assert view.nodes(ids[::-1]) == [tree.node(i) for i in ids[::-1]]
        assert all(i in view._cache for i in ids)

    with pets_tree(tmp_path / "again.tree") as tree, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_view, "NODE_CACHE_NODES", 4)  # more than the cache holds: still right
        view = TreeView(tree, len)
        ids = _every_id(tree)
        assert view.nodes(ids) == [tree.node(i) for i in ids]
        assert view.nodes(ids[:3]) == [tree.node(i) for i in ids[:3]]


def test_a_views_pages_are_looked_up_without_the_tree(tmp_path: Path) -> None:
    """The pages a view reads with their parents' children are the nodes a walk then looks
    up by id (a passage's page, for reading order): they come from the view's cache; pages
    by key (a notepad's) are cached too, None for a key that is not a page."""
    from decisionrag._navigate._view import TreeView

    with pets_tree(tmp_path / "pets.tree") as tree:
        view = TreeView(tree, len)
        dogs = view.split_children(tree.node("g:Dogs").id).documents
        view.reading_key(dogs[1])  # (its groups are read here)
        reads: list[int] = []
        tree._one = lambda sql, params=(): reads.append(1)  # type: ignore[method-assign]
        passage = tree.passages_of(dogs[1])[0]
        assert view.node(dogs[1].id) is dogs[1]
        assert view.reading_key(passage)[-1] == passage.id
        assert reads == []
        del tree._one  # the class's again
        page = view.page("d2")
        assert page == tree.node("d2") and view.page("d2") is page
        assert view.page("d2-p1") is None and view.page("no such key") is None
        tree._one = lambda sql, params=(): reads.append(1)  # type: ignore[method-assign]
        assert view.page("d2") is page and view.page("no such key") is None
        assert reads == []


def test_sections_of_a_node_equal_the_sections_of_its_subtree(tmp_path: Path) -> None:
    """The heading stage reads a page's sections without its passages (nested ones too),
    through the view's cache: the same nodes as filtering `subtree`, a new list each time."""
    from decisionrag._navigate._view import TreeView
    from decisionrag._tree import NodeKind

    with pets_tree(tmp_path / "pets.tree") as tree:
        view = TreeView(tree, len)
        for key in ("c1", "d1", "d2", "f1"):
            page = tree.node(key)
            want = [n for n in tree.subtree(page.id) if n.kind == NodeKind.SECTION]
            assert tree.sections_of(page) == want
            first = view.sections_of(page)
            first.clear()  # the caller's list: the cached one is untouched
            assert view.sections_of(page) == want
        nested = tree.sections_of(tree.node("d2"))
        assert [n.heading for n in nested] == [("Kibble",), ("Kibble", "Wet")]
        assert tree.sections_of(tree.node("d1")) == []


def test_best_first_partial_equals_the_stable_full_sort() -> None:
    import random

    import numpy as np

    from decisionrag._navigate._ranking import best_first

    rng = random.Random(7)
    for _ in range(200):
        values = [rng.choice([0.1, 0.5, 0.5, 0.9, rng.random()]) for _ in range(rng.randint(0, 60))]
        expected = sorted(range(len(values)), key=lambda i: -values[i])
        array = np.asarray(values, dtype=np.float64)
        assert best_first(array) == expected
        for n in (0, 1, 3, 10, 100):
            assert best_first(array, n) == expected[:n]
    for _ in range(200):  # NaN sorts last, as numpy's stable sort puts it
        array = np.asarray([rng.choice([0.1, 0.5, float("nan"), rng.random()])
                            for _ in range(rng.randint(1, 40))])
        full = np.argsort(-array, kind="stable").tolist()
        for n in range(len(array) + 2):
            assert best_first(array, n) == full[:n]


def test_rescored_first_moves_the_rescored_to_the_front_keeping_both_orders() -> None:
    """The oracle: the membership test per position it replaced, on random levels."""
    import random

    import numpy as np

    from decisionrag._navigate._ranking import best_first, rescored_first

    rng = random.Random(4)
    for _ in range(200):
        n = rng.randint(1, 300)
        values = np.array([rng.choice([0.1, 0.5, 0.9, rng.random()]) for _ in range(n)])  # ties
        values[rng.randrange(n)] = float("nan") if rng.random() < 0.2 else values[0]
        order = best_first(values)
        rescored = sorted(rng.sample(range(n), rng.randint(0, n)))
        members = set(rescored)
        want = [i for i in order if i in members] + [i for i in order if i not in members]
        assert rescored_first(values, np.asarray(rescored, dtype=np.int64)).tolist() == want


def test_rescored_order_reads_any_prefix_as_the_full_order() -> None:
    """The oracle: `rescored_first`'s full order, of which `RescoredOrder` sorts only the
    prefix asked for (ties, NaN, nothing or everything rescored)."""
    import random

    import numpy as np

    from decisionrag._navigate._ranking import RescoredOrder, rescored_first

    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 200)
        values = np.array([rng.choice([0.1, 0.5, 0.9, rng.random()]) for _ in range(n)])
        if rng.random() < 0.2:
            values[rng.randrange(n)] = float("nan")
        rescored = np.asarray(sorted(rng.sample(range(n), rng.randint(0, min(n, 12)))), dtype=np.int64)
        full = rescored_first(values, rescored).tolist()
        for m in (0, 1, len(rescored), len(rescored) + 1, len(rescored) + 7, n - 1, n, n + 3, None):
            order = RescoredOrder(values, rescored)  # fresh: a prefix is not read from a longer one
            assert order.prefix(m) == (full if m is None else full[:max(m, 0)])
