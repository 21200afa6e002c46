"""`decisionrag ask` as a user runs it: a real subprocess over a real tree file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _navigate_helpers import pets_tree
from decisionrag._cli import main


def ask(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "decisionrag", "ask", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_ask_json_and_trace_in_a_subprocess(tmp_path: Path) -> None:
    pets_tree(tmp_path / "pets.tree").close()
    history = tmp_path / "history.jsonl"
    history.write_text('{"role": "user", "text": "my cat"}\n{"role": "agent", "text": "yes?"}\n')
    done = ask(
        str(tmp_path / "pets.tree"),
        "Cat food passage",
        "--judge",
        "scripted",
        "--preset",
        "cqa",
        "--top",
        "2",
        "--json",
        "--history",
        str(history),
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"query", "results", "trace", "usage"}
    assert data["query"] == "Cat food passage"
    assert len(data["results"]) == 2
    first = data["results"][0]
    assert set(first) >= {"id", "doc_id", "score", "path", "text"}
    assert first["doc_id"] == "c1" and first["path"][:2] == ["Cats", "Cat food"]
    assert [stage["name"] for stage in data["trace"]] == ["page", "passage", "choice"]
    assert data["usage"]["requests"] == 3

    shown = ask(
        str(tmp_path / "pets.tree"),
        "Cat food passage",
        "--judge",
        "scripted",
        "--trace",
        "--preset",
        "cqa",
        "--mc-mode",
        "off",
        "--keep-pages",
        "2",
    )
    assert shown.returncode == 0, shown.stderr
    assert " 1. " in shown.stdout and "Cats › Cat food" in shown.stdout
    assert "├─ page: 5 candidates, 1 request" in shown.stdout and "kept 2, pruned 3" in shown.stdout
    assert "choice" not in shown.stdout


def test_user_mistakes_are_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pets_tree(tmp_path / "pets.tree").close()
    assert main(["ask", str(tmp_path / "missing.tree"), "q", "--judge", "scripted"]) == 2
    assert "missing.tree: no such tree file" in capsys.readouterr().err
    bad = tmp_path / "history.json"
    bad.write_text('[{"role": "user", "text": "a"}, {"role": "bot", "text": "b"}]')
    assert (
        main(
            ["ask", str(tmp_path / "pets.tree"), "q", "--judge", "scripted", "--history", str(bad)]
        )
        == 2
    )
    assert "history.json: item 2: 'role' must be 'user' or 'agent'" in capsys.readouterr().err
    assert (
        main(["ask", str(tmp_path / "pets.tree"), "q", "--judge", "scripted", "--preset", "nope"])
        == 2
    )
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_demo_builds_the_python_help_tree_once_and_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from decisionrag import demo

    assert demo.main(["--judge", "scripted", "--out", str(tmp_path)]) == 0
    first = capsys.readouterr().out
    assert "Built " in first and (tmp_path / "pydoc.tree").is_file()
    assert " 1. " in first and "Walk: " in first and "└─ choice" in first
    assert demo.main(["How do I write a for loop?", "--judge", "scripted", "--out", str(tmp_path)]) == 0
    assert "Using the tree built earlier" in capsys.readouterr().out
