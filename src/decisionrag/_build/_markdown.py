"""Markdown (CommonMark + tables, parsed with markdown-it-py).

- ATX and setext headings → sections (a heading closes open headings of its level or deeper);
- paragraphs, list items, table rows and code blocks → passages. A list item is one passage
  (all its paragraphs); its nested list items are passages of their own, after it. A table row
  is its cells joined with `` | ``;
- the title is the YAML front-matter ``title:`` if present, else the document's first heading
  when that is a level-1 heading (which then does not also become a section above everything),
  else the file name. A first ``#`` heading that repeats the front-matter title is dropped too;
- the other front-matter fields are the document's metadata (typed: see :mod:`._metadata`).

Inline markup is reduced to its text (link and image text kept, URLs and raw HTML dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt

from .._tree import PassageSpec
from ._common import ParsedDocument, SectionStack, collapse_spaces
from ._metadata import typed_value


def _raw_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Raw ``key: value`` pairs of a leading ``---`` block, and the text after it."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            fields: dict[str, str] = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip() and not line[:1].isspace():
                    fields[key.strip().lower()] = value.strip()
            return fields, "\n".join(lines[end + 1:])
    return {}, text


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Simple ``key: value`` pairs of a leading ``---`` block, and the text after it."""
    fields, body = _raw_front_matter(text)
    return {key: value.strip("'\"") for key, value in fields.items()}, body


def front_matter_metadata(fields: dict[str, str]) -> dict[str, Any]:
    """The metadata of a front-matter block: every field but the title, typed; a field with
    an empty value (the head of a nested YAML block, which is not read) is left out."""
    return {key: typed_value(value) for key, value in fields.items()
            if key != "title" and value.strip()}


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def inline_text(token: Any) -> str:
    """The plain text of an inline token: text, code, link and image text; breaks as spaces."""
    parts: list[str] = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return collapse_spaces("".join(parts))


class _MarkdownWalker:
    """Turns the flat token stream into sections and passages."""

    def __init__(self, front_title: str | None, fallback_title: str) -> None:
        self.document = ParsedDocument(title=front_title or fallback_title)
        self.front_title = front_title
        self.sections = SectionStack()
        self.seen_heading = False
        self.items: list[list[str]] = []  # text of the list items open, outermost first
        self.row: list[str] | None = None

    def emit(self, text: str) -> None:
        text = text.strip()
        if text:
            self.document.passages.append(PassageSpec(text, self.sections.path))

    def flush_item(self) -> None:
        if self.items and self.items[-1]:
            self.emit(" ".join(self.items[-1]))
            self.items[-1] = []

    def add_text(self, text: str) -> None:
        if self.row is not None:
            self.row.append(text)
        elif self.items:
            self.items[-1].append(text)
        else:
            self.emit(text)

    def heading(self, level: int, text: str) -> None:
        first = not self.seen_heading
        self.seen_heading = True
        if first and level == 1 and self.front_title in (None, text):
            self.document.title = text
            return
        self.sections.enter(level, text)

    def walk(self, tokens: Sequence[Any]) -> ParsedDocument:
        for index, token in enumerate(tokens):
            kind = token.type
            if kind == "heading_open":
                self.heading(int(token.tag[1:]), inline_text(tokens[index + 1]))
            elif kind == "inline" and tokens[index - 1].type != "heading_open":
                self.add_text(inline_text(token))
            elif kind in ("fence", "code_block"):
                self.add_text(token.content.rstrip())
            elif kind == "list_item_open":
                self.flush_item()
                self.items.append([])
            elif kind == "list_item_close":
                self.flush_item()
                self.items.pop()
            elif kind == "tr_open":
                self.row = []
            elif kind == "tr_close" and self.row is not None:
                cells, self.row = [cell for cell in self.row if cell], None
                self.add_text(" | ".join(cells))
        return self.document


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    """Parse one Markdown document into its title and passages."""
    raw, body = _raw_front_matter(text.replace("\r\n", "\n"))
    title = raw["title"].strip().strip("'\"") if "title" in raw else None
    document = _MarkdownWalker(title or None, fallback_title).walk(_parser().parse(body))
    document.meta = front_matter_metadata(raw)
    return document
