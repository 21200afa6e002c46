"""End to end against a real llm2jev server (transformers backend) started here on 127.0.0.1
with a tiny random chat LM built in the test: `decisionrag ask --judge jev-compatible:URL`
returns ranked passages, and jevcompat's conformance suite runs against the same server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _processes import free_port, port_open, stopped_at_exit, wait_until
from _tiny_chat_lm import build_tiny_chat_lm
from conftest import require_module
from decisionrag import Tree

require_module("llm2jev")
require_module("accelerate")
pytestmark = pytest.mark.slow

QUESTION = "When did the Normans conquer England?"


@pytest.fixture(scope="module")
def llm2jev_url(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[str]:
    corpus = shared_data / "xquad-en" / "corpus.jsonl"
    texts = [json.loads(line)["text"] for line in corpus.open(encoding="utf-8")]
    model = build_tiny_chat_lm(tmp_path_factory.mktemp("tiny-lm") / "model", texts)
    port = free_port()
    # one torch thread: on a busy machine torch's default threads spin against each other and a
    # forward pass of the tiny model took 5x longer (measured with transformers serve, issue 25)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    log_path = model.parent / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "llm2jev", "--model", str(model), "--backend", "hf",
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        with stopped_at_exit(process, grace=10):
            wait_until(process, port_open(port), what="llm2jev", timeout=120,
                       log=log_path.read_text)
            yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """xquad-en's first three documents (15 passages), no vectors: a walk a tiny model on a
    CPU answers in seconds (the whole corpus with its hybrid candidates sends a passage stage
    of 50 questions over ~11,000 tokens, which this server reads once per question)."""
    from decisionrag import build_tree

    folder = tmp_path_factory.mktemp("small")
    lines, documents = [], []
    for line in (shared_data / "xquad-en" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        document = json.loads(line)["doc_id"]
        if document not in documents:
            if len(documents) == 3:
                break
            documents.append(document)
        lines.append(line)
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return build_tree([folder / "corpus.jsonl"], folder / "small.tree", vectors=False,
                      bm25=False).path


def _ask(url: str, tree: Path, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "decisionrag", "ask", str(tree), QUESTION,
         "--judge", f"jev-compatible:{url}", "--top", "5", "--json", *extra],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict = json.loads(done.stdout)
    return answer


def test_ask_with_a_real_llm2jev_server_returns_ranked_passages(llm2jev_url: str, small_tree: Path) -> None:
    answer = _ask(llm2jev_url, small_tree)
    results = answer["results"]
    assert len(results) == 5
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert len({r["id"] for r in results}) == 5
    with Tree.open(small_tree) as tree:
        for r in results:
            assert tree.node(r["id"]).text == r["text"]
    # the model really answered: probabilities from its logits, not a default (on this small
    # tree the random tiny model may give the five best the same probability)
    assert all(0 < s < 1 and s != 0.5 for s in scores)
    assert answer["usage"]["requests"] >= 3 and answer["usage"]["input_tokens"] > 0

    # the compact question form against the same server: the server's own token count
    # (prompt tokens its engine processed) drops, the walk has the same shape
    compact = _ask(llm2jev_url, small_tree, "--questions", "compact")
    assert len(compact["results"]) == 5
    assert compact["usage"]["requests"] == answer["usage"]["requests"]
    assert compact["usage"]["input_tokens"] > 0  # (fewer than the paper form's on a larger tree)
    print("llm2jev input tokens, paper vs compact:", answer["usage"]["input_tokens"],
          compact["usage"]["input_tokens"])


def test_jevcompat_suite_against_the_same_server(llm2jev_url: str, tmp_path: Path) -> None:
    jevcompat = shutil.which("jevcompat") or str(Path(sys.executable).parent / "jevcompat")
    report = tmp_path / "report.json"
    done = subprocess.run([jevcompat, "test", llm2jev_url, "--timeout", "60", "--json", str(report)],
                          capture_output=True, text=True, timeout=300, check=False)
    summary = [line for line in done.stdout.splitlines() if re.search(r"MUST \d+/\d+, SHOULD \d+/\d+", line)]
    assert summary, done.stdout[-3000:] + done.stderr[-2000:]
    print("jevcompat:", summary[-1])  # reported in docs/integrations.md
    # what decisionrag relies on holds: answers independent of ids, batching and order
    for check in ("semantics.question-id", "semantics.batching", "semantics.question-order"):
        assert re.search(rf"✓ \w+\s+{re.escape(check)}", done.stdout), check
