from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionrag import InputError, NodeKind, Tree
from decisionrag._build import _jsonl as jsonl_module
from decisionrag._build import build_tree
from decisionrag._build._derive import derive_description, derive_title, recovered_headings


def _write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _rec(pid: str, doc: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": pid, "doc_id": doc, "doc_title": extra.pop("title", f"Title {doc}"),
            "section": extra.pop("section", []), "text": text, **extra}


def test_round_trip_groups_sections_and_urls(tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "corpus.jsonl", [
        _rec("p1", "A", "intro", group="Help", url="https://a/1"),
        _rec("p2", "A", "one", section=["Install"], group="Help"),
        _rec("p3", "A", "two", section=["Install", "Linux"], group="Help", url="https://a/2"),
        _rec("p4", "B", "solo", group="Help"),
        _rec("p5", "C", "other"),
    ])
    report = build_tree([src], tmp_path / "t.tree")
    assert report.counts["document"] == 3 and report.counts["passage"] == 5
    assert report.counts["section"] == 2 and report.counts["group"] == 1
    assert report.skipped == []
    with Tree.open(tmp_path / "t.tree") as tree:
        top = tree.children(tree.root.id)
        assert [(n.kind, n.title) for n in top] == [(NodeKind.GROUP, "Help"),
                                                    (NodeKind.DOCUMENT, "Title C")]
        assert [d.key for d in tree.children(top[0].id)] == ["A", "B"]
        assert [d.key for d in tree.children(top[0].id, limit=1)] == ["A"]
        assert tree.count_children(top[0].id) == 2 and tree.count_children(tree.root.id) == 2
        doc = tree.node("A")
        assert [c.key for c in tree.children(doc.id, limit=2)] == ["p1", "A#s2"]
        assert tree.count_children(doc.id) == 2
        assert doc.url == "https://a/1" and doc.description == "Title A — Install"
        assert [p.key for p in tree.passages(doc.id)] == ["p1", "p2", "p3"]
        p3 = tree.node("p3")
        assert p3.heading == ("Install", "Linux") and p3.url == "https://a/2"
        assert tree.node("p2").url is None
        assert [n.title for n in tree.path(p3.id)][1:-1] == ["Help", "Title A", "Install", "Linux"]


def test_byte_order_mark_and_blank_lines_are_fine(tmp_path: Path) -> None:
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + json.dumps(_rec("p", "D", "text")).encode() + b"\n\n\n")
    assert build_tree([src], tmp_path / "t.tree").counts["passage"] == 1


def test_duplicate_passage_ids_are_named(tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "c.jsonl", [_rec("p", "A", "one"), _rec("p", "B", "two")])
    with pytest.raises(InputError, match=r"duplicate node ids.*'p' ×2"):
        build_tree([src], tmp_path / "t.tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_reappearing_doc_is_regrouped(tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "c.jsonl", [
        _rec("a1", "A", "a one"), _rec("b1", "B", "b one"), _rec("a2", "A", "a two"),
    ])
    build_tree([src], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        assert [d.key for d in tree.documents()] == ["A", "B"]
        assert [p.key for p in tree.passages(tree.node("A").id)] == ["a1", "a2"]


def test_reappearing_doc_in_a_streamed_file_is_an_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "REGROUP_LIMIT_BYTES", 0)  # force the streaming path
    src = _write_jsonl(tmp_path / "c.jsonl", [
        _rec("a1", "A", "a one"), _rec("b1", "B", "b one"), _rec("a2", "A", "a two"),
    ])
    with pytest.raises(InputError, match=r"c\.jsonl, line 3: doc_id 'A' reappears.*line 1"):
        build_tree([src], tmp_path / "t.tree")
    assert not (tmp_path / "t.tree").exists()


def test_malformed_line_names_file_and_line_and_leaves_no_tree(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    good = [json.dumps(_rec(f"p{i}", f"D{i}", "text")) for i in range(3)]
    src.write_text("\n".join([*good, '{"id": "x", "doc_id": ', *good]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl, line 4: malformed JSON"):
        build_tree([src], tmp_path / "out.tree")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize(("record", "message"), [
    ({"id": "p", "doc_id": "d"}, "missing required field 'text'"),
    ({"doc_id": "d", "text": "t"}, "missing required field 'id'"),
    ({"id": "p", "doc_id": 3, "text": "t"}, "field 'doc_id' must be a string"),
    ({"id": "p", "doc_id": "d", "text": "t", "section": "Intro"}, "field 'section' must be a list"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_record_is_named(tmp_path: Path, record: Any, message: str) -> None:
    src = _write_jsonl(tmp_path / "c.jsonl", [_rec("ok", "D", "fine"), record])
    with pytest.raises(InputError, match=rf"c\.jsonl, line 2: {message}"):
        build_tree([src], tmp_path / "t.tree")
    assert not (tmp_path / "t.tree").exists()


def test_empty_file_is_skipped_and_counted(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    good = _write_jsonl(tmp_path / "good.jsonl", [_rec("p", "D", "text")])
    report = build_tree([tmp_path / "empty.jsonl", good], tmp_path / "t.tree")
    assert report.counts["document"] == 1
    assert report.skipped == [(str(tmp_path / "empty.jsonl"), "empty")]
    assert report.warning() is not None and "1 empty" in report.warning()  # type: ignore[operator]


def test_only_empty_input_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"no documents found.*1 empty"):
        build_tree([tmp_path / "empty.jsonl"], tmp_path / "t.tree")
    assert not (tmp_path / "t.tree").exists()


def test_untitled_documents_get_derived_titles(tmp_path: Path) -> None:
    text = ("Getting started tutorial \n\nThe service runs jobs.\n\n Before you begin \n\n"
            "You need an account.")
    src = _write_jsonl(tmp_path / "c.jsonl", [
        _rec("p1", "D1", text, title=""),
        _rec("p2", "D2", "no layout here, just one long sentence " * 3, title=""),
    ])
    build_tree([src], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        d1, d2 = tree.node("D1"), tree.node("D2")
        assert d1.title == "Getting started tutorial"
        assert d1.description == "Getting started tutorial — Before you begin"
        assert d2.title == "no layout here, just one long sentence no layout here, just one …"


def test_derive_title_and_headings() -> None:
    text = "Intro\n\nSome text.\n\nNot a heading.\n\nMore\n\ntext"
    assert recovered_headings(text) == ["Intro", "More"]
    # code, sentences, captions and widget labels are not titles
    assert recovered_headings("x = 1\n\nmore") == []
    assert derive_title(["Figure 2. A diagram\n\nZoom\n\nReal heading\n\nbody"]) == "Real heading"
    assert derive_title(["", "   "]) == ""
    assert derive_title(["a b c"]) == "a b c"
    assert derive_description("T", ["T\n\nbody\n\nOther part\n\nbody"]) == "T — Other part"
    assert derive_description("T", ["just text"]) == "T"


@pytest.mark.slow
def test_shared_datasets_build_with_their_counts(shared_data: Path, tmp_path: Path) -> None:
    # mtrag-cloud-pooled's README says 3,942 documents, but its corpus.jsonl holds 3,939
    # distinct doc_ids (each one contiguous); the tree has one document per doc_id.
    expected = {"conditionalqa-dev": (59, 4668), "mtrag-cloud-pooled": (3939, 11914),
                "xquad-en": (48, 240)}
    for name, (n_docs, n_passages) in expected.items():
        corpus = shared_data / name / "corpus.jsonl"
        doc_ids = {json.loads(line)["doc_id"] for line in corpus.open(encoding="utf-8")}
        report = build_tree([corpus], tmp_path / f"{name}.tree")
        assert (report.counts["document"], report.counts["passage"]) == (n_docs, n_passages), name
        assert report.counts["document"] == len(doc_ids)
        with Tree.open(tmp_path / f"{name}.tree") as tree:
            assert sum(tree.document_sizes()) == n_passages
            assert all(d.title for d in tree.documents())
