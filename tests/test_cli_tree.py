from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decisionrag._cli import main


def _corpus(tmp_path: Path, n_docs: int = 12, groups: bool = True) -> Path:
    lines = []
    for d in range(n_docs):
        for p in range(d % 4 + 1):
            section = ["Part A"] if p % 2 else []
            lines.append(json.dumps({"id": f"d{d}-p{p}", "doc_id": f"d{d}", "doc_title": f"Doc {d}",
                                     "section": section, "text": f"passage {p} of doc {d}",
                                     **({"group": "Even" if d % 2 == 0 else "Odd"} if groups
                                        else {})}))
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "c.tree"
    assert main(["build", str(_corpus(tmp_path)), "-o", str(out), "--quiet"]) == 0
    capsys.readouterr()
    return out


def test_build_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    out = tmp_path / "c.tree"
    code = main(["build", str(_corpus(tmp_path)), str(tmp_path / "empty.jsonl"), "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0 and out.is_file()
    assert "12 documents, 30 passages" in captured.out
    assert "warning: skipped 1 documents (1 empty)" in captured.err


def test_tree_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _build(tmp_path, capsys)
    assert main(["tree", str(tree), "--depth", "2", "--max-children", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#0 root c.tree") and "(12 documents, 30 passages)" in lines[0]
    assert lines[1].startswith("├─ #") and "group Even  (" in lines[1]
    assert any("doc Doc 0  (1 passage)" in line for line in lines)
    assert any(line.endswith("… 3 more") for line in lines)  # 6 docs per group, 3 shown
    assert not any("passage 0 of doc 0" in line for line in lines)  # depth 2 stops at docs


def test_tree_view_of_a_node_by_key_and_width(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _build(tmp_path, capsys)
    monkeypatch.setenv("COLUMNS", "34")
    assert main(["tree", str(tree), "--node", "d3", "--depth", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#") and " doc Doc 3 —" in lines[0]
    assert lines[0].endswith("…  (4 passages)")  # the title is cut, the count kept
    assert all(len(line) <= 34 for line in lines)
    assert any("section Part" in line for line in lines)
    assert sum(" passage passage " in line for line in lines) == 4


def test_stats_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _build(tmp_path, capsys)
    assert main(["stats", str(tree), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["counts"]["document"] == 12 and stats["counts"]["passage"] == 30
    assert stats["schema_version"] == 1 and stats["file_bytes"] == tree.stat().st_size
    assert stats["passages_per_document"] == {"min": 1, "median": 2.5, "max": 4}
    assert stats["by_depth"]["1"] == {"group": 2} and stats["by_depth"]["2"] == {"document": 12}
    depth_total = sum(n for kinds in stats["by_depth"].values() for n in kinds.values())
    assert depth_total == sum(stats["counts"].values())
    assert main(["stats", str(tree)]) == 0
    text = capsys.readouterr().out
    assert "passages per document: min 1, median 2.5, max 4" in text
    assert "nodes by depth:" in text


@pytest.mark.parametrize("argv", [
    ["tree", "{tmp}/missing.tree"],
    ["stats", "{tmp}/corpus.jsonl"],
    ["tree", "{tree}", "--node", "no-such-node"],
    ["build", "{tmp}/nothing-here", "-o", "{tmp}/x.tree"],
])
def test_user_mistakes_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           argv: list[str]) -> None:
    tree = _build(tmp_path, capsys)
    args = [a.format(tmp=tmp_path, tree=tree) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("decisionrag: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_bad_jsonl_through_the_cli_names_the_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "doc_id": "d", "text": "t"}\nnot json\n', encoding="utf-8")
    assert main(["build", str(bad), "-o", str(tmp_path / "x.tree")]) == 2
    assert "bad.jsonl, line 2: malformed JSON" in capsys.readouterr().err
    assert not (tmp_path / "x.tree").exists()


def test_bad_options_are_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["build", "x", "-o", "y", "--cluster", "1"],
                 ["build", "x", "-o", "y", "--cluster", "many"],
                 ["tree", "t", "--depth", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    assert "--cluster-model needs --cluster" in _run_error(
        ["build", "x", "-o", "y", "--cluster-model", "m"], capsys)


def _run_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    return capsys.readouterr().err


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    expected = {"build": ["--out", "--format", "--cluster", "--cluster-model", "--quiet", "SRC"],
                "tree": ["--node", "--depth", "--max-children", "TREE"],
                "stats": ["--json", "TREE"]}
    for command, options in expected.items():
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        for option in options:
            assert option in text, (command, option)


def test_real_subprocess_build_and_tree(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, n_docs=3)
    out = tmp_path / "sub.tree"
    cli = [sys.executable, "-m", "decisionrag"]
    built = subprocess.run([*cli, "build", str(corpus), "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    assert "3 documents, 6 passages" in built.stdout
    shown = subprocess.run([*cli, "tree", str(out), "--depth", "3"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "passage 0 of doc 2" in shown.stdout
    failed = subprocess.run([*cli, "stats", str(tmp_path / "no.tree")],
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "no such tree file" in failed.stderr


@pytest.mark.slow
def test_build_with_cluster_puts_documents_under_groups(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.tree"
    corpus = _corpus(tmp_path, groups=False)
    assert main(["build", str(corpus), "-o", str(out), "--quiet", "--cluster", "3"]) == 0
    capsys.readouterr()
    assert main(["stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["counts"]["document"] == 12 and stats["counts"]["group"] >= 3
    assert "document" not in stats["by_depth"]["1"]  # every document sits under a group


def test_sigterm_mid_build_leaves_no_files(tmp_path: Path) -> None:
    """A build killed with SIGTERM removes its temporary file (the CLI turns it into SystemExit)."""
    import signal
    import time

    corpus = tmp_path / "big.jsonl"
    with corpus.open("w", encoding="utf-8") as handle:
        for i in range(300_000):
            handle.write(f'{{"id": "p{i}", "doc_id": "d{i // 10}", "doc_title": "T", "text": "word {i}"}}\n')
    out = tmp_path / "out" / "t.tree"
    out.parent.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "decisionrag", "build", str(corpus), "-o", str(out),
                                "--quiet"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(out.parent.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    assert process.stderr is not None
    said = process.stderr.read().decode(errors="replace")[-2000:]
    assert (code, list(out.parent.iterdir())) == (128 + signal.SIGTERM, []), said
