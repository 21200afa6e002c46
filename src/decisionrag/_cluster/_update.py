"""Growing a clustered tree: add documents to their nearest group, and rebalance groups
that drifted past their size bounds, without re-clustering the whole corpus."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._embed import DEFAULT_MODEL
from .._errors import InputError
from .._progress import Step, step
from .._tree._model import DocumentSpec, NodeKind
from .._tree._store import DuplicateKey, TreeWriter
from ._api import META_KEY, document_label, group_title, term_text
from ._describe import MAX_TITLES, Describer, ExtractiveDescriber, GroupSketch
from ._embedding import MAX_TOKENS, EncodeFn, document_text, embed_texts
from ._kmeans import bisect, normalise, typical_order
from ._terms import distinctive_terms

_BATCH = 512


@dataclass(slots=True)
class AddReport:
    """Documents added to a tree, and where they went; documents replaced (same key or same
    source file: they keep their place) and removed."""

    added: int = 0
    assigned: dict[str, int] = field(default_factory=dict)  # leaf group key -> new documents
    unclustered: int = 0  # added to a tree without clustering (placed by their own groups)
    oversize: list[str] = field(default_factory=list)  # groups now above the size bound
    replaced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    removed_groups: int = 0

    def summary(self) -> str:
        lines = [f"added {self.added:,} documents"]
        if self.replaced:
            lines[0] += f", replaced {len(self.replaced):,}"
        if self.removed:
            lines[0] += f", removed {len(self.removed):,}"
        if self.removed_groups:
            lines[0] += f" ({self.removed_groups} groups left empty removed)"
        if self.assigned:
            lines.append(f"assigned to {len(self.assigned):,} existing groups (nearest centroid)")
        if self.oversize:
            lines.append(f"{len(self.oversize)} groups are now above the size bound: "
                         f"{', '.join(self.oversize[:5])}{' …' if len(self.oversize) > 5 else ''}"
                         " (run `decisionrag rebalance`)")
        return "\n".join(lines)


@dataclass(slots=True)
class RebalanceReport:
    """Leaf groups split (key -> keys of its parts) and dissolved (key -> receiving keys)."""

    split: dict[str, list[str]] = field(default_factory=dict)
    merged: dict[str, list[str]] = field(default_factory=dict)
    min_size: int = 0
    max_size: int = 0

    def summary(self) -> str:
        if not self.split and not self.merged:
            return f"all groups are within {self.min_size}–{self.max_size} documents; nothing to do"
        lines = [f"bounds {self.min_size}–{self.max_size} documents"]
        lines += [f"split {key} into {', '.join(parts)}" for key, parts in self.split.items()]
        lines += [f"merged {key} into {', '.join(into)}" for key, into in self.merged.items()]
        return "\n".join(lines)


@dataclass(slots=True)
class _Leaves:
    """The leaf groups of a clustered tree being updated: ids, keys and centroids."""

    ids: list[int]
    centroids: np.ndarray
    model: str
    settings: dict[str, Any]

    @classmethod
    def load(cls, writer: TreeWriter) -> _Leaves | None:
        settings = writer.meta.get(META_KEY)
        rows = writer.load_centroids(level=0)
        if not settings or not rows:
            return None
        vectors = np.stack([np.frombuffer(row[3], dtype=np.float32) for row in rows])
        return cls([row[0] for row in rows], vectors, str(rows[0][2]), dict(settings))

    @property
    def max_tokens(self) -> int:
        return int(self.settings.get("max_tokens", MAX_TOKENS))

    def nearest(self, vectors: np.ndarray, exclude: Sequence[int] = ()) -> list[int]:
        scores = vectors @ self.centroids.T
        for group_id in exclude:
            scores[:, self.ids.index(group_id)] = -np.inf
        return [self.ids[i] for i in np.argmax(scores, axis=1)]


def _check_model(leaves: _Leaves, model: str | None, path: Path) -> str:
    if model and model != leaves.model:
        raise InputError(f"{path} was clustered with embedding model {leaves.model!r}, not "
                         f"{model!r}; new documents must be embedded with the same model")
    return leaves.model


def _spec_text(spec: DocumentSpec) -> str:
    first = spec.passages[0].text if spec.passages else ""
    return document_text(spec.title, spec.description or "", first)


def add_documents(
    path: str | os.PathLike[str], documents: Iterable[DocumentSpec], *, model: str | None = None,
    encode: EncodeFn | None = None, cache: str | os.PathLike[str] | None = None,
    use_cache: bool = True, progress: bool = False, replace: bool = False,
) -> AddReport:
    """Add documents to the tree at `path` (`replace`: a document already in the tree, by key
    or by source file, is replaced in its place; otherwise that is an InputError). In a
    clustered tree each goes to the leaf group whose centroid is nearest (same embedding
    model as the clustering; no re-clustering); otherwise documents go where their own
    `groups` say. The file is replaced atomically."""
    return edit_documents(path, add=documents, model=model, encode=encode, cache=cache,
                          use_cache=use_cache, progress=progress, replace=replace)


def edit_documents(
    path: str | os.PathLike[str], *, add: Iterable[DocumentSpec] = (),
    remove: Iterable[str] = (), metadata: Mapping[str, dict[str, Any]] | None = None,
    model: str | None = None, encode: EncodeFn | None = None,
    cache: str | os.PathLike[str] | None = None, use_cache: bool = True, progress: bool = False,
    replace: bool = True,
) -> AddReport:
    """Change the tree at `path` in one atomic step: remove the documents keyed `remove` (an
    InputError names any the tree lacks), then write `add` — a document whose key, or whose
    source file, is already in the tree replaces it in its place; a new one goes to its
    nearest group (clustered trees) or its own groups — and reset the metadata of documents
    in `metadata` (key → metadata). Groups left empty are removed."""
    report = AddReport()
    try:
        with step("adding", unit="documents", enabled=progress) as shown:
            _edit(path, _counted(add, shown), list(remove), dict(metadata or {}), model, encode,
                  cache, use_cache, replace, report)
    except DuplicateKey as exc:  # a passage or section key clashes with the tree's
        raise InputError(f"{path}: new documents reuse ids already in the tree ({exc})") from exc
    return report


def _counted(documents: Iterable[DocumentSpec], shown: Step) -> Iterator[DocumentSpec]:
    for document in documents:
        yield document
        shown.advance(1)


def _edit(path: str | os.PathLike[str], documents: Iterable[DocumentSpec], remove: list[str],
          metadata: dict[str, dict[str, Any]], model: str | None, encode: EncodeFn | None,
          cache: str | os.PathLike[str] | None, use_cache: bool, replace: bool,
          report: AddReport) -> None:
    with TreeWriter.update(path) as writer:
        index = writer.document_index() if replace or remove or metadata else {}
        missing = [key for key in remove if key not in index]
        if missing:
            raise InputError(f"{writer.path} has no document {', '.join(map(repr, missing[:5]))}"
                             f"{' …' if len(missing) > 5 else ''}; nothing was changed")
        for key in remove:
            writer.remove_document(key)
            report.removed.append(key)
        for key, meta in metadata.items():
            writer.set_metadata(index[key][0], meta)
        by_source = {_resolved(source): key for key, (_id, source) in index.items()
                     if source and replace}
        placed = ((_replacing(writer, spec, index, by_source, report) if replace else (spec, None))
                  for spec in documents)
        _add_all(writer, placed, model, encode, cache, use_cache, report)
        report.removed_groups = writer.remove_empty_groups()


def _resolved(source: str) -> str:
    return str(Path(source).resolve())


Place = tuple[int, int]  # (parent, pos) of the document a replacement takes the place of


def _replacing(writer: TreeWriter, spec: DocumentSpec, index: dict[str, tuple[int, str | None]],
               by_source: dict[str, str], report: AddReport) -> tuple[DocumentSpec, Place | None]:
    """`spec` and, when it replaces a document (same key, or same source file: it then keeps
    the old key), the place of the document it replaces, which is removed now."""
    key = spec.key if spec.key in index else None
    source = (spec.meta or {}).get("source")
    if key is None and isinstance(source, str):
        key = by_source.get(_resolved(source))
    if key is None or key in report.removed or key in report.replaced:
        return spec, None
    place = writer.remove_document(key)
    if place is None:
        return spec, None
    spec.key = key
    report.replaced.append(key)
    return spec, place


def _add_all(writer: TreeWriter, documents: Iterable[tuple[DocumentSpec, Place | None]],
             model: str | None, encode: EncodeFn | None, cache: str | os.PathLike[str] | None,
             use_cache: bool, report: AddReport) -> None:
    leaves = _Leaves.load(writer)
    name = _check_model(leaves, model, writer.path) if leaves else (model or DEFAULT_MODEL)
    batch: list[DocumentSpec] = []
    for spec, place in documents:
        if place is not None:  # a replacement keeps its place: nothing to embed
            writer.add_document(spec, parent=place[0], pos=place[1])
            continue
        batch.append(spec)
        if len(batch) >= _BATCH:
            _add_batch(writer, leaves, batch, name, encode, cache, use_cache, report)
            batch = []
    _add_batch(writer, leaves, batch, name, encode, cache, use_cache, report)
    if leaves:
        report.oversize = _oversize(writer, leaves)


def _add_batch(writer: TreeWriter, leaves: _Leaves | None, batch: list[DocumentSpec], model: str,
               encode: EncodeFn | None, cache: str | os.PathLike[str] | None, use_cache: bool,
               report: AddReport) -> None:
    if not batch:
        return
    targets: list[int | None] = [None] * len(batch)
    if leaves is not None:
        vectors = embed_texts([_spec_text(s) for s in batch], model, encode=encode, cache=cache,
                              use_cache=use_cache, max_tokens=leaves.max_tokens)
        targets = list(leaves.nearest(vectors))
    keys = _group_keys(writer, {t for t in targets if t is not None})
    _check_new_keys(writer, batch)
    for spec, target in zip(batch, targets, strict=True):
        writer.add_document(spec, parent=target)
        report.added += 1
        if target is None:
            report.unclustered += 1
        else:
            report.assigned[keys[target]] = report.assigned.get(keys[target], 0) + 1


def _check_new_keys(writer: TreeWriter, batch: list[DocumentSpec]) -> None:
    keys = [spec.key for spec in batch if spec.key]
    found = writer.keys_present(keys) if keys else []
    if found:
        raise InputError(f"document {found[0]!r} is already in {writer.path}")


def _group_keys(writer: TreeWriter, ids: Iterable[int]) -> dict[int, str]:
    ids = list(ids)
    return writer.keys_of(ids) if ids else {}


def _sizes(writer: TreeWriter, leaves: _Leaves) -> dict[int, int]:
    return {gid: len(writer.child_ids(gid, NodeKind.DOCUMENT)) for gid in leaves.ids}


def _oversize(writer: TreeWriter, leaves: _Leaves) -> list[str]:
    bound = int(leaves.settings.get("max_size", 0))
    over = [gid for gid, size in _sizes(writer, leaves).items() if bound and size > bound]
    keys = _group_keys(writer, over)
    return [keys[gid] for gid in over]


def rebalance(
    path: str | os.PathLike[str], *, min_size: int | None = None, max_size: int | None = None,
    describer: Describer | None = None, encode: EncodeFn | None = None,
    cache: str | os.PathLike[str] | None = None, use_cache: bool = True, progress: bool = False,
) -> RebalanceReport:
    """Dissolve leaf groups below `min_size` into their documents' nearest other groups and
    bisect groups above `max_size` (along their principal axis) until all fit. Bounds default
    to those the tree was clustered with. Only affected documents are re-embedded."""
    with TreeWriter.update(path) as writer:
        leaves = _Leaves.load(writer)
        if leaves is None:
            raise InputError(f"{writer.path} was not clustered; build it with --cluster first")
        low = int(min_size if min_size is not None else leaves.settings.get("min_size", 1))
        high = int(max_size if max_size is not None else leaves.settings.get("max_size", 0))
        if low < 1 or high < max(2, low):
            raise InputError(f"rebalance bounds min={low}, max={high} are not usable")
        job = _Rebalance(writer, leaves, encode, cache, use_cache)
        report = RebalanceReport(min_size=low, max_size=high)
        job.dissolve_small(low, report)
        changed = job.split_large(high, report)
        job.describe(changed, describer or ExtractiveDescriber(), progress)
        job.save()
    return report


class _Rebalance:
    def __init__(self, writer: TreeWriter, leaves: _Leaves, encode: EncodeFn | None,
                 cache: str | os.PathLike[str] | None, use_cache: bool) -> None:
        self.writer = writer
        self.leaves = leaves
        self.embed_args: dict[str, Any] = {"encode": encode, "cache": cache, "use_cache": use_cache}
        self.heads = {h.id: h for h in writer.document_heads()}
        self.keys = _group_keys(writer, leaves.ids)

    def vectors(self, doc_ids: Sequence[int]) -> np.ndarray:
        texts = [document_text(self.heads[d].title, self.heads[d].description,
                               self.heads[d].first_passage) for d in doc_ids]
        return embed_texts(texts, self.leaves.model, max_tokens=self.leaves.max_tokens,
                           **self.embed_args)

    def dissolve_small(self, low: int, report: RebalanceReport) -> None:
        while len(self.leaves.ids) > 1:
            sizes = _sizes(self.writer, self.leaves)
            group, size = min(sizes.items(), key=lambda item: (item[1], item[0]))
            if size >= low:
                return
            docs = self.writer.child_ids(group, NodeKind.DOCUMENT)
            targets = self.leaves.nearest(self.vectors(docs), exclude=[group]) if docs else []
            for doc, target in zip(docs, targets, strict=True):
                self.writer.move(doc, target)
            report.merged[self.keys[group]] = sorted({self.keys[t] for t in targets})
            self._drop(group)

    def _parent(self, node_id: int) -> int:
        parent = self.writer.parent_of(node_id)
        assert parent is not None  # groups always hang below the root
        return parent

    def _drop(self, group: int) -> None:
        index = self.leaves.ids.index(group)
        del self.leaves.ids[index]
        self.leaves.centroids = np.delete(self.leaves.centroids, index, axis=0)
        parent = self._parent(group)
        self.writer.remove_group(group)
        root = self.writer.root_id
        while parent != root and not self.writer.child_ids(parent):  # empty upper groups go too
            above = self._parent(parent)
            self.writer.remove_group(parent)
            parent = above

    def split_large(self, high: int, report: RebalanceReport) -> list[int]:
        """Bisect every group above `high` until its parts fit; returns all groups touched."""
        changed: list[int] = []
        for group, size in list(_sizes(self.writer, self.leaves).items()):
            if size <= high:
                continue
            docs = np.array(self.writer.child_ids(group, NodeKind.DOCUMENT), dtype=np.int64)
            vectors = self.vectors(list(docs))
            part_ids = self._place_parts(group, docs, vectors, _bisect_until(vectors, high))
            report.split[self.keys[group]] = [self.keys[g] for g in part_ids]
            changed.extend(part_ids)
        return changed

    def _place_parts(self, group: int, docs: np.ndarray, vectors: np.ndarray,
                     parts: list[np.ndarray]) -> list[int]:
        parent = self._parent(group)
        settings = self.leaves.settings
        part_ids = [group]
        for _ in parts[1:]:
            serial = settings["next_serial"][0]
            settings["next_serial"][0] = serial + 1
            new_id = self.writer.add_group(f"Group {serial + 1}", parent, key=f"c:0:{serial}")
            part_ids.append(new_id)
            self.keys[new_id] = f"c:0:{serial}"
        siblings = self.writer.child_ids(parent)
        at = siblings.index(group)
        rest = [s for s in siblings if s not in part_ids]
        self.writer.place_children(parent, rest[:at] + part_ids + rest[at:])
        for part_id, members in zip(part_ids, parts, strict=True):
            centroid = normalise(vectors[members].mean(axis=0, keepdims=True))[0]
            ordered = members[typical_order(vectors[members], centroid)]
            self.writer.place_children(part_id, [int(d) for d in docs[ordered]])
            self._set_centroid(part_id, centroid)
        return part_ids

    def _set_centroid(self, group: int, centroid: np.ndarray) -> None:
        if group in self.leaves.ids:
            self.leaves.centroids[self.leaves.ids.index(group)] = centroid
        else:
            self.leaves.ids.append(group)
            self.leaves.centroids = np.vstack([self.leaves.centroids, centroid[None, :]])

    def describe(self, groups: list[int], describer: Describer, progress: bool) -> None:
        """New titles and descriptions for the groups a split produced; terms are contrasted
        against every leaf group, as when the tree was clustered."""
        if not groups:
            return
        members = {g: self.writer.child_ids(g, NodeKind.DOCUMENT) for g in self.leaves.ids}
        order = list(self.leaves.ids)
        texts = [" ".join(term_text(document_label(*self.heads[d][3:6]),
                                    document_text(*self.heads[d][3:6])) for d in members[g])
                 for g in order]
        terms = dict(zip(order, distinctive_terms(texts), strict=True))
        sketches = [GroupSketch(self.keys[g], tuple(document_label(*self.heads[d][3:6])
                                                    for d in members[g][:MAX_TITLES]),
                                terms[g], len(members[g])) for g in groups]
        for group, sketch, text in zip(groups, sketches, describer.describe(sketches, progress),
                                       strict=True):
            self.writer.set_group_text(group, group_title(sketch), text)

    def save(self) -> None:
        rows = [(gid, 0, self.leaves.model, self.leaves.centroids[i].astype(np.float32).tobytes())
                for i, gid in enumerate(self.leaves.ids)]
        self.writer.save_centroids(rows)
        settings = dict(self.leaves.settings)
        settings["groups"] = [len(self.leaves.ids), *settings.get("groups", [0])[1:]]
        self.writer.meta[META_KEY] = settings


def _bisect_until(vectors: np.ndarray, high: int) -> list[np.ndarray]:
    """Row-index sets, each at most `high` rows, by repeated median bisection."""
    pending = [np.arange(len(vectors))]
    done: list[np.ndarray] = []
    while pending:
        rows = pending.pop(0)
        if len(rows) <= high:
            done.append(rows)
            continue
        second = bisect(vectors[rows])
        pending[:0] = [rows[~second], rows[second]]
    return done
