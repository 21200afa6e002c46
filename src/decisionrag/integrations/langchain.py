"""LangChain: a retriever over a decisionrag tree, and decision models in both directions.

>>> from decisionrag.integrations.langchain import DecisionRAGRetriever
>>> retriever = DecisionRAGRetriever(tree="docs.tree", judge="embedded", k=4)
>>> docs = retriever.invoke("How do I rotate the API keys?")          # or await ainvoke(...)
>>> docs = retriever.invoke("How do I rotate the API keys?", k=1)     # per-call k

Each `Document` carries the passage text as ``page_content`` and, in ``metadata``, the
hit's own metadata plus ``id``, ``doc_id``, ``score`` and ``path`` (titles from the top
group down to the passage's heading). Give ``url=`` (a ``decisionrag serve`` address, with
``api_key=`` and ``tree=`` naming one of its trees) instead of a tree file to retrieve from a
server.

Decision models: `judge_from_langchain` (or ``load_judge(model)``) makes any
`langchain_core.decisions.BaseDecisionModel` a decisionrag judge, and `DecisionRAGDecisionModel`
makes any decisionrag judge a `BaseDecisionModel`.

Needs ``pip install 'decisionrag[langchain]'`` (langchain-core >= 1.8).
"""

from __future__ import annotations

from typing import Any

from .._errors import missing_extra

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-core", "langchain") from exc

from .._judges._langchain import LangChainJudge, judge_from_langchain
from ._lc_decisions import DecisionRAGDecisionModel
from ._source import Passage, Source, check_k, open_source

__all__ = [
    "DecisionRAGDecisionModel",
    "DecisionRAGRetriever",
    "LangChainJudge",
    "judge_from_langchain",
]


class DecisionRAGRetriever(BaseRetriever):
    """Passages of a decisionrag tree, ranked by a decision model walking the tree.

    Fields: ``tree`` (a tree file; with ``url``, the name of one of the server's trees),
    ``url`` and ``api_key`` (a ``decisionrag serve`` instance), ``judge`` (a judge id such
    as ``"embedded"`` or ``"jev-compatible:http://127.0.0.1:8080"``, a `decisionrag.Judge`,
    or a LangChain ``BaseDecisionModel``), ``judge_options`` (keyword options of
    ``load_judge``), ``preset`` and ``k`` (documents per call; ``invoke(query, k=N)``
    overrides it for one call).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tree: str | None = None
    url: str | None = None
    api_key: str | None = None
    judge: Any = "embedded"
    judge_options: dict[str, Any] = Field(default_factory=dict)
    preset: str | None = None
    k: int = 4

    _source: Source | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        check_k(self.k)
        self._source = open_source(tree=self.tree, url=self.url, judge=self.judge,
                                   preset=self.preset, api_key=self.api_key,
                                   judge_options=self.judge_options)

    @property
    def source(self) -> Source:
        assert self._source is not None
        return self._source

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = check_k(kwargs.pop("k", self.k))
        kwargs.pop("verbose", None)
        _no_other_kwargs(kwargs)
        return [_document(p) for p in self.source.retrieve(query, k)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k = check_k(kwargs.pop("k", self.k))
        kwargs.pop("verbose", None)
        _no_other_kwargs(kwargs)
        return [_document(p) for p in await self.source.aretrieve(query, k)]


def _no_other_kwargs(kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TypeError(f"DecisionRAGRetriever: unknown arguments {sorted(kwargs)} (only k is taken)")


def _document(passage: Passage) -> Document:
    return Document(page_content=passage.text, metadata=passage.describe(), id=passage.id)
