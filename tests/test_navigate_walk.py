"""The walk, mechanism by mechanism, with the scripted judge: what is opened, pruned, kept."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from _navigate_helpers import asked, choices, flat_tree, pets_tree, preset
from decisionrag._errors import InputError, NavigationError
from decisionrag._judges import Limits, ScriptedJudge
from decisionrag._navigate import (
    PRESETS,
    ChoiceSettings,
    HeadingSettings,
    Navigator,
    StageSettings,
    auto_preset,
    get_preset,
)
from decisionrag._tree import DocumentSpec, NodeKind, PassageSpec, Tree, TreeWriter


@pytest.fixture
def pets(tmp_path: Path) -> Tree:
    return pets_tree(tmp_path / "pets.tree")


# -- opening and pruning --------------------------------------------------------------------


def test_pruned_branches_are_never_opened(pets: Tree) -> None:
    judge = ScriptedJudge(
        {
            "g:Cats": 0.9,
            "g:Dogs": 0.5,
            "g:Fish": 0.1,
            "c1": 0.8,
            "c2": 0.3,
            "c1-p1": 0.9,
            "c1-p0": 0.4,
        }
    )
    result = Navigator(pets, judge, preset()).retrieve("what do cats eat", k=2)
    assert asked(judge) == [
        ["g:Cats", "g:Dogs", "g:Fish"],
        ["c1", "c2"],
        ["c1-p0", "c1-p1", "c1-p2"],
    ]
    assert [s.name for s in result.trace.stages] == ["group 1", "page", "passage"]
    group, page, _ = result.trace.stages
    assert group.kept == [("g:Cats", 0.9)] and group.opened == ["g:Cats"] and group.pruned == 2
    assert page.kept == [("c1", 0.8)] and page.opened == ["c1"]
    assert result.ids == ["c1-p1", "c1-p0"]
    assert result.hits[0].path == ("Cats", "Cat food", "Feeding")
    assert result.hits[0].doc_key == "c1"
    assert result.usage.requests == 3


def test_documents_at_a_group_level_pass_through_to_the_page_stage(tmp_path: Path) -> None:
    with TreeWriter(tmp_path / "mixed.tree") as writer:
        writer.add_document(
            DocumentSpec("Grouped", [PassageSpec("grouped", key="g-p0")], key="g1", groups=("Box",))
        )
        writer.add_document(
            DocumentSpec("Loose page", [PassageSpec("loose", key="loose-p0")], key="loose")
        )
        writer.add_document(
            DocumentSpec("Other", [PassageSpec("other", key="o-p0")], key="o1", groups=("Crate",))
        )
    judge = ScriptedJudge({"g:Box": 0.9, "loose": 0.95, "g1": 0.5})
    with Tree.open(tmp_path / "mixed.tree") as tree:
        Navigator(tree, judge, preset(documents=StageSettings(top_k=2))).retrieve("q")
    assert asked(judge)[0] == ["g:Box", "g:Crate"]  # the loose page is not judged as a group
    assert asked(judge)[1] == ["g1", "loose"]  # … but reaches the page stage, in reading order


def test_nested_group_levels_use_their_own_settings(tmp_path: Path) -> None:
    with TreeWriter(tmp_path / "deep.tree") as writer:
        for outer in ("A", "B"):
            for inner in ("x", "y", "z"):
                key = f"{outer}{inner}"
                writer.add_document(
                    DocumentSpec(
                        key, [PassageSpec(key, key=f"{key}-p")], key=key, groups=(outer, inner)
                    )
                )
    judge = ScriptedJudge({"g:A": 0.9, "g:A/x": 0.3, "g:A/y": 0.6, "g:A/z": 0.5})
    levels = (StageSettings(top_k=1), StageSettings(top_k=2))
    with Tree.open(tmp_path / "deep.tree") as tree:
        result = Navigator(
            tree, judge, preset(groups=levels, documents=StageSettings(top_k=5))
        ).retrieve("q")
    assert asked(judge)[:3] == [["g:A", "g:B"], ["g:A/x", "g:A/y", "g:A/z"], ["Ay", "Az"]]
    assert [s.name for s in result.trace.stages][:2] == ["group 1", "group 2"]
    assert result.hits[0].path[:2] == ("A", "y")


def test_flat_preset_judges_every_page_directly(pets: Tree) -> None:
    judge = ScriptedJudge({"f1": 0.9})
    result = Navigator(pets, judge, "flat").retrieve("fish")
    assert asked(judge)[0] == ["c1", "c2", "d1", "d2", "f1"]
    assert result.trace.stages[0].name == "page"
    assert "# Cats" in judge.binary_calls[0].context  # pages still shown under their group


# -- budgets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "scores", "expected"),
    [
        (StageSettings(top_k=3), [0.9] * 10, 3),
        (StageSettings(top_k=None, share=0.15), [0.9] * 20, 3),  # ceil(0.15 × 20)
        (StageSettings(top_k=2, share=0.5), [0.9] * 10, 5),  # the larger budget wins
        (StageSettings(top_k=1, runner_up_below=0.8), [0.7, 0.6, 0.1], 2),
        (StageSettings(top_k=1, runner_up_below=0.8), [0.85, 0.6, 0.1], 1),
        (StageSettings(top_k=0, min_keep=2), [0.1, 0.1, 0.1], 2),
        (StageSettings(top_k=10), [0.5, 0.4], 2),
        (StageSettings(top_k=None), [0.5] * 7, 7),
    ],
)
def test_keep_count(settings: StageSettings, scores: list[float], expected: int) -> None:
    assert settings.keep_count(len(scores), scores) == expected


def test_runner_up_group_is_opened_when_the_top_is_unsure(pets: Tree) -> None:
    judge = ScriptedJudge({"g:Cats": 0.7, "g:Dogs": 0.6, "g:Fish": 0.1})
    groups = (StageSettings(top_k=1, runner_up_below=0.8),)
    result = Navigator(pets, judge, preset(groups=groups)).retrieve("pets")
    assert result.trace.stages[0].opened == ["g:Cats", "g:Dogs"]
    assert asked(judge)[1] == ["c1", "c2", "d1", "d2"]


def test_share_budget_over_a_level(tmp_path: Path) -> None:
    with TreeWriter(tmp_path / "clusters.tree") as writer:
        for c in range(20):
            writer.add_document(
                DocumentSpec(
                    f"page {c}",
                    [PassageSpec("x", key=f"p{c}-0")],
                    key=f"p{c}",
                    groups=(f"cluster {c:02d}",),
                )
            )
    scores = {f"g:cluster {c:02d}": c / 20 for c in range(20)}
    judge = ScriptedJudge(scores)
    groups = (StageSettings(top_k=None, share=0.15),)
    with Tree.open(tmp_path / "clusters.tree") as tree:
        result = Navigator(
            tree, judge, preset(groups=groups, documents=StageSettings(top_k=5))
        ).retrieve("q")
    assert result.trace.stages[0].opened == ["g:cluster 17", "g:cluster 18", "g:cluster 19"]
    assert asked(judge)[1] == ["p17", "p18", "p19"]


# -- splitting, siblings, rescoring ---------------------------------------------------------


def test_level_over_the_candidate_cap_is_split_keeping_siblings_together(pets: Tree) -> None:
    judge = ScriptedJudge()
    pages = StageSettings(top_k=1, max_candidates_per_request=3, keep_siblings=True)
    Navigator(pets, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    assert asked(judge)[:2] == [["c1", "c2"], ["d1", "d2", "f1"]]


def test_split_without_keeping_siblings_fills_each_request(pets: Tree) -> None:
    judge = ScriptedJudge()
    pages = StageSettings(top_k=1, max_candidates_per_request=3, keep_siblings=False)
    result = Navigator(pets, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    assert asked(judge)[:2] == [["c1", "c2", "d1"], ["d2", "f1"]]
    assert result.trace.stage("page").requests == 2


def test_judge_limits_split_a_level(pets: Tree) -> None:
    judge = ScriptedJudge(limits=Limits(max_questions=2))
    Navigator(pets, judge, preset(route_groups=False, documents=StageSettings(top_k=1))).retrieve(
        "q"
    )
    assert asked(judge)[:3] == [["c1", "c2"], ["d1", "d2"], ["f1"]]


def test_token_cap_splits_and_every_request_fits(tmp_path: Path) -> None:
    tree = flat_tree(tmp_path / "flat.tree", 40)
    judge = ScriptedJudge()
    cap = 400
    pages = StageSettings(top_k=1, max_candidates_per_request=None, max_tokens_per_request=cap)
    Navigator(tree, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    page_requests = [
        c
        for c in judge.binary_calls
        if c.candidates[0].id.startswith("d") and "-" not in c.candidates[0].id
    ]
    assert len(page_requests) > 1
    assert sum(len(r.candidates) for r in page_requests) == 40
    for request in page_requests:
        assert judge.count_tokens(request.context + "".join(request.questions)) <= cap


def test_rescoring_pass_holds_exactly_the_pooled_top_n_and_decides(pets: Tree) -> None:
    # first pass (titles): c1 .9, d2 .8, d1 .7, c2 .2, f1 .1;
    # the rescoring pass (descriptions) puts d2 above c1
    first = {"c1": 0.9, "d2": 0.8, "d1": 0.7, "c2": 0.2, "f1": 0.1}
    second = {"c1": 0.3, "d2": 0.95, "d1": 0.5}

    def scorer(query: str, candidate: object) -> float:
        key, text = candidate.id, candidate.text  # type: ignore[attr-defined]
        return second[key] if " — " in text else first.get(key, 0.0)

    judge = ScriptedJudge(scorer)
    pages = StageSettings(
        top_k=1, max_candidates_per_request=2, keep_siblings=False, rescore_top=3, render="title"
    )
    result = Navigator(pets, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    assert asked(judge)[:4] == [["c1", "c2"], ["d1", "d2"], ["f1"], ["c1", "d1", "d2"]]
    rescore = judge.binary_calls[3]
    assert "Cat food — Feeding; Treats" in rescore.context  # full descriptions in the second pass
    assert [s.name for s in result.trace.stages][:2] == ["page", "page rescore"]
    assert result.trace.stages[0].kept == [("c1", 0.9), ("d2", 0.8), ("d1", 0.7)]
    assert result.trace.stages[1].kept == [("d2", 0.95)]
    assert asked(judge)[4] == ["d2-p0", "d2-p1", "d2-p2"]
    # each stage's trace keeps the scores it was judged with (the ranking's dict is shared
    # with the first stage, and replaced, not changed, by the rescoring pass)
    assert result.trace.stages[0].scores == first


def test_no_rescoring_when_the_level_fit_in_one_request(pets: Tree) -> None:
    judge = ScriptedJudge()
    pages = StageSettings(top_k=1, max_candidates_per_request=None, rescore_top=3)
    result = Navigator(pets, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    assert [s.name for s in result.trace.stages] == ["page", "passage"]


# -- passages: propagation, partial expansion, headings, hybrid -----------------------------


def test_score_propagation_multiplies_by_the_page_score(pets: Tree) -> None:
    judge = ScriptedJudge({"c1": 0.5, "c2": 1.0, "c1-p0": 0.9, "c2-p0": 0.6, "c2-p1": 0.1})
    pages = StageSettings(top_k=2, propagate=True)
    result = Navigator(pets, judge, preset(route_groups=False, documents=pages)).retrieve("q", k=3)
    assert result.ids == ["c2-p0", "c1-p0", "c2-p1"]
    assert result.hits[1].score == pytest.approx(0.45) and result.hits[1].binary == pytest.approx(
        0.9
    )


def test_without_propagation_binary_scores_rank(pets: Tree) -> None:
    judge = ScriptedJudge({"c1": 0.5, "c2": 1.0, "c1-p0": 0.9, "c2-p0": 0.6})
    result = Navigator(
        pets, judge, preset(route_groups=False, documents=StageSettings(top_k=2))
    ).retrieve("q")
    assert result.ids[:2] == ["c1-p0", "c2-p0"]


def test_partial_expansion_opens_passages_by_page_rank(tmp_path: Path) -> None:
    tree = flat_tree(tmp_path / "flat.tree", 6, passages_per_doc=4)
    ranks = {"d3": 0.9, "d0": 0.8, "d5": 0.7, "d1": 0.6, "d2": 0.5, "d4": 0.4}
    judge = ScriptedJudge(ranks)
    pages = StageSettings(top_k=5, partial_expansion=((1, None), (3, 2), (4, 1)))
    Navigator(tree, judge, preset(route_groups=False, documents=pages)).retrieve("q")
    opened = asked(judge)[1]
    assert opened == [
        "d0-p0",
        "d0-p1",
        "d1-p0",
        "d3-p0",
        "d3-p1",
        "d3-p2",
        "d3-p3",
        "d5-p0",
        "d5-p1",
    ]


def long_page_tree(path: Path) -> Tree:
    with TreeWriter(path) as writer:
        passages = [
            PassageSpec(f"para {s}.{i}", section=(f"Part {s}",), key=f"L-{s}-{i}")
            for s in range(10)
            for i in range(7)
        ]
        writer.add_document(DocumentSpec("Long guide", passages, key="L"))
        writer.add_document(DocumentSpec("Short", [PassageSpec("short", key="S-0")], key="S"))
    return Tree.open(path)


def test_heading_stage_for_pages_over_the_threshold(tmp_path: Path) -> None:
    tree = long_page_tree(tmp_path / "long.tree")
    sections = {
        n.title: n.key for n in tree.subtree(tree.node("L").id) if n.kind == NodeKind.SECTION
    }
    judge = ScriptedJudge(
        {
            "L": 0.9,
            "S": 0.8,
            sections["Part 7"]: 0.9,
            sections["Part 3"]: 0.8,
            sections["Part 5"]: 0.1,
        }
    )
    settings = preset(
        route_groups=False,
        documents=StageSettings(top_k=2),
        headings=HeadingSettings(threshold=60, keep=2, max_passages=10),
    )
    result = Navigator(tree, judge, settings).retrieve("q")
    assert [s.name for s in result.trace.stages] == ["page", "heading", "passage"]
    assert asked(judge)[1] == [sections[f"Part {s}"] for s in range(10)]
    heading = result.trace.stage("heading")
    assert [key for key, _ in heading.kept] == [sections["Part 7"], sections["Part 3"]]
    expected = [f"L-3-{i}" for i in range(7)] + [f"L-7-{i}" for i in range(3)] + ["S-0"]
    assert asked(judge)[2] == expected


def test_pages_under_the_threshold_skip_the_heading_stage(tmp_path: Path) -> None:
    tree = long_page_tree(tmp_path / "long.tree")
    judge = ScriptedJudge({"L": 0.9})
    settings = preset(route_groups=False, headings=HeadingSettings(threshold=100))
    result = Navigator(tree, judge, settings).retrieve("q")
    assert [s.name for s in result.trace.stages] == ["page", "passage"]
    assert len(asked(judge)[1]) == 70


class ListRetriever:
    """A retriever with a fixed ranking (what BM25 or a dense index would return)."""

    def __init__(self, ranking: list[str]) -> None:
        self.ranking = ranking
        self.asked: list[tuple[str, int]] = []

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        self.asked.append((query_text, k))
        return [(key, 1.0 / (i + 1)) for i, key in enumerate(self.ranking[:k])]


def test_hybrid_candidates_join_the_passage_stage_deduplicated_in_reading_order(pets: Tree) -> None:
    retriever = ListRetriever(["f1-p0", "c1-p2", "d2-p1", "c1-p0"])
    judge = ScriptedJudge({"g:Cats": 0.9, "c1": 0.9, "f1-p0": 0.7})
    settings = preset(hybrid_k=3, documents=StageSettings(top_k=1))
    result = Navigator(pets, judge, settings, retriever=retriever).retrieve("cat food")
    assert retriever.asked == [("cat food", 3)]
    assert asked(judge)[2] == ["c1-p0", "c1-p1", "c1-p2", "d2-p1", "f1-p0"]
    context = judge.binary_calls[2].context
    assert context.index("# Dog food") < context.index("### Wet") < context.index("# Fish tanks")
    assert result.ids[0] == "f1-p0"


def test_unknown_retriever_keys_are_a_clear_error(pets: Tree) -> None:
    navigator = Navigator(pets, ScriptedJudge(), preset(), retriever=ListRetriever(["nope"]))
    with pytest.raises(NavigationError, match="'nope'"):
        navigator.retrieve("q")


# -- multiple choice ------------------------------------------------------------------------


@pytest.fixture
def mc_judge() -> ScriptedJudge:
    binary = {"d2": 0.9, "d2-p0": 0.9, "d2-p1": 0.8, "d2-p2": 0.7}
    return ScriptedJudge(binary, choice_scores={"d2-p2": 0.6, "d2-p1": 0.3, "d2-p0": 0.1})


def mc_preset(mode: str, top: int) -> object:
    return preset(route_groups=False, choice=ChoiceSettings(top=top, mode=mode))  # type: ignore[arg-type]


def test_choice_order_mode_reorders_the_shortlist(pets: Tree, mc_judge: ScriptedJudge) -> None:
    result = Navigator(pets, mc_judge, mc_preset("order", 3)).retrieve("q")  # type: ignore[arg-type]
    assert result.ids == ["d2-p2", "d2-p1", "d2-p0"]
    assert [h.choice for h in result.hits] == pytest.approx([0.6, 0.3, 0.1])
    (request,) = choices(mc_judge)
    assert [c.id for c in request.candidates] == ["d2-p0", "d2-p1", "d2-p2"]  # reading order
    assert request.options == ("[Paragraph 1]", "[Paragraph 2]", "[Paragraph 3]")


def test_choice_shortlist_only_the_binary_top_m(pets: Tree, mc_judge: ScriptedJudge) -> None:
    result = Navigator(pets, mc_judge, mc_preset("order", 2)).retrieve("q")  # type: ignore[arg-type]
    (request,) = choices(mc_judge)
    assert [c.id for c in request.candidates] == ["d2-p0", "d2-p1"]
    assert result.ids == ["d2-p1", "d2-p0", "d2-p2"]  # the rest keeps its binary order
    assert result.hits[2].choice is None


def test_choice_top1_mode_only_promotes_the_winner(pets: Tree) -> None:
    binary = {"d2": 0.9, "d2-p0": 0.9, "d2-p1": 0.8, "d2-p2": 0.7}
    judge = ScriptedJudge(binary, choice_scores={"d2-p1": 0.2, "d2-p2": 0.7, "d2-p0": 0.1})
    result = Navigator(pets, judge, mc_preset("top1", 3)).retrieve("q")  # type: ignore[arg-type]
    assert result.ids == ["d2-p2", "d2-p0", "d2-p1"]


def test_choice_off_sends_no_choice_request(pets: Tree, mc_judge: ScriptedJudge) -> None:
    result = Navigator(pets, mc_judge, mc_preset("off", 3)).retrieve("q")  # type: ignore[arg-type]
    assert choices(mc_judge) == [] and result.ids == ["d2-p0", "d2-p1", "d2-p2"]


def test_choice_respects_the_judges_option_limit(pets: Tree) -> None:
    judge = ScriptedJudge({"d2": 0.9}, limits=Limits(max_options=2))
    Navigator(pets, judge, mc_preset("order", 20)).retrieve("q")  # type: ignore[arg-type]
    assert len(choices(judge)[0].options) == 2


# -- rerank, presets, sync/async ------------------------------------------------------------


def test_rerank_judges_only_the_given_passages(pets: Tree) -> None:
    judge = ScriptedJudge(
        {"f1-p0": 0.2, "c1-p1": 0.9, "d1-p0": 0.5}, choice_scores={"d1-p0": 0.9, "c1-p1": 0.1}
    )
    navigator = Navigator(pets, judge, replace(PRESETS["cqa"], choice=ChoiceSettings(top=2)))
    result = navigator.rerank("q", ["f1-p0", "d1-p0", "c1-p1", "d1-p0"], k=3)
    assert asked(judge) == [["c1-p1", "d1-p0", "f1-p0"]]
    assert [c.id for c in choices(judge)[0].candidates] == ["c1-p1", "d1-p0"]
    assert result.ids == ["d1-p0", "c1-p1", "f1-p0"]
    assert [s.name for s in result.trace.stages] == ["passage", "choice"]


def test_rerank_rejects_unknown_and_non_passage_ids(pets: Tree) -> None:
    navigator = Navigator(pets, ScriptedJudge(), "cqa")
    with pytest.raises(InputError, match="'zzz'"):
        navigator.rerank("q", ["zzz"])
    with pytest.raises(InputError, match="document"):
        navigator.rerank("q", ["c1"])


def test_presets_match_the_paper() -> None:
    md2d, cqa, mtrag, nq = (PRESETS[n] for n in ("md2d", "cqa", "mtrag", "nq"))
    assert md2d.groups[0].top_k == 1 and md2d.groups[0].runner_up_below == 0.8
    assert md2d.documents.top_k == 10 and md2d.notepad and md2d.choice.top == 20
    assert not cqa.route_groups and cqa.documents.top_k == 3
    assert cqa.documents.max_candidates_per_request is None and cqa.choice.top == 20
    assert mtrag.documents.max_tokens_per_request == 10_000 and mtrag.documents.keep_siblings
    assert mtrag.documents.rescore_top == 50 and mtrag.documents.top_k == 10
    assert mtrag.headings == HeadingSettings(60, 8, 60) and mtrag.choice.mode == "top1"
    assert nq.groups[0].top_k == 150 and nq.documents.max_tokens_per_request == 20_000
    assert nq.documents.partial_expansion == ((3, None), (10, 10), (30, 3))
    assert nq.documents.propagate and nq.choice.top == 5


def test_auto_preset_follows_the_tree_shape(pets: Tree, tmp_path: Path) -> None:
    small = auto_preset(pets, ScriptedJudge(limits=Limits(max_tokens=8000)))
    assert small.documents.top_k == 10 and small.documents.max_tokens_per_request == 8000
    long_pages = auto_preset(long_page_tree(tmp_path / "long.tree"))
    assert long_pages.documents.top_k == 8  # 300 // 35.5 passages a page
    with pytest.raises(NavigationError, match="unknown preset"):
        get_preset("nope", pets)


def test_cli_style_overrides(pets: Tree) -> None:
    changed = PRESETS["cqa"].with_overrides(keep_pages=7, mc_top=4, mc_mode="top1")
    assert changed.documents.top_k == 7 and changed.choice == ChoiceSettings(4, "top1")
    assert PRESETS["cqa"].documents.top_k == 3


async def test_sync_retrieve_inside_a_running_loop_and_async_twin(pets: Tree) -> None:
    judge = ScriptedJudge({"g:Cats": 0.9, "c1": 0.9, "c1-p2": 0.9})
    navigator = Navigator(pets, judge, preset())
    from_sync = navigator.retrieve("treats")
    from_async = await navigator.aretrieve("treats")
    assert from_sync.ids == from_async.ids and from_sync.ids[0] == "c1-p2"


def test_requests_of_a_level_are_in_flight_together(tmp_path: Path) -> None:
    from decisionrag._judges import SimulatedJudge

    tree = flat_tree(tmp_path / "flat.tree", 40)
    judge = SimulatedJudge(latency=0.1, limits=Limits(max_questions=5))
    navigator = Navigator(tree, judge, preset(route_groups=False))
    result = asyncio.run(navigator.aretrieve("q"))
    assert result.trace.stage("page").requests == 8
    assert result.trace.stage("page").seconds < 0.35  # eight 0.1 s requests at once, not in a row


def test_empty_levels_give_an_empty_result(tmp_path: Path) -> None:
    with TreeWriter(tmp_path / "empty.tree") as writer:
        writer.add_group("Nothing here")
        writer.add_document(DocumentSpec("No text", [], key="blank"), parent=writer.add_group("Blank"))
    judge = ScriptedJudge({"g:2": 0.9})
    with Tree.open(tmp_path / "empty.tree") as tree:
        result = Navigator(tree, judge, preset(choice=ChoiceSettings(top=5))).retrieve("q")
    assert result.hits == [] and choices(judge) == []
    assert [s.name for s in result.trace.stages] == ["group 1", "page", "passage"]
