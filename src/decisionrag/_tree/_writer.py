"""`TreeWriter`: writes a tree file atomically (a temporary file renamed on commit)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .._errors import InputError
from .._files import temporary_beside
from . import _edits, _staging
from ._model import DocumentHead, DocumentSpec, Node, NodeKind, ancestry
from ._reader import Tree
from ._schema import (
    _BATCH,
    _BATCH_ROWS,
    _COLUMNS,
    _DOCUMENT,
    _GROUP,
    _INDEXES,
    _INSERT,
    _PAGE_SIZE,
    _PASSAGE,
    _ROOT,
    _SCHEMA,
    _SECTION,
    HEADING_SEP,
    ROOT_KEY,
    SCHEMA_VERSION,
    DuplicateKey,
    _row_to_node,
    default_description,
)
from ._sqlite import connect_readonly
from ._summaries import write_summaries


class TreeWriter:
    """Writes a tree to a temporary file and renames it into place on success.

    Use as a context manager. If the block raises (or the process dies), no file is left at
    `path`; the temporary file is removed. ``TreeWriter.update(path)`` copies an existing tree
    to a temporary file for additions (e.g. new documents assigned to existing groups).
    """

    def __init__(self, path: str | os.PathLike[str], *, root_title: str = "") -> None:
        self.path = Path(path)
        self.tmp_path = temporary_beside(self.path)  # renamed into place by commit()
        with self._discarded_on_error():
            self._start(root_title)

    def _start(self, root_title: str) -> None:
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
        self.committed = False
        self.expected: tuple[int, ...] | None = None  # what `update` read (checked at commit)
        if self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            self._db.executescript(_SCHEMA)
            self.root_id = self._insert_simple(ROOT_KEY, None, NodeKind.ROOT, root_title,
                                               root_title)

    @classmethod
    def update(cls, path: str | os.PathLike[str]) -> TreeWriter:
        """Open an existing tree for additions; the original stays untouched until commit.
        Inside a publication of `path`, the tree it is about to publish is the one read; and
        the commit refuses to replace a file other than the one read (`_publish`)."""
        from ._publish import identity

        readable = _staging.readable(path)
        expected = identity(path) if readable == Path(path) else None
        source = Tree.open(path)
        source.close()
        writer = cls.__new__(cls)
        writer.path = Path(path)
        writer.expected = expected
        writer.tmp_path = temporary_beside(writer.path)
        with writer._discarded_on_error():
            src = connect_readonly(readable, immutable=False)
            try:
                writer._db = sqlite3.connect(writer.tmp_path, isolation_level=None)
                src.backup(writer._db)
            finally:
                src.close()
            writer._tune()
            writer._pending = []
            writer._begun = False
            writer.committed = False
            writer._load_state()
        return writer

    @contextlib.contextmanager
    def _discarded_on_error(self) -> Iterator[None]:
        """`abort` when opening fails, or is interrupted (a SIGTERM the CLI turned into
        SystemExit): no writer is returned for a caller to abort later."""
        try:
            yield
        except BaseException:
            self.abort()
            raise

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
        """The groups (and pages) above and including `node_id`, root excluded."""
        return [n for n in ancestry(node_id, self._read_node) if n.kind != NodeKind.ROOT]

    def _read_node(self, node_id: int) -> Node:
        """A node as written so far (this transaction's rows included)."""
        row = self._db.execute(f"SELECT {_COLUMNS} FROM nodes WHERE id=?", (node_id,)).fetchone()
        return _row_to_node(row)

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
        """Finish the file (indexes, counts, metadata) and publish it at `path`: within a
        publication of `path` (`_publish.publishing`: a build storing vectors, an edit), it
        is renamed with the rest at the end; else now, as a publication of its own (under
        the tree's lock, after the version check)."""
        from ._publish import publishing

        with publishing(self.path) as publication:
            self.finish()
            publication.stage(self.tmp_path, self.expected)
        self.committed = True
        return self.path

    def finish(self) -> Path:
        """Finish the temporary file (indexes, counts, metadata) without renaming it."""
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
            "write_id": secrets.token_hex(8),  # tells two writes of one second apart
        })
        self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                             [(k, json.dumps(v)) for k, v in self.meta.items()])
        self._db.execute("COMMIT")
        self._begun = False
        self._db.execute("PRAGMA analysis_limit=1000")  # planner statistics from a sample
        self._db.execute("ANALYZE")
        self._db.close()
        return self.tmp_path

    def _duplicate_keys(self) -> str:
        rows = self._db.execute(
            "SELECT key, count(*) FROM nodes GROUP BY key HAVING count(*) > 1 LIMIT 5").fetchall()
        return ", ".join(f"{key!r} ×{count}" for key, count in rows)

    def abort(self) -> None:
        try:
            db = getattr(self, "_db", None)  # None: opening stopped before the database
            if db is not None:
                db.close()
        finally:
            publication = _staging.active(self.path)
            if publication is None or publication.staged != self.tmp_path:
                self.tmp_path.unlink(missing_ok=True)

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            if self.committed:
                return
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


