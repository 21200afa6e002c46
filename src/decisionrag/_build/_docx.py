"""Word ``.docx`` files, read with python-docx (MIT).

- Paragraphs styled ``Heading 1``…``Heading 9`` → sections; a
  heading closes open headings of its level or deeper;
- the ``Title`` paragraph (the first one) is the document's title, else the core properties'
  title, else the file name;
- other paragraphs and list items (``List …`` styles or numbered paragraphs) → one passage
  each; a table row → one passage, its distinct cells joined with `` | `` (a merged cell that
  spans columns is read once);
- core properties (author, subject, keywords, category, created, modified) → the document's
  metadata.

A file that is not a readable ``.docx`` (not a zip, no document part) is skipped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from .._tree import PassageSpec
from ._common import ParsedDocument, SectionStack, Skip, collapse_spaces

_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def _docx() -> Any:
    try:
        import docx
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        from .._errors import InputError

        raise InputError("reading Word files needs python-docx: pip install "
                         "'decisionrag[docx]'") from exc
    return docx


def parse_docx(data: bytes, fallback_title: str) -> ParsedDocument:
    """Parse one Word document into its title, sections, passages and metadata."""
    docx = _docx()
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_blocks(document))
        meta = _core_metadata(document.core_properties)
    except Exception as exc:  # zipfile, lxml and KeyError for a missing part: one reason
        raise Skip(f"unreadable Word file ({type(exc).__name__}: {str(exc)[:100]})") from exc
    title = meta.pop("title", "")
    stack = SectionStack()
    parsed = ParsedDocument(title=title or fallback_title, meta=meta)
    title_seen = False
    for kind, level, text in blocks:
        if kind == "title" and not title_seen:
            parsed.title, title_seen = text, True
        elif kind == "heading":
            stack.enter(level, text)
        else:
            parsed.passages.append(PassageSpec(text, stack.path))
    return parsed


def _blocks(document: Any) -> Iterator[tuple[str, int, str]]:
    """(kind, heading level, text) for each paragraph and table row in body order."""
    from docx.table import Table

    for item in document.iter_inner_content():
        if isinstance(item, Table):
            yield from (("row", 0, row) for row in _rows(item))
            continue
        text = collapse_spaces(item.text)
        if not text:
            continue
        style = (item.style.name if item.style is not None else "") or ""
        match = _HEADING.match(style)
        if style.lower() == "title":
            yield "title", 0, text
        elif match:
            yield "heading", int(match.group(1)), text
        else:
            yield "paragraph", 0, text


def _rows(table: Any) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats in every column it spans
                continue
            seen.add(id(cell._tc))
            text = collapse_spaces(cell.text)
            if text:
                cells.append(text)
        if cells:
            yield " | ".join(cells)


def _core_metadata(props: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for name in ("title", "author", "subject", "keywords", "category"):
        value = getattr(props, name, None)
        if isinstance(value, str) and value.strip():
            meta[name] = collapse_spaces(value)
    for name in ("created", "modified"):
        value = getattr(props, name, None)
        if value is not None:
            meta[name] = value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return meta
