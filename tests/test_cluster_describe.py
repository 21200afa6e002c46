"""Group descriptions from an OpenAI-compatible chat endpoint (a stand-in server started
here on 127.0.0.1): prompt and titles sent, caching, resuming after a failure, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from decisionrag import InputError, Tree, TreeWriter
from decisionrag._cluster import (
    PAPER_PROMPT,
    ChatDescriber,
    ExtractiveDescriber,
    GroupSketch,
    cluster_documents,
    make_describer,
)
from decisionrag._errors import JudgeProtocolError, JudgeRequestError, JudgeUnavailable
from test_cluster import NAMES, fake_encode, make_docs


class StandIn:
    """What the stand-in server saw and how it should answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail_when: str | None = None  # answer 503 to prompts containing this text
        self.status = 200
        self.body: str | None = None
        self.lock = threading.Lock()


def _handler(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            payload = json.loads(self.rfile.read(length))
            with state.lock:
                state.requests.append(payload)
                state.headers.append(dict(self.headers))
            content = payload["messages"][0]["content"]
            titles = content.split("most typical first):\n", 1)[1].splitlines()
            if self.path != "/v1/chat/completions":
                self._send(404, "{}")
            elif state.fail_when and state.fail_when in content:
                self._send(503, '{"error": "busy"}')
            elif state.status != 200 or state.body is not None:
                self._send(state.status, state.body or "{}")
            else:
                answer = f"<think>hmm</think> Pages like {titles[0]} and {len(titles)} more."
                self._send(200, json.dumps({"choices": [{"message": {"content": answer}}]}))

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, StandIn]]:
    state = StandIn()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()
    httpd.server_close()


def cluster_with(path: Path, describer: Any) -> None:
    with TreeWriter(path) as writer:
        writer.add_documents(make_docs(dict.fromkeys(NAMES, 12)))
        cluster_documents(writer, 6, model="fake", encode=fake_encode, describer=describer,
                          cache=path.parent / "cache")


def test_endpoint_writes_descriptions_with_the_papers_prompt(tmp_path: Path, server: Any) -> None:
    url, state = server
    describer = ChatDescriber(url, "qwen3-8b", cache=tmp_path / "cache", api_key="k-123")
    cluster_with(tmp_path / "t.tree", describer)
    assert len(state.requests) == 6 and describer.requests == 6
    first = state.requests[0]
    assert first["model"] == "qwen3-8b"
    assert first["messages"][0]["content"].startswith(PAPER_PROMPT)
    assert state.headers[0]["Authorization"] == "Bearer k-123"
    with Tree.open(tmp_path / "t.tree") as tree:
        for group in tree.children(tree.root.id):
            docs = tree.children(group.id)
            # titles most typical first: the first document of the group leads the list
            assert group.description == f"Pages like {docs[0].title} and {len(docs)} more."


def test_rerun_hits_the_cache(tmp_path: Path, server: Any) -> None:
    url, state = server
    cluster_with(tmp_path / "a.tree", ChatDescriber(url, "m", cache=tmp_path / "cache"))
    again = ChatDescriber(url, "m", cache=tmp_path / "cache")
    cluster_with(tmp_path / "b.tree", again)
    assert len(state.requests) == 6 and again.cache_hits == 6 and again.requests == 0
    other_prompt = ChatDescriber(url, "m", cache=tmp_path / "cache", prompt="Summarise.")
    cluster_with(tmp_path / "c.tree", other_prompt)
    assert other_prompt.requests == 6  # the prompt is part of the cache key


def test_resume_after_a_failure_midway(tmp_path: Path, server: Any) -> None:
    url, state = server
    state.fail_when = "Soprano"  # the opera group keeps failing
    failing = ChatDescriber(url, "m", cache=tmp_path / "cache", retries=2)
    with pytest.raises(JudgeUnavailable, match="rerun to resume"):
        cluster_with(tmp_path / "t.tree", failing)
    assert not (tmp_path / "t.tree").exists()  # nothing half-written
    assert failing.requests == 5 + 2  # five groups answered, one tried twice
    state.fail_when = None
    resumed = ChatDescriber(url, "m", cache=tmp_path / "cache")
    cluster_with(tmp_path / "t.tree", resumed)
    assert resumed.cache_hits == 5 and resumed.requests == 1
    with Tree.open(tmp_path / "t.tree") as tree:
        assert all(g.description.startswith("Pages like") for g in tree.children(tree.root.id))


@pytest.mark.parametrize(("status", "body", "error"), [
    (401, '{"error": "no key"}', JudgeRequestError),
    (200, "not json", JudgeProtocolError),
    (200, '{"choices": []}', JudgeProtocolError),
    (200, '{"choices": [{"message": {"content": "  "}}]}', JudgeProtocolError),
])
def test_endpoint_errors_are_translated(tmp_path: Path, server: Any, status: int, body: str,
                                        error: type[Exception]) -> None:
    url, state = server
    state.status, state.body = status, body
    describer = ChatDescriber(url, "m", cache=tmp_path / "cache", retries=1)
    sketch = GroupSketch("g", ("Alpha", "Beta"), ("alpha",), 2)
    with pytest.raises(error):
        describer.describe([sketch])


def test_unreachable_endpoint_is_unavailable(tmp_path: Path) -> None:
    describer = ChatDescriber("http://127.0.0.1:9/v1", "m", cache=tmp_path, retries=1, timeout=2)
    with pytest.raises(JudgeUnavailable):
        describer.describe([GroupSketch("g", ("Alpha",), (), 1)])


def test_describer_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert isinstance(make_describer(), ExtractiveDescriber)
    with pytest.raises(InputError, match="needs an endpoint"):
        make_describer(model="m")
    with pytest.raises(InputError, match="model name"):
        make_describer(url="http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1/")
    chat = make_describer(model="m", cache=tmp_path)
    assert isinstance(chat, ChatDescriber)
    assert chat.url == "http://127.0.0.1:1/v1/chat/completions"
    with pytest.raises(InputError):
        ChatDescriber("ftp://example", "m")


def test_extractive_description_format() -> None:
    sketch = GroupSketch("g", ("Memento", "Inception", "Tenet", "Dunkirk", "Interstellar",
                               "Following"), ("nolan", "film", "thriller"), 40)
    text = ExtractiveDescriber(n_titles=5).describe_one(sketch)
    assert text == ("Topics: nolan, film, thriller — typical pages: Memento; Inception; Tenet; "
                    "Dunkirk; Interstellar …")
