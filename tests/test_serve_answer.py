"""`POST /v1/answer` on the real app under uvicorn (127.0.0.1), answered by the local
OpenAI-compatible stand-in: JSON and server-sent events, invalid citations, failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module

require_module("fastapi")

import httpx

from _chat_standin import ChatStandIn
from _serve_helpers import answering_server, live_server, settings, write_tree
from decisionrag._answer import TASK_PRESETS, Source, build_messages
from decisionrag._query import Query, Turn

HTTP = httpx.Client(timeout=30)
QUESTION = {"query": "How do I renew my passport?", "k": 3, "top": 2}


@pytest.fixture(scope="module")
def standin() -> Iterator[ChatStandIn]:
    with ChatStandIn() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, standin: ChatStandIn) -> Iterator[str]:
    with answering_server(tmp_path_factory.mktemp("answer"), standin.base_url) as url:
        yield url


@pytest.fixture(autouse=True)
def fresh(standin: ChatStandIn) -> Iterator[None]:
    from _chat_standin import cite_first

    standin.reply, standin.failures, standin.always_fail = cite_first, [], None
    yield


def events(response: httpx.Response) -> list[tuple[str, Any]]:
    found = []
    for block in response.text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_answer_with_citations(server: str, standin: ChatStandIn) -> None:
    response = HTTP.post(f"{server}/v1/answer", json=QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"].startswith("Answer: ") and body["answer"].endswith("[1]")
    assert len(body["sources"]) == 2 and len(body["retrieval"]["results"]) == 3
    first = body["citations"][0]
    assert first["valid"] and first["id"] == body["sources"][0]["id"]
    assert first["path"] == body["sources"][0]["path"] and first["metadata"]["lang"] == "en"
    assert body["invalid_citations"] == [] and body["generation"]["model"] == "openai-compatible:stand-in"
    sent = standin.requests[-1]["messages"][1]["content"]
    assert "[1] " in sent and "[2] " in sent and "[3] " not in sent
    assert sent.endswith("Question: How do I renew my passport?")


def test_answer_streams_server_sent_events(server: str) -> None:
    with HTTP.stream("POST", f"{server}/v1/answer", json={**QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        response.read()
    found = events(response)
    kinds = [kind for kind, _ in found]
    assert kinds[0] == "retrieved" and kinds[-1] == "done" and kinds.count("delta") >= 3
    done = found[-1][1]
    assert "".join(data["text"] for kind, data in found if kind == "delta") == done["answer"]
    assert done["citations"][0]["valid"]
    assert found[0][1]["results"][0]["id"] == done["sources"][0]["id"]


def test_a_citation_naming_no_passage_is_flagged(server: str, standin: ChatStandIn) -> None:
    standin.reply = lambda body: "Renew online [2], or see [9]."
    body = HTTP.post(f"{server}/v1/answer", json=QUESTION).json()
    assert [(c["number"], c["valid"]) for c in body["citations"]] == [(2, True), (9, False)]
    assert body["invalid_citations"] == [9]


def test_a_failing_answer_model_is_502_or_an_error_event(server: str, standin: ChatStandIn) -> None:
    standin.always_fail = 500
    response = HTTP.post(f"{server}/v1/answer", json=QUESTION)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "generator_failed"
    assert "HTTP 500" in response.json()["error"]["message"]
    with HTTP.stream("POST", f"{server}/v1/answer", json={**QUESTION, "stream": True}) as streamed:
        streamed.read()
    found = events(streamed)
    assert [kind for kind, _ in found] == ["retrieved", "error"]
    assert found[-1][1]["error"]["type"] == "generator_failed"


def prompt_of(body: dict[str, Any], query: Query, task: str) -> list[dict[str, str]]:
    """The prompt the in-process `decisionrag.answer` builds for `query` from these sources."""
    sources = [Source(i, tuple(hit["path"]), hit["text"]) for i, hit in enumerate(body["sources"], 1)]
    return build_messages(query, sources, TASK_PRESETS[task])


@pytest.mark.parametrize("stream", [False, True])
def test_a_stored_conversation_reaches_the_answer_prompt(
    server: str, standin: ChatStandIn, stream: bool
) -> None:
    first, second = "How do I renew my passport?", "And if it was stolen?"
    ask = {"k": 3, "top": 2, "conversation_id": f"trip-{stream}", "stream": stream}

    def answer(query: str, **more: Any) -> dict[str, Any]:
        with HTTP.stream("POST", f"{server}/v1/answer", json={**ask, "query": query, **more}) as response:
            assert response.status_code == 200, response.read()
            response.read()
        return events(response)[-1][1] if stream else response.json()

    body = answer(first)
    assert body["task"] == "qa" and standin.requests[-1]["messages"] == prompt_of(body, Query(first), "qa")
    replied = body["answer"]
    assert replied.endswith(" [1]")
    body = answer(second)  # only the id: the server's stored turns are the history
    sent = standin.requests[-1]["messages"]
    assert body["task"] == "conversation"
    # the first answer is the agent's turn, without its [1] (a number of the first turn's passages)
    history = (Turn("user", first), Turn("agent", replied.removesuffix(" [1]")))
    assert sent == prompt_of(body, Query(second, "", history), "conversation")
    assert sent[1]["content"].endswith(f"User: {second}\nAgent:")
    standin.failures = [400]  # a failed answer is no agent turn
    with HTTP.stream("POST", f"{server}/v1/answer", json={**ask, "query": "Is it free?"}) as failed:
        assert failed.read() and (failed.status_code == 502 or events(failed)[-1][0] == "error")
    body = answer("What does it cost?", task="qa")
    user = standin.requests[-1]["messages"][1]["content"]
    assert "User: Is it free?\n" in user and user.count("Agent: ") == 2, user
    assert user.endswith("Question: What does it cost?")


def test_given_messages_reach_the_answer_prompt(server: str, standin: ChatStandIn) -> None:
    turns = [{"role": "user", "content": "I lost my passport abroad."},
             {"role": "assistant", "content": "Report it to the police first."},
             {"role": "user", "content": "Then how do I renew it?"}]
    body = HTTP.post(f"{server}/v1/answer", json={"k": 3, "top": 2, "messages": turns,
                                                  "conversation_id": "given"}).json()
    history = (Turn("user", turns[0]["content"]), Turn("agent", turns[1]["content"]))
    assert standin.requests[-1]["messages"] == prompt_of(
        body, Query(turns[2]["content"], "", history), "conversation")


def test_top_is_at_most_k(server: str) -> None:
    body = HTTP.post(f"{server}/v1/answer", json={**QUESTION, "top": 5}).json()
    assert len(body["sources"]) == 3 == len(body["retrieval"]["results"])


def test_limits_and_keys_are_those_of_retrieve(server: str) -> None:
    response = HTTP.post(f"{server}/v1/answer", json={**QUESTION, "k": 10_000})
    assert response.status_code == 422 and response.json()["error"]["field"] == "k"
    response = HTTP.post(f"{server}/v1/answer", json={**QUESTION, "colour": "red"})
    assert response.status_code == 422


def test_without_an_answer_model_there_is_no_answer_endpoint(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    with live_server(settings({"docs": tree})) as url:
        assert HTTP.post(f"{url}/v1/answer", json=QUESTION).status_code == 404
        assert "/v1/answer" not in HTTP.get(f"{url}/openapi.json").json()["paths"]
