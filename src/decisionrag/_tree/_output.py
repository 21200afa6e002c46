"""Where a tree file may be written.

`check_output` refuses a path that holds anything other than a decisionrag tree (a user's
notes, a folder), unless ``force``; a path that is one of the build's own sources, or not a
regular file (a device, a pipe), is refused even with ``force``. The writing itself (a
temporary file renamed into place, stale temporary files of dead writers removed) is
`decisionrag._files.temporary_beside`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .._errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"


def check_output(out: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]] = (),
                 *, force: bool = False) -> Path:
    """`out` as a Path, or `InputError` saying why a tree must not be written there."""
    path = Path(out)
    if path.is_dir():
        raise InputError(f"{path}: is a folder; name the tree file to write")
    for source in sources:
        if _same_file(path, Path(source)):
            raise InputError(f"{path}: is one of the build's sources; refusing to overwrite it "
                             "(name another output file)")
    try:
        info = path.stat()
    except OSError:  # nothing there (or its folder cannot be made): the writer will say
        return path
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: is not a regular file (a device, pipe or socket); "
                         "refusing to replace it, even with --force")
    if force or is_tree_file(path):
        return path
    raise InputError(f"{path}: exists and is not a decisionrag tree; refusing to overwrite it "
                     "(pass --force to replace it, or name another output file)")


def is_tree_file(path: Path) -> bool:
    """Whether `path` is an SQLite file with the tables and metadata of a tree."""
    try:
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return False
    except OSError:
        return False
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            db.execute("SELECT id FROM nodes LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False
    return row is not None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False
