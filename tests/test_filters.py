"""Metadata filters: exact on passages, conservative on subtrees, pruning before judging."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _navigate_helpers import ONE_REQUEST, asked, preset
from decisionrag import InputError
from decisionrag._cli import main
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate import Navigator, Result, StageSettings
from decisionrag._navigate._filters import parse_filters
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter
from decisionrag._tree._summaries import Summary

LAYOUT = {  # group path → documents: key → (document metadata, page of each passage)
    ("billing",): {"b1": ({"product": "billing", "year": 2022}, [1, 2]),
                   "b2": ({"product": "billing", "year": 2024, "lang": "de"}, [1, 2])},
    ("search",): {"s1": ({"product": "search", "year": 2024, "lang": "en"}, [1])},
    ("misc", "old"): {"m1": ({"year": 2019, "tags": ["legacy", "v1"]}, [1])},
}


def corpus(path: Path) -> Path:
    with TreeWriter(path) as writer:
        for groups, documents in LAYOUT.items():
            for key, (meta, pages) in documents.items():
                passages = [PassageSpec(f"{key} text on page {page}", key=f"{key}-p{page}",
                                        meta={"page": page}) for page in pages]
                writer.add_document(DocumentSpec(key.upper(), passages, key=key, groups=groups,
                                                 meta=meta))
    return path


def walk(path: Path, filters: dict[str, Any] | None) -> tuple[ScriptedJudge, Result]:
    judge = ScriptedJudge(default=0.5)
    settings = preset(groups=(StageSettings(top_k=3, max_candidates_per_request=None),),
                      documents=StageSettings(top_k=3, max_candidates_per_request=None),
                      passages=ONE_REQUEST)
    with Tree.open(path) as tree:
        result = Navigator(tree, judge, settings).retrieve("anything", k=10,
                                                           filters=filters)
    return judge, result


def test_unfiltered_walk_judges_everything(tmp_path: Path) -> None:
    judge, _ = walk(corpus(tmp_path / "t.tree"), None)
    assert asked(judge)[:2] == [["g:billing", "g:search", "g:misc"], ["g:misc/old"]]


def test_filter_prunes_branches_before_they_are_judged(tmp_path: Path) -> None:
    # by hand: product=billing rules out the groups search (product search) and misc (no
    # product below it), so misc/old is never even listed; year >= 2023 rules out b1 (2022);
    # page >= 2 rules out b2's first passage.
    judge, result = walk(corpus(tmp_path / "t.tree"),
                         {"product": "billing", "year": {"gte": 2023}, "page": {"gte": 2}})
    assert asked(judge) == [["g:billing"], ["b2"], ["b2-p2"]]
    assert result.ids == ["b2-p2"]
    assert result.trace.filtered == {"group 1": 2, "page": 1, "passage": 1}
    stages = {s.name: s.filtered for s in result.trace.stages}
    assert stages == {"group 1": 2, "page": 1, "passage": 1}
    assert result.hits[0].metadata == {"product": "billing", "year": 2024, "lang": "de",
                                       "page": 2}


def test_or_in_exists_and_lists(tmp_path: Path) -> None:
    path = corpus(tmp_path / "t.tree")
    judge, result = walk(path, {"or": [{"lang": {"in": ["en", "fr"]}}, {"tags": "legacy"}]})
    assert asked(judge)[0] == ["g:search", "g:misc"]
    assert sorted(result.ids) == ["m1-p1", "s1-p1"]
    judge, result = walk(path, {"lang": {"exists": False}})
    assert asked(judge)[0] == ["g:billing", "g:misc"]  # billing: b1 has no lang
    assert sorted(result.ids) == ["b1-p1", "b1-p2", "m1-p1"]
    judge, result = walk(path, {"product": "nothing"})
    assert asked(judge) == [] and result.ids == []
    assert result.trace.filtered == {"group 1": 3}


def test_not_is_decided_per_passage(tmp_path: Path) -> None:
    judge, result = walk(corpus(tmp_path / "t.tree"), {"not": {"year": {"lt": 2024}}})
    assert sorted(result.ids) == ["b2-p1", "b2-p2", "s1-p1"]
    assert all("b1" not in ids for ids in asked(judge)[2:])


def test_summaries_are_conservative() -> None:
    summary = Summary()
    for meta in ({"year": 2020, "lang": "en"}, {"year": 2022}, {"tags": ["a", "b"]}):
        summary.merge(Summary.of_metadata([meta]))
    assert summary.documents == 3 and summary.keys["year"].num == (2020, 2022)
    cases = {
        '{"year": 2021}': False, '{"year": {"gt": 2021}}': True, '{"year": {"gt": 2022}}': False,
        '{"year": {"lte": 2020}}': True, '{"lang": {"ne": "en"}}': True, '{"tags": "b"}': True,
        '{"tags": "c"}': False, '{"lang": {"exists": false}}': True, '{"nope": {"exists": true}}':
        False, '{"and": [{"year": 2020}, {"tags": "a"}]}': True, '{"year": "2020"}': False,
    }
    for spec, expected in cases.items():
        parsed = parse_filters(json.loads(spec))
        assert parsed is not None and parsed.may_match(summary) is expected, spec


@pytest.mark.parametrize(("spec", "message"), [
    ({"year": {"between": [1, 2]}}, r"filter 'year': unknown operator 'between'"),
    ({"or": []}, r"filter 'or': expected a non-empty list"),
    ({"lang": {"in": "en"}}, r"'in' takes a non-empty list"),
    ({"year": {"gte": [1]}}, r"'gte' takes a number or a string"),
    ({"x": {"exists": "yes"}}, r"'exists' takes true or false"),
])
def test_bad_filters_are_named(spec: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_filters(spec)


def test_ask_filter_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus(tmp_path / "t.tree")
    assert main(["ask", str(path), "text", "--judge", "scripted", "--json", "--filter",
                 "product=billing", "--filter", "year>=2023"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in data["results"]} == {"b2-p1", "b2-p2"}
    assert data["filtered"]["page"] >= 1 and all(r["metadata"]["year"] == 2024
                                                 for r in data["results"])
    assert main(["ask", str(path), "text", "--judge", "scripted", "--trace", "--filters",
                 '{"lang": {"in": ["en"]}}', "--filter", "page?"]) == 0
    out = capsys.readouterr().out
    assert "[s1-p1]" in out and "filtered out" in out
    assert main(["ask", str(path), "text", "--judge", "scripted", "--filter", "year"]) == 2
    assert "--filter 'year': expected key=value" in capsys.readouterr().err
