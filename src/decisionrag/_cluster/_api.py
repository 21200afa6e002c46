"""`cluster_documents`: give a flat corpus a hierarchy of described groups.

Called by the builder after all documents are written and before commit. Documents
directly under the root are embedded (title + first sentence), clustered into balanced
groups (recursively, when a level would exceed the branching factor), re-parented under
ordered group nodes (most typical document first), and every group is described.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .._embed import DEFAULT_MODEL
from .._errors import InputError
from .._progress import Step, step
from .._tree import DocumentHead, NodeKind
from .._tree._store import TreeWriter
from ._describe import MAX_TITLES, Describer, ExtractiveDescriber, GroupSketch
from ._embedding import MAX_TOKENS, EncodeFn, document_text, embed_texts, first_sentence
from ._kmeans import (
    DEFAULT_BRANCHING,
    Hierarchy,
    auto_groups,
    build_hierarchy,
    chain_order,
    document_labels,
    members_by_group,
    typical_order,
)
from ._large import PARTITION_ROWS, partitioned_hierarchy
from ._terms import distinctive_terms

META_KEY = "clustering"


@dataclass(slots=True)
class ClusterReport:
    """What clustering did: sizes, levels, bounds, balancing steps and time per phase."""

    documents: int
    groups: int
    levels: list[int]
    sizes: list[int]
    min_size: int
    max_size: int
    splits: int = 0
    merges: int = 0
    model: str = DEFAULT_MODEL
    describer: str = "extractive"
    skipped: int = 0
    folders: int = 0  # folder groups replaced by topic groups (no document was at the root)
    seconds: dict[str, float] = field(default_factory=dict)

    def size_stats(self) -> dict[str, float]:
        if not self.sizes:
            return {"min": 0, "median": 0, "max": 0}
        sizes = self.sizes
        return {"min": min(sizes), "median": statistics.median(sizes), "max": max(sizes)}

    def histogram(self, bins: int = 8) -> list[tuple[int, int, int]]:
        """(low, high, number of groups with low <= size <= high) over equal-width bins."""
        if not self.sizes:
            return []
        low, high = min(self.sizes), max(self.sizes)
        width = max(1, math.ceil((high - low + 1) / bins))
        return [(start, start + width - 1, sum(start <= s < start + width for s in self.sizes))
                for start in range(low, high + 1, width)]

    def summary(self) -> str:
        stats = self.size_stats()
        lines = [
            f"clustered {self.documents:,} documents into {self.groups:,} groups "
            f"({' > '.join(f'{n:,}' for n in self.levels)} per level, top first)",
            f"group sizes: min {stats['min']:g}, median {stats['median']:g}, max {stats['max']:g} "
            f"(bounds {self.min_size}–{self.max_size}; {self.splits} splits, {self.merges} merges)",
            f"embedding model {self.model}; descriptions: {self.describer}",
        ]
        if self.skipped:
            lines.append(f"{self.skipped:,} documents already inside groups were left in place")
        if self.folders:
            lines.append(f"{self.folders:,} folder groups replaced by the topic groups (every "
                         "document keeps its file in `source`)")
        if self.seconds:
            lines.append("time: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items()))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["size_stats"] = self.size_stats()
        return data


@dataclass(slots=True)
class _Docs:
    ids: np.ndarray
    labels: list[str]  # what a describer reads for each document: title, else its description
    texts: list[str]   # what was embedded
    vectors: np.ndarray


def resolve_groups(n_groups: int | str, n_documents: int, branching: int) -> int:
    """The number of leaf groups asked for: an int, a digit string or ``"auto"``."""
    if isinstance(n_groups, str):
        if n_groups.strip().lower() == "auto":
            return auto_groups(n_documents, branching)
        if not n_groups.strip().isdigit():
            raise InputError(f"--cluster takes a number of groups or 'auto', not {n_groups!r}")
        n_groups = int(n_groups)
    if n_groups < 1:
        raise InputError(f"the number of groups must be at least 1, not {n_groups}")
    if n_groups > n_documents:
        raise InputError(f"cannot make {n_groups:,} groups of {n_documents:,} documents")
    return n_groups


def document_label(title: str, description: str, first_passage: str) -> str:
    label = (title or description).strip() or first_sentence(first_passage)
    return label if len(label) <= 120 else label[:120].rsplit(" ", 1)[0] + " …"


def cluster_documents(
    writer: TreeWriter, n_groups: int | str, *, model: str | None = None, progress: bool = False,
    branching: int = DEFAULT_BRANCHING, seed: int = 0, min_size: int | None = None,
    max_size: int | None = None, describer: Describer | None = None, encode: EncodeFn | None = None,
    cache: str | os.PathLike[str] | None = None, use_cache: bool = True,
    max_tokens: int = MAX_TOKENS, partition_rows: int = PARTITION_ROWS,
) -> ClusterReport:
    """Cluster the documents directly under the root into described groups.

    `n_groups` is the number of leaf groups or ``"auto"``; levels are added above while a
    level holds more than `branching` groups. `model` names the sentence-transformers
    embedding model (default: bundled all-MiniLM-L6-v2); `encode` replaces the encoder.
    `describer` defaults to the offline extractive one; `max_tokens` truncates what is embedded.
    More than `partition_rows` documents are clustered in partitions (`_large`).
    Same inputs and seed, same tree.
    """
    seconds: dict[str, float] = {}
    with step("clustering", unit="documents", enabled=progress) as shown:
        with _timed(seconds, "embed"):
            flat, skipped, folders = _flat_documents(writer)
            k = resolve_groups(n_groups, len(flat), branching)
            shown.total = len(flat)
            shown.note("embedding")
            docs = _embed_documents(flat, model, encode, cache, use_cache, shown, max_tokens)
        with _timed(seconds, "cluster"):
            shown.note(f"k-means, {k:,} groups")
            cluster = build_hierarchy if len(docs.ids) <= partition_rows else partitioned_hierarchy
            hierarchy, bounds = cluster(docs.vectors, k, branching=branching, seed=seed,
                                        min_size=min_size, max_size=max_size)
        with _timed(seconds, "write"):
            group_ids = write_groups(writer, hierarchy, docs)
    describer = describer or ExtractiveDescriber()
    with _timed(seconds, "describe"):
        describe_groups(writer, hierarchy, docs, group_ids, describer, progress)
    name = model or DEFAULT_MODEL
    save_clustering(writer, hierarchy, group_ids, name, branching, seed, bounds.min_size,
                    bounds.max_size, describer.name)
    writer.meta[META_KEY]["max_tokens"] = max_tokens
    leaf = hierarchy.levels[0]
    return ClusterReport(
        documents=len(docs.ids), groups=len(leaf.centroids),
        levels=[len(level.centroids) for level in reversed(hierarchy.levels)],
        sizes=[int(s) for s in leaf.sizes], min_size=bounds.min_size, max_size=bounds.max_size,
        splits=sum(lv.splits for lv in hierarchy.levels),
        merges=sum(lv.merges for lv in hierarchy.levels),
        model=name, describer=describer.name, skipped=skipped, folders=folders, seconds=seconds)


@contextmanager
def _timed(seconds: dict[str, float], phase: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    seconds[phase] = time.perf_counter() - start


def _flat_documents(writer: TreeWriter) -> tuple[list[DocumentHead], int, int]:
    """Heads of the documents to cluster, how many were left in their groups, and how many
    folder groups were dissolved.

    Clustering organises the documents directly under the root; documents already in
    groups (sub-folders beside root documents) stay where they are. When no document is at
    the root (a build of two source folders, or of one holding only sub-folders), every
    document is clustered: the folder groups are replaced by the topic groups."""
    heads = list(writer.document_heads())
    flat = [h for h in heads if h.parent == writer.root_id]
    if flat:
        return flat, len(heads) - len(flat), 0
    if not heads:
        raise InputError(f"{writer.path}: no documents to cluster")
    groups = len(writer.child_ids(writer.root_id, NodeKind.GROUP))
    for head in heads:
        writer.move(head.id, writer.root_id)
    writer.remove_empty_groups()
    return [h._replace(parent=writer.root_id) for h in heads], 0, groups


def _embed_documents(
    flat: list[DocumentHead], model: str | None, encode: EncodeFn | None,
    cache: str | os.PathLike[str] | None, use_cache: bool, progress: Step, max_tokens: int,
) -> _Docs:
    texts = [document_text(h.title, h.description, h.first_passage) for h in flat]
    vectors = embed_texts(texts, model or DEFAULT_MODEL, encode=encode, cache=cache,
                          use_cache=use_cache, progress=progress, max_tokens=max_tokens)
    labels = [document_label(h.title, h.description, h.first_passage) for h in flat]
    return _Docs(np.array([h.id for h in flat], dtype=np.int64), labels, texts, vectors)


def write_groups(writer: TreeWriter, hierarchy: Hierarchy, docs: _Docs) -> list[np.ndarray]:
    """Add the group nodes top-down in chain order and place the documents under the leaf
    groups, most typical first. Returns, per level, the node id of each group."""
    levels = hierarchy.levels
    group_ids = [np.zeros(len(level.centroids), dtype=np.int64) for level in levels]
    top = len(levels) - 1
    parents = [(writer.root_id, np.arange(len(levels[top].centroids)))]
    for depth in range(top, -1, -1):
        level, serial, next_parents = levels[depth], 0, []
        children_of = members_by_group(level.labels, len(level.centroids)) if depth else []
        for parent_id, members in parents:
            for group in members[chain_order(level.centroids[members])]:
                key = f"c:{depth}:{serial}"
                group_id = writer.add_group(f"Group {serial + 1}", parent_id, key=key)
                group_ids[depth][group] = group_id
                serial += 1
                if depth:
                    next_parents.append((group_id, children_of[group]))
        parents = next_parents
    leaf = levels[0]
    members_of = members_by_group(leaf.labels, len(leaf.centroids))
    for group, leaf_id in enumerate(group_ids[0]):
        members = members_of[group]
        ordered = members[typical_order(np.asarray(docs.vectors[members]), leaf.centroids[group])]
        writer.place_children(int(leaf_id), [int(i) for i in docs.ids[ordered]])
    return group_ids


def sketches_for_level(hierarchy: Hierarchy, depth: int, docs: _Docs,
                       keys: Sequence[str]) -> list[GroupSketch]:
    """What describers read about every group of one level."""
    labels = document_labels(hierarchy.levels[: depth + 1])
    centroids = hierarchy.levels[depth].centroids
    members_of = members_by_group(labels, len(centroids))
    terms = distinctive_terms([" ".join(term_text(docs.labels[i], docs.texts[i]) for i in m)
                               for m in members_of])
    sketches = []
    for group, members in enumerate(members_of):
        typical = members[typical_order(np.asarray(docs.vectors[members]),
                                        centroids[group])][:MAX_TITLES]
        sketches.append(GroupSketch(keys[group], tuple(docs.labels[i] for i in typical),
                                    terms[group], len(members)))
    return sketches


def describe_groups(writer: TreeWriter, hierarchy: Hierarchy, docs: _Docs,
                    group_ids: list[np.ndarray], describer: Describer, progress: bool) -> None:
    """Title (distinctive terms) and one-sentence description for every group of every level."""
    sketches: list[GroupSketch] = []
    ids: list[int] = []
    for depth in range(len(hierarchy.levels)):
        keys = [str(int(g)) for g in group_ids[depth]]
        sketches.extend(sketches_for_level(hierarchy, depth, docs, keys))
        ids.extend(int(g) for g in group_ids[depth])
    descriptions = describer.describe(sketches, progress)
    for group_id, sketch, description in zip(ids, sketches, descriptions, strict=True):
        writer.set_group_text(group_id, group_title(sketch), description)


def term_text(label: str, text: str) -> str:
    """What distinctive terms are counted in: the title weighs double (it names the page)."""
    return f"{label} {label} {text}"


def group_title(sketch: GroupSketch) -> str:
    if sketch.terms:
        return ", ".join(sketch.terms[:3])
    return sketch.titles[0] if sketch.titles else ""


def save_clustering(writer: TreeWriter, hierarchy: Hierarchy, group_ids: list[np.ndarray],
                    model: str, branching: int, seed: int, min_size: int, max_size: int,
                    describer: str) -> None:
    """Centroids into the tree's `clusters` table; settings into the tree's metadata."""
    rows = []
    for depth, level in enumerate(hierarchy.levels):
        for group, group_id in enumerate(group_ids[depth]):
            vector = level.centroids[group].astype(np.float32).tobytes()
            rows.append((int(group_id), depth, model, vector))
    writer.save_centroids(rows)
    writer.meta[META_KEY] = {
        "model": model, "levels": len(hierarchy.levels), "branching": branching, "seed": seed,
        "min_size": min_size, "max_size": max_size, "describer": describer,
        "groups": [len(level.centroids) for level in hierarchy.levels],
        "next_serial": [len(level.centroids) for level in hierarchy.levels],
    }
