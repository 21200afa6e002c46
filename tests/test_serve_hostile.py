"""The server under hostile clients and hard stops (issue 23), each on a real `decisionrag serve`
process on 127.0.0.1: half-sent requests by the thousand (a bounded load test), bodies that
never arrive, filters nested hundreds deep over HTTP and MCP, an unexpected exception, a
request cut by the end of the SIGTERM drain, a master killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _processes import free_port
from _serve_helpers import start_cli_server, write_tree
from conftest import require_module
from decisionrag._judges._faults import FaultServer

require_module("uvicorn")

HALF_OPEN = 1500  # connections opened by the load test (the cap below is 64)
CAP = 64


def _stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.stderr.read() if process.stderr else ""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "docs.tree")


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False  # still open, nothing to read
    except OSError:
        return True  # reset


def _healthz_seconds(port: int) -> float:
    start = time.monotonic()
    response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5,
                         headers={"Connection": "close"})
    assert response.status_code == 200
    return time.monotonic() - start


def test_half_open_connections_beyond_the_cap_are_refused_and_healthz_answers(tree: Path) -> None:
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted", "--limit",
                                f"max_pending_connections={CAP}", "--limit", "header_timeout=4"],
                               port)
    sockets: list[socket.socket] = []
    try:
        baseline = _open_fds(process.pid)
        slowest = 0.0
        for index in range(HALF_OPEN):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Le")  # never ends
            sockets.append(sock)
            if index % 250 == 249:
                slowest = max(slowest, _healthz_seconds(port))
        time.sleep(0.5)
        slowest = max(slowest, *(_healthz_seconds(port) for _ in range(5)))
        still_open = sum(not _closed_by_server(sock) for sock in sockets)
        server_fds = _open_fds(process.pid) - baseline
        assert slowest < 1.0, slowest  # /healthz kept answering through it all
        assert still_open <= CAP, still_open  # the rest were refused (closed by the server)
        assert server_fds <= CAP + 16, server_fds
        time.sleep(4 + 1.5)  # header_timeout: the ones left are closed too
        assert sum(not _closed_by_server(sock) for sock in sockets) == 0
        assert _healthz_seconds(port) < 1.0
    finally:
        for sock in sockets:
            sock.close()
        log = _stop(process)
    lines = log.splitlines()
    assert len(lines) < 60, f"{len(lines)} log lines for {HALF_OPEN} half-open connections"
    summaries = [json.loads(line) for line in lines if '"connections closed"' in line]
    assert summaries and sum(e["over_cap"] for e in summaries) >= HALF_OPEN - CAP


def test_a_body_that_never_arrives_is_a_json_408(tree: Path) -> None:
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted", "--limit", "body_timeout=1.5"],
                               port)
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"X-Request-ID: slow-body\r\nContent-Length: 1000\r\n\r\n{\"query\": ")
        start = time.monotonic()
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            piece = sock.recv(4096)
            if not piece:
                break
            reply += piece
        assert time.monotonic() - start < 1.5 + 2
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), head
        error = json.loads(body)
        assert error["error"]["type"] == "request_timeout" and error["request_id"] == "slow-body"
        sock.close()
    finally:
        _stop(process)


def _nested_filter(depth: int) -> dict[str, object]:
    spec: dict[str, object] = {"lang": "en"}
    for _ in range(depth):
        spec = {"not": spec}
    return spec


def test_deep_filters_are_a_4xx_with_a_request_id(tree: Path) -> None:
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted"], port)
    try:
        for depth in (40, 500, 5_000, 60_000):
            body = {"query": "renew passport", "filters": _nested_filter(depth)}
            start = time.monotonic()
            response = httpx.post(f"http://127.0.0.1:{port}/v1/retrieve", timeout=30,
                                  content=json.dumps(body).encode() if depth < 2000 else
                                  ('{"query": "renew", "filters": ' + '{"not": ' * depth + '{}'
                                   + "}" * depth + "}").encode(),
                                  headers={"Content-Type": "application/json",
                                           "X-Request-ID": f"deep-{depth}"})
            assert time.monotonic() - start < 3
            assert 400 <= response.status_code < 500, (depth, response.status_code, response.text)
            error = response.json()
            assert error["request_id"] == f"deep-{depth}", error
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        log = _stop(process)
    assert "Traceback" not in log and "RecursionError" not in log


async def test_deep_filters_over_mcp_are_a_tool_error(tree: Path) -> None:
    mcp_client = require_module("mcp.client")
    from mcp.client.stdio import StdioServerParameters

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {"PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "decisionrag", "mcp", f"docs={tree}", "--judge", "scripted"])
    async with mcp_client.Client(params) as client:
        for arguments, reason in (
                ({"query": "renew", "filters": _nested_filter(100)}, "nested"),
                ({"query": "renew", "filters": {"year": {"gte": [1]}}}, "number or a string"),
                ({"query": "renew", "k": 0}, "k"),
                ({"query": "\u200b\u200d"}, "empty")):
            start = time.monotonic()
            result = await client.call_tool("retrieve", arguments)
            assert time.monotonic() - start < 5
            assert getattr(result, "is_error", getattr(result, "isError", False)), arguments
            text = result.content[0].text  # type: ignore[union-attr]
            assert reason in text and "Traceback" not in text, text  # the reason, not a bare error


def test_a_request_cut_by_the_end_of_the_drain_gets_the_json_error(
    tree: Path, faults: FaultServer
) -> None:
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted", "--drain-timeout", "1",
                                "--generator", "openai-compatible:faulty", "--generator-base-url",
                                faults.generator_url("chat-hang")], port)
    try:
        import threading

        replies: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: replies.append(httpx.post(
            f"http://127.0.0.1:{port}/v1/answer", timeout=30, headers={"X-Request-ID": "cut"},
            json={"query": "renew passport", "timeout": 60})))
        thread.start()
        time.sleep(1.0)  # it is waiting for the model now
        process.send_signal(signal.SIGTERM)
        thread.join(30)
    finally:
        log = _stop(process)
    assert replies, log
    reply = replies[0]
    assert reply.status_code == 503 and reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["type"] == "shutting_down" and reply.json()["request_id"] == "cut"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_end_with_a_killed_master_and_leave_no_folders(tree: Path) -> None:
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted", "--workers", "2"], port)
    master = process.pid
    prefix = ("decisionrag-state-", "decisionrag-metrics-")
    mine = [p for p in Path(tempfile.gettempdir()).iterdir()
            if p.name.startswith(prefix) and f"-{master}-" in p.name]
    assert len(mine) == 2, mine  # its state and metrics folders, named after it
    workers = [pid for pid in _children(master)
               if "decisionrag" in Path(f"/proc/{pid}/cmdline").read_text()
               or "multiprocessing" in Path(f"/proc/{pid}/cmdline").read_text()]
    assert len(workers) >= 2, workers
    os.kill(master, signal.SIGKILL)
    process.wait(10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    try:
        assert not any(_alive(pid) for pid in workers), "workers outlived their master"
        assert not any(folder.exists() for folder in mine), mine
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_unexpected_error_is_a_json_500_with_the_request_id(tree: Path) -> None:
    from fastapi import APIRouter

    from _serve_helpers import settings
    from decisionrag._serve._app import create_app

    router = APIRouter()

    @router.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    import threading

    import uvicorn

    from _processes import free_socket

    app = create_app(settings({"docs": tree}), routers=[router])
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        reply = httpx.get(f"http://127.0.0.1:{sock.getsockname()[1]}/boom", timeout=10,
                          headers={"X-Request-ID": "bug-1"})
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert reply.status_code == 500 and reply.json()["error"]["type"] == "internal_error"
    assert reply.json()["request_id"] == "bug-1" and reply.headers["x-request-id"] == "bug-1"
