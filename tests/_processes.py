"""Real servers started for tests: a free loopback port, waiting until one answers, stopping it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def free_port() -> int:
    with free_socket() as sock:
        return int(sock.getsockname()[1])


def http_ok(url: str) -> Callable[[], bool]:
    """A probe: does GET `url` answer 200?"""

    def probe() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    return probe


def port_open(port: int) -> Callable[[], bool]:
    """A probe: does 127.0.0.1:`port` accept a connection?"""

    def probe() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    return probe


def wait_until(process: subprocess.Popen, ready: Callable[[], bool], *, what: str,
               timeout: float, log: Callable[[], str] = lambda: "") -> None:
    """Return once `ready()`; RuntimeError (with the end of `log()`) when `process` exits
    first or `timeout` seconds pass (the process is then killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited {process.returncode}: {log()[-2000:]}")
        if ready():
            return
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError(f"{what} did not get ready in {timeout:.0f} s: {log()[-2000:]}")


@contextmanager
def stopped_at_exit(process: subprocess.Popen, grace: float = 15) -> Iterator[subprocess.Popen]:
    """Yield `process`; then terminate it, and kill it if it outlives `grace` seconds."""
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
