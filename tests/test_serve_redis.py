"""Conversations and per-key rates in a real Redis (`serve --state redis://...`): the store and
the buckets against a started `redis-server`, then three `decisionrag serve` processes sharing
it — turns spread over all three, two turns at once, a key's rate across servers, and Redis
killed and restarted mid-conversation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _chat_standin import ChatStandIn
from _processes import free_port, http_ok, wait_until
from _redis_server import RedisServer
from _serve_helpers import write_tree
from decisionrag._errors import InputError
from decisionrag._query import Turn
from decisionrag._serve._auth import Principal, hash_key, new_key
from decisionrag._serve._conversations import ConversationState, RedisConversations, open_conversations
from decisionrag._serve._errors import ServeError
from decisionrag._serve._rates import KeyLimiter
from decisionrag._serve._redis import BREAK_SECONDS, RedisState, redact
from decisionrag._serve._settings import ServeLimits

WHO = Principal("app", frozenset({"*"}), "a" * 64)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis this test may kill or freeze."""
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


def store_at(url: str, capacity: int = 1_000, ttl: float = 3_600.0,
             timeout: float = 1.0) -> RedisConversations:
    store = open_conversations(capacity, ttl, None, url, timeout)
    assert isinstance(store, RedisConversations)
    return store


def said(text: str) -> Any:
    def change(state: ConversationState) -> None:
        state.history.append(Turn("user", text))

    return change


def texts(state: ConversationState) -> list[str]:
    return [turn.text for turn in state.history]


async def raw_redis(url: str, *command: Any) -> Any:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        return await client.execute_command(*command)
    finally:
        await client.aclose()


# ------------------------------------------------------------------- the store and the buckets


def test_two_replicas_writing_one_conversation_at_once_keep_every_turn(redis: RedisServer) -> None:
    url = redis.url.replace("/0", "/1")
    key = ("identity", "docs", "trip")

    async def run() -> ConversationState:
        first, second = store_at(url), store_at(url)  # two pools: two servers' views

        async def write(store: RedisConversations, who: str) -> None:
            for i in range(40):
                await store.aupdate(key, said(f"{who}-{i}"))

        try:
            await asyncio.gather(write(first, "a"), write(second, "b"), write(first, "c"))
            return await second.aget(key)
        finally:
            await first.aclose()
            await second.aclose()

    seen = texts(asyncio.run(run()))
    assert len(seen) == 120 and set(seen) == {f"{w}-{i}" for w in "abc" for i in range(40)}
    for who in "abc":  # each writer's turns in its own order
        assert [t for t in seen if t.startswith(f"{who}-")] == [f"{who}-{i}" for i in range(40)]


def test_capacity_drops_the_least_recently_used_ttl_expires_and_delete_forgets(redis: RedisServer) -> None:
    url = redis.url.replace("/0", "/2")

    async def run() -> None:
        store = store_at(url, capacity=3)
        short = store_at(url.replace("/2", "/3"), ttl=0.4)
        try:
            for name in "abcd":
                await store.aupdate(("k", "docs", name), said(name))
            assert await store.alen() == 3 and (await store.aget(("k", "docs", "a"))).history == []
            assert await raw_redis(url, "EXISTS", store.name(("k", "docs", "a"))) == 0  # removed, not hidden
            await store.aupdate(("k", "docs", "b"), said("b2"))  # b is now the most recently used
            await store.aupdate(("k", "docs", "e"), said("e"))
            assert (await store.aget(("k", "docs", "c"))).history == []
            assert texts(await store.aget(("k", "docs", "b"))) == ["b", "b2"]
            assert (await store.aget(("other", "docs", "b"))).history == []  # keys never share one
            assert await store.adelete(("k", "docs", "b")) is True
            assert await store.adelete(("k", "docs", "b")) is False
            assert (await store.aget(("k", "docs", "b"))).history == [] and await store.alen() == 2

            await short.aupdate(("k", "docs", "x"), said("x"))
            assert texts(await short.aget(("k", "docs", "x"))) == ["x"]
            ttl_ms = await raw_redis(url.replace("/2", "/3"), "PTTL", short.name(("k", "docs", "x")))
            assert 0 < ttl_ms <= 400  # the TTL is Redis's own expiry
            await asyncio.sleep(0.6)
            assert (await short.aget(("k", "docs", "x"))).history == []

            await raw_redis(url, "SET", store.name(("k", "docs", "d")), "{not json")
            assert (await store.aget(("k", "docs", "d"))).history == []  # damaged: starts again
            assert texts(await store.aupdate(("k", "docs", "d"), said("again"))) == ["again"]
        finally:
            await store.aclose()
            await short.aclose()

    asyncio.run(run())


def test_rate_buckets_are_shared_by_replicas_and_fall_back_per_process(own_redis: RedisServer) -> None:
    limits = ServeLimits(requests_per_minute=3, judge_tokens_per_minute=600)

    async def run() -> None:
        one, two = RedisState(own_redis.url, 1.0), RedisState(own_redis.url, 1.0)
        first, second = KeyLimiter(limits, one), KeyLimiter(limits, two)
        other = Principal("app", frozenset({"*"}), "b" * 64)  # the same name, another key
        try:
            await first.admit(WHO)
            await second.admit(WHO)
            await first.admit(WHO)
            with pytest.raises(ServeError) as caught:
                await second.admit(WHO)
            assert caught.value.status == 429 and caught.value.type == "rate_limited"
            assert 15 <= int(caught.value.headers["Retry-After"]) <= 21  # a token every 20 s
            await second.admit(other)  # its own bucket

            async with first.judged(WHO) as meter:  # let in while above zero, then charged
                meter.tokens = 1_000
            with pytest.raises(ServeError) as caught:
                async with second.judged(WHO):
                    pass
            assert caught.value.extra["limit"] == "judge_tokens_per_minute"
            assert 40 <= int(caught.value.headers["Retry-After"]) <= 41  # 400 + 1 tokens at 10/s

            own_redis.kill()  # Redis gone: each process bounds the key by itself meanwhile
            started = time.monotonic()
            for _ in range(3):  # this process's own bucket for the key: full
                await first.admit(other)
            with pytest.raises(ServeError) as caught:
                await first.admit(other)
            assert caught.value.status == 429 and time.monotonic() - started < 3
        finally:
            await one.aclose()
            await two.aclose()

    asyncio.run(run())


def test_redis_down_is_a_quick_503_and_it_is_used_again_once_back(own_redis: RedisServer) -> None:
    key = ("identity", "docs", "trip")

    async def run() -> None:
        store = store_at(own_redis.url, timeout=0.5)
        try:
            await store.aupdate(key, said("before"))
            own_redis.kill()
            own_redis.start()  # restarted between two requests: the pooled connection is stale
            assert texts(await store.aget(key)) == ["before"]  # replaced at once, no error
            own_redis.kill()
            for _ in range(2):  # the first finds it down; the next is answered at once
                started = time.monotonic()
                with pytest.raises(ServeError) as caught:
                    await store.aupdate(key, said("lost"))
                assert caught.value.status == 503 and caught.value.type == "state_unavailable"
                assert caught.value.headers["Retry-After"] == "1"
                assert time.monotonic() - started < 1.5
            own_redis.start()  # same port, same append-only file
            await asyncio.sleep(BREAK_SECONDS + 0.1)
            assert texts(await store.aupdate(key, said("after"))) == ["before", "after"]

            own_redis.freeze()  # alive but answering nothing
            started = time.monotonic()
            with pytest.raises(ServeError) as caught:
                await store.aget(key)
            assert caught.value.status == 503 and time.monotonic() - started < 1.5
            own_redis.thaw()
            await asyncio.sleep(BREAK_SECONDS + 0.1)
            assert texts(await store.aget(key)) == ["before", "after"]
        finally:
            await store.aclose()

    asyncio.run(run())


def test_a_timeout_among_successes_fails_that_request_only(redis: RedisServer) -> None:
    async def run() -> None:
        state = RedisState(redis.url, 0.3)

        async def slow(client: Any) -> None:  # this process behind, not Redis
            await asyncio.sleep(1)

        try:
            await state.run(lambda client: client.ping())
            lagging = asyncio.ensure_future(state.run(slow))
            await asyncio.sleep(0.1)
            assert await state.run(lambda client: client.ping())  # Redis answers meanwhile
            with pytest.raises(ServeError):
                await lagging
            assert state.available and await state.run(lambda client: client.ping())
            with pytest.raises(ServeError):  # nothing else succeeded: taken for down
                await state.run(slow)
            assert not state.available
            with pytest.raises(ServeError):
                await state.run(lambda client: client.ping())  # at once, without trying
        finally:
            await state.aclose()

    asyncio.run(run())


def test_urls_are_checked_and_passwords_never_shown() -> None:
    assert redact("redis://user:s3cret@db.internal:6380/2") == "redis://user:***@db.internal:6380/2"
    assert redact("rediss://:s3cret@db/0") == "rediss://:***@db/0"
    assert redact("redis://db:6379/0") == "redis://db:6379/0"
    for bad in ("redis://", "http://:s3cret@db:6379/0", "redis://:s3cret@db:port/0", "redis://db:6379/x"):
        with pytest.raises(InputError) as caught:
            RedisState(bad, 1.0)
        assert "s3cret" not in str(caught.value)
        assert "expected redis://HOST:PORT/DB" in str(caught.value) or "number" in str(caught.value)


# ------------------------------------------------------------- three servers sharing one Redis


class Cluster:
    def __init__(self, redis: RedisServer, ports: list[int], keys: dict[str, str], standin: ChatStandIn):
        self.redis = redis
        self.urls = [f"http://127.0.0.1:{port}" for port in ports]
        self.keys = keys
        self.standin = standin

    def post(self, server: int, path: str, body: dict[str, Any], key: str = "app") -> httpx.Response:
        return httpx.post(self.urls[server] + path, json=body, timeout=30,
                          headers={"Authorization": f"Bearer {self.keys[key]}", "Connection": "close"})

    def get(self, server: int, path: str, key: str = "app") -> httpx.Response:
        return httpx.get(self.urls[server] + path, timeout=30,
                         headers={"Authorization": f"Bearer {self.keys[key]}"})

    def turns(self, server: int, conversation: str) -> list[str]:
        response = self.get(server, f"/v1/conversations/{conversation}")
        assert response.status_code == 200, response.text
        return [m["content"] for m in response.json()["messages"] if m["role"] == "user"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    redis = RedisServer(root / "redis").start()
    tree = write_tree(root / "docs.tree")
    keys = {"app": new_key(), "metered": new_key(), "twin": new_key()}
    (root / "keys.json").write_text(json.dumps({"keys": [
        {"name": "app", "sha256": hash_key(keys["app"]), "trees": ["*"]},
        {"name": "app", "sha256": hash_key(keys["twin"]), "trees": ["*"]},  # the same name
        {"name": "metered", "sha256": hash_key(keys["metered"]), "trees": ["*"], "requests_per_minute": 4},
    ]}))
    standin = ChatStandIn().__enter__()
    ports = [free_port() for _ in range(3)]
    processes: list[subprocess.Popen[str]] = []
    try:
        for number, port in enumerate(ports):  # the third runs two workers
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "decisionrag", "serve", str(tree), "--judge", "scripted",
                 "--port", str(port), "--state", redis.url, "--api-key-file", str(root / "keys.json"),
                 "--generator", "openai-compatible:stand-in", "--generator-base-url", standin.base_url,
                 "--workers", "2" if number == 2 else "1", "--log-level", "warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for process, port in zip(processes, ports, strict=True):
            wait_until(process, http_ok(f"http://127.0.0.1:{port}/readyz"), what="serve", timeout=90,
                       log=lambda process=process: process.stderr.read() if process.stderr else "")
        yield Cluster(redis, ports, keys, standin)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        standin.__exit__(None, None, None)
        redis.stop()


@pytest.mark.slow
def test_a_conversation_spread_over_three_servers_keeps_every_turn(cluster: Cluster) -> None:
    asked: list[str] = []
    answered: list[str] = []
    for turn in range(9):
        query = f"question {turn}: how do I renew my passport?"
        response = cluster.post(turn % 3, "/v1/answer", {"query": query, "conversation_id": "trip",
                                                         "k": 2, "top": 1})
        assert response.status_code == 200, response.text
        prompt = cluster.standin.requests[-1]["messages"][-1]["content"]
        for earlier, reply in zip(asked[-2:], answered[-2:], strict=True):  # from the other servers
            assert f"User: {earlier}\n" in prompt, (turn, prompt)
            assert f"Agent: {reply.removesuffix(' [1]')}\n" in prompt, (turn, prompt)
        asked.append(query)
        answered.append(response.json()["answer"])
    for server in range(3):
        stored = cluster.get(server, "/v1/conversations/trip").json()
        assert [m["content"] for m in stored["messages"][0::2]] == asked
        assert [m["role"] for m in stored["messages"]] == ["user", "assistant"] * 9
        assert 3_590 < stored["expires_in"] <= 3_600
    assert cluster.get(0, "/v1/conversations/trip", key="twin").status_code == 404  # not its own
    gone = httpx.delete(cluster.urls[1] + "/v1/conversations/trip", timeout=30,
                        headers={"Authorization": f"Bearer {cluster.keys['app']}"})
    assert gone.json()["deleted"] is True
    assert cluster.get(2, "/v1/conversations/trip").status_code == 404


@pytest.mark.slow
def test_two_turns_sent_at_once_to_two_servers_are_both_kept(cluster: Cluster) -> None:
    rounds = 15
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def send(server: int) -> None:
        for i in range(rounds):
            barrier.wait(10)
            response = cluster.post(server, "/v1/retrieve", {"query": f"s{server} turn {i} passport",
                                                             "conversation_id": "together", "k": 1})
            if response.status_code != 200:
                failures.append(response.text)

    threads = [threading.Thread(target=send, args=(server,)) for server in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures
    seen = cluster.turns(2, "together")
    assert sorted(seen) == sorted(f"s{server} turn {i} passport" for server in (0, 1) for i in range(rounds))


@pytest.mark.slow
def test_a_key_over_its_rate_on_one_server_is_limited_on_the_others(cluster: Cluster) -> None:
    body = {"query": "income tax", "k": 1}
    for server in (0, 1, 2, 0):  # 4 per minute, spent on three servers
        assert cluster.post(server, "/v1/retrieve", body, key="metered").status_code == 200
    for server in (1, 2):
        limited = cluster.post(server, "/v1/retrieve", body, key="metered")
        assert limited.status_code == 429, limited.text
        assert limited.json()["error"]["type"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 15  # a token every 15 s
    assert cluster.post(1, "/v1/retrieve", body).status_code == 200  # another key: its own rate


@pytest.mark.slow
def test_redis_killed_and_restarted_mid_conversation(cluster: Cluster) -> None:
    def turn(server: int, text: str) -> httpx.Response:
        return cluster.post(server, "/v1/retrieve", {"query": text, "conversation_id": "outage",
                                                     "k": 1, "timeout": 5})

    assert turn(0, "renew my passport").status_code == 200
    assert turn(1, "it was stolen").status_code == 200
    cluster.redis.kill()
    try:
        for server in range(3):  # what needs no state goes on
            assert cluster.post(server, "/v1/retrieve", {"query": "income tax", "k": 1}).status_code == 200
            assert httpx.get(cluster.urls[server] + "/readyz", timeout=5).status_code == 200
        started = time.monotonic()
        failed = turn(2, "lost in the outage")
        assert failed.status_code == 503 and failed.json()["error"]["type"] == "state_unavailable"
        assert time.monotonic() - started < 5 and failed.headers["Retry-After"] == "1"
        assert cluster.get(0, "/v1/conversations/outage").status_code == 503
    finally:
        cluster.redis.start()  # same port, same append-only file: what it acknowledged is back
    assert retried(lambda: turn(2, "after the restart")).status_code == 200
    for server in range(3):  # no server restarted; nothing of the failed turn was written
        stored = retried(lambda server=server: cluster.get(server, "/v1/conversations/outage"))
        assert [m["content"] for m in stored.json()["messages"]] == [
            "renew my passport", "it was stolen", "after the restart"]


def retried(call: Any, seconds: float = 10) -> httpx.Response:
    """`call()` again after each 503's Retry-After, as a client would, for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while (response := call()).status_code == 503 and time.monotonic() < deadline:
        time.sleep(float(response.headers.get("Retry-After", "1")))
    assert response.status_code == 200, response.text
    return response


def test_an_answer_that_cannot_be_kept_is_a_503_and_leaves_the_conversation_whole(
        own_redis: RedisServer, tmp_path: Path) -> None:
    from _chat_standin import cite_first
    from _serve_helpers import live_server, settings
    from decisionrag import Client
    from decisionrag._errors import ServerError

    def answer_then_lose_redis(body: dict[str, Any]) -> str:  # Redis dies while the model writes
        own_redis.kill()
        return cite_first(body)

    tree = write_tree(tmp_path / "docs.tree")
    with ChatStandIn(answer_then_lose_redis) as standin, live_server(settings(
            {"docs": tree}, state_url=own_redis.url, generator="openai-compatible:stand-in",
            generator_base_url=standin.base_url)) as url, Client(url) as client:
        with pytest.raises(ServerError) as caught:
            client.answer("How do I renew my passport?", conversation_id="c", k=2, top=1)
        assert caught.value.status == 503 and caught.value.type == "state_unavailable"
        own_redis.start()
        time.sleep(BREAK_SECONDS + 0.1)
        seen: list[str] = []
        with pytest.raises(ServerError) as caught:
            for event in client.stream_answer("And if it was stolen?", conversation_id="c", k=2, top=1):
                seen.append(event.kind)
        assert caught.value.type == "state_unavailable"  # the stream ends in an error, not `done`
        assert seen[0] == "retrieved" and "delta" in seen and "done" not in seen
        own_redis.start()
        time.sleep(BREAK_SECONDS + 0.1)
        kept = client.conversation("c")["messages"]
    assert [(m["role"], m["content"]) for m in kept] == [  # each question, no answer half-kept
        ("user", "How do I renew my passport?"), ("user", "And if it was stolen?")]
