"""The embedded tree store: one SQLite file, schema-versioned, written atomically.

The package `decisionrag._tree` is the only code in decisionrag that knows SQL. The store is
split by role: `_schema` (table, indexes, rows), `_writer` (`TreeWriter`), `_reader` (`Tree`);
this module gathers them under the name other modules import.

Layout: one ``nodes`` table. Ids are integers assigned as nodes are written; a document's
sections and passages are written together, so every document (and section) owns the
contiguous id range ``id..end_id`` and its passages come back in reading order with one
range scan. Group nodes may be added later (clustering) and re-parent documents.

A passage's text is stored once, in ``text``; its ``description`` column is empty and reads
back as the text. Indexes are built once, after the bulk load (see ``_INDEXES``).
"""

from ._reader import Tree
from ._schema import (
    HEADING_SEP,
    ROOT_KEY,
    SCHEMA_VERSION,
    DuplicateKey,
    Row,
    default_description,
)
from ._writer import TreeWriter

__all__ = ["HEADING_SEP", "ROOT_KEY", "SCHEMA_VERSION", "DuplicateKey", "Row", "Tree",
           "TreeWriter", "default_description"]
