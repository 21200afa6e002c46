"""Balanced, seeded k-means and the group hierarchy built from it.

Vectors are L2-normalised, so Euclidean k-means groups by cosine similarity. After k-means,
groups are balanced: groups below ``min_size`` are dissolved into their members' nearest
other groups, groups above ``max_size`` are bisected at the median of their principal axis,
and the largest groups are bisected until the requested number of groups is reached. Levels
are stacked (clustering the groups' centroids) until no level holds more than ``branching``
nodes, so N documents get ⌈log_b N⌉ levels (one more only when N is so close to b^L that
balanced groups cannot all fit under b children).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._errors import InputError, missing_extra

DEFAULT_BRANCHING = 1000
_CHAIN_LIMIT = 5000  # above this many siblings, order by a 1-D projection instead of a chain


@dataclass(slots=True)
class Level:
    """One level of groups. ``labels[i]`` is the group of item i of the level below
    (documents for level 0, level-0 groups for level 1, …)."""

    labels: np.ndarray
    centroids: np.ndarray
    splits: int = 0
    merges: int = 0

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=len(self.centroids))


@dataclass(slots=True)
class Bounds:
    min_size: int
    max_size: int


@dataclass(slots=True)
class Hierarchy:
    levels: list[Level] = field(default_factory=list)  # level 0 = leaf groups


def levels_for(n_items: int, branching: int) -> int:
    """⌈log_b N⌉ computed exactly: the number of levels below the root (at least 1)."""
    levels, capacity = 1, branching
    while capacity < n_items:
        levels, capacity = levels + 1, capacity * branching
    return levels


def auto_groups(n_items: int, branching: int) -> int:
    """Leaf groups for ``--cluster auto``: an even fan-out of about N^(1/L) per level with
    L = max(2, ⌈log_b N⌉) levels, so the top level and every group stay under `branching`."""
    levels = max(2, levels_for(n_items, branching))
    return max(1, min(n_items, round(n_items ** ((levels - 1) / levels))))


def default_bounds(n_items: int, n_groups: int, branching: int,
                   min_size: int | None = None, max_size: int | None = None) -> Bounds:
    """Group-size bounds around the mean N/k: [mean/5, 3·mean], capped at `branching` unless
    the groups asked for are too few for that (mean above `branching`)."""
    mean = n_items / max(1, n_groups)
    low = min_size if min_size is not None else max(1, math.floor(mean / 5))
    high = max(2, math.ceil(3 * mean))
    if branching >= mean:
        high = min(high, branching)
    high = max_size if max_size is not None else high
    if low < 1 or high < max(2, low):
        raise InputError(f"group size bounds min={low}, max={high} are not usable")
    return Bounds(low, high)


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def group_centroids(vectors: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """Normalised mean vector of every group (one sparse product, not a Python loop)."""
    from scipy import sparse

    onehot = sparse.csr_matrix(
        (np.ones(len(labels), dtype=np.float32), (labels, np.arange(len(labels)))),
        shape=(n_groups, len(labels)))
    return normalise(np.asarray(onehot @ vectors))


def kmeans(vectors: np.ndarray, k: int, seed: int, weights: np.ndarray | None = None,
           max_iter: int = 30) -> np.ndarray:
    """Labels of plain seeded k-means (k-means++ initialisation, one run)."""
    if k >= len(vectors):
        return np.arange(len(vectors))
    if k <= 1:
        return np.zeros(len(vectors), dtype=np.int64)
    try:
        from sklearn.cluster import KMeans, kmeans_plusplus
        from threadpoolctl import threadpool_limits
    except ImportError as exc:
        raise missing_extra("scikit-learn", "cluster") from exc
    # Multi-threaded BLAS inside k-means' many small products spins badly on a busy CPU
    # (10x slower measured on 2 shared cores); sklearn's own OpenMP loops keep their threads.
    with threadpool_limits(limits=1, user_api="blas"):
        centres = _initial_centres(vectors, k, seed, weights, kmeans_plusplus)
        model = KMeans(n_clusters=k, init=centres, n_init=1, max_iter=max_iter, tol=1e-4,
                       random_state=seed)
        labels = model.fit_predict(vectors, sample_weight=weights)
    return np.asarray(labels, dtype=np.int64)


def _initial_centres(vectors: np.ndarray, k: int, seed: int, weights: np.ndarray | None,
                     plusplus: Any) -> np.ndarray:
    """k-means++ seeds drawn from a seeded sample of at most max(10k, 10·k) rows: the full
    k-means++ costs k passes over all rows, which dominates at 100k rows and 1,000 groups."""
    rng = np.random.default_rng(seed)
    size = min(len(vectors), max(10_000, 10 * k))
    rows = np.sort(rng.choice(len(vectors), size=size, replace=False))
    sample_weight = weights[rows] if weights is not None else None
    centres, _ = plusplus(vectors[rows], k, random_state=seed, sample_weight=sample_weight)
    return np.asarray(centres, dtype=vectors.dtype)


def bisect(vectors: np.ndarray) -> np.ndarray:
    """Split rows into two halves at the median of their principal axis (True = second half)."""
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axis = vt[0] if vt[0].sum() >= 0 else -vt[0]  # fix SVD's arbitrary sign: deterministic halves
    order = np.argsort(centred @ axis, kind="stable")
    second = np.zeros(len(vectors), dtype=bool)
    second[order[len(order) // 2:]] = True
    return second


class _Balancer:
    """Dissolves tiny groups and bisects oversize ones until sizes fit the bounds."""

    def __init__(self, vectors: np.ndarray, labels: np.ndarray, bounds: Bounds) -> None:
        self.vectors = vectors
        self.labels = labels.copy()
        self.bounds = bounds
        self.k = int(labels.max()) + 1 if len(labels) else 0
        self.centroids = group_centroids(vectors, self.labels, self.k)
        self.splits = 0
        self.merges = 0

    def run(self, target: int) -> Level:
        for _ in range(4 * max(target, self.k) + 100):
            sizes = np.bincount(self.labels, minlength=self.k)
            if not self._step(sizes, target):
                break
        return Level(self.labels, self.centroids, self.splits, self.merges)

    def _step(self, sizes: np.ndarray, target: int) -> bool:
        smallest, largest = int(np.argmin(sizes)), int(np.argmax(sizes))
        if self.k > 1 and sizes[smallest] < self.bounds.min_size:
            self._dissolve(smallest)
        elif sizes[largest] > self.bounds.max_size or self._may_grow(sizes[largest], target):
            self._split(largest)
        else:
            return False
        return True

    def _may_grow(self, largest: int, target: int) -> bool:
        return self.k < target and largest >= 2 * self.bounds.min_size

    def _dissolve(self, group: int) -> None:
        members = np.flatnonzero(self.labels == group)
        keep = np.arange(self.k) != group
        scores = self.vectors[members] @ self.centroids[keep].T
        remap = np.cumsum(keep) - 1  # old label -> new label once `group` is gone
        self.labels = remap[self.labels]
        self.centroids = self.centroids[keep]
        self.k -= 1
        self.labels[members] = np.argmax(scores, axis=1)
        for receiver in np.unique(self.labels[members]):
            self._recentre(int(receiver))
        self.merges += 1

    def _split(self, group: int) -> None:
        members = np.flatnonzero(self.labels == group)
        second = bisect(self.vectors[members])
        self.labels[members[second]] = self.k
        extra = np.zeros((1, self.centroids.shape[1]), np.float32)
        self.centroids = np.vstack([self.centroids, extra])
        self.k += 1
        self._recentre(group)
        self._recentre(self.k - 1)
        self.splits += 1

    def _recentre(self, group: int) -> None:
        members = self.vectors[self.labels == group]
        self.centroids[group] = normalise(members.mean(axis=0, keepdims=True))[0]


KMeansFn = Callable[[np.ndarray, int, int], np.ndarray]  # (vectors, k, seed) -> labels


def balanced_kmeans(vectors: np.ndarray, k: int, bounds: Bounds, seed: int,
                    weights: np.ndarray | None = None, kmeans_fn: KMeansFn | None = None) -> Level:
    """k-means (`kmeans_fn`, default scikit-learn's), then dissolve/bisect groups until every
    size is within `bounds`."""
    labels = kmeans(vectors, k, seed, weights) if kmeans_fn is None else kmeans_fn(vectors, k, seed)
    _, labels = np.unique(labels, return_inverse=True)  # k-means may leave a label empty
    return _Balancer(vectors, labels.astype(np.int64), bounds).run(k)


def build_hierarchy(vectors: np.ndarray, n_groups: int, *, branching: int = DEFAULT_BRANCHING,
                    seed: int = 0, min_size: int | None = None,
                    max_size: int | None = None) -> tuple[Hierarchy, Bounds]:
    """Leaf groups of the documents, then parent levels while a level exceeds `branching`."""
    check_branching(branching)
    bounds = default_bounds(len(vectors), n_groups, branching, min_size, max_size)
    hierarchy = Hierarchy([balanced_kmeans(vectors, n_groups, bounds, seed)])
    stack_levels(hierarchy, vectors, branching, seed, group_centroids)
    return hierarchy, bounds


def check_branching(branching: int) -> None:
    if branching < 2:
        raise InputError(f"the branching factor must be at least 2, not {branching}")


CentroidFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def stack_levels(hierarchy: Hierarchy, vectors: np.ndarray, branching: int, seed: int,
                 centroids_of: CentroidFn) -> None:
    """Add parent levels above the top one while it exceeds `branching`; a parent's centroid
    is the mean of all documents below it (`centroids_of(vectors, labels, k)`)."""
    while len(hierarchy.levels[-1].centroids) > branching:
        below = hierarchy.levels[-1]
        parents = auto_groups(len(below.centroids), branching)
        upper_bounds = default_bounds(len(below.centroids), parents, branching, max_size=branching)
        level = balanced_kmeans(below.centroids, parents, upper_bounds, seed, weights=below.sizes)
        doc_labels = document_labels([*hierarchy.levels, level])
        level.centroids = centroids_of(vectors, doc_labels, len(level.centroids))
        hierarchy.levels.append(level)


def members_by_group(labels: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """For every group, the indices labelled with it, ascending: one sort for all groups
    (a scan per group costs N·k, which at 10 M documents and 46 k groups never finishes)."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_groups + 1))
    return [order[bounds[g]:bounds[g + 1]] for g in range(n_groups)]


def document_labels(levels: list[Level]) -> np.ndarray:
    """For every document, its group at the top of `levels`."""
    labels = levels[0].labels
    for level in levels[1:]:
        labels = level.labels[labels]
    return labels


def chain_order(centroids: np.ndarray) -> list[int]:
    """An order in which similar groups sit together: a greedy nearest-neighbour chain
    starting at one end of the principal axis (a 1-D projection for very many groups)."""
    n = len(centroids)
    if n <= 2:
        return list(range(n))
    projection = (centroids - centroids.mean(axis=0)) @ _principal_axis(centroids)
    if n > _CHAIN_LIMIT:
        return [int(i) for i in np.argsort(projection, kind="stable")]
    similarity = centroids @ centroids.T
    visited = np.zeros(n, dtype=bool)
    current = int(np.argmin(projection))
    order = [current]
    visited[current] = True
    for _ in range(n - 1):
        row = np.where(visited, -np.inf, similarity[current])
        current = int(np.argmax(row))
        visited[current] = True
        order.append(current)
    return order


def _principal_axis(vectors: np.ndarray) -> np.ndarray:
    _, _, vt = np.linalg.svd(vectors - vectors.mean(axis=0), full_matrices=False)
    return vt[0] if vt[0].sum() >= 0 else -vt[0]


def typical_order(vectors: np.ndarray, centroid: np.ndarray) -> np.ndarray:
    """Row indices from most to least typical (cosine similarity to the centroid)."""
    return np.argsort(-(vectors @ centroid), kind="stable")
