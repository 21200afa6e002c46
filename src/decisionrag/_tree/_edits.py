"""Documents edited in place: read back as specs, fingerprinted, removed, their metadata reset.

A document owns the contiguous id range ``id..end_id`` (itself, its sections, its passages), so
removing it is one range delete. A replacement is written at the end of the id space (a new
contiguous range) and takes the removed document's place among its parent's children, so the
reading order is kept. Groups left empty are removed with their centroids; passage counts and
metadata summaries are recomputed when the writer commits.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from ._model import DocumentSpec, NodeKind, PassageSpec

HEADING_SEP = "\x1f"
VOLATILE_KEYS = ("mtime",)  # metadata that changes without the content changing


def fingerprint(spec: DocumentSpec) -> str:
    """A content hash of a document: title, passages (text, heading path, given key,
    metadata) and document metadata other than ``mtime``. Auto-assigned passage keys, groups
    and the description (derived from the rest) are left out."""
    doc_key = spec.key or ""
    passages = []
    for index, passage in enumerate(spec.passages):
        key = passage.key if passage.key and passage.key != f"{doc_key}#p{index}" else None
        passages.append([passage.text, list(passage.section), key, passage.meta or {}])
    meta = {k: v for k, v in (spec.meta or {}).items() if k not in VOLATILE_KEYS}
    canonical = json.dumps([spec.title, passages, meta], sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def document_index(db: sqlite3.Connection) -> dict[str, tuple[int, str | None]]:
    """key → (id, source path or None) of every document."""
    found: dict[str, tuple[int, str | None]] = {}
    sql = f"SELECT id, key, meta FROM nodes WHERE kind={int(NodeKind.DOCUMENT)}"
    for node_id, key, meta in db.execute(sql):
        source = json.loads(meta).get("source") if meta else None
        found[key] = (node_id, source if isinstance(source, str) else None)
    return found


def stored_document(db: sqlite3.Connection, key: str) -> DocumentSpec | None:
    """The document `key` as a spec (title, passages with headings, keys and metadata, its
    metadata and description), or None if the tree has no such document."""
    row = db.execute("SELECT id, end_id, title, description, meta FROM nodes WHERE key=? AND "
                     f"kind={int(NodeKind.DOCUMENT)}", (key,)).fetchone()
    if row is None:
        return None
    doc_id, end, title, description, meta = row
    passages = [
        PassageSpec(text, tuple(heading.split(HEADING_SEP)) if heading else (), pkey,
                    json.loads(pmeta) if pmeta else None)
        for pkey, heading, text, pmeta in db.execute(
            "SELECT key, heading, text, meta FROM nodes WHERE id BETWEEN ? AND ? AND "
            f"kind={int(NodeKind.PASSAGE)} ORDER BY id", (doc_id, end))
    ]
    return DocumentSpec(title, passages, key=key, description=description,
                        meta=json.loads(meta) if meta else None)


def remove_document(db: sqlite3.Connection, key: str) -> tuple[int, int, dict[str, int]] | None:
    """Delete document `key` and everything under it; (parent, pos, rows removed by kind
    label), or None if the tree has no such document. The parent keeps a gap at `pos`."""
    row = db.execute("SELECT id, end_id, parent, pos FROM nodes WHERE key=? AND "
                     f"kind={int(NodeKind.DOCUMENT)}", (key,)).fetchone()
    if row is None:
        return None
    doc_id, end, parent, pos = row
    removed = {NodeKind(kind).label: count for kind, count in db.execute(
        "SELECT kind, count(*) FROM nodes WHERE id BETWEEN ? AND ? GROUP BY kind", (doc_id, end))}
    db.execute("DELETE FROM nodes WHERE id BETWEEN ? AND ?", (doc_id, end))
    return parent, pos, removed


def empty_groups(db: sqlite3.Connection) -> list[int]:
    """Group nodes without children (deepest first when removed repeatedly)."""
    sql = (f"SELECT g.id FROM nodes g WHERE g.kind={int(NodeKind.GROUP)} AND NOT EXISTS "
           "(SELECT 1 FROM nodes c WHERE c.parent = g.id)")
    return [row[0] for row in db.execute(sql)]


def set_metadata(db: sqlite3.Connection, node_id: int, meta: dict[str, Any]) -> None:
    db.execute("UPDATE nodes SET meta=? WHERE id=?", (json.dumps(meta) if meta else None, node_id))
