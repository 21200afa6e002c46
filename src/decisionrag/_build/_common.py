"""Small pieces the format builders share: the open-heading stack and fallback titles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._tree import PassageSpec


@dataclass
class ParsedDocument:
    """What a format parser returns for one file: its title, its passages in order and the
    metadata the file itself carries (front matter, document info)."""

    title: str
    passages: list[PassageSpec] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


class Skip(Exception):
    """A file that cannot be read as a document; the message is the reason it is skipped."""


class SectionStack:
    """The headings open at the current point of a document, with their levels.

    A heading closes every open heading of the same or a deeper level, so levels may skip
    (an h3 directly under an h1) and a heading level can exist under some pages only.
    """

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> None:
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, title))

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(title for _level, title in self._open)


def collapse_spaces(text: str) -> str:
    """`text` on one line with single spaces."""
    return " ".join(text.split())


def title_from_filename(stem: str) -> str:
    """A readable title from a file name: ``getting_started-guide`` → ``getting started guide``."""
    return collapse_spaces(stem.replace("_", " ").replace("-", " ")) or stem


LONG_DOCUMENT_PASSAGES = 60  # the heading stage's threshold: longer pages are opened by heading
PART_PASSAGES = 7  # per part of a long headingless document: the heading stage's default
# keep (8) parts x 7 = 56 passages fit its max_passages (60), so every kept part opens whole
_PART_WORDS = 12


def split_headingless(passages: list[PassageSpec]) -> list[PassageSpec] | None:
    """A long document without any heading, cut into parts of PART_PASSAGES passages, each
    part a section headed ``Part k (passages a–b): its first words…`` so that the heading stage
    can reach every passage (a walk otherwise opens only the first LONG_DOCUMENT_PASSAGES);
    None when the document is short or has headings."""
    if len(passages) <= LONG_DOCUMENT_PASSAGES or any(p.section for p in passages):
        return None
    parts: list[PassageSpec] = []
    for start in range(0, len(passages), PART_PASSAGES):
        window = passages[start:start + PART_PASSAGES]
        words = window[0].text.split()
        opening = " ".join(words[:_PART_WORDS]) + ("…" if len(words) > _PART_WORDS else "")
        heading = (f"Part {start // PART_PASSAGES + 1} (passages {start + 1}–"
                   f"{start + len(window)}): {opening}",)
        parts.extend(PassageSpec(p.text, heading, p.key, p.meta) for p in window)
    return parts
