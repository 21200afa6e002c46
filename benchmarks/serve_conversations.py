"""What keeping a conversation costs a request: the in-memory store, the shared file store, Redis.

    python benchmarks/serve_conversations.py [--turns 2000] [--stored 0,10000] [--redis start|URL|none]
        [--http N]

One conversation turn of ``POST /v1/answer`` with a `conversation_id` is one `get` (the turns
the walk sees), one `update` (the user's turn, the notepad) and one more `update` (the agent's
answer): this times that triple, per turn, for `MemoryConversations`, for `FileConversations`
in a temporary folder and for `RedisConversations` (``serve --state redis://``: a WATCH/MULTI
transaction per update, over loopback), with `--stored` other conversations already kept (the
file store's folder then holds that many files, Redis that many keys). Prints microseconds per
turn (median and p99 over `--turns` turns spread over 100 conversations) and the ratio to memory.
`--redis start` (the default) starts a private `redis-server` on a free port (skipped, with a
note, when there is none); a URL uses that Redis (its database is emptied first: give a spare one).

`--http N` then starts the real server (`python -m decisionrag serve`, one worker, judge
`scripted`, a 4-document tree) with each store (`--state-dir`, `--state`), and times N
sequential ``POST /v1/retrieve`` turns of one conversation over one connection: the whole
request with each store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from decisionrag._query import Turn
from decisionrag._serve._conversations import (
    ConversationState,
    ConversationStore,
    FileConversations,
    MemoryConversations,
    open_conversations,
)


async def turn(store: ConversationStore, key: tuple[str, str, str], i: int) -> None:
    asked = Turn("user", f"question {i}: how do I renew my passport after it was stolen?")
    state = await store.aget(key)
    _ = state.history[-50:]

    def record(state: ConversationState) -> None:
        state.history = [*state.history, asked][-50:]
        state.remember("https://example.org/passports")

    def reply(state: ConversationState) -> None:
        if state.history and state.history[-1] == asked:
            state.history.append(Turn("agent", "Report it first, then apply for a new one online."))

    await store.aupdate(key, record)
    await store.aupdate(key, reply)


async def measure(store: ConversationStore, stored: int, turns: int) -> list[float]:
    for n in range(stored):
        await store.aupdate(("bench", "docs", f"other-{n}"), lambda state: state.notepad.append("x"))
    seconds = []
    for i in range(turns):
        start = time.perf_counter()
        await turn(store, ("bench", "docs", f"trip-{i % 100}"), i)
        seconds.append(time.perf_counter() - start)
    await store.aclose()
    return seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def redis_server(how: str) -> Iterator[str | None]:
    """The URL of the Redis to measure: a private `redis-server` (`start`), the one named, or None."""
    if how == "none":
        yield None
        return
    if how != "start":
        yield how
        return
    binary = shutil.which("redis-server")
    if binary is None:
        print("(no redis-server on PATH: the Redis rows are left out; apt-get install redis-server)")
        yield None
        return
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as folder:
        process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
                                    "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


async def flush(url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    await client.flushdb()
    await client.aclose()


def write_tree(path: Path) -> Path:
    from decisionrag._tree import DocumentSpec, PassageSpec, TreeWriter

    docs = {"passports": "Renew your passport online with a photo and the old passport.",
            "lost": "Report a lost or stolen passport before you apply for a new one.",
            "visas": "Apply for a visa at the embassy of the country you visit.",
            "taxes": "The income tax return is due on the last day of January."}
    with TreeWriter(path) as writer:
        for key, text in docs.items():
            writer.add_document(DocumentSpec(key.title(), [PassageSpec(text, key=f"{key}#p0")], key=key))
    return path


def http_turns(tree: Path, turns: int, state: list[str]) -> list[float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "decisionrag", "serve", str(tree), "--judge",
                               "scripted", "--port", str(port), "--log-level", "warning", *state],
                              stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(600):
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            seconds = []
            for i in range(turns):
                body = {"query": f"question {i}: my passport was stolen", "conversation_id": "trip", "k": 2}
                start = time.perf_counter()
                response = client.post("/v1/retrieve", json=body)
                seconds.append(time.perf_counter() - start)
                response.raise_for_status()
            return sorted(seconds)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--stored", default="0,10000", help="comma-separated counts of other conversations")
    parser.add_argument("--redis", default="start", help="start (a private redis-server), a URL, or none")
    parser.add_argument("--http", type=int, default=0, metavar="N", help="also N turns over HTTP")
    args = parser.parse_args()
    with redis_server(args.redis) as url:
        stores = ["memory", "files"] + (["redis"] if url else [])
        print("| store | other conversations | median µs/turn | p99 µs/turn | median / memory |")
        print("|---|---|---|---|---|")
        for stored in (int(n) for n in args.stored.split(",")):
            medians = {}
            for name in stores:
                with tempfile.TemporaryDirectory(prefix="bench-conversations-") as folder:
                    capacity = stored + 1_000
                    if name == "redis":
                        assert url is not None
                        asyncio.run(flush(url))
                    store: ConversationStore = (
                        MemoryConversations(capacity, 3_600.0) if name == "memory" else
                        FileConversations(folder, capacity, 3_600.0) if name == "files" else
                        open_conversations(capacity, 3_600.0, None, url, 5.0))
                    seconds = sorted(asyncio.run(measure(store, stored, args.turns)))
                medians[name] = statistics.median(seconds) * 1e6
                p99 = seconds[int(0.99 * (len(seconds) - 1))] * 1e6
                print(f"| {name} | {stored:,} | {medians[name]:,.1f} | {p99:,.1f} | "
                      f"{medians[name] / medians['memory']:,.0f}× |", flush=True)
        if args.http:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            print("\n| server (1 worker) | turns | p50 ms/request | p90 ms/request |\n|---|---|---|---|")
            with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder:
                tree = write_tree(Path(folder) / "docs.tree")
                runs = [("memory", []), ("--state-dir (files)", ["--state-dir", str(Path(folder) / "state")])]
                if url:
                    asyncio.run(flush(url))
                    runs.append(("--state (Redis)", ["--state", url]))
                for name, state in runs:
                    seconds = http_turns(tree, args.http, state)
                    print(f"| {name} | {args.http} | {statistics.median(seconds) * 1e3:.2f} | "
                          f"{seconds[int(0.9 * (len(seconds) - 1))] * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
