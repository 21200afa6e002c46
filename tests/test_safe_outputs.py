"""A build never destroys a user's file: issue #16, "safe outputs"."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._errors import InputError, TreeFormatError
from decisionrag._files import remove_stale_temporaries
from decisionrag._tree import Tree

NOTES = "# Notes\n\nRenew a passport at the office.\n\n## Fees\n\nThe fee is 80 euros.\n"


def _notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.md"
    path.write_text(NOTES)
    return path


def test_build_onto_its_own_source_is_refused_even_with_force(tmp_path: Path) -> None:
    source = _notes(tmp_path)
    for force in (False, True):
        with pytest.raises(InputError, match="is one of the build's sources"):
            build_tree([source], source, force=force)
    assert source.read_text() == NOTES


def test_a_source_inside_a_folder_is_protected_too(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    source = folder / "a.md"
    source.write_text(NOTES)
    with pytest.raises(InputError, match="sources"):
        build_tree([folder], source, force=True)
    assert source.read_text() == NOTES


def test_a_user_file_is_refused_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _notes(tmp_path)
    precious = tmp_path / "thesis.tree"
    precious.write_text("years of work")
    assert main(["build", str(source), "-o", str(precious), "--quiet"]) == 2
    assert "not a decisionrag tree" in capsys.readouterr().err
    assert precious.read_text() == "years of work"
    assert main(["build", str(source), "-o", str(precious), "--quiet", "--force"]) == 0
    assert Tree.open(precious).counts["document"] == 1


def test_an_existing_tree_is_replaced_without_force(tmp_path: Path) -> None:
    source = _notes(tmp_path)
    out = tmp_path / "notes.tree"
    build_tree([source], out)
    build_tree([source], out)
    assert Tree.open(out).counts["document"] == 1


def test_a_device_or_fifo_is_never_replaced(tmp_path: Path) -> None:
    source = _notes(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        build_tree([source], fifo, force=True)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(InputError, match="not a regular file"):
        build_tree([source], "/dev/null", force=True)


def test_modes_follow_the_umask(tmp_path: Path) -> None:
    source = _notes(tmp_path)
    old = os.umask(0o022)
    try:
        out = build_tree([source], tmp_path / "a.tree").path
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_temp_files_of_dead_builds_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    out = tmp_path / "notes.tree"
    stale = tmp_path / f".notes.tree.{pid}.abc123xy.tmp"
    stale.write_bytes(b"half a tree")
    alive = tmp_path / f".notes.tree.{os.getppid()}.abc123xy.tmp"  # a live process's
    alive.write_bytes(b"being written")
    legacy = tmp_path / "notes.tree.Xy12ab34.tmp"  # what a build killed before this fix left
    legacy.write_bytes(b"old")
    os.utime(legacy, (0, 0))
    build_tree([_notes(tmp_path)], out)
    assert not stale.exists()
    assert not legacy.exists()
    assert alive.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, "notes.md", "notes.tree"])
    assert remove_stale_temporaries(out) == []


def test_a_sigkilled_build_leaves_a_temp_file_the_next_build_removes(tmp_path: Path) -> None:
    source = _notes(tmp_path)
    out = tmp_path / "big.tree"
    script = ("import os, signal, sys\n"
              "from decisionrag._tree import TreeWriter\n"
              "w = TreeWriter(sys.argv[1])\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", script, str(out)], env=env, check=False)
    leftovers = list(tmp_path.glob(".big.tree.*.tmp"))
    assert len(leftovers) == 1
    build_tree([source], out)
    assert not list(tmp_path.glob(".big.tree.*.tmp"))
    assert Tree.open(out).counts["document"] == 1


def test_a_folder_named_like_a_tree_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "x.tree"
    folder.mkdir()
    with pytest.raises(TreeFormatError, match="is a folder, not a tree file"):
        Tree.open(folder)


# -- issue 23: one output rule for every flag that writes a file ------------------------------

def _tree(tmp_path: Path) -> Path:
    return build_tree([_notes(tmp_path)], tmp_path / "notes.tree").path


def _ask(tree: Path, *extra: str) -> list[str]:
    return ["ask", str(tree), "renew passport", "--judge", "scripted", *extra]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], reason: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err, err


@pytest.mark.parametrize("command", ["ask", "answer"])
def test_html_never_replaces_the_tree_it_reads(command: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path)
    before = tree.read_bytes()
    argv = [command, str(tree), "renew passport", "--judge", "scripted", "--html", str(tree)]
    for force in ([], ["--force"]):
        _refused(argv + force, capsys, "is one of this command's inputs")
    assert tree.read_bytes() == before
    history = tmp_path / "history.json"
    history.write_text('[{"role": "user", "text": "hi"}]')
    _refused([*argv[:-1], str(history), "--history", str(history), "--force"], capsys,
             "is one of this command's inputs")


def test_html_refuses_a_user_file_unless_forced_and_replaces_its_own_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    notes = tmp_path / "notes.md"
    _refused(_ask(tree, "--html", str(notes)), capsys, "exists and is not an HTML page")
    assert notes.read_text() == NOTES
    page = tmp_path / "walk.html"
    assert main(_ask(tree, "--html", str(page))) == 0
    assert main(_ask(tree, "--html", str(page))) == 0  # its own page: replaced
    assert main(_ask(tree, "--html", str(notes), "--force")) == 0
    assert notes.read_text().startswith("<!DOCTYPE html>")


def test_html_never_replaces_the_trees_vectors_or_indexes(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "notes.tree"
    assert main(["build", str(_notes(tmp_path)), "-o", str(tree), "--quiet", "--no-vectors"]) == 0
    inside = next((tmp_path / "notes.tree.bm25").iterdir())
    before = inside.read_bytes()
    _refused(_ask(tree, "--html", str(inside), "--force"), capsys, "which this command reads")
    assert inside.read_bytes() == before


def test_html_refuses_pipes_devices_and_links(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        _refused(_ask(tree, "--html", str(target), "--force"), capsys, "refusing to replace it")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(precious)
    stdout = tmp_path / "stdout"  # what /dev/stdout is (not touched here: a test runs as root)
    stdout.symlink_to("/proc/self/fd/1")
    for target in (link, stdout):
        _refused(_ask(tree, "--html", str(target), "--force"), capsys, "is a symbolic link")
        assert target.is_symlink()
    assert precious.read_text() == "mine"
    _refused(_ask(tree, "--html", str(tmp_path)), capsys, "is a folder")


def _eval_argv(dataset: Path, *extra: str) -> list[str]:
    return ["eval", str(dataset), "--systems", "bm25", "--no-progress", *extra]


def test_eval_outputs_follow_the_same_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_eval_runner import write_dataset

    dataset = write_dataset(tmp_path / "data")
    corpus = dataset / "corpus.jsonl"
    before = corpus.read_bytes()
    _refused(_eval_argv(dataset, "--json", str(corpus), "--force"), capsys,
             "which this command reads")
    assert corpus.read_bytes() == before
    notes = _notes(tmp_path)
    _refused(_eval_argv(dataset, "--json", str(notes)), capsys, "exists and is not a JSON report")
    report = tmp_path / "report.json"
    assert main(_eval_argv(dataset, "--json", str(report))) == 0
    assert main(_eval_argv(dataset, "--json", str(report))) == 0  # its own report: replaced
    for flag in ("--save-runs", "--report"):
        _refused(_eval_argv(dataset, flag, str(notes)), capsys, "is not a folder")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "bm25.trec").write_text("my notes, not a run\n")
    _refused(_eval_argv(dataset, "--save-runs", str(runs)), capsys, "exists and is not a TREC run")
    assert main(_eval_argv(dataset, "--save-runs", str(runs), "--force")) == 0
    assert main(_eval_argv(dataset, "--save-runs", str(runs), "--report", str(runs))) == 0
    assert notes.read_text() == NOTES
