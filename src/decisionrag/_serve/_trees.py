"""The trees a server holds, each swapped atomically when its file is replaced.

A request leases the tree it reads (`TreeRegistry.lease`). When the file at a tree's path
is replaced (a rebuild written atomically: new inode, size or mtime), the next lease opens
the new file and swaps it in; leases already out keep reading the old one, which is closed
when the last of them ends. A replacement that cannot be opened is logged and the old tree
stays in service.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._app import open_navigator
from .._errors import DecisionRAGError
from .._judges import Judge
from .._navigate import Navigator
from .._tree import Tree
from ._errors import ServeError
from ._metrics import Metrics

log = logging.getLogger("decisionrag.serve")

Signature = tuple[int, int, int, int]


def file_signature(path: Path) -> Signature:
    stat = path.stat()
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


@dataclass(eq=False)
class ServedTree:
    """One opened version of a tree file, with a Navigator per preset used on it."""

    name: str
    path: Path
    tree: Tree
    signature: Signature
    judge: Judge
    default_preset: str
    opened_at: float = field(default_factory=time.time)
    generation: int = 1
    users: int = 0
    retired: bool = False
    _navigators: dict[str, Navigator] = field(default_factory=dict)

    def navigator(self, preset: str | None = None) -> Navigator:
        name = preset or self.default_preset
        found = self._navigators.get(name)
        if found is None:
            found = self._navigators[name] = open_navigator(self.tree, self.judge, name)
        return found

    def release(self) -> None:
        self.users -= 1
        self._close_if_idle()

    def retire(self) -> None:
        self.retired = True
        self._close_if_idle()

    def _close_if_idle(self) -> None:
        if self.retired and self.users <= 0:
            self.tree.close()

    def stats(self) -> dict[str, Any]:
        sizes = self.tree.document_sizes()
        return {
            "name": self.name,
            "file": str(self.path),
            "file_bytes": self.tree.file.stat().st_size if self.tree.file.exists() else 0,
            "schema_version": self.tree.meta.get("schema_version"),
            "written_at": self.tree.meta.get("written_at"),
            "counts": self.tree.counts,
            "by_depth": {str(d): kinds for d, kinds in self.tree.kind_depth_counts().items()},
            "passages_per_document": {
                "min": min(sizes, default=0),
                "median": float(statistics.median(sizes)) if sizes else 0.0,
                "max": max(sizes, default=0),
            },
            "opened_at": self.opened_at,
            "generation": self.generation,
        }


class TreeRegistry:
    def __init__(
        self,
        trees: tuple[tuple[str, str], ...],
        judge: Judge,
        default_preset: str,
        metrics: Metrics,
        *,
        reload_seconds: float = 1.0,
        warm: bool = False,
    ) -> None:
        self.judge = judge
        self.default_preset = default_preset
        self.metrics = metrics
        self.reload_seconds = reload_seconds
        self._current: dict[str, ServedTree] = {}
        self._checked: dict[str, float] = {}
        try:
            for name, path in trees:
                served = self._open(name, Path(path), generation=1)
                if warm:
                    served.navigator().warm()
                self._current[name] = served
        except BaseException:
            self.close()
            raise

    @property
    def names(self) -> list[str]:
        return list(self._current)

    @property
    def default(self) -> str:
        return next(iter(self._current))

    def _open(self, name: str, path: Path, generation: int) -> ServedTree:
        signature = file_signature(path) if path.exists() else (0, 0, 0, 0)
        tree = Tree.open(path)
        served = ServedTree(name, path, tree, signature, self.judge, self.default_preset,
                            generation=generation)
        served.navigator()  # checks the default preset against this tree now
        return served

    def current(self, name: str) -> ServedTree:
        """The tree served as `name` now (reopened first if its file was replaced)."""
        served = self._current.get(name)
        if served is None:
            known = ", ".join(self._current)
            raise ServeError(404, "not_found", f"no tree named {name!r} (this server has: {known})",
                             field="tree")
        now = time.monotonic()
        if now - self._checked.get(name, 0.0) >= self.reload_seconds:
            self._checked[name] = now
            served = self._maybe_reload(served)
        return served

    def _maybe_reload(self, served: ServedTree) -> ServedTree:
        try:
            signature = file_signature(served.path)
        except OSError:
            return served  # removed: keep serving what is open until a new file appears
        if signature == served.signature:
            return served
        try:
            fresh = self._open(served.name, served.path, served.generation + 1)
        except (DecisionRAGError, OSError) as exc:
            log.error("tree %s: the replaced file cannot be opened (%s); still serving generation %d",
                      served.name, exc, served.generation)
            served.signature = signature  # don't retry the same broken file every request
            return served
        self._current[served.name] = fresh
        served.retire()
        self.metrics.reloads.labels(served.name).inc()
        log.info("tree %s: file replaced, generation %d now serving (%s passages)", served.name,
                 fresh.generation, fresh.tree.counts.get("passage", 0))
        return fresh

    @contextmanager
    def lease(self, name: str) -> Iterator[ServedTree]:
        served = self.current(name)
        served.users += 1
        try:
            yield served
        finally:
            served.release()

    def close(self) -> None:
        for served in self._current.values():
            served.retire()
        self._current.clear()

