"""Clustering corpora whose vectors do not fit one k-means: partition first, then cluster.

Above `PARTITION_ROWS` documents one balanced k-means over every vector stops being
practical (k-means copies its input; N·k distance blocks; hours per iteration at 10 M × 46 k).
The two-level scheme: seeded k-means on a sample gives `parts` coarse centres; every
document goes to its nearest centre in chunks
(one matrix product per chunk, so `vectors` may be a memory map); each part is clustered on
its own with the same balancing and the same size bounds as the one-pass path, its
share of the leaf groups in proportion to its size; the parent levels are stacked as usual,
with centroids summed chunk by chunk. Same vectors and seed, same hierarchy, whichever
engine computed the vectors. Both k-means steps run on faiss when it is installed
(the `faiss` extra: 20 iterations of seeded spherical k-means, ≤ 256 rows per centroid
sampled) and on scikit-learn otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from ._kmeans import (
    DEFAULT_BRANCHING,
    Bounds,
    Hierarchy,
    KMeansFn,
    Level,
    balanced_kmeans,
    check_branching,
    default_bounds,
    group_centroids,
    kmeans,
    members_by_group,
    normalise,
    stack_levels,
)

PARTITION_ROWS = 1_000_000  # more documents than this are clustered in partitions
SAMPLE_ROWS = 200_000       # the coarse centres are fitted on at most this many rows
CHUNK_ROWS = 100_000        # rows per matrix product when assigning or summing


def default_parts(n_groups: int, branching: int) -> int:
    """About √k parts, so that a part holds about √k leaf groups (never above `branching`)."""
    return max(2, min(branching, round(math.sqrt(n_groups))))


def coarse_centres(vectors: np.ndarray, parts: int, seed: int,
                   sample_rows: int = SAMPLE_ROWS) -> np.ndarray:
    """`parts` unit centres fitted on a seeded sample of the rows."""
    rng = np.random.default_rng(seed)
    size = min(len(vectors), max(sample_rows, 40 * parts))
    rows = np.sort(rng.choice(len(vectors), size=size, replace=False))
    sample = np.ascontiguousarray(vectors[rows], dtype=np.float32)
    fast = faiss_kmeans()
    labels = kmeans(sample, parts, seed) if fast is None else fast(sample, parts, seed)
    return group_centroids(sample, labels, int(labels.max()) + 1)


def faiss_kmeans() -> KMeansFn | None:
    """Seeded spherical k-means on faiss (labels of every row), or None without faiss."""
    try:
        import faiss
    except ImportError:
        return None

    def run(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
        if k >= len(vectors):
            return np.arange(len(vectors))
        if k <= 1:
            return np.zeros(len(vectors), dtype=np.int64)
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        threads = faiss.omp_get_max_threads()
        # OpenMP threads spin-wait: on a busy CPU one thread was 6x faster than two (measured
        # on this 2-core machine under load), as with scikit-learn's BLAS in `kmeans`
        faiss.omp_set_num_threads(1)
        try:
            model = faiss.Kmeans(data.shape[1], k, niter=20, seed=seed, spherical=True,
                                 verbose=False, max_points_per_centroid=256)
            model.train(data)
            _, nearest = model.index.search(data, 1)
        finally:
            faiss.omp_set_num_threads(threads)
        return np.asarray(nearest[:, 0], dtype=np.int64)

    return run


def assign(vectors: np.ndarray, centres: np.ndarray, chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """The nearest centre (highest cosine) of every row, computed chunk by chunk."""
    labels = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), chunk_rows):
        block = np.asarray(vectors[start:start + chunk_rows], dtype=np.float32)
        labels[start:start + len(block)] = np.argmax(block @ centres.T, axis=1)
    return labels


def chunked_centroids(vectors: np.ndarray, labels: np.ndarray, n_groups: int,
                      chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """`group_centroids` summed chunk by chunk (for memory-mapped vectors)."""
    from scipy import sparse

    sums = np.zeros((n_groups, vectors.shape[1]), dtype=np.float64)
    for start in range(0, len(vectors), chunk_rows):
        block = np.asarray(vectors[start:start + chunk_rows], dtype=np.float32)
        part = labels[start:start + len(block)]
        onehot = sparse.csr_matrix((np.ones(len(part), dtype=np.float32),
                                    (part, np.arange(len(part)))), shape=(n_groups, len(part)))
        sums += np.asarray(onehot @ block, dtype=np.float64)
    return normalise(sums.astype(np.float32))


def _share(n_groups: int, sizes: np.ndarray) -> np.ndarray:
    """Leaf groups per part, proportional to its size (largest remainders), at least 1."""
    exact = n_groups * sizes / max(1, sizes.sum())
    share = np.maximum(1, np.floor(exact)).astype(np.int64)
    for part in np.argsort(-(exact - np.floor(exact)), kind="stable"):
        if share.sum() >= n_groups:
            break
        share[part] += 1
    return np.minimum(share, np.maximum(1, sizes))


def partitioned_hierarchy(
    vectors: np.ndarray, n_groups: int, *, branching: int = DEFAULT_BRANCHING, seed: int = 0,
    min_size: int | None = None, max_size: int | None = None, parts: int | None = None,
) -> tuple[Hierarchy, Bounds]:
    """The two-level scheme of the module docstring; `vectors` are unit rows (a memory map
    will do). Returns the same structures as `build_hierarchy`."""
    check_branching(branching)
    bounds = default_bounds(len(vectors), n_groups, branching, min_size, max_size)
    parts = min(parts or default_parts(n_groups, branching), len(vectors))
    fast = faiss_kmeans()
    part_of = assign(vectors, coarse_centres(vectors, parts, seed))
    members = members_by_group(part_of, parts)
    share = _share(n_groups, np.array([len(m) for m in members]))
    labels = np.empty(len(vectors), dtype=np.int64)
    centroids: list[np.ndarray] = []
    splits = merges = offset = 0
    for part, rows in enumerate(members):
        if not len(rows):
            continue
        level = balanced_kmeans(np.asarray(vectors[rows], dtype=np.float32), int(share[part]),
                                bounds, seed + part, kmeans_fn=fast)
        labels[rows] = level.labels + offset
        centroids.append(level.centroids)
        offset += len(level.centroids)
        splits, merges = splits + level.splits, merges + level.merges
    hierarchy = Hierarchy([Level(labels, np.vstack(centroids), splits, merges)])
    stack_levels(hierarchy, vectors, branching, seed, chunked_centroids)
    return hierarchy, bounds
