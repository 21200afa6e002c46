"""Retrieval metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from decisionrag._eval._metrics import (
    Judgments,
    MetricSpec,
    dedupe,
    hit_at,
    mean_metrics,
    metric_counts,
    ndcg_at,
    normalise_text,
    recall_at,
    reciprocal_rank,
    score_run,
    text_groups,
)

GOLD = {"p2": 1, "p5": 1, "p9": 1}
RANKING = ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10"]


def test_recall_and_hit_at_cutoffs() -> None:
    assert recall_at(RANKING, GOLD, 1) == 0.0
    assert recall_at(RANKING, GOLD, 2) == pytest.approx(1 / 3)
    assert recall_at(RANKING, GOLD, 5) == pytest.approx(2 / 3)
    assert recall_at(RANKING, GOLD, 10) == pytest.approx(1.0)
    assert hit_at(RANKING, GOLD, 1) == 0.0
    assert hit_at(RANKING, GOLD, 2) == 1.0


def test_zero_graded_qrels_are_not_relevant() -> None:
    gold = {"p1": 0, "p3": 1}
    assert hit_at(RANKING, gold, 1) == 0.0
    assert recall_at(RANKING, gold, 3) == 1.0
    assert reciprocal_rank(RANKING, gold) == pytest.approx(1 / 3)


def test_mrr_stops_at_depth() -> None:
    assert reciprocal_rank(RANKING, GOLD, 10) == pytest.approx(0.5)
    assert reciprocal_rank(RANKING, {"p10": 1}, 10) == pytest.approx(0.1)
    assert reciprocal_rank(RANKING, {"p10": 1}, 5) == 0.0


def test_ndcg_hand_computed() -> None:
    # gold at ranks 2, 5, 9: DCG = 1/log2(3) + 1/log2(6) + 1/log2(10); ideal = ranks 1, 2, 3
    dcg = 1 / math.log2(3) + 1 / math.log2(6) + 1 / math.log2(10)
    idcg = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(RANKING, GOLD, 10) == pytest.approx(dcg / idcg)


def test_ndcg_uses_grades() -> None:
    gold = {"p1": 1, "p2": 2}
    # ranking p1 (gain 1) then p2 (gain 2); ideal is 2 then 1
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at(["p1", "p2"], gold, 10) == pytest.approx(expected)


def test_normalised_text_groups() -> None:
    assert normalise_text("  A\n b\tc ") == "A b c"
    assert normalise_text("A  B", lowercase=True) == "a b"
    groups = text_groups({"x": "Same  text", "y": "Same text", "z": "same text"})
    assert groups == {"x": "x", "y": "x", "z": "z"}
    assert text_groups({"x": "Same text", "z": "same TEXT"}, lowercase=True) == {"x": "x", "z": "x"}


def test_dedupe_keeps_first_occurrence() -> None:
    assert dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert dedupe(["a1", "b1", "a2"], key=lambda s: s[0]) == ["a", "b"]


def _judgments(groups: dict[str, str] | None = None) -> Judgments:
    qrels = {"q1": {"g1": 1}, "q2": {"g2": 1}, "q3": {}}
    gold_docs = {"q1": {"D1"}, "q2": {"D2"}, "q3": {"D3"}}
    doc_of = {"g1": "D1", "g1copy": "D9", "x": "D2", "g2": "D2", "y": "D3", "z": "D9"}
    return Judgments(qrels, gold_docs, doc_of, groups)


def test_duplicates_cannot_create_extra_hits() -> None:
    # g1copy has g1's text under another id. Without grouping it is no hit; with grouping it
    # is the gold group, and its later copy cannot push another passage out of the top 2.
    run = {"q1": ["g1copy", "g1", "z"]}
    plain = score_run(run, _judgments(), MetricSpec(ks=(1, 2), recall_ks=(1,)))
    assert plain["hit@1"]["q1"] == 0.0
    grouped = score_run(run, _judgments({"g1copy": "g1"}), MetricSpec(ks=(1, 2), recall_ks=(1,)))
    assert grouped["hit@1"]["q1"] == 1.0
    assert grouped["recall@1"]["q1"] == 1.0
    assert grouped["mrr@10"]["q1"] == 1.0


def test_grouping_removes_later_copies_from_the_ranking() -> None:
    # two copies of one non-gold text before the gold: without dedup gold is at rank 3,
    # with grouping the second copy is dropped and gold moves to rank 2
    judgments = _judgments({"x": "x", "z": "x"})
    run = {"q2": ["x", "z", "g2"]}
    assert score_run(run, _judgments())["mrr@10"]["q2"] == pytest.approx(1 / 3)
    assert score_run(run, judgments)["mrr@10"]["q2"] == pytest.approx(1 / 2)


def test_page_hit_from_documents_first_occurrence() -> None:
    run = {"q2": ["x", "y", "g2"], "q3": ["z", "g1", "y"]}
    values = score_run(run, _judgments(), MetricSpec(ks=(1, 2)))
    assert values["page_hit@1"] == {"q2": 1.0, "q3": 0.0}
    # q3: documents D9, D1, D3 -> D3 at page rank 3
    assert values["page_hit@2"]["q3"] == 0.0


def test_queries_without_evidence_count_only_for_pages() -> None:
    values = score_run({"q3": ["y"]}, _judgments())
    assert "hit@1" not in values and "recall@10" not in values
    assert values["page_hit@1"] == {"q3": 1.0}
    assert metric_counts(values) == {"page_hit@1": 1, "page_hit@5": 1, "page_hit@10": 1}


def test_means_are_prefixed_like_sentence_transformers() -> None:
    run = {"q1": ["g1", "x"], "q2": ["x", "y"]}
    means = mean_metrics(score_run(run, _judgments()), prefix="cqa")
    assert means["cqa_hit@1"] == pytest.approx(0.5)
    assert means["cqa_page_hit@1"] == pytest.approx(1.0)  # q1 -> D1, q2 -> D2
    assert set(means) >= {"cqa_hit@5", "cqa_recall@10", "cqa_ndcg@10", "cqa_mrr@10"}
    assert all(key.startswith("cqa_") for key in means)
