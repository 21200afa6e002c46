"""`decisionrag serve` as a process: graceful shutdown, --workers, JSON logs, refusals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from _processes import free_port
from _serve_helpers import start_cli_server, write_tree
from conftest import require_module

require_module("uvicorn")


def test_sigterm_drains_requests_in_flight(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "simulated:latency=0.4", "--drain-timeout", "20"], port)
    answers: list[httpx.Response] = []

    def ask(n: int) -> None:
        answers.append(httpx.post(f"http://127.0.0.1:{port}/v1/retrieve", timeout=30,
                                  json={"query": f"renew passport {n}"},
                                  headers={"X-Request-ID": f"drain-{n}"}))

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # all three are in their walks (about 4 × 0.4 s each)
    process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(30)
    code = process.wait(30)
    log = process.stderr.read() if process.stderr else ""
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert all(a.json()["results"] for a in answers)
    assert code == 0, log
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    served = {entry.get("request_id") for entry in lines if entry.get("msg") == "request"}
    assert {"drain-0", "drain-1", "drain-2"} <= served
    entry = next(e for e in lines if e.get("request_id") == "drain-0")
    assert entry["status"] == 200 and entry["route"] == "/v1/retrieve" and entry["ms"] > 400
    assert "no API keys configured" in log


@pytest.mark.slow
def test_two_workers_share_the_port_and_the_metrics(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    port = free_port()
    process = start_cli_server([str(tree), "--judge", "scripted", "--workers", "2"], port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(20):
                response = client.post("/v1/retrieve", json={"query": "renew passport"},
                                       headers={"Connection": "close"})
                assert response.status_code == 200
            text = client.get("/metrics").text
        line = next(line for line in text.splitlines()
                    if line.startswith('decisionrag_http_requests_total{method="POST",route="/v1/retrieve"'))
        assert float(line.rsplit(" ", 1)[1]) == 20.0  # summed over both workers
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    children = [json.loads(line) for line in (process.stderr.read() if process.stderr else "").splitlines()
                if line.startswith("{")]
    pids = {entry["msg"] for entry in children if "Started server process" in entry["msg"]}
    assert len(pids) == 2


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "decisionrag", *args], capture_output=True, text=True,
                          timeout=60)


def test_no_keys_means_loopback_only(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    refused = _run("serve", str(tree), "--host", "0.0.0.0", "--judge", "scripted")
    assert refused.returncode == 2
    assert "refusing to listen on 0.0.0.0 without API keys" in refused.stderr
    missing = _run("serve", str(tmp_path / "nope.tree"))
    assert missing.returncode == 2 and "no such tree file" in missing.stderr
    bad_limit = _run("serve", str(tree), "--limit", "max_kk=3")
    assert bad_limit.returncode == 2 and "unknown limit 'max_kk'" in bad_limit.stderr


def test_a_judge_without_its_key_fails_before_the_banner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    for workers in ("1", "2"):
        refused = _run("serve", str(tree), "--judge", "typesafe:jev-1.13", "--workers", workers)
        assert refused.returncode == 2, refused.stderr
        assert "TYPESAFE_API_KEY" in refused.stderr
        assert "decisionrag serve: trees" not in refused.stderr  # no "serving on ..." first


def test_keys_commands(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.json"
    added = _run("keys", "add", str(key_file), "--name", "app", "--tree", "docs")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    assert key.startswith("drag_") and key not in key_file.read_text()
    assert _run("keys", "list", str(key_file)).stdout == "app\tdocs\n"
    hashed = subprocess.run([sys.executable, "-m", "decisionrag", "keys", "hash"], input=key + "\n",
                            capture_output=True, text=True, timeout=60)
    assert hashed.stdout.strip() == json.loads(key_file.read_text())["keys"][0]["sha256"]
    assert _run("keys", "add", str(key_file), "--name", "app").returncode == 2
    assert _run("keys", "remove", str(key_file), "app").returncode == 0
    assert json.loads(key_file.read_text()) == {"keys": []}
