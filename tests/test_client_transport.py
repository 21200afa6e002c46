"""`Client` through an injected transport: error decoding without a live server.

The network itself (a real `decisionrag serve`) is covered by the serve and client tests;
these check what the client makes of what a server answers, through `httpx.MockTransport`,
and that httpx's own failures reach the caller as `ServerError` (status 0), translated in
`decisionrag._http` and nowhere else.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from decisionrag import Client, ServerError


def answering(status: int, body: bytes, headers: dict[str, str] | None = None) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers=headers or {})

    return httpx.MockTransport(handle)


def test_a_busy_server_says_when_to_retry() -> None:
    body = json.dumps({"error": {"type": "server_busy", "message": "the judge queue is full"},
                       "request_id": "r1"}).encode()
    client = Client("http://server", transport=answering(503, body, {"Retry-After": "3"}))
    with pytest.raises(ServerError) as caught:
        client.retrieve("q")
    error = caught.value
    assert (error.status, error.type, error.retry_after, error.request_id) == (503, "server_busy", 3.0, "r1")
    assert "the judge queue is full" in str(error)


def test_a_page_that_is_not_json_is_named_by_its_status() -> None:
    client = Client("http://server", transport=answering(502, b"<html>Bad gateway</html>"))
    with pytest.raises(ServerError, match=r"server answered 502: HTTP 502: <html>Bad gateway"):
        client.trees()


def test_a_success_is_decoded_and_sent_with_the_key() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"results": [{"index": 1, "relevance_score": 0.9}]})

    client = Client("http://server", api_key="drag_x", transport=httpx.MockTransport(handle),
                    async_transport=httpx.MockTransport(handle))
    assert client.rerank("q", ["a", "b"]) == [(1, 0.9)]
    assert asyncio.run(client.arerank("q", ["a", "b"])) == [(1, 0.9)]
    assert [r.headers["authorization"] for r in seen] == ["Bearer drag_x"] * 2
    assert json.loads(seen[0].content) == {"query": "q", "documents": ["a", "b"]}


def test_httpx_failures_become_server_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = Client("http://server", transport=httpx.MockTransport(refuse),
                    async_transport=httpx.MockTransport(refuse))
    for call in (lambda: client.health(), lambda: asyncio.run(client.ahealth()),
                 lambda: list(client.stream_answer("q"))):
        with pytest.raises(ServerError, match="cannot reach the server") as caught:
            call()
        assert caught.value.status == 0 and caught.value.type == "connection"
        assert isinstance(caught.value.__cause__, httpx.ConnectError)
