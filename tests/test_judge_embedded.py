"""The embedded judge on the real bundled all-MiniLM-L6-v2 encoder (offline)."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from conftest import require_module

require_module("sentence_transformers")

from decisionrag._embed import Encoder, load_encoder
from decisionrag._errors import JudgeConfigError, JudgeRequestError
from decisionrag._judges._base import BinaryRequest, Candidate, ChoiceRequest
from decisionrag._judges._calibration import leads, segment_leads
from decisionrag._judges._embedded import EmbeddedJudge
from decisionrag._judges._registry import load_judge

QUERY = "How do I renew my passport when I live abroad?"
BEST = Candidate("best", "Renew your British passport from abroad: apply online to renew a "
                         "passport if you live outside the UK.")
RELATED = Candidate("related", "Passports and travel documents: general information.")
WEAK = (
    Candidate("fish", "Apply for a rod fishing licence for rivers and lakes."),
    Candidate("pothole", "Report a pothole or other problem on a road to the council."),
    Candidate("tax", "Pay your council tax bill online or by direct debit."),
)


class CountingEncoder:
    """The real encoder, counting what it is asked to encode."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return self.inner.encode(texts)

    @property
    def texts(self) -> int:
        return sum(len(batch) for batch in self.batches)


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return load_encoder()


@pytest.fixture
def counting(encoder: Encoder) -> CountingEncoder:
    return CountingEncoder(encoder)


def _binary(candidates: Sequence[Candidate]) -> BinaryRequest:
    questions = tuple(f"Is {c.id} relevant?" for c in candidates)
    return BinaryRequest("rendered context", questions, QUERY, tuple(candidates))


def test_relevant_candidate_gets_highest_p_yes(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    candidates = (*WEAK, BEST, RELATED)
    result = judge.binary_sync(_binary(candidates))
    p = dict(zip((c.id for c in candidates), result.probabilities, strict=True))
    assert all(0.0 <= value <= 1.0 for value in p.values())
    assert max(p, key=p.__getitem__) == "best"
    assert p["best"] > 0.5 > max(p[c.id] for c in WEAK)
    assert result.usage.requests == 1 and result.usage.input_tokens > 0


def test_p_yes_is_formed_in_view_of_the_other_candidates(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    without_best = judge.binary_sync(_binary((*WEAK, RELATED))).probabilities[-1]
    with_best = judge.binary_sync(_binary((*WEAK, RELATED, BEST))).probabilities[-2]
    assert with_best < without_best - 0.05


def test_leads_are_margins_to_the_best_other() -> None:
    assert leads(np.array([0.2, 0.5, 0.4])).tolist() == pytest.approx([-0.3, 0.1, -0.1])
    assert leads(np.array([0.7])).tolist() == [0.0]


@pytest.mark.parametrize("seed", range(8))
def test_segment_leads_are_each_slices_leads_bit_for_bit(seed: int) -> None:
    """The oracle: `leads` slice by slice. Ties (rounded values), slices of one, one slice."""
    rng = np.random.default_rng(seed)
    for trial in range(40):
        sizes = rng.integers(1, 60, size=rng.integers(1, 90))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        values = rng.standard_normal(int(bounds[-1]))
        if trial % 2:
            values = np.round(values, 1)  # many ties, at the top too
        want = np.concatenate([leads(values[a:b]) for a, b in itertools.pairwise(bounds)])
        assert np.array_equal(segment_leads(values, bounds), want), (seed, trial)


def test_choice_is_a_distribution_favouring_the_relevant(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    candidates = (*WEAK, BEST, RELATED)
    request = ChoiceRequest("ctx", "Which passage?", tuple(f"Passage {i}" for i in range(5)),
                            QUERY, candidates)
    result = judge.choice_sync(request)
    assert sum(result.probabilities) == pytest.approx(1.0, abs=1e-9)
    assert result.choice == 3


def test_choice_over_too_many_options_raises(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    candidates = tuple(Candidate(str(i), f"text {i}") for i in range(256))
    request = ChoiceRequest("ctx", "Which?", tuple(c.id for c in candidates), QUERY, candidates)
    with pytest.raises(JudgeRequestError, match="256 options"):
        judge.choice_sync(request)
    assert counting.batches == []


def test_request_without_candidates_is_a_clear_error(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    with pytest.raises(JudgeRequestError, match="candidate texts"):
        judge.binary_sync(BinaryRequest("context", ("Is page 1 relevant?",), QUERY))


def test_memory_cache_avoids_re_encoding(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    first = judge.binary_sync(_binary((*WEAK, BEST)))
    assert counting.texts == 5
    again = judge.binary_sync(_binary((*WEAK, BEST)))
    assert counting.texts == 5 and judge.stats.memory_hits == 5
    assert again.probabilities == first.probabilities
    judge.binary_sync(_binary((*WEAK, BEST, RELATED)))
    assert counting.batches[-1] == [RELATED.text]


def test_there_is_no_disk_cache_of_candidate_vectors(counting: CountingEncoder,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # candidate vectors are stored with the tree now (tests/test_vectors.py); texts embedded
    # for candidates without them stay in memory
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    judge = EmbeddedJudge(counting)
    judge.binary_sync(_binary((*WEAK, BEST)))
    assert list(tmp_path.rglob("*")) == []


async def test_encoding_does_not_block_the_event_loop(counting: CountingEncoder) -> None:
    judge = EmbeddedJudge(counting)
    candidates = tuple(Candidate(str(i), f"{WEAK[i % 3].text} Variant number {i}.")
                       for i in range(64))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await judge.binary(_binary(candidates))
    task.cancel()
    assert ticks >= 5


async def test_small_work_for_a_query_already_encoded_stays_on_the_callers_thread(
        counting: CountingEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request whose query vector is in memory and whose candidates all carry rows (a
    rescoring pass, a passage stage) is judged on the caller's thread: the hand-off to the
    judge's thread and back costs more than the work. The first request (the query to
    encode), one with texts to embed, and one past `INLINE_CANDIDATES` go to the judge's
    thread; the answers are the same either way."""
    import threading

    from decisionrag._judges import _embedded

    judge = EmbeddedJudge(counting)
    stored = tuple(Candidate(c.id, c.text, vectors=counting.encode([c.text]).astype(np.float32))
                   for c in (*WEAK, BEST))
    where: list[threading.Thread] = []
    judged = judge._binary

    def recording(request: BinaryRequest) -> object:
        where.append(threading.current_thread())
        return judged(request)

    monkeypatch.setattr(judge, "_binary", recording)
    here = threading.current_thread()
    first = await judge.binary(_binary(stored))  # the query is encoded: off the loop
    again = await judge.binary(_binary(stored))
    await judge.binary(_binary((*WEAK, BEST)))  # texts to embed
    monkeypatch.setattr(_embedded, "INLINE_CANDIDATES", len(stored) - 1)
    await judge.binary(_binary(stored))
    assert [thread is here for thread in where] == [False, True, False, False]
    assert first.probabilities == again.probabilities


def test_works_under_the_no_network_guard(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="loopback"), socket.create_connection(("10.1.2.3", 80)):
        pass
    judge = load_judge("embedded")
    assert isinstance(judge, EmbeddedJudge) and judge.name == "embedded"
    assert judge.limits.max_options == 255 and judge.limits.max_tokens is None
    assert judge.binary_sync(_binary((*WEAK, BEST))).probabilities[-1] > 0.5


def test_unknown_option_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(JudgeConfigError, match="concurrency"):
        load_judge("embedded", concurrency=8)
