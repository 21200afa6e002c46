"""A scripted System One server for tests: records every raw request body, answers
deterministic probabilities, and serves a configurable ``/v1/models``."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StandIn:
    url: str
    bodies: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    models: dict[str, Any] = field(default_factory=lambda: {"object": "list", "data": []})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.bodies]


def _answer(state: str, question: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(question.get("instructions"))
    value = (zlib.crc32(f"{state[:200]}|{text}".encode()) % 1000) / 1000
    if question.get("type") == "choice":
        labels = list(question["criteria"])
        weights = [1 + (zlib.crc32(f"{text}|{label}".encode()) % 7) for label in labels]
        total = sum(weights)
        probs = {label: w / total for label, w in zip(labels, weights, strict=True)}
        best = max(probs, key=probs.__getitem__)
        return {"type": "choice", "choice": best, "probabilities": probs, "confidence": 0.5}
    return {"type": "noul", "noul": value}


@contextmanager
def standin_server() -> Iterator[StandIn]:
    stand_in = StandIn(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            with stand_in.lock:
                stand_in.paths.append(self.path)
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, stand_in.models)
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with stand_in.lock:
                stand_in.bodies.append(raw)
                stand_in.paths.append(self.path)
            if self.path != "/v1/systemone":
                self._send(404, {"error": "not found"})
                return
            body = json.loads(raw)
            questions = body["questions"]
            if not 1 <= len(questions) <= 64:
                self._send(422, {"error": f"1..64 questions, got {len(questions)}"})
                return
            answers = {qid: _answer(body["state"], q) for qid, q in questions.items()}
            self._send(200, {"model": body.get("model"), "answers": answers,
                             "usage": {"input_tokens": len(body["state"]) // 4, "output_tokens": 0}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
