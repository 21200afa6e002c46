"""`Client`: talk to a `decisionrag serve` server, synchronously or with asyncio.

>>> client = Client("http://127.0.0.1:8000", api_key="drag_...")
>>> for hit in client.retrieve("How do I renew my passport?", k=5).hits:
...     print(hit.score, " > ".join(hit.path), hit.text[:80])
>>> result = await client.aretrieve("And if it was stolen?", conversation_id="c1")
>>> reply = client.answer("How do I renew my passport?", top=3)   # needs serve --generator
>>> print(reply.text, [c.path for c in reply.citations if c.valid])
>>> for event in client.stream_answer("How do I renew my passport?"):
...     print(event.text, end="", flush=True)                        # retrieved, delta..., done
>>> client.conversation("c1")["messages"]; client.delete_conversation("c1")

Needs only httpx (through `decisionrag._http.ServiceConnection`, where its errors are
translated). Errors are `ServerError` (status, type, field, retry_after) or, when the server
cannot be reached or a stream breaks off, `ServerError` with status 0. `transport` /
`async_transport` (httpx transports) replace the network, e.g. to call an app in-process.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .._errors import ServerError
from .._http import Reply, ServiceConnection, Streamed, parse_retry_after
from ._results import RemoteAnswer, RemoteAnswerEvent, RemoteResult
from ._sse import AnswerEvents

DEFAULT_TIMEOUT = 60.0


class Client:
    """A client of one server. Use it as a context manager (sync or async), or call
    `close()` / `aclose()`. `timeout` is the HTTP timeout (the server's deadline is the
    request's `timeout` field)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        transport: Any = None,
        async_transport: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        sent = dict(headers or {})
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        self._http = ServiceConnection(self.base_url, headers=sent, timeout=timeout,
                                       transport=transport, async_transport=async_transport)

    def __repr__(self) -> str:
        return f"<Client {self.base_url}>"

    # -- retrieval -----------------------------------------------------------------------

    def retrieve(self, query: str | None = None, **options: Any) -> RemoteResult:
        """Rank passages: `query`, and optionally `messages` ([{role, content}]), `tree`,
        `k`, `preset`, `filters`, `trace`, `conversation_id`, `context`, `timeout`."""
        return RemoteResult.from_dict(self._post("/v1/retrieve", _retrieve_body(query, options)))

    async def aretrieve(self, query: str | None = None, **options: Any) -> RemoteResult:
        data = await self._apost("/v1/retrieve", _retrieve_body(query, options))
        return RemoteResult.from_dict(data)

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None,
               timeout: float | None = None) -> list[tuple[int, float]]:
        """(index, relevance score) for `documents`, best first."""
        return _ranked(self._post("/v1/rerank", _rerank_body(query, documents, top_n, timeout)))

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None,
                      timeout: float | None = None) -> list[tuple[int, float]]:
        return _ranked(await self._apost("/v1/rerank", _rerank_body(query, documents, top_n, timeout)))

    # -- answers (POST /v1/answer: a server started with --generator) ---------------------

    def answer(self, query: str | None = None, *, top: int = 5, task: str = "auto",
               **options: Any) -> RemoteAnswer:
        """Retrieve, then the server's answer model answers from the `top` passages citing
        them as ``[n]``. `task`: auto, qa, short or conversation; `options` are `retrieve`'s."""
        body = _answer_body("answer", query, top, task, options)
        with _answer_route():
            return RemoteAnswer.from_dict(self._post(ANSWER_PATH, body))

    async def aanswer(self, query: str | None = None, *, top: int = 5, task: str = "auto",
                      **options: Any) -> RemoteAnswer:
        body = _answer_body("aanswer", query, top, task, options)
        with _answer_route():
            return RemoteAnswer.from_dict(await self._apost(ANSWER_PATH, body))

    def stream_answer(self, query: str | None = None, *, top: int = 5, task: str = "auto",
                      **options: Any) -> Iterator[RemoteAnswerEvent]:
        """`answer` as events while the model writes: ``retrieved``, ``delta``s, ``done``.
        An ``error`` event raises `ServerError`. Leaving the loop early closes the response."""
        body = {**_answer_body("stream_answer", query, top, task, options), "stream": True}
        return self._events(body)

    def astream_answer(self, query: str | None = None, *, top: int = 5, task: str = "auto",
                       **options: Any) -> AsyncIterator[RemoteAnswerEvent]:
        """`stream_answer` for asyncio (wrap it in `contextlib.aclosing` to close the response
        at once when leaving the loop early; otherwise it closes when the iterator is collected)."""
        body = {**_answer_body("astream_answer", query, top, task, options), "stream": True}
        return self._aevents(body)

    # -- conversations kept on the server (conversation_id) --------------------------------

    def conversation(self, conversation_id: str, *, tree: str | None = None) -> dict[str, Any]:
        """What the server keeps under `conversation_id` for this key: ``messages`` (the
        turns, oldest first), ``notepad``, ``expires_in``. `ServerError` 404 when none."""
        return self._get(_conversation_path(conversation_id), _tree_param(tree))

    async def aconversation(self, conversation_id: str, *, tree: str | None = None) -> dict[str, Any]:
        return await self._aget(_conversation_path(conversation_id), _tree_param(tree))

    def delete_conversation(self, conversation_id: str, *, tree: str | None = None) -> bool:
        """Forget the conversation on the server; whether there was one."""
        return bool(self._delete(_conversation_path(conversation_id), _tree_param(tree))["deleted"])

    async def adelete_conversation(self, conversation_id: str, *, tree: str | None = None) -> bool:
        data = await self._adelete(_conversation_path(conversation_id), _tree_param(tree))
        return bool(data["deleted"])

    # -- trees ---------------------------------------------------------------------------

    def trees(self) -> list[dict[str, Any]]:
        return list(self._get("/v1/trees")["trees"])

    async def atrees(self) -> list[dict[str, Any]]:
        return list((await self._aget("/v1/trees"))["trees"])

    def tree(self, name: str) -> dict[str, Any]:
        return self._get(f"/v1/trees/{_quote(name)}")

    async def atree(self, name: str) -> dict[str, Any]:
        return await self._aget(f"/v1/trees/{_quote(name)}")

    def node(self, tree: str, node_id: str, *, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        return self._get(_node_path(tree, node_id), {"offset": offset, "limit": limit})

    async def anode(self, tree: str, node_id: str, *, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        return await self._aget(_node_path(tree, node_id), {"offset": offset, "limit": limit})

    def health(self) -> dict[str, Any]:
        return self._get("/healthz")

    async def ahealth(self) -> dict[str, Any]:
        return await self._aget("/healthz")

    # -- transport -----------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _decoded(self._http.request("POST", path, json=body))

    def _get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _decoded(self._http.request("GET", path, params=params))

    def _delete(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _decoded(self._http.request("DELETE", path, params=params))

    async def _adelete(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _decoded(await self._http.arequest("DELETE", path, params=params))

    async def _apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _decoded(await self._http.arequest("POST", path, json=body))

    async def _aget(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _decoded(await self._http.arequest("GET", path, params=params))

    def _events(self, body: dict[str, Any]) -> Iterator[RemoteAnswerEvent]:
        reader = AnswerEvents()
        with self._http.stream("POST", ANSWER_PATH, json=body, headers=_SSE) as response:
            _check_stream(response)
            for text in response.iter_text():
                yield from reader.feed(text)
                if reader.done:
                    return
        yield from reader.finish()

    async def _aevents(self, body: dict[str, Any]) -> AsyncIterator[RemoteAnswerEvent]:
        reader = AnswerEvents()
        async with self._http.astream("POST", ANSWER_PATH, json=body, headers=_SSE) as response:
            _check_stream(response)
            async for text in response.aiter_text():
                for event in reader.feed(text):
                    yield event
                if reader.done:
                    return
        for event in reader.finish():
            yield event

    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_RETRIEVE_OPTIONS = frozenset(
    {"messages", "tree", "k", "preset", "filters", "trace", "conversation_id", "context", "timeout"})


def _retrieve_body(query: str | None, options: dict[str, Any]) -> dict[str, Any]:
    unknown = set(options) - _RETRIEVE_OPTIONS
    if unknown:
        raise TypeError(f"retrieve() got unknown options {sorted(unknown)}; "
                        f"known: {sorted(_RETRIEVE_OPTIONS)}")
    body = {name: value for name, value in options.items() if value is not None}
    if query is not None:
        body["query"] = query
    return body


_ANSWER_OPTIONS = _RETRIEVE_OPTIONS
ANSWER_PATH = "/v1/answer"
_SSE = {"Accept": "text/event-stream"}
NO_ANSWER_MODEL = ("this server has no POST /v1/answer: it was started without an answer model "
                   "(start it with `decisionrag serve ... --generator openai-compatible:MODEL`)")


def _answer_body(method: str, query: str | None, top: int, task: str,
                 options: dict[str, Any]) -> dict[str, Any]:
    unknown = set(options) - _ANSWER_OPTIONS
    if unknown:
        hint = " (use stream_answer / astream_answer to stream)" if "stream" in unknown else ""
        raise TypeError(f"{method}() got unknown options {sorted(unknown)}; "
                        f"known: {sorted(_ANSWER_OPTIONS | {'top', 'task'})}{hint}")
    return {**_retrieve_body(query, options), "top": top, "task": task}


def _no_answer_model(error: ServerError) -> ServerError | None:
    """The route is missing (a plain 404, no field) when the server has no answer model;
    a 404 naming a field (no such tree) is the retrieval's own and stays as it is."""
    if error.status != 404 or error.field is not None or error.type not in ("not_found", ""):
        return None
    return ServerError(NO_ANSWER_MODEL, status=404, type="no_answer_model",
                       request_id=error.request_id, body=error.body)


@contextmanager
def _answer_route() -> Iterator[None]:
    try:
        yield
    except ServerError as exc:
        missing = _no_answer_model(exc)
        if missing is None:
            raise
        raise missing from exc


def _check_stream(response: Streamed) -> None:
    """Raise the server's error (a status before the stream started; the body read), or
    refuse a success that is not an event stream (a proxy's page, an older server)."""
    if not response.ok:
        with _answer_route():
            _decoded(Reply(response.status, response.headers, response.body, 0.0))
    kind = response.headers.get("content-type", "")
    if not kind.startswith("text/event-stream"):
        raise ServerError(f"expected server-sent events from {ANSWER_PATH}, "
                          f"got {kind or 'no content type'!r}", status=response.status,
                          type="bad_event")


def _rerank_body(query: str, documents: Sequence[str], top_n: int | None,
                 timeout: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "documents": list(documents)}
    if top_n is not None:
        body["top_n"] = top_n
    if timeout is not None:
        body["timeout"] = timeout
    return body


def _ranked(data: dict[str, Any]) -> list[tuple[int, float]]:
    return [(int(item["index"]), float(item["relevance_score"])) for item in data["results"]]


def _quote(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")


def _conversation_path(conversation_id: str) -> str:
    return f"/v1/conversations/{_quote(conversation_id)}"


def _tree_param(tree: str | None) -> dict[str, Any] | None:
    return {"tree": tree} if tree is not None else None


def _node_path(tree: str, node_id: str) -> str:
    from urllib.parse import quote

    return f"/v1/trees/{_quote(tree)}/nodes/{quote(node_id, safe='/:')}"


def _decoded(reply: Reply) -> dict[str, Any]:
    """The JSON object of a successful reply; else the server's error as a `ServerError`."""
    try:
        data = json.loads(reply.body) if reply.body else None
    except ValueError:
        data = None
    if 200 <= reply.status < 300 and isinstance(data, dict):
        return data
    error = data.get("error", {}) if isinstance(data, dict) else {}
    if not isinstance(error, dict):
        error = {}
    text = reply.body[:200].decode("utf-8", "replace")
    message = error.get("message") or f"HTTP {reply.status}: {text}"
    raise ServerError(
        f"server answered {reply.status}: {message}",
        status=reply.status, type=str(error.get("type", "")), field=error.get("field"),
        retry_after=parse_retry_after(reply.headers),
        request_id=(data or {}).get("request_id", "") if isinstance(data, dict) else "",
        body=data if isinstance(data, dict) else {},
    )
