"""What the HTTP app and the MCP server both do, with no HTTP in it: check a request
against the limits and the caller's key, run it on the library, shape the answer.

This is a thin shell over the public Navigator / Tree / judge API; it adds only what a
shared service needs (leases on swappable trees, conversations kept by id, the judge
gate, deadlines).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._answer import strip_citations
from .._app import metadata_keys, open_judge, rerank_texts
from .._errors import (
    DecisionRAGError,
    InputError,
    JudgeError,
    JudgeUnavailable,
    NavigationError,
)
from .._judges import Judge, Usage
from .._navigate import PRESET_NAMES, Hit, Navigator, Result
from .._query import Query, Turn
from .._tree import Node, NodeKind, Tree
from .._walkpage import walk_stages
from ._auth import Principal
from ._conversations import ConversationKey, ConversationState, ConversationStore, open_conversations
from ._errors import ServeError, invalid, too_large
from ._gate import LEDGER, GatedJudge, JudgeGate, Ledger
from ._metrics import Metrics
from ._schemas import (
    HitOut,
    NodeOut,
    NodeRef,
    NodeResponse,
    RerankRequest,
    RerankText,
    RetrieveRequest,
    RetrieveResponse,
    StageOut,
    TreeMetadata,
    TreesResponse,
    TreeStats,
    TreeSummary,
    UsageOut,
    WalkStageOut,
)
from ._settings import ServeLimits, ServeSettings
from ._trees import TreeRegistry

_ROLES = {"user": "user", "assistant": "agent", "agent": "agent"}


@dataclass(slots=True)
class Retrieval:
    """A retrieval and what an answer to it must see: the query as the walk saw it (its
    history the client's `messages` or the stored conversation's turns), and the stored
    conversation, if the request named one."""

    response: RetrieveResponse
    query: Query
    conversation: ConversationState | None
    store: ConversationStore | None = None
    key: ConversationKey | None = None

    async def reply(self, text: str) -> None:
        """Record the agent's answer in the stored conversation (as `Conversation.reply`
        does), so the next turn's walk and prompt see it; without its [n] marks, which name
        this turn's passages only. Skipped when another request moved the conversation on."""
        if self.store is None or self.key is None:
            return
        asked, answered = Turn("user", self.query.text), Turn("agent", strip_citations(text))

        def add(state: ConversationState) -> None:
            if state.history and state.history[-1] == asked:
                state.history.append(answered)

        self.conversation = await self.store.aupdate(self.key, add)


def navigator_filters() -> bool:
    """Whether this build's Navigator takes `filters=` (metadata filters, issue #14)."""
    return "filters" in inspect.signature(Navigator.aretrieve).parameters


class Service:
    def __init__(
        self,
        registry: TreeRegistry,
        judge: Judge,
        gate: JudgeGate,
        limits: ServeLimits,
        metrics: Metrics,
        conversations: ConversationStore | None = None,
    ) -> None:
        self.registry = registry
        self.judge = judge
        self.gate = gate
        self.limits = limits
        self.metrics = metrics
        self.conversations = conversations if conversations is not None else open_conversations(
            limits.max_conversations, limits.conversation_ttl, None)
        self.filters_supported = navigator_filters()

    # -- retrieve ------------------------------------------------------------------------

    async def retrieve(
        self, principal: Principal, body: RetrieveRequest, request_id: str
    ) -> RetrieveResponse:
        return (await self.retrieval(principal, body, request_id)).response

    async def retrieval(self, principal: Principal, body: RetrieveRequest, request_id: str) -> Retrieval:
        """`retrieve`, with the query the walk was given (``/v1/answer`` prompts with it)."""
        tree_name = body.tree or self.registry.default
        principal.check(tree_name)
        self._check_retrieve(body)
        query, given_history = self._query(body)
        state = key = None
        state_timeout = body.timeout or self.limits.default_timeout
        if body.conversation_id is not None:
            key = (principal.identity, tree_name, body.conversation_id)  # the key, not its name
            state = await self.conversations.aget(key, state_timeout)
            if given_history is None:
                query = Query(query.text, query.context, tuple(state.history[-self.limits.max_messages:]))
        notepad = tuple(state.notepad) if state is not None else ()
        self.gate.admit()
        with self.registry.lease(tree_name) as served:
            navigator = self._navigator(served.navigator, body.preset)
            result = await self._deadline(
                self._walk(navigator, query, body.k, notepad, body.filters), body.timeout)
        if key is not None:
            state = await self.conversations.aupdate(key, self._recorder(query, given_history, result),
                                                     state_timeout)
        response = RetrieveResponse(
            results=[hit_out(hit) for hit in result.hits],
            usage=UsageOut(**result.usage.to_dict()),
            trace=[StageOut(**stage) for stage in result.trace.to_list()] if body.trace else None,
            walk=[WalkStageOut(**stage) for stage in walk_stages(result)] if body.walk else None,
            tree=tree_name,
            preset=navigator.preset.name,
            conversation_id=body.conversation_id,
            seconds=round(result.seconds, 4),
            request_id=request_id,
        )
        return Retrieval(response, query, state, self.conversations if key else None, key)

    def _recorder(self, query: Query, given_history: tuple[Turn, ...] | None, result: Result
                  ) -> Callable[[ConversationState], None]:
        """How a retrieval changes its stored conversation: the user's turn added to the
        stored turns as they are now (a concurrent turn is kept), or the client's turns
        replace them; the top hit's page goes to the front of the notepad."""
        asked = Turn("user", query.text)

        def record(state: ConversationState) -> None:
            earlier = state.history if given_history is None else list(given_history)
            state.history = [*earlier, asked][-self.limits.max_messages:]
            if result.hits:
                state.remember(result.hits[0].doc_key)

        return record

    def _check_retrieve(self, body: RetrieveRequest) -> None:
        limits = self.limits
        if body.k > limits.max_k:
            raise invalid("k", f"{body.k} exceeds this server's maximum of {limits.max_k}")
        if body.query is not None and len(body.query) > limits.max_query_chars:
            raise invalid("query", f"{len(body.query):,} characters; at most {limits.max_query_chars:,}")
        if body.context is not None and len(body.context) > limits.max_query_chars:
            raise invalid("context", f"{len(body.context):,} characters; at most {limits.max_query_chars:,}")
        if body.messages is not None:
            if len(body.messages) > limits.max_messages:
                raise invalid("messages", f"{len(body.messages)} turns; at most {limits.max_messages}")
            chars = sum(len(m.content) for m in body.messages)
            if chars > limits.max_conversation_chars:
                raise invalid("messages", f"{chars:,} characters in all; at most "
                              f"{limits.max_conversation_chars:,}")
        if body.preset is not None and body.preset not in PRESET_NAMES:
            raise invalid("preset", f"unknown preset {body.preset!r}; one of {', '.join(PRESET_NAMES)}")
        if body.filters is not None and not self.filters_supported:
            raise invalid("filters", "this server's decisionrag cannot filter by metadata yet")
        check_timeout(body.timeout, limits)

    def _query(self, body: RetrieveRequest) -> tuple[Query, tuple[Turn, ...] | None]:
        """The query, and the history the client sent (None: it sent none)."""
        turns = tuple(Turn(_ROLES[m.role], m.content) for m in body.messages or ())
        context = body.context or ""
        if body.query is not None:
            if not body.query.strip():
                raise invalid("query", "is blank")
            return Query(body.query, context, turns), (turns if body.messages is not None else None)
        if not turns:
            raise invalid("query", "give a query, or messages with the user's turn")
        last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=None)
        if last_user is None:
            raise invalid("messages", "no turn has role 'user': there is nothing to retrieve for")
        return Query(turns[last_user].text, context, turns[:last_user]), turns[:last_user]

    def _navigator(self, make: Any, preset: str | None) -> Navigator:
        try:
            navigator: Navigator = make(preset)
        except NavigationError as exc:
            raise invalid("preset", str(exc)) from exc
        return navigator

    async def _walk(
        self, navigator: Navigator, query: Query, k: int, notepad: Sequence[str], filters: Any
    ) -> Result:
        if filters is not None:
            return await navigator.aretrieve(query, k=k, notepad=notepad, filters=filters)
        return await navigator.aretrieve(query, k=k, notepad=notepad)

    async def _deadline(self, work: Any, timeout: float | None) -> Any:
        """Run `work` within the request's deadline; a 504 says what was done by then."""
        seconds = timeout if timeout is not None else self.limits.default_timeout
        ledger = Ledger()
        token = LEDGER.set(ledger)
        start = time.perf_counter()
        try:
            return await asyncio.wait_for(work, seconds)
        except asyncio.TimeoutError:
            self.metrics.deadlines.inc()
            elapsed = time.perf_counter() - start
            raise ServeError(
                504, "deadline_exceeded",
                f"the request's deadline of {seconds:g} s passed before it finished",
                field="timeout", extra={"done": {**ledger.to_dict(), "seconds": round(elapsed, 3)}},
            ) from None
        except ServeError:
            raise
        except DecisionRAGError as exc:
            raise service_error(exc) from exc
        finally:
            LEDGER.reset(token)

    # -- rerank --------------------------------------------------------------------------

    async def rerank(self, principal: Principal, body: RerankRequest
                     ) -> tuple[list[tuple[int, float]], dict[str, Any], list[str]]:
        """(index, score) best first, cut to `top_n`; the usage; the documents' texts.

        The documents are judged as a walk's passage stage judges its candidates, then
        reordered by its choice step (`decisionrag._app.rerank_texts`). With `tree` (a tree
        this key may read), that tree's word statistics are used, and documents given by
        passage id are the tree's passages (of the server's default tree when `tree` is not
        given; an unknown id is a 404), reranked by the walk's own last stages
        (`Navigator.arerank`: stored vectors, the page and headings above each) when all
        are ids, read as their text beside the others when ids and texts are mixed."""
        items = self._rerank_items(body)
        check_timeout(body.timeout, self.limits)
        tree = body.tree
        if tree is None and any(passage is not None for _, passage in items):
            tree = self.registry.default
        if tree is not None:
            principal.check(tree)
        self.gate.admit()
        query = Query(body.query)
        if tree is None:
            texts = [text for text, _ in items]
            ranked, usage, _ = await self._deadline(rerank_texts(self.judge, query, texts),
                                                    body.timeout)
            order = [(r.index, r.binary) for r in ranked]
        else:
            with self.registry.lease(tree) as served:
                navigator = self._navigator(served.navigator, None)
                _check_passages(served.tree, items, "documents" if body.documents else "texts")
                order, usage, texts = await self._deadline(
                    _rerank_on_tree(navigator, query, items), body.timeout)
        return order[: body.top_n or len(order)], usage.to_dict(), texts

    def _rerank_items(self, body: RerankRequest) -> list[tuple[str, str | None]]:
        """The documents as (text, passage id): a text, or a passage of `body.tree` by id."""
        limits = self.limits
        if len(body.query) > limits.max_query_chars:
            raise invalid("query", f"{len(body.query):,} characters; at most {limits.max_query_chars:,}")
        if not body.query.strip():
            raise invalid("query", "is blank")
        if (body.documents is None) == (body.texts is None):
            raise invalid("documents", "give either 'documents' (Cohere) or 'texts' (TEI)")
        field = "documents" if body.documents is not None else "texts"
        given = body.documents if body.documents is not None else body.texts
        assert given is not None
        items: list[tuple[str, str | None]] = [
                 (item, None) if isinstance(item, str) else
                 (item.text, None) if isinstance(item, RerankText) else ("", item.id)
                 for item in given]
        if not items:
            raise invalid(field, "is empty")
        if len(items) > limits.max_documents:
            raise invalid(field, f"{len(items):,} documents; at most {limits.max_documents:,}")
        for index, (text, passage) in enumerate(items):
            if passage is None and len(text) > limits.max_document_chars:
                raise invalid(f"{field}[{index}]", f"{len(text):,} characters; at most "
                              f"{limits.max_document_chars:,}")
        return items

    # -- trees and nodes -----------------------------------------------------------------

    def trees(self, principal: Principal) -> TreesResponse:
        summaries = []
        for name in self.registry.names:
            if not principal.may_read(name):
                continue
            served = self.registry.current(name)
            counts = served.tree.counts
            summaries.append(TreeSummary(
                name=name, documents=counts.get("document", 0), passages=counts.get("passage", 0),
                generation=served.generation, default=name == self.registry.default))
        return TreesResponse(trees=summaries)

    def tree_stats(self, principal: Principal, name: str) -> TreeStats:
        principal.check(name)
        with self.registry.lease(name) as served:
            return TreeStats(**served.stats())

    def tree_metadata(self, principal: Principal, name: str) -> TreeMetadata:
        principal.check(name)
        with self.registry.lease(name) as served:
            return TreeMetadata(tree=name, **metadata_keys(served.tree))

    def node(self, principal: Principal, name: str, ref: str, offset: int, limit: int) -> NodeResponse:
        principal.check(name)
        if limit > self.limits.max_children:
            raise invalid("limit", f"{limit} exceeds this server's maximum of {self.limits.max_children}")
        with self.registry.lease(name) as served:
            tree = served.tree
            try:
                node = tree.node(int(ref)) if ref.isascii() and ref.isdigit() and len(ref) < 19 \
                    else tree.node(ref)
            except KeyError:
                raise ServeError(404, "not_found", f"no node {ref!r} in tree {name!r}", field="id") from None
            path = tree.path(node.id)
            children: list[Node] = []
            if node.kind < NodeKind.PASSAGE:
                children = tree.children(node.id, limit=limit, offset=offset)
            total = tree.count_children(node.id)
            doc = tree.node(node.doc) if node.doc is not None else None
            return NodeResponse(
                tree=name,
                node=NodeOut(
                    id=node.key, kind=node.kind.label, title=node.title, description=node.description,
                    heading=list(node.heading), text=node.text,
                    doc_id=doc.key if doc is not None else None,
                    n_passages=node.n_passages, metadata=dict(node.meta)),
                path=[node_ref(n) for n in path[:-1]],
                children=[node_ref(n) for n in children],
                children_total=total,
                offset=offset,
            )


def check_timeout(timeout: float | None, limits: ServeLimits) -> None:
    if timeout is not None and not limits.min_timeout <= timeout <= limits.max_timeout:
        raise invalid("timeout", f"{timeout:g} s is outside this server's range "
                      f"[{limits.min_timeout:g}, {limits.max_timeout:g}] s")


def build_service(settings: ServeSettings, judge: Judge | None = None) -> Service:
    """Trees opened, judge loaded (`judge`, else `settings.judge`) behind the gate."""
    metrics = Metrics()
    limits = settings.limits
    gate = JudgeGate(limits.max_judge_requests, limits.max_judge_queue, metrics)
    loaded = judge if judge is not None else open_judge(settings.judge, settings.judge_options)
    gated = GatedJudge(loaded, gate, metrics)
    registry = TreeRegistry(settings.trees, gated, settings.preset, metrics,
                            reload_seconds=settings.reload_seconds, warm=settings.warm)
    conversations = open_conversations(limits.max_conversations, limits.conversation_ttl,
                                       settings.state_dir, settings.state_url, limits.state_timeout)
    return Service(registry, gated, gate, limits, metrics, conversations)


def node_ref(node: Node) -> NodeRef:
    return NodeRef(id=node.key, kind=node.kind.label, title=node.title or node.description or node.key,
                   n_passages=node.n_passages)


def hit_out(hit: Hit) -> HitOut:
    data = hit.to_dict()
    metadata = data.get("metadata")
    if metadata is None:  # hits carry metadata once issue #14 lands; the node's until then
        metadata = getattr(hit, "metadata", None) or dict(hit.node.meta)
    return HitOut(
        id=data["id"], doc_id=data["doc_id"], score=data["score"], binary=data["binary"],
        choice=data["choice"], path=data["path"], text=data["text"], metadata=metadata,
        also_at=data.get("also_at", []),
    )


def service_error(exc: DecisionRAGError) -> ServeError:
    """A library error as the answer a client gets."""
    if isinstance(exc, NavigationError):
        return invalid("preset", str(exc))
    if isinstance(exc, InputError):
        field = "filters" if str(exc).startswith("filter") else None
        return ServeError(422, "invalid_request", str(exc), field=field)
    if isinstance(exc, JudgeUnavailable):
        return ServeError(503, "judge_unavailable", f"the judge is unavailable: {exc}",
                          headers={"Retry-After": "5"})
    if isinstance(exc, JudgeError):
        return ServeError(502, "judge_error", f"the judge failed: {exc}")
    return ServeError(500, "internal_error", str(exc))


def _check_passages(tree: Tree, items: list[tuple[str, str | None]], field: str) -> None:
    for index, (_, passage) in enumerate(items):
        if passage is not None and not tree.has_passage(passage):
            raise ServeError(404, "not_found", f"no passage {passage!r} in this tree",
                             field=f"{field}[{index}].id")


async def _rerank_on_tree(navigator: Navigator, query: Query, items: list[tuple[str, str | None]]
                          ) -> tuple[list[tuple[int, float]], Usage, list[str]]:
    """Rerank on a served tree: passages by id through the walk's last stages (each hit's
    collapsed duplicates right after it, with its score), texts with the tree's statistics."""
    ids = [passage for _, passage in items]
    if all(passage is not None for passage in ids):
        try:
            result = await navigator.arerank(query, [str(p) for p in ids], k=len(ids))
        except InputError as exc:
            raise invalid("documents", str(exc)) from exc
        index = {passage: i for i, passage in enumerate(ids)}
        order = [(index[key], hit.score) for hit in result.hits
                 for key in (hit.node.key, *(place.key for place in hit.also_at))]
        texts = [navigator.view.passage(str(p)).text for p in ids]
        return order, result.usage, texts
    texts = [text if passage is None else navigator.view.passage(passage).text
             for text, passage in items]
    ranked, usage, _ = await rerank_texts(navigator.judge, query, texts,
                                          statistics=navigator.view.lexicon)
    return [(r.index, r.binary) for r in ranked], usage, texts


__all__ = ["Service", "build_service", "too_large"]
