"""Time to a clear error or a correct/degraded result, for every fault of the fault server.

Part 1 (issue 16, and the body faults of issue 23):

For each fault of `decisionrag._judges._faults.FaultServer` (a real HTTP server on 127.0.0.1)
one query walks a small tree (6 pages, 4 page requests of 2 candidates: ``max_questions=2``)
with the judge's default retry policy and a per-query deadline (``--deadline``, default 10 s).
The outcome is ``same`` (the ranking equals the clean server's), ``degraded`` (stages and
unjudged counts), or the error's class and message; the wall time is measured around the
whole query, and ``within`` says whether it finished inside the deadline (+0.5 s slack for
closing connections).

Part 2 (issue 23, `issue23_faults`): the answer model's faults (keep-alive comments
forever, endless text, a hang, a gzip bomb, a line without end, content that is not text),
through `astream_answer` and through a live `decisionrag serve` app's ``/v1/answer`` with the
request's ``timeout``; filters nested 500 deep over HTTP; 2,000 half-open connections against
a cap of 256 (the slowest ``/healthz`` meanwhile); `ask --deadline` on a tree without stored
vectors (a real process); two concurrent `decisionrag add` processes; Ctrl-C in the vectors
of a rebuild. Each row's deadline is the one it was given (``--deadline``, or the row's own);
``within`` compares the wall time with it (+0.5 s).

    .venv/bin/python benchmarks/faults.py [--deadline 10] [--markdown] [--part 1|2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from decisionrag import Navigator, Tree, build_tree, load_judge
from decisionrag._errors import DecisionRAGError
from decisionrag._judges._faults import FAULTS, POISON, FaultServer

TOPICS = ("passports", f"taxes {POISON}", "visas", "pensions", "driving licences", "benefits")
QUESTION = "How do I renew my passport?"


def corpus(folder: Path) -> Path:
    for i, topic in enumerate(TOPICS):
        (folder / f"{i}.md").write_text(
            f"# {topic}\n\n## Renew\n\nHow to renew {topic}.\n\n## Fees\n\nFees for {topic}.\n")
    return build_tree([folder], folder / "faults.tree").path


def run_one(tree: Tree, judge_id: str, deadline: float) -> tuple[str, float, list[str]]:
    return asyncio.run(_run_one(tree, judge_id, deadline))


async def _run_one(tree: Tree, judge_id: str, deadline: float) -> tuple[str, float, list[str]]:
    judge = load_judge(judge_id, max_questions=2)
    start = time.monotonic()
    try:
        result = await Navigator(tree, judge, "flat").aretrieve(QUESTION, k=5, deadline=deadline)
    except DecisionRAGError as exc:
        return f"{type(exc).__name__}: {shorten(str(exc))}", time.monotonic() - start, []
    finally:
        await judge.aclose()
    seconds = time.monotonic() - start
    if result.degraded:
        stages = ", ".join(f"{stage} {n} unjudged" for stage, n in result.degraded.items())
        return f"degraded ({stages})", seconds, result.ids
    return "ok", seconds, result.ids


def shorten(text: str, limit: int = 110) -> str:
    text = text.replace("|", "/")
    for noise in ("jev-compatible:http://127.0.0.1:",):
        while noise in text:
            start = text.index(noise)
            end = text.find(":", start + len(noise))
            text = text[:start] + "judge" + text[end:]
    return text if len(text) <= limit else text[: limit - 1] + "…"


Row = tuple[str, str, str, str]  # what, seconds, within, outcome


def issue23_faults(server: FaultServer, folder: Path, deadline: float) -> list[Row]:
    """The rows of part 2 (see the module docstring)."""
    tree = corpus(folder)
    rows: list[Row] = []
    for fault, stream in (("chat-keepalive", True), ("chat-endless", True), ("chat-hang", True),
                          ("chat-hang", False), ("chat-bomb", False), ("chat-long-line", True),
                          ("chat-not-text", False)):
        outcome, seconds = _timed(lambda f=fault, st=stream: _answer(tree, server, f, st, deadline))
        rows.append(_row(f"answer{' --stream' if stream else ''}: {fault}", seconds, deadline,
                         outcome))
    rows += _served_answers(server, tree, deadline)
    rows.append(_deep_filters(tree))
    rows.append(_half_open(tree))
    rows.append(_unvectored_ask(folder, deadline))
    rows.append(_concurrent_adds(folder))
    rows.append(_interrupted_rebuild(folder))
    return rows


def _row(what: str, seconds: float, deadline: float, outcome: str) -> Row:
    return (what, f"{seconds:.2f}", "yes" if seconds <= deadline + 0.5 else "NO",
            shorten(outcome))


def _timed(work: Callable[[], str]) -> tuple[str, float]:
    start = time.monotonic()
    try:
        outcome = work()
    except DecisionRAGError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    return outcome, time.monotonic() - start


def _answer(tree: Path, server: FaultServer, fault: str, stream: bool, deadline: float) -> str:
    from decisionrag._answer import astream_answer, load_generator

    async def run() -> str:
        generator = load_generator("openai-compatible:faulty",
                                   base_url=server.generator_url(fault))
        navigator = Navigator(Tree.open(tree), load_judge("scripted"), "flat")
        try:
            async for event in astream_answer(navigator, QUESTION, generator=generator,
                                              stream=stream, deadline=deadline):
                if event.answer is not None:
                    return f"answered: {event.answer.text!r}"
        finally:
            await generator.aclose()
        return "no answer"

    return asyncio.run(run())


@contextmanager
def _live(tree: Path, **changes: Any) -> Iterator[str]:
    """The real app under uvicorn (the guarded protocol) in a thread, on a free port."""
    import uvicorn

    from decisionrag._serve import ServeLimits, ServeSettings
    from decisionrag._serve._app import create_app
    from decisionrag._serve._run import guarded

    limits = changes.pop("limits", ServeLimits())
    settings = ServeSettings(trees=(("docs", str(tree)),), judge="scripted", limits=limits,
                             **changes)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(settings), log_level="critical", lifespan="on",
                            **guarded(settings))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def _served_answers(server: FaultServer, tree: Path, deadline: float) -> list[Row]:
    import httpx

    rows = []
    for fault, stream in (("chat-keepalive", True), ("chat-endless", True), ("chat-hang", False)):
        with _live(tree, generator="openai-compatible:faulty",
                   generator_base_url=server.generator_url(fault)) as url:
            start = time.monotonic()
            reply = httpx.post(f"{url}/v1/answer", timeout=deadline + 30,
                               json={"query": QUESTION, "timeout": deadline, "stream": stream})
            seconds = time.monotonic() - start
        if stream:
            last = reply.text.strip().split("\n\n")[-1]
            outcome = f"{reply.status_code}, last event: {last.replace(chr(10), ' ')[:90]}"
        else:
            outcome = f"{reply.status_code} {reply.json()['error']['type']}"
        rows.append(_row(f"POST /v1/answer{' stream' if stream else ''}: {fault}", seconds,
                         deadline, outcome))
    return rows


def _deep_filters(tree: Path) -> Row:
    import httpx

    nested: dict[str, Any] = {"lang": "en"}
    for _ in range(500):
        nested = {"not": nested}
    with _live(tree) as url:
        start = time.monotonic()
        reply = httpx.post(f"{url}/v1/retrieve", timeout=30, headers={"X-Request-ID": "deep"},
                           json={"query": QUESTION, "filters": nested})
        seconds = time.monotonic() - start
    body = reply.json()
    return _row("POST /v1/retrieve, filters nested 500 deep", seconds, 10.0,
                f"{reply.status_code} {body['error']['message']} (request id "
                f"{body['request_id']})")


def _half_open(tree: Path, count: int = 2000, cap: int = 256) -> Row:
    import logging

    import httpx

    logging.getLogger("decisionrag.serve").setLevel(logging.ERROR)  # its summaries: not here
    from decisionrag._serve import ServeLimits

    sockets: list[socket.socket] = []
    slowest = 0.0
    start = time.monotonic()
    with _live(tree, limits=ServeLimits(max_pending_connections=cap)) as url:
        port = int(url.rsplit(":", 1)[1])
        for index in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Le")
            sockets.append(sock)
            if index % 200 == 199:
                probe = time.monotonic()
                httpx.get(f"{url}/healthz", timeout=10, headers={"Connection": "close"})
                slowest = max(slowest, time.monotonic() - probe)
        time.sleep(0.5)
        open_ = 0
        for sock in sockets:
            sock.setblocking(False)
            try:
                open_ += sock.recv(1) != b""
            except BlockingIOError:
                open_ += 1
            except OSError:
                pass
            sock.close()
    seconds = time.monotonic() - start
    return _row(f"{count} half-open connections, cap {cap}", slowest, 1.0,
                f"slowest /healthz {slowest * 1000:.0f} ms; {open_} left open, "
                f"{count - open_} refused (closed by the server); {seconds:.1f} s in all")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}


def _unvectored_ask(folder: Path, deadline: float) -> Row:
    many = folder / "unvectored"
    many.mkdir()
    words = ["renewal", "passport", "office", "fee", "photo", "form", "embassy", "appointment"]
    for i in range(1500):
        text = " ".join(words[(i + j) % len(words)] for j in range(60))
        (many / f"{i:04d}.md").write_text(f"# Topic {i}\n\n{text}\n")
    tree = build_tree([many], folder / "unvectored.tree").path  # no vectors stored
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "decisionrag", "ask", str(tree), QUESTION,
                           "--deadline", f"{deadline:g}"], capture_output=True, text=True,
                          env=_env(), timeout=600)
    seconds = time.monotonic() - start
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return _row(f"ask --deadline {deadline:g}, 1,500 pages without stored vectors (process)",
                seconds, deadline + 2.0, f"exit {done.returncode}: {last}")


def _concurrent_adds(folder: Path) -> Row:
    base, many, one = folder / "add-base", folder / "add-many", folder / "add-one"
    for path in (base, many, one):
        path.mkdir()
    (base / "base.md").write_text("# Base\n\nThe base document.\n")
    for i in range(3000):
        (many / f"m{i:04d}.md").write_text(f"# M{i}\n\nDocument {i} about renewal.\n")
    (one / "visas.md").write_text("# Visas\n\nApply at the embassy.\n")
    tree = build_tree([base], folder / "adds.tree").path
    start = time.monotonic()
    runs = [subprocess.Popen([sys.executable, "-m", "decisionrag", "add", str(tree), str(src),
                              "--quiet"], env=_env(), stderr=subprocess.PIPE, text=True)
            for src in (many, one)]
    codes = [run.wait(600) for run in runs]
    seconds = time.monotonic() - start
    with Tree.open(tree) as opened:
        documents = opened.counts["document"]
    return _row("two `decisionrag add` at once (3,000 + 1 documents)", seconds, 600.0,
                f"exits {codes}; {documents:,} documents of 3,002 — both landed"
                if documents == 3002 else f"exits {codes}; {documents:,} of 3,002: LOST")


def _interrupted_rebuild(folder: Path) -> Row:
    import decisionrag._embed
    from decisionrag._app import build_tree as build_with_vectors
    from decisionrag._tree._vectors import NodeVectors

    class Encoder:
        name, precision, calls, fail = "hash", "float32", 0, False

        def encode(self, texts: Any, **_: Any) -> Any:
            import numpy as np

            if self.fail:
                raise KeyboardInterrupt
            return np.eye(8, dtype=np.float32)[[hash(t) % 8 for t in texts]]

    encoder = Encoder()
    loader = decisionrag._embed.load_vector_encoder
    decisionrag._embed.load_vector_encoder = lambda *a, **k: encoder  # type: ignore[assignment]
    try:
        old, new = folder / "old-docs", folder / "new-docs"
        old.mkdir()
        new.mkdir()
        (old / "a.md").write_text("# A\n\nAlpha.\n")
        for i in range(20):
            (new / f"n{i}.md").write_text(f"# N{i}\n\nNew {i}.\n")
        tree = folder / "rebuilt.tree"
        build_with_vectors([old], tree, vectors=True)
        encoder.fail = True
        start = time.monotonic()
        try:
            build_with_vectors([new], tree, vectors=True)
            outcome = "not interrupted?"
        except KeyboardInterrupt:
            with Tree.open(tree) as opened:
                NodeVectors.open(tree, opened.meta, model="hash")  # raises unless they match
                outcome = (f"Ctrl-C: the old tree ({opened.counts['document']} document) "
                           "with its own vectors; nothing left behind")
        seconds = time.monotonic() - start
    finally:
        decisionrag._embed.load_vector_encoder = loader  # type: ignore[assignment]
    return _row("Ctrl-C in the vectors of a rebuild over a tree", seconds, 10.0, outcome)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--part", choices=("1", "2", "all"), default="all")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, FaultServer() as server:
        if args.part in ("1", "all"):
            _table(("fault", "seconds", "within deadline", "requests seen", "outcome"),
                   _judge_rows(server, Path(folder), args.deadline), args.markdown)
        if args.part in ("2", "all"):
            scratch = Path(folder) / "issue23"
            scratch.mkdir()
            _table(("fault", "seconds", "within deadline", "outcome"),
                   issue23_faults(server, scratch, args.deadline), args.markdown)


def _judge_rows(server: FaultServer, folder: Path, deadline: float) -> list[tuple[str, ...]]:
    tree = Tree.open(corpus(folder))
    clean = run_one(tree, server.judge_id("ok"), deadline)[2]
    rows = []
    for fault in FAULTS:
        outcome, seconds, ids = run_one(tree, server.judge_id(fault), deadline)
        if outcome == "ok":
            outcome = "same ranking as the clean server" if ids == clean else "DIFFERENT ranking"
        within = "yes" if seconds <= deadline + 0.5 else "NO"
        rows.append((fault, f"{seconds:.2f}", within, str(server.counts[fault]), outcome))
    tree.close()
    return rows


if __name__ == "__main__":
    main()
