"""Our metrics against trec_eval (through pytrec_eval) on random runs and qrels.

Random qrels carry graded relevance (0-3, zero meaning judged non-relevant), random runs carry
tied scores, and some queries have empty or missing runs. Every metric is compared per query:
Recall@k = recall_k, nDCG@10 = ndcg_cut_10, MRR@10 = recip_rank of the run cut at 10
(trec_eval's has no cut-off), Hit@k = success_k.

Where we differ from trec_eval, the difference is tested here, not hidden:
* ties: trec_eval orders equal scores by docid, descending; we keep the order the run file
  gives them (its rank column). Read with ``tie_break="docid"`` our numbers equal trec_eval's
  on the raw scores; read the default way they equal trec_eval's on the file's order.
* a missing query scores zero for us (trec_eval -c); trec_eval without -c leaves it out.
* queries without a relevant passage are left out of our passage means; trec_eval counts 0.
* text groups and page Hit@k are our own definitions: they equal trec_eval applied to the
  run and qrels mapped to groups (or pages), first occurrence kept, and differ from trec_eval
  on the raw ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytrec_eval

from decisionrag._eval._metrics import Judgments, MetricSpec, dedupe, mean_metrics, score_run
from decisionrag._eval._runs import align, read_run, write_trec

KS = (1, 3, 5, 10)
SPEC = MetricSpec(ks=KS, recall_ks=KS, depth=10)
MEASURES = {"recip_rank", "ndcg_cut.10", "recall." + ",".join(map(str, KS)),
            "success." + ",".join(map(str, KS))}
DOCS = [f"d{i:02d}" for i in range(40)]


def ours_to_trec_names(metric: str) -> str:
    name, k = metric.split("@")
    return {"hit": f"success_{k}", "recall": f"recall_{k}", "ndcg": f"ndcg_cut_{k}",
            "mrr": "recip_rank"}[name]


def random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """qrels with grades 0-3 (some queries without any relevant doc) and a run with ties."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(25):
        qid = f"q{q}"
        judged = rng.choice(DOCS, size=int(rng.integers(1, 12)), replace=False)
        qrels[qid] = {str(d): int(rng.integers(0, 4)) for d in judged}
        shape = rng.random()
        if shape < 0.08:
            continue  # missing from the run
        if shape < 0.16:
            run[qid] = {}  # present, nothing retrieved
            continue
        retrieved = rng.choice(DOCS, size=int(rng.integers(1, 30)), replace=False)
        # few distinct score values: ties everywhere, also across the cut-off at 10
        run[qid] = {str(d): float(rng.integers(0, 6)) / 2 for d in retrieved}
    return qrels, run


def trec_eval(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, Any]:
    return pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)


def write_run(path: Path, run: dict[str, dict[str, float]], seed: int = 0) -> None:
    """A TREC file with ranks 1..n in score order, ties in a random (not docid) order."""
    rng = np.random.default_rng(seed)
    lines = []
    for qid, scores in run.items():
        items = list(scores.items())
        rng.shuffle(items)  # type: ignore[arg-type]
        items.sort(key=lambda x: -x[1])  # stable: ties stay shuffled
        lines += [f"{qid} Q0 {d} {r} {s} test" for r, (d, s) in enumerate(items, 1)]
    path.write_text("\n".join(lines) + "\n")


def our_per_query(
    path: Path, qrels: dict[str, dict[str, int]], tie_break: str
) -> dict[str, dict[str, float]]:
    run = read_run(path, "test", tie_break)
    rankings, _ = align(run, sorted(qrels), set(DOCS), depth=10)
    judgments = Judgments(qrels, {}, {})
    return score_run({q: [d for d, _ in r] for q, r in rankings.items()}, judgments, SPEC)


def cut(run: dict[str, dict[str, float]], rankings: dict[str, list[str]] | None = None,
        k: int = 10) -> dict[str, dict[str, float]]:
    """The top k of each query with strictly decreasing scores that encode the given order."""
    result = {}
    for qid in run:
        order = rankings[qid] if rankings is not None else sorted(run[qid], key=lambda d: (run[qid][d], d),
                                                                  reverse=True)
        result[qid] = {d: float(k - i) for i, d in enumerate(order[:k])}
    return result


def relevant_queries(qrels: dict[str, dict[str, int]]) -> list[str]:
    return sorted(q for q, g in qrels.items() if any(s > 0 for s in g.values()))


def assert_same(ours: dict[str, dict[str, float]], reference: dict[str, Any], queries: list[str]) -> None:
    for metric, values in ours.items():
        if metric.startswith("page_"):
            continue
        name = ours_to_trec_names(metric)
        for q in queries:
            expected = reference.get(q, {}).get(name, 0.0)  # missing query: 0, as trec_eval -c
            assert values[q] == pytest.approx(expected, abs=1e-12), (metric, q)


@pytest.mark.parametrize("seed", range(12))
def test_trec_eval_tie_break_reproduces_trec_eval_on_raw_scores(seed: int, tmp_path: Path) -> None:
    qrels, run = random_case(seed)
    write_run(tmp_path / "run.trec", run, seed=seed)
    ours = our_per_query(tmp_path / "run.trec", qrels, "docid")
    queries = relevant_queries(qrels)
    assert set(ours["ndcg@10"]) == set(queries)
    # trec_eval sorts the whole run by (score, docid) descending; recip_rank has no cut-off
    assert_same(ours, trec_eval(qrels, cut(run)), queries)
    for k in KS:  # recall and success also hold on the uncut run
        full = trec_eval(qrels, run)
        for q in queries:
            assert ours[f"recall@{k}"][q] == pytest.approx(full.get(q, {}).get(f"recall_{k}", 0.0))
            assert ours[f"hit@{k}"][q] == pytest.approx(full.get(q, {}).get(f"success_{k}", 0.0))


@pytest.mark.parametrize("seed", range(12))
def test_file_order_equals_trec_eval_on_that_order(seed: int, tmp_path: Path) -> None:
    qrels, run = random_case(seed)
    write_run(tmp_path / "run.trec", run, seed=seed)
    ours = our_per_query(tmp_path / "run.trec", qrels, "file")
    file_order = read_run(tmp_path / "run.trec").ids()
    file_order.update({q: [] for q in run if q not in file_order})
    assert_same(ours, trec_eval(qrels, cut(run, file_order)), relevant_queries(qrels))


def test_ties_are_where_the_two_orders_differ(tmp_path: Path) -> None:
    qrels = {"q": {"a": 1}}
    (tmp_path / "run.trec").write_text("q Q0 a 1 2.0 t\nq Q0 b 2 2.0 t\n")  # a tie, a ranked first
    assert trec_eval(qrels, {"q": {"a": 2.0, "b": 2.0}})["q"]["success_1"] == 0.0  # b first
    assert our_per_query(tmp_path / "run.trec", qrels, "file")["hit@1"]["q"] == 1.0
    assert our_per_query(tmp_path / "run.trec", qrels, "docid")["hit@1"]["q"] == 0.0


def test_missing_and_empty_queries_score_zero_and_irrelevant_ones_are_left_out(tmp_path: Path) -> None:
    qrels = {"hit": {"a": 1}, "empty": {"a": 1}, "missing": {"a": 1}, "nothing": {"a": 0}}
    (tmp_path / "run.trec").write_text("hit Q0 a 1 1 t\nnothing Q0 a 1 1 t\n")
    run = read_run(tmp_path / "run.trec")
    run.rankings["empty"] = []
    rankings, alignment = align(run, sorted(qrels), {"a"}, 10)
    assert alignment.missing_queries == ["missing"]
    per_query = score_run({q: [d for d, _ in r] for q, r in rankings.items()}, Judgments(qrels, {}, {}), SPEC)
    assert per_query["hit@1"] == {"empty": 0.0, "hit": 1.0, "missing": 0.0}
    assert mean_metrics(per_query)["hit@1"] == pytest.approx(1 / 3)
    reference = trec_eval(qrels, {"hit": {"a": 1.0}, "empty": {}, "nothing": {"a": 1.0}})
    assert "missing" not in reference  # trec_eval without -c skips it; we count it as empty
    assert reference["nothing"]["success_1"] == 0.0  # trec_eval counts it; our mean leaves it out


def test_our_exported_runs_give_trec_eval_our_numbers_despite_tied_scores(tmp_path: Path) -> None:
    qrels, run = random_case(99)
    judgments = Judgments(qrels, {}, {})
    rng = np.random.default_rng(5)
    rankings = {q: [str(d) for d in rng.permutation(sorted(r))][:10] for q, r in run.items()}
    scores = {q: [1.0] * len(r) for q, r in rankings.items()}  # all tied: export must re-score
    write_trec(tmp_path / "ours.trec", rankings, scores, "decisionrag")
    with (tmp_path / "ours.trec").open() as handle:
        exported = pytrec_eval.parse_run(handle)
    ours = score_run(rankings, judgments, SPEC)
    assert_same(ours, trec_eval(qrels, exported), [q for q in relevant_queries(qrels) if q in rankings])


# -- where our definitions are our own -----------------------------------------------------------


def group_case(seed: int) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, list[str]]]:
    rng = np.random.default_rng(seed)
    groups = {d: f"g{int(rng.integers(0, 15))}" for d in DOCS}  # about 2.7 copies per text
    qrels, run = random_case(seed)
    rankings = {q: sorted(r, key=lambda d: (-r[d], d))[:10] for q, r in run.items()}
    return groups, qrels, rankings


@pytest.mark.parametrize("seed", range(8))
def test_text_groups_equal_trec_eval_on_group_mapped_runs(seed: int) -> None:
    groups, qrels, rankings = group_case(seed)
    ours = score_run(rankings, Judgments(qrels, {}, {}, groups), SPEC)
    mapped_qrels: dict[str, dict[str, int]] = {}
    for q, gold in qrels.items():
        for d, grade in gold.items():
            mapped_qrels.setdefault(q, {})
            mapped_qrels[q][groups[d]] = max(mapped_qrels[q].get(groups[d], grade), grade)
    mapped_run = {q: dedupe(r, groups.__getitem__) for q, r in rankings.items()}
    reference = trec_eval(mapped_qrels, cut({q: dict.fromkeys(r, 0.0) for q, r in mapped_run.items()},
                                             mapped_run))
    assert_same(ours, reference, [q for q in relevant_queries(mapped_qrels) if q in rankings])


def test_text_groups_differ_from_trec_eval_on_raw_ids() -> None:
    groups = {"a": "a", "a-copy": "a", "b": "b"}
    qrels, rankings = {"q": {"a": 1}}, {"q": ["a-copy", "a", "b"]}
    ours = score_run(rankings, Judgments(qrels, {}, {}, groups), SPEC)
    raw = trec_eval(qrels, {"q": {"a-copy": 3.0, "a": 2.0, "b": 1.0}})["q"]
    assert ours["hit@1"]["q"] == 1.0 and raw["success_1"] == 0.0  # the copy is the gold text
    assert ours["recall@3"]["q"] == raw["recall_3"] == 1.0
    assert ours["ndcg@10"]["q"] == 1.0 and raw["ndcg_cut_10"] < 1.0  # the later copy is dropped


@pytest.mark.parametrize("seed", range(8))
def test_page_hit_equals_trec_eval_success_on_the_page_ranking(seed: int) -> None:
    rng = np.random.default_rng(seed)
    doc_of = {d: f"page{int(rng.integers(0, 8))}" for d in DOCS}
    qrels, run = random_case(seed)
    rankings = {q: sorted(r, key=lambda d: (-r[d], d))[:10] for q, r in run.items()}
    gold_pages = {q: {doc_of[d] for d, s in g.items() if s > 0} for q, g in qrels.items()}
    ours = score_run(rankings, Judgments(qrels, gold_pages, doc_of), SPEC)
    pages = {q: dedupe(r, doc_of.__getitem__) for q, r in rankings.items()}
    page_qrels = {q: dict.fromkeys(p, 1) for q, p in gold_pages.items() if p}
    reference = trec_eval(page_qrels, cut({q: dict.fromkeys(p, 0.0) for q, p in pages.items()}, pages))
    for q in page_qrels:
        if q not in rankings:
            continue
        for k in KS:
            assert ours[f"page_hit@{k}"][q] == reference.get(q, {}).get(f"success_{k}", 0.0)


def test_page_hit_differs_from_passage_success() -> None:
    doc_of = {"p1": "A", "p2": "A", "p3": "B"}
    qrels = {"q": {"p2": 1}}
    ours = score_run({"q": ["p1", "p3", "p2"]}, Judgments(qrels, {"q": {"A"}}, doc_of), SPEC)
    raw = trec_eval(qrels, {"q": {"p1": 3.0, "p3": 2.0, "p2": 1.0}})["q"]
    assert ours["page_hit@1"]["q"] == 1.0 and raw["success_1"] == 0.0  # p1 lies on the gold page
    assert ours["hit@1"]["q"] == 0.0  # the passage metric agrees with trec_eval
