"""The pure functions retrieval ranks with: the top k of a score array (`top_positions`,
ties by position, narrowed piece by piece over millions of scores) and reciprocal-rank
fusion (`rrf` of keyed rankings, `rrf_ids` of rankings of integer ids, the same scores)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

TOP_PIECE = 1 << 17  # scores looked through per piece when the array is larger (512 kB of float32)


def top_positions(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores, best first, ties broken by position (also at the
    cut-off). An array larger than `TOP_PIECE` is first narrowed piece by piece (the same
    positions come out): a full-size negated copy and its partition would take three times
    the scores' memory (30 MB at 2.68 M passages) on every query."""
    k = min(k, scores.size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if scores.size > TOP_PIECE and 2 * k < TOP_PIECE:
        near = _near_the_top(scores, k)
        if near is not None:
            return near[_best_first(scores[near], k)]
    return _best_first(scores, k)


def _best_first(scores: np.ndarray, k: int) -> np.ndarray:
    negated = -scores
    near = _sampled_near(negated, k)
    if near is None:
        kth = np.partition(negated, k - 1)[k - 1]
        better = np.flatnonzero(negated < kth)
        tied = np.flatnonzero(negated == kth)[: k - better.size]
    else:  # the same k-th value, partitioned among far fewer
        values = negated[near]
        kth = np.partition(values, k - 1)[k - 1]
        better = near[values < kth]
        tied = near[values == kth][: k - better.size]
    candidates = np.concatenate([better, tied])
    # each part ascending, and no value in both: a stable sort keeps ties in position order
    return candidates[np.argsort(negated[candidates], kind="stable")]


SAMPLED_FROM = 8_192  # arrays at least this long (and 8 k) are narrowed by a sample first


def _sampled_near(negated: np.ndarray, k: int) -> np.ndarray | None:
    """Ascending positions of the values at or below a bound taken from every 8th value
    (a little past its k/8-th smallest), when at least k values are (so the k-th smallest
    is among them, and every value below it or tied with it); None otherwise (a short
    array, a bound too low, NaN), where the whole array is partitioned."""
    if negated.size < SAMPLED_FROM or 8 * k > negated.size:
        return None
    sample = negated[::8]
    rank = min(sample.size - 1, k // 8 + k // 32 + 8)
    bound = np.partition(sample, rank)[rank]
    near = np.flatnonzero(negated <= bound)
    return near if near.size >= k else None


def _near_the_top(scores: np.ndarray, k: int) -> np.ndarray | None:
    """Ascending positions that hold the k best: per piece, those above the piece's k-th
    best and the first k tied with it. Every score the top k takes is among them (a piece
    never has k scores above the overall k-th; ties past a piece's first k are never
    reached). None where the plain path must decide (fewer than k comparable scores, NaN)."""
    near = []
    for start in range(0, scores.size, TOP_PIECE):
        negated = -scores[start:start + TOP_PIECE]
        if negated.size <= k:
            near.append(np.arange(start, start + negated.size))
            continue
        kth = np.partition(negated, k - 1)[k - 1]
        if np.isnan(kth):
            return None
        better = np.flatnonzero(negated < kth)
        tied = np.flatnonzero(negated == kth)[:k]
        near.append(np.union1d(better, tied) + start)
    found = np.concatenate(near)
    return found if found.size >= k and not np.isnan(scores[found]).any() else None


def top_k(scores: np.ndarray, keys: Sequence[str], k: int) -> list[tuple[str, float]]:
    """The k best (key, score) pairs, ties broken by corpus order (also at the cut-off)."""
    return [(keys[i], float(scores[i])) for i in top_positions(scores, k)]


RRF_K = 60


def rrf(rankings: Sequence[Sequence[tuple[Hashable, float]]], k: int,
        constant: int = RRF_K) -> list[tuple[Any, float]]:
    """Fuse rankings by reciprocal rank; ties broken by first appearance."""
    fused: dict[Hashable, float] = {}
    for ranking in rankings:
        for rank, (key, _score) in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (constant + rank)
    order = sorted(fused.items(), key=lambda item: -item[1])
    return order[:k]


def rrf_ids(rankings: Sequence[np.ndarray], k: int, constant: int = RRF_K
            ) -> tuple[np.ndarray, np.ndarray]:
    """`rrf` of rankings of integer ids, as arrays (ids, scores): the same fused scores (each
    the same sum in the same order: 0.0, then each ranking's 1 / (constant + rank)) and the
    same order (ties by first appearance), computed without a Python step per id."""
    arrays = [np.asarray(ranking, dtype=np.int64) for ranking in rankings]
    if any(map(_repeats, arrays)):  # an id twice in one ranking
        fused = rrf([[(i, 0.0) for i in a.tolist()] for a in arrays], k, constant)
        return (np.asarray([i for i, _ in fused], dtype=np.int64),
                np.asarray([v for _, v in fused], dtype=np.float64))
    ids = np.zeros(0, dtype=np.int64)
    scores = np.zeros(0, dtype=np.float64)
    for a in arrays:
        values = 1.0 / (constant + np.arange(1, a.size + 1, dtype=np.int64))
        sorter = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids, a, sorter=sorter), max(ids.size - 1, 0))
        seen = (ids[sorter[at]] == a) if ids.size else np.zeros(a.size, dtype=bool)
        scores[sorter[at[seen]]] += values[seen]
        ids = np.concatenate([ids, a[~seen]])
        scores = np.concatenate([scores, 0.0 + values[~seen]])
    best = np.argsort(-scores, kind="stable")[:k]
    return ids[best], scores[best]


def _repeats(ids: np.ndarray) -> bool:
    """Whether some id occurs twice (sorted and compared: `np.unique` of 1,000 ids hashes
    them, five times slower)."""
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())
