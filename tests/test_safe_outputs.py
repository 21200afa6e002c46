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
