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
