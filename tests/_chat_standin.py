"""A local OpenAI-compatible chat-completions stand-in on 127.0.0.1 (for the answer tests).

It answers ``POST /v1/chat/completions`` like vLLM or the OpenAI API: a JSON completion, or
with ``"stream": true`` server-sent events (``data: {chunk}`` lines, usage in the last chunk
when ``stream_options.include_usage`` is set, then ``data: [DONE]``). What it says is
decided by `reply` (a function of the request body); `failures` lists HTTP statuses to
answer before replying normally (a 429 with ``Retry-After: 0``), `always_fail` a status for
every request. Every request body is recorded. Like vLLM, `raw_unicode` writes non-ASCII raw
in the streamed JSON (U+2028 and U+0085 included); `write_size` cuts the stream's bytes into
writes of that many bytes (a CRLF or a UTF-8 character cut in two); `line_end` ends its lines.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def cite_first(body: dict[str, Any]) -> str:
    """A reader that trusts passage [1]: it quotes its first words and cites it."""
    user = body["messages"][-1]["content"]
    match = re.search(r"^\[1\][^\n]*\n(.+)$", user, re.MULTILINE)
    words = " ".join(match.group(1).split()[:6]) if match else "not answerable"
    return f"Answer: {words} [1]"


class ChatStandIn:
    def __init__(self, reply: Callable[[dict[str, Any]], str] = cite_first) -> None:
        self.reply = reply
        self.failures: list[int] = []
        self.always_fail: int | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.chunk_delay = 0.0
        self.cut_after: int | None = None  # stream this many chunks, then hang up
        self.raw_unicode = False
        self.write_size: int | None = None
        self.line_end = "\n"
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                standin.handle(self)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length))
        with self._lock:
            self.requests.append(body)
            self.headers.append(dict(handler.headers))
            status = self.always_fail or (self.failures.pop(0) if self.failures else None)
        if handler.path != "/v1/chat/completions":
            self._json(handler, 404, {"error": {"message": f"no route {handler.path}"}})
        elif status is not None:
            self._json(handler, status, {"error": {"message": f"stand-in says {status}"}},
                       {"Retry-After": "0"} if status == 429 else {})
        elif body.get("stream"):
            self._stream(handler, body)
        else:
            text = self.reply(body)
            self._json(handler, 200, {
                "id": "cmpl-1", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": _tokens(body), "completion_tokens": len(text.split()),
                          "total_tokens": _tokens(body) + len(text.split())},
            })

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        text = self.reply(body)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        pieces = re.findall(r"\S+\s*", text)
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        ]
        chunks += [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({"choices": [], "usage": {"prompt_tokens": _tokens(body),
                                                    "completion_tokens": len(pieces)}})
        end = self.line_end
        for number, chunk in enumerate(chunks):
            if self.cut_after is not None and number >= self.cut_after:
                handler.close_connection = True
                return
            data = json.dumps(chunk, ensure_ascii=not self.raw_unicode)
            self._write(handler, f"data: {data}{end}{end}".encode())
            if self.chunk_delay:
                time.sleep(self.chunk_delay)
        self._write(handler, f"data: [DONE]{end}{end}".encode())
        handler.close_connection = True

    def _write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        size = self.write_size or len(data)
        if self.write_size:  # each write its own segment, so the client reads it cut
            handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, len(data), size):
            handler.wfile.write(data[start:start + size])
            handler.wfile.flush()

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, status: int, payload: Any,
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


def _tokens(body: dict[str, Any]) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
