"""The BM25 index stored with a tree: ``TREE.bm25/``, built in one streaming pass, versioned,
opened without reading it.

Layout of the folder beside ``corpus.tree``::

    corpus.tree.bm25/
        index.json              header: format version, parameters (Lucene BM25, k1, b),
                                tokenizer, counts, the tree it was built for, file names
        ids-<token>.npy         int64: node id of each indexed passage (index position i)
        indptr-<token>.npy      int64: column c holds entries indptr[c]..indptr[c+1]-1
        indices-<token>.npy     int32: passage positions of each column's entries (ascending)
        data-<token>.npy        float32: the precomputed BM25 term score of each entry
        terms-<token>.npy       uint8: every term, UTF-8, sorted, concatenated
        offsets-<token>.npy     int64: term t is terms[offsets[t]:offsets[t+1]]
        columns-<token>.npy     int32: the column of the t-th sorted term

A passage is indexed as flat retrievers see it (`_vectors.passage_text`: title, heading path,
text), tokenized as bm25s tokenizes (lower case, ``\\w\\w+``, English stopwords, Snowball
stemmer), and scored as bm25s's Lucene variant scores: an entry holds
``idf(t) · tf / (tf + k1 · (1 − b + b · len / avglen))`` computed with bm25s's arithmetic
(float32 idf and term frequencies, float64 lengths), so a query's scores equal those of a
bm25s index of the same texts bit for bit (tests/test_bm25_index.py is the oracle test).

Building streams the store: passages are read and tokenized `chunk` at a time, each chunk's
(term, passage, frequency) triples are written sorted to a scratch folder, and the columns
are then assembled a bounded number of entries at a time and appended to the output files.
What stays in memory is the vocabulary (one dict entry per distinct term) and two arrays of
one number per passage; never the corpus's texts or its whole matrix.

Writing is atomic: the arrays are written under a fresh token, then ``index.json`` is renamed
into place (the commit point), then the previous token's arrays are removed (while the tree is
being published, ``index.json.next`` and the previous arrays kept: `_staging`). Reading maps the
small arrays (`indptr`, `ids`, the vocabulary) and reads a query term's column with one
positioned read, so a query's memory is its columns and one score per passage.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import TreeFormatError, missing_extra
from .._files import atomic_path, atomic_write, temporary_folder_beside
from ._staging import candidates, header_target
from ._vectors import passage_text, tree_stamp

BM25_VERSION = 1
HEADER = "index.json"
CHUNK_PASSAGES = 20_000  # passages tokenized at once while building
BUCKET_ENTRIES = 4_000_000  # matrix entries assembled at once while building (about 80 MB)
COLUMN_PIECE = 1 << 18  # entries of a term's column read and added at once (2 MB)
TERMS_KEPT = 65_536  # query terms whose column is kept once looked up (then all are let go)
ARRAYS = ("ids", "indptr", "indices", "data", "terms", "offsets", "columns")
TOKENIZER = {"library": "bm25s", "pattern": r"(?u)\b\w\w+\b", "lower": True, "stopwords": "en",
             "stemmer": "english"}

Tokenize = Callable[[list[str]], list[list[str]]]


class BM25IndexError(TreeFormatError):
    """The stored BM25 index is missing, damaged, of another format or of another tree."""


def bm25_folder(tree_path: str | os.PathLike[str]) -> Path:
    path = Path(tree_path)
    return path.with_name(path.name + ".bm25")


def bm25_modules() -> tuple[Any, Any]:
    """bm25s and an English Snowball stemmer (the ``eval`` extra)."""
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise missing_extra(getattr(exc, "name", None) or "bm25s", "eval") from exc
    return bm25s, Stemmer.Stemmer("english")


def bm25_tokenizer() -> Tokenize:
    """Texts -> their terms, exactly as bm25s tokenizes them for indexing and for queries."""
    bm25s, stemmer = bm25_modules()

    def tokenize(texts: list[str]) -> list[list[str]]:
        return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False,
                              show_progress=False)

    return tokenize


def bm25_query_tokenizer() -> Callable[[str], list[str]]:
    """One text -> its terms, as `bm25_tokenizer` gives them: bm25s.tokenize's steps for a
    single text (lower case, `TOKENIZER`'s pattern, English stopwords out, each token
    stemmed) without the progress bars and id dictionaries it makes on every call."""
    _, stemmer = bm25_modules()
    from bm25s.stopwords import STOPWORDS_EN

    split = re.compile(str(TOKENIZER["pattern"])).findall
    stopwords = frozenset(STOPWORDS_EN)

    def tokenize(text: str) -> list[str]:
        tokens = [token for token in split(text.lower()) if token not in stopwords]
        distinct = list(dict.fromkeys(tokens))
        stems = dict(zip(distinct, stemmer.stemWords(distinct), strict=True))
        return [stems[token] for token in tokens]

    return tokenize


def tokenizer_version() -> str:
    bm25s, _ = bm25_modules()
    return str(getattr(bm25s, "__version__", ""))


# -- building --------------------------------------------------------------------------------


def passage_chunks(tree: Any, size: int = CHUNK_PASSAGES) -> Iterator[tuple[list[int], list[str]]]:
    """(node ids, indexable texts) of the tree's passages, `size` at a time, in id order."""
    titles = {doc.id: doc.title for doc in tree.documents()}
    ids: list[int] = []
    texts: list[str] = []
    for node in tree.iter_passages():
        ids.append(node.id)
        texts.append(passage_text(titles.get(node.doc if node.doc is not None else -1, ""),
                                  node.heading, node.text))
        if len(ids) >= size:
            yield ids, texts
            ids, texts = [], []
    if ids:
        yield ids, texts


def write_bm25(tree: Any, *, k1: float = 1.5, b: float = 0.75,
               tokenize: Tokenize | None = None, chunk: int = CHUNK_PASSAGES,
               bucket_entries: int = BUCKET_ENTRIES) -> Path:
    """Build the BM25 index of an open `Tree` in one streaming pass and store it beside the
    tree (see the module doc); returns the header's path."""
    tokenize = tokenize or bm25_tokenizer()
    folder = bm25_folder(tree.file)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = temporary_folder_beside(folder / "build")
    try:
        token = secrets.token_hex(4)
        counted = _count(tree, tokenize, chunk, scratch)
        header = _assemble(counted, k1, b, bucket_entries, scratch, folder, token)
        header["tree"] = tree_stamp(tree.meta)
        header["tokenizer"] = {**TOKENIZER, "version": tokenizer_version()}
        old = _old_token(folder)
        target = header_target(folder / HEADER)
        atomic_write(target, json.dumps(header), mode=0o644)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if target == folder / HEADER and old is not None and old != token:
        for name in ARRAYS:  # pending: kept until the publication ends
            (folder / f"{name}-{old}.npy").unlink(missing_ok=True)
    return target


def bm25_files(header: Path) -> tuple[dict[str, Any] | None, set[str]]:
    """The tree stamp a header was written for and the array files it names."""
    try:
        data = json.loads(header.read_text("utf-8"))
        token = str(data["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, set()
    return data.get("tree"), {f"{name}-{token}.npy" for name in ARRAYS}


class _Counted:
    """What the first pass learned: the vocabulary, document frequencies, lengths, ids,
    and the scratch chunk files (each sorted by term, then passage)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(0, dtype=np.int64)
        self.lengths: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []
        self.chunks = 0


def _count(tree: Any, tokenize: Tokenize, chunk: int, scratch: Path) -> _Counted:
    counted = _Counted()
    vocab = counted.vocab
    first = 0
    for ids, texts in passage_chunks(tree, chunk):
        docs_terms = tokenize(texts)
        del texts
        lengths = np.fromiter(map(len, docs_terms), dtype=np.int64, count=len(docs_terms))
        terms = np.fromiter((vocab.setdefault(t, len(vocab)) for doc in docs_terms for t in doc),
                            dtype=np.int64, count=int(lengths.sum()))
        del docs_terms
        n = len(ids)
        local = np.repeat(np.arange(n, dtype=np.int64), lengths)
        pairs, tf = np.unique(terms * n + local, return_counts=True)  # sorted: term, passage
        term_of = pairs // n
        np.save(scratch / f"{counted.chunks}-term.npy", term_of.astype(np.int32))
        np.save(scratch / f"{counted.chunks}-doc.npy", (pairs % n + first).astype(np.int32))
        np.save(scratch / f"{counted.chunks}-tf.npy", tf.astype(np.int32))
        if len(counted.df) < len(vocab):
            counted.df = np.concatenate([counted.df,
                                         np.zeros(len(vocab) - len(counted.df), np.int64)])
        counted.df += np.bincount(term_of, minlength=len(vocab))
        counted.lengths.append(lengths)
        counted.ids.append(np.asarray(ids, dtype=np.int64))
        counted.chunks += 1
        first += n
    return counted


def _assemble(counted: _Counted, k1: float, b: float, bucket_entries: int, scratch: Path,
              folder: Path, token: str) -> dict[str, Any]:
    lengths = np.concatenate(counted.lengths) if counted.lengths else np.zeros(0, np.int64)
    n_docs, n_terms = len(lengths), len(counted.vocab)
    avgdl = lengths.mean() if n_docs else np.float64(1.0)  # bm25s: np.array(lengths).mean()
    df = counted.df
    idf = np.zeros(n_terms, dtype=np.float32)
    for column, freq in enumerate(df.tolist()):  # math.log, as bm25s computes it
        if freq:
            idf[column] = math.log(1 + (n_docs - freq + 0.5) / (freq + 0.5))
    indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    nnz = int(indptr[-1])
    _save(folder, "ids", token, np.concatenate(counted.ids) if counted.ids
          else np.zeros(0, np.int64))
    _save(folder, "indptr", token, indptr)
    with _appending(folder, "indices", token, np.int32, nnz) as indices, \
            _appending(folder, "data", token, np.float32, nnz) as data:
        for lo, hi in _buckets(indptr, bucket_entries):
            term, doc, tf = _bucket(scratch, counted.chunks, lo, hi)
            tf32 = tf.astype(np.float32)
            tfc = tf32 / (k1 * ((1 - b) + b * lengths[doc] / avgdl) + tf32)  # bm25s's Lucene tfc
            indices(doc)
            data((idf[term] * tfc).astype(np.float32))
    _save_vocabulary(folder, token, counted.vocab)
    return {"version": BM25_VERSION, "method": "lucene", "k1": k1, "b": b, "docs": n_docs,
            "terms": n_terms, "entries": nnz, "avgdl": float(avgdl), "token": token}


def _buckets(indptr: np.ndarray, entries: int) -> Iterator[tuple[int, int]]:
    """Column ranges [lo, hi) of at most `entries` entries (a larger column alone)."""
    n_terms = len(indptr) - 1
    lo = 0
    while lo < n_terms:
        hi = int(np.searchsorted(indptr, indptr[lo] + entries, side="right")) - 1
        hi = min(n_terms, max(hi, lo + 1))
        yield lo, hi
        lo = hi


def _bucket(scratch: Path, chunks: int, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """The entries of columns lo..hi-1 from every chunk, sorted by column, then passage."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for index in range(chunks):
        terms = np.load(scratch / f"{index}-term.npy", mmap_mode="r")
        start, stop = (int(i) for i in np.searchsorted(terms, [lo, hi]))
        if start < stop:
            doc = np.load(scratch / f"{index}-doc.npy", mmap_mode="r")
            tf = np.load(scratch / f"{index}-tf.npy", mmap_mode="r")
            parts.append((np.array(terms[start:stop]), np.array(doc[start:stop]),
                          np.array(tf[start:stop])))
    if not parts:
        empty = np.zeros(0, np.int32)
        return empty, empty, empty
    term = np.concatenate([p[0] for p in parts])
    order = np.argsort(term, kind="stable")  # chunks come in passage order
    return (term[order], np.concatenate([p[1] for p in parts])[order],
            np.concatenate([p[2] for p in parts])[order])


class _appending:
    """A .npy file of known length written front to back (atomic: renamed when complete)."""

    def __init__(self, folder: Path, name: str, token: str, dtype: Any, length: int) -> None:
        self.target = folder / f"{name}-{token}.npy"
        self.dtype, self.length = np.dtype(dtype), length

    def __enter__(self) -> Callable[[np.ndarray], None]:
        self._atomic = atomic_path(self.target, mode=0o644)
        tmp = self._atomic.__enter__()
        self._out = open(tmp, "wb")
        np.lib.format.write_array_header_1_0(
            self._out, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                        "fortran_order": False, "shape": (self.length,)})
        self._end = self._out.tell() + self.length * self.dtype.itemsize

        def append(part: np.ndarray) -> None:
            self._out.write(np.ascontiguousarray(part, self.dtype).tobytes())

        return append

    def __exit__(self, *exc: Any) -> None:
        written = self._out.tell()
        self._out.close()
        if exc[0] is None and written != self._end:
            error = BM25IndexError(f"{self.target}: {written} bytes written, {self._end} expected")
            self._atomic.__exit__(BM25IndexError, error, None)
            raise error
        self._atomic.__exit__(*exc)


def _save(folder: Path, name: str, token: str, array: np.ndarray) -> None:
    atomic_write(folder / f"{name}-{token}.npy", lambda out: np.save(out, array), mode=0o644)


def _save_vocabulary(folder: Path, token: str, vocab: dict[str, int]) -> None:
    terms = sorted(vocab)  # code-point order = UTF-8 byte order: binary search on bytes
    encoded = [t.encode("utf-8") for t in terms]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    _save(folder, "terms", token, np.frombuffer(b"".join(encoded), dtype=np.uint8))
    _save(folder, "offsets", token, offsets)
    _save(folder, "columns", token, np.asarray([vocab[t] for t in terms], dtype=np.int32))


def _matching_header(folder: Path, stamp: dict[str, Any]) -> dict[str, Any] | None:
    """The header (current, or pending in a publication) written for the tree `stamp`."""
    for _ in range(2):
        for path in candidates(folder / HEADER):
            try:
                header = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(header, dict) and header.get("tree") == stamp:
                return header
    return None


def _old_token(folder: Path) -> str | None:
    try:
        return str(json.loads((folder / HEADER).read_text("utf-8"))["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- reading ---------------------------------------------------------------------------------


class StoredBM25:
    """A tree's stored BM25 index, opened read-only: `scores(terms)` of every passage."""

    def __init__(self, folder: Path, header: dict[str, Any]) -> None:
        self.folder, self.header = folder, header
        token = header["token"]
        self.k1, self.b = float(header["k1"]), float(header["b"])
        self.n_docs = int(header["docs"])
        try:
            # the passages' node ids (8 bytes each: 21 MB at NQ size) mapped too: a hybrid
            # walk looks up a thousand a query, which positioned reads took 0.6 ms to do
            arrays = {name: np.load(folder / f"{name}-{token}.npy", mmap_mode="r")
                      for name in ("indptr", "terms", "offsets", "columns", "ids")}
        except (OSError, ValueError) as exc:
            raise BM25IndexError(f"{folder}: unreadable BM25 index ({exc}); rebuild it with "
                                 f"`decisionrag index {folder.name.removesuffix('.bm25')}`") from exc
        self.indptr = arrays["indptr"]
        self._terms, self._offsets, self._columns = (arrays["terms"], arrays["offsets"],
                                                     arrays["columns"])
        self._ids = arrays["ids"]
        if (self._ids.shape != (self.n_docs,) or self._ids.dtype != np.int64
                or len(self.indptr) != int(header["terms"]) + 1):
            raise BM25IndexError(f"{folder}: BM25 arrays do not match their header; rebuild it")
        self._column_of: dict[str, int | None] = {}  # `column`'s answers (see TERMS_KEPT)
        self._files = {name: _Column(folder / f"{name}-{token}.npy", dtype)
                       for name, dtype in (("indices", np.int32), ("data", np.float32))}

    def node_ids(self, positions: npt.ArrayLike) -> np.ndarray:
        """The node ids of the passages at index `positions` (a query's hits)."""
        wanted = np.asarray(positions, dtype=np.int64)
        if wanted.size and (int(wanted.min()) < 0 or int(wanted.max()) >= self.n_docs):
            raise IndexError(f"positions outside 0..{self.n_docs - 1}")
        return np.asarray(self._ids[wanted])

    @classmethod
    def open(cls, tree_path: str | os.PathLike[str], tree_meta: dict[str, Any]) -> StoredBM25:
        """The index stored beside the tree; BM25IndexError when absent, damaged, of another
        format version, or built for another version of the tree."""
        folder = bm25_folder(tree_path)
        header = _matching_header(folder, tree_stamp(tree_meta))
        if header is None:
            try:
                header = json.loads((folder / HEADER).read_text("utf-8"))
            except FileNotFoundError:
                raise BM25IndexError(f"{tree_path} has no stored BM25 index; build it with "
                                     f"`decisionrag index {tree_path}`") from None
            except (OSError, ValueError) as exc:
                raise BM25IndexError(f"{folder / HEADER}: not a readable BM25 header ({exc})") from exc
        if not isinstance(header, dict) or header.get("version") != BM25_VERSION:
            found = header.get("version") if isinstance(header, dict) else None
            raise BM25IndexError(f"{folder}: BM25 index format {found}, this decisionrag reads "
                                 f"{BM25_VERSION}; rebuild it with `decisionrag index {tree_path}`")
        if header.get("tree") != tree_stamp(tree_meta):
            raise BM25IndexError(f"{tree_path}: the stored BM25 index was built for another "
                                 f"version of the tree; rebuild it with `decisionrag index "
                                 f"{tree_path}`")
        return cls(folder, header)

    def column(self, term: str) -> int | None:
        """The column of `term`, by binary search over the sorted terms; None if absent.
        Kept per term: a conversation's turns ask for the same terms query after query, and
        each search reads a mapped array 17 times or so."""
        kept = self._column_of
        if term in kept:
            return kept[term]
        if len(kept) >= TERMS_KEPT:
            kept.clear()
        found = kept[term] = self._search(term)
        return found

    def _search(self, term: str) -> int | None:
        wanted = term.encode("utf-8")
        lo, hi = 0, len(self._columns)
        offsets, terms = self._offsets, self._terms
        while lo < hi:
            mid = (lo + hi) // 2
            found = terms[offsets[mid]:offsets[mid + 1]].tobytes()
            if found < wanted:
                lo = mid + 1
            elif found > wanted:
                hi = mid
            else:
                return int(self._columns[mid])
        return None

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every indexed passage (index order) for a query's terms (repeats
        count again, terms not in the index are skipped, as bm25s does)."""
        scores = np.zeros(self.n_docs, dtype=np.float32)
        for term in terms:
            column = self.column(term)
            if column is None:
                continue
            first, end = int(self.indptr[column]), int(self.indptr[column + 1])
            # a common term's column holds most passages (21 MB of entries at NQ size, and as
            # much again in temporaries): read and added a piece at a time. A passage occurs
            # once in a column, so each score gets the same additions in the same order.
            for start in range(first, end, COLUMN_PIECE):
                stop = min(end, start + COLUMN_PIECE)
                scores[self._files["indices"].read(start, stop)] += self._files["data"].read(start, stop)
        return scores

    def close(self) -> None:
        for column in self._files.values():
            column.close()


class _Column:
    """Slices of a 1-d .npy file read with positioned reads (not through a mapping: a query
    term's column can be millions of entries, and mapped pages would stay resident)."""

    def __init__(self, path: Path, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        with open(path, "rb") as stream:
            major, _minor = np.lib.format.read_magic(stream)
            read = (np.lib.format.read_array_header_1_0 if major == 1
                    else np.lib.format.read_array_header_2_0)
            shape, _order, descr = read(stream)
            self.offset = stream.tell()
        if descr != self.dtype or len(shape) != 1:
            raise BM25IndexError(f"{path}: holds {descr} of shape {shape}, expected 1-d {self.dtype}")
        self.length = int(shape[0])
        self._fd = os.open(path, os.O_RDONLY)

    def read(self, start: int, stop: int) -> np.ndarray:
        size = self.dtype.itemsize
        data = os.pread(self._fd, (stop - start) * size, self.offset + start * size)
        return np.frombuffer(data, dtype=self.dtype)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


def stored_bm25_ok(tree: Any) -> bool:
    """Whether the tree has a current BM25 index beside it."""
    try:
        StoredBM25.open(tree.file, tree.meta).close()
    except BM25IndexError:
        return False
    return True

