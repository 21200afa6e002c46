"""Load on `decisionrag serve`: N concurrent clients × M queries, against a simulated judge.

    python benchmarks/serve_load.py [--clients 50] [--queries 20] [--workers 1]
        [--judge simulated:latency=0.2] [--data ../shared/data/conditionalqa-dev]
        [--servers 3 --state start|redis://HOST:PORT/DB] [--conversations]

Builds the ConditionalQA dev tree once (``out/bench/cqa.tree``), starts the real server
(`python -m decisionrag serve`, uvicorn) on 127.0.0.1 at a free port, then:

1. one client asks `--queries` questions one after another: the single-client p50;
2. `--clients` clients (each its own connection pool) ask `--queries` questions each, all at
   once: errors, p50 / p99 per request, throughput (requests per second of wall time);
3. the resident memory of every server process (the supervisor and each worker).

Pass criteria (printed): 0 errors and loaded p50 <= 1.2 × single-client p50.

`--servers N` starts N servers on N ports (replicas, as behind a balancer); client `c` sends its
`i`-th question to server ``(c + i) % N``. `--state` gives them one Redis (``start``: a private
`redis-server` on a free port). `--conversations` makes each client's questions one
conversation (``conversation_id``), so its turns land on every server in turn; at the end each
conversation is read back (``GET /v1/conversations/{id}``) and the turns kept are counted
(all of them, or the answer is a failure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "conditionalqa-dev"
OUT = Path(__file__).resolve().parents[1] / "out" / "bench"


def ensure_tree(folder: Path, out: Path) -> Path:
    from decisionrag import build_tree

    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        build_tree([folder / "corpus.jsonl"], out, format="jsonl")
    return out


def load_questions(folder: Path) -> list[dict[str, str]]:
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        items = [json.loads(line) for line in lines if line.strip()]
    return [{"query": item["text"], "context": item.get("context", "")} for item in items]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    tree: Path, judge: str, workers: int, port: int, extra: list[str]
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "decisionrag", "serve", f"cqa={tree}", "--judge", judge,
               "--port", str(port), "--workers", str(workers), "--log-level", "warning", *extra]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"serve exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit("serve did not become ready")


def server_processes(pid: int) -> list[int]:
    """`pid` and its descendants (uvicorn's workers are children of the supervisor)."""
    found = [pid]
    for current in found:
        for task in Path(f"/proc/{current}/task").glob("*"):
            children = (task / "children").read_text().split() if (task / "children").exists() else []
            found.extend(int(child) for child in children if int(child) not in found)
    return found


def role(pid: int, supervisor: int) -> str:
    """What a server process is: the supervisor, a worker, or multiprocessing's own helper
    (the resource tracker serves the supervisor and holds no tree)."""
    if pid == supervisor:
        return "supervisor"
    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return "helper" if "resource_tracker" in command else "worker"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def redis_server(how: str | None) -> Iterator[str | None]:
    """The Redis the servers share: a private `redis-server` (`start`), the URL given, or none."""
    if how is None or how.startswith(("redis://", "rediss://")):
        yield how
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--state start: no redis-server on PATH (apt-get install redis-server)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as folder:
        process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
                                    "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


async def one_client(urls: list[str], questions: list[dict[str, str]], latencies: list[float],
                     errors: list[str], number: int = 0, conversation: str | None = None) -> None:
    # idle connections dropped after 1 s: a client taking turns over several servers leaves each
    # idle for seconds, and reusing one just as uvicorn closes it (its keep-alive is 5 s) would
    # count as an error of the server
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(keepalive_expiry=1.0)) as client:
        for i, body in enumerate(questions):
            url = urls[(number + i) % len(urls)]
            if conversation is not None:
                body = {**body, "conversation_id": conversation}
            start = time.perf_counter()
            try:
                response = await client.post(f"{url}/v1/retrieve", json={**body, "k": 10})
            except httpx.HTTPError as exc:
                errors.append(type(exc).__name__)
                continue
            if response.status_code != 200 or not response.json().get("results"):
                kind = response.json().get("error", {}).get("type", "") if response.status_code != 200 else ""
                errors.append(f"{response.status_code} {kind}".strip())
                continue
            latencies.append(time.perf_counter() - start)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def load(urls: list[str], clients: int, questions: list[dict[str, str]], per_client: int,
               conversations: str | None = None) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(
        one_client(urls, [questions[(c * per_client + i) % len(questions)] for i in range(per_client)],
                   latencies, errors, c, f"{conversations}-{c}" if conversations else None)
        for c in range(clients)))
    wall = time.perf_counter() - start
    return {"requests": clients * per_client, "errors": len(errors), "wall_s": wall,
            "error_kinds": {kind: errors.count(kind) for kind in sorted(set(errors))},
            "p50": statistics.median(latencies) if latencies else float("nan"),
            "p99": percentile(latencies, 0.99), "throughput": len(latencies) / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--queries", type=int, default=20, help="queries per client")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--judge", default="simulated:latency=0.2")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--serve-arg", action="append", default=[], help="extra `serve` argument")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--servers", type=int, default=1, help="servers (replicas) on as many ports")
    parser.add_argument("--state", help="Redis the servers share: start (a private one) or a URL")
    parser.add_argument("--conversations", action="store_true",
                        help="each client's questions are one conversation, spread over the servers")
    args = parser.parse_args()

    tree = ensure_tree(args.data, OUT / "cqa.tree")
    questions = load_questions(args.data)
    with redis_server(args.state) as state:
        extra = [*args.serve_arg, *(["--state", state] if state else [])]
        ports = [free_port() for _ in range(args.servers)]
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for port in ports:
                processes.append(start_server(tree, args.judge, args.workers, port, extra))
            single = asyncio.run(load(urls, 1, questions, args.queries))
            loaded = asyncio.run(load(urls, args.clients, questions, args.queries,
                                      "client" if args.conversations else None))
            kept = asyncio.run(turns_kept(urls, args.clients, args.queries)) if args.conversations else None
            memory = {pid: rss_mb(pid) for process in processes for pid in server_processes(process.pid)}
            roles = {pid: role(pid, process.pid) for process in processes
                     for pid in server_processes(process.pid)}
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(60)
    workers = [mb for pid, mb in memory.items() if roles[pid] == "worker"] or list(memory.values())
    ratio = loaded["p50"] / single["p50"]
    figures = {"workers": args.workers, "servers": args.servers, "state": "redis" if state else "local",
               "conversations": args.conversations, "turns_kept": kept,
               "judge": args.judge, "clients": args.clients,
               "queries_per_client": args.queries, "single": single, "loaded": loaded,
               "p50_ratio": ratio,
               "rss_mb": {f"{roles[pid]} {pid}": round(mb, 1) for pid, mb in memory.items()}}
    print(f"decisionrag serve × {args.servers} --workers {args.workers}{' --state redis' if state else ''}, "
          f"judge {args.judge}, tree {tree.name}{', conversations' if args.conversations else ''} "
          f"({os.cpu_count()} CPUs)")
    print(f"{'run':<22}{'requests':>9}{'errors':>8}{'p50 s':>8}{'p99 s':>8}{'req/s':>8}{'wall s':>8}")
    for name, row in ((f"1 client × {args.queries}", single),
                      (f"{args.clients} clients × {args.queries}", loaded)):
        print(f"{name:<22}{row['requests']:>9}{row['errors']:>8}{row['p50']:>8.3f}{row['p99']:>8.3f}"
              f"{row['throughput']:>8.1f}{row['wall_s']:>8.1f}")
    errors = loaded["errors"] + single["errors"]
    print(f"loaded p50 / single p50 = {ratio:.2f} (target <= 1.2); errors {errors} (target 0)"
          + (f": {loaded['error_kinds']}" if loaded["errors"] else ""))
    if kept is not None:
        print(f"conversation turns kept: {kept[0]} of {kept[1]} (target: all)")
    print("RSS per process (MB): " + ", ".join(
        f"{roles[pid] if len(memory) > 1 else 'worker'} {mb:.0f}"
        for pid, mb in memory.items()) + f"; per worker {statistics.mean(workers):.0f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    ok = loaded["errors"] == 0 and single["errors"] == 0 and ratio <= 1.2
    return 0 if ok and (kept is None or kept[0] == kept[1]) else 1


async def turns_kept(urls: list[str], clients: int, per_client: int) -> tuple[int, int]:
    """(user turns stored, user turns sent) over every client's conversation, read back from
    the servers in turn (the last 50 turns are kept: max_messages)."""
    found = 0
    async with httpx.AsyncClient(timeout=60) as client:
        for c in range(clients):
            response = await client.get(f"{urls[c % len(urls)]}/v1/conversations/client-{c}")
            if response.status_code == 200:
                found += sum(1 for m in response.json()["messages"] if m["role"] == "user")
    return found, clients * min(per_client, 50)


if __name__ == "__main__":
    sys.exit(main())
