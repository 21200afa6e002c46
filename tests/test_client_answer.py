"""`Client.answer` / `aanswer` / `stream_answer` / `astream_answer` against the real app under
uvicorn on 127.0.0.1, answered by the local OpenAI-compatible stand-in (tests/_chat_standin.py);
the server-sent-event reader against a raw HTTP stand-in that writes what proxies write."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module

require_module("fastapi")

from _chat_standin import ChatStandIn, cite_first
from _serve_helpers import answering_server, live_server, settings, write_tree
from decisionrag import Client, ServerError
from decisionrag._client import RemoteAnswer, RemoteAnswerEvent, RemoteHit, RemoteResult
from decisionrag._client._sse import EventParser

QUESTION = "How do I renew my passport?"


@pytest.fixture(scope="module")
def standin() -> Iterator[ChatStandIn]:
    with ChatStandIn() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, standin: ChatStandIn) -> Iterator[str]:
    with answering_server(tmp_path_factory.mktemp("canswer"), standin.base_url) as url:
        yield url


@pytest.fixture(autouse=True)
def fresh(standin: ChatStandIn) -> Iterator[None]:
    standin.reply, standin.failures, standin.always_fail = cite_first, [], None
    standin.cut_after, standin.chunk_delay = None, 0.0
    yield


def _check_answer(reply: RemoteAnswer, top: int = 2, k: int = 3) -> None:
    assert reply.text.startswith("Answer: ") and reply.text.endswith("[1]")
    assert reply.short_answer and "[1]" not in reply.short_answer
    assert reply.task == "qa" and reply.model == "openai-compatible:stand-in"
    assert len(reply.sources) == top and len(reply.result.hits) == k
    assert all(isinstance(hit, RemoteHit) for hit in reply.sources)
    assert [h.id for h in reply.sources] == reply.result.ids[:top]
    first = reply.citations[0]
    assert first.number == 1 and first.valid and first.hit == reply.sources[0]
    assert (first.id, first.doc_id, first.path) == (reply.sources[0].id, reply.sources[0].doc_id,
                                                    reply.sources[0].path)
    assert first.metadata == reply.sources[0].metadata and first.metadata["lang"] == "en"
    assert reply.cited == [reply.sources[0]]
    assert reply.invalid_citations == []
    assert reply.usage.input_tokens and reply.usage.output_tokens and reply.usage.seconds >= 0
    assert reply.request_id and reply.result.request_id == reply.request_id
    assert reply.result.usage["requests"] >= 1  # the judge's side


def test_answer_sync(server: str, standin: ChatStandIn) -> None:
    with Client(server) as client:
        reply = client.answer(QUESTION, top=2, k=3)
    _check_answer(reply)
    assert reply.sources[0].text.split()[:6] == reply.short_answer.split()
    sent = standin.requests[-1]["messages"][1]["content"]
    assert "[1] " in sent and "[2] " in sent and "[3] " not in sent


def test_answer_async_side_by_side(server: str) -> None:
    async def both() -> list[RemoteAnswer]:
        async with Client(server) as client:
            return list(await asyncio.gather(
                client.aanswer(QUESTION, top=2, k=3),
                client.aanswer(messages=[{"role": "user", "content": "income tax refund"}], k=3, top=2)))

    renew, refund = asyncio.run(both())
    _check_answer(renew)
    _check_answer(refund)
    assert refund.sources[0].doc_id == "taxes" and refund.request_id != renew.request_id


def test_a_citation_naming_no_passage_is_flagged(server: str, standin: ChatStandIn) -> None:
    standin.reply = lambda body: "Renew online [2], or see [9]."
    reply = Client(server).answer(QUESTION, top=2, k=3, task="short")
    assert [(c.number, c.valid) for c in reply.citations] == [(2, True), (9, False)]
    assert reply.citations[0].hit == reply.sources[1] and reply.citations[1].hit is None
    assert reply.citations[1].id is None and reply.invalid_citations == [9]
    assert reply.cited == [reply.sources[1]] and reply.task == "short"


def test_unknown_options_are_refused_before_any_request() -> None:
    client = Client("http://127.0.0.1:9", timeout=2)  # nothing listens: a request would be a ServerError
    with pytest.raises(TypeError, match=r"unknown options \['kk'\]"):
        client.answer(QUESTION, kk=3)
    with pytest.raises(TypeError, match="stream_answer"):
        client.answer(QUESTION, stream=True)
    with pytest.raises(TypeError, match="stream_answer"):
        client.stream_answer(QUESTION, colour="red")  # at the call, not at the first next()
    with pytest.raises(TypeError, match="astream_answer"):
        client.astream_answer(QUESTION, colour="red")
    with pytest.raises(TypeError, match="aanswer"):
        asyncio.run(client.aanswer(QUESTION, generator="x"))
    for call in (lambda: client.answer(QUESTION), lambda: list(client.stream_answer(QUESTION)),
                 lambda: asyncio.run(_drain(client.astream_answer(QUESTION)))):
        with pytest.raises(ServerError, match="cannot reach the server") as caught:
            call()
        assert caught.value.status == 0 and caught.value.type == "connection"


def test_the_server_validates_values_and_names_the_field(server: str) -> None:
    with pytest.raises(ServerError) as caught:
        Client(server).answer(QUESTION, task="poem")
    assert caught.value.status == 422 and caught.value.field == "task"
    with pytest.raises(ServerError) as caught:
        list(Client(server).stream_answer(QUESTION, k=10_000))
    assert caught.value.status == 422 and caught.value.field == "k"


def test_stream_answer_sync(server: str) -> None:
    with Client(server) as client:
        found = list(client.stream_answer(QUESTION, top=2, k=3))
    kinds = [event.kind for event in found]
    assert kinds[0] == "retrieved" and kinds[-1] == "done" and kinds.count("delta") >= 3
    assert set(kinds[1:-1]) == {"delta"}
    retrieved, done = found[0].result, found[-1].answer
    assert isinstance(retrieved, RemoteResult) and done is not None
    assert "".join(e.text for e in found if e.kind == "delta") == done.text
    _check_answer(done)
    assert retrieved.ids == done.result.ids and retrieved.request_id == done.request_id


def test_astream_answer(server: str) -> None:
    async def run() -> list[RemoteAnswerEvent]:
        async with Client(server) as client:
            return [event async for event in client.astream_answer(QUESTION, top=2, k=3)]

    found = asyncio.run(run())
    done = found[-1].answer
    assert found[0].kind == "retrieved" and done is not None
    assert "".join(e.text for e in found if e.kind == "delta") == done.text
    _check_answer(done)


def test_text_with_line_separators_survives_the_stream(server: str, standin: ChatStandIn) -> None:
    """U+2028 is written raw in the JSON (ensure_ascii off): str.splitlines — and so httpx's
    iter_lines — would cut the data line there."""
    standin.reply = lambda body: "Answer: renew\u2028online\u0085now\x0c [1]"
    found = list(Client(server).stream_answer(QUESTION, top=2, k=3))
    done = found[-1].answer
    assert done is not None and done.text == "Answer: renew\u2028online\u0085now\x0c [1]"
    assert "".join(e.text for e in found if e.kind == "delta") == done.text


def test_a_failure_mid_answer_raises_after_the_text_so_far(server: str, standin: ChatStandIn) -> None:
    standin.cut_after = 3  # the model's stream: a role chunk, two words, then it hangs up
    seen: list[RemoteAnswerEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in Client(server).stream_answer(QUESTION, top=2, k=3):
            seen.append(event)
    assert [e.kind for e in seen] == ["retrieved", "delta", "delta"]
    error = caught.value
    assert error.type == "generator_failed" and error.status == 502 and error.request_id
    assert seen[0].result is not None and error.request_id == seen[0].result.request_id
    assert "mid-stream" in str(error) and error.body["error"]["type"] == "generator_failed"


def test_a_failing_answer_model(server: str, standin: ChatStandIn) -> None:
    standin.always_fail = 400  # not retried (a 500 is, for seconds)
    client = Client(server)
    with pytest.raises(ServerError) as caught:
        client.answer(QUESTION)
    assert caught.value.status == 502 and caught.value.type == "generator_failed"
    assert "HTTP 400" in str(caught.value)

    async def streamed() -> list[str]:
        kinds: list[str] = []
        async with Client(server) as aclient:
            with pytest.raises(ServerError) as failed:
                async for event in aclient.astream_answer(QUESTION):
                    kinds.append(event.kind)
        assert failed.value.type == "generator_failed" and "HTTP 400" in str(failed.value)
        return kinds

    assert asyncio.run(streamed()) == ["retrieved"]


def test_a_server_without_an_answer_model_says_so(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    with live_server(settings({"docs": tree})) as url, Client(url) as client:
        for call in (lambda: client.answer(QUESTION), lambda: list(client.stream_answer(QUESTION)),
                     lambda: asyncio.run(client.aanswer(QUESTION)),
                     lambda: asyncio.run(_drain(client.astream_answer(QUESTION)))):
            with pytest.raises(ServerError) as caught:
                call()
            error = caught.value
            assert error.status == 404 and error.type == "no_answer_model"
            assert "without an answer model" in str(error) and "--generator" in str(error)
            assert isinstance(error.__cause__, ServerError) and error.__cause__.type == "not_found"
        assert client.retrieve(QUESTION, k=1).hits  # the server itself is fine


def test_no_such_tree_is_not_mistaken_for_no_answer_model(server: str) -> None:
    for call in (lambda c: c.answer(QUESTION, tree="nope"),
                 lambda c: list(c.stream_answer(QUESTION, tree="nope"))):
        with pytest.raises(ServerError) as caught:
            call(Client(server))
        assert caught.value.status == 404 and caught.value.type == "not_found"
        assert caught.value.field == "tree" and "nope" in str(caught.value)


def _active(client: Any) -> int:
    """Connections of an httpx client's pool that are neither idle nor closed (a response
    still open on them)."""
    pool = client._transport._pool
    return sum(1 for c in pool.connections if not (c.is_closed() or c.is_idle()))


def test_leaving_a_stream_early_closes_the_response(server: str, standin: ChatStandIn) -> None:
    standin.chunk_delay = 0.05
    with Client(server) as client:
        for event in client.stream_answer(QUESTION):
            assert event.kind == "retrieved"
            assert _active(client._http._client()) == 1
            break
        assert _active(client._http._client()) == 0
        events = client.stream_answer(QUESTION)
        assert next(events).kind == "retrieved"
        events.close()  # explicit close, the generator protocol's
        assert _active(client._http._client()) == 0
        assert client.answer(QUESTION).text  # the client still works

    async def early() -> tuple[int, int]:
        async with Client(server) as aclient:
            async with contextlib.aclosing(aclient.astream_answer(QUESTION)) as events:
                async for _ in events:
                    during = _active(aclient._http._async.get())
                    break
            return during, _active(aclient._http._async.get())

    assert asyncio.run(early()) == (1, 0)


async def _drain(events: Any) -> list[RemoteAnswerEvent]:
    return [event async for event in events]


# -- the event-stream reader ----------------------------------------------------------------

RETRIEVED = {"results": [{"id": "a#p0", "doc_id": "a", "score": 0.9, "path": ["A", "Intro"],
                          "text": "Renew online.", "metadata": {}}],
             "usage": {"requests": 1}, "tree": "docs", "seconds": 0.1, "request_id": "r1"}
DONE = {"answer": "Renew\nonline [1]", "short_answer": "Renew", "task": "qa",
        "citations": [{"number": 1, "valid": True, "id": "a#p0", "doc_id": "a", "path": ["A", "Intro"],
                       "metadata": {}}],
        "invalid_citations": [], "sources": RETRIEVED["results"], "retrieval": RETRIEVED,
        "generation": {"model": "m", "input_tokens": 5, "output_tokens": 2, "seconds": 0.1},
        "request_id": "r1"}


def _proxy_stream() -> bytes:
    """What a proxy in front of the server may send: CRLF line ends, keep-alive comments, a
    retry field, an event name it adds, data split over several lines, no space after ':'."""
    done = json.dumps(DONE, indent=1).splitlines()  # one JSON object over many data lines
    text = (": keep-alive\r\n\r\nretry: 3000\r\n"
            f"event: retrieved\r\ndata: {json.dumps(RETRIEVED)}\r\n\r\n"
            ":ping\r\n\r\nevent: heartbeat\r\ndata: {}\r\n\r\n"
            'event: delta\r\ndata:{"text": "Renew\\n"}\r\n\r\n'
            'event: delta\rdata: {"text": "online [1]"}\r\r'
            "event: done\r\n" + "".join(f"data: {line}\r\n" for line in done) + "\r\n")
    return text.encode()


class RawServer:
    """Answers every POST with `body`, written in `pieces`-byte writes (or answers `status`)."""

    def __init__(self, body: bytes, piece: int = 7, content_type: str = "text/event-stream") -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Connection", "close")
                self.end_headers()
                for start in range(0, len(outer.body), piece):
                    self.wfile.write(outer.body[start:start + piece])
                    self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                return None

        self.body = body
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("piece", [1, 2, 7, 4096])
def test_the_reader_takes_what_proxies_send(piece: int) -> None:
    with RawServer(_proxy_stream(), piece) as url:
        found = list(Client(url).stream_answer(QUESTION))

        async def run() -> list[RemoteAnswerEvent]:
            return await _drain(Client(url).astream_answer(QUESTION))

        assert asyncio.run(run()) == found
    assert [e.kind for e in found] == ["retrieved", "delta", "delta", "done"]
    assert found[0].result is not None and found[0].result.ids == ["a#p0"]
    assert [e.text for e in found[1:3]] == ["Renew\n", "online [1]"]
    done = found[-1].answer
    assert done is not None and done.text == "Renew\nonline [1]" and done.cited[0].path == ("A", "Intro")
    assert done.usage.input_tokens == 5 and done.model == "m"


def test_a_stream_cut_before_done_is_an_error() -> None:
    cut = f"event: retrieved\ndata: {json.dumps(RETRIEVED)}\n\nevent: delta\ndata: {{\"text\": \"Re\"}}\n\n"
    unfinished = cut + f"event: done\ndata: {json.dumps(DONE)}\n"  # no blank line: not dispatched
    for body in (cut, unfinished):
        with RawServer(body.encode()) as url:
            seen: list[str] = []
            with pytest.raises(ServerError) as caught:
                for event in Client(url).stream_answer(QUESTION):
                    seen.append(event.kind)
        assert seen == ["retrieved", "delta"] and caught.value.type == "incomplete_stream"


def test_a_success_that_is_not_an_event_stream_is_refused() -> None:
    with (RawServer(b'{"answer": "x"}', content_type="application/json") as url,
          pytest.raises(ServerError, match="expected server-sent events") as caught):
        list(Client(url).stream_answer(QUESTION))
    assert caught.value.type == "bad_event"


def test_bad_event_data_is_named() -> None:
    with (RawServer(b"event: delta\ndata: {not json\n\n") as url,
          pytest.raises(ServerError, match="'delta' event is not a JSON object")):
        list(Client(url).stream_answer(QUESTION))


def test_event_parser_follows_the_spec() -> None:
    parser = EventParser()
    text = ("data: one\ndata:two\ndata\n\n"           # three data lines, one without a value
            "event: x\n\n"                            # no data: not dispatched
            "id: 7\nevent: y\ndata:  two spaces\n\n"  # only the first space is removed
            ": comment\nfoo: bar\ndata: z\r\n\r\n"
            "data: \u2028 inside\r\rdata: last")       # the last event has no blank line
    found: list[Any] = []
    for i in range(len(text)):  # every split point, one character at a time
        found += parser.feed(text[i])
    found += parser.close()
    assert [(e.name, e.data, e.id) for e in found] == [
        ("message", "one\ntwo\n", None), ("y", " two spaces", "7"), ("message", "z", "7"),
        ("message", "\u2028 inside", "7")]
    whole = EventParser()
    assert whole.feed(text) + whole.close() == found
    cr_at_the_end = EventParser()
    assert cr_at_the_end.feed("data: a\r") == [] and cr_at_the_end.feed("\r") == []
    assert [e.data for e in cr_at_the_end.feed("\n")] == ["a"]  # CR, then CR LF: one blank line
