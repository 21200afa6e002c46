"""Serving replicas: two `decisionrag serve` processes over one read-only tree file.

What a deployment with N replicas behind a load balancer relies on: the replicas answer the
same; a rebuilt tree published by atomic replace is picked up by every replica with no failed
request; a replica told to stop (SIGTERM) finishes its requests in flight while the balancer,
seeing it refuse connections, sends the rest elsewhere.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from _processes import free_port
from _serve_helpers import CORPUS_B, start_cli_server, write_tree

pytestmark = pytest.mark.slow
NEW_DOCS = set(CORPUS_B["Garden"])  # the rebuilt tree's documents


class Balancer:
    """A client-side stand-in for a load balancer: round robin over the replicas; a replica
    that refuses the connection or answers 503 is skipped for this request."""

    def __init__(self, bases: list[str]) -> None:
        self.bases = bases
        self.turn = 0
        self.lock = threading.Lock()
        self.failures: list[str] = []
        self.served: dict[str, int] = dict.fromkeys(bases, 0)

    def retrieve(self, query: str) -> dict[str, object] | None:
        with self.lock:
            start = self.turn = (self.turn + 1) % len(self.bases)
        for step in range(len(self.bases)):
            base = self.bases[(start + step) % len(self.bases)]
            try:
                response = httpx.post(f"{base}/v1/retrieve", json={"query": query, "k": 2},
                                      timeout=30)
            except httpx.TransportError:
                continue
            if response.status_code == 503:
                continue
            with self.lock:
                self.served[base] += 1
            if response.status_code != 200:
                self.failures.append(f"{base}: {response.status_code} {response.text[:200]}")
                return None
            return dict(response.json())
        self.failures.append(f"no replica took {query!r}")
        return None


def top_doc(answer: dict[str, object] | None) -> str:
    assert answer is not None
    results = answer["results"]
    assert isinstance(results, list) and results
    return str(results[0]["doc_id"])


def wait_for_a_request_in_flight(base: str, seconds: float = 20.0) -> None:
    """Until `base` is serving a request besides the /metrics request asking (a fixed sleep
    raced the connection on a loaded machine: SIGTERM came before the request was accepted)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = httpx.get(f"{base}/metrics", timeout=5).text
        gauge = next(line for line in text.splitlines()
                     if line.startswith("decisionrag_http_requests_in_flight "))
        if float(gauge.split()[1]) >= 2:
            return
        time.sleep(0.01)
    raise AssertionError(f"no request was in flight at {base} within {seconds} s")


def documents(base: str) -> int:
    return int(httpx.get(f"{base}/v1/trees/docs", timeout=10).json()["counts"]["document"])


def test_replicas_share_a_tree_file_publish_by_replace_and_drain(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    ports = [free_port(), free_port()]
    # replica 0's judge is slower, so that the request drained below is surely in flight
    replicas = [start_cli_server([str(tree), "--judge", f"simulated:latency={latency}",
                                  "--reload-interval", "0.2", "--drain-timeout", "20"], port)
                for latency, port in zip((0.3, 0.05), ports, strict=True)]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    balancer = Balancer(bases)
    try:
        # the same file, the same answers
        answers = [httpx.post(f"{base}/v1/retrieve", json={"query": "renew my passport", "k": 2},
                              timeout=30).json() for base in bases]
        first, second = ([r["id"] for r in a["results"]] for a in answers)
        assert first == second and len(first) == 2
        assert [documents(base) for base in bases] == [4, 4]

        # publish a rebuild by atomic replace while traffic flows
        stop = threading.Event()
        seen: list[str] = []  # which tree each answer came from
        errors: list[Exception] = []

        def traffic() -> None:
            try:
                while not stop.is_set():
                    answer = balancer.retrieve("how to prune roses")
                    if answer is not None:  # every answer comes from one whole tree
                        results = answer["results"]
                        assert isinstance(results, list)
                        docs = {str(r["doc_id"]) for r in results}
                        seen.append("new" if docs <= NEW_DOCS else "old" if not docs & NEW_DOCS
                                    else "mixed")
            except Exception as exc:  # a failure in the thread must fail the test
                errors.append(exc)

        load = threading.Thread(target=traffic)
        load.start()
        time.sleep(0.5)
        os.replace(write_tree(tmp_path / "docs.tree.new", CORPUS_B), tree)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and [documents(b) for b in bases] != [2, 2]:
            time.sleep(0.1)
        deadline = time.monotonic() + 30  # until the traffic has met the new tree
        while time.monotonic() < deadline and "new" not in seen and not errors:
            time.sleep(0.1)
        stop.set()
        load.join(30)
        assert [documents(base) for base in bases] == [2, 2]
        assert balancer.failures == [] and errors == []
        assert "old" in seen and "new" in seen and "mixed" not in seen
        assert all(count > 0 for count in balancer.served.values())
        assert top_doc(balancer.retrieve("how to prune roses")) in NEW_DOCS

        # drain replica 0 with a request in flight: it finishes; the balancer moves on
        slow: list[httpx.Response] = []
        in_flight = threading.Thread(target=lambda: slow.append(httpx.post(
            f"{bases[0]}/v1/retrieve", json={"query": "mow the lawn", "k": 2}, timeout=30)))
        in_flight.start()
        wait_for_a_request_in_flight(bases[0])
        replicas[0].send_signal(signal.SIGTERM)
        after = [balancer.retrieve(f"mow the lawn {i}") for i in range(10)]
        in_flight.join(30)
        assert replicas[0].wait(30) == 0
        assert slow and slow[0].status_code == 200 and slow[0].json()["results"]
        assert balancer.failures == []
        assert all(top_doc(a) in NEW_DOCS for a in after)
        assert httpx.get(f"{bases[1]}/readyz", timeout=5).status_code == 200
    finally:
        for process in replicas:
            if process.poll() is None:
                process.kill()
                process.wait()
