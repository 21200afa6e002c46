"""The systems an evaluation compares, behind one small async interface.

A system answers one query at a time with a ranking of passage keys, the usage it caused,
and (for navigation) the keys each stage kept. Queries of one conversation come in order;
`start_conversation` is called before the first turn of each, so a system with memory (the
navigation's notepad) starts clean for every conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._errors import InputError
from .._judges import Judge, Usage
from .._navigate import Retriever
from .._retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from .._tree import Tree
from ._data import EvalQuery

SYSTEMS = ("decisionrag", "decisionrag+dense", "flat", "dense+judge", "bm25", "dense", "hybrid")
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
    """The judge reranks the dense top 100: binary judgments, then a choice over the top 20."""

    def __init__(
        self, name: str, navigator: Any, dense: DenseRetriever, depth: int = RERANK_DEPTH
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


@dataclass
class SystemFactory:
    """Builds systems by name over one open tree, sharing the flat indexes between them."""

    tree: Tree
    judge: Judge | None
    preset: str = "auto"
    embed_model: str | None = None
    embed_cache: str | None = None
    progress: bool = False
    dense_search: str = "auto"  # "auto" (ANN index from ANN_FROM passages), "exact" or "ann"
    _dense: DenseRetriever | None = None
    _bm25: BM25Retriever | None = None

    def dense(self) -> DenseRetriever:
        if self._dense is None:
            self._dense = DenseRetriever.from_tree(
                self.tree,
                model=self.embed_model,
                cache_dir=self.embed_cache,
                progress=self.progress,
                search=self.dense_search,
            )
        return self._dense

    def hybrid(self) -> HybridRetriever:
        return HybridRetriever(self.bm25(), self.dense())

    def bm25(self) -> BM25Retriever:
        if self._bm25 is None:
            self._bm25 = BM25Retriever.from_tree(self.tree)
        return self._bm25

    def build(self, name: str) -> System:
        builders: dict[str, Callable[[], System]] = {
            "bm25": lambda: FlatSystem(name, self.bm25()),
            "dense": lambda: FlatSystem(name, self.dense()),
            "hybrid": lambda: FlatSystem(name, self.hybrid()),
            "flat": lambda: NavigatorSystem(name, self._navigator("flat")),
            "decisionrag": lambda: NavigatorSystem(name, self._navigator(self.preset)),
            "decisionrag+dense": lambda: NavigatorSystem(
                name, self._navigator(self.preset, retriever=self.dense())
            ),
            "dense+judge": lambda: RerankSystem(name, self._navigator(self.preset), self.dense()),
        }
        if name not in builders:
            raise InputError(f"unknown system {name!r}: choose from {', '.join(SYSTEMS)}")
        return builders[name]()

    def _navigator(self, preset: str, retriever: Retriever | None = None) -> Any:
        if self.judge is None:
            raise InputError("navigation systems need a judge (--judge)")
        from .._navigate import Navigator, get_preset

        chosen = get_preset(preset, self.tree, self.judge)
        if retriever is None and chosen.candidates is not None:
            retriever = self.retriever(chosen.candidates)
        return Navigator(self.tree, self.judge, preset=chosen, retriever=retriever)

    def retriever(self, name: str) -> Retriever:
        """The flat retriever a preset's `candidates` names."""
        found: dict[str, Callable[[], Retriever]] = {
            "hybrid": self.hybrid, "bm25": self.bm25, "dense": self.dense}
        return found[name]()


def parse_systems(text: str | Sequence[str]) -> list[str]:
    """``"decisionrag,bm25"`` -> ["decisionrag", "bm25"], checked against the known names."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise InputError(
            f"unknown system(s) {unknown or names!r}: choose from {', '.join(SYSTEMS)}"
        )
    if len(set(names)) != len(names):
        raise InputError(f"a system is named twice in {names}")
    return names
