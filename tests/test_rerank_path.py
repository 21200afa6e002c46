"""Reranking runs the walk's own last stages: `/v1/rerank`, the LlamaIndex reranker and
`rerank_texts` give the walk's passage-stage order for the walk's own candidates.

With a tree, passages given by id go through `Navigator.arerank` (stored vectors, the page
and headings above each, the tree's word statistics): the walk's final order exactly. Given
as texts, with the header path a walk shows above each, they are judged by the same level
engine with the same search text and statistics: over a tree without stored vectors (the
judge then embeds every candidate's text, as it does the texts) the same P(yes) and order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from _serve_helpers import live_server, settings
from conftest import require_module
from decisionrag import Navigator, build_tree
from decisionrag._app import rerank_texts
from decisionrag._navigate import Result
from decisionrag._sync import run_sync

QUESTIONS = ("What did the Panthers defense surrender?", "Who designed the Luther monument?",
             "How many people live in Warsaw?")


def passage_stage(result: Result) -> Any:
    return next(stage for stage in result.trace.stages if stage.name == "passage")


def expanded_ids(result: Result) -> list[str]:
    """The walk's hits, each followed by the passages collapsed into it (eval's listing)."""
    return [key for hit in result.hits for key in (hit.node.key, *(p.key for p in hit.also_at))]


def binary_order(stage: Any) -> list[str]:
    """The passage stage's candidates by P(yes), ties in reading order."""
    return sorted(stage.candidates, key=lambda key: -stage.scores[key])


@pytest.fixture(scope="module")
def plain_tree(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """xquad-en without stored vectors: the judge embeds candidate texts, as it does texts."""
    path = tmp_path_factory.mktemp("plain") / "xquad-plain.tree"
    build_tree([shared_data / "xquad-en" / "corpus.jsonl"], path, vectors=False)
    return path


def test_passages_by_id_rerank_as_the_walk(xquad_tree: Path) -> None:
    require_module("fastapi")
    require_module("llama_index.core")
    from llama_index.core.schema import NodeWithScore, TextNode

    from decisionrag.integrations.llamaindex import DecisionRAGReranker

    navigator = Navigator(xquad_tree)
    reranker = DecisionRAGReranker(judge=navigator.judge, tree=str(xquad_tree))
    with live_server(settings({"xquad": xquad_tree}), judge=navigator.judge) as url:
        for question in QUESTIONS:
            walk = navigator.retrieve(question, k=100)
            candidates = passage_stage(walk).candidates  # reading order
            expected = expanded_ids(walk)
            assert expected == expanded_ids(navigator.rerank(question, candidates, k=100))
            served = httpx.post(f"{url}/v1/rerank", timeout=120, json={
                "query": question, "tree": "xquad", "documents": [{"id": c} for c in candidates],
            }).json()["results"]
            assert [candidates[r["index"]] for r in served] == expected
            nodes = [NodeWithScore(node=TextNode(id_=c, text="")) for c in candidates]
            ranked = reranker.postprocess_nodes(nodes, query_str=question)
            assert [n.node.node_id for n in ranked] == expected
    navigator.close()


def test_texts_rerank_as_the_walks_passage_stage(plain_tree: Path) -> None:
    require_module("fastapi")
    require_module("llama_index.core")
    from llama_index.core.schema import NodeWithScore, TextNode

    from decisionrag.integrations.llamaindex import DecisionRAGReranker

    navigator = Navigator(plain_tree)
    assert navigator.view.lexicon is None  # no stored statistics: texts have none either
    reranker = DecisionRAGReranker(judge=navigator.judge, title_key="title")
    with live_server(settings({"plain": plain_tree}), judge=navigator.judge) as url:
        for question in QUESTIONS:
            stage = passage_stage(navigator.retrieve(question, k=100))
            entries = [navigator.view.entry("passage", node, "description") for node in stage.nodes]
            texts = [entry.text for entry in entries]
            titles = [" > ".join(entry.block) for entry in entries]
            expected = binary_order(stage)

            ranked, _, _ = run_sync(rerank_texts(navigator.judge, question, texts, titles=titles))
            assert [stage.candidates[r.index] for r in ranked] == expected
            assert all(r.binary == pytest.approx(stage.scores[stage.candidates[r.index]], abs=1e-9)
                       for r in ranked)

            nodes = [NodeWithScore(node=TextNode(text=t, metadata={"title": h}))
                     for t, h in zip(texts, titles, strict=True)]
            by_reranker = reranker.postprocess_nodes(nodes, query_str=question)
            assert [texts.index(n.node.text) for n in by_reranker] == [r.index for r in ranked]

            # the header path and the text as one document: what the walk's judge reads of it
            documents = [f"{h}: {t}" for t, h in zip(texts, titles, strict=True)]
            served = httpx.post(f"{url}/v1/rerank", timeout=120,
                                json={"query": question, "documents": documents}).json()["results"]
            assert [stage.candidates[r["index"]] for r in served] == expected
    navigator.close()
