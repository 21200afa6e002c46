"""Self-hosted decision servers: ids, discovery, and the request shape prefix caches need."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from _standin_server import standin_server
from decisionrag import JudgeConfigError, Navigator, Tree, build_tree, load_judge
from decisionrag._judges._selfhosted import discover, judge_id_for, ollama_base, parse_models


def test_ids_a_user_can_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    ollama = load_judge("ollama:qwen3-decide")
    assert ollama.model == "qwen3-decide" and ollama.name == "ollama:qwen3-decide"
    assert ollama._transport.client.base_url == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5")
    assert ollama_base() == "http://10.0.0.5:11434"
    monkeypatch.setenv("OLLAMA_HOST", "https://gpu.box:9000")
    assert load_judge("ollama:m")._transport.client.base_url == "https://gpu.box:9000"
    assert load_judge("ollama:m", base_url="http://127.0.0.1:1")._transport.client.base_url == "http://127.0.0.1:1"
    llamacpp = load_judge("llamacpp:http://127.0.0.1:8081/v1")
    assert llamacpp._transport.client.base_url == "http://127.0.0.1:8081"
    assert load_judge("llamacpp:")._transport.client.base_url == "http://127.0.0.1:8080"
    for judge in (ollama, llamacpp, load_judge("jev-compatible:http://127.0.0.1:9")):
        limits = judge.limits
        assert limits.max_questions is None and limits.questions_per_call == 64
    assert load_judge("ollama:m", max_tokens=30000).limits.max_tokens == 30000
    with pytest.raises(JudgeConfigError, match="name the model"):
        load_judge("ollama:")
    with pytest.raises(JudgeConfigError, match="unknown options"):
        load_judge("llamacpp:http://127.0.0.1:8080", flavour="x")


def test_models_marked_for_decisions_are_found() -> None:
    payload = {"object": "list", "data": [
        {"id": "decider-7b", "output_modalities": ["decisions"], "owned_by": "llamacpp"},
        {"id": "chat-7b", "output_modalities": ["text"], "owned_by": "llamacpp"},
        {"id": "bare"},
        {"id": ""}, "junk",
    ]}
    models = parse_models(payload)
    assert [(m.id, m.decisions) for m in models] == [("decider-7b", True), ("chat-7b", False), ("bare", None)]
    assert judge_id_for("http://127.0.0.1:8080", models[0]) == "llamacpp:http://127.0.0.1:8080"
    ollama = parse_models({"models": [{"name": "qwen3-decide", "owned_by": "ollama"}]})[0]
    assert judge_id_for("http://127.0.0.1:11434", ollama) == "ollama:qwen3-decide"
    with pytest.raises(Exception, match="no 'data' list"):
        parse_models({"nothing": 1})


def test_discover_reads_a_live_servers_models_and_the_cli_prints_ids() -> None:
    with standin_server() as server:
        server.models = {"data": [{"id": "decider", "output_modalities": ["decisions"]},
                                  {"id": "writer", "output_modalities": ["text"]}]}
        assert [(m.id, m.decisions) for m in discover(server.url)] == [("decider", True), ("writer", False)]
        done = subprocess.run([sys.executable, "-m", "decisionrag", "judges", "--discover", server.url],
                              capture_output=True, text=True, check=False)
        assert server.paths.count("/v1/models") == 2
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split("\t") == ["decider", "decisions", f"jev-compatible:{server.url} -o model=decider"]
    assert lines[1].split("\t") == ["writer", "not a decision model", "-"]


def test_the_judges_table_lists_the_self_hosted_backends() -> None:
    done = subprocess.run([sys.executable, "-m", "decisionrag", "judges"], capture_output=True, text=True,
                          check=True)
    names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert {"ollama", "llamacpp", "jev-compatible"} <= set(names)


@pytest.fixture(scope="module")
def wide_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 pages of 40 passages: the passage stage holds 160 candidates in one context."""
    folder = tmp_path_factory.mktemp("wide")
    rows = [{"id": f"d{d}-p{p}", "doc_id": f"d{d}", "doc_title": f"Guide {d}",
             "text": f"Guide {d} paragraph {p} about topic {p % 7} and renewal rules."}
            for d in range(4) for p in range(40)]
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    build_tree([corpus], folder / "wide.tree")
    return folder / "wide.tree"


def _by_state(bodies: list[bytes]) -> dict[str, list[bytes]]:
    groups: dict[str, list[bytes]] = defaultdict(list)
    for body in bodies:
        groups[json.loads(body)["state"]].append(body)
    return groups


@pytest.mark.parametrize("backend", ["jev-compatible", "llamacpp", "ollama"])
def test_a_levels_calls_share_a_byte_identical_context_prefix(wide_tree: Path, backend: str) -> None:
    with standin_server() as server:
        judge_id = {"jev-compatible": f"jev-compatible:{server.url}", "llamacpp": f"llamacpp:{server.url}",
                    "ollama": "ollama:decider"}[backend]
        options = {"base_url": server.url} if backend == "ollama" else {}
        judge = load_judge(judge_id, max_tokens=32_000, **options)
        with Tree.open(wide_tree) as tree:
            result = Navigator(tree, judge, "auto").retrieve("What are the renewal rules of topic 3?", k=5)
        first = list(server.bodies)
        server.bodies.clear()
        with Tree.open(wide_tree) as tree:  # a fresh navigator, the same query
            Navigator(tree, load_judge(judge_id, max_tokens=32_000, **options), "auto").retrieve(
                "What are the renewal rules of topic 3?", k=5)
        second = list(server.bodies)
    stage = result.trace.stage("passage")
    assert stage.n_candidates == 160 and stage.requests == 3  # one context, calls of 64 + 64 + 32
    passage_level = [bodies for bodies in _by_state(first).values() if len(bodies) == 3]
    assert len(passage_level) == 1
    calls = passage_level[0]
    prefixes = {body[:body.index(b'"questions"')] for body in calls}
    assert len(prefixes) == 1  # byte-identical: model, then the whole rendered context
    prefix = prefixes.pop()
    assert prefix.startswith(b'{"model": ') and b'"state": "' in prefix
    assert sorted(len(json.loads(b)["questions"]) for b in calls) == [32, 64, 64]
    numbers = [int(q["instructions"].split("Paragraph ")[1].split()[0])
               for b in sorted(calls, key=lambda b: json.loads(b)["questions"]["q0"]["instructions"])
               for q in json.loads(b)["questions"].values()]
    assert sorted(numbers) == list(range(1, 161))
    # stable: the same query sends the same bytes (candidate order, numbering, wording)
    assert sorted(first) == sorted(second)
