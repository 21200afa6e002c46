"""The Navigator: Algorithm 1 of the paper, generalised, over a tree store and a judge."""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .._errors import InputError
from .._judges import Judge
from .._query import Query, Turn
from .._sync import run_sync
from .._tree import Node, NodeKind, Tree
from .._tree._summaries import Summary
from ._config import Preset, get_preset
from ._filters import Filter, parse_filters
from ._render import Entry, Kind
from ._result import Result

T = TypeVar("T")
CHILDREN_CACHE_NODES = 250_000  # about 100 MB of group/page nodes at most
READ_AHEAD_SHARE = 0.8  # reading ahead stops when the caches are this full


@dataclass(frozen=True, slots=True)
class Children:
    """A root's or group's children in reading order, and the same split by kind."""

    all: list[Node]
    documents: list[Node]
    groups: list[Node]

    @classmethod
    def of(cls, nodes: list[Node]) -> Children:
        documents = [n for n in nodes if n.kind == NodeKind.DOCUMENT]
        groups = [n for n in nodes if n.kind == NodeKind.GROUP]
        return cls(nodes, documents, groups)


class Retriever(Protocol):
    """Anything that ranks passage keys for a query text (BM25, dense, …)."""

    def retrieve(self, query_text: str, k: int) -> list[tuple[str, float]]: ...


class Navigator:
    """Walks `tree` with `judge` under `preset` (a name from PRESET_NAMES, or a Preset).

    >>> navigator = Navigator(Tree.open("corpus.tree"), load_judge("embedded"), preset="auto")
    >>> result = navigator.retrieve("How do I renew my passport?", k=10)

    `retriever` (optional) adds its top passages to the passage stage (hybrid candidates);
    `concurrency` bounds the requests in flight within one query (None: the judge's own bound).
    """

    def __init__(
        self,
        tree: Tree,
        judge: Judge,
        preset: str | Preset = "auto",
        *,
        retriever: Retriever | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.tree = tree
        self.judge = judge
        self.preset = get_preset(preset, tree, judge)
        self.retriever = retriever
        self.concurrency = concurrency
        self._cache: dict[int, Node] = {}
        self._children: OrderedDict[int, Children] = OrderedDict()
        self._children_held = 0
        self._documents: list[Node] | None = None
        self._entries: dict[tuple[str, str], dict[int, Entry]] = {}
        self._entries_held = 0
        self._headers: dict[int | None, tuple[str, ...]] = {}
        self._summaries: dict[int, Summary] = {}
        self._summarised = True  # False for a tree written before summaries existed
        self.count_tokens = functools.lru_cache(maxsize=100_000)(judge.count_tokens)

    def __repr__(self) -> str:
        return f"<Navigator {self.tree.file.name} judge={self.judge.name} preset={self.preset.name}>"

    # -- public API -----------------------------------------------------------------------

    async def aretrieve(
        self,
        query: str | Query,
        history: Sequence[Turn | dict[str, Any]] | None = None,
        k: int = 10,
        notepad: Sequence[str] | None = None,
        filters: Mapping[str, Any] | Filter | None = None,
    ) -> Result:
        """Rank passages for `query`: walk the tree, judge the passages, rerank the top.

        `filters` (see `decisionrag._navigate._filters`) keep only passages whose metadata
        (their document's, overlaid with their own) match; a group or document that no
        document below it can match is removed before it is judged."""
        from ._walk import Walk

        walk = Walk(self, Query.of(query, history), k, tuple(notepad or ()),
                    parse_filters(filters))
        return await walk.retrieve()

    def retrieve(
        self,
        query: str | Query,
        history: Sequence[Turn | dict[str, Any]] | None = None,
        k: int = 10,
        notepad: Sequence[str] | None = None,
        filters: Mapping[str, Any] | Filter | None = None,
    ) -> Result:
        """The synchronous twin of `aretrieve` (safe inside a running event loop too)."""
        return run_sync(self.aretrieve(query, history, k, notepad, filters))

    async def arerank(self, query: str | Query, passage_ids: Sequence[str], k: int = 10) -> Result:
        """Only the last stages over the given passages: binary judgments in shared contexts
        (grouped by page and section, in reading order), then the multiple-choice rerank."""
        from ._walk import Walk

        passages = [self._passage(key) for key in dict.fromkeys(passage_ids)]
        return await Walk(self, Query.of(query), k, ()).rerank(passages)

    def rerank(self, query: str | Query, passage_ids: Sequence[str], k: int = 10) -> Result:
        return run_sync(self.arerank(query, passage_ids, k))

    def warm(self) -> int:
        """Read every group's children and build their candidate entries now, so that later
        queries read nothing from the tree on the group and page levels (a server calls
        this once at start-up; the NQ shape's 109,000 groups and pages take about a second).
        Stops when the caches are READ_AHEAD_SHARE full; returns the number of nodes cached."""
        level = [self.tree.root.id]
        depth = 0
        while level:
            groups: list[Node] = []
            for node_id in level:
                if not self._room_for_reading_ahead():
                    return self._children_held
                family = self.split_children(node_id)
                self.entries("document", family.documents, self.preset.documents.render)
                self.entries("group", family.groups, self.preset.group_settings(depth).render)
                groups.extend(family.groups)
            level = [group.id for group in groups]
            depth += 1
        return self._children_held

    async def read_ahead(self, groups: Sequence[Node], depth: int, until: asyncio.Future[Any]) -> None:
        """Use a judge wait: while `until` (the requests judging `groups`) is pending, read
        the groups' children and build their entries (level `depth`), one group at a time,
        so that the kept groups' pages are cached when the answers come back. Yields after
        each group (under a millisecond); leaves room in the caches for the walks' own use."""
        for group in groups:
            if until.done() or not self._room_for_reading_ahead():
                return
            if group.id in self._children:
                continue
            family = self.split_children(group.id)
            self.entries("document", family.documents, self.preset.documents.render)
            self.entries("group", family.groups, self.preset.group_settings(depth).render)
            await asyncio.sleep(0)

    def _room_for_reading_ahead(self) -> bool:
        limit = READ_AHEAD_SHARE * CHILDREN_CACHE_NODES
        return self._children_held < limit and self._entries_held < limit

    # -- tree access shared by walks --------------------------------------------------------

    def node(self, node_id: int) -> Node:
        """A node by id, cached (groups and pages are looked up again and again)."""
        node = self._cache.get(node_id)
        if node is None:
            node = self._cache[node_id] = self.tree.node(node_id)
        return node

    def children(self, node_id: int) -> list[Node]:
        """The children of a root or group node in reading order (cached, see `split_children`)."""
        return self.split_children(node_id).all

    def split_children(self, node_id: int) -> Children:
        """The children of a root or group node, also split into pages and groups; cached:
        the tree never changes under a Navigator, and a page level of 16,000 titles costs a
        query 0.1 s of SQL otherwise. Holds at most CHILDREN_CACHE_NODES nodes, least
        recently used dropped first."""
        found = self._children.get(node_id)
        if found is not None:
            self._children.move_to_end(node_id)
            return found
        found = Children.of(self.tree.children(node_id))
        self._children[node_id] = found
        self._children_held += len(found.all)
        while self._children_held > CHILDREN_CACHE_NODES and len(self._children) > 1:
            _, dropped = self._children.popitem(last=False)
            self._children_held -= len(dropped.all)
        return found

    def summaries(self, nodes: Sequence[Node]) -> list[Summary | None]:
        """The metadata summaries of root, group and document nodes (cached; a document
        without a stored one is summarised by its own metadata); None where unknown (a tree
        written before summaries existed: such nodes are never filtered out)."""
        missing = [n.id for n in nodes if n.id not in self._summaries]
        if missing and self._summarised:
            found = self.tree.metadata_summaries(missing)
            if found is None:
                self._summarised = False
            else:
                self._summaries.update(found)
        result: list[Summary | None] = []
        for node in nodes:
            summary = self._summaries.get(node.id)
            if summary is None and node.kind == NodeKind.DOCUMENT and self._summarised:
                summary = self._summaries[node.id] = Summary.of_metadata([node.meta])
            result.append(summary)
        return result

    def metadata(self, passage: Node) -> dict[str, Any]:
        """A passage's metadata as a hit carries it: its document's, overlaid with its own."""
        if passage.doc is None or passage.doc == passage.id:
            return dict(passage.meta)
        return {**self.node(passage.doc).meta, **passage.meta}

    def entry(self, kind: Kind, node: Node, render: str) -> Entry:
        """How `node` is shown as a candidate of a `kind` level (query-independent, cached)."""
        return self.entries(kind, [node], render)[0]

    def entries(self, kind: Kind, nodes: Sequence[Node], render: str) -> list[Entry]:
        """`entry` for many nodes at once: one dict lookup per node when cached."""
        if self._entries_held + len(nodes) > CHILDREN_CACHE_NODES:
            self._entries.clear()  # full: start again rather than track recency per entry
            self._entries_held = 0
        table = self._entries.setdefault((kind, render), {})
        before = len(table)
        get = table.get
        found = [get(node.id) or self._new_entry(table, kind, node, render) for node in nodes]
        self._entries_held += len(table) - before
        return found

    def _new_entry(self, table: dict[int, Entry], kind: Kind, node: Node, render: str) -> Entry:
        entry = table[node.id] = self._make_entry(kind, node, render)
        entry.tokens = self.judge.count_tokens(entry.text)  # what pack() would count each query
        return entry

    def _make_entry(self, kind: Kind, node: Node, render: str) -> Entry:
        if kind in ("passage", "heading"):
            page = self.node(node.doc) if node.doc is not None else node
            if kind == "passage":
                return Entry(node.key, node.text, (self.page_title(page), *node.heading), page.id, True)
            heading = " > ".join(node.heading) or node.title
            return Entry(node.key, heading, (self.page_title(page),), page.id, True)
        text = node.title if render == "title" and node.title else ""
        text = text or node.description or node.title or node.key
        return Entry(node.key, text, self._group_header(node.parent), node.parent)

    def _group_header(self, parent_id: int | None) -> tuple[str, ...]:
        """The header path pages and groups under `parent_id` are shown under: its title when
        it is a group. One tuple per parent, shared by its children (compared by identity
        first when a level is rendered and split)."""
        found = self._headers.get(parent_id)
        if found is None:
            parent = self.node(parent_id) if parent_id is not None else None
            above = parent is not None and parent.kind == NodeKind.GROUP
            found = (parent.title or parent.description,) if parent is not None and above else ()
            self._headers[parent_id] = found
        return found

    def ancestors(self, node: Node) -> list[Node]:
        """Groups and pages above `node`, outermost first (root excluded)."""
        chain: list[Node] = []
        current = node.parent
        while current is not None:
            parent = self.node(current)
            if parent.kind == NodeKind.ROOT:
                break
            chain.append(parent)
            current = parent.parent
        return chain[::-1]

    def reading_key(self, node: Node) -> tuple[int, ...]:
        """Sorts any mix of pages and passages into reading order."""
        if node.kind >= NodeKind.SECTION and node.doc is not None:
            return (*self.reading_key(self.node(node.doc)), node.id)
        return (*(a.pos for a in self.ancestors(node)), node.pos)

    def page_title(self, doc: Node) -> str:
        return doc.title or doc.description or doc.key

    def all_documents(self) -> list[Node]:
        """Every page in reading order (depth first over groups); cached."""
        if self._documents is None:
            found: list[Node] = []
            self._collect_documents(self.tree.root.id, found)
            self._documents = found
        return self._documents

    def _collect_documents(self, node_id: int, found: list[Node]) -> None:
        for child in self.tree.children(node_id):
            if child.kind == NodeKind.DOCUMENT:
                found.append(child)
            elif child.kind == NodeKind.GROUP:
                self._cache.setdefault(child.id, child)
                self._collect_documents(child.id, found)

    def _passage(self, key: str) -> Node:
        try:
            node = self.tree.node(key)
        except KeyError:
            raise InputError(f"passage id {key!r} is not in {self.tree.file}") from None
        if node.kind != NodeKind.PASSAGE:
            raise InputError(f"{key!r} is a {node.kind.label}, not a passage")
        return node

