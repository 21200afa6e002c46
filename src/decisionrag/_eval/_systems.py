"""The systems an evaluation compares, behind one small async interface.

A system answers one query at a time with a ranking of passage keys, the usage it caused,
and (for navigation) the keys each stage kept. Queries of one conversation come in order;
`start_conversation` is called before the first turn of each, so a system with memory (the
navigation's notepad) starts clean for every conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .._judges import Usage
from .._navigate import Retriever
from .._retrievers import DenseRetriever
from ._data import EvalQuery

RERANK_DEPTH = 100  # dense candidates the judge reranks (paper §6.5)


@dataclass
class Retrieval:
    """One system's answer to one query."""

    ranking: list[str]
    usage: Usage | None = None
    stages: list[tuple[str, list[str]]] = field(default_factory=list)
    scores: list[float] | None = None  # the system's own score of each ranked key, when it has one


class System(Protocol):
    name: str

    def start_conversation(self) -> None: ...

    async def run(self, query: EvalQuery, k: int) -> Retrieval: ...


class Systems(Protocol):
    """The systems an evaluation compares, built by name over one open tree (the
    application's `SystemFactory`, which assembles navigators as every other door does)."""

    def build(self, name: str) -> System: ...

    @property
    def opened_dense(self) -> DenseRetriever | None:
        """The dense retriever, if a system opened one (eval reports how it searched)."""


class FlatSystem:
    """A flat retriever asked the scenario + question, or the last turn of a conversation."""

    def __init__(self, name: str, retriever: Retriever) -> None:
        self.name = name
        self.retriever = retriever

    def start_conversation(self) -> None:
        return None

    async def run(self, query: EvalQuery, k: int) -> Retrieval:
        found = self.retriever.retrieve(query.flat_text(), k)
        return Retrieval([key for key, _ in found], scores=[score for _, score in found])


def _result_to_retrieval(result: Any) -> Retrieval:
    stages = [
        (str(stage.name), [str(key) for key, _ in stage.kept]) for stage in result.trace.stages
    ]
    # a hit's collapsed duplicates are ranked right after it: the metrics see every passage
    # the walk found, as without collapsing (`--dedup-text` counts identical texts once)
    ranked = [(key, float(hit.score)) for hit in result.hits
              for key in (hit.node.key, *(place.key for place in hit.also_at))]
    return Retrieval([key for key, _ in ranked], result.usage, stages,
                     scores=[score for _, score in ranked])


class NavigatorSystem:
    """Navigation (any preset, optionally with hybrid dense candidates).

    Each conversation keeps its own notepad of the pages this system retrieved (the
    navigation's Conversation rule: the top hit's page moves to the front after each turn);
    the turns themselves come from the dataset's history.
    """

    def __init__(self, name: str, navigator: Any) -> None:
        self.name = name
        self.navigator = navigator
        self._memory: Any = None

    def start_conversation(self) -> None:
        from .._navigate import Conversation

        self._memory = Conversation(self.navigator)

    async def run(self, query: EvalQuery, k: int) -> Retrieval:
        notepad = tuple(self._memory.notepad) if self._memory is not None else ()
        result = await self.navigator.aretrieve(query.to_query(), k=k, notepad=notepad)
        if self._memory is not None and result.hits:
            top = result.hits[0]
            self._memory.remember(top.doc_key or self.navigator.tree.document_of(top.node).key)
        return _result_to_retrieval(result)


class RerankSystem:
    """The judge reranks a flat retriever's top 100 (dense, or BM25 + dense fused): binary
    judgments, then a choice over the top 20."""

    def __init__(
        self, name: str, navigator: Any, dense: Retriever, depth: int = RERANK_DEPTH
    ) -> None:
        self.name = name
        self.navigator = navigator
        self.dense = dense
        self.depth = depth

    def start_conversation(self) -> None:
        return None

    async def run(self, query: EvalQuery, k: int) -> Retrieval:
        candidates = [key for key, _ in self.dense.retrieve(query.flat_text(), self.depth)]
        result = await self.navigator.arerank(query.to_query(), candidates, k=k)
        return _result_to_retrieval(result)


class EveryPassageSystem:
    """The judge's passage stage over every passage of the tree, no walk and no flat
    retriever: what the judge's scorer ranks alone (binary judgments in shared contexts
    grouped by page and section, then the choice step)."""

    def __init__(self, name: str, navigator: Any) -> None:
        self.name = name
        self.navigator = navigator
        self._keys: list[str] | None = None

    def start_conversation(self) -> None:
        return None

    async def run(self, query: EvalQuery, k: int) -> Retrieval:
        if self._keys is None:
            tree = self.navigator.tree
            self._keys = tree.keys_of([int(i) for i in tree.passage_ids()])
        result = await self.navigator.arerank(query.to_query(), self._keys, k=k)
        return _result_to_retrieval(result)
