"""The OpenAI Decisions judge against a local server implementing ``POST /v1/decisions``.

The server follows the openai-python types (decision_create_params.py, decision.py): a
request with ``model``, ``input`` and a list of ``predicate``/``choice`` questions; answers
in question order, a ``refusal`` where the model declines, OpenAI-shaped error bodies. Its
"model" is a hash of (input, instructions, option), so the expected numbers are known here.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from decisionrag._errors import JudgeConfigError, JudgeProtocolError, JudgeRequestError
from decisionrag._judges import BinaryRequest, ChoiceRequest, Judge, load_judge

KEY = "sk-test"
MODELS = {"gpt-6-luna", "shuffled"}


def logit(*parts: str) -> float:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return (int.from_bytes(digest[:8], "big") / 2**64 * 2 - 1) * 3


def predicate_probability(text: str, instructions: str) -> float:
    return 1 / (1 + math.exp(-logit(text, instructions)))


def choice_distribution(text: str, instructions: str, values: list[str]) -> list[float]:
    exps = [math.exp(logit(text, instructions, v)) for v in values]
    return [e / sum(exps) for e in exps]


def answer(text: str, question: dict[str, Any]) -> dict[str, Any]:
    name = question.get("name")
    if "REFUSE" in question["instructions"]:
        return {"type": "refusal", "name": name}
    if question["type"] == "predicate":
        return {"type": "predicate", "name": name,
                "probability": predicate_probability(text, question["instructions"])}
    values = [c["value"] for c in question["choices"]]
    probabilities = choice_distribution(text, question["instructions"], values)
    best = max(range(len(values)), key=probabilities.__getitem__)
    return {"type": "choice", "name": name, "choice": values[best], "confidence": 0.5,
            "probabilities": [{"value": v, "probability": p}
                              for v, p in zip(values, probabilities, strict=True)]}


def problems(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("input"), str):
        return "input must be a string"
    questions = body.get("questions")
    if not isinstance(questions, list) or not questions:
        return "questions must be a non-empty list"
    for q in questions:
        if q.get("type") not in ("predicate", "choice"):
            return f"bad question type {q.get('type')!r}"
        if not isinstance(q.get("instructions"), str):
            return f"bad question {q!r}"
        if q["type"] == "choice" and len(q.get("choices", [])) < 2:
            return "a choice needs at least two choices"
    return None


class DecisionsHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        return None

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None,
                                      "code": None}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/decisions":
            return self._error(404, f"Unknown path {self.path}", "invalid_request_error")
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error")
        if body.get("model") not in MODELS:
            return self._error(404, f"The model `{body.get('model')}` does not exist.",
                               "invalid_request_error")
        problem = problems(body)
        if problem:
            return self._error(400, problem, "invalid_request_error")
        answers = [answer(body["input"], q) for q in body["questions"]]
        if body["model"] == "shuffled":
            answers.reverse()
        tokens = len(body["input"]) // 4 + 5 * len(answers)
        self._send(200, {"object": "decision", "model": body["model"], "answers": answers,
                         "usage": {"input_tokens": tokens, "output_tokens": 0,
                                   "total_tokens": tokens,
                                   "input_tokens_details": {"cached_tokens": 0,
                                                            "cache_write_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}})
        return None


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), DecisionsHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def env(base_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    return base_url


CONTEXT = "Query: renew a passport\n[1] Passport renewal\n[2] Tax credits\n[3] Visas"
QUESTIONS = tuple(f"Is the information on Page {i}?" for i in (1, 2, 3))


def judge(model: str = "gpt-6-luna", **options: Any) -> Judge:
    return load_judge(f"openai:{model}", max_attempts=2, backoff_initial=0.01, **options)


async def test_predicates_come_back_in_order(env: str) -> None:
    j = judge()
    result = await j.binary(BinaryRequest(CONTEXT, QUESTIONS))
    await j.aclose()
    expected = [predicate_probability(CONTEXT, q) for q in QUESTIONS]
    assert result.probabilities == pytest.approx(expected, abs=1e-12)
    assert result.usage.requests == 1
    assert result.usage.input_tokens == len(CONTEXT) // 4 + 15
    assert result.usage.cost_usd == pytest.approx(result.usage.input_tokens * 0.10 / 1e6)


async def test_choice_distribution_follows_the_options(env: str) -> None:
    options = ("Page 1", "Page 2", "Page 3")
    j = judge()
    result = await j.choice(ChoiceRequest(CONTEXT, "Which page?", options))
    await j.aclose()
    expected = choice_distribution(CONTEXT, "Which page?", list(options))
    assert result.probabilities == pytest.approx(expected, abs=1e-12)
    assert math.isclose(sum(result.probabilities), 1.0)


async def test_a_refusal_is_an_error_naming_the_question(env: str) -> None:
    j = judge()
    with pytest.raises(JudgeRequestError, match="refused to answer question 'q1'"):
        await j.binary(BinaryRequest(CONTEXT, ("Fine?", "REFUSE this?", "Fine too?")))
    await j.aclose()


async def test_answers_out_of_order_are_a_protocol_error(env: str) -> None:
    j = judge("shuffled")
    with pytest.raises(JudgeProtocolError, match="came where"):
        await j.binary(BinaryRequest(CONTEXT, QUESTIONS))
    await j.aclose()


async def test_wrong_key_is_401_with_openais_message(env: str) -> None:
    j = judge(api_key="sk-wrong")
    with pytest.raises(JudgeRequestError, match="Incorrect API key") as caught:
        await j.binary(BinaryRequest(CONTEXT, QUESTIONS))
    await j.aclose()
    assert caught.value.status == 401


async def test_unknown_model_is_404(env: str) -> None:
    j = judge("gpt-0")
    with pytest.raises(JudgeRequestError, match="does not exist") as caught:
        await j.binary(BinaryRequest(CONTEXT, QUESTIONS))
    await j.aclose()
    assert caught.value.status == 404


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeConfigError, match="OPENAI_API_KEY"):
        load_judge("openai:gpt-6-luna")


def test_base_url_option_beats_the_environment(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    j = judge(base_url=base_url)
    assert len(j.binary_sync(BinaryRequest(CONTEXT, QUESTIONS)).probabilities) == 3
