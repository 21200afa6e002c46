"""``embedded`` — the offline default judge: sentence embeddings turned into decisions.

It needs no key and no network: it embeds the query and each candidate's text with the
bundled all-MiniLM-L6-v2 (``decisionrag._embed.load_encoder``) and works on the cosine
similarities ``s_i`` between the query and the candidates of one request. It reads
``request.query`` and ``Candidate.text`` (not the rendered context); the model truncates
every text at 256 word pieces, so only the start of a long candidate counts.

**Binary (P(yes), formed in view of the other candidates).** A logistic function of the
absolute similarity and of the candidate's lead over the best of the *other* candidates in
the same request::

    lead_i  = s_i - max_{j != i} s_j          (0 when the request has one candidate)
    P(yes)_i = sigmoid(bias + w_sim * s_i + w_lead * lead_i)

The best candidate's lead is positive (its margin over the runner-up), every other
candidate's is negative (its gap to the best), so a candidate receives a lower P(yes) when
a clearly better one is in the same request, as a decision model's shared context does.

**Choice.** ``softmax(s_i / temperature)`` over the options; sums to one.

**Constants.** Fitted offline by ``benchmarks/embedded_calibration.py`` by maximum
likelihood on requests built from ``xquad-en`` (document stage: all 48 article titles;
passage stage: the paragraphs of the 3 most similar articles; the gold paragraph is
"yes"); that dataset is therefore *not* held out for this judge. The script reports
calibration on ``conditionalqa-dev`` as the held-out check; see docs/embedded-judge.md.

**Caching.** Embeddings are cached in-process (LRU keyed by a digest of model + text)
and, optionally, on disk as raw float32 files named by that digest under
``cache_dir`` (default ``$XDG_CACHE_HOME/decisionrag/embeddings/<model>`` or
``~/.cache/…``; ``cache_dir=""`` turns it off), each written to a temporary file and
renamed, so re-running queries over the same tree encodes only what is new.
Encoding runs in a worker thread so that the event loop is never blocked.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import JudgeConfigError, JudgeRequestError
from .._files import atomic_write, cache_root
from ._base import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    Usage,
    check_binary,
    check_choice,
    estimate_tokens,
)

DEFAULT_LRU_SIZE = 50_000  # about 75 MB of 384-d float32 vectors


@dataclass(frozen=True, slots=True)
class Calibration:
    """Constants turning similarities into P(yes) and a choice distribution."""

    bias: float
    similarity: float
    lead: float
    temperature: float

    def p_yes(self, similarities: np.ndarray) -> np.ndarray:
        logits = self.bias + self.similarity * similarities + self.lead * leads(similarities)
        return np.asarray(1.0 / (1.0 + np.exp(-logits)), dtype=np.float64)

    def choice(self, similarities: np.ndarray) -> np.ndarray:
        scaled = similarities.astype(np.float64) / self.temperature
        weights = np.exp(scaled - scaled.max())
        return np.asarray(weights / weights.sum(), dtype=np.float64)


# fitted on xquad-en by benchmarks/embedded_calibration.py (see docs/embedded-judge.md)
DEFAULT_CALIBRATION = Calibration(bias=-2.8023, similarity=4.4068, lead=14.6487,
                                  temperature=0.0362)


def leads(similarities: np.ndarray) -> np.ndarray:
    """Each value minus the largest *other* value (0 for a single value)."""
    s = np.asarray(similarities, dtype=np.float64)
    if s.size < 2:
        return np.zeros_like(s)
    order = np.argsort(s)
    best, second = s[order[-1]], s[order[-2]]
    others_best = np.full_like(s, best)
    others_best[order[-1]] = second
    return np.asarray(s - others_best, dtype=np.float64)


def text_digest(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def default_cache_dir(model: str) -> Path:
    return cache_root() / "embeddings" / model.replace("/", "--")


@dataclass(slots=True)
class CacheStats:
    """What the embedding cache did: texts encoded, hits in memory and on disk."""

    encoder_calls: int = 0
    encoded: int = 0
    memory_hits: int = 0
    disk_hits: int = 0


class VectorCache:
    """An in-process LRU of vectors by digest, backed by an optional folder of files."""

    def __init__(self, dim: int, size: int, folder: Path | None) -> None:
        self.dim, self.size, self.folder = dim, size, folder
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> tuple[np.ndarray | None, str]:
        """The vector and where it came from ("memory", "disk"), or (None, "")."""
        with self._lock:
            vector = self._memory.get(digest)
            if vector is not None:
                self._memory.move_to_end(digest)
                return vector, "memory"
        vector = self._read(digest)
        if vector is not None:
            self._remember(digest, vector)
            return vector, "disk"
        return None, ""

    def put(self, digest: str, vector: np.ndarray) -> None:
        self._remember(digest, vector)
        self._write(digest, vector)

    def _remember(self, digest: str, vector: np.ndarray) -> None:
        with self._lock:
            self._memory[digest] = vector
            self._memory.move_to_end(digest)
            while len(self._memory) > self.size:
                self._memory.popitem(last=False)

    def _path(self, digest: str) -> Path:
        assert self.folder is not None
        return self.folder / digest[:2] / f"{digest}.f32"

    def _read(self, digest: str) -> np.ndarray | None:
        if self.folder is None:
            return None
        try:
            data = self._path(digest).read_bytes()
        except OSError:
            return None
        if len(data) != self.dim * 4:  # truncated or from another model: a miss
            return None
        return np.frombuffer(data, dtype=np.float32).copy()

    def _write(self, digest: str, vector: np.ndarray) -> None:
        if self.folder is None:
            return
        path = self._path(digest)
        try:
            atomic_write(path, np.asarray(vector, dtype=np.float32).tobytes())
        except OSError as exc:
            warnings.warn(f"embedding cache {self.folder} is not writable ({exc}); "
                          "continuing without it", RuntimeWarning, stacklevel=2)
            self.folder = None


class EmbeddedJudge(Judge):
    """Decisions from sentence-embedding similarities, calibrated in view of the request."""

    def __init__(self, encoder: Any, *, cache_dir: str | Path | None = None,
                 lru_size: int = DEFAULT_LRU_SIZE, calibration: Calibration | None = None,
                 name: str = "embedded") -> None:
        self.encoder = encoder
        self.model_name = str(getattr(encoder, "cache_key", None) or getattr(encoder, "name", "encoder"))
        self.name = name
        self.limits = Limits(max_questions=None, max_options=255, max_tokens=None)
        self.calibration = calibration or DEFAULT_CALIBRATION
        folder = default_cache_dir(self.model_name) if cache_dir is None else cache_dir
        self.cache = VectorCache(int(encoder.dim), int(lru_size), Path(folder) if folder else None)
        self.stats = CacheStats()
        self._encode_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of `texts` (rows, L2-normalised), encoding only those not cached."""
        digests = [text_digest(self.model_name, t) for t in texts]
        vectors: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        for digest, text in zip(digests, texts, strict=True):
            if digest in vectors or digest in missing:
                continue
            vector, source = self.cache.get(digest)
            if vector is None:
                missing[digest] = text
                continue
            vectors[digest] = vector
            self._count_hit(source)
        if missing:
            vectors.update(self._encode(missing))
        if not texts:
            return np.zeros((0, int(self.encoder.dim)), dtype=np.float32)
        return np.stack([vectors[d] for d in digests])

    def _count_hit(self, source: str) -> None:
        if source == "memory":
            self.stats.memory_hits += 1
        else:
            self.stats.disk_hits += 1

    def _encode(self, missing: dict[str, str]) -> dict[str, np.ndarray]:
        with self._encode_lock:
            encoded = np.asarray(self.encoder.encode(list(missing.values())), dtype=np.float32)
            self.stats.encoder_calls += 1
            self.stats.encoded += len(missing)
        fresh = dict(zip(missing, encoded, strict=True))
        for digest, vector in fresh.items():
            self.cache.put(digest, vector)
        return fresh

    def similarities(self, query: str, candidates: Sequence[Candidate]) -> np.ndarray:
        vectors = self.embed([query, *(c.text for c in candidates)])
        return np.asarray(vectors[1:] @ vectors[0], dtype=np.float64)

    def _query(self, request: BinaryRequest | ChoiceRequest, expected: int) -> str:
        if len(request.candidates) != expected:
            raise JudgeRequestError(
                f"{self.name}: the request carries no candidate texts; the embedded judge "
                "needs request.candidates (it does not parse the rendered context)"
            )
        return request.query or request.context

    def _usage(self, query: str, candidates: Sequence[Candidate], start: float) -> Usage:
        tokens = estimate_tokens(query) + sum(estimate_tokens(c.text) for c in candidates)
        return Usage(requests=1, input_tokens=tokens, seconds=time.perf_counter() - start,
                     cost_usd=self.cost(tokens))

    def _binary(self, request: BinaryRequest) -> BinaryResult:
        start = time.perf_counter()
        query = self._query(request, len(request.questions))
        p_yes = self.calibration.p_yes(self.similarities(query, request.candidates))
        return BinaryResult(check_binary(p_yes.tolist(), len(request.questions), self.name),
                            self._usage(query, request.candidates, start))

    def _choice(self, request: ChoiceRequest) -> ChoiceResult:
        start = time.perf_counter()
        if len(request.options) > self.limits.max_options:
            raise JudgeRequestError(f"{self.name}: {len(request.options)} options, "
                                    f"at most {self.limits.max_options}")
        if not request.options:
            raise JudgeRequestError(f"{self.name}: a choice needs at least one option")
        query = self._query(request, len(request.options))
        probabilities = self.calibration.choice(self.similarities(query, request.candidates))
        return ChoiceResult(check_choice(probabilities.tolist(), len(request.options), self.name),
                            self._usage(query, request.candidates, start))

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        if not request.questions:
            return BinaryResult([], Usage())
        return await asyncio.to_thread(self._binary, request)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        return await asyncio.to_thread(self._choice, request)


def embedded_judge(model: str = "", *, cache_dir: str | Path | None = None,
                   lru_size: int | str = DEFAULT_LRU_SIZE, device: str = "cpu",
                   precision: str | None = None, calibration: Calibration | None = None,
                   price_per_million_input: float | str | None = None,
                   **options: Any) -> EmbeddedJudge:
    """The ``embedded`` judge; ``model`` (after the colon) may name another
    sentence-transformers model or folder (the calibration was fitted for the default);
    ``precision`` is the encoder's ("auto", "float32" or "bfloat16")."""
    from .._embed import load_encoder

    if options:
        raise JudgeConfigError(f"embedded judge: unknown options {sorted(options)}")
    encoder = load_encoder(model or None, device=device, precision=precision)
    judge = EmbeddedJudge(encoder, cache_dir=cache_dir, lru_size=int(lru_size),
                          calibration=calibration)
    if price_per_million_input is not None:
        judge.price_per_million_input = float(price_per_million_input)
    return judge
