"""Per-node metadata summaries: what the documents below a node carry, for filters that prune.

One row per root and group node, and per document whose passages carry metadata of their own
(a page number, a JSONL ``metadata``): the number of documents below it and, per metadata key,
how many of them have the key, its distinct values (up to ``MAX_VALUES``; list values count
each element) and the range of its numbers and of its strings. A filter that no document
below a node can satisfy removes the node without reading further (:mod:`.._navigate._filters`).
Rows are rewritten on every commit, so adding, removing and re-grouping documents keep them
true. Documents without a row are summarised by their own metadata.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import NodeKind

MAX_VALUES = 64
_TABLE = "meta_summary"
_GROUP_KINDS = f"kind < {int(NodeKind.DOCUMENT)}"  # root and groups
_DOCUMENT, _PASSAGE = 2, 4


@dataclass(slots=True)
class KeySummary:
    """One key's values over the documents below a node."""

    n: int = 0  # documents having the key
    values: set[Any] | None = field(default_factory=set)  # None: more than MAX_VALUES
    num: tuple[float, float] | None = None
    text: tuple[str, str] | None = None

    def add(self, value: Any) -> None:
        for item in value if type(value) is list else (value,):
            values = self.values
            if values is not None:
                values.add(item)
                if len(values) > MAX_VALUES:
                    self.values = None
            kind = type(item)
            if kind is str:
                text = self.text
                if text is None:
                    self.text = (item, item)
                elif item < text[0] or item > text[1]:
                    self.text = (min(text[0], item), max(text[1], item))
            elif kind is int or kind is float:
                num = self.num
                if num is None:
                    self.num = (item, item)
                elif item < num[0] or item > num[1]:
                    self.num = (min(num[0], item), max(num[1], item))

    def merge(self, other: KeySummary) -> None:
        self.n += other.n
        if self.values is not None and other.values is not None:
            self.values |= other.values
            if len(self.values) > MAX_VALUES:
                self.values = None
        else:
            self.values = None
        for name in ("num", "text"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None:
                setattr(self, name, theirs if mine is None else (min(mine[0], theirs[0]),
                                                                 max(mine[1], theirs[1])))

    def to_json(self) -> list[Any]:
        values = None if self.values is None else sorted(self.values, key=_order)
        return [self.n, values, self.num, self.text]

    @classmethod
    def from_json(cls, data: list[Any]) -> KeySummary:
        n, values, num, text = data
        return cls(n, None if values is None else set(values),
                   (num[0], num[1]) if num else None, (text[0], text[1]) if text else None)


@dataclass(slots=True)
class Summary:
    """The metadata of the `documents` documents below a node, key by key."""

    documents: int = 0
    keys: dict[str, KeySummary] = field(default_factory=dict)

    @classmethod
    def of_metadata(cls, metas: Iterable[dict[str, Any]]) -> Summary:
        """One document's summary from its own metadata and its passages' (each key counted
        once for the document)."""
        summary = cls(documents=1)
        for meta in metas:
            for key, value in meta.items():
                entry = summary.keys.get(key)
                if entry is None:
                    entry = summary.keys[key] = KeySummary(n=1)
                entry.add(value)
        return summary

    def merge(self, other: Summary) -> None:
        self.documents += other.documents
        for key, entry in other.keys.items():
            mine = self.keys.get(key)
            if mine is None:
                self.keys[key] = mine = KeySummary(0, set())
            mine.merge(entry)


def _order(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value if value is not None else 0)


def write_summaries(db: sqlite3.Connection) -> None:
    """(Re)write every summary row from the nodes as they are now."""
    db.execute(f"DROP TABLE IF EXISTS {_TABLE}")
    db.execute(f"CREATE TABLE {_TABLE} (node_id INTEGER PRIMARY KEY, documents INTEGER NOT NULL,"
               " keys TEXT NOT NULL)")
    inner = db.execute(f"SELECT id, parent FROM nodes WHERE {_GROUP_KINDS}").fetchall()
    parents = dict(inner)
    summaries = {node_id: Summary() for node_id, _ in inner}
    passage_metas: dict[int, list[dict[str, Any]]] = {}
    for doc, meta in db.execute(
            f"SELECT doc, meta FROM nodes WHERE kind={_PASSAGE} AND meta IS NOT NULL"):
        passage_metas.setdefault(doc, []).append(json.loads(meta))
    rows: list[tuple[int, int, str]] = []
    for doc_id, parent, meta in db.execute(
            f"SELECT id, parent, meta FROM nodes WHERE kind={_DOCUMENT}"):
        own = json.loads(meta) if meta else {}
        summary = Summary.of_metadata([own, *passage_metas.get(doc_id, ())])
        if doc_id in passage_metas:
            rows.append(_row(doc_id, summary))
        summaries[parent].merge(summary)  # into its own group only: groups roll up below
    for node_id in sorted(summaries, key=lambda n: -_depth(n, parents)):  # deepest first
        parent = parents[node_id]
        if parent is not None:
            summaries[parent].merge(summaries[node_id])
    rows.extend(_row(node_id, summary) for node_id, summary in summaries.items())
    db.executemany(f"INSERT INTO {_TABLE} VALUES (?, ?, ?)", rows)


def _depth(node_id: int, parents: dict[int, int | None]) -> int:
    depth, current = 0, parents[node_id]
    while current is not None:
        depth, current = depth + 1, parents[current]
    return depth


def _row(node_id: int, summary: Summary) -> tuple[int, int, str]:
    keys = {key: entry.to_json() for key, entry in summary.keys.items()}
    return node_id, summary.documents, json.dumps(keys, separators=(",", ":"))


def read_summaries(db: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Summary] | None:
    """The stored summaries of `ids` (absent ids have none); None for a tree written before
    summaries existed."""
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (_TABLE,)).fetchone()
    if exists is None:
        return None
    found: dict[int, Summary] = {}
    for start in range(0, len(ids), 900):
        chunk = list(ids[start:start + 900])
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT node_id, documents, keys FROM {_TABLE} WHERE node_id IN ({marks})"
        for node_id, documents, keys in db.execute(sql, chunk):
            found[node_id] = Summary(documents, {key: KeySummary.from_json(value)
                                                 for key, value in json.loads(keys).items()})
    return found
