"""Retries, deadlines and error translation against a misbehaving local server.

The server (a real ThreadingHTTPServer on 127.0.0.1) answers the System One protocol, each
URL prefix with its own misbehaviour: 429 with Retry-After, 500 then success, a hang,
malformed JSON, 401, 422. The judge must retry what may pass, stop at its limits, and fail
with a clear error; nothing may become a probability.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from decisionrag._errors import JudgeProtocolError, JudgeRequestError, JudgeUnavailable
from decisionrag._judges import BinaryRequest, Judge, load_judge
from decisionrag._judges._http import RetryPolicy, parse_retry_after

REQUEST = BinaryRequest("a context", ("first?", "second?"))


def good_answer(body: dict[str, Any]) -> dict[str, Any]:
    answers = {qid: {"type": "noul", "noul": 0.25} for qid in body["questions"]}
    return {"model": "faulty", "answers": answers, "usage": {"input_tokens": 7, "output_tokens": 2}}


class Handler(BaseHTTPRequestHandler):
    counts: Counter[str]
    lock = threading.Lock()
    active = 0
    peak = 0

    def log_message(self, *args: Any) -> None:
        return None

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        scenario = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.counts[scenario] += 1
        n = self.counts[scenario]
        ok = json.dumps(good_answer(body)).encode()
        if scenario == "ok":
            self._reply(200, ok)
        elif scenario == "busy-once":
            if n == 1:
                self._reply(429, b'{"detail": "slow down"}', {"Retry-After": "1"})
            else:
                self._reply(200, ok)
        elif scenario == "busy-date":
            if n == 1:
                when = formatdate(time.time() + 1, usegmt=True)
                self._reply(503, b'{"detail": "busy"}', {"Retry-After": when})
            else:
                self._reply(200, ok)
        elif scenario == "busy-always":
            self._reply(429, b'{"detail": {"message": "rate limited"}}', {"Retry-After": "0"})
        elif scenario == "busy-long":
            self._reply(503, b'{"detail": "come back later"}', {"Retry-After": "30"})
        elif scenario == "error-once":
            self._reply(500, b"Internal Server Error") if n == 1 else self._reply(200, ok)
        elif scenario == "slow":
            self._slow(ok)
        elif scenario == "hang":
            time.sleep(3)
            self._reply(200, ok)
        elif scenario == "malformed":
            self._reply(200, b'{"answers": {"q0": {"type": "noul", "noul": 0.5}')
        elif scenario == "unauthorized":
            self._reply(401, b'{"detail": {"error_type": "authentication_error", '
                             b'"message": "Cannot authenticate with the server."}}')
        elif scenario == "invalid":
            self._reply(422, json.dumps({"detail": [{"loc": ["body", "questions", "q0"],
                                                     "msg": "Field required", "type": "missing"}]
                                         }).encode())


    def _slow(self, ok: bytes) -> None:
        cls = Handler  # the shared counters live on the base class
        with cls.lock:
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
        time.sleep(0.3)
        with cls.lock:
            cls.active -= 1
        self._reply(200, ok)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Counter[str]]]:
    counts: Counter[str] = Counter()
    handler = type("Bound", (Handler,), {"counts": counts})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", counts
    httpd.shutdown()
    httpd.server_close()


def judge_for(url: str, scenario: str, **options: Any) -> Judge:
    settings = {"max_attempts": 3, "backoff_initial": 0.05, "timeout": 5, **options}
    return load_judge(f"jev-compatible:{url}/{scenario}", **settings)


async def ask(judge: Judge) -> list[float]:
    try:
        return (await judge.binary(REQUEST)).probabilities
    finally:
        await judge.aclose()


async def test_the_server_answers_when_well(server: tuple[str, Counter[str]]) -> None:
    url, _ = server
    assert await ask(judge_for(url, "ok")) == [0.25, 0.25]


async def test_429_waits_for_retry_after_then_succeeds(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    start = time.monotonic()
    assert await ask(judge_for(url, "busy-once")) == [0.25, 0.25]
    assert counts["busy-once"] == 2
    assert time.monotonic() - start >= 0.9  # the server asked for one second


async def test_retry_after_as_an_http_date(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    assert await ask(judge_for(url, "busy-date")) == [0.25, 0.25]
    assert counts["busy-date"] == 2


async def test_500_then_success(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    assert await ask(judge_for(url, "error-once")) == [0.25, 0.25]
    assert counts["error-once"] == 2


async def test_throttled_for_good_gives_up_after_max_attempts(
    server: tuple[str, Counter[str]],
) -> None:
    url, counts = server
    with pytest.raises(JudgeUnavailable, match=r"after 3 attempt.*429.*rate limited"):
        await ask(judge_for(url, "busy-always"))
    assert counts["busy-always"] == 3


async def test_retry_after_beyond_the_deadline_fails_fast(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    start = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="come back later"):
        await ask(judge_for(url, "busy-long", deadline=2))
    assert time.monotonic() - start < 1.5  # did not sleep 30 s (nor the 2 s deadline)
    assert counts["busy-long"] == 1


async def test_a_hanging_server_times_out(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    start = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="no response within"):
        await ask(judge_for(url, "hang", timeout=0.3, max_attempts=2))
    assert time.monotonic() - start < 2.5
    assert counts["hang"] == 2


async def test_malformed_json_is_a_protocol_error_without_retry(
    server: tuple[str, Counter[str]],
) -> None:
    url, counts = server
    with pytest.raises(JudgeProtocolError, match="not JSON"):
        await ask(judge_for(url, "malformed"))
    assert counts["malformed"] == 1


async def test_401_is_final_and_carries_the_message(server: tuple[str, Counter[str]]) -> None:
    url, counts = server
    with pytest.raises(JudgeRequestError, match="Cannot authenticate") as caught:
        await ask(judge_for(url, "unauthorized"))
    assert caught.value.status == 401
    assert counts["unauthorized"] == 1


async def test_422_names_the_field(server: tuple[str, Counter[str]]) -> None:
    url, _ = server
    with pytest.raises(JudgeRequestError, match=r"questions\.q0: Field required") as caught:
        await ask(judge_for(url, "invalid"))
    assert caught.value.status == 422


async def test_connection_refused_is_unavailable() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nobody listens there
    with pytest.raises(JudgeUnavailable, match="connection failed"):
        await ask(load_judge(f"jev-compatible:http://127.0.0.1:{port}",
                             max_attempts=2, backoff_initial=0.01))


async def test_concurrency_is_bounded(server: tuple[str, Counter[str]]) -> None:
    import asyncio

    url, counts = server
    judge = judge_for(url, "slow", concurrency=2)
    start = time.monotonic()
    results = await asyncio.gather(*(judge.binary(REQUEST) for _ in range(6)))
    elapsed = time.monotonic() - start
    await judge.aclose()
    assert all(r.probabilities == [0.25, 0.25] for r in results)
    assert counts["slow"] == 6
    assert Handler.peak == 2  # never more than two in flight
    assert elapsed >= 0.85  # three rounds of 0.3 s


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    in_two = parse_retry_after({"Retry-After": formatdate(time.time() + 2, usegmt=True)})
    assert in_two is not None and 0.5 < in_two <= 2.0


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(backoff_initial=0.5, backoff_max=4.0, jitter=0.0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
