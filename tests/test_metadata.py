"""Metadata: read from JSONL, front matter and files; stored per node; returned on every hit."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from _navigate_helpers import ONE_REQUEST, preset
from decisionrag import InputError
from decisionrag._build import build_tree
from decisionrag._build._metadata import hoist_common, typed_value
from decisionrag._cli import main
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate import Navigator
from decisionrag._tree import Tree


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


ROWS: list[dict[str, object]] = [
    {"id": "b1", "doc_id": "billing", "doc_title": "Billing guide", "text": "Invoices are monthly",
     "metadata": {"product": "billing", "year": 2024, "page": 1},
     "doc_metadata": {"lang": "en"}},
    {"id": "b2", "doc_id": "billing", "doc_title": "Billing guide", "text": "Refunds take a week",
     "metadata": {"product": "billing", "year": 2024, "page": 2}, "url": "https://x/b2"},
    {"id": "s1", "doc_id": "search", "doc_title": "Search guide", "text": "Queries are parsed",
     "metadata": {"product": "search", "tags": ["a", "b"]}},
]


def test_jsonl_metadata_is_stored_once_per_document_and_per_passage(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "c.jsonl", ROWS)
    build_tree([source], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        billing = tree.node("billing")
        # shared keys hoisted to the document, doc_metadata merged in, source kept
        assert billing.meta == {"source": str(source), "url": "https://x/b2",
                                "product": "billing", "year": 2024, "lang": "en"}
        assert tree.node("b1").meta == {"page": 1}
        assert tree.node("b2").meta == {"page": 2, "url": "https://x/b2"}
        # a one-passage document: everything is the document's
        assert tree.node("search").meta["tags"] == ["a", "b"]
        assert tree.node("s1").meta == {}


@pytest.mark.parametrize(("row", "message"), [
    ({"metadata": [1]}, r"line 1, field 'metadata': metadata must be a JSON object"),
    ({"metadata": {"a": {"b": 1}}}, r"line 1, field 'metadata': metadata 'a' must be"),
    ({"doc_metadata": {"a": [{}]}}, r"line 1, field 'doc_metadata': metadata 'a': a list"),
])
def test_bad_jsonl_metadata_names_line_and_field(tmp_path: Path, row: dict[str, object],
                                                 message: str) -> None:
    source = _jsonl(tmp_path / "c.jsonl", [{"id": "p", "doc_id": "d", "text": "t", **row}])
    with pytest.raises(InputError, match=message):
        build_tree([source], tmp_path / "t.tree")
    assert not (tmp_path / "t.tree").exists()


def test_conflicting_doc_metadata_is_an_error(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "c.jsonl", [
        {"id": "p1", "doc_id": "d", "text": "t", "doc_metadata": {"lang": "en"}},
        {"id": "p2", "doc_id": "d", "text": "u", "doc_metadata": {"lang": "de"}},
    ])
    with pytest.raises(InputError, match=r"document 'd': doc_metadata 'lang' is given two"):
        build_tree([source], tmp_path / "t.tree")


def test_front_matter_and_file_metadata(tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "guide.md"
    doc.parent.mkdir()
    doc.write_text("---\ntitle: Guide\nproduct: billing\nyear: 2023\nscore: 0.5\n"
                   "draft: false\nlangs: [en, de]\ncode: '007'\nnested:\n  x: 1\n---\n"
                   "# Guide\n\nSome text.\n", encoding="utf-8")
    os.utime(doc, (1_700_000_000, 1_700_000_000))
    build_tree([tmp_path / "docs"], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        meta = tree.node("guide.md").meta
    assert meta == {"source": str(doc), "mtime": "2023-11-14T22:13:20Z", "product": "billing",
                    "year": 2023, "score": 0.5, "draft": False, "langs": ["en", "de"],
                    "code": "007"}


def test_typed_values_and_hoisting() -> None:
    assert [typed_value(v) for v in ["12", "-3", "1e3", "x", '"12"', "[]", "TRUE", "~"]] == [
        12, -3, 1000.0, "x", "12", [], True, None]
    assert hoist_common([{"a": 1, "b": 2}, {"a": 1, "b": 3}]) == ({"a": 1}, [{"b": 2}, {"b": 3}])
    assert hoist_common([{"a": 1}, None]) == ({}, [{"a": 1}, {}])
    assert hoist_common([]) == ({}, [])


def test_every_hit_carries_its_merged_metadata(tmp_path: Path) -> None:
    build_tree([_jsonl(tmp_path / "c.jsonl", ROWS)], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        judge = ScriptedJudge()
        navigator = Navigator(tree, judge, preset(groups=(), documents=ONE_REQUEST))
        result = navigator.retrieve("refunds", k=3)
    by_key = {hit.key: hit for hit in result.hits}
    assert by_key, "the walk returned nothing"
    for key, hit in by_key.items():
        expected = {"b1": {"page": 1}, "b2": {"page": 2, "url": "https://x/b2"}, "s1": {}}[key]
        doc = {"b1": "billing", "b2": "billing", "s1": "search"}[key]
        assert hit.metadata["product"] == doc
        assert hit.metadata.items() >= expected.items()
        assert hit.to_dict()["metadata"] == hit.metadata


def test_ask_json_and_tree_show_metadata(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    build_tree([_jsonl(tmp_path / "c.jsonl", ROWS)], tmp_path / "t.tree")
    assert main(["ask", str(tmp_path / "t.tree"), "Refunds take a week", "--judge", "scripted",
                 "--top", "1", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["results"][0]
    assert first["id"] == "b2"
    assert first["metadata"] == {"source": str(tmp_path / "c.jsonl"), "url": "https://x/b2",
                                 "product": "billing", "year": 2024, "lang": "en", "page": 2}
    assert main(["tree", str(tmp_path / "t.tree"), "--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r'doc \{url: "https://x/b2", product: "billing", year: 2024, lang: "en"\} '
                     r"Billing guide", out), out
    assert 'passage {page: 1} Invoices are monthly' in out
    assert main(["tree", str(tmp_path / "t.tree"), "--node", "search", "--metadata"]) == 0
    out = capsys.readouterr().out
    assert f'· metadata {{source: "{tmp_path / "c.jsonl"}", product: "search", tags: ["a", "b"]}}' \
        in out, out
