"""The systems `decisionrag eval` compares, assembled as every other door assembles them.

Navigation systems are `Navigator`s from the engine assembly (`._engine`), so the
``decisionrag`` system of an evaluation is the system `decisionrag ask` runs; the flat
baselines and the navigators' candidates share one `FlatRetrievers` per tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._errors import InputError
from .._eval._systems import FlatSystem, NavigatorSystem, RerankSystem, System
from .._judges import Judge
from .._navigate import Retriever
from .._retrievers import DenseRetriever, FlatRetrievers
from .._tree import Tree
from ._engine import Navigator

SYSTEMS = ("decisionrag", "decisionrag+dense", "flat", "dense+judge", "bm25", "dense", "hybrid")


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
    flat: FlatRetrievers = field(init=False)

    def __post_init__(self) -> None:
        self.flat = FlatRetrievers(self.tree, model=self.embed_model, cache_dir=self.embed_cache,
                                   progress=self.progress, search=self.dense_search)

    @property
    def opened_dense(self) -> DenseRetriever | None:
        return self.flat.opened_dense

    def build(self, name: str) -> System:
        flat = self.flat
        builders: dict[str, Callable[[], System]] = {
            "bm25": lambda: FlatSystem(name, flat.bm25()),
            "dense": lambda: FlatSystem(name, flat.dense()),
            "hybrid": lambda: FlatSystem(name, flat.hybrid(strict=True)),
            "flat": lambda: NavigatorSystem(name, self._navigator("flat")),
            "decisionrag": lambda: NavigatorSystem(name, self._navigator(self.preset)),
            "decisionrag+dense": lambda: NavigatorSystem(
                name, self._navigator(self.preset, retriever=flat.dense())),
            "dense+judge": lambda: RerankSystem(name, self._navigator(self.preset), flat.dense()),
        }
        if name not in builders:
            raise InputError(f"unknown system {name!r}: choose from {', '.join(SYSTEMS)}")
        return builders[name]()

    def _navigator(self, preset: str, retriever: Retriever | None = None) -> Navigator:
        if self.judge is None:
            raise InputError("navigation systems need a judge (--judge)")
        return Navigator(self.tree, self.judge, preset, retriever=retriever, flat=self.flat)


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
