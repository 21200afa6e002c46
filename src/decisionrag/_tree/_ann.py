"""The approximate-nearest-neighbour index over a tree's stored passage vectors (faiss IVF-PQ,
the ``ann`` extra), stored beside the vectors it was built from.

Layout, in the vectors folder of `_vectors`::

    corpus.tree.vectors/
        <set>.ann.json          header: format version, library and version, the index's
                                factory string, probes, rows, the vectors matrix and tree
                                version it was built from, the index file's name
        <set>-<token>.faiss     the faiss index: an inverted file of product-quantised
                                passage vectors, labelled by node id

Why IVF-PQ (docs/benchmarks.md, "Issue 30"): 48 bytes a passage (129 MB at 2.68 M passages,
against 1–4 GB for an HNSW graph with its vectors), only the lists a query probes read from
the file, trained in minutes on two cores, passages added and removed in place. Its
approximate scores only choose candidates: `AnnIndex.search` takes `REFINE` × k of them and
ranks those by their exact scores, read from the stored float16 vectors.

Writing is atomic like the vectors': the index file under a fresh name, then the header
renamed into place, then the previous index file removed. The header binds the index to one
write of the vectors (their matrix file) and of the tree (`tree_stamp`); `AnnIndex.open`
refuses one built for anything else (AnnError). It reads the index's small parts (coarse
centroids, product quantiser) into memory and only locates the inverted lists; a search reads
the lists it probes with positioned reads (`_ProbedLists`), so the file's pages stay page
cache and are not counted in the querying process's resident memory, as the pages of a
memory-mapped index it touched would be (issue 30: 181 MB of them at 2.68 M passages).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import missing_extra
from .._files import atomic_path, atomic_write
from ._staging import candidates, header_target
from ._vectors import NodeVectors, VectorsError, set_name, tree_stamp, vectors_folder

ANN_VERSION = 1
ANN_FROM = 100_000  # passages: from here `build` makes an index and dense search uses it
REFINE = 4  # candidates re-ranked by their exact score, per result asked for
ADD_ROWS = 65_536  # vectors converted to float32 and added at once
FLAT_BELOW = 1_000  # passages: below this an "index" is an exact flat list (nothing to train)


class AnnError(VectorsError):
    """The ANN index is damaged, of another format, or built for other vectors or another
    version of the tree."""


def faiss_module() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise missing_extra("faiss-cpu", "ann") from exc
    return faiss


def ann_header_path(tree_path: str | os.PathLike[str], model: str, precision: str) -> Path:
    return vectors_folder(tree_path) / f"{set_name(model, precision)}.ann.json"


@dataclass(frozen=True, slots=True)
class AnnHeader:
    library: str
    library_version: str
    factory: str
    nprobe: int
    rows: int
    trained: int
    dim: int
    vectors: str  # the vectors matrix file it indexes
    tree: dict[str, Any]
    index: str  # the index file's name
    version: int = ANN_VERSION

    @classmethod
    def read(cls, path: Path) -> AnnHeader:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            header = cls(**{name: data[name] for name in cls.__dataclass_fields__})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AnnError(f"{path}: not a readable ANN index header ({exc})") from exc
        if header.version != ANN_VERSION:
            raise AnnError(f"{path}: ANN index format {header.version}, this decisionrag reads "
                           f"{ANN_VERSION}; rebuild it with `decisionrag index`")
        return header


def factory_for(n: int, dim: int) -> tuple[str, int]:
    """The faiss index for `n` passages and how many inverted lists a query probes: about
    4·√n lists (at least 39 training points each, at most 4,096), 8 bits per dimension pair
    group (`dim`/8 sub-quantisers of 256 centroids; 16 centroids below 10,000 passages)."""
    if n < FLAT_BELOW:
        return "IDMap,Flat", 1
    nlist = max(1, min(4096, int(4 * math.sqrt(n)), n // 39))
    nbits = 8 if n >= 10_000 else 4
    return f"IVF{nlist},PQ{dim // 8}x{nbits}", max(1, min(nlist, max(16, nlist // 16)))


@dataclass(slots=True)
class AnnReport:
    rows: int
    added: int
    removed: int
    rebuilt: bool
    factory: str
    seconds: float

    def summary(self) -> str:
        how = "built" if self.rebuilt else f"updated ({self.added:,} added, {self.removed:,} removed)"
        return f"ANN index {how}: {self.rows:,} passages, faiss {self.factory}, {self.seconds:.1f} s"


def write_ann(
    tree_path: str | os.PathLike[str], stored: NodeVectors, passage_ids: np.ndarray,
    tree_meta: dict[str, Any], *, kept: np.ndarray | None = None,
    previous_vectors: str | None = None, factory: str | None = None,
    nprobe: int | None = None,
) -> AnnReport:
    """Index the rows `passage_ids` of `stored` (just written) and store the index beside
    them. With `kept` (the passage ids whose rows did not change) and an index built from
    `previous_vectors` (the matrix they replaced), that index is updated in place — ids no
    longer kept are removed, the others added — unless it would grow past twice what it was
    trained on; otherwise (and with a `factory`) a new one is trained and built."""
    import time

    faiss = faiss_module()
    started = time.perf_counter()
    path = ann_header_path(tree_path, stored.model, stored.precision)
    old = _current(path)
    ids = np.asarray(passage_ids, dtype=np.int64)
    index = None
    fresh = np.zeros(0, np.int64)
    if (factory is None and old is not None and kept is not None and previous_vectors
            and old.vectors == previous_vectors and len(ids) <= 2 * old.trained):
        fresh = np.setdiff1d(ids, kept, assume_unique=True)
        index = _read_writable(faiss, path.parent / old.index)
    if index is not None and old is not None and kept is not None:
        removed = int(index.remove_ids(faiss.IDSelectorNot(faiss.IDSelectorBatch(kept))))
        _add(index, stored, fresh)
        report = AnnReport(int(index.ntotal), len(fresh), removed, False, old.factory, 0.0)
        trained, chosen, probes = old.trained, old.factory, old.nprobe
    else:
        auto_factory, probes = factory_for(len(ids), stored.dim)
        chosen = factory or auto_factory
        index = _train(faiss, chosen, stored, ids)
        _add(index, stored, ids)
        trained = len(ids)
        report = AnnReport(int(index.ntotal), len(ids), 0, True, chosen, 0.0)
    probes = nprobe or probes
    name = f"{set_name(stored.model, stored.precision)}-{secrets.token_hex(4)}.faiss"
    with atomic_path(path.parent / name, mode=0o644) as tmp:
        faiss.write_index(index, str(tmp))
    header = AnnHeader(library="faiss", library_version=str(faiss.__version__), factory=chosen,
                       nprobe=int(probes), rows=int(index.ntotal), trained=int(trained),
                       dim=stored.dim, vectors=stored.path.name, tree=tree_stamp(tree_meta),
                       index=name)
    target = header_target(path)
    atomic_write(target, json.dumps(asdict(header)), mode=0o644)
    if target == path and old is not None and old.index != name:
        (path.parent / old.index).unlink(missing_ok=True)  # pending: kept until published
    report.seconds = time.perf_counter() - started
    return report


def ann_files(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """The tree stamp an index header was written for and the index file it names."""
    found = _current(header)
    return (found.tree, {found.index}) if found is not None else (None, set())


def remove_ann(tree_path: str | os.PathLike[str], model: str, precision: str) -> bool:
    """Remove the index of one vector set (when it can no longer be kept in step); whether
    there was one."""
    path = ann_header_path(tree_path, model, precision)
    existed, old = path.is_file(), _current(path)
    path.unlink(missing_ok=True)
    if old is not None:
        (path.parent / old.index).unlink(missing_ok=True)
    return existed


def has_ann(tree_path: str | os.PathLike[str], model: str, precision: str) -> bool:
    return ann_header_path(tree_path, model, precision).is_file()


def _current(path: Path) -> AnnHeader | None:
    if not path.is_file():
        return None
    try:
        return AnnHeader.read(path)
    except AnnError:
        return None


def _read_writable(faiss: Any, path: Path) -> Any:
    try:
        return faiss.read_index(str(path))
    except RuntimeError:
        return None


def _train(faiss: Any, factory: str, stored: NodeVectors, ids: np.ndarray) -> Any:
    index = faiss.index_factory(stored.dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        ivf.do_polysemous_training = False  # the factory's default; codes are never compared
        nlist = int(ivf.nlist)
        rng = np.random.default_rng(0)
        size = min(len(ids), max(39 * nlist, 50_000))  # faiss wants 39 points a list
        sample = np.sort(rng.choice(ids, size=size, replace=False))
        index.train(stored.take(sample))
    return index


def _add(index: Any, stored: NodeVectors, ids: np.ndarray) -> None:
    for start in range(0, len(ids), ADD_ROWS):
        part = ids[start:start + ADD_ROWS]
        index.add_with_ids(stored.take(part), part)


class AnnIndex:
    """One vector set's ANN index, opened read-only, searched with exact re-ranking."""

    def __init__(self, header: AnnHeader, path: Path, stored: NodeVectors) -> None:
        faiss = faiss_module()
        self.header, self.path, self.stored = header, path, stored
        self.nprobe = header.nprobe
        try:
            self.index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            raise AnnError(f"{path}: unreadable ANN index ({exc}); rebuild it with "
                           "`decisionrag index`") from exc
        self._params = faiss.SearchParametersIVF(nprobe=self.nprobe) if "IVF" in header.factory \
            else None
        self._lists = _ProbedLists.of(faiss, self.index, path)
        self._lock = threading.Lock()  # a search swaps the index's lists: one at a time

    @classmethod
    def open(cls, tree_path: str | os.PathLike[str], tree_meta: dict[str, Any],
             stored: NodeVectors) -> AnnIndex | None:
        """The index of `stored`'s vector set, or None when none is stored; AnnError when it
        was built for other vectors or another version of the tree."""
        path = ann_header_path(tree_path, stored.model, stored.precision)
        stamp, present = tree_stamp(tree_meta), False
        for _ in range(2):  # the current header, or the pending one of a publication
            for candidate in candidates(path):
                if not candidate.is_file():
                    continue
                present = True
                header = _current(candidate)
                if header is None:
                    header = AnnHeader.read(candidate)  # says what is wrong with it
                if header.tree == stamp and header.vectors == stored.path.name:
                    return cls(header, path.parent / header.index, stored)
        if not present:
            return None
        raise AnnError(
            f"{tree_path}: the stored ANN index ({stored.model}) was built for another "
            f"version of the tree or its vectors; rebuild it with `decisionrag index "
            f"{tree_path}`")

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Node ids and exact scores of (about) the `k` passages nearest `query`: `REFINE`·k
        candidates by their quantised scores, ranked by their stored vectors."""
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        params = self._params
        if nprobe is not None and params is not None:
            params = faiss_module().SearchParametersIVF(nprobe=nprobe)
        wanted = min(int(self.index.ntotal), max(k, 1) * REFINE)
        if wanted <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        with self._lock:
            if self._lists is not None and params is not None:
                self._lists.load(q, int(params.nprobe))
            try:
                _, found = self.index.search(q, wanted, params=params) if params is not None \
                    else self.index.search(q, wanted)
            finally:
                if self._lists is not None:
                    self._lists.release()
        candidates = np.sort(found[0][found[0] >= 0])
        scores = self.stored.take(candidates) @ q[0]
        order = np.lexsort((candidates, -scores))[:k]
        return candidates[order], scores[order].astype(np.float32)

    def __repr__(self) -> str:
        return f"<AnnIndex {self.header.factory} {self.header.rows:,} rows nprobe={self.nprobe}>"

    def close(self) -> None:
        if self._lists is not None:
            self._lists.close()


class _ProbedLists:
    """The inverted lists of an IVF index file, read with positioned reads: `load` puts the
    lists a query probes into a fresh in-memory list set that stands in for the index's own
    (the same codes and ids, so the search finds exactly what it would over the whole file),
    `release` empties it again. Where each list lies in the file is what faiss's
    memory-mapped reader computed at open (its mapping is dropped here, unread)."""

    def __init__(self, faiss: Any, ivf: Any, sizes: np.ndarray, offsets: np.ndarray,
                 path: Path) -> None:
        self.faiss, self.ivf = faiss, ivf
        self.sizes, self.offsets = sizes, offsets
        self.nlist, self.code_size = int(ivf.nlist), int(ivf.code_size)
        self._fd = os.open(path, os.O_RDONLY)
        self._held: Any = None
        self.release()

    @classmethod
    def of(cls, faiss: Any, index: Any, path: Path) -> _ProbedLists | None:
        """The lists of `index` (read with faiss's IO_FLAG_MMAP) read this way; None for an
        index without inverted lists in its file (a flat list: read whole, it is small)."""
        try:
            ivf = faiss.extract_index_ivf(index)
        except RuntimeError:
            return None
        mapped = faiss.downcast_InvertedLists(ivf.invlists)
        if not isinstance(mapped, faiss.OnDiskInvertedLists):
            return None
        entries = mapped.lists
        nlist = int(ivf.nlist)
        sizes = np.fromiter((entries.at(i).size for i in range(nlist)), np.int64, nlist)
        offsets = np.fromiter((entries.at(i).offset for i in range(nlist)), np.int64, nlist)
        return cls(faiss, ivf, sizes, offsets, path)

    def load(self, query: np.ndarray, nprobe: int) -> None:
        """Read the lists the index's coarse quantiser picks for `query` (as its search will
        pick them) and put them in place."""
        _, assigned = self.ivf.quantizer.search(query, nprobe)
        lists = self.faiss.ArrayInvertedLists(self.nlist, self.code_size)
        step = self.code_size + 8  # a list is its codes, then its int64 ids
        for number in sorted({int(n) for n in assigned[0] if n >= 0}):
            count = int(self.sizes[number])
            if not count:
                continue
            data = os.pread(self._fd, count * step, int(self.offsets[number]))
            if len(data) != count * step:
                raise AnnError(f"inverted list {number} is cut short; rebuild the index with "
                               "`decisionrag index`")
            codes = np.frombuffer(data, np.uint8, count * self.code_size)
            ids = np.frombuffer(data, np.int64, count, count * self.code_size)
            lists.add_entries(number, count, self.faiss.swig_ptr(ids),
                              self.faiss.swig_ptr(codes))
        self._swap(lists)

    def release(self) -> None:
        """Free the lists read for the last search (an empty set in their place)."""
        self._swap(self.faiss.ArrayInvertedLists(self.nlist, self.code_size))

    def _swap(self, lists: Any) -> None:
        self.ivf.replace_invlists(lists, False)  # not owned: freed with `_held`'s last reference
        self._held = lists

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


def exact_search(stored: NodeVectors, passage_ids: Sequence[int] | np.ndarray, query: np.ndarray,
                 k: int) -> np.ndarray:
    """The node ids of the exact top `k` (a full scan; for measuring the ANN's recall)."""
    ids = np.asarray(passage_ids, dtype=np.int64)
    scores = stored.scan(np.asarray(query, dtype=np.float32))[ids]
    k = min(k, len(ids))
    top = np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, np.int64)
    return ids[top[np.lexsort((ids[top], -scores[top]))]]
