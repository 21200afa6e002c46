"""Growing a clustered tree: nearest-group addition and rebalancing; the `add` and
`rebalance` commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from decisionrag import InputError, NodeKind, Tree, TreeWriter
from decisionrag._cli import main
from decisionrag._cluster import add_documents, cluster_documents, rebalance
from test_cluster import NAMES, build, fake_encode, leaf_sizes, make_docs


def group_of(tree: Tree, key: str) -> str:
    return tree.node(tree.node(key).parent or 0).key


def topic_groups(tree: Tree) -> dict[str, str]:
    """topic -> key of the leaf group holding the original documents of that topic."""
    return {topic: group_of(tree, f"d-{topic}-0") for topic in NAMES}


@pytest.fixture
def clustered(tmp_path: Path) -> Path:
    path = tmp_path / "t.tree"
    build(path, make_docs(dict.fromkeys(NAMES, 20)), 6, min_size=5, max_size=40)
    return path


def add(path: Path, docs: list, **options: object):  # type: ignore[no-untyped-def,type-arg]
    return add_documents(path, docs, model="fake", encode=fake_encode,
                         cache=path.parent / "cache", **options)  # type: ignore[arg-type]


def test_new_documents_go_to_the_nearest_group(clustered: Path) -> None:
    with Tree.open(clustered) as tree:
        before = topic_groups(tree)
    report = add(clustered, make_docs({"opera": 3, "sailing": 2}, prefix="new"))
    assert report.added == 5 and report.unclustered == 0
    assert report.assigned == {before["opera"]: 3, before["sailing"]: 2}
    with Tree.open(clustered) as tree:
        assert tree.counts["document"] == 125
        for i in range(3):
            assert group_of(tree, f"new-opera-{i}") == before["opera"]
        assert group_of(tree, "new-sailing-1") == before["sailing"]
        assert topic_groups(tree) == before  # nothing re-clustered
        opera = tree.node(before["opera"])
        assert opera.n_passages == 2 * 23 and tree.root.n_passages == 2 * 125


def test_addition_needs_the_clustering_model(clustered: Path) -> None:
    before = clustered.read_bytes()
    with pytest.raises(InputError, match="same model"):
        add_documents(clustered, make_docs({"opera": 1}, prefix="x"), model="other-model")
    assert clustered.read_bytes() == before


def test_duplicate_document_is_an_error_and_leaves_the_tree(clustered: Path) -> None:
    before = clustered.read_bytes()
    with pytest.raises(InputError, match="already in"):
        add(clustered, make_docs({"opera": 1}))  # key d-opera-0 exists
    assert clustered.read_bytes() == before


def test_growth_is_reported_then_rebalanced(clustered: Path) -> None:
    report = add(clustered, make_docs({"geology": 45}, prefix="new"))
    with Tree.open(clustered) as tree:
        geology = topic_groups(tree)["geology"]
    assert report.oversize == [geology]
    result = rebalance(clustered, encode=fake_encode, cache=clustered.parent / "cache")
    assert list(result.split) == [geology] and len(result.split[geology]) == 2
    assert result.max_size == 40 and not result.merged
    sizes = leaf_sizes(clustered)
    assert max(sizes) <= 40 and sum(sizes) == 165 and len(sizes) == 7
    with Tree.open(clustered) as tree:
        parts = [tree.node(key) for key in result.split[geology]]
        assert all(tree.children(p.id)[0].kind == NodeKind.DOCUMENT for p in parts)
        assert all("geology" in p.description for p in parts)
        assert tree.meta["clustering"]["groups"][0] == 7
    # the new part has a centroid: later additions can land in it
    again = add(clustered, make_docs({"geology": 4}, prefix="late"))
    assert set(again.assigned) <= set(result.split[geology])


def test_rebalance_merges_small_groups(clustered: Path) -> None:
    result = rebalance(clustered, min_size=21, max_size=200, encode=fake_encode,
                       cache=clustered.parent / "cache")
    assert result.merged and not result.split
    sizes = leaf_sizes(clustered)
    assert min(sizes) >= 21 and sum(sizes) == 120 and len(sizes) == 6 - len(result.merged)
    with Tree.open(clustered) as tree:
        for gone in result.merged:
            with pytest.raises(KeyError):
                tree.node(gone)
        assert tree.counts["group"] == len(sizes)
    writer = TreeWriter.update(clustered)
    try:
        assert len(writer.load_centroids(0)) == len(sizes)
    finally:
        writer.abort()


def test_rebalance_with_nothing_to_do(clustered: Path) -> None:
    result = rebalance(clustered, encode=fake_encode, cache=clustered.parent / "cache")
    assert not result.split and not result.merged and "nothing to do" in result.summary()


def test_rebalance_needs_a_clustered_tree(tmp_path: Path) -> None:
    path = tmp_path / "flat.tree"
    with TreeWriter(path) as writer:
        writer.add_documents(make_docs({"opera": 3}))
    with pytest.raises(InputError, match="not clustered"):
        rebalance(path)
    assert main(["rebalance", str(path)]) == 2


def test_unclustered_tree_takes_documents_by_their_groups(tmp_path: Path) -> None:
    path = tmp_path / "flat.tree"
    with TreeWriter(path) as writer:
        writer.add_documents(make_docs({"opera": 3}))
    docs = make_docs({"sailing": 2}, prefix="new")
    docs[0].groups = ("Boats",)
    report = add(path, docs)
    assert report.unclustered == 2 and not report.assigned
    with Tree.open(path) as tree:
        assert group_of(tree, "new-sailing-0") == "g:Boats"


def _write_jsonl(path: Path, topic: str, n: int, prefix: str) -> Path:
    lines = []
    for doc in make_docs({topic: n}, prefix=prefix):
        for i, passage in enumerate(doc.passages):
            lines.append(json.dumps({"id": f"{doc.key}#{i}", "doc_id": doc.key,
                                     "doc_title": doc.title, "section": [], "text": passage.text}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_add_and_rebalance_commands_with_minilm(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    path = tmp_path / "t.tree"
    cache = tmp_path / "cache"
    with TreeWriter(path) as writer:
        writer.add_documents(make_docs(dict.fromkeys(NAMES, 10)))
        cluster_documents(writer, 6, cache=cache, min_size=3, max_size=15)
    source = _write_jsonl(tmp_path / "new.jsonl", "astronomy", 12, "new")
    assert main(["add", str(path), str(source), "--cache-dir", str(cache)]) == 0
    assert "added 12 documents" in capsys.readouterr().out
    with Tree.open(path) as tree:
        homes = {group_of(tree, f"new-astronomy-{i}") for i in range(12)}
        assert homes <= {group_of(tree, f"d-astronomy-{i}") for i in range(10)}
    assert main(["rebalance", str(path), "--max-size", "12", "--cache-dir", str(cache)]) == 0
    assert "split" in capsys.readouterr().out
    assert max(leaf_sizes(path)) <= 12
    assert main(["add", str(path), str(tmp_path / "missing.jsonl")]) == 2


def test_vectors_of_centroids_are_unit_length(clustered: Path) -> None:
    writer = TreeWriter.update(clustered)
    try:
        rows = writer.load_centroids()
    finally:
        writer.abort()
    vectors = np.stack([np.frombuffer(r[3], np.float32) for r in rows])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert {r[2] for r in rows} == {"fake"}
