"""Where a tree file may be written.

`check_output` is the one output rule of `decisionrag._files.check_output` with a tree's
kind: a path that holds anything other than a decisionrag tree (a user's notes) is refused
unless ``force``; a folder, a device or pipe, or one of the build's own sources always is.
The writing itself (a temporary file renamed into place, stale temporary files of dead
writers removed) is `decisionrag._files.temporary_beside`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .._files import OutputKind
from .._files import check_output as check_any_output

SQLITE_MAGIC = b"SQLite format 3\x00"


def check_output(out: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]] = (),
                 *, force: bool = False) -> Path:
    """`out` as a Path, or `InputError` saying why a tree must not be written there."""
    path = Path(out)
    if path.is_dir():
        from .._errors import InputError

        raise InputError(f"{path}: is a folder; name the tree file to write")
    return check_any_output(out, sources, force=force, kind=TREE_FILE,
                            inputs_are="the build's sources")


def is_tree_file(path: Path) -> bool:
    """Whether `path` is an SQLite file with the tables and metadata of a tree."""
    try:
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return False
    except OSError:
        return False
    import sqlite3

    from ._sqlite import connect_readonly

    try:
        db = connect_readonly(path, immutable=False)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            db.execute("SELECT id FROM nodes LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False
    return row is not None


TREE_FILE = OutputKind("a decisionrag tree", is_tree_file)


def tree_inputs(tree: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """What a command reading `tree` must never overwrite: the tree file, and the folders
    stored beside it (its vectors and indexes), for `check_output`'s inputs and within."""
    from ._bm25 import bm25_folder
    from ._vectors import vectors_folder

    return [Path(tree)], [vectors_folder(tree), bm25_folder(tree)]
