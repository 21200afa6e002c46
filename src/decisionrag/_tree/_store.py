"""The embedded tree store: one SQLite file, schema-versioned, written atomically.

This module is the only code in decisionrag that writes SQL.

Layout: one ``nodes`` table. Ids are integers assigned as nodes are written; a document's
sections and passages are written together, so every document (and section) owns the
contiguous id range ``id..end_id`` and its passages come back in reading order with one
range scan. Group nodes may be added later (clustering) and re-parent documents.

A passage's text is stored once, in ``text``; its ``description`` column is empty and reads
back as the text. Indexes are built once, after the bulk load (see ``_INDEXES``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .._errors import InputError, TreeFormatError
from .._files import temporary_beside
from . import _edits
from ._model import DocumentHead, DocumentSpec, Node, NodeKind
from ._summaries import Summary, read_summaries, write_summaries

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


def _row_to_node(row: Row) -> Node:
    node = _new(Node)
    _set_id(node, row[0])
    _set_key(node, row[1])
    _set_parent(node, row[2])
    _set_kind(node, _KINDS[row[3]])
    _set_pos(node, row[4])
    _set_doc(node, row[5])
    _set_end(node, row[6])
    _set_n_passages(node, row[7])
    _set_title(node, row[8])
    _set_description(node, row[9] or row[11])  # a passage's description is its text
    _set_heading(node, tuple(row[10].split(HEADING_SEP)) if row[10] else ())
    _set_text(node, row[11])
    _set_meta(node, json.loads(row[12]) if row[12] else {})
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


class TreeWriter:
    """Writes a tree to a temporary file and renames it into place on success.

    Use as a context manager. If the block raises (or the process dies), no file is left at
    `path`; the temporary file is removed. ``TreeWriter.update(path)`` copies an existing tree
    to a temporary file for additions (e.g. new documents assigned to existing groups).
    """

    def __init__(self, path: str | os.PathLike[str], *, root_title: str = "") -> None:
        self.path = Path(path)
        self.tmp_path = temporary_beside(self.path)  # renamed into place by commit()
        self._db = sqlite3.connect(self.tmp_path, isolation_level=None)
        self._db.execute(f"PRAGMA page_size={_PAGE_SIZE}")  # before the first table: fewer,
        self._tune()  # fuller pages make bulk inserts of passage text faster
        self._next_id = 0
        self._groups: dict[tuple[str, ...], int] = {}
        self._child_count: dict[int, int] = {}
        self.meta: dict[str, Any] = {}
        self.counts: dict[str, int] = {kind.label: 0 for kind in NodeKind}
        self._pending: list[Sequence[Any]] = []
        self._begun = False
        if self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            self._db.executescript(_SCHEMA)
            self.root_id = self._insert_simple(ROOT_KEY, None, NodeKind.ROOT, root_title,
                                               root_title)

    @classmethod
    def update(cls, path: str | os.PathLike[str]) -> TreeWriter:
        """Open an existing tree for additions; the original stays untouched until commit."""
        source = Tree.open(path)
        source.close()
        writer = cls.__new__(cls)
        writer.path = Path(path)
        writer.tmp_path = temporary_beside(writer.path)
        src = sqlite3.connect(f"file:{writer.path}?mode=ro", uri=True)
        writer._db = sqlite3.connect(writer.tmp_path, isolation_level=None)
        src.backup(writer._db)
        src.close()
        writer._tune()
        writer._pending = []
        writer._begun = False
        writer._load_state()
        return writer

    def _tune(self) -> None:
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("PRAGMA cache_size=-65536")
        self._db.execute("PRAGMA temp_store=MEMORY")

    def _load_state(self) -> None:
        db = self._db
        self._next_id = db.execute("SELECT coalesce(max(id), -1) + 1 FROM nodes").fetchone()[0]
        self.root_id = db.execute(f"SELECT id FROM nodes WHERE kind={_ROOT}").fetchone()[0]
        self.meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
        self.counts = {kind.label: 0 for kind in NodeKind}
        for kind, count in db.execute("SELECT kind, count(*) FROM nodes GROUP BY kind"):
            self.counts[NodeKind(kind).label] = count
        self._child_count = dict(db.execute(  # the next free position: gaps left by removals
            "SELECT parent, max(pos) + 1 FROM nodes GROUP BY parent"))
        self._groups = {}
        for gid, in db.execute(f"SELECT id FROM nodes WHERE kind={_GROUP}"):
            path = tuple(n.title for n in self._ancestry(gid))
            self._groups[path] = gid

    def _ancestry(self, node_id: int) -> list[Node]:
        chain: list[Node] = []
        current: int | None = node_id
        while current is not None:
            sql = f"SELECT {_COLUMNS} FROM nodes WHERE id=?"
            row = self._db.execute(sql, (current,)).fetchone()
            node = _row_to_node(row)
            if node.kind != NodeKind.ROOT:
                chain.append(node)
            current = node.parent
        return chain[::-1]

    # -- writing -------------------------------------------------------------------------

    def _new_id(self) -> int:
        node_id = self._next_id
        self._next_id += 1
        return node_id

    def _next_pos(self, parent: int) -> int:
        pos = self._child_count.get(parent, 0)
        self._child_count[parent] = pos + 1
        return pos

    def _begin(self) -> None:
        if not self._begun:
            self._db.execute("BEGIN")
            self._begun = True

    def _insert_simple(
        self, key: str, parent: int | None, kind: NodeKind, title: str, description: str,
        meta: dict[str, Any] | None = None,
    ) -> int:
        node_id = self._new_id()
        pos = self._next_pos(parent) if parent is not None else 0
        self._begin()
        try:
            self._db.execute(_INSERT, (
                node_id, key, parent, int(kind), pos, None, node_id, 0, title, description, "", "",
                json.dumps(meta) if meta else None,
            ))
        except sqlite3.IntegrityError as exc:
            raise DuplicateKey(f"{self.path}: node id {key!r} is already in the tree") from exc
        self.counts[kind.label] += 1
        return node_id

    def add_group(
        self, title: str, parent: int | None = None, *, description: str | None = None,
        key: str | None = None, meta: dict[str, Any] | None = None,
    ) -> int:
        """Add a group node under `parent` (default: the root) and return its id."""
        parent = self.root_id if parent is None else parent
        key = key or f"g:{self._next_id}"
        return self._insert_simple(key, parent, NodeKind.GROUP, title, description or title, meta)

    def group_for(self, path: Sequence[str]) -> int:
        """The id of the group at `path` (outermost first), creating missing groups in order."""
        parent = self.root_id
        for depth in range(1, len(path) + 1):
            prefix = tuple(path[:depth])
            if prefix not in self._groups:
                key = "g:" + "/".join(prefix)
                self._groups[prefix] = self.add_group(prefix[-1], parent, key=key)
            parent = self._groups[prefix]
        return parent

    def add_document(self, spec: DocumentSpec, parent: int | None = None,
                     pos: int | None = None) -> int:
        """Write a document, its sections and its passages; return the document's id. `pos`
        puts it at that place among `parent`'s children (one a removal left free)."""
        if parent is None:
            parent = self.group_for(spec.groups) if spec.groups else self.root_id
        doc_id = self._new_id()
        doc_key = spec.key or f"d{doc_id}"
        rows, next_id, n_sections = self._document_rows(spec, doc_id, doc_key)
        self._next_id = next_id
        description = spec.description or default_description(spec.title, spec)
        self._pending.append((
            doc_id, doc_key, parent, _DOCUMENT, self._next_pos(parent) if pos is None else pos,
            doc_id, next_id - 1,
            len(spec.passages), spec.title, description, "", "",
            json.dumps(spec.meta) if spec.meta else None,
        ))
        self._pending.extend(rows)
        self.counts["document"] += 1
        self.counts["passage"] += len(spec.passages)
        self.counts["section"] += n_sections
        if len(self._pending) >= _BATCH_ROWS:
            self._flush()
        return doc_id

    def _document_rows(
        self, spec: DocumentSpec, doc_id: int, doc_key: str
    ) -> tuple[list[Sequence[Any]], int, int]:
        """The section and passage rows of a document in id order, the next free id and the
        number of sections. This is the build's inner loop, hence the flat, local style."""
        rows: list[Sequence[Any]] = []
        open_sections: list[list[Any]] = []  # rows of the sections open here, outermost first
        counters: dict[int, int] = {}  # children written so far per parent
        next_id = doc_id + 1
        n_sections = 0
        current_path: Sequence[str] = ()
        current_parent = doc_id
        heading = ""
        for index, passage in enumerate(spec.passages):
            path = passage.section
            if path != current_path:
                keep = 0
                while (keep < len(open_sections) and keep < len(path)
                       and open_sections[keep][8] == path[keep]):
                    keep += 1
                for row in open_sections[keep:]:  # close: end id and passage count
                    row[6], row[7] = next_id - 1, index - row[7]
                del open_sections[keep:]
                for depth in range(keep, len(path)):
                    section_parent = open_sections[-1][0] if open_sections else doc_id
                    pos = counters.get(section_parent, 0)
                    counters[section_parent] = pos + 1
                    row = [next_id, f"{doc_key}#s{next_id - doc_id}", section_parent, _SECTION, pos,
                           doc_id, next_id, index, path[depth], " > ".join(path[: depth + 1]),
                           HEADING_SEP.join(path[: depth + 1]), "", None]
                    rows.append(row)
                    open_sections.append(row)
                    next_id += 1
                    n_sections += 1
                current_path = path
                current_parent = open_sections[-1][0] if open_sections else doc_id
                heading = HEADING_SEP.join(path)
            pos = counters.get(current_parent, 0)
            counters[current_parent] = pos + 1
            meta = passage.meta
            # a passage's description is its text: stored once, in `text` (see _row_to_node)
            rows.append((next_id, passage.key or f"{doc_key}#p{index}", current_parent, _PASSAGE,
                         pos, doc_id, next_id, 1, "", "", heading, passage.text,
                         json.dumps(meta) if meta else None))
            next_id += 1
        for row in open_sections:
            row[6], row[7] = next_id - 1, len(spec.passages) - row[7]
        return rows, next_id, n_sections

    def add_documents(self, specs: Iterable[DocumentSpec]) -> int:
        count = 0
        for spec in specs:
            self.add_document(spec)
            count += 1
        return count

    def move(self, node_id: int, new_parent: int) -> None:
        """Re-parent a node (e.g. a document under a new cluster group), appended last."""
        self._flush()
        self._db.execute("UPDATE nodes SET parent=?, pos=? WHERE id=?",
                         (new_parent, self._next_pos(new_parent), node_id))

    def set_description(self, node_id: int, description: str) -> None:
        self._flush()
        self._db.execute("UPDATE nodes SET description=? WHERE id=?", (description, node_id))

    # -- editing documents in place (._edits) ----------------------------------------------

    def document_index(self) -> dict[str, tuple[int, str | None]]:
        """key → (id, source path or None) of every document."""
        self._flush()
        return _edits.document_index(self._db)

    def stored_document(self, key: str) -> DocumentSpec | None:
        self._flush()
        return _edits.stored_document(self._db, key)

    def remove_document(self, key: str) -> tuple[int, int] | None:
        """Delete document `key` with its sections and passages; its (parent, pos), which a
        replacement may take, or None when there is no such document."""
        self._flush()
        self._begin()
        found = _edits.remove_document(self._db, key)
        if found is None:
            return None
        parent, pos, removed = found
        for label, count in removed.items():
            self.counts[label] -= count
        return parent, pos

    def remove_empty_groups(self) -> int:
        """Remove groups left without children (and their centroids), repeatedly upwards."""
        self._flush()
        removed = 0
        while empty := _edits.empty_groups(self._db):
            for group_id in empty:
                self.remove_group(group_id)
                removed += 1
        return removed

    def set_metadata(self, node_id: int, meta: dict[str, Any]) -> None:
        self._flush()
        self._begin()
        _edits.set_metadata(self._db, node_id, meta)

    def parent_of(self, node_id: int) -> int | None:
        """The id of `node_id`'s parent (None for the root)."""
        self._flush()
        row = self._db.execute("SELECT parent FROM nodes WHERE id=?", (node_id,)).fetchone()
        if row is None:
            raise KeyError(node_id)
        return int(row[0]) if row[0] is not None else None

    def keys_present(self, keys: Sequence[str]) -> list[str]:
        """Those of `keys` some node of the tree already has."""
        self._flush()
        found: list[str] = []
        for start in range(0, len(keys), _BATCH):
            chunk = list(keys[start:start + _BATCH])
            marks = ",".join("?" * len(chunk))
            found += [k for k, in self._db.execute(
                f"SELECT key FROM nodes WHERE key IN ({marks})", chunk)]
        return found

    def keys_of(self, ids: Sequence[int]) -> dict[int, str]:
        """The external keys of the nodes `ids`."""
        self._flush()
        found: dict[int, str] = {}
        for start in range(0, len(ids), _BATCH):
            chunk = list(ids[start:start + _BATCH])
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT id, key FROM nodes WHERE id IN ({marks})", chunk))
        return found

    def _flush(self) -> None:
        if self._pending:
            self._begin()
            try:
                self._db.executemany(_INSERT, self._pending)
            except sqlite3.IntegrityError as exc:  # the key index exists when updating a tree
                raise DuplicateKey(f"{self.path}: a node id being added is already in the tree "
                                   f"({exc})") from exc
            self._pending.clear()

    # -- clustering (decisionrag._cluster) -------------------------------------------------
    # Group levels built over flat corpora. Leaf- and upper-level centroids live in the
    # `clusters` table so that later additions are assigned without re-clustering.

    def document_heads(self) -> Iterator[DocumentHead]:
        """Every document's `DocumentHead` (id, parent, key, title, description, first
        passage text), by id."""
        self._flush()
        sql = ("SELECT d.id, d.parent, d.key, d.title, d.description, coalesce((SELECT p.text "
               f"FROM nodes p WHERE p.id BETWEEN d.id AND d.end_id AND p.kind={_PASSAGE} "
               f"ORDER BY p.id LIMIT 1), '') FROM nodes d WHERE d.kind={_DOCUMENT} ORDER BY d.id")
        for row in self._db.execute(sql):
            yield DocumentHead(*row)

    def place_children(self, parent: int, ordered_children: Sequence[int]) -> None:
        """Make `ordered_children` the children of `parent`, in this reading order."""
        self._flush()
        self._begin()
        self._db.executemany("UPDATE nodes SET parent=?, pos=? WHERE id=?",
                             [(parent, pos, child) for pos, child in enumerate(ordered_children)])
        self._child_count[parent] = max(self._child_count.get(parent, 0), len(ordered_children))

    def child_ids(self, parent: int, kind: NodeKind | None = None) -> list[int]:
        """Ids of `parent`'s children (of one kind, if given) in reading order."""
        self._flush()
        sql = "SELECT id FROM nodes WHERE parent=?" + (" AND kind=?" if kind is not None else "")
        params: tuple[int, ...] = (parent,) if kind is None else (parent, int(kind))
        return [row[0] for row in self._db.execute(sql + " ORDER BY pos", params)]

    def set_group_text(self, group_id: int, title: str, description: str) -> None:
        self._flush()
        self._db.execute(f"UPDATE nodes SET title=?, description=? WHERE id=? AND kind={_GROUP}",
                         (title, description, group_id))

    def remove_group(self, group_id: int) -> None:
        """Delete an empty group node and its centroid."""
        if self.child_ids(group_id):
            raise InputError(f"group {group_id} still has children; it cannot be removed")
        self._begin()
        self._db.execute(f"DELETE FROM nodes WHERE id=? AND kind={_GROUP}", (group_id,))
        self._ensure_clusters_table()
        self._db.execute("DELETE FROM clusters WHERE group_id=?", (group_id,))
        self.counts["group"] -= 1
        self._groups = {path: gid for path, gid in self._groups.items() if gid != group_id}

    def _ensure_clusters_table(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS clusters (group_id INTEGER PRIMARY KEY, "
                         "level INTEGER NOT NULL, model TEXT NOT NULL, centroid BLOB NOT NULL)")

    def save_centroids(self, rows: Iterable[tuple[int, int, str, bytes]]) -> None:
        """Store (group id, level, model, float32 centroid bytes); level 0 = leaf groups."""
        self._flush()
        self._begin()
        self._ensure_clusters_table()
        self._db.executemany("INSERT OR REPLACE INTO clusters VALUES (?, ?, ?, ?)", list(rows))

    def load_centroids(self, level: int | None = None) -> list[tuple[int, int, str, bytes]]:
        """The stored (group id, level, model, centroid bytes), of one level if given, by id."""
        self._flush()
        self._ensure_clusters_table()
        sql = "SELECT group_id, level, model, centroid FROM clusters"
        params: tuple[int, ...] = ()
        if level is not None:
            sql, params = sql + " WHERE level=?", (level,)
        return list(self._db.execute(sql + " ORDER BY group_id", params))

    # -- finishing -----------------------------------------------------------------------

    def _roll_up_counts(self) -> None:
        """Passage counts of groups and the root: sums over their documents, bottom-up."""
        sql = f"SELECT id, parent, kind, n_passages FROM nodes WHERE kind < {_SECTION}"  # nodes_inner
        rows = self._db.execute(sql).fetchall()
        parents = {row[0]: row[1] for row in rows}
        totals = {row[0]: 0 for row in rows if row[2] != NodeKind.DOCUMENT}
        for _node_id, parent, kind, n_passages in rows:
            if kind == NodeKind.DOCUMENT:
                current = parent
                while current is not None:
                    totals[current] += n_passages
                    current = parents[current]
        self._db.executemany("UPDATE nodes SET n_passages=? WHERE id=?",
                             [(total, node_id) for node_id, total in totals.items()])

    def commit(self) -> Path:
        """Finish the file (indexes, counts, metadata) and rename it to `path`."""
        self._flush()
        if self._begun:
            self._db.execute("COMMIT")
            self._begun = False
        try:  # indexes after the bulk load: one sort each instead of a b-tree insert per row
            self._db.executescript(_INDEXES)
        except sqlite3.IntegrityError as exc:
            duplicates = self._duplicate_keys()
            raise DuplicateKey(f"duplicate node ids in {self.path}: {duplicates}") from exc
        self._begin()
        self._roll_up_counts()
        write_summaries(self._db)  # metadata summaries for filters (._summaries)
        self.meta.update({
            "schema_version": SCHEMA_VERSION,
            "counts": self.counts,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })
        self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                             [(k, json.dumps(v)) for k, v in self.meta.items()])
        self._db.execute("COMMIT")
        self._begun = False
        self._db.execute("PRAGMA analysis_limit=1000")  # planner statistics from a sample
        self._db.execute("ANALYZE")
        self._db.close()
        os.replace(self.tmp_path, self.path)
        return self.path

    def _duplicate_keys(self) -> str:
        rows = self._db.execute(
            "SELECT key, count(*) FROM nodes GROUP BY key HAVING count(*) > 1 LIMIT 5").fetchall()
        return ", ".join(f"{key!r} ×{count}" for key, count in rows)

    def abort(self) -> None:
        try:
            self._db.close()
        finally:
            self.tmp_path.unlink(missing_ok=True)

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


class Tree:
    """A corpus tree opened read-only. Nothing is loaded until asked for.

    >>> tree = Tree.open("corpus.tree")
    >>> [child.title for child in tree.children(tree.root.id)]
    """

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.file = path
        rows = db.execute("SELECT key, value FROM meta")
        self.meta: dict[str, Any] = {k: json.loads(v) for k, v in rows}
        self.root = self._one(f"SELECT {{}} FROM nodes WHERE kind={_ROOT} LIMIT 1")

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Tree:
        """Open a tree file read-only; raises TreeFormatError if it is not a usable tree."""
        path = Path(path)
        if path.is_dir():
            raise TreeFormatError(f"{path}: is a folder, not a tree file (name the .tree file "
                                  "that 'decisionrag build -o' wrote)")
        if not path.is_file():
            raise TreeFormatError(f"{path}: no such tree file")
        try:
            db = sqlite3.connect(f"file:{path.resolve()}?mode=ro&immutable=1", uri=True,
                                 check_same_thread=False)
            version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise TreeFormatError(f"{path}: not a decisionrag tree file ({exc})") from exc
        if version is None or json.loads(version[0]) != SCHEMA_VERSION:
            found = json.loads(version[0]) if version else "none"
            db.close()
            raise TreeFormatError(
                f"{path}: tree schema version {found}, this decisionrag reads {SCHEMA_VERSION}; "
                "rebuild it")
        return cls(db, path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Node:
        row = self._db.execute(sql.format(_COLUMNS), params).fetchone()
        if row is None:
            raise KeyError(params[0] if params else sql)
        return _row_to_node(row)

    def _many(self, sql: str, params: Sequence[Any] = ()) -> list[Node]:
        return [_row_to_node(row) for row in self._db.execute(sql.format(_COLUMNS), params)]

    # -- lookups -------------------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.meta.get("counts", {}))

    def node(self, ref: int | str) -> Node:
        """A node by integer id or by key; KeyError if absent."""
        if isinstance(ref, int):
            return self._one("SELECT {} FROM nodes WHERE id=?", (ref,))
        return self._one("SELECT {} FROM nodes WHERE key=?", (ref,))

    def find(self, ref: str) -> Node:
        """A node by key, or by integer id written as text (CLI input)."""
        try:
            return self.node(ref)
        except KeyError:
            if ref.isdigit():
                return self.node(int(ref))
            raise

    def children(self, node_id: int, limit: int | None = None) -> list[Node]:
        """The children of a node in reading order (the first `limit`)."""
        tail = " ORDER BY pos" + (f" LIMIT {int(limit)}" if limit is not None else "")
        kind = self._db.execute("SELECT kind FROM nodes WHERE id=?", (node_id,)).fetchone()
        if kind is not None and kind[0] < NodeKind.DOCUMENT:  # groups and documents only
            sql = f"SELECT {_INNER_COLUMNS} FROM nodes WHERE parent=? AND kind < {_SECTION}" + tail
            return [_row_to_node(row) for row in self._db.execute(sql, (node_id,))]
        return self._many("SELECT {} FROM nodes WHERE parent=?" + tail, (node_id,))

    def count_children(self, node_id: int) -> int:
        """How many children a node has (an index count; no node is read)."""
        sql = "SELECT count(*) FROM nodes WHERE parent=?"
        return int(self._db.execute(sql, (node_id,)).fetchone()[0])

    def path(self, node_id: int) -> list[Node]:
        """The ancestors of a node from the root down to the node itself."""
        chain: list[Node] = []
        current: int | None = node_id
        while current is not None:
            node = self.node(current)
            chain.append(node)
            current = node.parent
        return chain[::-1]

    def subtree(self, node_id: int) -> list[Node]:
        """A document's or section's nodes (itself, sections, passages) in reading order."""
        node = self.node(node_id)
        if node.kind < NodeKind.DOCUMENT:
            raise ValueError(
                f"subtree() takes a document, section or passage, not a {node.kind.label}")
        sql = "SELECT {} FROM nodes WHERE id BETWEEN ? AND ? ORDER BY id"
        return self._many(sql, (node.id, node.end))

    def passages(self, node_id: int, limit: int | None = None) -> list[Node]:
        """The passages of a document or section in reading order (the first `limit`)."""
        return self.passages_of(self.node(node_id), limit)

    # -- navigation (latency): the walk already holds the node whose passages it opens --

    def passages_of(self, node: Node, limit: int | None = None) -> list[Node]:
        """`passages(node.id, limit)` without reading `node` again (one query, not two)."""
        sql = f"SELECT {{}} FROM nodes WHERE id BETWEEN ? AND ? AND kind={_PASSAGE} ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._many(sql, (node.id, node.end))

    def documents(self) -> Iterator[Node]:
        """Every document in id order (streams; for builders, baselines and evaluation)."""
        cursor = self._db.execute(f"SELECT {_COLUMNS} FROM nodes WHERE kind={_DOCUMENT} ORDER BY id")
        for row in cursor:
            yield _row_to_node(row)

    def iter_passages(self) -> Iterator[Node]:
        """Every passage in id order (streams)."""
        cursor = self._db.execute(f"SELECT {_COLUMNS} FROM nodes WHERE kind={_PASSAGE} ORDER BY id")
        for row in cursor:
            yield _row_to_node(row)

    def document_of(self, node: Node) -> Node:
        if node.doc is None:
            raise ValueError(f"{node.key} is a {node.kind.label}: it has no document")
        return node if node.id == node.doc else self.node(node.doc)

    def depth_counts(self) -> dict[int, dict[str, int]]:
        """Number of nodes of each kind at each depth (depth 0 = root)."""
        depth: dict[int, int] = {}
        result: dict[int, dict[str, int]] = {}
        sql = f"SELECT id, parent, kind FROM nodes WHERE kind < {_SECTION} ORDER BY id"  # nodes_inner
        rows = self._db.execute(sql).fetchall()
        by_id = {row[0]: row for row in rows}

        def depth_of(node_id: int) -> int:
            if node_id not in depth:
                parent = by_id[node_id][1]
                depth[node_id] = 0 if parent is None else depth_of(parent) + 1
            return depth[node_id]

        for node_id, _parent, kind in rows:
            d = depth_of(node_id)
            result.setdefault(d, {}).setdefault(NodeKind(kind).label, 0)
            result[d][NodeKind(kind).label] += 1
        return result

    # -- tree statistics (builders / `decisionrag stats`, issue 2) ----------------------------

    def kind_depth_counts(self) -> dict[int, dict[str, int]]:
        """Like depth_counts(), with sections and passages too (depth from their heading path)."""
        result = self.depth_counts()
        doc_depth: dict[int, int] = {}
        for node in self._doc_depths():
            doc_depth[node[0]] = node[1]
        rows = self._db.execute(
            "SELECT doc, kind, CASE WHEN heading = '' THEN 0 ELSE length(heading) - "
            "length(replace(heading, char(31), '')) + 1 END AS parts, count(*) "
            f"FROM nodes WHERE kind >= {_SECTION} GROUP BY doc, kind, parts").fetchall()
        for doc, kind, parts, count in rows:
            depth = doc_depth[doc] + parts + (1 if kind == NodeKind.PASSAGE else 0)
            label = NodeKind(kind).label
            result.setdefault(depth, {}).setdefault(label, 0)
            result[depth][label] += count
        return dict(sorted(result.items()))

    def _doc_depths(self) -> list[tuple[int, int]]:
        rows = self._db.execute(f"SELECT id, parent, kind FROM nodes WHERE kind < {_SECTION}").fetchall()
        parents = {row[0]: row[1] for row in rows}
        depths: list[tuple[int, int]] = []
        for node_id, _parent, kind in rows:
            if kind == NodeKind.DOCUMENT:
                depth, current = 0, parents[node_id]
                while current is not None:
                    depth, current = depth + 1, parents[current]
                depths.append((node_id, depth))
        return depths

    def metadata_summaries(self, ids: Sequence[int]) -> dict[int, Summary] | None:
        """Metadata summaries of the given root, group and document nodes (see ._summaries);
        None for a tree written before they existed."""
        return read_summaries(self._db, ids)

    def stored_document(self, key: str) -> DocumentSpec | None:
        """Document `key` read back as the spec that would write it (None if absent)."""
        return _edits.stored_document(self._db, key)

    def document_sizes(self) -> list[int]:
        """The number of passages of every document, in id order."""
        rows = self._db.execute(f"SELECT n_passages FROM nodes WHERE kind={_DOCUMENT} ORDER BY id")
        return [row[0] for row in rows]
