"""How a hit's page is quoted: the printed page label beside the file's own page number."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def page_reference(metadata: Mapping[str, Any]) -> str:
    """A passage's page as people quote it, from its ``page``/``pages`` metadata and the
    printed ``page_label``/``page_labels`` (PDFs): ``p. 12``, ``p. xii (PDF page 14)`` when the
    printed label differs from the physical page, ``pp. 3–4`` over several pages; ``""``
    without page metadata."""
    page = metadata.get("page")
    if page is None:
        return ""
    pages = metadata.get("pages") or [page]
    labels = metadata.get("page_labels") or (
        [metadata["page_label"]] if metadata.get("page_label") else pages)
    physical = _span(pages)
    printed = _span(labels)
    prefix = "pp." if len(pages) > 1 else "p."
    if printed == physical:
        return f"{prefix} {physical}"
    return f"{prefix} {printed} (PDF {'pages' if len(pages) > 1 else 'page'} {physical})"


def _span(values: Sequence[Any]) -> str:
    first, last = str(values[0]), str(values[-1])
    return first if first == last else f"{first}–{last}"
