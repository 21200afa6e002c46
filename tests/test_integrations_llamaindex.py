"""LlamaIndex: the retriever over a shared-dataset tree, and the decision-model reranker."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module

require_module("llama_index.core")

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from decisionrag import BinaryRequest, ChoiceRequest, Tree
from decisionrag._judges import ScriptedJudge
from decisionrag.integrations.llamaindex import DecisionRAGReranker, DecisionRAGRetriever

QUERY = "What did the Normans do in England?"


class ThreadRecordingJudge(ScriptedJudge):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: list[int] = []

    async def binary(self, request: BinaryRequest) -> Any:
        self.threads.append(threading.get_ident())
        return await super().binary(request)


def test_retriever_returns_nodes_with_scores_and_tree_metadata(xquad_tree: Path) -> None:
    retriever = DecisionRAGRetriever(str(xquad_tree), judge=ScriptedJudge(), k=3)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("Normans Normandy Rollo")
    assert len(nodes) == 3 and all(isinstance(n, NodeWithScore) for n in nodes)
    with Tree.open(xquad_tree) as tree:
        for item in nodes:
            passage = tree.node(item.node.node_id)
            assert item.node.get_content() == passage.text
            meta = item.node.metadata
            assert meta["id"] == passage.key and meta["doc_id"] == tree.node(passage.doc).key
            assert meta["path"] == [tree.node(passage.doc).title] and meta["score"] == item.score
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)


async def test_aretrieve_is_native_and_matches_retrieve(xquad_tree: Path) -> None:
    judge = ThreadRecordingJudge()
    retriever = DecisionRAGRetriever(str(xquad_tree), judge=judge, k=4)
    sync_ids = [n.node.node_id for n in retriever.retrieve(QUERY)]
    judge.threads.clear()
    async_nodes = await retriever.aretrieve(QueryBundle(QUERY))
    assert [n.node.node_id for n in async_nodes] == sync_ids
    assert judge.threads and set(judge.threads) == {threading.get_ident()}  # on this loop, no executor


def _nodes(texts: list[str]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=f"n{i}", text=t, metadata={"title": f"T{i}"}), score=0.5)
            for i, t in enumerate(texts)]


def test_reranker_judges_all_nodes_in_one_shared_context_and_reorders() -> None:
    texts = ["Volcanoes erupt lava.", "The Normans conquered England in 1066.",
             "Normans came from Normandy.", "Paris is in France."]
    judge = ScriptedJudge({"c0": 0.1, "c1": 0.9, "c2": 0.6, "c3": 0.2},
                          choice_scores={"c1": 1.0, "c2": 3.0, "c3": 0.0})
    reranker = DecisionRAGReranker(judge=judge, top_n=3, choice_top=3, title_key="title")
    out = reranker.postprocess_nodes(_nodes(texts), query_str="Who conquered England?")
    assert [n.node.node_id for n in out] == ["n2", "n1", "n3"]  # the choice reorders the shortlist
    assert [n.score for n in out] == [0.6, 0.9, 0.2]
    binary = [c for c in judge.calls if isinstance(c, BinaryRequest)]
    assert len(binary) == 1 and len(binary[0].questions) == 4  # one shared context, every node
    context = binary[0].context
    assert [context.index(t) for t in texts] == sorted(context.index(t) for t in texts)  # given order
    assert "# T1" in context and "User's question: Who conquered England?" in context
    choice = [c for c in judge.calls if isinstance(c, ChoiceRequest)]
    assert len(choice) == 1 and [c.id for c in choice[0].candidates] == ["c1", "c2", "c3"]


async def test_reranker_async_and_edge_cases() -> None:
    judge = ThreadRecordingJudge({"c0": 0.3, "c1": 0.7})
    reranker = DecisionRAGReranker(judge=judge)
    out = await reranker.apostprocess_nodes(_nodes(["a", "b"]), query_str="q")
    assert [n.node.node_id for n in out] == ["n1", "n0"]
    assert set(judge.threads) == {threading.get_ident()}
    assert await reranker.apostprocess_nodes([], query_str="q") == []
    with pytest.raises(ValueError, match="needs the query"):
        reranker.postprocess_nodes(_nodes(["a"]))


def test_reranker_behind_the_retriever_of_another_framework_component(xquad_tree: Path) -> None:
    """A decisionrag retriever's nodes reranked again: ids kept, scores from the reranker."""
    nodes = DecisionRAGRetriever(str(xquad_tree), judge=ScriptedJudge(), k=5).retrieve(QUERY)
    out = DecisionRAGReranker(judge="scripted", top_n=2).postprocess_nodes(nodes, query_str=QUERY)
    assert len(out) == 2 and {n.node.node_id for n in out} <= {n.node.node_id for n in nodes}
