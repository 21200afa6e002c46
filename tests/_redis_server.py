"""A real `redis-server` on 127.0.0.1 for the tests: started on a free port in a folder of its
own, killed (SIGKILL) and started again on the same port and folder, frozen (SIGSTOP) and thawed.

It keeps an append-only file written on every change (``appendfsync always``), so a Redis
killed mid-test comes back with what it had acknowledged. Missing `redis-server`: the test
fails under CI (CI=true; .ci/run installs Debian's package), else is skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from _processes import free_port, port_open, wait_until


def redis_server_or_skip() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    message = "redis-server not found (apt-get install -y redis-server)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


class RedisServer:
    def __init__(self, folder: Path) -> None:
        self.binary = redis_server_or_skip()
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no",
             "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.process, port_open(self.port), what="redis-server", timeout=20,
                   log=lambda: (self.folder / "redis.log").read_text(errors="replace")
                   if (self.folder / "redis.log").exists() else "")
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last save (what it acknowledged is in the append-only file)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
