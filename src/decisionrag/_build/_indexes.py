"""The search indexes stored with a tree, built once by `build` (and rebuilt after edits) so a
query never indexes: the BM25 index (``TREE.bm25/``, `decisionrag._tree._bm25`) and the ANN
index over each stored vector set (``TREE.vectors/<set>.ann.json``, `decisionrag._tree._ann`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import MissingDependency
from .._tree import Tree
from .._tree._ann import ANN_FROM, AnnReport, has_ann, remove_ann, write_ann
from .._tree._bm25 import bm25_folder, write_bm25
from .._tree._vectors import NodeVectors, available_sets


@dataclass(slots=True)
class BM25Report:
    path: Path
    passages: int
    terms: int
    bytes: int
    seconds: float

    def summary(self) -> str:
        return (f"BM25 index {self.path.name}: {self.passages:,} passages, {self.terms:,} terms, "
                f"{self.bytes / 1e6:.1f} MB in {self.seconds:.1f} s")


def build_bm25(tree_path: str | os.PathLike[str]) -> BM25Report:
    """Build (or rebuild) the tree's BM25 index in one streaming pass (needs the eval extra)."""
    import json

    started = time.perf_counter()
    with Tree.open(tree_path) as tree:
        header = json.loads(write_bm25(tree).read_text("utf-8"))
    folder = bm25_folder(tree_path)
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    return BM25Report(path=folder, passages=int(header["docs"]), terms=int(header["terms"]),
                      bytes=size, seconds=time.perf_counter() - started)


def store_bm25(report: Any, *, required: bool = False) -> None:
    """Build the BM25 index of the tree at `report.path` (a BuildReport) into `report.bm25`;
    without bm25s (the eval extra) raise when `required`, else leave `report.bm25_note`."""
    try:
        report.bm25 = build_bm25(report.path)
    except MissingDependency as exc:
        if required:
            raise
        _drop_stale_bm25(report.path)
        report.bm25_note = f"no BM25 index stored ({exc}); BM25 and hybrid search need it"


def _drop_stale_bm25(tree_path: str | os.PathLike[str]) -> None:
    """An index that can no longer be rebuilt is removed rather than left stale."""
    import shutil

    shutil.rmtree(bm25_folder(tree_path), ignore_errors=True)


def keep_ann(tree_path: str | os.PathLike[str], stored: NodeVectors, passage_ids: np.ndarray,
             tree_meta: dict[str, Any], *, kept: np.ndarray | None = None,
             previous_vectors: str | None = None,
             wanted: bool | None = None) -> tuple[AnnReport | None, str | None]:
    """Keep the ANN index of `stored` in step (see `write_ann`): built when `wanted`, or
    (None) when the tree has `ANN_FROM` passages or more or already has one; removed when
    `wanted` is False. Without faiss: raise when `wanted`, else a note (and a stale index
    removed). Returns (report, note)."""
    exists = has_ann(tree_path, stored.model, stored.precision)
    if wanted is False or (wanted is None and not exists and len(passage_ids) < ANN_FROM):
        if exists:
            remove_ann(tree_path, stored.model, stored.precision)
        return None, None
    try:
        return write_ann(tree_path, stored, passage_ids, tree_meta, kept=kept,
                         previous_vectors=previous_vectors), None
    except MissingDependency as exc:
        if wanted:
            raise
        remove_ann(tree_path, stored.model, stored.precision)
        return None, (f"no ANN index ({exc}); dense search over {len(passage_ids):,} passages "
                      "scans every stored vector")


def build_indexes(tree_path: str | os.PathLike[str], *, ann: bool | None = None,
                  bm25: bool = True) -> list[Any]:
    """Rebuild the search indexes stored with a tree from what it stores (no passage is
    embedded): the BM25 index and, for every current vector set, its ANN index (`ann` as
    for `keep_ann`; a fresh index is trained). Returns their reports."""
    reports: list[Any] = []
    if bm25:
        reports.append(build_bm25(tree_path))
    with Tree.open(tree_path) as tree:
        ids = np.fromiter((node.id for node in tree.iter_passages()), dtype=np.int64)
        for header in available_sets(tree_path):
            stored = NodeVectors.open(tree_path, tree.meta, model=header.model,
                                      precision=header.precision)
            existed = remove_ann(tree_path, stored.model, stored.precision)  # trained afresh
            if ann is False or (ann is None and not existed and len(ids) < ANN_FROM):
                continue
            try:
                reports.append(write_ann(tree_path, stored, ids, tree.meta))
            except MissingDependency as exc:
                if ann:
                    raise
                reports.append(_Note(f"no ANN index ({exc})"))
    return reports


@dataclass(slots=True)
class _Note:
    text: str

    def summary(self) -> str:
        return f"note: {self.text}"
