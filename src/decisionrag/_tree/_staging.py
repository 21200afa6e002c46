"""What a publication in progress changes about reading and writing a tree (`_publish`).

While a tree is being published (`decisionrag._tree._publish.publishing`), within that
process:

* `readable(TREE)` is the new tree file, not yet renamed into place, so that what is built
  from the tree (vectors, indexes) is built from the version about to be published;
* the headers of what is stored beside it (``TREE.vectors/*.json``, ``TREE.bm25/index.json``)
  are written as *pending* (`header_target`: ``NAME.json.next``), beside the current ones,
  and the files the current headers name are kept: readers of the tree as it still is go on
  finding what matches it.

Readers take a header, or its pending twin when that one matches the tree they read
(`candidates`): during the instant between the tree's rename and the pending headers'
promotion — or after a crash in it — the new tree finds its own vectors, never old ones.
"""

from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass, field
from pathlib import Path

PENDING = ".next"
SIDE_FOLDERS = (".vectors", ".bm25")  # TREE.vectors/, TREE.bm25/


@dataclass
class Publication:
    """One tree being published: the new file once written (`staged`), and the identity of
    the file it was derived from (`expected`: checked before the rename)."""

    path: Path
    staged: Path | None = None
    expected: tuple[int, ...] | None = None
    writes: list[Path] = field(default_factory=list)  # pending headers written
    before: dict[Path, set[str] | None] = field(default_factory=dict)  # side files at start

    def stage(self, tree_file: Path, expected: tuple[int, ...] | None = None) -> None:
        """`tree_file` is the new tree (a previous one staged in this publication goes);
        `expected`: the identity the file at `path` must still have when it is replaced."""
        if self.staged is not None and self.staged != tree_file:
            self.staged.unlink(missing_ok=True)
        self.staged = tree_file
        if expected is not None and self.expected is None:
            self.expected = expected

    def side_folders(self) -> list[Path]:
        return [self.path.with_name(self.path.name + suffix) for suffix in SIDE_FOLDERS]

    def remember_side_files(self) -> None:
        for folder in self.side_folders():
            try:
                self.before[folder] = {entry.name for entry in os.scandir(folder)}
            except OSError:
                self.before[folder] = None  # not there yet

    def new_side_files(self) -> list[Path]:
        """Files that appeared in the side folders since `remember_side_files`."""
        found = []
        for folder, names in self.before.items():
            try:
                found += [Path(e.path) for e in os.scandir(folder) if e.name not in (names or ())]
            except OSError:
                continue
        return found

    def new_side_folders(self) -> list[Path]:
        return [folder for folder, names in self.before.items() if names is None]


_ACTIVE: contextvars.ContextVar[dict[str, Publication] | None] = contextvars.ContextVar(
    "decisionrag_publications", default=None)


def key(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.fspath(path))


def active(path: str | os.PathLike[str]) -> Publication | None:
    """The publication of the tree at `path` running in this context, if any."""
    return (_ACTIVE.get() or {}).get(key(path))


def activate(publication: Publication) -> contextvars.Token[dict[str, Publication] | None]:
    return _ACTIVE.set({**(_ACTIVE.get() or {}), key(publication.path): publication})


def deactivate(token: contextvars.Token[dict[str, Publication] | None]) -> None:
    _ACTIVE.reset(token)


def readable(path: str | os.PathLike[str]) -> Path:
    """The file to read for the tree at `path`: the new one while it is being published."""
    found = active(path)
    return found.staged if found is not None and found.staged is not None else Path(path)


def tree_of_folder(folder: Path) -> Path | None:
    """The tree a side folder (``TREE.vectors``, ``TREE.bm25``) belongs to."""
    for suffix in SIDE_FOLDERS:
        if folder.name.endswith(suffix):
            return folder.with_name(folder.name[: -len(suffix)])
    return None


def pending(header: Path) -> Path:
    return header.with_name(header.name + PENDING)


def header_target(header: Path) -> Path:
    """Where a header of side data is written: pending while its tree is being published."""
    tree = tree_of_folder(header.parent)
    publication = active(tree) if tree is not None else None
    if publication is None:
        return header
    target = pending(header)
    publication.writes.append(target)
    return target


def is_pending(header: Path) -> bool:
    return header.name.endswith(PENDING)


def candidates(header: Path) -> list[Path]:
    """The header and its pending twin, in the order a reader tries them."""
    return [header, pending(header)]
