"""Hangs and unbounded work (issue 23): every stream ends by its deadline, every body is
bounded in size (decompressed), and a failed query does not keep the process alive.

The model servers are the fault server's (`decisionrag._judges._faults`: a real HTTP server on
127.0.0.1) — keep-alive comments forever, endless text, a hang, a gzip bomb, a 40 MB body, a
line without end — and each test checks the time to a clear error, not only the error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._errors import AnswerError, JudgeProtocolError
from decisionrag._judges import BinaryRequest, load_judge
from decisionrag._judges._faults import CHAT_ANSWER, FaultServer

SLACK = 1.5  # seconds past a deadline for closing connections and a loaded machine


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture(scope="module")
def tree_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for topic in ("passports", "taxes", "visas"):
        (folder / f"{topic}.md").write_text(f"# {topic.title()}\n\n## Renew\n\nHow to renew {topic}.\n")
    return build_tree([folder], folder / "docs.tree").path


def _answer(tree: Path, faults: FaultServer, fault: str, *extra: str) -> list[str]:
    return ["answer", str(tree), "how do I renew?", "--judge", "scripted", "--generator",
            "openai-compatible:faulty", "--base-url", faults.generator_url(fault), *extra]


def _timed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, float, str]:
    start = time.monotonic()
    code = main(argv)
    return code, time.monotonic() - start, capsys.readouterr().err


def test_a_clean_answer_model_still_answers(tree_path: Path, faults: FaultServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    for stream in ([], ["--stream"]):
        assert main(_answer(tree_path, faults, "chat-ok", "--deadline", "5", *stream)) == 0
        assert CHAT_ANSWER.split(" [")[0] in capsys.readouterr().out


@pytest.mark.parametrize(("fault", "stream"), [("chat-keepalive", True), ("chat-endless", True),
                                               ("chat-hang", True), ("chat-hang", False)])
def test_answer_ends_by_its_deadline(tree_path: Path, faults: FaultServer, fault: str,
                                     stream: bool, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _answer(tree_path, faults, fault, "--deadline", "2", *(["--stream"] if stream else []))
    code, seconds, err = _timed(argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert "deadline" in err, err
    assert seconds < 2 + SLACK, seconds


@pytest.mark.parametrize("fault", ["chat-bomb", "chat-long-line"])
def test_answer_bodies_are_bounded(tree_path: Path, faults: FaultServer, fault: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    stream = ["--stream"] if fault == "chat-long-line" else []
    code, seconds, err = _timed(_answer(tree_path, faults, fault, "--deadline", "20", *stream),
                                capsys)
    assert code == 2 and "Traceback" not in err
    assert "larger than" in err or "longer than" in err, err
    assert seconds < 10, seconds


def test_a_reply_whose_content_is_not_text(tree_path: Path, faults: FaultServer,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _timed(_answer(tree_path, faults, "chat-not-text", "--deadline", "5"), capsys)
    assert code == 2 and "is an object, not text" in err and "{'text'" not in err, err


@pytest.mark.parametrize("fault", ["huge", "gzip-bomb"])
async def test_judge_bodies_are_bounded_after_decompression(faults: FaultServer, fault: str) -> None:
    import resource

    judge = load_judge(faults.judge_id(fault))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(JudgeProtocolError, match="larger than"):
        await judge.binary(BinaryRequest("renew", ("Is it on Page 1?",)))
    await judge.aclose()
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert time.monotonic() - start < 10
    assert grown < 150 * 2**20, grown  # the bomb inflates to 200 MB; the cap is 32 MB


async def test_the_python_api_answer_ends_by_its_deadline(tree_path: Path,
                                                          faults: FaultServer) -> None:
    from decisionrag._answer import aanswer, load_generator
    from decisionrag._navigate import Navigator
    from decisionrag._tree import Tree

    generator = load_generator("openai-compatible:faulty",
                               base_url=faults.generator_url("chat-endless"))
    navigator = Navigator(Tree.open(tree_path), load_judge("scripted"), "flat")
    start = time.monotonic()
    with pytest.raises(AnswerError, match="deadline"):
        async for _ in _stream(navigator, generator):
            pass
    assert time.monotonic() - start < 2 + SLACK
    await generator.aclose()
    del aanswer


async def _stream(navigator: object, generator: object) -> Iterator[object]:  # type: ignore[misc]
    from decisionrag._answer import astream_answer

    async for event in astream_answer(navigator, "renew", generator=generator,  # type: ignore[arg-type]
                                      deadline=2):
        yield event


# -- the server: a request's timeout and --timeout cover the answer ------------------------------

def _events(text: str) -> list[tuple[str, dict[str, object]]]:
    found = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


@pytest.mark.parametrize("fault", ["chat-keepalive", "chat-endless", "chat-hang"])
def test_served_answers_end_by_the_request_deadline(tmp_path: Path, faults: FaultServer,
                                                     fault: str) -> None:
    import httpx

    from _serve_helpers import live_server, settings, write_tree
    from decisionrag._serve import ServeLimits

    tree = write_tree(tmp_path / "docs.tree")
    with live_server(settings({"docs": tree}, generator="openai-compatible:faulty",
                              generator_base_url=faults.generator_url(fault),
                              limits=ServeLimits(default_timeout=2.0))) as url:
        for body in ({"query": "renew passport", "timeout": 1.5},  # the request's timeout
                     {"query": "renew passport"}):  # the server's --timeout
            limit = float(body.get("timeout", 2.0))  # type: ignore[arg-type]
            start = time.monotonic()
            plain = httpx.post(f"{url}/v1/answer", json=body, timeout=30)
            assert plain.status_code == 504, plain.text
            error = plain.json()
            assert error["error"]["type"] == "deadline_exceeded" and error["request_id"]
            assert time.monotonic() - start < limit + SLACK
            start = time.monotonic()
            streamed = httpx.post(f"{url}/v1/answer", json={**body, "stream": True}, timeout=30)
            assert time.monotonic() - start < limit + SLACK
            kinds = [kind for kind, _ in _events(streamed.text)]
            assert kinds[0] == "retrieved" and kinds[-1] == "error", kinds
            assert _events(streamed.text)[-1][1]["error"]["type"] == "deadline_exceeded"  # type: ignore[index]


# -- a failed query does not keep the process alive ----------------------------------------------

def test_ask_without_stored_vectors_exits_by_its_deadline(tmp_path: Path) -> None:
    """The embedded judge embeds every candidate of an unvectored tree on a worker thread;
    when the deadline passes, the command prints its error and exits then, not when that
    thread would have finished (it had minutes of work left)."""
    folder = tmp_path / "many"
    folder.mkdir()
    words = ["renewal", "passport", "office", "fee", "photo", "form", "embassy", "appointment"]
    # minutes of encoder work on 2 cores, still tens of seconds on a many-core machine
    for i in range(4000):
        text = " ".join(words[(i + j) % len(words)] for j in range(240))
        (folder / f"{i:04d}.md").write_text(f"# Topic {i}\n\n{text}\n")
    tree = build_tree([folder], tmp_path / "many.tree").path  # no vectors stored
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}
    deadline = 4.0
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "decisionrag", "ask", str(tree),
                           "where do I renew my passport?", "--deadline", str(deadline)],
                          capture_output=True, text=True, env=env, timeout=120)
    seconds = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert "deadline of 4s passed" in done.stderr and "Traceback" not in done.stderr
    assert seconds < deadline + 4.0, seconds  # the interpreter's start, imports, the exit
