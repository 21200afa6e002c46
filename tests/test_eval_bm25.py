"""BM25 scores against a straightforward computation of the formula (Lucene variant).

score(q, d) = sum over query tokens t (repeats count) of
    idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
with tokens = lowercased words of 2+ characters, English stopwords removed, Snowball-stemmed.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from conftest import require_module

require_module("bm25s")
Stemmer = require_module("Stemmer")

from bm25s.stopwords import STOPWORDS_EN

from decisionrag._retrievers import BM25Retriever, passage_text

CORPUS = {
    "a": "The cat sat on the mat. The cat was happy.",
    "b": "Dogs and cats are friendly pets; a dog barks.",
    "c": "Renewing a passport: apply online and pay the fee.",
    "d": "Passport photos must be recent. Photos are checked.",
    "e": "The weather is sunny and the cats are sleeping in the sun.",
}
K1, B = 1.5, 0.75


def tokens(text: str) -> list[str]:
    stemmer = Stemmer.Stemmer("english")
    words = [w for w in re.findall(r"(?u)\b\w\w+\b", text.lower()) if w not in STOPWORDS_EN]
    return [stemmer.stemWord(w) for w in words]


def reference_scores(query: str) -> dict[str, float]:
    docs = {key: tokens(text) for key, text in CORPUS.items()}
    n = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n
    df = Counter(t for d in docs.values() for t in set(d))
    scores = {}
    for key, doc in docs.items():
        tf = Counter(doc)
        total = 0.0
        for term in tokens(query):
            if tf[term] == 0:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            total += idf * tf[term] / (tf[term] + K1 * (1 - B + B * len(doc) / avgdl))
        scores[key] = total
    return scores


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever(list(CORPUS), list(CORPUS.values()), k1=K1, b=B)


@pytest.mark.parametrize(
    "query",
    [
        "happy cat",
        "cats sleeping in the sun",
        "passport photo fee",
        "dog dog barking",
        "unknownword",
    ],
)
def test_scores_match_the_formula(retriever: BM25Retriever, query: str) -> None:
    expected = reference_scores(query)
    got = dict(zip(retriever.keys, retriever.scores(query).tolist(), strict=True))
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_retrieve_ranks_by_score(retriever: BM25Retriever) -> None:
    expected = reference_scores("passport photo fee")
    ranked = retriever.retrieve("passport photo fee", k=3)
    assert [key for key, _ in ranked] == sorted(expected, key=lambda k: -expected[k])[:3]
    assert ranked[0][1] == pytest.approx(max(expected.values()), rel=1e-5)


def test_stemming_and_stopwords_apply_to_queries(retriever: BM25Retriever) -> None:
    assert retriever.tokenize("The Cats and the sleeping") == ["cat", "sleep"]
    assert retriever.retrieve("the of and", k=2) == [("a", 0.0), ("b", 0.0)]


def test_passage_text_prepends_title_and_headings() -> None:
    assert passage_text("Guide", ("Guide", "Eligibility", "Age"), "Be 18.") == (
        "Guide\nEligibility > Age\nBe 18."
    )
    assert passage_text("", (), "Only text") == "Only text"


def test_a_saved_index_is_reused_and_scores_exactly_as_a_fresh_one(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bm25s
    import numpy as np

    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    keys, texts = list(CORPUS), list(CORPUS.values())
    first = BM25Retriever(keys, texts, k1=K1, b=B, cache=True)
    assert not first.from_cache and len(list((tmp_path / "bm25").iterdir())) == 1

    def no_indexing(*_a: object, **_k: object) -> None:
        raise AssertionError("indexed again although a saved index exists")

    monkeypatch.setattr(bm25s.BM25, "index", no_indexing)
    again = BM25Retriever(keys, texts, k1=K1, b=B, cache=True)
    assert again.from_cache
    for query in ("happy cat", "passport photo fee", "dog dog barking", "unknownword"):
        assert np.array_equal(again.scores(query), first.scores(query))
        assert again.retrieve(query, 3) == first.retrieve(query, 3)
    monkeypatch.undo()
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    changed = BM25Retriever(keys, [*texts[:-1], "A sunny day."], k1=K1, b=B, cache=True)
    assert not changed.from_cache  # one changed passage is another index
    assert changed.scores("sunny")[-1] > 0 and first.scores("sunny")[-1] > 0


def test_an_unreadable_saved_index_is_rebuilt(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    keys, texts = list(CORPUS), list(CORPUS.values())
    BM25Retriever(keys, texts, k1=K1, b=B, cache=True)
    [folder] = list((tmp_path / "bm25").iterdir())
    (folder / "params.index.json").write_text("{half", encoding="utf-8")
    rebuilt = BM25Retriever(keys, texts, k1=K1, b=B, cache=True)
    assert not rebuilt.from_cache
    expected = reference_scores("happy cat")
    got = dict(zip(keys, rebuilt.scores("happy cat").tolist(), strict=True))
    assert got == pytest.approx(expected, rel=1e-5)
    assert BM25Retriever(keys, texts, k1=K1, b=B, cache=True).from_cache  # saved again


def test_a_save_removes_the_staging_folder_a_dead_process_left(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import shutil
    import subprocess
    import sys

    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    keys, texts = list(CORPUS), list(CORPUS.values())
    BM25Retriever(keys, texts, k1=K1, b=B, cache=True)
    [folder] = list((tmp_path / "bm25").iterdir())
    shutil.rmtree(folder)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    stale = folder.parent / f".{folder.name}.{dead}.abc123xy.tmp"
    (stale / "half").mkdir(parents=True)
    alive = folder.parent / f".{folder.name}.{os.getppid()}.abc123xy.tmp"
    alive.mkdir()
    assert not BM25Retriever(keys, texts, k1=K1, b=B, cache=True).from_cache
    assert folder.is_dir() and not stale.exists() and alive.exists()
