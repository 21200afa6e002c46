"""What keeping a conversation costs a request: the in-memory store vs the shared file store.

    python benchmarks/serve_conversations.py [--turns 2000] [--stored 0,10000]

One conversation turn of ``POST /v1/answer`` with a `conversation_id` is one `get` (the turns
the walk sees), one `update` (the user's turn, the notepad) and one more `update` (the agent's
answer): this times that triple, per turn, for `MemoryConversations` and for
`FileConversations` in a temporary folder, with `--stored` other conversations already kept
(the file store's folder then holds that many files). Prints microseconds per turn (median and
p99 over `--turns` turns spread over 100 conversations) and the ratio.

`--http N` then starts the real server (`python -m decisionrag serve`, one worker, judge
`scripted`, a 4-document tree) with and without `--state-dir`, and times N sequential
``POST /v1/retrieve`` turns of one conversation over one connection: the whole request with
each store.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from decisionrag._query import Turn
from decisionrag._serve._conversations import (
    ConversationState,
    ConversationStore,
    FileConversations,
    MemoryConversations,
)


def turn(store: ConversationStore, key: tuple[str, str, str], i: int) -> None:
    asked = Turn("user", f"question {i}: how do I renew my passport after it was stolen?")
    state = store.get(key)
    _ = state.history[-50:]

    def record(state: ConversationState) -> None:
        state.history = [*state.history, asked][-50:]
        state.remember("https://example.org/passports")

    def reply(state: ConversationState) -> None:
        if state.history and state.history[-1] == asked:
            state.history.append(Turn("agent", "Report it first, then apply for a new one online."))

    store.update(key, record)
    store.update(key, reply)


def measure(store: ConversationStore, stored: int, turns: int) -> list[float]:
    for n in range(stored):
        store.update(("bench", "docs", f"other-{n}"), lambda state: state.notepad.append("x"))
    seconds = []
    for i in range(turns):
        start = time.perf_counter()
        turn(store, ("bench", "docs", f"trip-{i % 100}"), i)
        seconds.append(time.perf_counter() - start)
    return seconds


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


def http_turns(tree: Path, turns: int, state_dir: str | None) -> list[float]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    extra = ["--state-dir", state_dir] if state_dir else []
    server = subprocess.Popen([sys.executable, "-m", "decisionrag", "serve", str(tree), "--judge",
                               "scripted", "--port", str(port), "--log-level", "warning", *extra],
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--stored", default="0,10000", help="comma-separated counts of other conversations")
    parser.add_argument("--http", type=int, default=0, metavar="N", help="also N turns over HTTP")
    args = parser.parse_args()
    print("| store | other conversations | median µs/turn | p99 µs/turn |")
    print("|---|---|---|---|")
    for stored in (int(n) for n in args.stored.split(",")):
        medians = {}
        for name in ("memory", "files"):
            with tempfile.TemporaryDirectory(prefix="bench-conversations-") as folder:
                store: ConversationStore = (MemoryConversations(stored + 1_000, 3_600.0)
                                            if name == "memory" else
                                            FileConversations(folder, stored + 1_000, 3_600.0))
                seconds = sorted(measure(store, stored, args.turns))
            medians[name] = statistics.median(seconds) * 1e6
            p99 = seconds[int(0.99 * (len(seconds) - 1))] * 1e6
            print(f"| {name} | {stored:,} | {medians[name]:,.1f} | {p99:,.1f} |", flush=True)
        print(f"| files / memory | {stored:,} | {medians['files'] / medians['memory']:,.0f}× | |")
    if args.http:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        print("\n| server (1 worker) | turns | p50 ms/request | p90 ms/request |\n|---|---|---|---|")
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder:
            tree = write_tree(Path(folder) / "docs.tree")
            for name, state in (("memory", None), ("--state-dir (files)", str(Path(folder) / "state"))):
                seconds = http_turns(tree, args.http, state)
                print(f"| {name} | {args.http} | {statistics.median(seconds) * 1e3:.2f} | "
                      f"{seconds[int(0.9 * (len(seconds) - 1))] * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
