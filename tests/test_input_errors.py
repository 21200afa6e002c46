"""Every input error is a clear message (issue #16): the cases the issue lists, one test each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._errors import InputError, JudgeProtocolError
from decisionrag._judges import BinaryRequest, load_judge
from decisionrag._judges._faults import FaultServer
from decisionrag._judges._jev import system_one_root
from decisionrag._navigate import Navigator
from decisionrag._tree import Tree

DOC = "# Passports\n\n## Renew\n\nRenew your passport online.\n\n## Fees\n\nThe fee is 80 euros.\n"


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def tree_path(tmp_path: Path) -> Path:
    (tmp_path / "passports.md").write_text(DOC)
    return build_tree([tmp_path / "passports.md"], tmp_path / "docs.tree").path


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    return err


def test_a_non_utf8_byte_in_the_question(tree_path: Path, faults: FaultServer,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    question = b"renew caf\xff?".decode("utf-8", "surrogateescape")  # what argv holds
    for judge in ("embedded", faults.judge_id("ok")):
        err = _error(["ask", str(tree_path), question, "--judge", judge], capsys)
        assert "not valid UTF-8 text: byte 0xff at position 9" in err
    assert faults.counts["ok"] == 0  # refused before anything was sent


def test_an_empty_question_is_not_sent(tree_path: Path, faults: FaultServer) -> None:
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, load_judge(faults.judge_id("ok")), "flat")
        for question in ("", "   \n"):
            with pytest.raises(InputError, match="the question is empty"):
                navigator.retrieve(question)
    assert faults.counts["ok"] == 0


def test_a_latin1_history_file(tree_path: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes('{"role": "user", "text": "ok"}\n{"role": "user", "text": "café"}\n'
                        .encode("latin-1"))
    err = _error(["ask", str(tree_path), "and the fee?", "--history", str(history)], capsys)
    assert "history.jsonl: line 2: not UTF-8 (byte 0xe9" in err


def test_a_self_referencing_symlink_is_skipped_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(DOC)
    (folder / "loop").symlink_to("loop")
    assert main(["build", str(folder), "-o", str(tmp_path / "t.tree"), "--quiet"]) == 0
    assert "skipped 1 documents (1 unreadable (Too many levels of symbolic links))" in (
        capsys.readouterr().err)


async def test_a_response_nested_100000_deep(faults: FaultServer) -> None:
    judge = load_judge(faults.judge_id("nested"))
    with pytest.raises(JudgeProtocolError, match="nested too deeply"):
        await judge.binary(BinaryRequest("c", ("q?",)))
    await judge.aclose()


def test_a_duplicate_passage_id_names_the_source_file_and_lines(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    rows = [{"id": "p1", "doc_id": "d1", "text": "a"}, {"id": "p2", "doc_id": "d1", "text": "b"},
            {"id": "p1", "doc_id": "d2", "text": "c"}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"corpus\.jsonl, line 3: passage id 'p1' is already used "
                                         r"at line 1"):
        build_tree([source], tmp_path / "c.tree")
    assert not list(tmp_path.glob("*.tree*"))


def test_conflicting_titles_for_one_doc_id(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    rows = [{"id": "p1", "doc_id": "d1", "doc_title": "Passports", "text": "a"},
            {"id": "p2", "doc_id": "d1", "doc_title": "", "text": "b"},
            {"id": "p3", "doc_id": "d1", "doc_title": "Visas", "text": "c"}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"line 3: doc_id 'd1' has doc_title 'Visas', but line 1 "
                                         r"gave it 'Passports'"):
        build_tree([source], tmp_path / "c.tree")


def test_a_base_url_ending_in_v1(faults: FaultServer) -> None:
    assert system_one_root("http://h:8000/v1") == "http://h:8000"
    assert system_one_root("http://h:8000/v1/") == "http://h:8000"
    assert system_one_root("http://h:8000/v1/systemone") == "http://h:8000"
    assert system_one_root("http://h:8000") == "http://h:8000"
    judge = load_judge(faults.judge_id("ok") + "/v1")
    assert judge.binary_sync(BinaryRequest("c", ("q?",))).probabilities


def test_control_characters_never_reach_the_terminal(
    tmp_path: Path, faults: FaultServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "evil.md").write_text("# Evil\x1b]8;;http://x\x07 title\n\nClear \x1b[2J the "
                                      "screen \u202eesrever and ring \x07 renew passport.\n")
    tree = tmp_path / "evil.tree"
    assert main(["build", str(tmp_path / "evil.md"), "-o", str(tree), "--quiet"]) == 0
    ask = ["ask", str(tree), "renew passport", "--judge", faults.judge_id("ok")]
    for argv in (["tree", str(tree), "--depth", "4"], ask):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\\u001b" in out
        assert not any(ch in out for ch in "\x1b\x07\u202e")


def test_a_folder_named_x_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.tree").mkdir()
    err = _error(["stats", str(tmp_path / "x.tree")], capsys)
    assert "is a folder, not a tree file" in err
