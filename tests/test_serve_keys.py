"""What a key may reach, on a real server (uvicorn on 127.0.0.1): conversations kept under the
key's identity, never its name (two keys of one name; a name removed and added again), in
each store; ``GET``/``DELETE /v1/conversations/{id}`` and their `Client` methods; a key file
that goes missing or bad refuses every key until it is back; per-key rates in one process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from _chat_standin import ChatStandIn
from _serve_helpers import CORPUS_B, live_server, settings, write_tree
from decisionrag import Client
from decisionrag._errors import InputError, ServerError
from decisionrag._serve import ServeLimits
from decisionrag._serve._auth import add_key, hash_key, new_key, read_key_file, remove_key

HTTP = httpx.Client(timeout=30)
FIRST, SECOND = "How do I renew my passport?", "And if it was stolen?"


@pytest.fixture(scope="module")
def standin() -> Iterator[ChatStandIn]:
    with ChatStandIn() as server:
        yield server


@pytest.fixture(params=["memory", "files", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The server settings of each conversation store."""
    if request.param == "files":
        return {"state_dir": str(tmp_path / "state")}
    if request.param == "redis":
        from _redis_server import RedisServer

        server = RedisServer(tmp_path / "redis").start()
        request.addfinalizer(server.stop)
        return {"state_url": server.url}
    return {}


def serving(folder: Path, key_file: Path, standin: ChatStandIn,
            **changes: Any) -> AbstractContextManager[str]:
    trees = {"docs": write_tree(folder / "docs.tree"), "garden": write_tree(folder / "garden.tree", CORPUS_B)}
    return live_server(settings(trees, api_key_file=str(key_file), generator="openai-compatible:stand-in",
                                generator_base_url=standin.base_url, **changes))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def answer(url: str, key: str, query: str, conversation: str = "trip") -> str:
    """The prompt the answer model got."""
    response = HTTP.post(f"{url}/v1/answer", headers=bearer(key),
                         json={"query": query, "conversation_id": conversation, "k": 2, "top": 1})
    assert response.status_code == 200, response.text
    return str(response.json()["answer"])


def last_prompt(standin: ChatStandIn) -> str:
    return str(standin.requests[-1]["messages"][-1]["content"])


def stored(url: str, key: str, conversation: str = "trip", **params: str) -> httpx.Response:
    return HTTP.get(f"{url}/v1/conversations/{conversation}", headers=bearer(key), params=params)


# ---------------------------------------------------------------- conversations by identity


def test_two_keys_with_one_name_never_read_each_others_turns(
        tmp_path: Path, standin: ChatStandIn, store: dict[str, Any]) -> None:
    mine, theirs = new_key(), new_key()
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps({"keys": [{"name": "app", "sha256": hash_key(mine)},
                                             {"name": "app", "sha256": hash_key(theirs)}]}))
    with serving(tmp_path, key_file, standin, **store) as url:
        answer(url, mine, FIRST)
        answer(url, theirs, SECOND)
        assert "renew my passport" not in last_prompt(standin)  # the same name, the same id: not its turns
        answer(url, mine, "What does it cost?")
        assert f"User: {FIRST}\n" in last_prompt(standin) and "stolen" not in last_prompt(standin)
        own = stored(url, mine).json()["messages"]
        assert [m["content"] for m in own[0::2]] == [FIRST, "What does it cost?"]
        assert [m["content"] for m in stored(url, theirs).json()["messages"][0::2]] == [SECOND]
        forget = HTTP.delete(f"{url}/v1/conversations/trip", headers=bearer(theirs))
        assert forget.json()["deleted"] is True
        assert stored(url, theirs).status_code == 404
        assert len(stored(url, mine).json()["messages"]) == 4  # its own forgetting only


def test_a_name_removed_and_added_again_does_not_inherit_the_old_keys_conversations(
        tmp_path: Path, standin: ChatStandIn, store: dict[str, Any]) -> None:
    key_file = tmp_path / "keys.json"
    add_key(key_file, "admin", [])
    old = add_key(key_file, "temp", ["docs"])
    with serving(tmp_path, key_file, standin, **store) as url:
        answer(url, old, FIRST)
        assert stored(url, old).status_code == 200
        remove_key(key_file, "temp")
        new = add_key(key_file, "temp", ["docs"])
        assert stored(url, old).status_code == 401  # revoked
        missing = stored(url, new)
        assert missing.status_code == 404 and missing.json()["error"]["field"] == "conversation_id"
        answer(url, new, SECOND)
        assert "renew my passport" not in last_prompt(standin)


# ---------------------------------------------------------------- a key file that fails closes


def test_a_missing_or_broken_key_file_refuses_every_key_until_it_is_back(
        tmp_path: Path, standin: ChatStandIn) -> None:
    key_file = tmp_path / "keys.json"
    admin = add_key(key_file, "admin", [])
    good = key_file.read_text()
    query = {"query": "income tax", "k": 1}
    with serving(tmp_path, key_file, standin) as url:
        assert HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(admin)).status_code == 200
        for damage in (key_file.unlink, lambda: key_file.write_text('{"keys": [{"name": "x"'),
                       lambda: key_file.write_text(json.dumps({"keys": "everyone"}))):
            damage()
            refused = HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(admin))
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["type"] == "keys_unavailable"
            assert refused.headers["Retry-After"] == "5"
            assert HTTP.get(f"{url}/v1/trees").status_code == 503  # no key: refused as well
            assert HTTP.get(f"{url}/readyz").status_code == 503  # a balancer sends traffic elsewhere
            assert HTTP.get(f"{url}/healthz").status_code == 200  # the process itself is fine
        key_file.write_text(good)
        assert HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(admin)).status_code == 200
        assert HTTP.get(f"{url}/readyz").status_code == 200


def test_one_key_in_two_entries_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.json"
    digest = hash_key(new_key())
    key_file.write_text(json.dumps({"keys": [{"name": "a", "sha256": digest, "trees": ["docs"]},
                                             {"name": "b", "sha256": digest.upper(), "trees": ["*"]}]}))
    with pytest.raises(InputError, match=r"keys\[1\]: the same key as keys\[0\]"):
        read_key_file(key_file)
    key_file.write_text(json.dumps({"keys": [{"name": "a", "sha256": digest, "requests_per_minute": 0}]}))
    with pytest.raises(InputError, match="requests_per_minute"):
        read_key_file(key_file)


# ---------------------------------------------------------------- the conversation endpoints


def test_read_and_forget_a_conversation_over_http_and_with_the_client(
        tmp_path: Path, standin: ChatStandIn) -> None:
    key_file = tmp_path / "keys.json"
    admin, docs_only = add_key(key_file, "admin", []), add_key(key_file, "docs-app", ["docs"])
    odd = "trip/2024 ✓?#"
    with serving(tmp_path, key_file, standin) as url:
        with Client(url, api_key=admin) as client:
            with pytest.raises(ServerError) as caught:
                client.conversation(odd)
            assert caught.value.status == 404 and caught.value.field == "conversation_id"
            client.retrieve("renew my passport", conversation_id=odd, k=1)
            client.answer("income tax refund", conversation_id=odd, k=1, top=1)
            kept = client.conversation(odd)
            assert kept["conversation_id"] == odd and kept["tree"] == "docs"
            assert [(m["role"], m["content"]) for m in kept["messages"]][:3] == [
                ("user", "renew my passport"), ("user", "income tax refund"),
                ("assistant", kept["messages"][2]["content"])]
            assert kept["notepad"][0] == "taxes" and 3_590 < kept["expires_in"] <= 3_600
            with pytest.raises(ServerError) as caught:  # kept per tree
                client.conversation(odd, tree="garden")
            assert caught.value.status == 404
            with pytest.raises(ServerError) as caught:
                client.conversation(odd, tree="nope")
            assert caught.value.status == 404 and caught.value.field == "tree"
            with pytest.raises(ServerError) as caught:
                Client(url, api_key=docs_only).conversation(odd, tree="garden")
            assert caught.value.status == 403

            async def asynchronously() -> tuple[dict[str, Any], bool, bool]:
                async with Client(url, api_key=admin) as remote:
                    return (await remote.aconversation(odd), await remote.adelete_conversation(odd),
                            await remote.adelete_conversation(odd))

            seen, deleted, again = asyncio.run(asynchronously())
            assert seen["messages"] == kept["messages"]
            assert (deleted, again) == (True, False)
            with pytest.raises(ServerError):
                client.conversation(odd)
            assert client.delete_conversation(odd) is False
        schema = HTTP.get(f"{url}/openapi.json").json()
        operations = schema["paths"]["/v1/conversations/{conversation_id}"]
        assert set(operations) == {"get", "delete"}
        assert {"404", "429", "503"} <= set(operations["get"]["responses"])
        assert "429" in schema["paths"]["/v1/retrieve"]["post"]["responses"]
        assert HTTP.get(f"{url}/v1/conversations/{odd}").status_code == 401


# ---------------------------------------------------------------- rates, one process


def test_rates_per_key_in_one_process(tmp_path: Path, standin: ChatStandIn) -> None:
    key_file = tmp_path / "keys.json"
    app = add_key(key_file, "app", [])
    free = add_key(key_file, "free", [], {"requests_per_minute": None})
    thrifty = add_key(key_file, "thrifty", [], {"judge_tokens_per_minute": 60})
    query = {"query": "income tax", "k": 1}
    limits = ServeLimits(requests_per_minute=2)
    with serving(tmp_path, key_file, standin, limits=limits) as url:
        for _ in range(2):
            assert HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(app)).status_code == 200
        limited = HTTP.get(f"{url}/v1/trees", headers=bearer(app))  # every keyed request counts
        assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limited"
        assert limited.headers["Retry-After"] == "30"
        assert "'app'" in limited.json()["error"]["message"]
        for _ in range(4):  # its own entry says: no limit
            assert HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(free)).status_code == 200
        first = HTTP.post(f"{url}/v1/retrieve", json=query, headers=bearer(thrifty))
        assert first.status_code == 200 and first.json()["usage"]["input_tokens"] > 60
        spent = HTTP.post(f"{url}/v1/rerank", headers=bearer(thrifty),
                          json={"query": "tax", "documents": ["income tax", "roses"]})
        assert spent.status_code == 429 and spent.json()["error"]["limit"] == "judge_tokens_per_minute"
        assert int(spent.headers["Retry-After"]) >= 2
