"""Embedding a tree's nodes once, at build time: `embed_tree` writes ``TREE.vectors/``.

Passages are embedded (their title, heading path and text, as flat dense search indexes
them); a page gets the normalised mean of its passages' vectors (its centroid), a group the
normalised mean of its children's; sections and the root have none (zero rows).
Re-embedding after `decisionrag add` encodes only the passages whose text is new: the
previous set's rows are reused where a passage's id and text checksum are unchanged, and the
set's ANN index is updated in place (`_indexes.keep_ann`).
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import Step, quiet, step
from .._tree import NodeKind, Tree
from .._tree._vectors import (
    CHECKS_SUFFIX,
    NodeVectors,
    VectorsError,
    available_sets,
    passage_text,
    set_name,
    vectors_folder,
    write_lexicon,
    write_vectors,
)
from .._words import Lexicon, TermRows

EncodeFn = Callable[[Sequence[str]], np.ndarray]


@dataclass(slots=True)
class VectorsReport:
    path: Path
    model: str
    precision: str
    rows: int
    passages: int
    encoded: int
    bytes: int
    seconds: float
    ann: Any = None  # the AnnReport when the ANN index was built or updated
    ann_note: str | None = None  # why there is no ANN index, when one was wanted

    def summary(self) -> str:
        line = (f"vectors {self.path.name}: {self.passages:,} passages ({self.encoded:,} "
                f"encoded), {self.model} {self.precision}, {self.bytes / 1e6:.1f} MB in "
                f"{self.seconds:.1f} s")
        if self.ann is not None:
            line += f"\n{self.ann.summary()}"
        if self.ann_note:
            line += f"\nnote: {self.ann_note}"
        return line


def embed_tree(
    tree_path: str | os.PathLike[str], *, model: str | None = None, precision: str | None = None,
    encode: EncodeFn | None = None, progress: bool = False, ann: bool | None = None,
) -> VectorsReport:
    """Compute and store the node vectors of the tree at `tree_path` (see the module doc).
    `encode` replaces the sentence-transformers encoder (tests); `model` then names it.

    The set's ANN index (`decisionrag._build._indexes.keep_ann`) is kept in step: updated
    in place (changed and new passages added, others removed) when one exists, built when
    `ann` is True or (None) the tree has `ANN_FROM` passages or more, removed when False."""
    started = time.perf_counter()
    with step("vectors", unit="passages", enabled=progress) as shown:
        shown.note("loading the encoder")
        name, resolved, encoder = _encoder(model, precision, encode)
        shown.note("")
        return _embed_tree(tree_path, name, resolved, encoder, shown, started, ann)


def _embed_tree(tree_path: str | os.PathLike[str], name: str, resolved: str, encoder: _Run,
                shown: Step, started: float, ann: bool | None) -> VectorsReport:
    from ._indexes import keep_ann

    with Tree.open(tree_path) as tree:
        ids, texts, docs, groups, n_rows = _layout(tree)
        checks = np.array([zlib.crc32(t.encode()) for t in texts], dtype=np.uint32)
        previous = _old_matrix_name(tree_path, name, resolved)
        matrix, reused = _reused_rows(tree_path, name, resolved, n_rows, ids, checks)
        todo = np.flatnonzero(~reused)
        shown.total = int(todo.size)
        dim = matrix.shape[1] if matrix is not None else None
        if todo.size or matrix is None:
            fresh = encoder([texts[i] for i in todo], shown) if todo.size else None
            dim = dim or (fresh.shape[1] if fresh is not None else _probe_dim(encoder))
            if matrix is None:
                matrix = np.zeros((n_rows, dim), dtype=np.float32)
            if fresh is not None:
                matrix[ids[todo]] = fresh
        _fill_means(matrix, docs, groups)
        header = write_vectors(tree_path, matrix, model=name, precision=resolved,
                               tree_meta=tree.meta)
        full_checks = np.zeros(n_rows, dtype=np.uint32)
        full_checks[ids] = checks
        _save_checks(header, full_checks)
        lexicon = Lexicon.count(texts)
        rows = TermRows.count(list(lexicon.frequencies), n_rows, ids.tolist(),
                              (node.text for node in tree.iter_passages()))
        write_lexicon(tree_path, lexicon.to_json(), tree.meta, rows.arrays())
        del texts, matrix
        stored = NodeVectors.open(tree_path, tree.meta, model=name, precision=resolved)
        ann_report, note = keep_ann(tree_path, stored, ids, tree.meta, kept=ids[reused],
                                    previous_vectors=previous, wanted=ann)
    return VectorsReport(path=vectors_folder(tree_path), model=name, precision=resolved,
                         rows=n_rows, passages=len(ids), encoded=int(todo.size),
                         bytes=stored.path.stat().st_size, seconds=time.perf_counter() - started,
                         ann=ann_report, ann_note=note)


def _old_matrix_name(tree_path: str | os.PathLike[str], model: str, precision: str) -> str | None:
    found = [s for s in available_sets(tree_path) if s.model == model and s.precision == precision]
    return found[0].matrix if found else None


def store_vectors(report: Any, *, required: bool, model: str | None = None,
                  precision: str | None = None, progress: bool = False,
                  encoder: Callable[[], EncodeFn] | None = None) -> None:
    """Embed the tree at `report.path` (a BuildReport; the vectors' report lands in
    `report.vectors`); without the embedded extra, raise when `required`, else leave a note
    in `report.vectors_note`. `encoder`, when given, makes the encode function (a build
    engine's, e.g. Ray actors running the model; it may raise MissingDependency like the
    local encoder does), and the vectors are filed under `model` and `precision`."""
    from .._errors import MissingDependency

    try:
        encode = encoder() if encoder is not None else None
        report.vectors = embed_tree(report.path, model=model, precision=precision,
                                    encode=encode, progress=progress)
    except MissingDependency as exc:
        if required:
            raise
        report.vectors_note = (f"no vectors stored ({exc}); navigation with the embedded judge "
                               "and dense search need them")


_Run = Callable[[Sequence[str], Step], np.ndarray]  # texts, the step to advance -> vectors


def _encoder(model: str | None, precision: str | None,
             encode: EncodeFn | None) -> tuple[str, str, _Run]:
    if encode is not None:
        given = encode

        def run_given(texts: Sequence[str], shown: Step) -> np.ndarray:
            vectors = given(texts)
            shown.advance(len(texts))
            return vectors

        return model or "custom", precision or "float32", run_given
    from .._embed import load_vector_encoder

    encoder = load_vector_encoder(model, precision=precision)

    def run(texts: Sequence[str], shown: Step) -> np.ndarray:
        return np.asarray(encoder.encode(list(texts), progress=shown))

    return encoder.name, encoder.precision, run


def _probe_dim(encode: _Run) -> int:
    return int(np.asarray(encode([""], quiet())).shape[1])


def _layout(tree: Tree) -> tuple[np.ndarray, list[str], list[tuple[int, int]],
                                 list[tuple[int, list[int]]], int]:
    """Passage ids and texts (id order), documents as (id, end), groups with their children
    (deepest first), and the number of rows (largest node id + 1)."""
    titles: dict[int, str] = {}
    docs: list[tuple[int, int]] = []
    largest = tree.root.id
    for doc in tree.documents():
        titles[doc.id] = doc.title
        docs.append((doc.id, doc.end))
        largest = max(largest, doc.end)
    ids: list[int] = []
    texts: list[str] = []
    for node in tree.iter_passages():
        ids.append(node.id)
        texts.append(passage_text(titles.get(node.doc if node.doc is not None else -1, ""),
                                  node.heading, node.text))
    groups: list[tuple[int, list[int]]] = []
    level = [tree.root.id]
    while level:
        below: list[int] = []
        for parent in level:
            for child in tree.children(parent):
                if child.kind == NodeKind.GROUP:
                    groups.append((child.id, [c.id for c in tree.children(child.id)]))
                    below.append(child.id)
                    largest = max(largest, child.id)
        level = below
    groups.reverse()  # deepest first: a group's mean reads its child groups' finished rows
    return np.asarray(ids, dtype=np.int64), texts, docs, groups, largest + 1


def _reused_rows(tree_path: str | os.PathLike[str], name: str, precision: str, n_rows: int,
                 ids: np.ndarray, checks: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """A float32 matrix holding the previous set's rows, and which passages it covers."""
    reused = np.zeros(len(ids), dtype=bool)
    previous = [s for s in available_sets(tree_path) if s.model == name and s.precision == precision]
    if not previous:
        return None, reused
    header = previous[0]
    folder = vectors_folder(tree_path)
    try:
        old = np.load(folder / header.matrix, mmap_mode="r")
        old_checks = np.load(folder / (header.matrix + CHECKS_SUFFIX))
    except (OSError, ValueError):
        return None, reused
    if old.shape[0] != old_checks.shape[0]:
        return None, reused
    matrix = np.zeros((n_rows, old.shape[1]), dtype=np.float32)
    inside = ids < old.shape[0]
    same = np.zeros(len(ids), dtype=bool)
    same[inside] = old_checks[ids[inside]] == checks[inside]
    matrix[ids[same]] = old[ids[same]]
    reused[same] = True
    return matrix, reused


def _save_checks(header_path: Path, checks: np.ndarray) -> None:
    from .._tree._vectors import VectorsHeader, _atomic_write

    header = VectorsHeader.read(header_path)
    target = header_path.parent / (header.matrix + CHECKS_SUFFIX)
    _atomic_write(target, lambda out: np.save(out, checks))
    for stale in header_path.parent.glob(f"{set_name(header.model, header.precision)}-*"
                                         + CHECKS_SUFFIX):
        if stale != target and not (header_path.parent / stale.name[: -len(CHECKS_SUFFIX)]).exists():
            stale.unlink(missing_ok=True)


def _fill_means(matrix: np.ndarray, docs: list[tuple[int, int]],
                groups: list[tuple[int, list[int]]]) -> None:
    """Pages get the normalised mean of the passages in their id range (section rows are
    zero), groups that of their children's rows."""
    for doc_id, end in docs:
        block = matrix[doc_id + 1:end + 1]
        matrix[doc_id] = _unit(block.sum(axis=0))
    for group_id, children in groups:
        if children:
            matrix[group_id] = _unit(matrix[np.asarray(children, dtype=np.int64)].sum(axis=0))


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


__all__ = ["VectorsError", "VectorsReport", "embed_tree", "store_vectors"]
