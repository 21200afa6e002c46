"""Publishing a tree and what is stored beside it: one writer at a time, all or nothing.

``with publishing(TREE):`` is how every writer changes a tree (build, add, remove, sync,
rebalance, vectors, index):

* **One writer at a time.** A lock file beside the tree (``.TREE.lock``, `fcntl.flock`) is
  held for the whole change, from reading the tree to the last rename. A second writer
  waits for it (up to ``$DECISIONRAG_LOCK_WAIT`` seconds, default `LOCK_WAIT`), then reads the
  tree the first one published: both changes land. Past the wait it is refused with a clear
  message naming the holder (`TreeBusy`).
* **A version check before the rename.** An edit remembers which file it read
  (`TreeWriter.update`); if another file is there when it is about to publish (a writer that
  did not lock, an older decisionrag, a copy), nothing is written (`TreeChanged`).
* **Tree and side data together.** Inside the block, the new tree file is kept aside
  (`_staging.readable` opens it) and the headers of its vectors, lexicon, BM25 and ANN
  indexes are written pending beside the current ones. At the end the tree is renamed into
  place, then the pending headers are promoted and the files only the old headers named
  removed. An error, Ctrl-C or SIGTERM inside the block discards the new tree and everything
  pending: the old tree and its side data are untouched. A SIGKILL at any point leaves
  either the old pair or the new one readable (readers match a header to the tree they read,
  `_staging.candidates`), and the next writer finishes or discards what was pending
  (`settle`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._errors import InputError
from . import _staging
from ._ann import ann_files
from ._bm25 import HEADER, bm25_files, bm25_folder
from ._staging import PENDING, Publication
from ._vectors import LEXICON_FILE, lexicon_files, tree_stamp, vectors_files, vectors_folder

LOCK_WAIT = 120.0  # seconds a writer waits for another to finish
LOCK_WAIT_ENV = "DECISIONRAG_LOCK_WAIT"
_POLL = 0.05


class TreeBusy(InputError):
    """Another process is writing the tree, for longer than this one would wait."""


class TreeChanged(InputError):
    """The tree file changed while an edit of it ran; nothing was written."""


def identity(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What tells one version of a file from another (None when there is none)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


# ---------------------------------------------------------------- the lock


def lock_path(tree: str | os.PathLike[str]) -> Path:
    path = Path(tree)
    return path.with_name(f".{path.name}.lock")


class TreeLock:
    """An exclusive lock on writing `tree`, held by this process until `release`."""

    def __init__(self, tree: str | os.PathLike[str], wait: float | None = None) -> None:
        self.tree = Path(tree)
        self.path = lock_path(tree)
        self.wait = _wait_seconds() if wait is None else wait
        self._fd = -1

    def acquire(self) -> TreeLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        give_up = time.monotonic() + self.wait
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= give_up:
                    raise self._busy() from None
                time.sleep(_POLL)
                continue
            if not _same_inode(fd, self.path):  # a file its last holder removed meanwhile
                os.close(fd)
                continue
            self._fd = fd
            try:
                self._note_holder()
            except BaseException:  # a SIGTERM (SystemExit) before any caller could release it
                self.release()
                raise
            return self

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                self.path.unlink()  # while still held: a waiter sees a removed inode, retries
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TreeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _note_holder(self) -> None:
        note = json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv[:2]),
                           "since": time.strftime("%H:%M:%S")})
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, note.encode(), 0)

    def _busy(self) -> TreeBusy:
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(self.path.read_text())
            holder = (f" (pid {info['pid']}: `{Path(info['command']).name}`, since "
                      f"{info['since']})")
        return TreeBusy(f"{self.tree}: another decisionrag process is writing it{holder}; "
                        f"waited {self.wait:g} s — try again when it has finished (or set "
                        f"{LOCK_WAIT_ENV} to wait longer)")


def _same_inode(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == path.stat().st_ino
    except OSError:
        return False


def _wait_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(LOCK_WAIT_ENV, LOCK_WAIT)))
    except ValueError:
        return LOCK_WAIT


# ---------------------------------------------------------------- publishing


@contextlib.contextmanager
def publishing(tree: str | os.PathLike[str], *, wait: float | None = None) -> Iterator[Publication]:
    """Change the tree at `tree` and what is stored beside it as one publication (see the
    module docstring). Nested use for the same tree joins the outer publication."""
    outer = _staging.active(tree)
    if outer is not None:
        yield outer
        return
    publication = Publication(Path(tree))
    with TreeLock(tree, wait):
        settle(tree)
        publication.remember_side_files()
        token = _staging.activate(publication)
        try:
            yield publication
        except BaseException:
            _staging.deactivate(token)
            discard(publication)
            raise
        _staging.deactivate(token)
        try:
            publish(publication)
        except BaseException:
            discard(publication)
            raise


def publish(publication: Publication) -> None:
    """Rename the new tree (if any) into place, then promote what is pending beside it."""
    path, staged = publication.path, publication.staged
    if staged is not None:
        if publication.expected is not None and identity(path) != publication.expected:
            raise TreeChanged(f"{path}: the tree file was replaced while this change ran (by "
                              "a writer that took no lock?); nothing was written — run it again")
        os.replace(staged, path)
        publication.staged = None
    settle(path)


def discard(publication: Publication) -> None:
    """Remove the new tree and everything written beside it in this publication (pending
    headers, the matrices and indexes they name, pieces a Ctrl-C cut short)."""
    if publication.staged is not None:
        publication.staged.unlink(missing_ok=True)
        publication.staged = None
    for header in publication.writes:
        _discard_pending(header)
    for leftover in publication.new_side_files():
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    for folder in publication.new_side_folders():
        with contextlib.suppress(OSError):
            folder.rmdir()  # made for this publication, and empty again


def settle(tree: str | os.PathLike[str]) -> None:
    """Finish what a publication left pending beside `tree`: headers written for the tree
    that is there now are promoted, others (of a tree never published) removed."""
    current = _current_stamp(tree)
    for header in _pending_headers(tree):
        stamp, _ = _files_of(header)
        if current is not None and stamp == current:
            _promote(header)
        else:
            _discard_pending(header)


def _current_stamp(tree: str | os.PathLike[str]) -> dict[str, Any] | None:
    from ._reader import Tree

    path = Path(tree)
    if not path.is_file():
        return None
    try:
        with Tree.open(path) as opened:
            return tree_stamp(opened.meta)
    except InputError:
        return None


def _pending_headers(tree: str | os.PathLike[str]) -> list[Path]:
    found: list[Path] = []
    for folder in (vectors_folder(tree), bm25_folder(tree)):
        with contextlib.suppress(OSError):
            found += sorted(p for p in folder.iterdir() if p.name.endswith(PENDING))
    return found


def _files_of(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """The tree stamp a side-data header (current or pending) was written for, and the
    files of its folder it names."""
    name = header.name.removesuffix(PENDING)
    reader: Callable[[Path], tuple[dict[str, Any] | None, set[str]]]
    if header.parent.name.endswith(".bm25"):
        reader = bm25_files if name == HEADER else _nothing
    elif name == LEXICON_FILE:
        reader = lexicon_files
    elif name.endswith(".ann.json"):
        reader = ann_files
    elif name.endswith(".json"):
        reader = vectors_files
    else:
        reader = _nothing
    return reader(header)


def _nothing(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    return None, set()


def _promote(pending: Path) -> None:
    current = pending.with_name(pending.name.removesuffix(PENDING))
    _, old = _files_of(current) if current.exists() else (None, set())
    _, new = _files_of(pending)
    os.replace(pending, current)
    for name in old - new:
        (current.parent / name).unlink(missing_ok=True)


def _discard_pending(pending: Path) -> None:
    if not pending.exists():
        return
    current = pending.with_name(pending.name.removesuffix(PENDING))
    _, kept = _files_of(current) if current.exists() else (None, set())
    _, written = _files_of(pending)
    pending.unlink(missing_ok=True)
    for name in written - kept:
        (pending.parent / name).unlink(missing_ok=True)
