"""The tree file's schema: the ``nodes`` table, its indexes, row <-> `Node`, and the node
kinds as SQL sees them. Shared by the writer (`_writer`) and the reader (`_reader`).

Layout: one ``nodes`` table. Ids are integers assigned as nodes are written; a document's
sections and passages are written together, so every document (and section) owns the
contiguous id range ``id..end_id`` and its passages come back in reading order with one
range scan. Group nodes may be added later (clustering) and re-parent documents.

A passage's text is stored once, in ``text``; its ``description`` column is empty and reads
back as the text. Indexes are built once, after the bulk load (see ``_INDEXES``).
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import InputError
from ._model import DocumentSpec, Node, NodeKind

SCHEMA_VERSION = 1
HEADING_SEP = "\x1f"
ROOT_KEY = "root"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    parent INTEGER,
    kind INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    doc INTEGER,
    end_id INTEGER NOT NULL,
    n_passages INTEGER NOT NULL DEFAULT 0,
    title TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    heading TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL DEFAULT '',
    meta TEXT
);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes (parent, pos);
CREATE UNIQUE INDEX IF NOT EXISTS nodes_key ON nodes (key);
CREATE INDEX IF NOT EXISTS nodes_inner ON nodes (parent, pos, id, key, kind, doc, end_id,
    n_passages, title, description, heading, meta) WHERE kind < 3;
"""
# nodes_inner covers the groups and documents (the children of the root and of groups): they
# are scattered between the passages in the file, so listing e.g. 100k documents under one
# root would otherwise read a page per document. Queries that use it say `kind < 3`.
_COLUMNS = ("id, key, parent, kind, pos, doc, end_id, n_passages, title, description, heading, "
            "text, meta")
_INNER_COLUMNS = _COLUMNS.replace(", text,", ", '' AS text,")
_INSERT = f"INSERT INTO nodes ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"

Row = tuple[Any, ...]


class DuplicateKey(InputError):
    """Two nodes would share one external id (sqlite's integrity error, translated here)."""

# node kinds in SQL: every kind test in a query is written with these
_ROOT, _GROUP = int(NodeKind.ROOT), int(NodeKind.GROUP)
_DOCUMENT, _SECTION, _PASSAGE = int(NodeKind.DOCUMENT), int(NodeKind.SECTION), int(NodeKind.PASSAGE)
_BATCH = 900  # ids or keys per IN (...) list: under SQLite's variable limit
_BATCH_ROWS = 50_000
_KINDS = tuple(NodeKind)  # NodeKind(i) by index: a tuple lookup is cheaper than the enum call
_PAGE_SIZE = 16_384


# Node is a frozen dataclass, whose __init__ sets every field through object.__setattr__
# (2 µs a node, and a page level reads 16,000 of them). The row path fills its slots directly
# (0.7 µs); the result is an ordinary, equally read-only Node.
_ROW_FIELDS = ("id", "key", "parent", "kind", "pos", "doc", "end", "n_passages", "title",
               "description", "heading", "text", "meta")  # the order of _COLUMNS
if Node.__slots__ != _ROW_FIELDS:  # pragma: no cover - a guard for whoever edits Node
    raise RuntimeError(f"Node's fields changed to {Node.__slots__}: update _row_to_node")
(_set_id, _set_key, _set_parent, _set_kind, _set_pos, _set_doc, _set_end, _set_n_passages,
 _set_title, _set_description, _set_heading, _set_text, _set_meta) = (
    getattr(Node, name).__set__ for name in _ROW_FIELDS)
_new = object.__new__
# the metadata of every node that has none: one dict, not one each (nodes are read-only;
# 108,626 cached pages held 5.9 MB of empty dicts at NQ size)
_NO_META: dict[str, Any] = {}


def _row_to_node(row: Row) -> Node:
    node = _new(Node)
    _set_id(node, row[0])
    _set_key(node, row[1])
    _set_parent(node, row[2])
    _set_kind(node, _KINDS[row[3]])
    _set_pos(node, row[4])
    _set_doc(node, row[0] if row[5] == row[0] else row[5])  # one int object, not two
    _set_end(node, row[6])
    _set_n_passages(node, row[7])
    _set_title(node, row[8])
    # a passage's description is its text; a page's is often its title: one string, not two
    description = row[9] or row[11]
    _set_description(node, row[8] if description == row[8] else description)
    _set_heading(node, tuple(row[10].split(HEADING_SEP)) if row[10] else ())
    _set_text(node, row[11])
    _set_meta(node, json.loads(row[12]) if row[12] else _NO_META)
    return node


def default_description(title: str, spec: DocumentSpec) -> str:
    """A document's description: its title, then its distinct top-level headings."""
    tops: list[str] = []
    for passage in spec.passages:
        if passage.section and passage.section[0] not in tops and passage.section[0] != title:
            tops.append(passage.section[0])
    if not tops:
        return title
    return f"{title} — {'; '.join(tops)}" if title else "; ".join(tops)


