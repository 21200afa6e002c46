"""Node vectors stored with a tree: ``TREE.vectors/``, versioned, memory-mapped.

Layout of the folder beside ``corpus.tree``::

    corpus.tree.vectors/
        <set>.json            header: format version, model, precision, dimension, dtype,
                              rows, the tree it was built for, the matrix file's name
        <set>-<token>.npy     float16 matrix, one row per node id (row i = node i)
        lexicon.json          header line (version, tree), then the word statistics
        lexicon-<token>.terms each passage's term counts (`decisionrag._words.TermRows`),
                              arrays laid out as the header line says

``<set>`` names the model and precision (``all-MiniLM-L6-v2`` or ``all-MiniLM-L6-v2+bf16``),
so vectors of several models can sit beside one tree. Row ``i`` is node ``i``'s unit vector:
a passage's embedding of its title, heading path and text (`passage_text`), a page's the
normalised mean of its passages', a group's the normalised mean of its children's. Rows of
nodes without a vector (the root, sections) are zero.

Writing is atomic: the matrix is written under a fresh name, then the header is renamed into
place (the commit point), then the previous matrix is removed. A reader that opened the old
header keeps its mapping of the old matrix (POSIX keeps unlinked files readable). While the
tree itself is being published (`_publish`), the header is written pending (``NAME.json.next``)
and the previous matrix kept, so that tree and vectors change together (`_staging`).

Reading: `NodeVectors.open` maps the matrix read-only (nothing is read until used); rows are
looked up by node id. `scan` computes one query's scores over a row range in chunks read
with ordinary file reads, so a flat search over millions of rows does not grow the process's
resident set by the size of the matrix.

This module and `_store` are the only code that knows how a tree is laid out on disk.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import TreeFormatError
from ._staging import PENDING, candidates, header_target

VECTORS_VERSION = 1
CHECKS_SUFFIX = ".checks.npy"  # beside a matrix: the text checksum of each row's passage
STORED_DTYPE = np.float16
SCAN_ROWS = 16_384  # rows read at once by `scan` (12 MB of 384-d float16)
# A set up to this size is read once and held (as float32 when that fits, else as stored) by
# the `NodeVectors` that reads it for queries: a level's candidate rows are then gathered from memory in one
# indexing operation (`blocks`) instead of one positioned read per candidate.
HELD_BYTES = 64 * 1024 * 1024


class VectorsError(TreeFormatError):
    """Vectors are missing, damaged, out of date, or of another model or precision."""


def passage_text(title: str, heading: Sequence[str], text: str) -> str:
    """What a passage's vector embeds (and flat retrievers index): title, heading path
    (without a repeated title), text."""
    path = [h for h in heading if h and h != title]
    parts = [title.strip(), " > ".join(path), text]
    return "\n".join(p for p in parts if p)


def vectors_folder(tree_path: str | os.PathLike[str]) -> Path:
    path = Path(tree_path)
    return path.with_name(path.name + ".vectors")


def set_name(model: str, precision: str) -> str:
    """The file stem of one model's vectors: the model's name (slashes folded), with
    ``+bf16`` for bfloat16 (float32 has no suffix)."""
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "--", model).strip("-") or "model"
    return slug + ("" if precision == "float32" else "+bf16")


def open_vectors(tree: Any, *, model: str | None = None,
                 precision: str | None = None) -> NodeVectors:
    """The stored vectors of an open `Tree` (see `NodeVectors.open`)."""
    return NodeVectors.open(tree.file, tree.meta, model=model, precision=precision)


def open_query_vectors(tree: Any, *, model: str, precision: str) -> NodeVectors:
    """The stored vectors a query encoder of `model` and `precision` is compared with.

    A float32 query reads its model's vectors of either precision (float32 when both are
    stored): the query is only compared, never stored, and float32 is the more exact of the
    two. A bfloat16 query needs bfloat16 vectors, and the model must always match
    (VectorsError, naming what is stored). Writing and mixing vectors stays exact."""
    if precision == "float32":
        stored = {s.precision for s in available_sets(tree.file) if s.model == model}
        if len(stored) == 1:
            precision = stored.pop()
    return open_vectors(tree, model=model, precision=precision)


def tree_stamp(meta: dict[str, Any]) -> dict[str, Any]:
    """What identifies one write of a tree file (its metadata changes on every write: a
    random ``write_id`` since issue 23, so that two writes in one second differ too)."""
    stamp = {"written_at": meta.get("written_at"), "counts": meta.get("counts")}
    if meta.get("write_id"):
        stamp["write"] = meta["write_id"]
    return stamp


@dataclass(frozen=True, slots=True)
class VectorsHeader:
    model: str
    precision: str
    dim: int
    rows: int
    matrix: str
    tree: dict[str, Any]
    version: int = VECTORS_VERSION
    dtype: str = "float16"

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "model": self.model,
                           "precision": self.precision, "dim": self.dim, "rows": self.rows,
                           "dtype": self.dtype, "matrix": self.matrix, "tree": self.tree})

    @classmethod
    def read(cls, path: Path) -> VectorsHeader:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            header = cls(model=str(data["model"]), precision=str(data["precision"]),
                         dim=int(data["dim"]), rows=int(data["rows"]), matrix=str(data["matrix"]),
                         tree=dict(data["tree"]), version=int(data["version"]),
                         dtype=str(data["dtype"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VectorsError(f"{path}: not a readable vectors header ({exc})") from exc
        if header.version != VECTORS_VERSION:
            raise VectorsError(f"{path}: vectors format version {header.version}, this "
                               f"decisionrag reads {VECTORS_VERSION}; run `decisionrag vectors`")
        return header


def available_sets(tree_path: str | os.PathLike[str]) -> list[VectorsHeader]:
    """The vector sets stored beside a tree (any model, any precision; possibly stale); a
    set only pending (`_staging`) is listed by its pending header."""
    folder = vectors_folder(tree_path)
    if not folder.is_dir():
        return []
    found: dict[str, VectorsHeader] = {}
    for pattern in ("*.json", "*.json" + PENDING):
        for header in sorted(folder.glob(pattern)):
            base = header.name.removesuffix(PENDING)
            if base.endswith(".ann.json") or base == LEXICON_FILE or base in found:
                continue
            try:
                found[base] = VectorsHeader.read(header)
            except VectorsError:
                continue
    return list(found.values())


def _current_header(folder: Path, name: str, stamp: dict[str, Any]) -> VectorsHeader | None:
    """The set's header that matches the tree `stamp`: the current one, or the pending one
    of a publication in progress (read twice: a pending header may be promoted meanwhile)."""
    for _ in range(2):
        for path in candidates(folder / f"{name}.json"):
            try:
                header = VectorsHeader.read(path)
            except VectorsError:
                continue
            if header.tree == stamp:
                return header
    return None


def write_vectors(
    tree_path: str | os.PathLike[str], matrix: npt.ArrayLike, *, model: str, precision: str,
    tree_meta: dict[str, Any],
) -> Path:
    """Store `matrix` (rows = node ids) as the `model`/`precision` vectors of the tree."""
    values = np.asarray(matrix)
    if values.ndim != 2:
        raise ValueError("vectors must be a matrix (one row per node id)")
    folder = vectors_folder(tree_path)
    folder.mkdir(parents=True, exist_ok=True)
    name = set_name(model, precision)
    header_path = folder / f"{name}.json"
    old = _old_matrix(header_path)
    matrix_name = f"{name}-{secrets.token_hex(4)}.npy"
    _atomic_write(folder / matrix_name,
                  lambda out: np.save(out, values.astype(STORED_DTYPE, copy=False)))
    header = VectorsHeader(model=model, precision=precision, dim=int(values.shape[1]),
                           rows=int(values.shape[0]), matrix=matrix_name,
                           tree=tree_stamp(tree_meta))
    target = header_target(header_path)
    _atomic_write(target, lambda out: out.write(header.to_json().encode()))
    if target == header_path and old is not None and old != matrix_name:
        (folder / old).unlink(missing_ok=True)  # pending: kept until the publication ends
    return target


def vectors_files(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """The tree stamp a set's header was written for and the files it names (the matrix and
    its checksums)."""
    try:
        found = VectorsHeader.read(header)
    except VectorsError:
        return None, set()
    return found.tree, {found.matrix, found.matrix + CHECKS_SUFFIX}


def _old_matrix(header_path: Path) -> str | None:
    if not header_path.is_file():
        return None
    try:
        return VectorsHeader.read(header_path).matrix
    except VectorsError:
        return None


def _atomic_write(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


LEXICON_FILE = "lexicon.json"
TERMS_SUFFIX = ".terms"
_ALIGN = 8  # each stored array starts on a multiple of this (the widest dtype stored)


def write_lexicon(tree_path: str | os.PathLike[str], lexicon_json: str,
                  tree_meta: dict[str, Any], terms: dict[str, np.ndarray] | None = None) -> Path:
    """Store the corpus's word statistics (model-independent) beside the vectors, with
    `terms`, the passages' term counts as named 1-D arrays, in a data file the header names
    (written first, under a fresh name, as a set's matrix is)."""
    folder = vectors_folder(tree_path)
    folder.mkdir(parents=True, exist_ok=True)
    header_path = folder / LEXICON_FILE
    old = _terms_name(_lexicon_info(header_path))
    info: dict[str, Any] = {"version": VECTORS_VERSION, "tree": tree_stamp(tree_meta)}
    name = None
    if terms is not None:
        name = f"lexicon-{secrets.token_hex(4)}{TERMS_SUFFIX}"
        layout: dict[str, list[Any]] = {}
        _atomic_write(folder / name, lambda out: _write_arrays(out, terms, layout))
        info["terms"] = {"file": name, "arrays": layout}
    body = json.dumps(info)
    target = header_target(header_path)
    _atomic_write(target, lambda out: out.write(f"{body}\n{lexicon_json}".encode()))
    if target == header_path and old is not None and old != name:
        (folder / old).unlink(missing_ok=True)  # pending: kept until the publication ends
    return target


def _write_arrays(out: Any, arrays: dict[str, np.ndarray], layout: dict[str, list[Any]]) -> None:
    """Each array's bytes in turn (padded to `_ALIGN`); `layout` gets [dtype, size, offset]."""
    offset = 0
    for key, array in arrays.items():
        data = np.ascontiguousarray(array).reshape(-1)
        layout[key] = [data.dtype.str, int(data.size), offset]
        out.write(data.data.cast("B"))
        padding = -data.nbytes % _ALIGN
        out.write(b"\0" * padding)
        offset += data.nbytes + padding


def read_lexicon_terms(tree_path: str | os.PathLike[str], tree_meta: dict[str, Any]
                       ) -> tuple[str, dict[str, np.ndarray] | None] | None:
    """The stored word statistics (JSON text) and the passages' term counts its header
    names (memory-mapped read-only; None when not stored or unreadable), or None when
    absent or built for another version of the tree."""
    for _ in range(2):
        for path in candidates(vectors_folder(tree_path) / LEXICON_FILE):
            try:
                head, _, body = path.read_text("utf-8").partition("\n")
                info = json.loads(head)
            except (OSError, ValueError):
                continue
            if info.get("version") == VECTORS_VERSION and info.get("tree") == tree_stamp(tree_meta):
                return body, _mapped_terms(path.parent, info.get("terms"))
    return None


def _mapped_terms(folder: Path, terms: Any) -> dict[str, np.ndarray] | None:
    try:
        file = folder / str(terms["file"])
        return {key: np.memmap(file, dtype=np.dtype(dtype), mode="r", offset=int(offset),
                               shape=(int(size),)) if size else np.zeros(0, dtype=np.dtype(dtype))
                for key, (dtype, size, offset) in dict(terms["arrays"]).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _lexicon_info(header: Path) -> dict[str, Any] | None:
    """A lexicon file's header line (None when unreadable); its body is not read."""
    try:
        with header.open("rb") as file:
            info = json.loads(file.readline())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _terms_name(info: dict[str, Any] | None) -> str | None:
    """The term-count file a lexicon header names (None when it names none)."""
    terms = info.get("terms") if info is not None else None
    name = terms.get("file") if isinstance(terms, dict) else None
    return str(name) if name else None


def lexicon_files(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """The tree stamp a lexicon header was written for (None when unreadable) and the
    files it names (its term counts)."""
    info = _lexicon_info(header)
    if info is None:
        return None, set()
    named = _terms_name(info)
    return info.get("tree"), {named} if named else set()


class NodeVectors:
    """One tree's vectors of one model and precision, memory-mapped read-only."""

    def __init__(self, header: VectorsHeader, path: Path) -> None:
        self.header = header
        self.path = path
        self.model, self.precision, self.dim = header.model, header.precision, header.dim
        try:
            self.matrix: np.ndarray = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise VectorsError(f"{path}: unreadable vectors ({exc})") from exc
        if self.matrix.shape != (header.rows, header.dim):
            raise VectorsError(f"{path}: shape {self.matrix.shape}, the header says "
                               f"{(header.rows, header.dim)}; rebuild with `decisionrag vectors`")
        self._offset = int(getattr(self.matrix, "offset", 0))
        self._row_bytes = self.dim * np.dtype(STORED_DTYPE).itemsize
        self._fd = os.open(path, os.O_RDONLY)
        self._held: np.ndarray | None = None

    @classmethod
    def open(
        cls, tree_path: str | os.PathLike[str], tree_meta: dict[str, Any], *,
        model: str | None = None, precision: str | None = None,
    ) -> NodeVectors:
        """The tree's vectors; with `model`/`precision`, exactly those (else the only set).
        Raises VectorsError naming what is stored when nothing matches."""
        sets = available_sets(tree_path)
        if not sets:
            raise VectorsError(f"{tree_path} has no stored vectors; build them with "
                               f"`decisionrag vectors {tree_path}` (needs decisionrag[embedded])")
        wanted = [s for s in sets if (model is None or s.model == model)
                  and (precision is None or s.precision == precision)]
        if not wanted:
            stored = ", ".join(f"{s.model} ({s.precision})" for s in sets)
            asked = f"{model or 'any model'} ({precision or 'any precision'})"
            raise VectorsError(
                f"{tree_path}: vectors are stored for {stored}, not for {asked}; rebuild them "
                f"with `decisionrag vectors {tree_path}` for this model and precision, or use "
                "the stored model")
        if len(wanted) > 1:
            names = ", ".join(f"{s.model} ({s.precision})" for s in wanted)
            raise VectorsError(f"{tree_path}: several vector sets ({names}); name the model")
        matching = _current_header(vectors_folder(tree_path), set_name(wanted[0].model,
                                   wanted[0].precision), tree_stamp(tree_meta))
        if matching is None:
            raise VectorsError(
                f"{tree_path}: the stored vectors ({wanted[0].model}) were built for another "
                f"version of the tree; rebuild them with `decisionrag vectors {tree_path}`")
        return cls(matching, vectors_folder(tree_path) / matching.matrix)

    def __repr__(self) -> str:
        return f"<NodeVectors {self.model} {self.precision} {self.header.rows}×{self.dim}>"

    def row(self, node_id: int) -> np.ndarray:
        return self.rows(node_id, node_id + 1)[0]

    def lazy_rows(self, start: int, stop: int) -> StoredRows:
        """Rows start..stop-1 as a handle that reads them when used (`StoredRows`)."""
        return StoredRows(self, start, stop)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1 (float16, a copy read with one positioned read: scattered
        lookups through the mapping would fault in, and count as resident, tens of
        kilobytes around every row)."""
        count = max(0, min(stop, self.header.rows) - start)
        data = os.pread(self._fd, count * self._row_bytes, self._offset + start * self._row_bytes)
        return np.frombuffer(data, dtype=STORED_DTYPE).reshape(count, self.dim)

    def blocks(self, starts: Sequence[int] | np.ndarray, length: int) -> np.ndarray:
        """float32 rows start..start+length-1 for every start, as one array of shape
        (len(starts), length, dim): gathered from memory when the set is small enough to be
        held (`HELD_BYTES`, read once), else one positioned read per block. The rows must
        exist (callers take `length` from `StoredRows`, which are clipped to the set)."""
        first = np.asarray(starts, dtype=np.int64)
        held = self._held_matrix()
        if held is not None:
            return held[first[:, None] + np.arange(length)].astype(np.float32, copy=False)
        out = np.empty((len(first), length, self.dim), dtype=np.float32)
        for index, start in enumerate(first.tolist()):
            out[index] = self.rows(start, start + length)
        return out

    def _held_matrix(self) -> np.ndarray | None:
        """The whole set in memory when it is small: as float32 (converted once, exactly)
        when that fits `HELD_BYTES`, else as stored."""
        if self._held is None and self.header.rows * self._row_bytes <= HELD_BYTES:
            stored = self.rows(0, self.header.rows)
            fits = stored.size * np.dtype(np.float32).itemsize <= HELD_BYTES
            self._held = stored.astype(np.float32) if fits else stored
        return self._held

    def take(self, node_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """float32 rows of `node_ids`, in that order: one read per row for a few, chunked
        reads through the file for many."""
        ids = np.asarray(node_ids, dtype=np.int64)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        if len(ids) * 16 < self.header.rows:
            for index, node_id in enumerate(ids.tolist()):
                out[index] = self.rows(node_id, node_id + 1)[0]
            return out
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        for first in range(0, self.header.rows, SCAN_ROWS):
            last = min(self.header.rows, first + SCAN_ROWS)
            lo, hi = np.searchsorted(ordered, [first, last])
            if lo < hi:
                out[order[lo:hi]] = self.rows(first, last)[ordered[lo:hi] - first]
        return out

    def close(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()

    def scan(self, query: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
        """`matrix[start:stop] @ query` (float32), read in chunks with plain reads so the
        resident set stays at one chunk."""
        stop = self.header.rows if stop is None else stop
        out = np.empty(max(0, stop - start), dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        row_bytes = self.dim * 2
        with open(self.path, "rb", buffering=0) as handle:
            for first in range(start, stop, SCAN_ROWS):
                last = min(stop, first + SCAN_ROWS)
                handle.seek(self._offset + first * row_bytes)
                block = np.fromfile(handle, dtype=STORED_DTYPE, count=(last - first) * self.dim)
                out[first - start:last - start] = block.reshape(-1, self.dim).astype(np.float32) @ q
        return out


class StoredRows:
    """Rows start..stop-1 of stored vectors, read each time they are used (`np.asarray`,
    slicing) rather than held: a navigator caches the candidate entries of every page it has
    shown, and 110,000 page entries holding their rows kept about 110 MB of copies at NQ
    scale (docs/benchmarks.md, "Vectors at NQ scale"). A read is one positioned read of
    the page cache (about 3 µs for one row)."""

    __slots__ = ("source", "start", "stop")

    def __init__(self, source: NodeVectors, start: int, stop: int) -> None:
        self.source = source
        self.start = start
        self.stop = max(start, min(stop, source.header.rows))

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self), self.source.dim)

    def read(self) -> np.ndarray:
        """The rows (float16, as stored)."""
        return self.source.rows(self.start, self.stop)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        rows = self.read()
        return rows if dtype is None else rows.astype(dtype, copy=False)

    def __getitem__(self, index: Any) -> np.ndarray:
        """Rows of a slice (only those are read), or anything numpy indexing takes."""
        if isinstance(index, slice) and index.step in (None, 1):
            first, last, _ = index.indices(len(self))
            return self.source.rows(self.start + first, self.start + max(first, last))
        return self.read()[index]

    def __repr__(self) -> str:
        return f"<StoredRows {self.start}..{self.stop - 1} of {self.source!r}>"
