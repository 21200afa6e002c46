"""One system behind every door: the same 20 questions through every way into decisionrag.

The trees are built by `decisionrag build` (stored vectors and the BM25 index, as a user gets
them) from two shared datasets, and 10 questions of each are asked through the CLI
(`ask --json`), Python as the README shows it (`Navigator("docs.tree")`), `Client` against a
real `serve --workers 2`, the MCP server through the SDK's stdio client, the LangChain and
LlamaIndex retrievers, and `eval`'s run file. Every door must return the same passage ids in
the same order, with scores equal to 1e-6 (a hit's collapsed duplicates are listed right
after it, as eval's run file lists them). A TREC run file carries scores that strictly fall
with the rank (trec_eval sorts by them), so where ties or the choice step's reordering make
the hits' own scores fall otherwise it writes rank-derived ones: eval's run is compared by
its ids, every other door by ids and scores.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _processes import free_port
from _serve_helpers import start_cli_server
from conftest import require_module

pytestmark = pytest.mark.slow

DATASETS = {"xquad": "xquad-en", "cqa": "conditionalqa-dev"}
PER_DATASET = 10
K = 10
SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1",
       "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}

Ranking = list[tuple[str, float]]  # (passage id, score), best first


def decisionrag(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "decisionrag", *args], capture_output=True,
                          text=True, env=ENV, cwd=cwd, timeout=900)
    assert done.returncode == 0, f"decisionrag {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


class Corpus:
    """One dataset's tree (built by the CLI) and the questions asked of it."""

    def __init__(self, name: str, folder: Path, work: Path) -> None:
        self.name = name
        self.tree = work / f"{name}.tree"
        decisionrag("build", str(folder / "corpus.jsonl"), "-o", str(self.tree))
        queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
        step = max(1, len(queries) // PER_DATASET)
        # the question alone (no scenario): LangChain's and LlamaIndex's retrievers take a string
        self.questions = {q["id"]: q["text"] for q in queries[::step][:PER_DATASET]}
        self.queries_file = work / f"{name}.queries.jsonl"
        self.queries_file.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                             for i, t in self.questions.items()))
        self.qrels = folder / "qrels.tsv"


@pytest.fixture(scope="module")
def corpora(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Corpus]:
    work = tmp_path_factory.mktemp("doors")
    return {name: Corpus(name, shared_data / folder, work) for name, folder in DATASETS.items()}


def expanded(hits: list[dict[str, Any]]) -> Ranking:
    """Hits as eval lists them: each hit, then the passages collapsed into it, one score."""
    return [(str(place["id"]), float(hit["score"]))
            for hit in hits for place in (hit, *(hit.get("also_at") or ()))][:K]


# -- the doors ----------------------------------------------------------------------------


def by_eval(corpus: Corpus, work: Path) -> dict[str, Ranking]:
    runs = work / f"runs-{corpus.name}"
    decisionrag("eval", str(corpus.tree), "--queries", str(corpus.queries_file), "--qrels",
                str(corpus.qrels), "--systems", "decisionrag", "--save-runs", str(runs),
                "--no-progress")
    found: dict[str, Ranking] = {}
    for line in (runs / "decisionrag.trec").read_text().splitlines():
        query, _, passage, _rank, score, _tag = line.split()
        found.setdefault(query, []).append((passage, float(score)))
    return {query: ranking[:K] for query, ranking in found.items()}


def by_cli(corpus: Corpus) -> dict[str, Ranking]:
    return {query: expanded(json.loads(decisionrag("ask", str(corpus.tree), text, "--json",
                                                   "--top", str(K)))["results"])
            for query, text in corpus.questions.items()}


def by_python(corpus: Corpus) -> dict[str, Ranking]:
    from decisionrag import Navigator

    navigator = Navigator(str(corpus.tree))  # as the README shows it
    try:
        return {query: expanded([hit.to_dict() | {"score": hit.score}
                                 for hit in navigator.retrieve(text, k=K).hits])
                for query, text in corpus.questions.items()}
    finally:
        navigator.close()


def by_client(corpora: dict[str, Corpus]) -> dict[str, dict[str, Ranking]]:
    from decisionrag import Client

    port = free_port()
    server = start_cli_server([*(f"{c.name}={c.tree}" for c in corpora.values()),
                               "--workers", "2"], port, env=ENV)
    try:
        with Client(f"http://127.0.0.1:{port}", timeout=300) as client:
            return {c.name: {query: expanded([hit.to_dict() for hit in client.retrieve(
                                 text, tree=c.name, k=K, timeout=300).hits])
                             for query, text in c.questions.items()}
                    for c in corpora.values()}
    finally:
        server.terminate()
        server.wait(60)


def by_mcp(corpus: Corpus) -> dict[str, Ranking]:
    from mcp import client as mcp_client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, env=ENV,
                                   args=["-m", "decisionrag", "mcp", f"{corpus.name}={corpus.tree}"])

    async def ask_all() -> dict[str, Ranking]:
        found: dict[str, Ranking] = {}
        async with mcp_client.Client(params) as client:
            for query, text in corpus.questions.items():
                reply = await client.call_tool("retrieve", {"query": text, "k": K})
                content = getattr(reply, "structured_content", None) or json.loads(
                    reply.content[0].text)  # type: ignore[union-attr]
                found[query] = expanded(list(content["results"]))
        return found

    return asyncio.run(ask_all())


def by_langchain(corpus: Corpus) -> dict[str, Ranking]:
    from decisionrag.integrations.langchain import DecisionRAGRetriever

    retriever = DecisionRAGRetriever(tree=str(corpus.tree), k=K)
    return {query: expanded([doc.metadata for doc in retriever.invoke(text)])
            for query, text in corpus.questions.items()}


def by_llamaindex(corpus: Corpus) -> dict[str, Ranking]:
    from decisionrag.integrations.llamaindex import DecisionRAGRetriever

    retriever = DecisionRAGRetriever(tree=str(corpus.tree), k=K)
    return {query: expanded([node.node.metadata for node in retriever.retrieve(text)])
            for query, text in corpus.questions.items()}


# -- the comparison -----------------------------------------------------------------------


def same(reference: dict[str, Ranking], other: dict[str, Ranking], door: str, *,
         scores: bool = True) -> Iterator[str]:
    """What differs between `other` and `reference`, query by query."""
    for query, expected in reference.items():
        found = other.get(query)
        if found is None:
            yield f"{door}: no answer for {query}"
        elif [p for p, _ in found] != [p for p, _ in expected]:
            yield f"{door}: {query}: ids {[p for p, _ in found]} != {[p for p, _ in expected]}"
        elif scores and any(abs(a - b) > 1e-6 for (_, a), (_, b) in zip(found, expected, strict=True)):
            yield f"{door}: {query}: scores {[s for _, s in found]} != {[s for _, s in expected]}"


def test_every_door_gives_the_same_answer(corpora: dict[str, Corpus],
                                          tmp_path: Path) -> None:
    for module in ("mcp", "langchain_core", "llama_index.core"):
        require_module(module)
    served = by_client(corpora)
    differences: list[str] = []
    for corpus in corpora.values():
        reference = by_python(corpus)
        assert len(reference) == PER_DATASET and all(len(r) == K for r in reference.values())
        differences.extend(same(reference, by_eval(corpus, tmp_path), f"{corpus.name} eval",
                                scores=False))
        doors = {"cli": by_cli(corpus), "client (serve --workers 2)": served[corpus.name],
                 "mcp": by_mcp(corpus), "langchain": by_langchain(corpus),
                 "llamaindex": by_llamaindex(corpus)}
        for door, found in doors.items():
            differences.extend(same(reference, found, f"{corpus.name} {door}"))
    assert differences == []
