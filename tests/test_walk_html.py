"""The walk page (walk_page(result)) read as data: every stage, every candidate, no network."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from _navigate_helpers import flat_tree, pets_tree, preset
from decisionrag._cli import main
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate import Navigator, StageSettings
from decisionrag._walkpage import walk_page
from decisionrag._walkpage._page import render_html


def page_data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="walk-data">(.*?)</script>', page, re.S)
    assert found, "the page carries its data"
    return json.loads(found.group(1))


def test_every_stage_and_candidate_is_on_the_page(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge({"g:Cats": 0.9, "g:Dogs": 0.4, "g:Fish": 0.1, "c1": 0.8, "c2": 0.3,
                           "c1-p0": 0.7, "c1-p1": 0.2, "c1-p2": 0.6})
    result = Navigator(tree, judge, preset()).retrieve("cat food", k=3)
    page = walk_page(result)
    data = page_data(page)

    assert [s["name"] for s in data["stages"]] == [s.name for s in result.trace.stages]
    assert page.count('<details class="stage"') == len(result.trace.stages)
    for stage, shown in zip(result.trace.stages, data["stages"], strict=True):
        assert shown["kept"] == len(stage.kept)
        assert shown["pruned"] == stage.pruned
        assert len(shown["rows"]) == stage.n_candidates  # pruned ones too
        assert {row[0] for row in shown["rows"]} == set(stage.candidates)
    groups = data["stages"][0]["rows"]
    assert groups[0][:4] == ["g:Cats", "Cats", 0.9, "opened"]
    assert [row[3] for row in groups[1:]] == ["pruned", "pruned"]
    assert groups[1][2] == 0.4  # a pruned candidate keeps its probability
    pages = data["stages"][1]["rows"]
    assert pages[0][4] == "Cats"  # reached through the group opened before
    assert [hit["id"] for hit in data["hits"]] == result.ids


def test_page_is_self_contained_and_escapes_content(tmp_path: Path) -> None:
    from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter

    hostile = '</script><script>alert(1)</script> <img src="http://example.com/x.png">'
    with TreeWriter(tmp_path / "x.tree") as writer:
        writer.add_document(DocumentSpec("Doc <b>", [PassageSpec(hostile, key="p1")], key="d1"))
    tree = Tree.open(tmp_path / "x.tree")
    page = walk_page(Navigator(tree, ScriptedJudge(default=0.5), preset()).retrieve(hostile))
    assert page.count("<script") == 2  # the data block and the page's own script, nothing else
    assert "<img" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing to fetch
    assert "&lt;/script&gt;" in page  # the passage is shown, as text
    assert page_data(page)["hits"][0]["text"] == hostile


def test_thousands_of_candidates_stay_collapsed_and_compact(tmp_path: Path) -> None:
    tree = flat_tree(tmp_path / "flat.tree", 1500, passages_per_doc=1)
    settings = preset(documents=StageSettings(top_k=25, max_candidates_per_request=400))
    result = Navigator(tree, ScriptedJudge(), settings).retrieve("text 7", k=5)
    page = walk_page(result)
    data = page_data(page)
    first = data["stages"][0]
    assert first["n_candidates"] == 1500 and len(first["rows"]) == 1500
    assert first["kept"] == 25
    assert "<details class=\"stage\" open" not in page  # collapsed by default
    assert "<tr" not in page  # rows are drawn only when a stage is opened
    assert len(page) < 400_000


def test_answer_citations_link_and_invalid_ones_are_flagged(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    result = Navigator(tree, ScriptedJudge(default=0.5), preset()).retrieve("cat", k=3)
    answer = {"text": "Cats eat fish [1][2, 7].", "model": "stand-in", "sources": [1, 2, 3]}
    page = render_html(result, answer)
    assert '<a class="cite" href="#p-1" data-cite="1">1</a>' in page
    assert '<a class="cite" href="#p-2" data-cite="2">2</a>' in page
    assert 'class="cite invalid" title="no passage 7 was given"' in page
    assert 'id="invalid-citations"' in page
    assert 'id="p-1"' in page and 'id="p-3"' in page


def test_reopened_candidates_are_marked_when_the_trace_has_them(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    result = Navigator(tree, ScriptedJudge({"g:Cats": 0.9, "g:Dogs": 0.4}), preset()).retrieve("cat")
    stage = result.trace.stages[0]

    class Reopening:  # a stage as recovery from pruning (#11) records it
        def __init__(self) -> None:
            self.reopened = [("g:Dogs", 0.4)]

        def __getattr__(self, name: str) -> object:
            return getattr(stage, name)

    from decisionrag._walkpage._page import stage_data

    shown = stage_data(Reopening(), {})  # type: ignore[arg-type]
    assert shown["reopened"] == 1
    assert [r[3] for r in shown["rows"]] == ["opened", "reopened", "pruned"]
    assert shown["pruned"] == 2  # as the trace counts: not kept at this stage


def test_a_recovery_stage_marks_what_it_reopened(tmp_path: Path) -> None:
    from decisionrag._navigate import StageTrace

    tree = pets_tree(tmp_path / "pets.tree")
    result = Navigator(tree, ScriptedJudge({"g:Cats": 0.9, "g:Dogs": 0.4}), preset()).retrieve("cat")
    dogs = next(n for n in result.trace.stages[0].nodes if n.key == "g:Dogs")
    recovery = StageTrace("recovery", 9, 1, ["g:Dogs"], kept=[("d2", 0.3)], opened=["d2"],
                          scores={"g:Dogs": 0.4}, nodes=[dogs])
    result.trace.stages.append(recovery)
    data = page_data(walk_page(result))
    first, last = data["stages"][0], data["stages"][-1]
    assert [r[3] for r in first["rows"]] == ["opened", "reopened", "pruned"]  # Dogs came back later
    assert first["reopened"] == 1 and first["pruned"] == 2
    assert {r[0]: r[3] for r in last["rows"]} == {"d2": "opened", "g:Dogs": "reopened"}
    assert 'data-name="recovery"' in walk_page(result)


def test_ask_html_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pets_tree(tmp_path / "pets.tree").close()
    target = tmp_path / "out" / "walk.html"
    code = main(["ask", str(tmp_path / "pets.tree"), "cat food", "--judge", "scripted",
                 "--html", str(target)])
    assert code == 0
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "cat food" in page
    assert not [p for p in target.parent.iterdir() if p.name != "walk.html"]  # no temporary left
    assert f"wrote {target}" in capsys.readouterr().err


def test_rescored_stage_keeps_its_own_scores(tmp_path: Path) -> None:
    tree = flat_tree(tmp_path / "flat.tree", 30)
    documents = StageSettings(top_k=3, max_candidates_per_request=10, rescore_top=5)
    result = Navigator(tree, ScriptedJudge(), replace(preset(), documents=documents)).retrieve("text 3")
    names = [s.name for s in result.trace.stages]
    assert "page rescore" in names
    first, rescore = result.trace.stages[0], result.trace.stages[1]
    assert len(first.scores) == 30 and len(rescore.scores) == 5


def test_missing_chromium_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    import _browser

    monkeypatch.setattr(_browser.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="headless Chromium not found"):
        _browser.chromium_or_skip()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _browser.chromium_or_skip()
