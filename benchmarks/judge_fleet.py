"""A judge fleet of three local `jevcompat mock` servers: spread, affinity and failover.

    python benchmarks/judge_fleet.py [--contexts 300] [--batches 4]

Sends `--contexts` binary requests of distinct contexts, each split into `--batches` question
batches over the same state (`max_questions=3`), ten contexts at a time, through one
``jev-compatible:URL,URL,URL`` judge; then the same with the second server killed when half
the contexts are done. Reports requests per server (failed attempts on the killed server
included), failed contexts and wall time. (That one context's batches share a server is
checked by tests/test_judges_fleet.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from decisionrag._judges import BinaryRequest, load_judge

JEVCOMPAT = shutil.which("jevcompat") or str(Path(sys.executable).with_name("jevcompat"))


def start_mock() -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([JEVCOMPAT, "mock", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return f"http://127.0.0.1:{port}", process
        except OSError:
            time.sleep(0.03)
    raise RuntimeError("jevcompat mock did not start")


async def run(contexts: int, batches: int, kill_at: int | None) -> dict[str, object]:
    servers = [start_mock() for _ in range(3)]
    urls = [url for url, _ in servers]
    judge = load_judge("jev-compatible:" + ",".join(urls), max_questions=3, cooldown=30)
    transport = judge._transport  # type: ignore[attr-defined]
    failed = 0
    start = time.perf_counter()
    try:
        for first in range(0, contexts, 10):
            if kill_at is not None and first == kill_at:
                servers[1][1].kill()
            requests = [BinaryRequest(f"Context {i}: question about topic {i}\n[1] a\n[2] b",
                                      tuple(f"Candidate {c}?" for c in range(3 * batches)))
                        for i in range(first, min(first + 10, contexts))]
            results = await asyncio.gather(*(judge.binary(r) for r in requests),
                                           return_exceptions=True)
            failed += sum(isinstance(r, Exception) for r in results)
        await judge.aclose()
    finally:
        for _, process in servers:
            process.kill()
    stats = transport.stats()
    return {"sent": [int(stats[u]["sent"]) for u in urls], "failed": failed,
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", type=int, default=300)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
    print(f"{args.contexts} contexts x {args.batches} batches over one state, 10 at a time, "
          "3 jevcompat mock servers")
    print("| run | requests per server | share min–max | failed contexts | wall s |")
    print("|---|---|---|---:|---:|")
    for name, kill_at in (("all healthy", None), ("server 2 killed at half-way", args.contexts // 2)):
        out = asyncio.run(run(args.contexts, args.batches, kill_at))
        sent = out["sent"]
        assert isinstance(sent, list)
        total = sum(sent)
        print(f"| {name} | {' / '.join(map(str, sent))} | {min(sent) / total:.1%}–"
              f"{max(sent) / total:.1%} | {out['failed']} | {out['seconds']:.1f} |")


if __name__ == "__main__":
    main()
