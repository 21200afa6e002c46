"""Builders: source documents → a tree file.

``build_tree(sources, out)`` reads files and folders and writes one tree (atomically: an error
or an interrupt leaves no file at `out`). Formats, picked by extension with ``format="auto"``:

====================  ===================================================================
``.jsonl``            the shared benchmark format (:mod:`._jsonl`): group → doc → section
``.md .markdown``     Markdown (:mod:`._markdown`)
``.html .htm``        HTML (:mod:`._html`)
``.txt .text``, none  plain text with headings recovered from layout (:mod:`._text`)
``.pdf``              PDF: outline or layout headings, paragraphs with pages (:mod:`._pdf`)
``.docx``             Word: heading styles, paragraphs, list items, table rows (:mod:`._docx`)
====================  ===================================================================

Folders are walked recursively in name order (hidden entries and links to folders skipped);
the relative folder path of a file becomes its document's group path and its relative file
path the document's key. When several folders are given, each folder's own name is the
outermost group. Inside folders only files of the chosen format (any known format with
``format="auto"``) are read; the others are ignored (counted in ``BuildReport.ignored``). A
file named explicitly is read in the chosen format whatever its extension; its key is its
file name. Unreadable, undecodable and empty documents are skipped and listed in
``BuildReport.skipped``; a malformed JSONL file is an error, not a skip. The progress bar
(``progress=True``, on stderr) counts bytes read.
"""

from ._sources import FORMATS, format_of, plan_sources, read_documents, read_source, source_size
from ._write import BuildReport, Finish, Reader, build_tree

__all__ = ["FORMATS", "BuildReport", "Finish", "Reader", "build_tree", "format_of",
           "plan_sources", "read_documents", "read_source", "source_size"]
