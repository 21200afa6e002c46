"""LlamaIndex: a retriever over a decisionrag tree, and a reranker for any retriever's nodes.

>>> from decisionrag.integrations.llamaindex import DecisionRAGRetriever, DecisionRAGReranker
>>> retriever = DecisionRAGRetriever(tree="docs.tree", judge="embedded", k=4)
>>> nodes = retriever.retrieve("How do I rotate the API keys?")     # or await aretrieve(...)
>>> reranked = DecisionRAGReranker(judge="embedded", top_n=3).postprocess_nodes(
...     other_retriever.retrieve(question), query_str=question)

`DecisionRAGRetriever` returns `NodeWithScore` objects whose `TextNode` has the passage id as
``id_``, the passage text, and in ``metadata`` the hit's own metadata plus ``id``, ``doc_id``,
``score`` and ``path`` (as the LangChain retriever's documents). Give ``url=`` (a
``decisionrag serve`` address) instead of a tree file to retrieve from a server.

`DecisionRAGReranker` (a node postprocessor) judges the nodes it is given as a walk's passage
stage judges its candidates — one shared context in their given order, one yes/no question
per node — then reorders the best ``choice_top`` by the walk's multiple-choice step, and
returns them best first (the top ``top_n`` when set), each scored by its P(yes). With
``tree=`` (a tree file), that tree's word statistics are used, and nodes whose ids are the
tree's passages (as `DecisionRAGRetriever` returns them) are reranked exactly as the walk's
last stages rerank them (`Navigator.arerank`: stored vectors, page and headings above).

Needs ``pip install 'decisionrag[llamaindex]'`` (llama-index-core >= 0.14).
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import missing_extra

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("llama-index-core", "llamaindex") from exc

from .._app import Navigator, rerank_texts
from .._judges import Judge, load_judge
from .._query import Query
from .._sync import run_sync
from ._source import Passage, check_k, open_source

__all__ = ["DecisionRAGReranker", "DecisionRAGRetriever"]


class DecisionRAGRetriever(BaseRetriever):
    """Passages of a decisionrag tree, ranked by a decision model walking the tree.

    ``tree`` (a tree file; with ``url``, one of the server's trees), ``url`` / ``api_key``
    (a ``decisionrag serve`` instance), ``judge`` (an id, a `decisionrag.Judge` or a LangChain
    ``BaseDecisionModel``), ``judge_options``, ``preset`` and ``k`` (nodes per query).
    """

    def __init__(
        self,
        tree: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        judge: Any = "embedded",
        judge_options: dict[str, Any] | None = None,
        preset: str | None = None,
        k: int = 4,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.k = check_k(k)
        self.source = open_source(tree=tree, url=url, judge=judge, preset=preset, api_key=api_key,
                                  judge_options=judge_options)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(p) for p in self.source.retrieve(query_bundle.query_str, self.k)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(p) for p in await self.source.aretrieve(query_bundle.query_str, self.k)]


def _node(passage: Passage) -> NodeWithScore:
    # the duplicates' locations are for the application, not text for the LLM or an embedder
    node = TextNode(id_=passage.id, text=passage.text, metadata=passage.describe(),
                    excluded_llm_metadata_keys=["also_at"], excluded_embed_metadata_keys=["also_at"])
    return NodeWithScore(node=node, score=passage.score)


class DecisionRAGReranker(BaseNodePostprocessor):
    """Rerank another retriever's nodes with a decision model, all in one shared context."""

    judge: Any = Field(default="embedded", description="a judge id, Judge or BaseDecisionModel")
    top_n: int | None = Field(default=None, description="nodes to keep (None: all, reordered)")
    choice_top: int = Field(default=20, description="shortlist size of the multiple-choice question")
    title_key: str | None = Field(default=None, description="node metadata key printed above each node")
    tree: str | None = Field(default=None, description="a tree file: its statistics, its passages by id")

    _judge: Judge | None = PrivateAttr(default=None)
    _navigator: Navigator | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "DecisionRAGReranker"

    @property
    def loaded_judge(self) -> Judge:
        if self._judge is None:
            self._judge = self.judge if isinstance(self.judge, Judge) else load_judge(self.judge)
        return self._judge

    @property
    def navigator(self) -> Navigator | None:
        """The navigator over `tree` (None without one), made on first use."""
        if self.tree is not None and self._navigator is None:
            self._navigator = Navigator(os.fspath(self.tree), self.loaded_judge)
        return self._navigator

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return run_sync(self._apostprocess_nodes(nodes, query_bundle))

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("DecisionRAGReranker needs the query (query_str= or query_bundle=)")
        if not nodes:
            return []
        navigator = self.navigator
        ids = [str(n.node.node_id) for n in nodes]
        if navigator is not None and all(navigator.tree.has_passage(i) for i in ids):
            return await self._rerank_passages(navigator, nodes, ids, query_bundle.query_str)
        texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        titles = None
        if self.title_key:
            titles = [str(n.node.metadata.get(self.title_key, "")) for n in nodes]
        ranked, _, _ = await rerank_texts(
            self.loaded_judge, query_bundle.query_str, texts, titles=titles,
            choice_top=self.choice_top,
            statistics=navigator.view.lexicon if navigator is not None else None)
        kept = ranked if self.top_n is None else ranked[: self.top_n]
        return [NodeWithScore(node=nodes[r.index].node, score=r.binary) for r in kept]

    async def _rerank_passages(self, navigator: Navigator, nodes: list[NodeWithScore],
                               ids: list[str], query: str) -> list[NodeWithScore]:
        """Nodes that are passages of `tree`, by the walk's last stages (their duplicates
        right after them, as the walk collapsed them)."""
        result = await navigator.arerank(Query(query), ids, k=len(ids))
        by_id = {key: n for key, n in zip(ids, nodes, strict=True)}
        ranked = [(key, hit.score) for hit in result.hits
                  for key in (hit.node.key, *(place.key for place in hit.also_at))]
        kept = ranked if self.top_n is None else ranked[: self.top_n]
        return [NodeWithScore(node=by_id[key].node, score=score) for key, score in kept]
