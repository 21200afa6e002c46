"""Bounded time (issue #16): one deadline per query over connect, every byte and every retry.

Every test talks to the fault server (`decisionrag._judges._faults`, a real HTTP server on
127.0.0.1) and checks the time to a clear error, not only the error.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._cli._waiting import notice_when_slow
from decisionrag._deadline import QueryDeadline
from decisionrag._errors import DeadlineExceeded, JudgeUnavailable
from decisionrag._judges import BinaryRequest, load_judge
from decisionrag._judges._faults import FaultServer
from decisionrag._navigate import Navigator
from decisionrag._tree import Tree

REQUEST = BinaryRequest("renew a passport", ("Is it on Page 1?", "Is it on Page 2?"))


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture(scope="module")
def tree_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for i, topic in enumerate(("passports", "taxes", "visas")):
        (folder / f"{topic}.md").write_text(
            f"# {topic.title()}\n\n## Renew\n\nHow to renew {topic} {i}.\n\n## Fees\n\nFees {i}.\n")
    return build_tree([folder], folder / "docs.tree").path


async def _binary(judge_id: str, **options: object) -> list[float]:
    judge = load_judge(judge_id, **options)
    try:
        return (await judge.binary(REQUEST)).probabilities
    finally:
        await judge.aclose()


async def test_a_trickling_body_is_cut_at_the_timeout(faults: FaultServer) -> None:
    start = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="no response within"):
        await _binary(faults.judge_id("trickle"), timeout=0.6, deadline=1.5, backoff_initial=0.05)
    assert time.monotonic() - start < 2.5  # one byte every 0.5 s never resets the clock


async def test_retry_after_past_the_query_deadline_fails_at_once(faults: FaultServer) -> None:
    for fault in ("storm-429", "storm-503"):
        start = time.monotonic()
        with QueryDeadline(5), pytest.raises(DeadlineExceeded, match="retry after 100000s"):
            await _binary(faults.judge_id(fault))  # the default policy: caps Retry-After at 60 s
        assert time.monotonic() - start < 1.0


async def test_the_query_retry_budget_is_shared_by_its_calls(faults: FaultServer) -> None:
    faults.reset()
    with QueryDeadline(None, retry_budget=1), pytest.raises(DeadlineExceeded, match="budget of 1"):
        await _binary(faults.judge_id("burst-500"), backoff_initial=0.01)
    assert faults.counts["burst-500"] == 2  # one try, one retry, then the budget is spent


async def test_a_hanging_judge_meets_the_navigator_deadline(faults: FaultServer, tree_path: Path) -> None:
    judge = load_judge(faults.judge_id("hang"))  # the default policy: 60 s per attempt
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, judge, "flat")
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded, match=r"deadline of 1\.5s passed.*page"):
            await navigator.aretrieve("how do I renew a passport?", deadline=1.5)
        assert time.monotonic() - start < 2.5
        await judge.aclose()


def test_the_sync_api_takes_the_deadline_too(faults: FaultServer, tree_path: Path) -> None:
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, load_judge(faults.judge_id("ok")), "flat")
        result = navigator.retrieve("how do I renew a passport?", k=3, deadline=10)
        assert result.hits


def test_ask_stops_at_its_deadline_with_a_one_line_error(
    faults: FaultServer, tree_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    code = main(["ask", str(tree_path), "renew?", "--judge", faults.judge_id("hang"),
                 "--deadline", "1.5", "--preset", "flat"])
    assert code == 2
    assert time.monotonic() - start < 3.0
    err = capsys.readouterr().err
    assert "deadline of 1.5s passed" in err and "Traceback" not in err


def test_judge_command_with_a_trickling_server(
    faults: FaultServer, capsys: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    code = main(["judge", faults.judge_id("trickle"), "--context", "c", "-q", "yes?",
                 "-o", "timeout=0.6", "-o", "deadline=1.5", "-o", "backoff_initial=0.05"])
    assert code == 2
    assert time.monotonic() - start < 2.5
    assert "no response within" in capsys.readouterr().err
    start = time.monotonic()
    assert main(["judge", faults.judge_id("trickle"), "--context", "c", "-q", "yes?",
                 "--deadline", "1"]) == 2
    assert time.monotonic() - start < 2.0


async def test_a_slow_judge_gets_a_progress_line(faults: FaultServer) -> None:
    out = io.StringIO()
    scope = QueryDeadline(10)
    with notice_when_slow(scope, after=0.5, out=out), scope:
        assert await _binary(faults.judge_id("slow"))
    assert "still waiting for the judge after" in out.getvalue()
    assert "deadline in" in out.getvalue()


def test_waiting_counts_from_the_first_request_not_from_loading() -> None:
    out = io.StringIO()
    scope = QueryDeadline(None)
    with notice_when_slow(scope, after=1.0, out=out):
        time.sleep(1.5)  # opening the tree, loading a model: not waiting for the judge
        assert out.getvalue() == ""
        with scope:
            time.sleep(0.3)  # the walk's local work before its first request
            scope.request_started()
            time.sleep(1.4)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "still waiting for the judge after 1s" in lines[0], lines
