"""Retrieval metrics, as pure functions of rankings and relevance judgments.

Per-query values come first (they feed the paired bootstrap), means second. Passage metrics
count only queries with at least one relevant passage: a not-answerable question without
evidence has no passage to find, so it is left out of them (it still counts for page
metrics when qrels_docs.tsv names a page for it). Page metrics map a ranking of passages to
the ranking of their documents, first occurrence kept.

With text grouping (paper, App. E.1), retrieved and gold ids are both mapped to groups of
passages with identical normalised text, and only the first occurrence of each group is
kept in a ranking, so duplicate copies cannot create extra hits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

Ranking = Sequence[str]
Qrels = Mapping[str, Mapping[str, int]]
PerQuery = dict[str, dict[str, float]]  # metric -> query id -> value

DEFAULT_KS = (1, 5, 10)
_SPACE = re.compile(r"\s+")


def normalise_text(text: str, lowercase: bool = False) -> str:
    """Whitespace-normalised (and optionally lowercased) text, the key of a text group."""
    text = _SPACE.sub(" ", text).strip()
    return text.lower() if lowercase else text


def text_groups(texts: Mapping[str, str], lowercase: bool = False) -> dict[str, str]:
    """Passage id -> group id: the first id (in the mapping's order) sharing its normalised text."""
    first: dict[str, str] = {}
    groups: dict[str, str] = {}
    for passage_id, text in texts.items():
        groups[passage_id] = first.setdefault(normalise_text(text, lowercase), passage_id)
    return groups


def dedupe(ranking: Iterable[str], key: Callable[[str], str] | None = None) -> list[str]:
    """The ranking mapped through `key` with only the first occurrence of each value kept."""
    seen: set[str] = set()
    result: list[str] = []
    for item in ranking:
        mapped = key(item) if key else item
        if mapped not in seen:
            seen.add(mapped)
            result.append(mapped)
    return result


# -- per-query metrics -------------------------------------------------------------------


def recall_at(ranking: Ranking, gold: Mapping[str, int], k: int) -> float:
    relevant = {g for g, s in gold.items() if s > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def hit_at(ranking: Ranking, gold: Mapping[str, int], k: int) -> float:
    return 1.0 if any(gold.get(item, 0) > 0 for item in ranking[:k]) else 0.0


def reciprocal_rank(ranking: Ranking, gold: Mapping[str, int], k: int = 10) -> float:
    for rank, item in enumerate(ranking[:k], 1):
        if gold.get(item, 0) > 0:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranking: Ranking, gold: Mapping[str, int], k: int = 10) -> float:
    """nDCG with linear gains (the qrels score) and log2 discounts, as in trec_eval."""
    dcg = sum(
        max(gold.get(item, 0), 0) / math.log2(rank + 1) for rank, item in enumerate(ranking[:k], 1)
    )
    ideal = sorted((s for s in gold.values() if s > 0), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def _grouped_gold(gold: Mapping[str, int], group: Callable[[str], str]) -> dict[str, int]:
    """Gold mapped to groups; a group's grade is the best grade of its members."""
    grouped: dict[str, int] = {}
    for item, score in gold.items():
        key = group(item)
        grouped[key] = max(grouped.get(key, score), score)
    return grouped


@dataclass(frozen=True)
class MetricSpec:
    """Which metrics to compute: cut-offs for Hit@k and Recall@k, and the nDCG/MRR depth."""

    ks: tuple[int, ...] = DEFAULT_KS
    recall_ks: tuple[int, ...] = DEFAULT_KS
    depth: int = 10


def passage_metrics(
    ranking: Ranking, gold: Mapping[str, int], spec: MetricSpec
) -> dict[str, float]:
    values = {f"hit@{k}": hit_at(ranking, gold, k) for k in spec.ks}
    values.update({f"recall@{k}": recall_at(ranking, gold, k) for k in spec.recall_ks})
    values[f"ndcg@{spec.depth}"] = ndcg_at(ranking, gold, spec.depth)
    values[f"mrr@{spec.depth}"] = reciprocal_rank(ranking, gold, spec.depth)
    return values


def page_metrics(doc_ranking: Ranking, gold_docs: set[str], spec: MetricSpec) -> dict[str, float]:
    gold = dict.fromkeys(gold_docs, 1)
    return {f"page_hit@{k}": hit_at(doc_ranking, gold, k) for k in spec.ks}


# -- a whole run -------------------------------------------------------------------------


@dataclass
class Judgments:
    """What a run is scored against: passage qrels, gold pages per query, passage -> page."""

    qrels: Qrels
    gold_docs: Mapping[str, set[str]]
    doc_of: Mapping[str, str]
    groups: Mapping[str, str] | None = None  # passage -> text group, when grouping


def score_run(
    run: Mapping[str, Ranking], judgments: Judgments, spec: MetricSpec = MetricSpec()
) -> PerQuery:
    """Per-query metric values for every query of `run` that has the gold a metric needs."""
    per_query: PerQuery = {}
    groups = judgments.groups
    for query_id, ranking in run.items():
        gold = judgments.qrels.get(query_id, {})
        if any(s > 0 for s in gold.values()):
            if groups is not None:
                ranked = dedupe(ranking, lambda p: groups.get(p, p))
                gold = _grouped_gold(gold, lambda p: groups.get(p, p))
            else:
                ranked = dedupe(ranking)
            _store(per_query, query_id, passage_metrics(ranked, gold, spec))
        gold_docs = judgments.gold_docs.get(query_id)
        if gold_docs:
            docs = dedupe(ranking, lambda p: judgments.doc_of.get(p, p))
            _store(per_query, query_id, page_metrics(docs, gold_docs, spec))
    return per_query


def _store(per_query: PerQuery, query_id: str, values: Mapping[str, float]) -> None:
    for metric, value in values.items():
        per_query.setdefault(metric, {})[query_id] = value


def mean_metrics(per_query: PerQuery, prefix: str = "") -> dict[str, float]:
    """Means over the queries each metric counts, keys prefixed (``cqa_hit@1``)."""
    head = f"{prefix}_" if prefix else ""
    return {f"{head}{metric}": sum(v.values()) / len(v) for metric, v in per_query.items() if v}


def metric_counts(per_query: PerQuery) -> dict[str, int]:
    """How many queries each metric averages over."""
    return {metric: len(values) for metric, values in per_query.items()}
