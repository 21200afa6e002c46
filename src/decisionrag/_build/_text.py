"""Plain text: paragraphs are blank-line separated blocks; headings are recovered from layout.

A block is a heading when it is
- two lines, the second a rule of ``=`` (level 1) or ``-`` (level 2), at least 3 long; or
- one line that reads like a heading (:func:`._derive.looks_like_heading`: short, set off by
  blank lines, no final period, no code characters) and is followed by more text. Such plain
  headings get level 1, or level 3 in a file that also uses underlined headings.

The first block is the document's title when it is a heading; otherwise the title comes from
the file name. A paragraph's lines are joined with single spaces.
"""

from __future__ import annotations

import re

from .._tree import PassageSpec
from ._common import ParsedDocument, SectionStack, collapse_spaces
from ._derive import looks_like_heading

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")
_UNDERLINE_LEVELS = {"=": 1, "-": 2}


def _blocks(text: str) -> list[list[str]]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = []
    for chunk in _BLANK_LINES.split(text):
        lines = [line.rstrip() for line in chunk.split("\n") if line.strip()]
        if lines:
            blocks.append(lines)
    return blocks


def _underline_level(block: list[str]) -> int | None:
    if len(block) != 2:
        return None
    rule = block[1].strip()
    if len(rule) >= 3 and len(set(rule)) == 1 and rule[0] in _UNDERLINE_LEVELS:
        return _UNDERLINE_LEVELS[rule[0]]
    return None


def _heading_level(block: list[str], is_last: bool, plain_level: int) -> int | None:
    underline = _underline_level(block)
    if underline is not None:
        return underline
    if len(block) == 1 and not is_last and looks_like_heading(block[0]):
        return plain_level
    return None


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    """Split plain text into a title, recovered sections and paragraph passages."""
    blocks = _blocks(text)
    plain_level = 3 if any(_underline_level(block) for block in blocks) else 1
    document = ParsedDocument(title=fallback_title)
    sections = SectionStack()
    for index, block in enumerate(blocks):
        level = _heading_level(block, index == len(blocks) - 1, plain_level)
        heading = collapse_spaces(block[0])
        if level is not None and index == 0:
            document.title = heading
        elif level is not None:
            sections.enter(level, heading)
        else:
            document.passages.append(PassageSpec(collapse_spaces(" ".join(block)), sections.path))
    return document
