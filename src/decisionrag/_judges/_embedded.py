"""``embedded`` — the offline default judge: stored vectors and words turned into decisions.

It needs no key and no network. It embeds only the query (the bundled all-MiniLM-L6-v2,
``decisionrag._embed.load_query_encoder``: numpy, no torch, unless ``encoder=torch``);
candidates come with their vectors stored beside the tree (``Candidate.vectors``, see
``decisionrag._tree._vectors``). A candidate without vectors
(a tree built without them, a request made by hand) has its text embedded instead, cached in
memory only. docs/embedded-judge.md describes the model and how it was fitted.

**Evidence per candidate** (query vector ``q``; rows ``r_0`` = the candidate as a whole, a
page's centroid; ``r_1..`` its parts, a page's passages)::

    own_i      = q · r_0                     (the mean of the parts' when r_0 is zero)
    best_i     = max_j q · r_j  (j >= 1)     (own_i when there are no parts)
    semantic_i = (1 - part_weight) * own_i + part_weight * best_i
    lexical_i  = BM25 of the candidate's text for the query, idf from the corpus's document
                 frequencies (``decisionrag._words.Lexicon``, stored with the vectors),
                 divided by the query's total idf (0..1)
    s_i        = semantic_i + lexical_weight * lexical_i

**Binary (P(yes), formed in view of the other candidates).** A logistic function of ``s_i``
and of its lead over the best of the *other* candidates of the request::

    lead_i   = s_i - max_{j != i} s_j          (0 when the request has one candidate)
    P(yes)_i = sigmoid(bias + w_sim * s_i + w_lead * lead_i)

**Choice.** ``softmax(s_i / temperature)`` over the options; sums to one.

**Cost.** Nothing is sent anywhere: usage reports one request per call and an *estimated*
token count (``Usage.estimated``), and a cost only if a price is set.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import operator
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._embed import share_row_similarities, shared_query_vector
from .._errors import JudgeConfigError, JudgeProtocolError, JudgeRequestError
from .._query import current_shared_work
from .._words import CountedText, Lexicon
from ._base import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    LevelAnswers,
    Limits,
    Reads,
    Usage,
    VectorRows,
    VectorSpace,
    check_binary,
    check_choice,
    estimate_tokens,
)
from ._calibration import DEFAULT_CALIBRATION, Calibration
from ._evidence import Level, RecurringLists, RowsPlan, fill_own_and_best, token_estimates
from ._options import JudgeOptions
from ._text_vectors import (
    ENCODE_CHARS,
    CacheStats,
    DeadlineStep,
    VectorCache,
    check_deadline,
    pieces,
    reports_progress,
    text_digest,
)

DEFAULT_LRU_SIZE = 50_000  # about 75 MB of 384-d float32 vectors
# Part rows read per request at most; beyond it a candidate is read through its own row only
# (a page level of 16,000 pages would otherwise read every passage vector of the corpus).
PART_ROW_BUDGET = 200_000
# What is kept for candidate lists that recur (a page level is the same list every query):
# their stored rows gathered once and their texts' postings, at most this many bytes.
PLAN_BYTES = 32 << 20  # mtrag-cloud-pooled's page level (3,939 pages, 15,853 rows): 25 MB
# Threads the judge computes on. One: its work is CPU-bound under the GIL, so more threads
# only contend, and every extra thread that allocates keeps a glibc malloc arena of its own
# (asyncio.to_thread's pool reached six, tens of MB each at NQ scale; docs/benchmarks.md).
DEFAULT_WORKERS = 1
# Candidates a request (or a level's requests together) may have to be judged on the caller's
# thread when the query's vector is in memory: work under a millisecond (a rescoring pass, a
# passage stage), of which the hand-offs to the judge's thread and back would be a fair share.
INLINE_CANDIDATES = 1_000
class EmbeddedJudge(Judge):
    """Decisions from stored vectors, words and the query's embedding, calibrated in view of
    the request."""

    batches = True  # a level's requests are computed together (`binary_many`)
    computes_here = True

    def __init__(self, encoder: Any, *, lru_size: int = DEFAULT_LRU_SIZE,
                 calibration: Calibration | None = None, name: str = "embedded",
                 workers: int = DEFAULT_WORKERS) -> None:
        self.encoder = encoder
        self.model_name = str(getattr(encoder, "cache_key", None) or getattr(encoder, "name", "encoder"))
        self.name = name
        self.limits = Limits(max_questions=None, max_options=255, max_tokens=None)
        self.calibration = calibration or DEFAULT_CALIBRATION
        # it scores candidates from their texts, stored vectors and the corpus's word
        # statistics, never the rendered context; P(yes) and the choice are monotone in one
        # score (the module docstring)
        self.reads = Reads(context=False, statistics=True, choice_follows_binary=True,
                           vectors=VectorSpace(str(getattr(encoder, "name", self.model_name)),
                                               str(getattr(encoder, "precision", "float32"))))
        self.cache = VectorCache(int(lru_size))
        self.stats = CacheStats()
        self._encode_lock = threading.Lock()
        self.workers = max(1, int(workers))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self.plans = RecurringLists(PLAN_BYTES)
        self._levels_key = ("levels read", id(self))  # a walk's levels (`_remember_level`)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of `texts` (rows, L2-normalised), encoding only those not cached."""
        digests = [text_digest(self.model_name, t) for t in texts]
        vectors: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        for digest, text in zip(digests, texts, strict=True):
            if digest in vectors or digest in missing:
                continue
            vector = self.cache.get(digest)
            if vector is None:
                missing[digest] = text
                continue
            vectors[digest] = vector
            self.stats.memory_hits += 1
        if missing:
            vectors.update(self._encode(missing))
        if not texts:
            return np.zeros((0, int(self.encoder.dim)), dtype=np.float32)
        return np.stack([vectors[d] for d in digests])

    def _encode(self, missing: dict[str, str]) -> dict[str, np.ndarray]:
        """Vectors of `missing` (digest: text). Looked up again under the lock: requests of
        one level run together and all miss the same query, which is encoded once. Encoded
        `ENCODE_CHARS` at a time, the query's deadline checked between pieces: a level of
        thousands of unstored candidates stops soon after the deadline instead of running
        on (and holding the process open) after the query has failed."""
        with self._encode_lock:
            found = {d: v for d in missing if (v := self.cache.get(d)) is not None}
            todo = list((d, t) for d, t in missing.items() if d not in found)
            reports = reports_progress(self.encoder)
            for part in [todo] if reports else pieces(todo, ENCODE_CHARS):
                check_deadline(self.name)
                texts = [t for _, t in part]
                encoded = np.asarray(self.encoder.encode(texts, progress=DeadlineStep(self.name))
                                     if reports else self.encoder.encode(texts), dtype=np.float32)
                self.stats.encoder_calls += 1
                self.stats.encoded += len(part)
                for (digest, _), vector in zip(part, encoded, strict=True):
                    self.cache.put(digest, vector)
                    found[digest] = vector
        return found

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector: once per walk (shared with the walk's hybrid retriever when it
        uses the same encoder), through the in-memory cache."""
        return shared_query_vector(self.encoder, query, current_shared_work(),
                                   lambda: self.embed([query])[0])

    def evidence(self, query: str, candidates: Sequence[Candidate],
                 lexicon: Lexicon | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(own, best, lexical) per candidate; see the module docstring."""
        q = self.query_vector(query)
        own = np.zeros(len(candidates))
        best = np.zeros(len(candidates))
        texts = [i for i, c in enumerate(candidates) if c.vectors is None]
        if texts:
            encoded = self.embed([candidates[i].text for i in texts]) @ q
            own[texts] = best[texts] = encoded
        with_parts = sum(len(c.vectors) - 1 for c in candidates if c.vectors is not None)
        read_parts = with_parts <= PART_ROW_BUDGET
        rows_of = [c.vectors for c in candidates]
        if not (read_parts and not texts and self._read_in_this_walk(query, rows_of, own, best)):
            self._fill_own_and_best(own, best, rows_of, q, read_parts)
        return own, best, self._lexical(query, [c.text for c in candidates], lexicon,
                                        stored=list(map(_COUNTED, candidates)))

    def _read_in_this_walk(self, query: str, rows_of: list[Any], own: np.ndarray,
                           best: np.ndarray) -> bool:
        """Fill `own` and `best` from a level this walk already scored for `query`, when
        every candidate's rows are among that level's (the rescoring pass re-asks about
        the page level's best pages): the same products of the same rows, so the same
        floats. False, nothing filled, otherwise."""
        work = current_shared_work()
        for asked, level, level_own, level_best in reversed(work.memo(self._levels_key, list)
                                                            if work is not None else []):
            positions = level.find(rows_of) if asked == query else None
            if positions is not None:
                own[:], best[:] = level_own[positions], level_best[positions]
                return True
        return False

    def _remember_level(self, query: str, level: Level, own: np.ndarray, best: np.ndarray) -> None:
        """Keep a level's vector evidence (every part read) for the rest of this walk."""
        work = current_shared_work()
        if work is not None:
            work.memo(self._levels_key, list).append((query, level, own, best))

    def _lexical(self, query: str, texts: list[str], lexicon: Lexicon | None,
                 level: Level | None = None, stored: Sequence[CountedText | None] = ()
                 ) -> np.ndarray:
        """Lexical evidence of `texts`; for a `level` (its candidates' texts), its postings
        are kept under the level's key. `stored`: where the texts' counts are stored (one
        per text), read instead of counting texts met for the first time."""
        if lexicon is None or not self.calibration.lexical_weight:
            return np.zeros(len(texts))
        key, kept = ((("words", id(lexicon), level.listed), (lexicon, level)) if level is not None
                     else (self.plans.key(("words", id(lexicon)), texts), (lexicon, texts)))
        index = self.plans.get(key, kept, lambda: lexicon.index(texts))
        return lexicon.score_array(query, texts, index, stored)

    def _fill_own_and_best(self, own: np.ndarray, best: np.ndarray,
                           rows_of: list[VectorRows | np.ndarray | None], q: np.ndarray,
                           read_parts: bool, level: Level | None = None) -> None:
        """`_fill_own_and_best`, its stored rows gathered once for a list that recurs (a
        `level`'s: kept under the level's key)."""
        key, kept = ((("rows", read_parts, level.listed), level) if level is not None
                     else (self.plans.key(("rows", read_parts), rows_of), rows_of))
        plan = self.plans.get(key, kept, lambda: RowsPlan.of(rows_of, read_parts))
        if plan is None:  # seen once, or rows that are not all stored
            fill_own_and_best(own, best, rows_of, q, read_parts)
            return
        found = plan.fill(own, best, q)
        if found is not None:  # for the walk's dense retriever: the same rows, the same query
            share_row_similarities(current_shared_work(), found)

    def scores(self, query: str, candidates: Sequence[Candidate],
               lexicon: Lexicon | None = None) -> np.ndarray:
        return self.calibration.fuse(*self.evidence(query, candidates, lexicon))

    def similarities(self, query: str, candidates: Sequence[Candidate]) -> np.ndarray:
        """Cosine similarity of the query and each candidate as a whole."""
        return self.evidence(query, candidates)[0]

    def _query(self, request: BinaryRequest | ChoiceRequest, expected: int) -> str:
        if len(request.candidates) != expected:
            raise JudgeRequestError(
                f"{self.name}: the request carries no candidate texts; the embedded judge "
                "needs request.candidates (it does not parse the rendered context)"
            )
        return searched_text(request)

    def _usage(self, query: str, candidates: Sequence[Candidate], start: float) -> Usage:
        [tokens] = self._tokens_many(query, list(candidates), np.array([0, len(candidates)]))
        return self._estimated_usage(tokens, time.perf_counter() - start)

    def _estimated_usage(self, tokens: int, seconds: float) -> Usage:
        return Usage(requests=1, input_tokens=tokens, seconds=seconds, cost_usd=self.cost(tokens),
                     estimated=True)

    def _binary(self, request: BinaryRequest) -> BinaryResult:
        start = time.perf_counter()
        query = self._query(request, len(request.questions))
        scores = self.scores(query, request.candidates, _lexicon(request))
        p_yes = self.calibration.p_yes(scores)
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
        scores = self.scores(query, request.candidates, _lexicon(request))
        probabilities = self.calibration.choice(scores)
        return ChoiceResult(check_choice(probabilities.tolist(), len(request.options), self.name),
                            self._usage(query, request.candidates, start))

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        if not request.questions:
            return BinaryResult([], Usage())
        return await self._on_worker(self._binary, request)

    async def binary_many(self, requests: Sequence[BinaryRequest]
                          ) -> list[BinaryResult | BaseException]:
        """Every request's `binary`, computed in one go on the judge's thread: each candidate's
        evidence (own, best part, lexical) does not depend on the request it is in, so a
        level's candidates are read and scored together (one gather and product per block
        length, one lexical pass), then each request's P(yes) is formed from its own slice.
        The same values as one `binary` per request, bit for bit."""
        return list(await self._on_worker(self._binary_many, list(requests)))

    async def binary_level(self, requests: Sequence[BinaryRequest]
                           ) -> LevelAnswers | list[BinaryResult | BaseException]:
        """`binary_many` as one array (what a walk reads a level by) where every request
        holds questions of one query over stored rows: the level's P(yes) as computed, with
        one usage for all; otherwise `binary_many`'s results, request by request."""
        return await self._on_worker(self._binary_level, list(requests))

    def _binary_level(self, requests: list[BinaryRequest]
                      ) -> LevelAnswers | list[BinaryResult | BaseException]:
        start = time.perf_counter()
        found = self._level_at_once(requests) if requests else None
        if found is None:
            return self._binary_many(requests)
        level, bounds, p_yes, query = found
        estimates = self._tokens_many(query, level.candidates, bounds, level)
        costs = [self.cost(tokens) for tokens in estimates]  # summed as each request's usage adds
        cost = None if all(c is None for c in costs) else sum(c or 0.0 for c in costs)
        usage = Usage(requests=len(requests), input_tokens=sum(estimates),
                      seconds=time.perf_counter() - start, cost_usd=cost, estimated=True)
        return LevelAnswers(p_yes, bounds, usage)

    def _level_at_once(self, requests: list[BinaryRequest]
                       ) -> tuple[Level, np.ndarray, np.ndarray, str] | None:
        """A level whose requests all ask about one query with the same statistics over
        stored rows, and whose answers all check: (level, bounds, P(yes), query); None for
        anything else (`binary_many` then answers request by request)."""
        first = requests[0]
        if not all(r.questions and r.statistics is first.statistics for r in requests):
            return None
        try:
            queries = {self._query(r, len(r.questions)) for r in requests}
        except JudgeRequestError:  # a request `binary_many` reports on its own
            return None
        if len(queries) != 1:
            return None
        level = self._level([r.candidates for r in requests])
        if level.starts is None:  # texts to embed among the candidates
            return None
        query = queries.pop()
        bounds = np.cumsum([0, *(len(r.candidates) for r in requests)])
        p_yes = self.calibration.p_yes_many(self._scores_of_many(query, requests, level, bounds),
                                            bounds)
        if not bool(((p_yes >= 0.0) & (p_yes <= 1.0)).all()):  # NaN fails both
            return None
        return level, bounds, p_yes, query

    def _binary_many(self, requests: list[BinaryRequest]) -> list[BinaryResult | BaseException]:
        start = time.perf_counter()
        results: list[BinaryResult | BaseException | None] = [None] * len(requests)
        together: dict[tuple[str, int], list[int]] = {}
        for index, request in enumerate(requests):
            try:
                if not request.questions:
                    results[index] = BinaryResult([], Usage())
                else:
                    query = self._query(request, len(request.questions))
                    together.setdefault((query, id(request.statistics)), []).append(index)
            except Exception as exc:  # reported per request, as gather would report it
                results[index] = exc
        for (query, _), asked in together.items():
            members = asked
            try:
                members, level = self._stored_level(requests, asked, results)
                if not members:
                    continue
                group = [requests[i] for i in members]
                candidates = level.candidates
                bounds = np.cumsum([0] + [len(request.candidates) for request in group])
                scores = self._scores_of_many(query, group, level, bounds)
                p_yes = self.calibration.p_yes_many(scores, bounds)
                answers = _checked_slices(p_yes, bounds, [len(r.questions) for r in group],
                                          self.name)
            except Exception as exc:
                for i in members:
                    if results[i] is None:
                        results[i] = exc
                continue
            share = (time.perf_counter() - start) / len(members)
            estimates = self._tokens_many(query, candidates, bounds, level)
            for i, answer, tokens in zip(members, answers, estimates, strict=True):
                results[i] = answer if isinstance(answer, BaseException) else BinaryResult(
                    answer, self._estimated_usage(tokens, share))
        return [r if r is not None else JudgeRequestError(f"{self.name}: not computed")
                for r in results]

    def _scores_of_many(self, query: str, requests: list[BinaryRequest], level: Level,
                        bounds: np.ndarray) -> np.ndarray:
        """`scores(query, request.candidates, ...)` of every request (all with stored vectors
        and the same statistics), computed over their candidates together (`level`; request
        r's are `bounds[r]:bounds[r + 1]`)."""
        q = self.query_vector(query)
        own, best = np.zeros(len(level.texts)), np.zeros(len(level.texts))
        parts = np.diff(np.concatenate([[0], np.cumsum(level.row_counts - 1)])[bounds])
        read_parts = parts <= PART_ROW_BUDGET  # per request, as `evidence` decides
        if read_parts.all():
            self._fill_own_and_best(own, best, level.rows_of, q, True, level)
            self._remember_level(query, level, own, best)  # neither is written to again
        else:
            owner = np.repeat(read_parts, np.diff(bounds)).tolist()
            for reading in (True, False):
                rows = [r if owner[i] is reading else None for i, r in enumerate(level.rows_of)]
                if any(row is not None for row in rows):
                    self._fill_own_and_best(own, best, rows, q, reading)
        lexical = self._lexical(query, level.texts, _lexicon(requests[0]), level, level.counted)
        return self.calibration.fuse(own, best, lexical)

    def _stored_level(self, requests: list[BinaryRequest], members: list[int],
                      results: list[BinaryResult | BaseException | None]
                      ) -> tuple[list[int], Level]:
        """The `members` whose candidates all have vectors, and their `_level`; the others
        (texts to embed) are judged one by one here, into `results`."""
        level = self._level([requests[i].candidates for i in members])
        if level.starts is not None:  # every candidate's rows stored: no texts among them
            return members, level
        alone = [i for i in members if any(map(_IS_NONE, map(_VECTORS, requests[i].candidates)))]
        if not alone:
            return members, level
        for i in alone:
            results[i] = self._binary_alone(requests[i])
        judged = set(alone)
        members = [i for i in members if i not in judged]
        return members, self._level([requests[i].candidates for i in members])

    def _binary_alone(self, request: BinaryRequest) -> BinaryResult | BaseException:
        """`_binary(request)`, or the error it ended in (texts to embed: one by one)."""
        try:
            return self._binary(request)
        except Exception as exc:  # reported per request, as gather would report it
            return exc

    def _level(self, parts: list[tuple[Candidate, ...]]) -> Level:
        """What a level's candidates (its requests' `parts`, in turn) are read through
        (query-independent): kept for a level that recurs, with the plans made under its
        key (one key for all of them). Keyed by the requests' candidate tuples, which a
        recurring level's requests share query after query (the walk keeps them packed):
        81 ids for a 3,939-page level, not 3,939."""
        listed = self.plans.key(("parts",), parts)[-1]

        def make() -> Level:
            return Level.of([c for part in parts for c in part], listed)

        kept = self.plans.get(("level", listed), parts, make)
        return kept if kept is not None else make()

    def _tokens_many(self, query: str, candidates: list[Candidate], bounds: np.ndarray,
                     level: Level | None = None) -> list[int]:
        """The token estimate of each request (candidates `bounds[r]:bounds[r + 1]`): the
        query's and each candidate text's `estimate_tokens`, summed."""
        tokens = level.tokens if level is not None else token_estimates(list(map(_TEXT, candidates)))
        summed = np.concatenate([[0], np.cumsum(tokens)])[bounds]
        return (estimate_tokens(query) + np.diff(summed)).tolist()

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        return await self._on_worker(self._choice, request)

    async def _on_worker(self, work: Callable[[Any], Any], request: Any) -> Any:
        """`work(request)` on the judge's own threads (`workers`), off the event loop, in a
        copy of the caller's context (its query deadline); on the caller's thread when it
        is small (`_is_small`): the hand-off there and back would cost more than the work."""
        if self._is_small(request):
            return work(request)
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self._executor(), context.run, work, request)

    def _is_small(self, request: Any) -> bool:
        """Whether `request` (one, or a level's list) is judged in well under a millisecond:
        at most `INLINE_CANDIDATES` candidates, all with stored vectors, for a query whose
        vector is already in memory (nothing to encode)."""
        requests = request if isinstance(request, list) else [request]
        if not requests or sum(len(r.candidates) for r in requests) > INLINE_CANDIDATES:
            return False  # (counted first: a page level's 16,000 candidates are not listed)
        if any(map(_IS_NONE, map(_VECTORS, (c for r in requests for c in r.candidates)))):
            return False
        queries = {searched_text(r) for r in requests}
        return all(self.cache.get(text_digest(self.model_name, q)) is not None for q in queries)

    def _executor(self) -> ThreadPoolExecutor:
        """The judge's thread pool, made on first use (again in a forked child)."""
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=self.name)
                self._pool_pid = os.getpid()
            return self._pool


_TEXT = operator.attrgetter("text")
_VECTORS = operator.attrgetter("vectors")
_COUNTED = operator.attrgetter("counted")
_IS_NONE = functools.partial(operator.is_, None)


def _checked_slices(p_yes: np.ndarray, bounds: np.ndarray, expected: list[int], who: str
                    ) -> list[list[float] | BaseException]:
    """`p_yes` cut at `bounds` into each request's answers (`expected[r]` of them), checked
    as `check_binary` checks them (all at once; one by one only where some slice is bad,
    that request's error)."""
    values = p_yes.tolist()
    slices = list(itertools.pairwise(bounds.tolist()))
    if (np.diff(bounds).tolist() == expected and np.isfinite(p_yes).all()
            and (p_yes >= 0.0).all() and (p_yes <= 1.0).all()):
        return [values[a:b] for a, b in slices]
    checked: list[list[float] | BaseException] = []
    for (a, b), count in zip(slices, expected, strict=True):
        try:
            checked.append(check_binary(values[a:b], count, who))
        except JudgeProtocolError as exc:
            checked.append(exc)
    return checked


def searched_text(request: BinaryRequest | ChoiceRequest) -> str:
    """What the judge embeds and matches words against: the request's search text (the
    situation + question, or a conversation's current turn), else its rendered query."""
    return request.search or request.query or request.context


def _lexicon(request: BinaryRequest | ChoiceRequest) -> Lexicon | None:
    statistics = request.statistics
    return statistics if isinstance(statistics, Lexicon) else None


@dataclass(frozen=True)
class EmbeddedOptions(JudgeOptions):
    """The ``embedded`` judge's options. `encoder` picks the query encoder: "auto" (numpy
    for the bundled model on the CPU, no torch in the process), "numpy" or "torch"
    (sentence-transformers; any model, bfloat16, GPUs). `precision` is the encoder's
    ("auto", "float32" or "bfloat16"; asking for bfloat16 means torch). `workers` is the
    number of threads requests are computed on (default 1, see DEFAULT_WORKERS)."""

    lru_size: int = DEFAULT_LRU_SIZE
    device: str = "cpu"
    precision: str | None = None
    encoder: str = "auto"
    workers: int = DEFAULT_WORKERS
    calibration: Calibration | None = None
    price_per_million_input: float | None = None


def embedded_judge(model: str = "", **options: Any) -> EmbeddedJudge:
    """The ``embedded`` judge; ``model`` (after the colon) may name another
    sentence-transformers model or folder (the calibration was fitted for the default).
    Trees must store vectors of the same model (and, for a bfloat16 encoder, precision).
    The encoder is warmed up here, so the first walk does not pay its first call."""
    from .._embed import QUERY_ENCODERS, load_query_encoder
    from .._errors import InputError

    given = EmbeddedOptions.parse(options, "embedded judge")
    if given.encoder.lower() not in QUERY_ENCODERS:
        raise JudgeConfigError(f"embedded judge: option encoder={given.encoder!r}; known "
                               f"encoders: {', '.join(QUERY_ENCODERS)}")
    if given.workers < 1:
        raise JudgeConfigError(f"embedded judge: option workers={given.workers}; at least 1")
    try:
        encoder = load_query_encoder(model or None, device=given.device,
                                     precision=given.precision, encoder=given.encoder)
    except InputError as exc:
        raise JudgeConfigError(f"embedded judge: {exc}") from exc
    encoder.encode(["warm-up"])  # the first call is slow (allocations, kernels): pay it here
    judge = EmbeddedJudge(encoder, lru_size=given.lru_size, calibration=given.calibration,
                          workers=given.workers)
    if given.price_per_million_input is not None:
        judge.price_per_million_input = given.price_per_million_input
    return judge
