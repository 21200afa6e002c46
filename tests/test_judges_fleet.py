"""A judge fleet over three real `jevcompat mock` servers: spreading, affinity, failover."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from tests.test_judges_jev import Mock, start_mock, stop_mock

from decisionrag._errors import JudgeConfigError, JudgeUnavailable
from decisionrag._judges import BinaryRequest, load_judge
from decisionrag._judges._fleet import FleetTransport, split_urls


@pytest.fixture
def fleet() -> Iterator[list[Mock]]:
    mocks = [start_mock() for _ in range(3)]
    yield mocks
    for mock in mocks:
        if mock.process.poll() is None:
            stop_mock(mock)


def request(i: int, batches: int = 1) -> BinaryRequest:
    context = f"Query {i}: how do I renew passport {i}?\n[1] Renewal\n[2] Tax\n[3] Visas {i}"
    questions = tuple(f"Is the answer under candidate {c}?" for c in range(3 * batches))
    return BinaryRequest(context, questions)


def transport_of(judge: object) -> FleetTransport:
    transport = judge._transport  # type: ignore[attr-defined]
    assert isinstance(transport, FleetTransport)
    return transport


def test_requests_spread_evenly_while_all_are_healthy(fleet: list[Mock]) -> None:
    urls = ",".join(m.url for m in fleet)
    judge = load_judge(f"jev-compatible:{urls}", max_questions=3)

    async def run() -> None:
        for start in range(0, 300, 10):
            results = await asyncio.gather(*(judge.binary(request(i)) for i in range(start, start + 10)))
            assert all(len(r.probabilities) == 3 for r in results)
        await judge.aclose()

    asyncio.run(run())
    sent = [int(s["sent"]) for s in transport_of(judge).stats().values()]
    assert sum(sent) == 300
    # 100 each when perfectly even; hashing 300 contexts, a share under 70 is 3.7 sd away
    assert min(sent) >= 70, sent


def test_batches_of_one_context_stay_on_one_server(fleet: list[Mock]) -> None:
    urls = ",".join(m.url for m in fleet)
    judge = load_judge(f"jev-compatible:{urls}", max_questions=3)
    transport = transport_of(judge)

    async def run() -> None:
        for i in range(6):  # sequential: nothing in flight, so affinity alone decides
            before = {u: s["sent"] for u, s in transport.stats().items()}
            await judge.binary(request(i, batches=4))  # 4 requests over one state
            grew = [u for u, s in transport.stats().items() if s["sent"] > before[u]]
            assert len(grew) == 1
            assert transport.stats()[grew[0]]["sent"] - before[grew[0]] == 4
        await judge.aclose()

    asyncio.run(run())


def test_a_server_killed_mid_run_loses_no_query(fleet: list[Mock]) -> None:
    urls = ",".join(m.url for m in fleet)
    judge = load_judge(f"jev-compatible:{urls}", max_questions=3, cooldown=30)
    transport = transport_of(judge)

    async def run() -> None:
        done = 0
        for start in range(0, 60, 10):
            if start == 30:
                fleet[1].process.kill()
                fleet[1].process.wait()
                killed_at = transport.stats()[fleet[1].url]["sent"]
            results = await asyncio.gather(*(judge.binary(request(i)) for i in range(start, start + 10)))
            done += sum(len(r.probabilities) == 3 for r in results)
        assert done == 60
        stats = transport.stats()
        # after the first failure the dead server is out: at most the requests in flight then
        assert stats[fleet[1].url]["sent"] - killed_at <= 10
        assert stats[fleet[1].url]["healthy"] == 0.0
        assert stats[fleet[0].url]["sent"] + stats[fleet[2].url]["sent"] >= 30
        await judge.aclose()

    asyncio.run(run())


def test_every_server_down_is_a_clear_error(fleet: list[Mock]) -> None:
    urls = ",".join(m.url for m in fleet)
    for mock in fleet:
        stop_mock(mock)
    judge = load_judge(f"jev-compatible:{urls}", deadline=3, cooldown=0.2, max_cooldown=0.5)

    async def run() -> None:
        with pytest.raises(JudgeUnavailable, match=r"every server failed|deadline spent"):
            await judge.binary(request(0))
        await judge.aclose()

    asyncio.run(run())


def test_fleet_ids_are_checked() -> None:
    with pytest.raises(JudgeConfigError, match="listed twice"):
        split_urls("http://a:1,http://a:1")
    with pytest.raises(JudgeConfigError, match="not an http"):
        split_urls("http://a:1,ftp://b")
    with pytest.raises(JudgeConfigError, match="balance"):
        load_judge("jev-compatible:http://127.0.0.1:1,http://127.0.0.1:2", balance=0.5)


def test_one_hot_context_spills_over_when_its_server_is_busy(fleet: list[Mock]) -> None:
    urls = ",".join(m.url for m in fleet)
    judge = load_judge(f"jev-compatible:{urls}", max_questions=1, concurrency=2)

    async def run() -> None:
        result = await judge.binary(request(7, batches=4))  # 12 requests over one state
        assert len(result.probabilities) == 12
        await judge.aclose()

    asyncio.run(run())
    sent = [int(s["sent"]) for s in transport_of(judge).stats().values()]
    assert sum(sent) == 12 and sorted(sent)[1] > 0  # at least two servers shared the load


def test_navigation_over_the_fleet_survives_a_killed_server(fleet: list[Mock], shared_data,
                                                            tmp_path) -> None:
    from decisionrag import Navigator, Tree, build_tree

    build_tree([shared_data / "xquad-en" / "corpus.jsonl"], tmp_path / "x.tree")
    urls = ",".join(m.url for m in fleet)
    judge = load_judge(f"jev-compatible:{urls}", cooldown=30)
    navigator = Navigator(Tree.open(tmp_path / "x.tree"), judge)
    transport = transport_of(judge)
    ranked = [navigator.retrieve(f"Who founded the university in question {i}?", k=3)
              for i in range(4)]
    fleet[0].process.kill()
    fleet[0].process.wait()
    for i in range(4, 40):  # until the fleet has met the dead server (a few queries)
        ranked.append(navigator.retrieve(f"Who founded the university in question {i}?", k=3))
        if transport.stats()[fleet[0].url]["healthy"] == 0.0 and i >= 7:
            break
    assert transport.stats()[fleet[0].url]["healthy"] == 0.0
    assert all(len(result.hits) == 3 and not result.degraded for result in ranked)
