"""The search indexes stored with a tree (issue 30): the streamed BM25 index (an oracle test
against bm25s), built by `build` and loaded — not rebuilt — at query time; the ANN index kept
in step by add/remove/sync, refused for another version of the tree, and its recall against
exact search on a real tree."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from decisionrag import DocumentSpec, PassageSpec, Tree, TreeWriter
from decisionrag._app import add_sources, build_tree, remove_documents, sync_sources
from decisionrag._build._vectors import embed_tree
from decisionrag._retrievers import BM25Retriever, DenseRetriever, FlatRetrievers, tree_passages
from decisionrag._tree import _ann, _bm25
from decisionrag._tree._ann import AnnError, AnnIndex, ann_header_path, write_ann
from decisionrag._tree._bm25 import BM25IndexError, StoredBM25, bm25_folder, write_bm25
from decisionrag._tree._vectors import open_vectors, vectors_folder
from test_vectors import HashEncoder

WORDS = ("passport", "renew", "abroad", "photo", "fishing", "licence", "river", "season", "tax",
         "credit", "child", "benefit", "school", "university", "rent", "deposit", "landlord",
         "council", "vote", "election", "pension")


def _copy_tree(source: Path, target_dir: Path, *, vectors: bool = True) -> Path:
    target = target_dir / source.name
    shutil.copy(source, target)
    if vectors and vectors_folder(source).is_dir():
        shutil.copytree(vectors_folder(source), vectors_folder(target))
    return target


def _queries(texts: Sequence[str]) -> list[str]:
    picked = [" ".join(t.split()[:7]) for t in texts[::9]]
    return [*picked, "the of and", "", "xyzzy qwerty", "Warsaw warsaw WARSAW", "1945 1945"]


# -- BM25 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1 << 18, 7])
def test_streamed_bm25_scores_equal_bm25s_in_memory(xquad_tree: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    """The oracle: a streamed index (tiny chunks and buckets, so every path of the merge runs)
    scores every passage exactly as bm25s's own index of the same texts, its columns read
    whole or a few entries at a time (`piece`)."""
    monkeypatch.setattr(_bm25, "COLUMN_PIECE", piece)
    tree_path = _copy_tree(xquad_tree, tmp_path)
    with Tree.open(tree_path) as tree:
        write_bm25(tree, chunk=17, bucket_entries=301)
        stored = StoredBM25.open(tree.file, tree.meta)
        keys, texts = tree_passages(tree)
        every = np.arange(len(tree.passage_ids()))
        assert stored.node_ids(every).tolist() == tree.passage_ids().tolist()
        reference = BM25Retriever(keys, texts)  # bm25s, in memory
        tokenize = _bm25.bm25_tokenizer()
        for query in _queries(texts):
            expected = reference.scores(query)
            got = stored.scores(tokenize([query])[0])
            assert got.dtype == np.float32 and np.array_equal(got, expected), query
        from_tree = BM25Retriever.from_tree(tree)
        query = _queries(texts)[0]
        assert from_tree.retrieve(query, 10) == reference.retrieve(query, 10)


def test_a_query_is_tokenized_as_bm25s_tokenizes_it(xquad_tree: Path) -> None:
    """The oracle for the query side's own tokenizer: every passage of a real tree, and
    texts made to catch each step (case, the token pattern, stopwords, repeats, stems,
    letters outside ASCII, nothing left), give the terms bm25s.tokenize gives."""
    import bm25s

    _, stemmer = _bm25.bm25_modules()
    with Tree.open(xquad_tree) as tree:
        _, texts = tree_passages(tree)
    made = ["", "the of and", "A", "Running RUNS ran runner's runners", "x_y 12 3 a1 __init__",
            "Ünïcödé ÉTÉ straße İstanbul ΣΊΣΥΦΟΣ naïve café", "tab\tnew\nline  spaces",
            "The the THE cats cats", "don't won't it's", "e-mail co-operate U.S.A.", "日本語 テキスト"]
    query_terms = _bm25.bm25_query_tokenizer()
    for text in [*texts, *made]:
        expected = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False,
                                  show_progress=False)[0]
        assert query_terms(text) == list(expected), text


def test_stored_node_ids_are_looked_up_for_any_positions_and_refused_outside(
        xquad_tree: Path, tmp_path: Path) -> None:
    """`StoredBM25.node_ids` for positions in any order, repeated, at the ends; a position
    outside the index (or negative, which numpy would read from the end) is refused."""
    tree_path = _copy_tree(xquad_tree, tmp_path)
    with Tree.open(tree_path) as tree:
        write_bm25(tree)
        stored = StoredBM25.open(tree.file, tree.meta)
        ids = tree.passage_ids()
        last = len(ids) - 1
        rng = np.random.default_rng(3)
        for positions in (rng.integers(0, len(ids), 300), np.array([last, 0, 0, 1, 2]),
                          np.arange(last + 1)[::-1], np.array([], dtype=np.int64)):
            assert stored.node_ids(positions).tolist() == ids[positions].tolist()
        for outside in ([last + 1], [-1]):
            with pytest.raises(IndexError):
                stored.node_ids(outside)
        stored.close()


def test_term_columns_are_kept_and_answer_as_the_search(xquad_tree: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`StoredBM25.column` keeps what the binary search found (absent terms too), up to
    TERMS_KEPT terms, then starts again; its answers are the search's."""
    monkeypatch.setattr(_bm25, "TERMS_KEPT", 5)
    tree_path = _copy_tree(xquad_tree, tmp_path)
    with Tree.open(tree_path) as tree:
        write_bm25(tree)
        stored = StoredBM25.open(tree.file, tree.meta)
        terms = ["the", "zzzunseen", "water", "citi", "the", "year", "river", "zzzunseen", "water"]
        found = [stored.column(term) for term in terms]
        assert found == [stored._search(term) for term in terms]
        assert found[1] is None and found[2] is not None  # ("the": a stop word, not indexed)
        assert len(stored._column_of) <= 5
        stored.close()


def _documents(n: int, seed: int = 0) -> list[DocumentSpec]:
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n):
        passages = [PassageSpec(" ".join(rng.choice(WORDS, size=12)) + f" item{d}x{p}.",
                                key=f"d{d}p{p}") for p in range(8)]
        docs.append(DocumentSpec(f"Doc {d} {WORDS[d % len(WORDS)]}", passages, key=f"d{d}"))
    return docs


def _write_markdown(folder: Path, docs: Sequence[DocumentSpec]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for spec in docs:
        body = "\n\n".join(p.text for p in spec.passages)
        (folder / f"{spec.key}.md").write_text(f"# {spec.title}\n\n{body}\n", encoding="utf-8")


def test_build_stores_the_bm25_index_and_a_query_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_markdown(tmp_path / "src", _documents(5))
    report = build_tree([tmp_path / "src"], tmp_path / "t.tree", vectors=False)
    assert report.bm25 is not None and report.bm25.passages == report.counts["passage"]
    assert (bm25_folder(tmp_path / "t.tree") / "index.json").is_file()

    def no_indexing(*_: object, **__: object) -> None:
        raise AssertionError("a query indexed the corpus")

    monkeypatch.setattr(_bm25, "write_bm25", no_indexing)
    monkeypatch.setattr(BM25Retriever, "_index", no_indexing)
    with Tree.open(tmp_path / "t.tree") as tree, warnings.catch_warnings():
        warnings.simplefilter("error")
        retriever = FlatRetrievers(tree).get("bm25")
        assert isinstance(retriever, BM25Retriever)
        hits = retriever.retrieve("passport renew abroad", 3)
    assert len(hits) == 3 and all(score > 0 for _, score in hits)


def test_a_stale_bm25_index_is_refused_then_rebuilt_once(tmp_path: Path) -> None:
    _write_markdown(tmp_path / "src", _documents(4))
    tree_path = tmp_path / "t.tree"
    build_tree([tmp_path / "src"], tree_path, vectors=False)
    with TreeWriter.update(tree_path) as writer:  # an edit that bypasses the refresh
        writer.add_document(_documents(5, seed=1)[4])
    with Tree.open(tree_path) as tree:
        with pytest.raises(BM25IndexError, match="another version of the tree"):
            StoredBM25.open(tree.file, tree.meta)
        with pytest.warns(UserWarning, match="building it now"):
            retriever = BM25Retriever.from_tree(tree)
        assert retriever.size == tree.counts["passage"]
        StoredBM25.open(tree.file, tree.meta).close()  # saved beside the tree, current


# -- ANN --------------------------------------------------------------------------------------


def _index_ids(tree_path: Path) -> list[int]:
    faiss = _ann.faiss_module()
    with Tree.open(tree_path) as tree:
        header = _ann.AnnHeader.read(ann_header_path(tree_path, "hash-words", "float32"))
        index = faiss.read_index(str(vectors_folder(tree_path) / header.index))
        ivf = faiss.extract_index_ivf(index)
        lists = ivf.invlists
        ids = [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
               for i in range(ivf.nlist)]
        assert index.ntotal == tree.counts["passage"]
        return sorted(np.concatenate(ids).tolist())


def _assert_in_step(tree_path: Path) -> None:
    """The index holds exactly the tree's passages, and searching every list equals exact."""
    with Tree.open(tree_path) as tree:
        assert _index_ids(tree_path) == tree.passage_ids().tolist()
        ann = _dense(tree, "ann")
        exact = _dense(tree, "exact")
        assert ann.search == "ann" and exact.search == "exact"
        for text in ("passport renew abroad", "river fishing season", "council vote"):
            vector = HashEncoder().encode([text])[0]
            ids, _ = ann.ann.search(vector, 5, nprobe=ann.ann.header.nprobe * 64)
            truth = exact.retrieve_vector(vector, 20)
            assert set(ann._keys_of(ids)) <= {key for key, _ in truth}


def _dense(tree: Tree, search: str) -> DenseRetriever:
    """A DenseRetriever over the hash-words vectors (no query encoder of that name loads)."""
    stored = open_vectors(tree)
    index = AnnIndex.open(tree.file, tree.meta, stored) if search == "ann" else None
    retriever = DenseRetriever.__new__(DenseRetriever)
    retriever.keys, retriever.stored, retriever.ann, retriever._tree = [], stored, index, tree
    retriever._ids = tree.passage_ids()
    retriever.vectors = stored.take(retriever._ids) if index is None else None
    return retriever


def test_the_ann_index_follows_add_remove_and_sync(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ann, "FLAT_BELOW", 0)  # an inverted file even for a small tree
    encoder = HashEncoder()
    docs = _documents(6)
    _write_markdown(tmp_path / "src", docs[:4])
    tree_path = tmp_path / "t.tree"
    build_tree([tmp_path / "src"], tree_path, vectors=False)
    first = embed_tree(tree_path, model="hash-words", encode=encoder.encode, ann=True)
    assert first.ann is not None and first.ann.rebuilt and first.ann.factory.startswith("IVF")
    _assert_in_step(tree_path)

    _write_markdown(tmp_path / "more", docs[4:5])
    add_sources(tree_path, [tmp_path / "more"])
    added = embed_tree(tree_path, model="hash-words", encode=encoder.encode)  # what `add` runs
    assert added.ann is not None and not added.ann.rebuilt
    assert (added.ann.added, added.ann.removed) == (8, 0)
    _assert_in_step(tree_path)

    remove_documents(tree_path, ["d1.md"])
    removed = embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    assert removed.ann is not None and (removed.ann.added, removed.ann.removed) == (0, 8)
    _assert_in_step(tree_path)

    changed = _documents(6, seed=5)[2]  # d2's text changes, d5 is new, d0, d3 and d4 go
    _write_markdown(tmp_path / "src2", [changed, docs[5]])
    sync_sources(tree_path, [tmp_path / "src2"])
    synced = embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    assert synced.ann is not None and not synced.ann.rebuilt
    assert synced.ann.added == 8 * 2 and synced.ann.removed == 8 * 4  # d2 out and in again
    _assert_in_step(tree_path)
    leftovers = sorted(p.name for p in vectors_folder(tree_path).glob("*.faiss"))
    assert len(leftovers) == 1  # each update removed the file it replaced


def test_an_ann_index_of_another_tree_version_is_refused(tmp_path: Path) -> None:
    encoder = HashEncoder()
    _write_markdown(tmp_path / "src", _documents(3))
    tree_path = tmp_path / "t.tree"
    build_tree([tmp_path / "src"], tree_path, vectors=False)
    embed_tree(tree_path, model="hash-words", encode=encoder.encode, ann=True)
    header = ann_header_path(tree_path, "hash-words", "float32")
    old_header, old_index = header.read_bytes(), _ann.AnnHeader.read(header).index
    kept = tmp_path / "old.faiss"
    shutil.copy(vectors_folder(tree_path) / old_index, kept)
    remove_documents(tree_path, ["d0.md"])
    embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    header.write_bytes(old_header)  # the index of the earlier version put back
    shutil.copy(kept, vectors_folder(tree_path) / old_index)
    with Tree.open(tree_path) as tree:
        stored = open_vectors(tree)
        with pytest.raises(AnnError, match="another version of the tree"):
            AnnIndex.open(tree.file, tree.meta, stored)


def _reference_search(index_path: Path, stored: object, query: np.ndarray, k: int,
                      nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    """What `AnnIndex.search` returned when it searched a memory-mapped index: faiss over the
    whole index, its candidates ranked by their stored vectors."""
    faiss = _ann.faiss_module()
    index = faiss.read_index(str(index_path))
    q = np.asarray(query, np.float32).reshape(1, -1)
    wanted = min(int(index.ntotal), k * _ann.REFINE)
    _, found = index.search(q, wanted, params=faiss.SearchParametersIVF(nprobe=nprobe))
    candidates = np.sort(found[0][found[0] >= 0])
    scores = stored.take(candidates) @ q[0]  # type: ignore[attr-defined]
    order = np.lexsort((candidates, -scores))[:k]
    return candidates[order], scores[order].astype(np.float32)


def test_ann_search_reads_only_the_probed_lists_and_finds_what_faiss_finds(
    tmp_path: Path,
) -> None:
    """The index's lists are read with positioned reads (the file is never mapped, so its
    pages are not the process's memory) and every search equals faiss over the whole index."""
    import threading

    _write_markdown(tmp_path / "src", _documents(40))
    tree_path = tmp_path / "t.tree"
    build_tree([tmp_path / "src"], tree_path, vectors=False)
    encoder = HashEncoder()
    embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    with Tree.open(tree_path) as tree:
        stored = open_vectors(tree)
        write_ann(tree_path, stored, tree.passage_ids(), tree.meta, factory="IVF8,PQ8x4",
                  nprobe=2)
        ann = AnnIndex.open(tree.file, tree.meta, stored)
        assert ann is not None and ann.nprobe == 2
        texts = ["passport renew abroad", "river fishing season", "council vote election",
                 "tax credit child benefit", "item3x4", "landlord deposit rent"]
        vectors = encoder.encode(texts)
        for k in (1, 10, 50):
            for probes in (None, 1, 3, 8):
                for vector in vectors:
                    ids, scores = ann.search(vector, k, nprobe=probes)
                    want_ids, want_scores = _reference_search(ann.path, stored, vector, k,
                                                              probes or 2)
                    assert np.array_equal(ids, want_ids) and np.array_equal(scores, want_scores)
        everything = ann.search(vectors[0], 400, nprobe=8)[0]
        assert sorted(everything.tolist()) == tree.passage_ids().tolist()  # every list read
        maps = Path("/proc/self/maps")
        if maps.is_file():
            assert ann.path.name not in maps.read_text()
        results: list[list[int]] = []

        def search() -> None:
            results.append([ann.search(v, 10)[0].tolist() for v in vectors])

        threads = [threading.Thread(target=search) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        alone = [ann.search(v, 10)[0].tolist() for v in vectors]
        assert results == [alone] * 4
        ann.close()


@pytest.mark.slow
def test_ann_recall_against_exact_on_a_real_tree(xquad_tree: Path, tmp_path: Path,
                                                 shared_data: Path) -> None:
    """xquad-en's passages embedded by the bundled MiniLM (numpy forward pass), an IVF-PQ
    index forced on them, its top 10 against exact search for the dataset's queries."""
    from decisionrag._embed import DEFAULT_MODEL, load_query_encoder
    from decisionrag._eval._data import read_queries

    tree_path = _copy_tree(xquad_tree, tmp_path, vectors=False)  # one vector set: the float32 one
    encoder = load_query_encoder(DEFAULT_MODEL, encoder="numpy")
    embed_tree(tree_path, model=DEFAULT_MODEL, precision="float32", encode=encoder.encode)
    with Tree.open(tree_path) as tree:
        stored = open_vectors(tree)
        write_ann(tree_path, stored, tree.passage_ids(), tree.meta, factory="IVF4,PQ48x4",
                  nprobe=2)
        ann = DenseRetriever.from_tree(tree, search="ann")
        exact = DenseRetriever.from_tree(tree, search="exact")
        assert ann.search == "ann" and exact.search == "exact"
        queries = [q.flat_text() for q in read_queries(shared_data / "xquad-en" / "queries.jsonl")]
        ann.retrieve(queries[0], 10)
        assert ann._ids is None and ann.size == 240  # the index's labels: no id list read
        vector = ann.query_vector(queries[1])
        assert ann.retrieve_vector(vector, 10, exact=True) == exact.retrieve_vector(vector, 10)
        recall = ann.approximation_recall(queries[::10], k=10)
        everything = ann.ann.search(ann.query_vector(queries[0]), 10, nprobe=4)[0]
        from decisionrag._eval._data import load_dataset
        from decisionrag._eval._report import dense_search_line
        from decisionrag._eval._runner import EvalSettings, approximation

        info = approximation(ann, load_dataset(shared_data / "xquad-en").limit(20),
                             EvalSettings(systems=["dense"]))  # what eval reports
        assert info["search"] == "ann" and info["queries"] == 20 and info["passages"] == 240
        assert 0 < info["recall@100"] <= 1 and "recall@100" in dense_search_line(info)
        assert approximation(exact, load_dataset(shared_data / "xquad-en"),
                             EvalSettings(systems=["dense"])) == {"search": "exact",
                                                                  "passages": 240}
    assert recall is not None and 0.8 <= recall <= 1.0  # measured 0.9+ (2 of 4 lists probed)
    assert len(everything) == 10


def test_auto_scans_exactly_with_a_warning_when_a_large_tree_has_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decisionrag._errors import MissingDependency, missing_extra

    _write_markdown(tmp_path / "src", _documents(2))
    tree_path = tmp_path / "t.tree"
    build_tree([tmp_path / "src"], tree_path, vectors=False)
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    monkeypatch.setattr(_ann, "ANN_FROM", 1)  # "large"

    def no_faiss() -> None:
        raise missing_extra("faiss-cpu", "ann")

    with Tree.open(tree_path) as tree:
        stored = open_vectors(tree)
        from decisionrag._retrievers import _ann_index

        with pytest.warns(UserWarning, match="no ANN index"):
            assert _ann_index(tree, stored, "auto") is None
        monkeypatch.setattr(_ann, "faiss_module", no_faiss)
        with pytest.warns(UserWarning, match=r"decisionrag\[ann\]"):
            assert _ann_index(tree, stored, "auto") is None
        with pytest.raises(MissingDependency, match=r"decisionrag\[ann\]"):
            _ann_index(tree, stored, "ann")


@pytest.mark.parametrize("seed", range(12))
def test_top_positions_by_pieces_picks_what_one_pass_picks(seed: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrowing a large score array piece by piece returns the same positions in the same
    order as one partition over the whole array: ties (heavy here: scores drawn from a few
    values, whole pieces of zeros), ties at the cut-off, NaN, pieces shorter than k."""
    import decisionrag._ranked as ranked

    rng = np.random.default_rng(seed)
    size = int(rng.integers(40, 400))
    scores = rng.choice(np.float32([0, 0, 0.5, 1, 1.5, 2]), size) if seed % 3 else \
        rng.random(size).astype(np.float32)
    if seed % 4 == 1:
        scores[: size // 2] = 0
    if seed % 5 == 2:
        scores[rng.integers(0, size, 3)] = np.nan
    if seed == 11:
        scores[:] = 0
    monkeypatch.setattr(ranked, "TOP_PIECE", int(rng.integers(9, 40)))
    for k in (1, 3, 4, int(rng.integers(1, 9))):
        expected = ranked._best_first(scores, min(k, size))
        assert ranked.top_positions(scores, k).tolist() == expected.tolist()


def _best_first_by_full_partition(scores: np.ndarray, k: int) -> np.ndarray:
    """The top k as first written: one partition of the whole array, sorted by value then
    position (the reference for NaN, where no full sort defines the answer)."""
    negated = -scores
    kth = np.partition(negated, k - 1)[k - 1]
    better = np.flatnonzero(negated < kth)
    tied = np.flatnonzero(negated == kth)[: k - better.size]
    candidates = np.concatenate([better, tied])
    return candidates[np.lexsort((candidates, negated[candidates]))]


@pytest.mark.parametrize("seed", range(16))
def test_top_positions_of_long_arrays_equal_the_stable_full_sort(seed: int) -> None:
    """Long arrays are narrowed by a sample before the k-th value is found: the positions
    are the stable full sort's (best first, ties by position, also at the cut-off), for
    heavy ties, a few distinct values, all equal, float32 and float64, and equal to the
    whole-array partition's where NaN is present."""
    import decisionrag._ranked as ranked

    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(ranked.SAMPLED_FROM, 40_000))
    dtype = np.float32 if seed % 2 else np.float64
    kind = seed % 4
    if kind == 0:
        scores = rng.random(size).astype(dtype)
    elif kind == 1:
        scores = rng.choice(np.asarray([0, 0, 0.5, 1, 1.5, 2], dtype=dtype), size)
    elif kind == 2:
        scores = np.round(rng.normal(size=size), 2).astype(dtype)
    else:
        scores = np.zeros(size, dtype=dtype)
    for k in (1, 7, 100, 1000, size // 8, size // 8 + 1, int(rng.integers(1, size // 8))):
        expected = np.argsort(-scores, kind="stable")[:k]
        assert ranked.top_positions(scores, k).tolist() == expected.tolist(), (kind, k)
    with_nan = scores.copy()
    with_nan[rng.integers(0, size, 50)] = np.nan
    for k in (1, 100, 1000):
        assert (ranked.top_positions(with_nan, k).tolist()
                == _best_first_by_full_partition(with_nan, k).tolist())
