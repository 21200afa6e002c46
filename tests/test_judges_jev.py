"""The System One backends against the real reference server, `jevcompat mock`, run by the test.

Three paths: typesafe (the official SDK, TYPESAFE_BASE_URL pointed at the mock), openrouter
(base URL overridden) and jev-compatible (our httpx client). Every `--fault` the mock offers
must end in a JudgeError or in the same probabilities as the clean server (a documented
repair); the three faults that only change the fake model's answers cannot be seen in one
response and are only checked for valid probabilities.
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from decisionrag._errors import (
    JudgeConfigError,
    JudgeError,
    JudgeProtocolError,
    JudgeRequestError,
)
from decisionrag._judges import BinaryRequest, ChoiceRequest, Judge, load_judge

JEVCOMPAT = shutil.which("jevcompat") or str(Path(sys.executable).with_name("jevcompat"))
KEY = "test-key-123"
# these faults change what the fake model answers, not the shape of the answer
SEMANTIC_FAULTS = {"id-leaks", "batch-leaks", "order-leaks"}
CORE_FAULTS = ["first-question-only", "noul-range", "choice-sum", "nan", "cap-64",
               "text-errors", "xssi-200"]

BINARY = BinaryRequest(
    "Query: how do I renew a passport?\n[1] Passport renewal\n[2] Tax credits\n[3] Visas",
    ("Is the information needed on Page 1?", "Is the information needed on Page 2?",
     "Is the information needed on Page 3?"),
)
CHOICE = ChoiceRequest(BINARY.context, "Which page answers the question?",
                       ("Page 1", "Page 2", "Page 3", "Page 4"))
BIG_CHOICE = ChoiceRequest(BINARY.context, "Which passage?",
                           tuple(f"Passage {i}" for i in range(100)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Mock:
    url: str
    process: subprocess.Popen[bytes]


def start_mock(*args: str) -> Mock:
    """`jevcompat mock` on a free port; returns once it accepts connections."""
    port = free_port()
    process = subprocess.Popen([JEVCOMPAT, "mock", "--port", str(port), *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jevcompat mock exited: {process.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return Mock(f"http://127.0.0.1:{port}", process)
        except OSError:
            time.sleep(0.03)
    process.kill()
    raise RuntimeError("jevcompat mock did not start")


def stop_mock(mock: Mock) -> None:
    mock.process.terminate()
    try:
        mock.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        mock.process.kill()
        mock.process.wait()


@pytest.fixture(scope="module")
def clean() -> Iterator[Mock]:
    mock = start_mock()
    yield mock
    stop_mock(mock)


@pytest.fixture(scope="module")
def keyed() -> Iterator[Mock]:
    mock = start_mock("--key", KEY)
    yield mock
    stop_mock(mock)


def quick(**options: object) -> dict[str, object]:
    """Few, short retries: the mock never fails transiently, so retries only cost time."""
    return {"max_attempts": 2, "backoff_initial": 0.01, "timeout": 10, **options}


def jev_compatible(url: str, **options: object) -> Judge:
    return load_judge(f"jev-compatible:{url}", **quick(**options))


def typesafe(url: str, monkeypatch: pytest.MonkeyPatch, key: str = KEY, **options: object) -> Judge:
    monkeypatch.setenv("TYPESAFE_API_KEY", key)
    monkeypatch.setenv("TYPESAFE_BASE_URL", url)
    return load_judge("typesafe:jev-latest", **quick(compression=False, **options))


def openrouter(url: str, monkeypatch: pytest.MonkeyPatch, key: str = KEY) -> Judge:
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    return load_judge("openrouter:jev-latest", **quick(base_url=url))


async def answers(judge: Judge) -> tuple[list[float], list[float]]:
    try:
        binary = await judge.binary(BINARY)
        choice = await judge.choice(CHOICE)
    finally:
        await judge.aclose()
    return binary.probabilities, choice.probabilities


# ---------------------------------------------------------------- clean server


async def test_jev_compatible_answers_and_usage(clean: Mock) -> None:
    judge = jev_compatible(clean.url)
    binary = await judge.binary(BINARY)
    choice = await judge.choice(CHOICE)
    await judge.aclose()
    assert len(binary.probabilities) == 3
    assert all(0.0 <= p <= 1.0 for p in binary.probabilities)
    assert len(set(binary.probabilities)) == 3  # three questions, three different answers
    assert math.isclose(sum(choice.probabilities), 1.0, abs_tol=1e-9)
    assert binary.usage.requests == 1 and binary.usage.input_tokens > 0
    assert binary.usage.output_tokens > 0 and binary.usage.seconds > 0
    assert binary.usage.cost_usd is None  # a self-hosted server has no price


async def test_three_paths_give_the_same_answers(
    clean: Mock, monkeypatch: pytest.MonkeyPatch
) -> None:
    via_http = await answers(jev_compatible(clean.url))
    via_sdk = await answers(typesafe(clean.url, monkeypatch))
    via_openrouter = await answers(openrouter(clean.url, monkeypatch))
    assert via_sdk == via_http
    assert via_openrouter == via_http


async def test_sdk_path_reports_usage_and_jev_price(
    clean: Mock, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = typesafe(clean.url, monkeypatch)
    result = await judge.binary(BINARY)
    await judge.aclose()
    usage = result.usage
    assert usage.requests == 1 and usage.input_tokens > 0 and usage.output_tokens == 6
    assert usage.cost_usd == pytest.approx(usage.input_tokens * 0.042 / 1e6)


def test_sync_wrappers_work_twice(clean: Mock, monkeypatch: pytest.MonkeyPatch) -> None:
    # each sync call runs its own event loop: clients must not leak across loops
    for judge in (jev_compatible(clean.url), typesafe(clean.url, monkeypatch)):
        first = judge.binary_sync(BINARY).probabilities
        second = judge.binary_sync(BINARY).probabilities
        assert first == second


async def test_sync_wrappers_work_inside_a_running_event_loop(clean: Mock) -> None:
    # a notebook or an async web handler calling the sync API: no "asyncio.run() cannot be
    # called from a running event loop"
    judge = jev_compatible(clean.url)
    expected = (await judge.binary(BINARY)).probabilities
    assert judge.binary_sync(BINARY).probabilities == expected
    assert judge.choice_sync(CHOICE).probabilities == (await judge.choice(CHOICE)).probabilities


async def test_split_over_the_question_limit_keeps_the_answers(clean: Mock) -> None:
    questions = tuple(f"Is the information needed on Page {i}?" for i in range(10))
    request = BinaryRequest(BINARY.context, questions)
    whole = jev_compatible(clean.url, max_questions="none")
    split = jev_compatible(clean.url, max_questions=4)
    one = await whole.binary(request)
    parts = await split.binary(request)
    await whole.aclose()
    await split.aclose()
    assert one.usage.requests == 1 and parts.usage.requests == 3
    assert parts.probabilities == one.probabilities


async def test_unknown_model_is_a_request_error(clean: Mock) -> None:
    judge = jev_compatible(clean.url, model="no-such-model")
    with pytest.raises(JudgeRequestError, match="Unknown model") as caught:
        await judge.binary(BINARY)
    await judge.aclose()
    assert caught.value.status == 400


async def test_too_many_options_fail_before_sending(clean: Mock) -> None:
    judge = jev_compatible(clean.url, max_options=64)
    with pytest.raises(JudgeRequestError, match="at most 64"):
        await judge.choice(BIG_CHOICE)
    await judge.aclose()


# ---------------------------------------------------------------- keys


async def test_wrong_key_is_401_on_every_path(keyed: Mock, monkeypatch: pytest.MonkeyPatch) -> None:
    judges = [jev_compatible(keyed.url, api_key="wrong"),
              typesafe(keyed.url, monkeypatch, key="wrong"),
              openrouter(keyed.url, monkeypatch, key="wrong")]
    for judge in judges:
        with pytest.raises(JudgeRequestError) as caught:
            await judge.binary(BINARY)
        await judge.aclose()
        assert caught.value.status == 401, judge


async def test_right_key_is_accepted(keyed: Mock, monkeypatch: pytest.MonkeyPatch) -> None:
    binary, choice = await answers(typesafe(keyed.url, monkeypatch))
    assert len(binary) == 3 and math.isclose(sum(choice), 1.0)
    binary, _ = await answers(jev_compatible(keyed.url, api_key=KEY))
    assert len(binary) == 3


async def test_no_key_where_one_is_required(keyed: Mock) -> None:
    judge = jev_compatible(keyed.url)
    with pytest.raises(JudgeRequestError) as caught:
        await judge.binary(BINARY)
    await judge.aclose()
    assert caught.value.status in (401, 403)


@pytest.mark.parametrize(("judge_id", "env"), [
    ("typesafe:jev-1.13", "TYPESAFE_API_KEY"),
    ("openrouter:typesafe/jev-1.13", "OPENROUTER_API_KEY"),
])
def test_missing_api_key_names_the_variable(judge_id: str, env: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(JudgeConfigError, match=env):
        load_judge(judge_id)


# ---------------------------------------------------------------- faults


def list_faults() -> list[str]:
    """Every fault `jevcompat mock --list-faults` shows."""
    output = subprocess.run([JEVCOMPAT, "mock", "--list-faults"], capture_output=True,
                            text=True, check=True).stdout
    return [line.split()[0] for line in output.splitlines() if line.strip()]


ALL_FAULTS = list_faults()


def test_the_fault_list_has_the_ones_the_issue_names() -> None:
    assert set(CORE_FAULTS) <= set(ALL_FAULTS)
    assert len(ALL_FAULTS) >= 40


async def outcome(judge: Judge, request: BinaryRequest | ChoiceRequest) -> list[float] | JudgeError:
    try:
        if isinstance(request, BinaryRequest):
            return (await judge.binary(request)).probabilities
        return (await judge.choice(request)).probabilities
    except JudgeError as exc:
        return exc


@pytest.fixture(scope="module")
def clean_answers(clean: Mock) -> dict[str, list[float]]:
    import asyncio

    async def collect() -> dict[str, list[float]]:
        judge = jev_compatible(clean.url)
        found = {name: await outcome(judge, request) for name, request in PROBES.items()}
        await judge.aclose()
        return {name: value for name, value in found.items() if isinstance(value, list)}

    return asyncio.run(collect())


PROBES: dict[str, BinaryRequest | ChoiceRequest] = {
    "binary": BINARY, "choice": CHOICE, "choice-100": BIG_CHOICE}


def assert_error_or_repair(fault: str, name: str, got: list[float] | JudgeError,
                           clean: list[float]) -> None:
    if isinstance(got, JudgeError):
        assert str(got), f"{fault}/{name}: an error without a message"
        return
    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in got), (fault, name, got)
    if fault not in SEMANTIC_FAULTS:
        assert got == clean, f"{fault}/{name}: a silently different answer {got} vs {clean}"


def fault_params() -> list[object]:
    return [pytest.param(f, marks=() if f in CORE_FAULTS else pytest.mark.slow)
            for f in ALL_FAULTS]


EXPECTED_ERRORS = {
    "first-question-only": ("binary", JudgeProtocolError, "no answer for 2 of 3"),
    "noul-range": ("binary", JudgeProtocolError, "not a probability"),
    "choice-sum": ("choice", JudgeProtocolError, "sum to"),
    "nan": ("binary", JudgeProtocolError, "not JSON"),
    "cap-64": ("choice-100", JudgeRequestError, "at most 64"),
    "xssi-200": ("binary", JudgeProtocolError, "not JSON"),
}


@pytest.mark.parametrize("fault", fault_params())
async def test_every_fault_ends_in_an_error_or_a_repair(
    fault: str, clean_answers: dict[str, list[float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    mock = start_mock("--fault", fault)
    try:
        for judge in (jev_compatible(mock.url), typesafe(mock.url, monkeypatch)):
            found = {name: await outcome(judge, request) for name, request in PROBES.items()}
            await judge.aclose()
            for name, got in found.items():
                assert_error_or_repair(fault, name, got, clean_answers[name])
            if fault in EXPECTED_ERRORS:
                probe, kind, message = EXPECTED_ERRORS[fault]
                assert isinstance(found[probe], kind), (judge, found[probe])
                assert message in str(found[probe])
    finally:
        stop_mock(mock)


async def test_text_errors_still_carry_the_servers_message() -> None:
    mock = start_mock("--fault", "text-errors")
    try:
        judge = jev_compatible(mock.url, model="no-such-model")
        got = await outcome(judge, BINARY)
        await judge.aclose()
    finally:
        stop_mock(mock)
    assert isinstance(got, JudgeRequestError) and got.status == 400
    assert "Unknown model: no-such-model" in str(got)


def test_conformance_suite_passes_on_the_clean_mock(clean: Mock) -> None:
    run = subprocess.run([JEVCOMPAT, "test", clean.url], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "conformant to spec" in run.stdout


async def test_a_server_that_reads_fewer_options_is_asked_again_within_its_limit() -> None:
    """A choice over more options than the server reads: its refusal names the limit, the
    judge keeps it, and the choice step asks again over a shortlist of that size (noted in
    the trace); the next query starts within the limit."""
    from decisionrag._navigate._rerank import rerank_texts

    mock = start_mock("--fault", "cap-64")
    judge = jev_compatible(mock.url)
    texts = [f"passage number {i} about renewing a passport" for i in range(100)]
    try:
        ranked, _usage, trace = await rerank_texts(judge, "how do I renew a passport?", texts,
                                                   choice_top=100)
        assert judge.limits.max_options == 64
        assert len(ranked) == 100
        assert sum(r.choice is not None for r in ranked) == 64
        notes = [note for stage in trace.stages for note in stage.notes]
        assert any("at most 64 options" in note and "cut from 100" in note for note in notes), notes
        again, _usage, trace = await rerank_texts(judge, "how do I renew a passport?", texts,
                                                  choice_top=100)
        assert sum(r.choice is not None for r in again) == 64
        assert not any("cut from" in note for stage in trace.stages for note in stage.notes)
    finally:
        await judge.aclose()
        stop_mock(mock)
