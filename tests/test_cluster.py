"""Clustering flat corpora: determinism, size bounds, levels, order, fallback descriptions."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from decisionrag import DocumentSpec, InputError, NodeKind, PassageSpec, Tree, TreeWriter
from decisionrag._cluster import ClusterReport, cluster_documents, levels_for
from decisionrag._cluster._embedding import document_text, embed_texts, first_sentence
from decisionrag._cluster._kmeans import chain_order

TOPICS = {
    "astronomy": ["planet", "galaxy", "comet", "nebula", "telescope"],
    "cooking": ["bread", "cheese", "soup", "pastry", "sauce"],
    "football": ["striker", "goalkeeper", "league", "stadium", "referee"],
    "opera": ["soprano", "libretto", "aria", "tenor", "overture"],
    "geology": ["basalt", "granite", "fault", "volcano", "sediment"],
    "sailing": ["mast", "hull", "regatta", "keel", "spinnaker"],
}
NAMES = list(TOPICS)


def make_docs(counts: dict[str, int], prefix: str = "d") -> list[DocumentSpec]:
    """Documents whose title and first sentence name their topic (round-robin over topics)."""
    docs = []
    for topic, n in counts.items():
        words = TOPICS[topic]
        for i in range(n):
            word = words[i % len(words)]
            text = f"The {word} number {i} belongs to {topic}. It has a second sentence."
            docs.append(DocumentSpec(title=f"{word.title()} {i}", key=f"{prefix}-{topic}-{i}",
                                     passages=[PassageSpec(text), PassageSpec("More text.")]))
    return docs


def fake_encode(texts: Sequence[str]) -> np.ndarray:
    """A tiny deterministic encoder: one axis per topic named in the text, plus noise."""
    out = np.zeros((len(texts), len(NAMES) + 8), dtype=np.float32)
    for row, text in enumerate(texts):
        for axis, name in enumerate(NAMES):
            if name in text:
                out[row, axis] = 1.0
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
        out[row, len(NAMES):] = np.random.default_rng(seed).normal(0, 0.15, 8)
    return out


def build(path: Path, docs: list[DocumentSpec], n_groups: int | str, **options: object
          ) -> ClusterReport:
    options.setdefault("cache", path.parent / "cache")
    with TreeWriter(path) as writer:
        writer.add_documents(docs)
        report = cluster_documents(writer, n_groups, model="fake", encode=fake_encode,
                                   **options)  # type: ignore[arg-type]
    return report


def shape(path: Path) -> list[tuple[str, str, list[str]]]:
    """Every group as (key, title, children keys in order), depth first."""
    result = []
    with Tree.open(path) as tree:
        pending = [tree.root.id]
        while pending:
            node_id = pending.pop()
            children = tree.children(node_id)
            if node_id != tree.root.id:
                node = tree.node(node_id)
                result.append((node.key, node.title, [c.key for c in children]))
            pending.extend(c.id for c in children if c.kind == NodeKind.GROUP)
    return result


def leaf_sizes(path: Path) -> list[int]:
    with Tree.open(path) as tree:
        groups = [n for n in _all_groups(tree)]
        return [len(tree.children(g.id)) for g in groups
                if tree.children(g.id) and tree.children(g.id)[0].kind == NodeKind.DOCUMENT]


def _all_groups(tree: Tree) -> list:  # type: ignore[type-arg]
    found, pending = [], [tree.root.id]
    while pending:
        for child in tree.children(pending.pop()):
            if child.kind == NodeKind.GROUP:
                found.append(child)
                pending.append(child.id)
    return found


def test_same_seed_gives_the_same_tree(tmp_path: Path) -> None:
    docs = make_docs(dict.fromkeys(NAMES, 25))
    build(tmp_path / "a.tree", docs, 6, seed=3)
    build(tmp_path / "b.tree", docs, 6, seed=3, use_cache=False)
    assert shape(tmp_path / "a.tree") == shape(tmp_path / "b.tree")


def test_topics_become_groups(tmp_path: Path) -> None:
    report = build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 20)), 6)
    assert report.groups == 6 and sorted(report.sizes) == [20] * 6
    with Tree.open(tmp_path / "t.tree") as tree:
        for group in tree.children(tree.root.id):
            topics = {d.key.split("-")[1] for d in tree.children(group.id)}
            assert len(topics) == 1
            assert group.kind == NodeKind.GROUP and group.n_passages == 40
        assert tree.meta["clustering"]["model"] == "fake"


def test_group_sizes_stay_within_bounds(tmp_path: Path) -> None:
    # one topic dwarfs the others, two are tiny: k-means alone gives unusable groups
    counts = {"astronomy": 240, "cooking": 30, "football": 30, "opera": 2, "geology": 1,
              "sailing": 30}
    report = build(tmp_path / "t.tree", make_docs(counts), 8, min_size=10, max_size=80)
    sizes = leaf_sizes(tmp_path / "t.tree")
    assert sorted(sizes) == sorted(report.sizes)
    assert sum(sizes) == sum(counts.values())
    assert min(sizes) >= 10 and max(sizes) <= 80
    assert report.merges >= 1 and report.splits >= 1
    assert report.size_stats()["max"] <= 80
    assert sum(count for _low, _high, count in report.histogram()) == report.groups


def test_default_bounds_follow_the_mean(tmp_path: Path) -> None:
    report = build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 30)), 9)
    mean = 180 / 9
    assert report.min_size == int(mean // 5) and report.max_size == int(3 * mean)
    assert all(report.min_size <= s <= report.max_size for s in report.sizes)


@pytest.mark.parametrize(("n_docs", "branching"), [(200, 8), (300, 10), (30, 100), (600, 30)])
def test_auto_gives_log_b_levels(tmp_path: Path, n_docs: int, branching: int) -> None:
    per_topic = n_docs // len(NAMES)
    docs = make_docs(dict.fromkeys(NAMES, per_topic))
    report = build(tmp_path / "t.tree", docs, "auto", branching=branching)
    expected = max(2, levels_for(len(docs), branching))
    with Tree.open(tmp_path / "t.tree") as tree:
        depths = {len(tree.path(d.id)) - 1 for d in tree.documents()}
        assert depths == {expected}
        assert len(tree.children(tree.root.id)) <= branching
        for group in _all_groups(tree):
            if tree.children(group.id)[0].kind == NodeKind.GROUP:
                assert len(tree.children(group.id)) <= branching
    assert len(report.levels) == expected - 1


def test_explicit_groups_above_branching_get_a_parent_level(tmp_path: Path) -> None:
    report = build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 40)), 40, branching=12)
    assert report.levels[-1] == report.groups and len(report.levels) == 2
    assert report.levels[0] <= 12


def test_similar_groups_sit_together() -> None:
    angles = np.linspace(0, np.pi / 2, 12)
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    shuffled = np.random.default_rng(0).permutation(12)
    order = chain_order(points[shuffled])
    recovered = [int(shuffled[i]) for i in order]
    assert recovered in (list(range(12)), list(range(11, -1, -1)))


def test_documents_most_typical_first(tmp_path: Path) -> None:
    build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 15)), 6)
    writer = TreeWriter.update(tmp_path / "t.tree")
    try:
        centroids = {row[0]: np.frombuffer(row[3], np.float32) for row in writer.load_centroids(0)}
    finally:
        writer.abort()
    with Tree.open(tmp_path / "t.tree") as tree:
        for group_id, centroid in centroids.items():
            texts = [document_text(d.title, d.description, tree.passages(d.id, 1)[0].text)
                     for d in tree.children(group_id)]
            scores = embed_texts(texts, "fake", encode=fake_encode, use_cache=False) @ centroid
            assert list(scores) == sorted(scores, reverse=True)


def test_fallback_descriptions_name_terms_and_typical_titles(tmp_path: Path) -> None:
    build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 20)), 6)
    with Tree.open(tmp_path / "t.tree") as tree:
        for group in tree.children(tree.root.id):
            topic = tree.children(group.id)[0].key.split("-")[1]
            first_title = tree.children(group.id)[0].title
            assert group.description.startswith("Topics: ")
            terms = group.description.split(" — ")[0].removeprefix("Topics: ").split(", ")
            assert topic in terms
            assert not set(terms) & (set(NAMES) - {topic})  # nothing from sibling groups
            assert f"typical pages: {first_title};" in group.description
            assert topic in group.title.split(", ")


def test_documents_already_in_groups_stay_put(tmp_path: Path) -> None:
    docs = make_docs(dict.fromkeys(NAMES, 10))
    docs[0].groups = ("Folder",)
    report = build(tmp_path / "t.tree", docs, 3)
    assert report.skipped == 1 and report.documents == len(docs) - 1
    with Tree.open(tmp_path / "t.tree") as tree:
        assert [n.title for n in tree.path(tree.node(docs[0].key or "").id)][1] == "Folder"


@pytest.mark.parametrize("n_groups", ["many", 0, 61, "-3"])
def test_bad_group_counts_are_input_errors(tmp_path: Path, n_groups: int | str) -> None:
    with pytest.raises(InputError):
        build(tmp_path / "t.tree", make_docs(dict.fromkeys(NAMES, 10)), n_groups)
    assert not (tmp_path / "t.tree").exists()


def test_embeddings_are_cached_by_model_and_content(tmp_path: Path) -> None:
    calls: list[int] = []

    def counting(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        return fake_encode(texts)

    texts = ["The comet belongs to astronomy.", "Bread belongs to cooking."]
    first = embed_texts(texts, "fake", encode=counting, cache=tmp_path)
    again = embed_texts(texts, "fake", encode=counting, cache=tmp_path)
    other_model = embed_texts(texts, "fake-2", encode=counting, cache=tmp_path)
    assert calls == [2, 2] and np.array_equal(first, again) and np.array_equal(first, other_model)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)


def test_first_sentence_and_document_text() -> None:
    assert first_sentence("Memento is a 2000 film. It was directed by Nolan.") == \
        "Memento is a 2000 film."
    assert first_sentence("e.g. something without an end") == "e.g. something without an end"
    assert len(first_sentence("word " * 200)) <= 302
    memento = "Memento is a 2000 film."
    assert document_text("Memento", "", memento + " More.") == memento
    assert document_text("Nolan", "", "He directs films. More.") == "Nolan. He directs films."
    assert document_text("", "Derived title", "Body text. More.") == "Derived title. Body text."


@pytest.mark.slow
def test_build_command_clusters_a_real_corpus(tmp_path: Path, shared_data: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from decisionrag._cli import main

    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path / "cache"))

    out = tmp_path / "xquad.tree"
    corpus = shared_data / "xquad-en" / "corpus.jsonl"
    assert main(["build", str(corpus), "-o", str(out), "--cluster", "6", "--quiet"]) == 0
    with Tree.open(out) as tree:
        groups = tree.children(tree.root.id)
        assert len(groups) == 6 and all(g.kind == NodeKind.GROUP for g in groups)
        assert sum(len(tree.children(g.id)) for g in groups) == 48
        assert all(g.description.startswith("Topics: ") for g in groups)
        assert tree.meta["clustering"]["model"] == "all-MiniLM-L6-v2"


def test_two_source_folders_are_clustered_together(tmp_path: Path) -> None:
    """No document at the root (two folders given to `build`): the folder groups are
    replaced by topic groups over all documents, and the report says so."""
    path = tmp_path / "t.tree"
    docs = make_docs({"astronomy": 6, "cooking": 6, "opera": 6})
    with TreeWriter(path) as writer:
        for folder, part in (("first", docs[:9]), ("second", docs[9:])):
            parent = writer.group_for([folder])
            for spec in part:
                writer.add_document(spec, parent)
        report = cluster_documents(writer, 3, model="fake", encode=fake_encode,
                                   cache=tmp_path / "cache")
    assert report.documents == 18 and report.groups == 3 and report.folders == 2
    assert "2 folder groups replaced" in report.summary()
    groups = shape(path)
    assert {title for _key, title, _children in groups} and all(
        key.startswith("c:") for key, _title, _children in groups)
    assert sorted(len(children) for _key, _title, children in groups) == [6, 6, 6]
