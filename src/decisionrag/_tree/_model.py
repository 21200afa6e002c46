"""Tree nodes, and the specs that builders hand to the store."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class NodeKind(enum.IntEnum):
    """What a node is. The integer is what the store writes."""

    ROOT = 0
    GROUP = 1
    DOCUMENT = 2
    SECTION = 3
    PASSAGE = 4

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a corpus tree, as read from the store.

    `id` is the store's integer id; `key` the stable external id (a passage id from the
    corpus, a document id, ``root``, ``g:…`` for groups, ``<doc>#s<n>`` for sections).
    Documents, sections and passages own the contiguous id range ``id..end``, so a
    document's passages are one range scan in reading order.
    """

    id: int
    key: str
    parent: int | None
    kind: NodeKind
    pos: int
    doc: int | None
    end: int
    n_passages: int
    title: str
    description: str
    heading: tuple[str, ...]
    text: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What a node is called where one line names it: its title, else its description,
        else its key (the one fallback every view uses)."""
        return self.title or self.description or self.key

    @property
    def url(self) -> str | None:
        value = self.meta.get("url")
        return str(value) if value else None


def ancestry(node_id: int | None, node_of: Callable[[int], Node]) -> list[Node]:
    """The nodes from the root down to `node_id` itself (empty for None), each read with
    `node_of` (the reader's, the writer's or a cached lookup): the one walk up the parents."""
    chain: list[Node] = []
    while node_id is not None:
        node = node_of(node_id)
        chain.append(node)
        node_id = node.parent
    return chain[::-1]


class DocumentHead(NamedTuple):
    """What clustering reads of a stored document: its ids, labels and first passage."""

    id: int
    parent: int
    key: str
    title: str
    description: str
    first_passage: str


@dataclass(slots=True)
class PassageSpec:
    """A passage to write: its text and the heading path above it inside its document."""

    text: str
    section: tuple[str, ...] = ()
    key: str | None = None
    meta: dict[str, Any] | None = None


@dataclass(slots=True)
class DocumentSpec:
    """A document to write, with its passages in reading order.

    `groups` is the path of group nodes above the document (folders, a help center,
    a product), outermost first. `description` defaults to the title followed by the
    document's top-level headings.
    """

    title: str
    passages: list[PassageSpec]
    key: str | None = None
    description: str | None = None
    groups: tuple[str, ...] = ()
    meta: dict[str, Any] | None = None
