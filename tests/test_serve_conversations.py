"""Conversations kept by `conversation_id`: the stores, and every worker of one server sharing them."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from _chat_standin import ChatStandIn
from _processes import free_port
from _serve_helpers import start_cli_server, write_tree
from decisionrag._query import Turn
from decisionrag._serve._conversations import (
    ConversationState,
    ConversationStore,
    FileConversations,
    MemoryConversations,
)

KEY = ("anonymous", "docs", "trip")
SRC = str(Path(__file__).resolve().parents[1] / "src")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def add(text: str) -> Callable[[ConversationState], None]:
    def change(state: ConversationState) -> None:
        state.history.append(Turn("user", text))

    return change


@pytest.fixture(params=["memory", "files"])
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., ConversationStore]:
    def make(capacity: int, ttl: float, clock: Clock) -> ConversationStore:
        if request.param == "memory":
            return MemoryConversations(capacity, ttl, clock)
        return FileConversations(tmp_path / "conversations", capacity, ttl, clock)

    return make


def texts(state: ConversationState) -> list[str]:
    return [turn.text for turn in state.history]


def test_capacity_drops_the_least_recently_used_and_ttl_forgets_the_idle(
    store_of: Callable[..., ConversationStore],
) -> None:
    clock = Clock()
    store = store_of(3, 100.0, clock)
    for name in "abcd":
        clock.now += 1
        store.update(("k", "docs", name), add(name))
    assert len(store) == 3 and store.get(("k", "docs", "a")).history == []
    clock.now += 1
    store.update(("k", "docs", "b"), add("b2"))  # b is now the most recently used
    clock.now += 1
    store.update(("k", "docs", "e"), add("e"))
    assert len(store) == 3
    assert store.get(("k", "docs", "c")).history == []
    assert texts(store.get(("k", "docs", "b"))) == ["b", "b2"]
    assert store.get(("other-key", "docs", "b")).history == []  # keys never share one
    clock.now += 99.5  # d was touched 101.5 s ago, b and e within 100 s
    assert store.get(("k", "docs", "d")).history == []
    assert texts(store.get(("k", "docs", "e"))) == ["e"]
    clock.now += 10
    assert store.get(("k", "docs", "e")).history == [] and len(store) == 0
    store.update(KEY, add("fresh"))
    assert len(store) == 1 and texts(store.get(KEY)) == ["fresh"]


def test_files_are_named_by_a_digest_never_by_the_id(tmp_path: Path) -> None:
    store = FileConversations(tmp_path, 10, 60.0)
    hostile = ("k", "docs", "../../etc/passwd\x00 ✓")
    store.update(hostile, add("hi"))
    names = [p.name for p in tmp_path.rglob("*.json") if p.parent.name != "locks"]
    assert len(names) == 2 and "index.json" in names
    assert all(name == "index.json" or len(name) == 45 for name in names)
    assert texts(FileConversations(tmp_path, 10, 60.0).get(hostile)) == ["hi"]  # another process's view
    assert (FileConversations(tmp_path / "new", 10, 60.0).folder.stat().st_mode & 0o077) == 0


def _append_turns(folder: str, worker: int, turns: int) -> None:
    store = FileConversations(folder, 1_000, 3_600.0)
    for i in range(turns):
        store.update(KEY, add(f"w{worker}-{i}"))
        store.update(("anonymous", "docs", f"own-{worker}"), add(str(i)))


def test_concurrent_updates_from_processes_lose_no_turn(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    workers = [context.Process(target=_append_turns, args=(str(tmp_path), w, 40)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    store = FileConversations(tmp_path, 1_000, 3_600.0)
    seen = texts(store.get(KEY))
    assert len(seen) == 160 and set(seen) == {f"w{w}-{i}" for w in range(4) for i in range(40)}
    for w in range(4):  # each process's turns in its own order
        assert [t for t in seen if t.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(40)]
        assert texts(store.get(("anonymous", "docs", f"own-{w}"))) == [str(i) for i in range(40)]
    assert len(store) == 5
    assert json.loads((tmp_path / "index.json").read_text())["count"] == 5


CRASH = """
import os, signal, sys
from decisionrag import _files
from decisionrag._query import Turn
from decisionrag._serve import _conversations

def dying_write(path, value):  # the real atomic writer, killed half way through its write
    data = _files.json.dumps(value).encode()
    def write(stream):
        stream.write(data[: len(data) // 2])
        stream.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return _files.atomic_write(path, write)

_conversations.write_json_atomic = dying_write
store = _conversations.FileConversations(sys.argv[1], 10, 3600.0)
store.update(("anonymous", "docs", "trip"), lambda s: s.history.append(Turn("user", "x" * 100_000)))
"""


def test_a_worker_killed_mid_write_leaves_the_old_state(tmp_path: Path) -> None:
    store = FileConversations(tmp_path, 10, 3_600.0)
    store.update(KEY, add("before"))
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path)], capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PYTHONPATH": SRC})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    target = store.path(KEY)
    partial = [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert len(partial) == 1 and partial[0].stat().st_size > 10_000  # it died inside the write
    assert texts(store.get(KEY)) == ["before"]
    store.update(KEY, add("after"))  # the dead writer's lock is gone, and its temporary file
    assert texts(store.get(KEY)) == ["before", "after"]
    assert [p for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_damaged_file_starts_the_conversation_again(tmp_path: Path) -> None:
    store = FileConversations(tmp_path, 10, 3_600.0)
    store.update(KEY, add("before"))
    store.path(KEY).write_text("{not json")
    assert store.get(KEY).history == []
    assert texts(store.update(KEY, add("again"))) == ["again"]


# ---------------------------------------------------------------- the real multi-worker server


def collect(stream: Any, into: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.extend(iter(stream.readline, "")), daemon=True)
    thread.start()
    return thread


def pids_by_request(lines: list[str]) -> dict[str, int]:
    entries = [json.loads(line) for line in list(lines) if line.startswith("{")]
    return {e["request_id"]: e["pid"] for e in entries if e.get("msg") == "request" and "request_id" in e}


def state_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("decisionrag-state-*")}


def ask(port: int, query: str, request_id: str) -> dict[str, Any]:
    response = httpx.post(  # a new connection each time: either worker may take it
        f"http://127.0.0.1:{port}/v1/answer", timeout=30,
        json={"query": query, "conversation_id": "trip", "k": 2, "top": 1},
        headers={"X-Request-ID": request_id, "Connection": "close"})
    assert response.status_code == 200, response.text
    return dict(response.json())


def serve_args(tree: Path, standin: ChatStandIn, *more: str) -> list[str]:
    return [str(tree), "--judge", "scripted", "--workers", "2", "--generator",
            "openai-compatible:stand-in", "--generator-base-url", standin.base_url, *more]


def stop(process: subprocess.Popen[str], reader: threading.Thread) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    reader.join(10)


@pytest.mark.slow
def test_a_conversation_spread_over_two_workers_keeps_its_history(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    port = free_port()
    before = state_folders()
    with ChatStandIn() as standin:
        process = start_cli_server(serve_args(tree, standin), port)
        log: list[str] = []
        reader = collect(process.stderr, log)
        try:
            assert len(state_folders() - before) == 1  # the server's own state folder
            asked: list[str] = []
            answered: list[str] = []
            workers: list[int] = []
            for turn in range(40):
                query = f"question {turn}: how do I renew my passport?"
                body = ask(port, query, f"turn-{turn}")
                prompt = standin.requests[-1]["messages"][-1]["content"]
                for earlier, reply in zip(asked[-2:], answered[-2:], strict=True):  # the prompt shows 6 turns
                    assert f"User: {earlier}\n" in prompt, (turn, workers, prompt)
                    assert f"Agent: {reply.removesuffix(' [1]')}\n" in prompt, (turn, workers, prompt)
                asked.append(query)
                answered.append(body["answer"])
                workers.append(_wait_for_pid(log, f"turn-{turn}"))
                if min(workers.count(pid) for pid in set(workers)) >= 2 and len(set(workers)) == 2:
                    break
        finally:
            stop(process, reader)
    assert len(set(workers)) == 2, f"one worker took every turn: {workers}"
    assert state_folders() - before == set()  # removed at shutdown


@pytest.mark.slow
def test_a_named_state_folder_keeps_conversations_across_a_restart(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    state = tmp_path / "state"
    with ChatStandIn() as standin:
        answers: list[str] = []
        for run, query in enumerate(("How do I renew my passport?", "And if it was stolen?")):
            port = free_port()
            process = start_cli_server(serve_args(tree, standin, "--state-dir", str(state)), port)
            reader = collect(process.stderr, [])
            try:
                answers.append(ask(port, query, f"run-{run}")["answer"])
            finally:
                stop(process, reader)
        prompt = standin.requests[-1]["messages"][-1]["content"]
    assert f"User: How do I renew my passport?\nAgent: {answers[0].removesuffix(' [1]')}\n" in prompt
    assert list((state / "conversations").rglob("*.json"))


def _wait_for_pid(log: list[str], request_id: str) -> int:
    for _ in range(100):
        found = pids_by_request(log).get(request_id)
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no log line for {request_id}")
