"""Pacing a slow self-hosted server (`decisionrag._judges._pacing`): a request's calls are
sized from the server's measured speed so each is answered within `seconds_per_call`, sent
one after another when they had to be cut; a fast server keeps its large calls; a call that
still fails names its size and what to change."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from decisionrag._errors import DeadlineExceeded, JudgeUnavailable
from decisionrag._judges import BinaryRequest, load_judge
from decisionrag._judges._base import Limits
from decisionrag._judges._jev import JevJudge
from decisionrag._judges._pacing import PROBE, Pacer

CONTEXT = "Shared context. " * 50  # about 200 tokens


class TimedServer:
    """A System One transport that takes `per_question` seconds per question, one call at a
    time (as a CPU server works), and records every call."""

    def __init__(self, per_question: float, fail: BaseException | None = None) -> None:
        self.per_question = per_question
        self.fail = fail
        self.calls: list[int] = []
        self.overlap = 0
        self._busy = False

    async def post(self, body: dict[str, Any]) -> tuple[Any, float]:
        if self.fail is not None:
            raise self.fail
        self.overlap += self._busy
        self._busy = True
        start = time.perf_counter()
        try:
            await asyncio.sleep(self.per_question * len(body["questions"]))
        finally:
            self._busy = False
        self.calls.append(len(body["questions"]))
        answers = {qid: {"type": "noul", "noul": int(qid[1:]) / 100} for qid in body["questions"]}
        return {"answers": answers, "usage": {"input_tokens": 10, "output_tokens": 0}}, \
            time.perf_counter() - start

    async def aclose(self) -> None:
        pass


def judge(server: TimedServer, seconds: float | None) -> JevJudge:
    return JevJudge("m", server, limits=Limits(max_questions=None, questions_per_call=64),
                    price_per_million_input=None, who="jev-compatible:test",
                    pacer=Pacer(seconds) if seconds else None)


def request(n: int) -> BinaryRequest:
    return BinaryRequest(CONTEXT, tuple(f"Is it about item {i}?" for i in range(n)))


async def test_a_slow_server_gets_calls_it_answers_in_time() -> None:
    server = TimedServer(per_question=0.02)
    result = await judge(server, seconds=0.1).binary(request(30))
    assert server.calls[0] == PROBE  # nothing known yet: a probe first
    assert max(server.calls) <= 6 and sum(server.calls) == 30  # about 0.1 s / 0.02 s a question
    assert server.overlap == 0  # paced calls go one after another
    # every question answered, in order (the fake answers its question's index within a call)
    assert len(result.probabilities) == 30 and result.usage.requests == len(server.calls)


async def test_a_fast_server_keeps_its_large_calls() -> None:
    server = TimedServer(per_question=0.0)
    await judge(server, seconds=30).binary(request(3))  # small: no probe needed, but measured
    await judge_again(server)
    assert server.calls[0] == 3 and sorted(server.calls[1:]) == [36, 64]


async def judge_again(server: TimedServer) -> None:
    paced = judge(server, seconds=30)
    paced.pacer.rate = 1e-7  # type: ignore[union-attr]  # measured: very fast
    await paced.binary(request(100))


async def test_without_pacing_the_calls_are_as_before() -> None:
    server = TimedServer(per_question=0.0)
    await judge(server, seconds=None).binary(request(100))
    assert sorted(server.calls) == [36, 64]


@pytest.mark.parametrize("error", [JudgeUnavailable, DeadlineExceeded])
async def test_a_failed_call_names_its_size_and_the_options(error: type[JudgeUnavailable]) -> None:
    server = TimedServer(0.0, fail=error("jev-compatible:test: no response within 58.5s"))
    with pytest.raises(error) as caught:
        await judge(server, seconds=29.25).binary(request(3))
    message = str(caught.value)
    assert "no response within 58.5s" in message and "3 question(s)" in message
    assert "paced to 29.25 s each" in message and "timeout=SECONDS" in message


def test_pacing_is_asked_for_with_seconds_per_call() -> None:
    url = "jev-compatible:http://127.0.0.1:1"
    assert load_judge(url).pacer is None  # type: ignore[attr-defined]
    assert load_judge(url, seconds_per_call="12").pacer.seconds == 12.0  # type: ignore[attr-defined]
    assert load_judge(url, seconds_per_call="0").pacer is None  # type: ignore[attr-defined]


async def test_an_unpaced_failure_suggests_pacing() -> None:
    server = TimedServer(0.0, fail=JudgeUnavailable("jev-compatible:test: no response within 58.5s"))
    with pytest.raises(JudgeUnavailable, match=r"48 question\(s\), about .* tokens.*"
                       r"seconds_per_call=SECONDS"):
        await judge(server, seconds=None).binary(request(48))
