"""`decisionrag serve`: the real app under uvicorn on 127.0.0.1, talked to over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from _serve_helpers import CORPUS_B, live_server, settings, write_tree
from conftest import require_module
from decisionrag import Client, ServerError
from decisionrag._judges import SimulatedJudge
from decisionrag._judges._testing import overlap_score
from decisionrag._serve import ServeLimits
from decisionrag._serve._auth import add_key
from decisionrag._serve._service import navigator_filters

require_module("fastapi")

HTTP = httpx.Client(timeout=30)  # one pool for the whole module (a client per call costs 50 ms)


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve")
    return {"docs": write_tree(root / "docs.tree"), "garden": write_tree(root / "garden.tree", CORPUS_B)}


@pytest.fixture(scope="module")
def server(trees: dict[str, Path]) -> str:
    with live_server(settings(trees)) as url:
        yield url  # type: ignore[misc]


def test_retrieve_a_query(server: str) -> None:
    response = HTTP.post(f"{server}/v1/retrieve", json={"query": "How do I renew my passport?", "k": 2})
    assert response.status_code == 200
    body = response.json()
    assert [hit["id"] for hit in body["results"]] == ["https://example.org/passports#p0",
                                                      "https://example.org/passports#p1"]
    top = body["results"][0]
    assert top["doc_id"] == "https://example.org/passports"
    assert top["path"] == ["Travel", "Passports", "Renew"]
    assert top["metadata"]["lang"] == "en"  # the passage's own
    assert top["metadata"]["source"] == "https://example.org/passports"  # its document's
    assert body["tree"] == "docs" and body["trace"] is None
    assert body["usage"]["requests"] >= 3
    assert response.headers["x-request-id"] == body["request_id"]


def test_retrieve_with_trace_on_another_tree(server: str) -> None:
    body = HTTP.post(f"{server}/v1/retrieve",
                      json={"query": "when to prune roses", "tree": "garden", "k": 1, "trace": True}).json()
    assert body["results"][0]["id"] == "roses#p0"
    assert [stage["name"] for stage in body["trace"]][:2] == ["group 1", "page"]


def test_messages_give_the_history(server: str) -> None:
    turns = [{"role": "user", "content": "I lost my passport abroad"},
             {"role": "assistant", "content": "Sorry to hear that."},
             {"role": "user", "content": "How do I report a stolen passport?"}]
    body = HTTP.post(f"{server}/v1/retrieve", json={"messages": turns, "k": 1}).json()
    assert body["results"][0]["id"] == "https://example.org/passports#p1"
    alone = HTTP.post(f"{server}/v1/retrieve", json={"query": "income tax", "k": 1}).json()
    assert alone["results"][0]["doc_id"] == "taxes"
    after = HTTP.post(f"{server}/v1/retrieve", json={"messages": turns, "query": "income tax", "k": 1}).json()
    assert after["results"][0]["doc_id"] == "https://example.org/passports"  # the history is read


def test_a_conversation_keeps_its_history_and_notepad(trees: dict[str, Path]) -> None:
    with live_server(settings(trees)) as url:
        for text in ("renew my passport", "income tax refund"):
            answer = HTTP.post(f"{url}/v1/retrieve", json={"query": text, "conversation_id": "x"})
            assert answer.json()["conversation_id"] == "x"
        HTTP.post(f"{url}/v1/retrieve", json={"query": "prune roses", "conversation_id": "x",
                                               "tree": "garden"})
        store = url.app.state.service.conversations
        state = store.get(("anonymous", "docs", "x"))
        assert [turn.text for turn in state.history] == ["renew my passport", "income tax refund"]
        assert state.notepad == ["taxes", "https://example.org/passports"]
        assert store.get(("anonymous", "garden", "x")).notepad == ["roses"]
        turns = [{"role": "user", "content": "visa for a trip"}]
        HTTP.post(f"{url}/v1/retrieve", json={"messages": turns, "conversation_id": "x"})
        state = store.get(("anonymous", "docs", "x"))
        assert [turn.text for turn in state.history] == ["visa for a trip"]  # the client's turns win
        assert state.notepad[0] == "visas"


def test_trees_stats_and_nodes(server: str) -> None:
    listing = HTTP.get(f"{server}/v1/trees").json()["trees"]
    assert [(t["name"], t["documents"], t["passages"], t["default"]) for t in listing] == [
        ("docs", 4, 6, True), ("garden", 2, 2, False)]
    stats = HTTP.get(f"{server}/v1/trees/docs").json()
    assert stats["counts"]["passage"] == 6 and stats["generation"] == 1
    node = HTTP.get(f"{server}/v1/trees/docs/nodes/https://example.org/passports").json()
    assert node["node"]["kind"] == "document" and node["node"]["title"] == "Passports"
    assert [p["id"] for p in node["path"]] == ["root", "g:Travel"]
    assert [c["title"] for c in node["children"]] == ["Renew", "Lost"] and node["children_total"] == 2
    root = HTTP.get(f"{server}/v1/trees/docs/nodes/root", params={"limit": 1, "offset": 1}).json()
    assert [c["id"] for c in root["children"]] == ["g:Money"] and root["children_total"] == 2
    passage = HTTP.get(f"{server}/v1/trees/docs/nodes/taxes%23p1").json()
    assert passage["node"]["text"].startswith("Claim a tax refund") and passage["children"] == []
    missing = HTTP.get(f"{server}/v1/trees/docs/nodes/nope")
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "id"
    assert HTTP.get(f"{server}/v1/trees/nope").status_code == 404


def test_rerank_in_the_cohere_and_tei_shapes(server: str) -> None:
    documents = ["Prune roses in winter.", "Claim a tax refund online.", {"text": "Income tax is due."}]
    cohere = HTTP.post(f"{server}/v1/rerank", json={"query": "tax refund", "documents": documents,
                                                     "top_n": 2, "return_documents": True}).json()
    # the scripted judge's P(yes): share of the query's words ("user's question: tax refund") found
    assert [(r["index"], r["relevance_score"]) for r in cohere["results"]] == [(1, 0.5), (2, 0.25)]
    assert cohere["results"][0]["document"] == {"text": "Claim a tax refund online."}
    # every document in one shared context, then the walk's choice step over the best
    assert cohere["usage"]["requests"] == 2
    tei = HTTP.post(f"{server}/rerank", json={"query": "tax refund", "texts": documents[:2],
                                               "return_text": True}).json()
    assert tei == [{"index": 1, "score": 0.5, "text": "Claim a tax refund online."},
                   {"index": 0, "score": 0.0, "text": "Prune roses in winter."}]
    v2 = HTTP.post(f"{server}/v2/rerank", json={"query": "tax refund", "documents": documents[:2]})
    assert v2.status_code == 200
    neither = HTTP.post(f"{server}/v1/rerank", json={"query": "tax"})
    assert neither.status_code == 422 and neither.json()["error"]["field"] == "documents"


def test_rerank_by_passage_id_on_the_default_tree_mixed_and_unknown(server: str) -> None:
    ids = [{"id": "https://example.org/passports#p1"}, {"id": "https://example.org/passports#p0"}]
    default = HTTP.post(f"{server}/v1/rerank", json={"query": "renew my passport", "documents": ids})
    named = HTTP.post(f"{server}/v1/rerank", json={"query": "renew my passport", "documents": ids,
                                                    "tree": "docs"})
    assert default.status_code == 200 and default.json()["results"] == named.json()["results"]
    mixed = HTTP.post(f"{server}/v1/rerank", json={
        "query": "tax refund", "return_documents": True,
        "documents": ["Claim a tax refund online.", {"id": "https://example.org/passports#p0"}]})
    assert mixed.status_code == 200
    assert [r["index"] for r in mixed.json()["results"]] == [0, 1]
    assert mixed.json()["results"][1]["document"]["text"]  # the passage's own text
    unknown = HTTP.post(f"{server}/v1/rerank", json={"query": "q", "documents": [{"id": "nope"}]})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "documents[0].id"
    both = HTTP.post(f"{server}/v1/rerank", json={"query": "q", "documents": [{"id": "x", "text": "y"}]})
    assert both.status_code == 422


def test_operations_endpoints(server: str) -> None:
    assert HTTP.get(f"{server}/healthz").json()["status"] == "ok"
    ready = HTTP.get(f"{server}/readyz").json()
    assert ready == {"status": "ready", "trees": ["docs", "garden"], "judge": "scripted"}
    HTTP.post(f"{server}/v1/retrieve", json={"query": "renew passport"})
    metrics = HTTP.get(f"{server}/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'decisionrag_http_requests_total{method="POST",route="/v1/retrieve",status="200"}' in text
    assert "decisionrag_http_request_seconds_bucket" in text
    assert 'decisionrag_judge_requests_total{kind="binary"}' in text
    assert "decisionrag_judge_input_tokens_total" in text
    assert "decisionrag_http_requests_in_flight" in text and "decisionrag_judge_requests_in_flight" in text
    document = HTTP.get(f"{server}/openapi.json").json()
    assert {"/v1/retrieve", "/v1/rerank", "/rerank", "/v1/trees", "/v1/trees/{name}",
            "/v1/trees/{name}/nodes/{node_id}", "/healthz", "/readyz", "/metrics"} <= set(document["paths"])
    assert document["components"]["schemas"]["RetrieveRequest"]["properties"]["k"]["maximum"] == 100
    docs = HTTP.get(f"{server}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_docs_page_needs_no_network(server: str) -> None:
    import re

    page = HTTP.get(f"{server}/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert assets and all(a.startswith("/") for a in assets), assets  # nothing from a CDN
    assert "cdn" not in page.text.lower()
    for asset in assets:
        assert HTTP.get(f"{server}{asset}").status_code == 200, asset


def test_request_id_is_taken_from_the_client(server: str) -> None:
    response = HTTP.get(f"{server}/v1/trees", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    odd = HTTP.get(f"{server}/v1/trees", headers={"X-Request-ID": "bad id\twith tab"})
    assert odd.headers["x-request-id"] != "bad id\twith tab"


# -- limits -------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field"), [
    ({"query": "x" * 4001}, "query"),
    ({"query": "x", "k": 101}, "k"),
    ({"query": "x", "k": 0}, "k"),
    ({"messages": [{"role": "user", "content": "hi"}] * 51}, "messages"),
    ({"messages": [{"role": "user", "content": "x" * 20_000}] * 2}, "messages"),
    ({"messages": [{"role": "assistant", "content": "hello"}]}, "messages"),
    ({}, "query"),
    ({"query": "   "}, "query"),
    ({"query": "x", "preset": "nope"}, "preset"),
    ({"query": "x", "timeout": 301}, "timeout"),
    ({"query": "x", "surprise": True}, "surprise"),
    ({"query": "x", "tree": "nope"}, "tree"),
])
def test_each_limit_names_its_field(server: str, body: dict[str, object], field: str) -> None:
    response = HTTP.post(f"{server}/v1/retrieve", json=body)
    assert response.status_code in (404, 422), response.text
    assert response.json()["error"]["field"] == field


def test_a_body_over_the_limit_is_413(server: str) -> None:
    big = {"query": "x", "context": "y" * 1_100_000}
    response = HTTP.post(f"{server}/v1/retrieve", json=big)
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "body"

    def chunks():  # no Content-Length: counted as it streams in
        for _ in range(12):
            yield b"x" * 100_000

    streamed = HTTP.post(f"{server}/v1/retrieve", content=chunks(),
                          headers={"content-type": "application/json"})
    assert streamed.status_code == 413


def test_rerank_limits(server: str) -> None:
    many = HTTP.post(f"{server}/v1/rerank", json={"query": "q", "documents": ["d"] * 1001})
    assert many.status_code == 422 and many.json()["error"]["field"] == "documents"
    long = HTTP.post(f"{server}/v1/rerank", json={"query": "q", "texts": ["a", "d" * 20_001]})
    assert long.status_code == 422 and long.json()["error"]["field"] == "texts[1]"


def test_filters_pass_through_to_the_navigator(server: str) -> None:
    if not navigator_filters():
        response = HTTP.post(f"{server}/v1/retrieve", json={"query": "x", "filters": {"lang": "en"}})
        assert response.status_code == 422 and response.json()["error"]["field"] == "filters"
        return
    kept = HTTP.post(f"{server}/v1/retrieve", json={"query": "income tax", "filters": {"source": "taxes"}})
    assert {hit["doc_id"] for hit in kept.json()["results"]} == {"taxes"}
    none = HTTP.post(f"{server}/v1/retrieve", json={"query": "income tax", "filters": {"lang": "de"}})
    assert none.status_code == 200 and none.json()["results"] == []
    bad = HTTP.post(f"{server}/v1/retrieve", json={"query": "x", "filters": {"lang": {"bogus": 1}}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "filters"


def test_queue_full_is_503_with_retry_after(trees: dict[str, Path]) -> None:
    judge = SimulatedJudge(0.3, scores=overlap_score)
    limits = ServeLimits(max_judge_requests=1, max_judge_queue=0)

    async def run(url: str) -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            first = asyncio.create_task(client.post("/v1/retrieve", json={"query": "renew passport"}))
            await asyncio.sleep(0.1)  # the first holds the only judge slot now
            second = await client.post("/v1/retrieve", json={"query": "income tax"})
            return await first, second

    with live_server(settings(trees, limits=limits), judge=judge) as url:
        first, second = asyncio.run(run(url))
        metrics = HTTP.get(f"{url}/metrics").text
    assert first.status_code == 200
    assert second.status_code == 503
    assert second.json()["error"]["type"] == "server_busy"
    assert int(second.headers["retry-after"]) >= 1
    assert "decisionrag_busy_rejections_total 1.0" in metrics


def test_judge_requests_wait_in_the_queue_within_its_bound(trees: dict[str, Path]) -> None:
    judge = SimulatedJudge(0.05, scores=overlap_score)
    limits = ServeLimits(max_judge_requests=2, max_judge_queue=64)

    async def run(url: str) -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            answers = await asyncio.gather(*(client.post("/v1/retrieve", json={"query": f"tax {i}"})
                                             for i in range(8)))
        return [a.status_code for a in answers]

    with live_server(settings(trees, limits=limits), judge=judge) as url:
        assert asyncio.run(run(url)) == [200] * 8


def test_deadline_is_504_with_what_was_done(trees: dict[str, Path]) -> None:
    judge = SimulatedJudge(0.2, scores=overlap_score)
    with live_server(settings(trees), judge=judge) as url:
        response = HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport", "timeout": 0.5})
        fast_enough = HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport", "timeout": 10})
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["type"] == "deadline_exceeded" and error["field"] == "timeout"
    done = error["done"]
    assert done["judge_requests"] >= 1 and done["questions_judged"] >= 2  # a group level at least
    assert done["judge_requests"] < fast_enough.json()["usage"]["requests"]
    assert 0.45 < done["seconds"] < 2.0


def test_server_default_deadline(trees: dict[str, Path]) -> None:
    judge = SimulatedJudge(0.3, scores=overlap_score)
    limits = ServeLimits(default_timeout=0.2)
    with live_server(settings(trees, limits=limits), judge=judge) as url:
        response = HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport"})
    assert response.status_code == 504
    assert response.json()["error"]["done"]["judge_requests"] == 0


# -- auth ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyed(trees: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str, Path]:
    key_file = tmp_path_factory.mktemp("keys") / "keys.json"
    admin = add_key(key_file, "admin", [])
    docs_only = add_key(key_file, "docs-app", ["docs"])
    with live_server(settings(trees, api_key_file=str(key_file))) as url:
        yield url, admin, docs_only, key_file  # type: ignore[misc]


def test_no_key_is_401(keyed: tuple[str, str, str, Path]) -> None:
    url = keyed[0]
    response = HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["type"] == "unauthorized"
    assert HTTP.get(f"{url}/v1/trees").status_code == 401
    assert HTTP.get(f"{url}/healthz").status_code == 200  # probes need no key
    assert HTTP.get(f"{url}/readyz").status_code == 200


def test_wrong_key_is_401(keyed: tuple[str, str, str, Path]) -> None:
    url = keyed[0]
    for header in ("Bearer drag_not-a-real-key", "Basic Zm9vOmJhcg==", "Bearer"):
        response = HTTP.post(f"{url}/v1/retrieve", json={"query": "x"}, headers={"Authorization": header})
        assert response.status_code == 401, header


def test_a_key_not_allowed_on_a_tree_is_403(keyed: tuple[str, str, str, Path]) -> None:
    url, admin, docs_only, _ = keyed
    mine = {"Authorization": f"Bearer {docs_only}"}
    assert HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport"}, headers=mine).status_code == 200
    refused = HTTP.post(f"{url}/v1/retrieve", json={"query": "roses", "tree": "garden"}, headers=mine)
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "tree"
    assert HTTP.get(f"{url}/v1/trees/garden", headers=mine).status_code == 403
    assert HTTP.get(f"{url}/v1/trees/garden/nodes/root", headers=mine).status_code == 403
    assert [t["name"] for t in HTTP.get(f"{url}/v1/trees", headers=mine).json()["trees"]] == ["docs"]
    everything = {"Authorization": f"Bearer {admin}"}
    assert HTTP.get(f"{url}/v1/trees/garden", headers=everything).status_code == 200


def test_a_revoked_key_stops_working_without_a_restart(keyed: tuple[str, str, str, Path]) -> None:
    url, _, _, key_file = keyed
    temporary = add_key(key_file, "temp", ["docs"])
    header = {"Authorization": f"Bearer {temporary}"}
    assert HTTP.get(f"{url}/v1/trees", headers=header).status_code == 200
    from decisionrag._serve._auth import remove_key

    remove_key(key_file, "temp")
    assert HTTP.get(f"{url}/v1/trees", headers=header).status_code == 401


def test_the_key_file_keeps_only_hashes(keyed: tuple[str, str, str, Path]) -> None:
    _, admin, _, key_file = keyed
    text = key_file.read_text()
    assert admin not in text
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert json.loads(text)["keys"][0]["name"] == "admin"


# -- the client ---------------------------------------------------------------------------

def test_client_sync_and_async(keyed: tuple[str, str, str, Path]) -> None:
    url, admin, _, _ = keyed
    with Client(url, api_key=admin) as client:
        result = client.retrieve("How do I renew my passport?", k=2, trace=True)
        assert result.ids == ["https://example.org/passports#p0", "https://example.org/passports#p1"]
        assert result.hits[0].path == ("Travel", "Passports", "Renew") and result.trace
        assert client.rerank("tax refund", ["roses", "claim a tax refund"]) == [(1, 0.5), (0, 0.0)]
        assert [t["name"] for t in client.trees()] == ["docs", "garden"]
        assert client.tree("garden")["counts"]["passage"] == 2
        assert client.node("docs", "https://example.org/passports")["node"]["title"] == "Passports"
        assert client.health()["status"] == "ok"
        with pytest.raises(TypeError, match="unknown options"):
            client.retrieve("x", kk=3)

    async def asynchronous() -> None:
        async with Client(url, api_key=admin) as client:
            found = await asyncio.gather(client.aretrieve("income tax refund", k=1),
                                         client.aretrieve("prune roses", tree="garden", k=1))
            assert [r.ids for r in found] == [["taxes#p1"], ["roses#p0"]]
            assert (await client.anode("garden", "roses"))["node"]["kind"] == "document"
            best = await client.arerank("roses", ["prune roses", "tax"], top_n=1)
            assert best == [(0, pytest.approx(1 / 3, abs=1e-6))]

    asyncio.run(asynchronous())


def test_client_errors(keyed: tuple[str, str, str, Path]) -> None:
    url, _, docs_only, _ = keyed
    with pytest.raises(ServerError) as caught:
        Client(url).retrieve("x")
    assert caught.value.status == 401 and caught.value.type == "unauthorized"
    with pytest.raises(ServerError) as caught:
        Client(url, api_key=docs_only).retrieve("x", tree="garden")
    assert caught.value.status == 403 and caught.value.field == "tree"
    with pytest.raises(ServerError) as caught:
        Client(url, api_key=docs_only).retrieve("x", k=1000)
    assert caught.value.status == 422 and caught.value.field == "k" and caught.value.request_id
    with pytest.raises(ServerError) as caught:
        Client("http://127.0.0.1:9", timeout=2).health()
    assert caught.value.status == 0


def test_client_reports_retry_after(trees: dict[str, Path]) -> None:
    judge = SimulatedJudge(0.3, scores=overlap_score)
    limits = ServeLimits(max_judge_requests=1, max_judge_queue=0)
    with live_server(settings(trees, limits=limits), judge=judge) as url:

        async def run() -> ServerError:
            async with Client(url) as client:
                first = asyncio.create_task(client.aretrieve("renew passport"))
                await asyncio.sleep(0.1)
                try:
                    await client.aretrieve("tax")
                except ServerError as exc:
                    await first
                    return exc
                raise AssertionError("no 503")

        error = asyncio.run(run())
    assert error.status == 503 and error.type == "server_busy"
    assert error.retry_after is not None and error.retry_after >= 1


# -- tree swap ----------------------------------------------------------------------------

def test_a_replaced_tree_file_is_swapped_in_under_load(tmp_path: Path) -> None:
    path = write_tree(tmp_path / "docs.tree")
    judge = SimulatedJudge(0.02, scores=overlap_score)

    async def load(url: str) -> tuple[list[int], list[str], httpx.Response]:
        statuses: list[int] = []
        tops: list[str] = []
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            slow = asyncio.create_task(client.post("/v1/retrieve", json={"query": "renew passport"},
                                                   headers={"X-Request-ID": "slow"}))

            async def one_client(n: int) -> None:
                for _ in range(15):
                    response = await client.post("/v1/retrieve", json={"query": "renew passport roses"})
                    statuses.append(response.status_code)
                    if response.status_code == 200:
                        tops.append(response.json()["results"][0]["doc_id"])

            async def swap() -> None:
                await asyncio.sleep(0.15)
                fresh = write_tree(tmp_path / "next.tree", CORPUS_B)
                os.replace(fresh, path)  # what an atomic rebuild does

            await asyncio.gather(*(one_client(n) for n in range(6)), swap())
            return statuses, tops, await slow

    with live_server(settings({"docs": path}), judge=judge) as url:
        statuses, tops, slow = asyncio.run(load(url))
        stats = HTTP.get(f"{url}/v1/trees/docs").json()
        metrics = HTTP.get(f"{url}/metrics").text
    assert statuses == [200] * 90
    assert "https://example.org/passports" in tops and "roses" in tops
    first_new = tops.index("roses")
    assert "https://example.org/passports" not in tops[first_new + 6:]  # nothing old after the swap
    assert slow.status_code == 200 and slow.json()["results"][0]["doc_id"] == "https://example.org/passports"
    assert stats["generation"] == 2 and stats["counts"]["passage"] == 2
    assert 'decisionrag_tree_reloads_total{tree="docs"} 1.0' in metrics


def test_a_broken_replacement_keeps_the_old_tree(tmp_path: Path) -> None:
    path = write_tree(tmp_path / "docs.tree")
    with live_server(settings({"docs": path})) as url:
        time.sleep(0.01)
        path.write_bytes(b"not a tree at all")
        response = HTTP.post(f"{url}/v1/retrieve", json={"query": "renew passport"})
        assert response.status_code == 200
        assert response.json()["results"][0]["doc_id"] == "https://example.org/passports"
        assert HTTP.get(f"{url}/v1/trees/docs").json()["generation"] == 1
