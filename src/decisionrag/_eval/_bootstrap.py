"""Paired bootstrap intervals for the difference between two systems on the same queries.

Queries of one conversation are not independent, so when ids carry a conversation prefix
(``<conversation><::><turn>``) whole conversations are resampled. A resample draws
conversations with replacement (multinomial counts); the statistic of a resample is the mean
per-query difference over all queries it contains, computed for all resamples at once as
``(counts @ sums) / (counts @ sizes)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ._data import CONVERSATION_SEP

DEFAULT_RESAMPLES = 10_000


@dataclass(frozen=True, slots=True)
class Interval:
    """Mean difference (system minus baseline) and its 95 % bootstrap interval."""

    diff: float
    low: float
    high: float
    n: int

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_list(self) -> list[float]:
        return [round(self.diff, 6), round(self.low, 6), round(self.high, 6)]


def conversation_of(query_id: str) -> str:
    return query_id.split(CONVERSATION_SEP, 1)[0]


def paired_bootstrap(
    system: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    clusters: Sequence[str] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Percentile interval of mean(system - baseline), resampling clusters when given."""
    a = np.asarray(system, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("paired bootstrap needs two equally long 1-d sequences")
    if a.size == 0:
        return Interval(0.0, 0.0, 0.0, 0)
    diffs = a - b
    sums, sizes = _cluster_totals(diffs, clusters)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(sums), np.full(len(sums), 1.0 / len(sums)), size=resamples)
    means = (counts @ sums) / (counts @ sizes)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(diffs.mean()), float(low), float(high), int(a.size))


def _cluster_totals(
    diffs: np.ndarray, clusters: Sequence[str] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums of differences and sizes (each query its own cluster when none)."""
    if clusters is None:
        return diffs, np.ones_like(diffs)
    if len(clusters) != diffs.size:
        raise ValueError("one cluster label per query is needed")
    _, index = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    sums = np.bincount(index, weights=diffs)
    sizes = np.bincount(index).astype(np.float64)
    return sums, sizes


def compare(
    system: Mapping[str, float],
    baseline: Mapping[str, float],
    *,
    by_conversation: bool | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Interval of the difference over the queries both systems were scored on.

    `by_conversation=None` resamples conversations whenever any id holds ``<::>``.
    """
    ids = sorted(set(system) & set(baseline))
    if by_conversation is None:
        by_conversation = any(CONVERSATION_SEP in i for i in ids)
    clusters = [conversation_of(i) for i in ids] if by_conversation else None
    return paired_bootstrap(
        [system[i] for i in ids],
        [baseline[i] for i in ids],
        clusters,
        resamples=resamples,
        seed=seed,
    )
