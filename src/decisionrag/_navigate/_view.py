"""The query-independent view of a tree that navigation reads: nodes, children in reading
order, candidate entries (rendered once, token-counted once), ancestry, reading order.

One `TreeView` lives as long as its `Navigator` and is shared by every walk; its caches are
bounded. Groups' children and the entries of groups and pages recur query after query (a
page level is the same 16,000 pages every time): up to `cache_nodes` of them are held
(CHILDREN_CACHE_NODES, or ``DECISIONRAG_CACHE_NODES``; about 850 bytes a page), enough for
every page of an NQ-sized tree, whose page level would otherwise be rebuilt on each query.
Heading and passage entries carry their text and rarely recur (a walk opens a few dozen
pages of millions of passages): CONTENT_ENTRIES of them at most (LARGE_TREE_CONTENT_ENTRIES
above PAGE_PARTS_UP_TO passages), so that a long-running process does not keep every
passage it has shown (docs/benchmarks.md, issue 30). Nothing
here depends on a query.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import operator
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .._errors import InputError
from .._judges._evidence import RecurringLists
from .._tree import Node, NodeKind, Tree, ancestry
from .._tree._summaries import Summary
from .._tree._vectors import NodeVectors
from .._words import Lexicon
from ._config import Preset
from ._filters import Filter
from ._render import Entry, EntryRun, EntryRuns, Kind, truncated_entry

CHILDREN_CACHE_NODES = 250_000  # groups' children, and as many group and page entries
RECURRING_BYTES = 4 << 20  # packed levels kept (a 4,000-page level's: about 100 kB)
CONTENT_ENTRIES = 20_000  # heading and passage entries (with their texts: about 30 MB)
# above PAGE_PARTS_UP_TO passages a passage shown once is seldom shown again: fewer are kept
LARGE_TREE_CONTENT_ENTRIES = 4_096
PASSAGE_LIST_NODES = 20_000  # nodes held in the lists of `passages_of` and `sections_of`
NODE_CACHE_NODES = 20_000  # nodes looked up one by one (pages of passages, ancestors)
READ_AHEAD_SHARE = 0.9  # reading ahead stops when the caches are this full


class NodeRuns(list[Node]):
    """A level's nodes made of lists the view keeps (each the pages of one group, as
    `split_children` holds them): their concatenation, with the lists (`runs`), so that
    the level's entries come as runs (`TreeView.entries`)."""

    __slots__ = ("runs",)

    def __init__(self, runs: Sequence[list[Node]]) -> None:
        super().__init__(itertools.chain.from_iterable(runs))
        self.runs = [run for run in runs if run]


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


def default_cache_nodes() -> int:
    """CHILDREN_CACHE_NODES, or $DECISIONRAG_CACHE_NODES (more: faster walks over a large
    tree for more memory, about 850 bytes a page)."""
    given = os.environ.get("DECISIONRAG_CACHE_NODES", "").strip()
    if not given:
        return CHILDREN_CACHE_NODES
    try:
        value = int(given.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"DECISIONRAG_CACHE_NODES={given!r}: expected a positive whole number "
                         f"of nodes (default {CHILDREN_CACHE_NODES:,})")
    return value


class Generations:
    """Entries by (kind, render) and node id, in two generations: a lookup reads the young
    one, then the old one (bringing what it finds back); once the young one holds half of
    `limit`, the next lookup drops the old one and the young one becomes old. The least
    recently used go, in bulk, with no recency list kept per lookup. Each generation holds
    at most half the limit plus one lookup's nodes."""

    __slots__ = ("held", "limit", "old", "young")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.young: dict[tuple[str, str], dict[int, Entry]] = {}
        self.old: dict[tuple[str, str], dict[int, Entry]] = {}
        self.held = 0  # entries in the young generation

    def tables(self, key: tuple[str, str]) -> tuple[dict[int, Entry], dict[int, Entry]]:
        """The young and old tables of `key`, the young one made anew when it is full. (Not
        by the size of the coming lookup: a page level of 16,293 cached pages would turn
        every generation over and send each lookup the slow way, through the old one.)"""
        if self.held >= self.limit // 2:
            self.old, self.young = self.young, {}
            self.held = 0
        return self.young.setdefault(key, {}), self.old.get(key, {})

    def __len__(self) -> int:
        return sum(map(len, self.young.values())) + sum(map(len, self.old.values()))


# Pages are read through their passages' vectors up to this corpus size; above it through
# their centroid only, so a page level of 16,000 pages does not map every passage vector.
PAGE_PARTS_UP_TO = 500_000


_NODE_ID = operator.attrgetter("id")


def plain_text(node: Node) -> str:
    """`node`'s text with its whitespace collapsed: what duplicate passages are found by."""
    return " ".join(node.text.split())


_ASCII_WHITESPACE = bytes(c for c in range(128) if chr(c).isspace())  # what str.split() splits on


def plain_hash(node: Node) -> int:
    """A hash of `node`'s text with all its whitespace removed: texts equal whitespace aside
    (`plain_text`) hash alike (and texts that differ only in where their spaces fall, which
    `plain_text` then tells apart). An ASCII text drops its whitespace bytes in one C pass
    (1.5 µs for 1,700 characters; collapsing it takes 12 µs)."""
    text = node.text
    if text.isascii():
        return hash(text.encode("ascii").translate(None, _ASCII_WHITESPACE))
    return hash("".join(text.split()).encode())


class TreeView:
    """`tree` as navigation sees it; `count_tokens` is the judge's token counter (entries
    carry their token count so packing a level counts nothing per query). `renders`: the
    judge reads rendered contexts, so entries get their rendered line when they are made
    (often while the judge answers the level above: read-ahead); else on first use."""

    def __init__(self, tree: Tree, count_tokens: Callable[[str], int],
                 candidate_tokens: int | None = None, *, vectors: NodeVectors | None = None,
                 lexicon: Lexicon | None = None, cache_nodes: int | None = None,
                 renders: bool = True) -> None:
        self.tree = tree
        self.renders = renders
        self.cache_nodes = cache_nodes if cache_nodes is not None else default_cache_nodes()
        self.candidate_tokens = candidate_tokens  # longer candidate texts are cut to their head
        self.vectors = vectors  # stored node vectors in the judge's space (None: text only)
        self.lexicon = lexicon  # the corpus's word statistics, carried by every request
        self._page_parts = tree.counts.get("passage", 0) <= PAGE_PARTS_UP_TO
        self.count_tokens = functools.lru_cache(maxsize=100_000)(count_tokens)
        self._judge_count = count_tokens
        self._cache: dict[int, Node] = {}
        self._pages_by_key: dict[str, Node | None] = {}  # see `page`
        self._children: OrderedDict[int, Children] = OrderedDict()
        self._children_held = 0
        self._documents: list[Node] | None = None
        self._document_runs: list[list[Node]] | None = None
        self._outline_entries = Generations(self.cache_nodes)  # groups and pages
        self._content_entries = Generations(  # headings and passages
            CONTENT_ENTRIES if self._page_parts else LARGE_TREE_CONTENT_ENTRIES)
        self._entry_runs: dict[tuple[str, str, int], tuple[list[Node], EntryRun]] = {}
        self._entry_runs_held = 0  # entries in `_entry_runs`
        self._headers: dict[int | None, tuple[str, ...]] = {}
        self._summaries: dict[int, Summary] = {}
        self._summarised = True  # False for a tree written before summaries existed
        self._passages: dict[tuple[int, int | str | None], list[Node]] = {}  # see `_listed`
        self._passages_held = 0
        self._plain: dict[int, int] = {}  # hashes of passages' texts, whitespace collapsed
        self._reading: dict[int, tuple[int, ...]] = {}  # reading keys by node id
        # what is kept for levels that come back query after query (a page level's requests)
        self.recurring = RecurringLists(RECURRING_BYTES)

    # -- warming the caches -----------------------------------------------------------------

    def warm(self, preset: Preset) -> int:
        """Read every group's children and build their entries as `preset` renders them, so
        later queries read nothing from the tree on the group and page levels. Stops when
        the caches are READ_AHEAD_SHARE full; returns the number of nodes cached."""
        level = [self.tree.root.id]
        depth = 0
        while level:
            groups: list[Node] = []
            for node_id in level:
                if not self.room_for_reading_ahead():
                    return self._children_held
                family = self.split_children(node_id)
                self.entries("document", NodeRuns([family.documents]), preset.documents.render)
                self.entries("group", family.groups, preset.group_settings(depth).render)
                groups.extend(family.groups)
            level = [group.id for group in groups]
            depth += 1
        return self._children_held

    async def read_ahead(self, preset: Preset, groups: Sequence[Node], depth: int,
                         until: asyncio.Future[Any]) -> bool:
        """Use a judge wait: while `until` (the requests judging `groups`) is pending, read
        the groups' children and build their entries and runs (level `depth`), one group at
        a time, so that the kept groups' pages are cached when the answers come back. Yields after
        each group (under a millisecond); leaves room in the caches for the walks' own use.
        True when nothing is left to read (every group's children held, or no room)."""
        for group in groups:
            if not self.room_for_reading_ahead():
                return True
            if group.id in self._children:
                continue
            if until.done():
                return False
            family = self.split_children(group.id)
            self.entries("document", NodeRuns([family.documents]), preset.documents.render)
            self.entries("group", family.groups, preset.group_settings(depth).render)
            await asyncio.sleep(0)
        return True

    def room_for_reading_ahead(self) -> bool:
        limit = READ_AHEAD_SHARE * self.cache_nodes
        return self._children_held < limit and self._outline_entries.held < limit / 2  # young

    # -- nodes ----------------------------------------------------------------------------

    def node(self, node_id: int) -> Node:
        """A node by id, cached (groups and pages are looked up again and again)."""
        node = self._cache.get(node_id)
        if node is None:
            self._make_room(1)
            node = self._cache[node_id] = self.tree.node(node_id)
        return node

    def _make_room(self, n: int) -> bool:
        """Start the node cache again when `n` more nodes would overfill it (a walk looks up
        a few hundred); whether it did."""
        if len(self._cache) + n <= NODE_CACHE_NODES:
            return False
        self._cache.clear()
        return True

    def nodes(self, node_ids: Sequence[int]) -> list[Node]:
        """`node` of each id, in that order: those not cached read from the tree in one query
        (a walk's hybrid candidates are mostly passages it has not met)."""
        cache = self._cache
        missing = [i for i in node_ids if i not in cache]
        if missing and self._make_room(len(missing)):
            missing = list(node_ids)  # (all of them read again)
        for node in self.tree.nodes(missing):
            cache[node.id] = node
        return [cache[i] for i in node_ids]

    def hold(self, nodes: Sequence[Node]) -> None:
        """Put nodes the walk has in hand in the node cache, as `node` would (kept pages,
        whose passages are then sorted into reading order through them, not the tree)."""
        self._make_room(len(nodes))
        for node in nodes:
            self._cache.setdefault(node.id, node)

    def page(self, key: str) -> Node | None:
        """The page (document) whose key is `key`, cached; None when the tree has no node of
        that key or it is not a page (a conversation's notepad names pages query after
        query)."""
        if key in self._pages_by_key:
            return self._pages_by_key[key]
        try:
            node: Node | None = self.tree.node(key)
        except KeyError:
            node = None
        found = node if node is not None and node.kind == NodeKind.DOCUMENT else None
        if len(self._pages_by_key) >= NODE_CACHE_NODES:
            self._pages_by_key.clear()
        self._pages_by_key[key] = found
        return found

    def passages_of(self, node: Node, limit: int | None = None) -> list[Node]:
        """`Tree.passages_of`, cached (a kept page is often kept again by the next query;
        the nodes share their texts with the entries made of them). A new list each call."""
        return self._listed((node.id, limit), lambda: self.tree.passages_of(node, limit))

    def sections_of(self, node: Node) -> list[Node]:
        """`Tree.sections_of`, cached as `passages_of` (a long page kept again by the next
        query has its headings judged again). A new list each call."""
        return self._listed((node.id, "sections"), lambda: self.tree.sections_of(node))

    def _listed(self, key: tuple[int, int | str | None], read: Callable[[], list[Node]]) -> list[Node]:
        """The node list under `key`, read once and kept while `PASSAGE_LIST_NODES` nodes are
        held in such lists (then they are all let go and kept anew)."""
        found = self._passages.get(key)
        if found is None:
            found = read()
            if len(found) <= PASSAGE_LIST_NODES:
                if self._passages_held + len(found) > PASSAGE_LIST_NODES:
                    self._passages.clear()
                    self._passages_held = 0
                self._passages[key] = found
                self._passages_held += len(found)
        return list(found)

    def page_of(self, node: Node) -> Node:
        """The page (document) a section or passage belongs to; a page or group itself."""
        return self.node(node.doc) if node.doc is not None else node

    def passage(self, key: str) -> Node:
        """The passage with external id `key`; `InputError` when it is none."""
        try:
            node = self.tree.node(key)
        except KeyError:
            raise InputError(f"passage id {key!r} is not in {self.tree.file}") from None
        if node.kind != NodeKind.PASSAGE:
            raise InputError(f"{key!r} is a {node.kind.label}, not a passage")
        return node

    def children(self, node_id: int) -> list[Node]:
        """The children of a root or group node in reading order (cached, see `split_children`)."""
        return self.split_children(node_id).all

    def split_children(self, node_id: int) -> Children:
        """The children of a root or group node, also split into pages and groups; cached:
        the tree never changes under a view, and a page level of 16,000 titles costs a
        query 0.1 s of SQL otherwise. Holds at most `cache_nodes` nodes, least recently
        used dropped first."""
        found = self._children.get(node_id)
        if found is not None:
            self._children.move_to_end(node_id)
            return found
        found = Children.of(self.tree.children(node_id))
        self._children[node_id] = found
        self._hold_pages(found.documents)
        self._children_held += len(found.all)
        while self._children_held > self.cache_nodes and len(self._children) > 1:
            _, dropped = self._children.popitem(last=False)
            self._children_held -= len(dropped.all)
        return found

    def all_documents(self) -> list[Node]:
        """Every page in reading order (depth first over groups); cached."""
        if self._documents is None:
            found: list[Node] = []
            self._collect_documents(self.tree.root.id, found)
            self._documents = found
            self._hold_pages(found)
        return self._documents

    def document_runs(self) -> list[list[Node]]:
        """`all_documents` cut where the parent changes: each list the pages of one group
        in a row, kept (a level of every page is then judged run by run, `NodeRuns`)."""
        if self._document_runs is None:
            runs: list[list[Node]] = []
            for page in self.all_documents():
                if not runs or runs[-1][0].parent != page.parent:
                    runs.append([])
                runs[-1].append(page)
            self._document_runs = runs
        return self._document_runs

    def _collect_documents(self, node_id: int, found: list[Node]) -> None:
        for child in self.tree.children(node_id):
            if child.kind == NodeKind.DOCUMENT:
                found.append(child)
            elif child.kind == NodeKind.GROUP:
                self._cache.setdefault(child.id, child)
                self._collect_documents(child.id, found)

    def _hold_pages(self, pages: list[Node]) -> None:
        """Put `pages` in the node cache while it has room for them all: a walk then looks
        them up by id (a passage's page, to sort it into reading order) without the tree."""
        if len(self._cache) + len(pages) <= NODE_CACHE_NODES:
            for page in pages:
                self._cache.setdefault(page.id, page)

    # -- metadata -----------------------------------------------------------------------

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

    def admissible(self, nodes: Sequence[Node], test: Filter) -> list[Node]:
        """The candidates among `nodes` that can satisfy `test`: roots, groups and documents
        by the summary of the documents below them (None: unknown, kept), sections when one
        of their passages matches, passages exactly on `metadata`. Every stage of a walk
        takes its candidates through here, so nothing that cannot match is ever judged."""
        inner = [n for n in nodes if n.kind <= NodeKind.DOCUMENT]
        summaries = dict(zip((n.id for n in inner), self.summaries(inner), strict=True))
        kept = []
        for node in nodes:
            if node.kind <= NodeKind.DOCUMENT:
                summary = summaries[node.id]
                ok = summary is None or test.may_match(summary)
            elif node.kind == NodeKind.SECTION:
                ok = any(test.matches(self.metadata(p)) for p in self.tree.passages_of(node))
            else:
                ok = test.matches(self.metadata(node))
            if ok:
                kept.append(node)
        return kept

    # -- ancestry and reading order ---------------------------------------------------------

    def ancestors(self, node: Node) -> list[Node]:
        """Groups and pages above `node`, outermost first (root excluded); read through the
        view's node cache."""
        return [n for n in ancestry(node.parent, self.node) if n.kind != NodeKind.ROOT]

    def reading_key(self, node: Node) -> tuple[int, ...]:
        """Sorts any mix of pages and passages into reading order (kept per node: a walk
        sorts its candidates by it several times, and the next query meets many again)."""
        found = self._reading.get(node.id)
        if found is None:
            if len(self._reading) >= CONTENT_ENTRIES:
                self._reading.clear()
            if node.kind >= NodeKind.SECTION and node.doc is not None:
                found = (*self.reading_key(self.node(node.doc)), node.id)
            else:
                found = (*(a.pos for a in self.ancestors(node)), node.pos)
            self._reading[node.id] = found
        return found

    def path(self, node: Node) -> tuple[str, ...]:
        """The labels from the outermost group down to `node`'s headings (a hit's path)."""
        page = self.page_of(node)
        return (*(a.label for a in self.ancestors(page)), page.label, *node.heading)

    def plain_hashes(self, nodes: Sequence[Node]) -> list[int]:
        """`plain_hash` of each node, kept per node (an integer, not the text): a passage
        ranked in one query is often ranked again in the next."""
        known = self._plain
        if len(known) + len(nodes) > CONTENT_ENTRIES:
            known.clear()
        found = list(map(known.get, [node.id for node in nodes]))
        for i, value in enumerate(found):
            if value is None:
                node = nodes[i]
                found[i] = known[node.id] = plain_hash(node)
        return cast(list[int], found)

    # -- candidate entries ------------------------------------------------------------------

    def entry(self, kind: Kind, node: Node, render: str) -> Entry:
        """How `node` is shown as a candidate of a `kind` level (query-independent, cached)."""
        return self.entries(kind, [node], render)[0]

    def entries(self, kind: Kind, nodes: Sequence[Node], render: str) -> Sequence[Entry]:
        """`entry` for many nodes at once: one dict lookup per node when cached; for
        `NodeRuns`, `EntryRuns` made of each run's kept `EntryRun` (a page level of 16,000
        pages is then packed and rendered run by run)."""
        if isinstance(nodes, NodeRuns):
            runs = self._entry_runs_of(kind, nodes.runs, render)
            if runs is not None:
                return EntryRuns.of(runs)
        cache = self._content_entries if kind in ("heading", "passage") else self._outline_entries
        table, old = cache.tables((kind, render))
        before = len(table)
        found = list(map(table.get, map(_NODE_ID, nodes)))  # in C while all are cached
        if not all(found):  # (an entry is always true)
            found = [entry or self._older_entry(table, old, kind, node, render)
                     for entry, node in zip(found, nodes, strict=True)]
        cache.held += len(table) - before
        return cast(list[Entry], found)

    def _entry_runs_of(self, kind: Kind, runs: list[list[Node]], render: str) -> list[EntryRun] | None:
        """Each run's `EntryRun`, kept while the view holds the run's list (keyed by the
        list, which is kept alongside: its id cannot be reused while it is held); None
        when a run's entries differ in header path or sibling."""
        found: list[EntryRun] = []
        for nodes in runs:
            key = (kind, render, id(nodes))
            held = self._entry_runs.get(key)
            if held is None or held[0] is not nodes:
                run = EntryRun.of(self.entries(kind, nodes, render))
                if run is None:
                    return None
                if self._entry_runs_held + len(nodes) > self.cache_nodes:
                    self._entry_runs.clear()
                    self._entry_runs_held = 0
                held = self._entry_runs[key] = (nodes, run)
                self._entry_runs_held += len(nodes)
            found.append(held[1])
        return found

    def _older_entry(self, table: dict[int, Entry], old: dict[int, Entry], kind: Kind,
                     node: Node, render: str) -> Entry:
        entry = old.pop(node.id, None)
        if entry is None:
            return self._new_entry(table, kind, node, render)
        table[node.id] = entry
        return entry

    def _new_entry(self, table: dict[int, Entry], kind: Kind, node: Node, render: str) -> Entry:
        entry = self._make_entry(kind, node, render)
        entry.tokens = self._judge_count(entry.text)  # what pack() would count each query
        if self.candidate_tokens is not None and entry.tokens > self.candidate_tokens:
            entry = truncated_entry(entry, self.candidate_tokens, self._judge_count)
        if self.renders:
            entry.line  # noqa: B018 - made now, off the path of the level it is shown in
        table[node.id] = entry
        return entry

    def _make_entry(self, kind: Kind, node: Node, render: str) -> Entry:
        vectors = self._rows(node)
        if kind in ("passage", "heading"):
            page = self.page_of(node)
            if kind == "passage":
                return Entry(node.key, node.text, (page.label, *node.heading), page.id, True,
                             vectors=vectors, words_row=self._words_row(node))
            heading = " > ".join(node.heading) or node.title
            return Entry(node.key, heading, (page.label,), page.id, True, vectors=vectors)
        text = node.title if render == "title" and node.title else ""
        return Entry(node.key, text or node.description or node.title or node.key,
                     self._group_header(node.parent), node.parent, vectors=vectors)

    def _words_row(self, node: Node) -> int | None:
        """The row of a passage's stored term counts (None when none are stored)."""
        rows = self.lexicon.rows if self.lexicon is not None else None
        return node.id if rows is not None and node.id < rows.rows else None

    def _rows(self, node: Node) -> Any:
        """The node's stored vector rows, as a handle read when a request is judged (entries
        are cached for good; the rows they would hold are the bulk of their memory): its own
        row, then for a page (below PAGE_PARTS_UP_TO passages) or a section the rows of
        everything inside it."""
        if self.vectors is None:
            return None
        parts = node.kind > NodeKind.DOCUMENT or (node.kind == NodeKind.DOCUMENT and self._page_parts)
        return self.vectors.lazy_rows(node.id, node.end + 1 if parts else node.id + 1)

    def _group_header(self, parent_id: int | None) -> tuple[str, ...]:
        """The header path pages and groups under `parent_id` are shown under: its label when
        it is a group. One tuple per parent, shared by its children (compared by identity
        first when a level is rendered and split)."""
        found = self._headers.get(parent_id)
        if found is None:
            parent = self.node(parent_id) if parent_id is not None else None
            above = parent is not None and parent.kind == NodeKind.GROUP
            found = (parent.label,) if parent is not None and above else ()
            self._headers[parent_id] = found
        return found
