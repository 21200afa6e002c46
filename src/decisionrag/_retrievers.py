"""Flat retrievers, BM25 and dense (exact inner-product search): evaluation baselines and the
sources of hybrid candidates for navigation.

Both implement ``retrieve(query_text, k) -> [(passage key, score), ...]``, the `Retriever`
protocol (`decisionrag._navigate._retriever`) that navigation uses for hybrid candidates.
Passages are indexed with their document title and heading path prepended, so a flat
retriever sees what navigation sees along the path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import missing_extra
from ._files import cache_root, content_key, temporary_folder_beside
from ._tree import Tree
from ._tree._vectors import passage_text

IN_MEMORY_BYTES = 512 << 20  # stored passage vectors up to this size are held as float32


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


BM25_INDEX_FORMAT = "bm25s-lucene-1"


class BM25Retriever:
    """bm25s (Lucene variant, k1=1.5, b=0.75), English Snowball stemming and stopwords.

    With `cache` (what `from_tree` does) the index is saved under
    ``cache_root()/bm25/<digest of the passages' keys and texts and the parameters>`` and
    later loaded memory-mapped: tokenizing and indexing is most of the cost of opening
    (1.4 s of 1.5 s for 11,914 passages), and a changed passage is a new digest."""

    name = "bm25"

    def __init__(
        self, keys: Sequence[str], texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
        cache: bool = False,
    ) -> None:
        bm25s, self._stemmer = _bm25_modules()
        self.keys = list(keys)
        self._bm25s = bm25s
        folder = _index_folder(bm25s, self.keys, texts, k1, b) if cache else None
        loaded = _load_index(bm25s, folder) if folder is not None else None
        self.from_cache = loaded is not None
        self.model = loaded if loaded is not None else self._index(texts, k1, b)
        if folder is not None and loaded is None:
            _save_index(self.model, folder)

    def _index(self, texts: Sequence[str], k1: float, b: float) -> Any:
        model = self._bm25s.BM25(k1=k1, b=b, method="lucene")
        tokens = self._bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False
        )
        model.index(tokens, show_progress=False)
        return model

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> BM25Retriever:
        keys, texts = tree_passages(tree)
        return cls(keys, texts, **{"cache": True, **options})

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


def _index_folder(bm25s: Any, keys: Sequence[str], texts: Sequence[str], k1: float,
                  b: float) -> Path:
    key = content_key(BM25_INDEX_FORMAT, str(getattr(bm25s, "__version__", "")), f"{k1}:{b}",
                      keys, texts)
    return cache_root() / "bm25" / key


def _load_index(bm25s: Any, folder: Path) -> Any:
    """The saved index in `folder`, memory-mapped; None when absent or unreadable (then it
    is removed, to be saved again)."""
    if not (folder / "params.index.json").is_file():
        return None
    try:
        return bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
    except (OSError, ValueError, KeyError):
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _save_index(model: Any, folder: Path) -> None:
    """Save into a fresh folder beside `folder`, then rename it into place: readers see a
    whole index or none. A cache that cannot be written is skipped, not an error."""
    try:
        staging = temporary_folder_beside(folder)
    except OSError:
        return
    try:
        model.save(str(staging), show_progress=False)
        os.replace(staging, folder)
    except OSError:  # another process saved it first, or the disk is full
        shutil.rmtree(staging, ignore_errors=True)


def _bm25_modules() -> tuple[Any, Any]:
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise missing_extra(getattr(exc, "name", None) or "bm25s", "eval") from exc
    return bm25s, Stemmer.Stemmer("english")


# -- dense ---------------------------------------------------------------------------------


class DenseRetriever:
    """Exact inner-product search over L2-normalised sentence embeddings: the vectors stored
    with the tree (``TREE.vectors/``) when it has them for this model, else passages
    embedded now (cached on disk by content).

    Over stored vectors only queries are embedded, by `_embed.load_query_encoder` (`encoder`:
    "auto" — numpy, no torch, for the bundled model on the CPU —, "numpy" or "torch");
    passages embedded now use the torch encoder (`load_encoder`), which then embeds the
    queries too unless `encoder` says otherwise."""

    name = "dense"

    def __init__(
        self,
        keys: Sequence[str],
        texts: Sequence[str],
        *,
        model: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        progress: bool = False,
        stored: Any = None,
        ids: Sequence[int] | None = None,
        encoder: str = "auto",
    ) -> None:
        from ._embed import load_encoder, load_query_encoder

        self.keys = list(keys)
        if stored is None and encoder == "auto":
            self.encoder = load_encoder(model)
        else:
            self.encoder = load_query_encoder(model, encoder=encoder)
        self.stored = stored
        self._ids = np.asarray(ids if ids is not None else [], dtype=np.int64)
        if stored is not None:
            in_memory = len(self.keys) * stored.dim * 4 <= IN_MEMORY_BYTES
            self.vectors = stored.take(self._ids) if in_memory else None
        else:
            self.vectors = self._cached_vectors(texts, cache_dir, progress)

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> DenseRetriever:
        """Over the tree's stored vectors when they match the query encoder; a tree with
        vectors of another model (or, for a bfloat16 query encoder, another precision) is
        refused (VectorsError)."""
        from ._embed import load_query_encoder
        from ._tree._vectors import available_sets, open_query_vectors

        if available_sets(tree.file):
            model, choice = options.get("model"), options.get("encoder", "auto")
            encoder = load_query_encoder(model, encoder=choice)
            stored = open_query_vectors(tree, model=encoder.name, precision=encoder.precision)
            ids, keys = [], []
            for node in tree.iter_passages():
                ids.append(node.id)
                keys.append(node.key)
            return cls(keys, (), model=model, stored=stored, ids=ids, encoder=choice)
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

    def query_vector(self, query_text: str) -> np.ndarray:
        return self.encoder.encode([query_text])[0]

    def scores(self, query_text: str) -> np.ndarray:
        query = self.query_vector(query_text)
        if self.vectors is not None:
            return np.asarray(self.vectors @ query, dtype=np.float32)
        return self.stored.scan(query)[self._ids]

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return top_k(self.scores(query_text), self.keys, k)


# -- hybrid --------------------------------------------------------------------------------

RRF_K = 60


class HybridRetriever:
    """Reciprocal-rank fusion of BM25 and dense (k = 60): each passage scores
    sum over the two rankings of 1 / (60 + rank), over each one's top `depth`."""

    name = "hybrid"

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, depth: int = 1000) -> None:
        self.bm25, self.dense, self.depth = bm25, dense, depth

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> HybridRetriever | DenseRetriever:
        """Both retrievers over `tree`; dense alone when bm25s (the eval extra) is missing."""
        from ._errors import MissingDependency

        dense = DenseRetriever.from_tree(tree, **options)
        try:
            return cls(BM25Retriever.from_tree(tree), dense)
        except MissingDependency:
            return dense

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        depth = max(k, self.depth)
        return rrf([self.bm25.retrieve(query_text, depth), self.dense.retrieve(query_text, depth)], k)


def rrf(rankings: Sequence[Sequence[tuple[str, float]]], k: int,
        constant: int = RRF_K) -> list[tuple[str, float]]:
    """Fuse rankings by reciprocal rank; ties broken by first appearance."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (key, _score) in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (constant + rank)
    order = sorted(fused.items(), key=lambda item: -item[1])
    return order[:k]

