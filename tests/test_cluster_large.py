"""The two-level (partitioned) clustering used above a million documents."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from decisionrag import Tree, TreeWriter
from decisionrag._cluster import cluster_documents
from decisionrag._cluster._kmeans import group_centroids, members_by_group, normalise
from decisionrag._cluster._large import _share, chunked_centroids, partitioned_hierarchy
from decisionrag._tree import DocumentSpec, PassageSpec


def mixture(n: int, topics: int, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = normalise(rng.standard_normal((topics, dim)).astype(np.float32))
    truth = rng.integers(0, topics, size=n)
    noise = 0.15 * rng.standard_normal((n, dim)).astype(np.float32)
    return normalise(centres[truth] + noise), truth


def test_members_by_group_is_the_per_group_scan() -> None:
    labels = np.random.default_rng(3).integers(0, 17, size=1000)
    fast = members_by_group(labels, 20)
    assert len(fast) == 20
    for group in range(20):
        assert fast[group].tolist() == np.flatnonzero(labels == group).tolist()


def test_chunked_centroids_match_the_one_product() -> None:
    vectors, truth = mixture(5000, 9)
    exact = group_centroids(vectors, truth, 9)
    chunked = chunked_centroids(vectors, truth, 9, chunk_rows=777)
    np.testing.assert_allclose(chunked, exact, atol=1e-5)


def test_share_is_proportional_and_sums_to_the_groups_asked_for() -> None:
    assert _share(10, np.array([50, 30, 20])).tolist() == [5, 3, 2]
    assert _share(7, np.array([1, 99])).tolist() == [1, 6]
    assert int(_share(100, np.array([333, 333, 334])).sum()) == 100


@pytest.mark.parametrize("with_faiss", [True, False])
def test_partitioned_hierarchy_groups_within_bounds(with_faiss: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not with_faiss:
        monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss -> ImportError
    vectors, truth = mixture(20_000, 40)
    hierarchy, bounds = partitioned_hierarchy(vectors, 200, branching=50, seed=1)
    leaf = hierarchy.levels[0]
    sizes = leaf.sizes
    assert len(leaf.labels) == 20_000 and sizes.sum() == 20_000
    assert bounds.min_size <= sizes.min() and sizes.max() <= bounds.max_size
    assert 150 <= len(sizes) <= 250
    assert len(hierarchy.levels) == 2 and len(hierarchy.levels[1].centroids) <= 50
    # a leaf group draws from one true topic: purity of the well-separated mixture
    pure = sum(np.bincount(truth[m]).max() for m in members_by_group(leaf.labels, len(sizes)))
    assert pure / 20_000 > 0.95
    again, _ = partitioned_hierarchy(vectors, 200, branching=50, seed=1)
    assert np.array_equal(again.levels[0].labels, leaf.labels)


def test_cluster_documents_switches_to_partitions_above_the_threshold(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import decisionrag._cluster._api as api

    calls: list[int] = []

    def spy(vectors: np.ndarray, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append(len(vectors))
        return partitioned_hierarchy(vectors, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "partitioned_hierarchy", spy)
    vectors, _ = mixture(600, 12, seed=5)
    specs = [DocumentSpec(title=f"Doc {i}", passages=[PassageSpec(f"text {i}")], key=f"d{i}")
             for i in range(600)]
    path = tmp_path / "t.tree"
    with TreeWriter(path) as writer:
        writer.add_documents(specs)
        report = cluster_documents(writer, 30, encode=lambda texts: vectors[: len(texts)],
                                   use_cache=False, branching=10, partition_rows=100)
    assert calls == [600]
    assert report.documents == 600
    assert sum(report.sizes) == 600
    tree = Tree.open(path)
    assert tree.counts["document"] == 600
    assert 0 < len(tree.children(tree.node("root").id)) <= 10
