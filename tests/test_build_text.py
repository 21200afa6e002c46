from __future__ import annotations

import os
from pathlib import Path

import pytest

from decisionrag import InputError, Tree
from decisionrag._build import build_tree
from decisionrag._build._text import parse_text

MANUAL = """Backup Manual

This manual explains how backups
work on the server.

Scheduling backups

Backups run every night at two.
Each run keeps seven days.

It is short.

- first bullet line
- second bullet line

Restoring

To restore, stop the service and
copy the files back.
"""


def test_headings_are_recovered_from_layout() -> None:
    doc = parse_text(MANUAL, "fallback")
    assert doc.title == "Backup Manual"
    assert [(p.section, p.text) for p in doc.passages] == [
        ((), "This manual explains how backups work on the server."),
        (("Scheduling backups",), "Backups run every night at two. Each run keeps seven days."),
        (("Scheduling backups",), "It is short."),
        (("Scheduling backups",), "- first bullet line - second bullet line"),
        (("Restoring",), "To restore, stop the service and copy the files back."),
    ]


def test_underlined_headings_nest_and_plain_ones_go_below() -> None:
    text = ("Intro paragraph.\n\nPart One\n========\n\nBody one.\n\nDetails\n-------\n\n"
            "Body two.\n\nSmall Point\n\nBody three.\n\nPart Two\n========\n\nBody four.\n")
    doc = parse_text(text, "fb")
    assert doc.title == "fb"
    assert [(p.section, p.text) for p in doc.passages] == [
        ((), "Intro paragraph."),
        (("Part One",), "Body one."),
        (("Part One", "Details"), "Body two."),
        (("Part One", "Details", "Small Point"), "Body three."),
        (("Part Two",), "Body four."),
    ]


def test_a_short_last_line_is_a_passage_not_a_heading() -> None:
    doc = parse_text("Some text here.\n\nThe End\n", "fb")
    assert [p.text for p in doc.passages] == ["Some text here.", "The End"]


def test_text_files_round_trip_and_skips(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "manual.txt").write_text(MANUAL, encoding="utf-8")
    (notes / "README").write_text("Readme Title\n\nNo extension is text too.\n", encoding="utf-8")
    (notes / "blank.text").write_text("\n   \n", encoding="utf-8")
    report = build_tree([notes], tmp_path / "t.tree")
    assert report.counts["document"] == 2 and report.counts["passage"] == 6
    assert report.skipped == [(str(notes / "blank.text"), "empty")]
    with Tree.open(tmp_path / "t.tree") as tree:
        assert [d.title for d in tree.documents()] == ["Readme Title", "Backup Manual"]
        manual = tree.node("manual.txt")
        assert manual.description == "Backup Manual — Scheduling backups; Restoring"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read unreadable files")
def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("Fine text.\n", encoding="utf-8")
    locked = tmp_path / "locked.txt"
    locked.write_text("secret\n", encoding="utf-8")
    locked.chmod(0)
    try:
        report = build_tree([tmp_path], tmp_path / "t.tree")
    finally:
        locked.chmod(0o644)
    assert [(Path(f).name, why.split(" ")[0]) for f, why in report.skipped] == [
        ("locked.txt", "unreadable")]


def test_explicit_format_and_unknown_extension(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("Startup\n\nThe server started.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"server\.log: cannot tell the format.*--format"):
        build_tree([log], tmp_path / "t.tree")
    report = build_tree([log], tmp_path / "t.tree", format="text")
    assert report.counts["passage"] == 1
    with pytest.raises(InputError, match="no such file or folder"):
        build_tree([tmp_path / "missing"], tmp_path / "t2.tree")
    with pytest.raises(InputError, match="unknown format"):
        build_tree([log], tmp_path / "t2.tree", format="odt")


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_unreadable_file_is_skipped_even_for_root(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("Fine text.\n", encoding="utf-8")
    # reading /proc/self/mem from offset 0 fails with EIO, whoever we are
    report = build_tree([tmp_path / "ok.txt", "/proc/self/mem"], tmp_path / "t.tree")
    assert report.counts["document"] == 1
    skipped = [(f, why.split(" ")[0]) for f, why in report.skipped]
    assert skipped == [("/proc/self/mem", "unreadable")]


def test_output_problems_are_input_errors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Some text.\n", encoding="utf-8")
    with pytest.raises(InputError, match="is a folder"):
        build_tree([tmp_path / "a.txt"], tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="cannot write the tree"):
        build_tree([tmp_path / "a.txt"], blocker / "sub" / "t.tree")  # parent is a file
