"""Answer quality against a local stand-in chat-completions server started by the test."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from decisionrag._cli import main
from decisionrag._eval import load_dataset
from decisionrag._eval._answers import (
    AnswerClient,
    AnswerError,
    answer_quality,
    exact_match,
    normalize_answer,
    parse_answer,
)


class _StandIn(BaseHTTPRequestHandler):
    """Answers with the first line of Passage 1, like a reader that trusts the top passage."""

    requests: ClassVar[list[dict[str, Any]]] = []
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if self.status != 200:
            self._send(self.status, {"error": {"message": "no"}})
            return
        user = body["messages"][-1]["content"]
        match = re.search(r"Passage 1: (.*)", user)
        answer = match.group(1) if match else "not answerable"
        self._send(
            200, {"choices": [{"message": {"role": "assistant", "content": f"Answer: {answer}"}}]}
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture()
def server() -> Iterator[str]:
    _StandIn.requests = []
    _StandIn.status = 200
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def dataset_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "qa"
    folder.mkdir()
    corpus = [
        {"id": "p1", "doc_id": "D", "doc_title": "Facts", "text": "The Eiffel Tower"},
        {"id": "p2", "doc_id": "D", "doc_title": "Facts", "text": "308 points"},
        {"id": "p3", "doc_id": "E", "doc_title": "Other", "text": "Paris, France."},
    ]
    queries = [
        {"id": "a", "text": "Which tower?", "answers": ["Eiffel Tower"]},
        {"id": "b", "text": "How many points?", "answers": ["308", "308 points"]},
        {"id": "c", "text": "Capital?", "answers": ["Paris"]},
        {"id": "d", "text": "No labels"},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\na\tp1\t1\nb\tp2\t1\nc\tp3\t1\n")
    return folder


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear") == "apple pear"
    assert exact_match("the Eiffel Tower.", ["Eiffel Tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert parse_answer("Thinking...\nAnswer: yes\nbecause") == "yes"
    assert parse_answer("no") == "no"


async def test_exact_match_from_the_top_passages(server: str, dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    rankings = {"a": ["p1", "p2"], "b": ["p2"], "c": ["p1", "p3"], "d": ["p1"]}
    result = await answer_quality(
        dataset, rankings, AnswerClient("stand-in", base_url=server, api_key="k")
    )
    # the stand-in answers with passage 1: right for a and b, wrong for c; d has no answers
    assert result["per_query"] == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert result["exact_match"] == pytest.approx(2 / 3)
    sent = _StandIn.requests
    assert len(sent) == 3 and all(r["path"] == "/v1/chat/completions" for r in sent)
    assert all(r["body"]["model"] == "stand-in" and r["auth"] == "Bearer k" for r in sent)
    user = next(
        r["body"]["messages"][-1]["content"]
        for r in sent
        if "Capital" in r["body"]["messages"][-1]["content"]
    )
    assert "Passage 1: The Eiffel Tower" in user and "Passage 2: Paris, France." in user


async def test_refusals_raise_a_clear_error(server: str, dataset_dir: Path) -> None:
    _StandIn.status = 401
    client = AnswerClient("stand-in", base_url=server, retries=1)
    with pytest.raises(AnswerError, match="HTTP 401"):
        await answer_quality(load_dataset(dataset_dir), {"a": ["p1"]}, client)


def test_cli_reports_exact_match(
    server: str,
    dataset_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "r.json"
    code = main(
        [
            "eval",
            str(dataset_dir),
            "--systems",
            "bm25",
            "--answer-model",
            "stand-in",
            "--json",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
            "--keep-runs",
            "1",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    # exact match follows from whichever passage BM25 ranked first for each question
    assert report["systems"]["bm25"]["qa_exact_match"] == pytest.approx(
        sum(_em_expected(report, q) for q in "abc") / 3
    )
    assert "qa_exact_match" in capsys.readouterr().out
    assert all(r["auth"] is None for r in _StandIn.requests)


def _em_expected(report: dict[str, Any], query: str) -> float:
    answers = {"a": ["Eiffel Tower"], "b": ["308", "308 points"], "c": ["Paris"]}
    texts = {"p1": "The Eiffel Tower", "p2": "308 points", "p3": "Paris, France."}
    top = report["runs"]["bm25"][query][0]
    return exact_match(texts[top], answers[query])


def test_token_f1_is_squads() -> None:
    from decisionrag._eval._answers import token_f1

    assert token_f1("the Eiffel Tower", ["Eiffel Tower"]) == 1.0
    assert token_f1("Eiffel", ["Eiffel Tower"]) == pytest.approx(2 / 3)  # p 1, r 1/2
    assert token_f1("tower tower eiffel", ["Eiffel Tower"]) == pytest.approx(0.8)  # p 2/3, r 1
    assert token_f1("Paris", ["308 points", "paris!"]) == 1.0  # the best reference
    assert token_f1("no", ["yes"]) == 0.0
    assert token_f1("", [""]) == 1.0 and token_f1("a", ["x"]) == 0.0  # "a" normalises to nothing


def test_cli_answers_reports_em_and_token_f1(
    server: str, dataset_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from decisionrag._eval._answers import token_f1

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("DECISIONRAG_GENERATOR", "openai-compatible:stand-in")
    out = tmp_path / "r.json"
    code = main(["eval", str(dataset_dir), "--systems", "bm25", "--answers", "--base-url", server,
                 "--json", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress",
                 "--keep-runs", "1"])
    assert code == 0
    report = json.loads(out.read_text())
    answers = {"a": ["Eiffel Tower"], "b": ["308", "308 points"], "c": ["Paris"]}
    texts = {"p1": "The Eiffel Tower", "p2": "308 points", "p3": "Paris, France."}
    expected = sum(token_f1(texts[report["runs"]["bm25"][q][0]], answers[q]) for q in "abc") / 3
    assert report["systems"]["bm25"]["qa_token_f1"] == pytest.approx(expected)
    assert "qa_exact_match" in report["systems"]["bm25"]
    table = capsys.readouterr().out
    assert "qa_token_f1" in table and "qa_exact_match" in table
    assert all(r["body"]["model"] == "stand-in" for r in _StandIn.requests)


def test_cli_answers_without_a_generator_says_how(
    dataset_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DECISIONRAG_GENERATOR", raising=False)
    code = main(["eval", str(dataset_dir), "--systems", "bm25", "--answers", "--no-progress",
                 "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--generator openai-compatible:MODEL" in err and "DECISIONRAG_GENERATOR" in err
