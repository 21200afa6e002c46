"""`Tree`: a tree file opened read-only; nodes, children, paths and passages on demand."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .._errors import TreeFormatError
from . import _edits
from ._model import DocumentSpec, Node, NodeKind, ancestry
from ._schema import (
    _COLUMNS,
    _DOCUMENT,
    _INNER_COLUMNS,
    _PASSAGE,
    _ROOT,
    _SECTION,
    SCHEMA_VERSION,
    _row_to_node,
)
from ._sqlite import connect_readonly
from ._staging import readable
from ._summaries import Summary, read_summaries

T = TypeVar("T")


def damaged(path: Path, exc: BaseException) -> TreeFormatError:
    """The error of a tree file whose bytes or stored JSON are broken."""
    return TreeFormatError(f"{path}: the tree file is damaged ({exc}); rebuild it with "
                           "`decisionrag build`, or restore it from a copy")


# SQLite's "malformed" (and text that is not UTF-8), broken JSON in a meta column
_DAMAGE = (sqlite3.DatabaseError, json.JSONDecodeError, UnicodeDecodeError)


def _checked(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` of a `Tree` with a damaged file's errors as `TreeFormatError`."""
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def stream(self: Tree, *args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(self, *args, **kwargs)
            except TreeFormatError:
                raise
            except _DAMAGE as exc:
                raise damaged(self.file, exc) from exc

        return stream

    @functools.wraps(method)
    def call(self: Tree, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except TreeFormatError:
            raise
        except _DAMAGE as exc:
            raise damaged(self.file, exc) from exc

    return call


def _checked_reads(cls: type[T]) -> type[T]:
    """Every public method of `cls` (a reader) through `_checked`: a file damaged after it
    was opened (flipped bytes deep inside) is a clear error wherever it is met."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _checked(member))
    return cls


@_checked_reads
class Tree:
    """A corpus tree opened read-only. Nothing is loaded until asked for.

    >>> tree = Tree.open("corpus.tree")
    >>> [child.title for child in tree.children(tree.root.id)]
    """

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.file = path
        try:
            rows = db.execute("SELECT key, value FROM meta")
            self.meta: dict[str, Any] = {k: json.loads(v) for k, v in rows}
            if not isinstance(self.meta.get("counts", {}), dict):
                raise json.JSONDecodeError("the meta row 'counts' is not an object", "", 0)
            self.root = self._one(f"SELECT {{}} FROM nodes WHERE kind={_ROOT} LIMIT 1")
        except KeyError:
            db.close()
            raise TreeFormatError(f"{path}: the tree file has no root node; rebuild it") from None
        except _DAMAGE as exc:
            db.close()
            raise damaged(path, exc) from exc

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Tree:
        """Open a tree file read-only; raises TreeFormatError if it is not a usable tree."""
        path = Path(path)
        source = readable(path)  # the new file, while the tree at `path` is being published
        if source.is_dir():
            raise TreeFormatError(f"{path}: is a folder, not a tree file (name the .tree file "
                                  "that 'decisionrag build -o' wrote)")
        if not source.is_file():
            raise TreeFormatError(f"{path}: no such tree file")
        try:
            db = connect_readonly(source, check_same_thread=False)
            version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise TreeFormatError(f"{path}: not a decisionrag tree file ({exc})") from exc
        try:
            found = json.loads(version[0]) if version else "none"
        except (ValueError, TypeError) as exc:
            db.close()
            raise damaged(path, exc) from exc
        if found != SCHEMA_VERSION:
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

    def has_passage(self, key: str) -> bool:
        """Whether a passage has the key `key`."""
        row = self._db.execute("SELECT 1 FROM nodes WHERE key=? AND kind=?",
                               (key, int(NodeKind.PASSAGE))).fetchone()
        return row is not None

    def keys_of(self, ids: Sequence[int]) -> list[str]:
        """The keys of nodes `ids`, in that order (one query per 900 ids); KeyError if one
        is absent."""
        wanted = [int(i) for i in ids]
        found: dict[int, str] = dict(self._rows_by_id("id, key", wanted))
        return [found[i] for i in wanted]

    def nodes(self, ids: Sequence[int]) -> list[Node]:
        """The nodes `ids`, in that order (one query per 900 ids, not one per node); KeyError
        if one is absent."""
        wanted = [int(i) for i in ids]
        found = {node.id: node for node in map(_row_to_node, self._rows_by_id(_COLUMNS, wanted))}
        return [found[i] for i in wanted]

    def _rows_by_id(self, columns: str, ids: list[int]) -> Iterator[Any]:
        """`columns` of the nodes `ids` (in no order), read 900 ids a query."""
        for start in range(0, len(ids), 900):
            part = ids[start:start + 900]
            marks = ",".join("?" * len(part))
            yield from self._db.execute(f"SELECT {columns} FROM nodes WHERE id IN ({marks})", part)

    def find(self, ref: str) -> Node:
        """A node by key, or by integer id written as text (CLI input)."""
        try:
            return self.node(ref)
        except KeyError:
            if ref.isdigit():
                return self.node(int(ref))
            raise

    def children(self, node_id: int, limit: int | None = None, offset: int = 0) -> list[Node]:
        """The children of a node in reading order (`limit` of them from the `offset`-th)."""
        tail = " ORDER BY pos"
        if limit is not None or offset:
            tail += f" LIMIT {-1 if limit is None else int(limit)} OFFSET {max(0, int(offset))}"
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
        return ancestry(node_id, self.node)

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

    def sections_of(self, node: Node) -> list[Node]:
        """The sections inside a document or section, in reading order (its passages are
        not read: `subtree` of a long page would bring every passage's text along)."""
        sql = f"SELECT {{}} FROM nodes WHERE id BETWEEN ? AND ? AND kind={_SECTION} ORDER BY id"
        return self._many(sql, (node.id, node.end))

    def documents(self) -> Iterator[Node]:
        """Every document in id order (streams; for builders, baselines and evaluation)."""
        cursor = self._db.execute(f"SELECT {_COLUMNS} FROM nodes WHERE kind={_DOCUMENT} ORDER BY id")
        for row in cursor:
            yield _row_to_node(row)

    def passage_ids(self) -> np.ndarray:
        """The ids of every passage, in id order (int64; only the ids are read)."""
        cursor = self._db.execute(f"SELECT id FROM nodes WHERE kind={_PASSAGE} ORDER BY id")
        return np.fromiter((row[0] for row in cursor), dtype=np.int64)

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
