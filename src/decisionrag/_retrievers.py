"""Flat retrievers, BM25 and dense (exact or approximate inner-product search): evaluation
baselines and the sources of hybrid candidates for navigation. Over a tree they read the
indexes stored with it (BM25: ``TREE.bm25/``; dense: ``TREE.vectors/`` and its ANN index), so
opening one indexes nothing and holds no per-passage Python objects.

Both implement ``retrieve(query_text, k) -> [(passage key, score), ...]``, the `Retriever`
protocol (`decisionrag._navigate._retriever`) that navigation uses for hybrid candidates.
Passages are indexed with their document title and heading path prepended, so a flat
retriever sees what navigation sees along the path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._files import cache_root, content_key, temporary_folder_beside
from ._ranked import rrf, rrf_ids, top_k, top_positions
from ._tree import Tree
from ._tree._vectors import VectorsError, passage_text

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


# -- BM25 ----------------------------------------------------------------------------------


BM25_INDEX_FORMAT = "bm25s-lucene-1"


class BM25Retriever:
    """bm25s (Lucene variant, k1=1.5, b=0.75), English Snowball stemming and stopwords.

    `from_tree` reads the index stored with the tree (``TREE.bm25/``, `decisionrag._tree._bm25`:
    built by `decisionrag build` in one streaming pass, its scores equal to bm25s's), so
    opening indexes nothing; a tree without a current one gets it built and saved beside it
    (or, where that folder is not writable, in ``cache_root()/bm25``) once, with a warning.

    Over `keys` and `texts` (no tree) the index is built in memory by bm25s; with `cache` it
    is saved under ``cache_root()/bm25/<digest of the keys, texts and parameters>`` and later
    loaded memory-mapped."""

    name = "bm25"

    def __init__(
        self, keys: Sequence[str], texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
        cache: bool = False,
    ) -> None:
        bm25s, self._stemmer = _bm25_modules()
        self.keys: Sequence[str] = list(keys)
        self._bm25s = bm25s
        self._stored: Any = None
        self._tree: Tree | None = None
        self._query_terms: Callable[[str], list[str]] | None = None
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
        """Over the index stored with `tree` (built now, once, when it has none that is
        current); `k1`/`b` other than the stored index's build an index in memory."""
        from ._tree._bm25 import StoredBM25

        stored = _stored_bm25(tree, options)
        if not isinstance(stored, StoredBM25):
            keys, texts = tree_passages(tree)
            return cls(keys, texts, **{"cache": True, **options})
        retriever = cls.__new__(cls)
        retriever._bm25s, retriever._stemmer = _bm25_modules()
        retriever._stored, retriever._tree, retriever._query_terms = stored, tree, None
        retriever.keys, retriever.model, retriever.from_cache = (), None, True
        return retriever

    @property
    def size(self) -> int:
        return self._stored.n_docs if self._stored is not None else len(self.keys)

    def tokenize(self, text: str) -> list[str]:
        """A query's terms, as bm25s tokenizes it (`bm25_query_tokenizer`)."""
        if self._query_terms is None:
            from ._tree._bm25 import bm25_query_tokenizer

            self._query_terms = bm25_query_tokenizer()
        return self._query_terms(text)

    def scores(self, query_text: str) -> np.ndarray:
        """BM25 score of every passage, in corpus order."""
        if self._stored is not None:
            return self._stored.scores(self.tokenize(query_text))
        tokens = [t for t in self.tokenize(query_text) if t in self.model.vocab_dict]
        if not tokens:
            return np.zeros(len(self.keys), dtype=np.float32)
        return np.asarray(self.model.get_scores(tokens), dtype=np.float32)

    @property
    def tree(self) -> Tree | None:
        """The tree whose node ids `ranked_ids` returns (None: an index of keys and texts)."""
        return self._tree if self._stored is not None else None

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        found = self.ranked_ids(query_text, k)
        if found is None:
            return top_k(self.scores(query_text), self.keys, k)
        assert self._tree is not None
        return _keyed(self._tree, *found)

    def ranked_ids(self, query_text: str, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The top `k` as (node ids, scores), best first, over the tree's stored index (None
        over an index built from keys and texts): what `retrieve` returns before the ids are
        looked up as keys."""
        if self._stored is None:
            return None
        scores = self.scores(query_text)
        best = top_positions(scores, k)
        return self._stored.node_ids(best), scores[best]


def _stored_bm25(tree: Tree, options: dict[str, Any]) -> Any:
    """The tree's current stored index; built (beside the tree, else in the cache) when it
    has none; None when `options` ask for other parameters."""
    import warnings

    from ._tree._bm25 import BM25IndexError, StoredBM25, bm25_folder, write_bm25

    try:
        stored = StoredBM25.open(tree.file, tree.meta)
    except BM25IndexError as exc:
        target = tree.file
        if not os.access(bm25_folder(target).parent, os.W_OK):
            target = cache_root() / "bm25" / content_key(
                "tree", str(tree.file.resolve()), str(tree.meta.get("written_at"))) / tree.file.name
        try:
            stored = StoredBM25.open(target, tree.meta)
        except BM25IndexError:
            warnings.warn(f"{exc}; building it now (once)", stacklevel=3)
            if target != tree.file:
                target.parent.mkdir(parents=True, exist_ok=True)
            write_bm25(_Renamed(tree, target))
            stored = StoredBM25.open(target, tree.meta)
    wanted = (options.get("k1", stored.k1), options.get("b", stored.b))
    return stored if wanted == (stored.k1, stored.b) else None


class _Renamed:
    """A tree seen under another file name (where its BM25 index is written)."""

    def __init__(self, tree: Tree, file: Path) -> None:
        self._tree, self.file, self.meta = tree, file, tree.meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tree, name)


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
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if not isinstance(exc, OSError):  # OSError: another process saved it first, or the disk is full
            raise


def _bm25_modules() -> tuple[Any, Any]:
    from ._tree._bm25 import bm25_modules

    return bm25_modules()


# -- dense ---------------------------------------------------------------------------------


class DenseRetriever:
    """Inner-product search over L2-normalised sentence embeddings: the vectors stored with
    the tree (``TREE.vectors/``) when it has them for this model, else passages embedded now
    (cached on disk by content).

    Over stored vectors, `search` says how: ``"exact"`` scores every passage; ``"ann"`` asks
    the set's ANN index (`decisionrag._tree._ann`: faiss IVF-PQ candidates re-ranked by their
    stored vectors; the ``ann`` extra); ``"auto"`` (default) uses the index from `ANN_FROM`
    passages on and exact search below, and where a tree that large has no index (or faiss
    is not installed) scans every vector, with a warning. An index built for another version
    of the tree is refused (AnnError).

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
        ids: Sequence[int] | np.ndarray | None = None,
        encoder: str = "auto",
        ann: Any = None,
        tree: Tree | None = None,
    ) -> None:
        from ._embed import load_encoder, load_query_encoder

        self.keys = list(keys)
        if stored is None and encoder == "auto":
            self.encoder = load_encoder(model)
        else:
            self.encoder = load_query_encoder(model, encoder=encoder)
        self.stored, self.ann, self._tree = stored, ann, tree
        # over an ANN index the passages' node ids (8 bytes each: 21 MB at NQ size) are read
        # only if an exact search is asked for (the index's labels are node ids already)
        self._ids: np.ndarray | None = (None if ids is None and ann is not None and tree is not None
                                        else np.asarray(ids if ids is not None else [], dtype=np.int64))
        self.vectors: np.ndarray | None = None
        if stored is not None and ann is None:
            in_memory = len(self.passage_ids) * stored.dim * 4 <= IN_MEMORY_BYTES
            self.vectors = stored.take(self.passage_ids) if in_memory else None
        elif stored is None:
            self.vectors = self._cached_vectors(texts, cache_dir, progress)

    @property
    def search(self) -> str:
        """How it searches: "ann" or "exact"."""
        return "ann" if self.ann is not None else "exact"

    @property
    def passage_ids(self) -> np.ndarray:
        """The node ids of the passages searched, in the order of the exact scores."""
        if self._ids is None:
            assert self._tree is not None
            self._ids = self._tree.passage_ids()
        return self._ids

    @property
    def size(self) -> int:
        if self.stored is None:
            return len(self.keys)
        return int(self.ann.header.rows) if self._ids is None else len(self._ids)

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> DenseRetriever:
        """Over the tree's stored vectors when they match the query encoder; a tree with
        vectors of another model (or, for a bfloat16 query encoder, another precision) is
        refused (VectorsError). `search`: "auto", "exact" or "ann" (see the class doc)."""
        from ._embed import load_query_encoder
        from ._tree._vectors import available_sets, open_query_vectors

        search = options.pop("search", "auto")
        if search not in ("auto", "exact", "ann"):
            raise ValueError(f"search must be 'auto', 'exact' or 'ann', not {search!r}")
        if available_sets(tree.file):
            model, choice = options.get("model"), options.get("encoder", "auto")
            encoder = load_query_encoder(model, encoder=choice)
            stored = open_query_vectors(tree, model=encoder.name, precision=encoder.precision)
            ann = _ann_index(tree, stored, search)
            return cls((), (), model=model, stored=stored,
                       ids=None if ann is not None else tree.passage_ids(),
                       encoder=choice, ann=ann, tree=tree)
        if search == "ann":
            raise VectorsError(f"{tree.file} has no stored vectors, so no ANN index; build "
                               f"them with `decisionrag vectors {tree.file}`")
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
        """The query's vector; inside a walk, once per walk (the embedded judge's, when it
        uses the same encoder: `_embed.shared_query_vector`)."""
        from ._embed import shared_query_vector
        from ._query import current_shared_work

        return shared_query_vector(self.encoder, query_text, current_shared_work())

    def scores(self, query_text: str) -> np.ndarray:
        """The exact score of every passage, in corpus order (a full scan even when an ANN
        index answers `retrieve`)."""
        return self._exact_scores(self.query_vector(query_text))

    def _exact_scores(self, query: np.ndarray) -> np.ndarray:
        shared = self._scores_in_this_walk(query)
        if shared is not None:
            return shared
        if self.vectors is not None:
            return np.asarray(self.vectors @ query, dtype=np.float32)
        return self.stored.scan(query)[self.passage_ids]

    def _scores_in_this_walk(self, query: np.ndarray) -> np.ndarray | None:
        """Inside a walk, every passage's score as its judge already computed it over the
        same stored rows for the same query vector (its page level, when that level read
        every page; `_embed.shared_row_similarities`); None otherwise (a scan)."""
        if self.stored is None:
            return None
        from ._embed import shared_row_similarities
        from ._query import current_shared_work

        work = current_shared_work()
        if work is None:
            return None
        return shared_row_similarities(work, str(self.stored.path), query, self.passage_ids)

    @property
    def tree(self) -> Tree | None:
        """The tree whose node ids `ranked_ids` returns (None: passages embedded from keys
        and texts)."""
        return self._tree if self.stored is not None else None

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        return self.retrieve_vector(self.query_vector(query_text), k)

    def retrieve_vector(self, query: np.ndarray, k: int, *,
                        exact: bool = False) -> list[tuple[str, float]]:
        """The top `k` for an embedded query (`exact`: by a full scan even with an index)."""
        found = self.ranked_vector_ids(query, k, exact=exact)
        if found is None:
            return top_k(self._exact_scores(query), self.keys, k)
        assert self._tree is not None
        return _keyed(self._tree, *found)

    def ranked_ids(self, query_text: str, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The top `k` as (node ids, scores), best first, over stored vectors (None over
        passages embedded from keys and texts); see `BM25Retriever.ranked_ids`."""
        if self.stored is None:
            return None
        return self.ranked_vector_ids(self.query_vector(query_text), k)

    def ranked_vector_ids(self, query: np.ndarray, k: int, *, exact: bool = False
                          ) -> tuple[np.ndarray, np.ndarray] | None:
        if self.ann is not None and not exact:
            ids, scores = self.ann.search(query, k)
            return np.asarray(ids), np.asarray(scores)
        if self.stored is None:
            return None
        scores = self._exact_scores(query)
        best = top_positions(scores, k)
        return self.passage_ids[best], scores[best]

    def _keys_of(self, ids: np.ndarray) -> list[str]:
        assert self._tree is not None
        return self._tree.keys_of(ids.tolist())


    def approximation_recall(self, query_texts: Sequence[str], k: int = 100) -> float | None:
        """Mean share of the exact top `k` that the ANN index returns, over `query_texts`
        (None when this retriever searches exactly)."""
        if self.ann is None or not query_texts:
            return None
        shares = []
        for text in query_texts:
            query = self.query_vector(text)
            found = {key for key, _ in self.retrieve_vector(query, k)}
            truth = [key for key, _ in self.retrieve_vector(query, k, exact=True)]
            shares.append(len(found.intersection(truth)) / max(1, len(truth)))
        return float(np.mean(shares))


def _keyed(tree: Tree, ids: np.ndarray, scores: np.ndarray) -> list[tuple[str, float]]:
    """(key, score) pairs of node `ids` with their `scores`, in order."""
    return list(zip(tree.keys_of(ids.tolist()), scores.tolist(), strict=True))


def _ann_index(tree: Tree, stored: Any, search: str) -> Any:
    """The ANN index `search` asks for over `stored`, or None for exact search."""
    import warnings

    from ._errors import MissingDependency
    from ._tree._ann import ANN_FROM, AnnIndex, faiss_module

    passages = tree.counts.get("passage", 0)
    if search == "exact" or (search == "auto" and passages < ANN_FROM):
        return None
    try:
        index = AnnIndex.open(tree.file, tree.meta, stored)
        if index is None:
            faiss_module()  # without faiss, say that rather than how to build an index
    except MissingDependency as exc:
        if search == "ann":
            raise
        warnings.warn(f"{exc}; dense search scans all {passages:,} stored vectors", stacklevel=4)
        return None
    if index is None:
        hint = f"build it with `decisionrag index {tree.file} --ann`"
        if search == "ann":
            raise VectorsError(f"{tree.file} has no ANN index; {hint}")
        warnings.warn(f"{tree.file} has no ANN index, so dense search scans all {passages:,} "
                      f"stored vectors; {hint}", stacklevel=4)
    return index


# -- hybrid --------------------------------------------------------------------------------

class HybridRetriever:
    """Reciprocal-rank fusion of BM25 and dense (k = 60): each passage scores
    sum over the two rankings of 1 / (60 + rank), over each one's top `depth`."""

    name = "hybrid"

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, depth: int = 1000) -> None:
        self.bm25, self.dense, self.depth = bm25, dense, depth

    @classmethod
    def from_tree(cls, tree: Tree, **options: Any) -> HybridRetriever | DenseRetriever:
        """Both retrievers over `tree`; dense alone when bm25s (the eval extra) is missing."""
        return FlatRetrievers(tree, **options).hybrid()

    @property
    def tree(self) -> Tree | None:
        """The tree whose node ids `ranked_ids` returns (None: it returns none)."""
        tree = self.dense.tree
        return tree if tree is not None and tree is self.bm25.tree else None

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]:
        found = self.ranked_ids(query_text, k)
        if found is None:
            depth = max(k, self.depth)
            return rrf([self.bm25.retrieve(query_text, depth),
                        self.dense.retrieve(query_text, depth)], k)
        assert self.dense.tree is not None
        return _keyed(self.dense.tree, *found)

    def ranked_ids(self, query_text: str, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The fused top `k` as (node ids, scores), best first, when both rankings are over
        stored indexes of one tree (None otherwise): fused by node id, so that only the k
        kept are looked up as keys (not 2 x depth), or not at all (a walk takes nodes by id)."""
        if self.tree is None:
            return None
        depth = max(k, self.depth)
        lexical = self.bm25.ranked_ids(query_text, depth)
        semantic = self.dense.ranked_ids(query_text, depth) if lexical is not None else None
        if lexical is None or semantic is None:
            return None
        return rrf_ids([lexical[0], semantic[0]], k)


RETRIEVER_KINDS = ("bm25", "dense", "hybrid")


class FlatRetrievers:
    """The flat retrievers over one tree, each opened once and shared: what a preset's
    `candidates` names, and the evaluation's baselines. `dense_options` go to
    `DenseRetriever.from_tree` (model, cache_dir, search, progress)."""

    def __init__(self, tree: Tree, **dense_options: Any) -> None:
        self.tree = tree
        self.dense_options = dense_options
        self._bm25: BM25Retriever | None = None
        self._dense: DenseRetriever | None = None

    @property
    def opened_dense(self) -> DenseRetriever | None:
        """The dense retriever, if one was opened (its search is reported by eval)."""
        return self._dense

    def bm25(self) -> BM25Retriever:
        if self._bm25 is None:
            self._bm25 = BM25Retriever.from_tree(self.tree)
        return self._bm25

    def dense(self) -> DenseRetriever:
        if self._dense is None:
            self._dense = DenseRetriever.from_tree(self.tree, **self.dense_options)
        return self._dense

    def hybrid(self, *, strict: bool = False) -> HybridRetriever | DenseRetriever:
        """BM25 and dense fused by reciprocal rank; dense alone when bm25s (the eval extra)
        is missing, unless `strict` (a baseline named "hybrid" must be hybrid)."""
        from ._errors import MissingDependency

        dense = self.dense()
        try:
            return HybridRetriever(self.bm25(), dense)
        except MissingDependency:
            if strict:
                raise
            return dense

    def get(self, kind: str) -> BM25Retriever | DenseRetriever | HybridRetriever:
        """The retriever named `kind`: "bm25", "dense" or "hybrid"."""
        from ._errors import InputError

        if kind == "bm25":
            return self.bm25()
        if kind == "dense":
            return self.dense()
        if kind == "hybrid":
            return self.hybrid()
        raise InputError(f"unknown flat retriever {kind!r}: use one of {', '.join(RETRIEVER_KINDS)}")
