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


# -- issue 23: clear errors instead of tracebacks, each a class --------------------------------

def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert code == 2 and err.startswith("decisionrag: error:"), err
    return err


def _damage_meta(tree: Path) -> None:
    import sqlite3

    db = sqlite3.connect(tree)
    db.execute("UPDATE meta SET value = '{not json' WHERE key = 'counts'")
    db.commit()
    db.close()


@pytest.mark.parametrize("command", [["stats"], ["tree"], ["ask", "renew", "--judge", "scripted"]])
def test_a_tree_with_bad_json_in_its_meta_row(tree_path: Path, command: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _damage_meta(tree_path)
    argv = [command[0], str(tree_path), *command[1:]]
    assert "the tree file is damaged" in _one_line_error(argv, capsys)


def test_a_tree_with_flipped_bytes(tree_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tree_path.read_bytes()
    for offset in (18, 40, 100, len(good) // 3, len(good) // 2, len(good) - 200):
        damaged = bytearray(good)
        damaged[offset:offset + 48] = bytes(b ^ 0xFF for b in damaged[offset:offset + 48])
        tree_path.write_bytes(bytes(damaged))
        for argv in (["stats", str(tree_path)], ["tree", str(tree_path), "--depth", "9"],
                     ["ask", str(tree_path), "renew passport", "--judge", "scripted"]):
            code = main(argv)
            err = capsys.readouterr().err
            assert "Traceback" not in err and code in (0, 2), (offset, argv, err)
            if code == 2:
                assert err.startswith("decisionrag: error:") and err.count("\n") == 1, err


def test_serve_refuses_a_damaged_tree_at_start(tree_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _damage_meta(tree_path)
    err = _one_line_error(["serve", str(tree_path), "--judge", "scripted", "--port", "9"], capsys)
    assert "the tree file is damaged" in err


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_build_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(DOC)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "w") as handle:
        handle.write(DOC.replace("Passports", "Visas"))
    out = tmp_path / "t.tree"
    assert main(["build", str(folder), "-o", str(out), "--quiet", "--no-vectors"]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "caf\\xe9.md" in err and "not UTF-8 (byte 0xe9)" in err
    with Tree.open(out) as tree:
        assert tree.counts["document"] == 1


@pytest.mark.parametrize("question", ["\u200b\u200d", "\x07\x1b", "\u202e\u2066 \u3164",
                                      "\u0301\u0302", "\ufeff\n\t"])
def test_a_question_of_only_invisible_characters_is_empty(
    tree_path: Path, question: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _one_line_error(["ask", str(tree_path), question, "--judge", "scripted"], capsys)
    assert "the question is empty" in err


@pytest.mark.parametrize("filters", ['{"year": NaN}', '{"year": {"gte": Infinity}}',
                                     '{"year": {"in": [1, -Infinity]}}'])
def test_nan_is_refused_in_filters(tree_path: Path, filters: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(["ask", str(tree_path), "renew", "--judge", "scripted", "--filters",
                           filters], capsys)
    assert "NaN and infinities are refused" in err


def _nested(depth: int) -> str:
    return '{"not": ' * depth + '{"year": 1}' + "}" * depth


@pytest.mark.parametrize("depth", [40, 500, 100_000])
def test_deep_filters_are_a_clear_error_on_the_cli(tree_path: Path, depth: int,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import time

    start = time.monotonic()
    err = _one_line_error(["ask", str(tree_path), "renew", "--judge", "scripted", "--filters",
                           _nested(depth)], capsys)
    assert "nested" in err and time.monotonic() - start < 5


def test_citations_naming_no_passage_are_flagged() -> None:
    from decisionrag._answer._citations import cited_numbers

    assert cited_numbers("a [1] b [-1] c [12345] d [0] e [2, −3]") == [1, -1, 12345, 0, 2, -3]


def test_python_warnings_are_plain_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "passports.md").write_text(DOC)
    tree = build_tree([tmp_path / "passports.md"], tmp_path / "docs.tree").path  # no BM25 index
    assert main(["ask", str(tree), "renew passport", "--judge", "scripted", "--hybrid", "bm25"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warning" in line]
    assert lines and all(line.startswith("decisionrag: warning: ") for line in lines), err
    assert ".py:" not in err and "warnings.warn" not in err and "stacklevel" not in err
