"""Editing trees in place: remove documents, and sync a tree with its source folders."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._tree import DocumentSpec, Tree
from .._tree._edits import VOLATILE_KEYS, fingerprint
from ._build import OnSkip, editing, read_documents


@dataclass
class SyncReport:
    """What `sync_sources` changed (document keys), and how many documents were unchanged."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    touched: list[str] = field(default_factory=list)  # same content, new mtime: metadata reset
    dry_run: bool = False
    edit: Any = None  # the AddReport of the write (groups assigned, groups removed)

    def summary(self) -> str:
        verb = "would sync" if self.dry_run else "synced"
        line = (f"{verb}: {len(self.added):,} added, {len(self.changed):,} changed, "
                f"{len(self.removed):,} removed, {self.unchanged:,} unchanged")
        if self.edit is not None and self.edit.removed_groups:
            line += f" ({self.edit.removed_groups} groups left empty removed)"
        return line


def remove_documents(tree: str | os.PathLike[str], keys: Sequence[str]) -> Any:
    """Remove the documents `keys` (with their sections and passages) from the tree, in one
    atomic step; groups left empty go too. An InputError names keys the tree lacks."""
    from .._cluster._update import edit_documents

    with editing(tree):
        return edit_documents(tree, remove=list(dict.fromkeys(keys)))


def sync_sources(
    tree: str | os.PathLike[str], sources: Sequence[str | Path], *, format: str = "auto",
    cache: str | os.PathLike[str] | None = None, dry_run: bool = False,
    on_skip: OnSkip | None = None, progress: bool = False,
) -> SyncReport:
    """Bring the tree in step with `sources` (read as `build` reads them, same keys):
    documents not in the tree are added (to their nearest group in a clustered tree), those
    whose content hash differs (`decisionrag._tree._edits.fingerprint`) replace the stored
    ones in place, and the tree's documents absent from the sources are removed — all in one
    atomic write. A document whose only change is its file's mtime gets the new metadata."""
    if dry_run:
        return _sync(tree, sources, format, cache, True, on_skip, progress)
    with editing(tree):  # read and written under the tree's lock: no change is lost
        return _sync(tree, sources, format, cache, False, on_skip, progress)


def _sync(tree: str | os.PathLike[str], sources: Sequence[str | Path], format: str,
          cache: str | os.PathLike[str] | None, dry_run: bool, on_skip: OnSkip | None,
          progress: bool) -> SyncReport:
    report = SyncReport(dry_run=dry_run)
    writes: list[DocumentSpec] = []
    metadata: dict[str, dict[str, Any]] = {}
    with Tree.open(tree) as opened:
        stored_keys = {node.key for node in opened.documents()}
        seen: set[str] = set()
        for spec in read_documents(sources, format, on_skip=on_skip):
            key = spec.key or ""
            seen.add(key)
            stored = opened.stored_document(key) if key in stored_keys else None
            if stored is None:
                report.added.append(key)
                writes.append(spec)
            elif fingerprint(stored) != fingerprint(spec):
                report.changed.append(key)
                writes.append(spec)
            else:
                report.unchanged += 1
                if _volatile(stored.meta) != _volatile(spec.meta):
                    report.touched.append(key)
                    metadata[key] = dict(spec.meta or {})
        report.removed = sorted(stored_keys - seen)
    if dry_run or not (writes or report.removed or metadata):
        return report
    from .._cluster._update import edit_documents

    report.edit = edit_documents(tree, add=writes, remove=report.removed, metadata=metadata,
                                 cache=cache, progress=progress)
    return report


def _volatile(meta: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if k in VOLATILE_KEYS}
