"""Flat retrievers, BM25 and dense (exact inner-product search): evaluation baselines and the
sources of hybrid candidates for navigation.

Both implement ``retrieve(query_text, k) -> [(passage key, score), ...]``, the `Retriever`
protocol (`decisionrag._navigate._retriever`) that navigation uses for hybrid candidates.
Passages are indexed with their document title and heading path prepended, so a flat
retriever sees what navigation sees along the path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import missing_extra
from ._tree import Tree


def passage_text(title: str, heading: Sequence[str], text: str) -> str:
    """What a flat retriever indexes: title, heading path (without a repeated title), text."""
    path = [h for h in heading if h and h != title]
    parts = [title.strip(), " > ".join(path), text]
    return "\n".join(p for p in parts if p)


def tree_passages(tree: Tree) -> tuple[list[str], list[str]]:
    """Keys and indexable texts of every passage of a tree, in reading order."""
    titles = {doc.id: doc.title for doc in tree.documents()}
    keys: list[str] = []
    texts: list[str] = []
    for node in tree.iter_passages():
        keys.append(node.key)
        texts.append(passage_text(titles.get(node.doc or -1, ""), node.heading, node.text))
    return keys, texts


def top_k(scores: np.ndarray, keys: Sequence[str], k: int) -> list[tuple[str, float]]:
    """The k best (key, score) pairs, ties broken by corpus order (also at the cut-off)."""
    k = min(k, scores.size)
    if k <= 0:
        return []
    negated = -scores
    kth = np.partition(negated, k - 1)[k - 1]
    better = np.flatnonzero(negated < kth)
    tied = np.flatnonzero(negated == kth)[: k - better.size]
    candidates = np.concatenate([better, tied])
    order = candidates[np.lexsort((candidates, negated[candidates]))]
    return [(keys[i], float(scores[i])) for i in order]


# -- BM25 ----------------------------------------------------------------------------------


class BM25Retriever:
    """bm25s (Lucene variant, k1=1.5, b=0.75), English Snowball stemming and stopwords."""

    name = "bm25"

    def __init__(
        self, keys: Sequence[str], texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75
    ) -> None:
        bm25s, self._stemmer = _bm25_modules()
        self.keys = list(keys)
        self._bm25s = bm25s
        self.model = bm25s.BM25(k1=k1, b=b, method="lucene")
        tokens = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False
        )
        self.model.index(tokens, show_progress=False)

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> BM25Retriever:
        keys, texts = tree_passages(tree)
        return cls(keys, texts, **options)

    def tokenize(self, text: str) -> list[str]:
        tokens = self._bm25s.tokenize(
            [text], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )
        return list(tokens[0])

    def scores(self, query_text: str) -> np.ndarray:
        """BM25 score of every passage, in corpus order."""
        tokens = [t for t in self.tokenize(query_text) if t in self.model.vocab_dict]
        if not tokens:
            return np.zeros(len(self.keys), dtype=np.float32)
        return np.asarray(self.model.get_scores(tokens), dtype=np.float32)

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return top_k(self.scores(query_text), self.keys, k)


def _bm25_modules() -> tuple[Any, Any]:
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise missing_extra(getattr(exc, "name", None) or "bm25s", "eval") from exc
    return bm25s, Stemmer.Stemmer("english")


# -- dense ---------------------------------------------------------------------------------


class DenseRetriever:
    """Exact inner-product search over L2-normalised sentence embeddings (cached on disk)."""

    name = "dense"

    def __init__(
        self,
        keys: Sequence[str],
        texts: Sequence[str],
        *,
        model: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> None:
        from ._embed import load_encoder

        self.keys = list(keys)
        self.encoder = load_encoder(model)
        self.vectors = self._cached_vectors(texts, cache_dir, progress)

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> DenseRetriever:
        keys, texts = tree_passages(tree)
        return cls(keys, texts, **options)

    def _cached_vectors(
        self, texts: Sequence[str], cache_dir: str | os.PathLike[str] | None, progress: bool
    ) -> np.ndarray:
        from ._embed import cached_embeddings

        return cached_embeddings(
            self.encoder.cache_key, texts,
            lambda: self.encoder.encode(list(texts), progress=progress),
            folder=cache_dir, dim=self.encoder.dim)

    def scores(self, query_text: str) -> np.ndarray:
        query = self.encoder.encode([query_text])[0]
        return self.vectors @ query

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return top_k(self.scores(query_text), self.keys, k)
