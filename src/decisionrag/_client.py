"""`Client`: talk to a `decisionrag serve` server, synchronously or with asyncio.

>>> client = Client("http://127.0.0.1:8000", api_key="drag_...")
>>> for hit in client.retrieve("How do I renew my passport?", k=5).hits:
...     print(hit.score, " > ".join(hit.path), hit.text[:80])
>>> result = await client.aretrieve("And if it was stolen?", conversation_id="c1")

Needs only httpx. Errors are `ServerError` (status, type, field, retry_after) or, when the
server cannot be reached, `ServerError` with status 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ._errors import ServerError
from ._http import parse_retry_after

DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class RemoteHit:
    """One ranked passage from a server (the fields of `Hit.to_dict`, plus metadata)."""

    id: str
    doc_id: str
    score: float
    path: tuple[str, ...]
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    binary: float | None = None
    choice: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "doc_id": self.doc_id, "score": self.score, "binary": self.binary,
                "choice": self.choice, "path": list(self.path), "text": self.text,
                "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteHit:
        return cls(id=data["id"], doc_id=data.get("doc_id", ""), score=float(data["score"]),
                   path=tuple(data.get("path", ())), text=data.get("text", ""),
                   metadata=dict(data.get("metadata") or {}), binary=data.get("binary"),
                   choice=data.get("choice"))


@dataclass(frozen=True, slots=True)
class RemoteResult:
    hits: list[RemoteHit]
    usage: dict[str, Any]
    tree: str
    seconds: float
    request_id: str
    conversation_id: str | None = None
    trace: list[dict[str, Any]] | None = None

    @property
    def ids(self) -> list[str]:
        return [hit.id for hit in self.hits]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteResult:
        return cls(hits=[RemoteHit.from_dict(h) for h in data.get("results", [])],
                   usage=dict(data.get("usage") or {}), tree=data.get("tree", ""),
                   seconds=float(data.get("seconds", 0.0)), request_id=data.get("request_id", ""),
                   conversation_id=data.get("conversation_id"), trace=data.get("trace"))


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._sync: httpx.Client | None = None
        self._async: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None

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

    def _client(self) -> httpx.Client:
        if self._sync is None:
            self._sync = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self.timeout)
        return self._sync

    def _aclient(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:  # one pool per event loop
            self._async = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                            timeout=self.timeout)
            self._async_loop = loop
        return self._async

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _answer(lambda: self._client().post(path, json=body))

    def _get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _answer(lambda: self._client().get(path, params=params))

    async def _apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await _aanswer(self._aclient().post(path, json=body))

    async def _aget(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await _aanswer(self._aclient().get(path, params=params))

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        self.close()
        if self._async is not None:
            await self._async.aclose()
            self._async = None

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


def _node_path(tree: str, node_id: str) -> str:
    from urllib.parse import quote

    return f"/v1/trees/{_quote(tree)}/nodes/{quote(node_id, safe='/:')}"


def _answer(call: Any) -> dict[str, Any]:
    try:
        response = call()
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the server: {exc}", status=0, type="connection") from exc
    return _decoded(response)


async def _aanswer(pending: Any) -> dict[str, Any]:
    try:
        response = await pending
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the server: {exc}", status=0, type="connection") from exc
    return _decoded(response)


def _decoded(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.is_success and isinstance(data, dict):
        return data
    error = data.get("error", {}) if isinstance(data, dict) else {}
    if not isinstance(error, dict):
        error = {}
    retry = parse_retry_after(response.headers)
    message = error.get("message") or f"HTTP {response.status_code}: {response.text[:200]}"
    raise ServerError(
        f"server answered {response.status_code}: {message}",
        status=response.status_code, type=str(error.get("type", "")), field=error.get("field"),
        retry_after=retry,
        request_id=(data or {}).get("request_id", "") if isinstance(data, dict) else "",
        body=data if isinstance(data, dict) else {},
    )
