"""A System One server that misbehaves on purpose, for tests and `benchmarks/faults.py`.

``FaultServer()`` starts a real HTTP server on 127.0.0.1 (a free port, a daemon thread);
``judge_id(fault)`` is a ``jev-compatible:`` id whose requests get that fault: the fault is the
first part of the URL path. Every answer that is given is a correct one (P(yes) from
`score_text`, the same rule whatever the fault), so a walk that survives a fault can be
compared with the clean server's. Faults:

========================  ==========================================================
``ok``                    answers at once
``trickle``               headers at once, then the body one byte every 0.5 s
``hang``                  reads the request, never answers (until the server stops)
``storm-429``             always 429 with ``Retry-After: 100000``
``storm-503``             always 503 with ``Retry-After: 100000``
``burst-500``             500 for the first 2 requests of each state, then answers
``truncated``             a 200 whose body stops half-way (Content-Length promises more)
``malformed``             a 200 whose body is not JSON
``nested``                a 200 whose body is a list nested 100,000 deep
``wrong-types``           a 200 whose answers have ``"noul": "high"``
``one-fails``             500 for every page-level request (its state lists "Pages:") that
                          contains "POISON", else answers: one of a level's requests fails
``slow``                  answers after 1.5 s
``huge``                  a 200 whose body is 40 MB (JSON with a long padding string)
``gzip-bomb``             a 200 whose 200 KB gzip body inflates to 200 MB
========================  ==========================================================

The same server is an OpenAI-compatible chat model (``generator_url(fault)``: POST
``/FAULT/v1/chat/completions``), for the answer model's faults:

========================  ==========================================================
``chat-ok``               answers (streamed when asked) "Renew it online [1]."
``chat-keepalive``        streams ``: keep-alive`` comments every 0.2 s, forever
``chat-endless``          streams a word every 0.05 s, forever, never finishing
``chat-hang``             reads the request, never answers
``chat-bomb``             a 200 whose gzip body inflates to 200 MB
``chat-long-line``        streams one ``data:`` line that never ends (a MB a second)
``chat-not-text``         a reply whose content is a JSON object, not text
========================  ==========================================================
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("ok", "trickle", "hang", "storm-429", "storm-503", "burst-500", "truncated",
          "malformed", "nested", "wrong-types", "one-fails", "slow", "huge", "gzip-bomb")
CHAT_FAULTS = ("chat-ok", "chat-keepalive", "chat-endless", "chat-hang", "chat-bomb",
               "chat-long-line", "chat-not-text")
CHAT_ANSWER = "Renew it online [1]."
HUGE_BYTES = 40 * 2**20
BOMB_BYTES = 200 * 2**20
TRICKLE_INTERVAL = 0.5
SLOW_SECONDS = 1.5
POISON = "POISON"


def score_text(state: str, question: str) -> float:
    """A fixed, deterministic P(yes): higher when the question's candidate number is small and
    the state mentions "renew" (enough to rank; no model is needed)."""
    digits = "".join(ch for ch in question if ch.isdigit()) or "0"
    base = 0.9 if "renew" in state.lower() else 0.5
    return round(base / (1 + int(digits) / 10), 6)


def answer(body: dict[str, Any]) -> dict[str, Any]:
    state = str(body.get("state", ""))
    answers: dict[str, Any] = {}
    for qid, question in dict(body.get("questions") or {}).items():
        if question.get("type") == "choice":
            options = list(question.get("criteria") or {})
            weights = [score_text(state, option) for option in options]
            total = sum(weights) or 1.0
            probabilities = {o: w / total for o, w in zip(options, weights, strict=True)}
            best = max(options, key=probabilities.__getitem__)
            answers[qid] = {"type": "choice", "choice": best, "probabilities": probabilities,
                            "confidence": probabilities[best]}
        else:
            answers[qid] = {"type": "noul",
                            "noul": score_text(state, str(question.get("instructions", "")))}
    return {"model": "faulty", "answers": answers,
            "usage": {"input_tokens": len(state) // 4 + 1, "output_tokens": 0}}


_BOMB: list[bytes] = []  # made once: a gzip stream of BOMB_BYTES spaces inside a JSON string


def bomb() -> bytes:
    """The gzip body of `BOMB_BYTES` (compressed a MB at a time: never held inflated)."""
    if not _BOMB:
        packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        parts = [packer.compress(b'{"padding": "')]
        block = b" " * 2**20
        parts += [packer.compress(block) for _ in range(BOMB_BYTES // len(block))]
        parts += [packer.compress(b'"}'), packer.flush()]
        _BOMB.append(b"".join(parts))
    return _BOMB[0]


def _chat_completion(content: Any) -> bytes:
    return json.dumps({"id": "faulty", "object": "chat.completion", "model": "faulty",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()


def _chunk(text: str, finish: str | None = None) -> bytes:
    delta = {"content": text} if text else {}
    data = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_POST(self) -> None:
        fault = self.path.strip("/").split("/")[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw or b"{}")
        if self.path.endswith("/chat/completions"):
            with self.server.lock:
                self.server.counts[fault] += 1
            self._chat(fault, body)
            return
        state = str(body.get("state", ""))
        with self.server.lock:
            self.server.sizes[fault].append(len(state) + sum(
                len(json.dumps(q)) for q in dict(body.get("questions") or {}).values()))
            self.server.counts[fault] += 1
            self.server.per_state[(fault, state)] += 1
            nth = self.server.per_state[(fault, state)]
        good = json.dumps(answer(body)).encode()
        if fault == "trickle":
            self._trickle(good)
        elif fault == "hang":
            self.server.stopping.wait()
            self.close_connection = True
        elif fault in ("storm-429", "storm-503"):
            status = 429 if fault == "storm-429" else 503
            self._send(status, b'{"detail": "overloaded, come back much later"}',
                       {"Retry-After": "100000"})
        elif fault == "burst-500" and nth <= 2:
            self._send(500, b'{"detail": "internal error (burst)"}')
        elif fault == "truncated":
            self._send(200, good[: len(good) // 2], length=len(good))
            self.close_connection = True
        elif fault == "malformed":
            self._send(200, b'{"answers": {"q0": {"type": "noul", "noul": 0.5}')
        elif fault == "nested":
            self._send(200, b"[" * 100_000 + b"]" * 100_000)
        elif fault == "wrong-types":
            wrong = {qid: {"type": "noul", "noul": "high"} for qid in body.get("questions", {})}
            self._send(200, json.dumps({"answers": wrong}).encode())
        elif fault == "one-fails" and POISON in state and "\nPages:\n" in state:
            self._send(500, b'{"detail": "this request always fails"}')
        elif fault == "slow":
            time.sleep(SLOW_SECONDS)
            self._send(200, good)
        elif fault == "huge":
            self._send(200, b'{"padding": "' + b" " * HUGE_BYTES + b'"}')
        elif fault == "gzip-bomb":
            self._send(200, bomb(), {"Content-Encoding": "gzip"})
        else:
            self._send(200, good)

    # -- the answer model's faults --------------------------------------------------------

    def _chat(self, fault: str, body: dict[str, Any]) -> None:
        streamed = bool(body.get("stream"))
        if fault == "chat-hang":
            self.server.stopping.wait()
            self.close_connection = True
        elif fault == "chat-bomb":
            self._send(200, bomb(), {"Content-Encoding": "gzip"})
        elif fault == "chat-not-text":
            self._send(200, _chat_completion({"text": CHAT_ANSWER, "cited": [1]}))
        elif fault in ("chat-keepalive", "chat-endless", "chat-long-line") and streamed:
            self._stream_forever(fault)
        elif streamed:
            self._stream([_chunk(CHAT_ANSWER), _chunk("", "stop"), b"data: [DONE]\n\n"])
        elif fault == "chat-ok":
            self._send(200, _chat_completion(CHAT_ANSWER))
        else:  # a fault of streams only, asked without a stream: it hangs instead
            self.server.stopping.wait()
            self.close_connection = True

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _stream(self, pieces: list[bytes]) -> None:
        self._start_stream()
        for piece in pieces:
            self.wfile.write(piece)
        self.wfile.flush()

    def _stream_forever(self, fault: str) -> None:
        self._start_stream()
        piece, pause = {"chat-keepalive": (b": keep-alive\n\n", 0.2),
                        "chat-endless": (_chunk("more "), 0.05),
                        "chat-long-line": (b"x" * 65_536, 0.0625)}[fault]
        if fault == "chat-long-line":
            self.wfile.write(b'data: {"choices": [{"index": 0, "delta": {"content": "')
        try:
            while not self.server.stopping.wait(pause):
                self.wfile.write(piece)
                self.wfile.flush()
        except OSError:
            return  # the client gave up: what a bounded client does

    def _trickle(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        for byte in body:
            if self.server.stopping.wait(TRICKLE_INTERVAL):
                return
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return  # the client gave up


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.per_state: Counter[tuple[str, str]] = Counter()
        self.sizes: defaultdict[str, list[int]] = defaultdict(list)  # characters per request
        self.stopping = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up on a fault is what the fault is for: nothing to print."""
        import sys

        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FaultServer:
    """The fault server, started on construction; a context manager that stops it."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def counts(self) -> Counter[str]:
        return self._server.counts

    def request_sizes(self, fault: str) -> list[int]:
        """The characters of state and questions of every request `fault` received."""
        return list(self._server.sizes[fault])

    def judge_id(self, fault: str) -> str:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
        return f"jev-compatible:{self.url}/{fault}"

    def generator_url(self, fault: str) -> str:
        """The OpenAI-compatible base URL (``.../v1``) whose replies have `fault`."""
        if fault not in CHAT_FAULTS:
            raise ValueError(f"unknown chat fault {fault!r}; one of {', '.join(CHAT_FAULTS)}")
        return f"{self.url}/{fault}/v1"

    def reset(self) -> None:
        with self._server.lock:
            self._server.counts.clear()
            self._server.per_state.clear()
            self._server.sizes.clear()

    def close(self) -> None:
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
