"""Headless Chromium driven over the Chrome DevTools protocol (for the browser tests).

Chromium starts with a fresh profile and its debugging port on 127.0.0.1; the test talks to
the page target over one WebSocket (`websocket-client`, the dev extra). Every request the
page makes is recorded, so a test can check that a page loads nothing from the network.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

_KEY_CODES = {"Enter": 13, "Tab": 9, "Escape": 27, " ": 32, "End": 35, "Home": 36,
              "ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40}
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio",
)


def chromium_or_skip() -> str:
    """The Chromium binary; missing → the test fails under CI (CI=true), else is skipped."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = "headless Chromium not found (apt-get install -y chromium chromium-driver)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


class Browser:
    """One Chromium process and its first page."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1600) -> None:
        self.profile = tempfile.mkdtemp(prefix="decisionrag-chromium-")
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.requests: list[str] = []
        self.console_errors: list[str] = []
        self._events: list[dict[str, Any]] = []
        self._next_id = 0
        try:
            self._connect(width, height)
        except BaseException:
            self.close()
            raise

    def _connect(self, width: int, height: int) -> None:
        import websocket

        port = self._port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.loads(reply.read())
        page = next(t for t in targets if t.get("type") == "page")
        self.socket = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
        )
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _port(self) -> int:
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self.process.returncode}")
            if marker.is_file():
                lines = marker.read_text().split()
                if lines:
                    return int(lines[0])
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its debugging port within 30 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        wanted = self._next_id
        self.socket.send(json.dumps({"id": wanted, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._record(message)

    def _record(self, event: dict[str, Any]) -> None:
        method = event.get("method")
        params = event.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))
        self._events.append(event)

    def open(self, path: Path) -> None:
        self._events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_for_event("Page.loadEventFired")

    def goto(self, url: str) -> None:
        """Open `url` (a page a test server serves) and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def resize(self, width: int, height: int, *, mobile: bool = False) -> None:
        """The window's size (a phone's with `mobile`: touch, its viewport meta honoured)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)

    def press(self, key: str, *, text: str = "") -> None:
        """A real key press (keyDown, keyUp) sent to the focused element, e.g. "ArrowDown"."""
        code = _KEY_CODES.get(key, ord(key.upper()[0]) if len(key) == 1 else 0)
        common = {"key": key, "code": key if len(key) > 1 else f"Key{key.upper()}",
                  "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code}
        self.call("Input.dispatchKeyEvent", type="keyDown", text=text, **common)
        self.call("Input.dispatchKeyEvent", type="keyUp", **common)

    def type_text(self, text: str) -> None:
        """Text typed into the focused element (as an input method would insert it)."""
        self.call("Input.insertText", text=text)

    def wait_for_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self._events:
                if event.get("method") == method:
                    self._events.remove(event)
                    return event
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            self._record(json.loads(self.socket.recv()))
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def screenshot(self, target: Path) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        target.write_bytes(data)
        return data

    def close(self) -> None:
        socket = getattr(self, "socket", None)
        if socket is not None:
            socket.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
