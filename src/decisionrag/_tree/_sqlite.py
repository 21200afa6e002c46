"""Opening tree files with SQLite: by URI, so that a path is taken literally.

A file name is never pasted into a URI: ``#``, ``?`` and ``%`` would start a fragment, a
query or an escape, and ``file:/data/a#b.tree?mode=ro`` opens (and creates, empty)
``/data/a``. `file_uri` percent-encodes the whole absolute path (`Path.as_uri`) and adds
the parameters after it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any


def file_uri(path: str | os.PathLike[str], **params: str) -> str:
    """``file:///ABSOLUTE/PATH?k=v`` with every special character of the path escaped."""
    uri = Path(path).resolve().as_uri()
    return uri + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def connect_readonly(path: str | os.PathLike[str], *, immutable: bool = True,
                     **options: Any) -> sqlite3.Connection:
    """A read-only connection to the file at `path` (never created); `immutable`: SQLite
    takes no locks and assumes the file does not change (tree files are replaced, never
    changed in place)."""
    params = {"mode": "ro", **({"immutable": "1"} if immutable else {})}
    return sqlite3.connect(file_uri(path, **params), uri=True, **options)
