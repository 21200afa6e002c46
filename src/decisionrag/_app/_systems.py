"""The systems `decisionrag eval` compares, assembled as every other door assembles them.

Navigation systems are `Navigator`s from the engine assembly (`._engine`), so the
``decisionrag`` system of an evaluation is the system `decisionrag ask` runs; the flat
baselines and the navigators' candidates share one `FlatRetrievers` per tree.

Ablations of the default (each with the same judge and preset): ``walk-only`` is the walk
without the flat candidates the preset adds to its passage stage; ``all+judge`` is the
judge's passage stage over every passage (no tree, no flat retriever); ``hybrid+judge`` and
``dense+judge`` rerank the top 100 of flat BM25 + dense fusion, or of dense, with the judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from .._errors import InputError
from .._eval._systems import EveryPassageSystem, FlatSystem, NavigatorSystem, RerankSystem, System
from .._judges import Judge
from .._navigate import Preset, Retriever, get_preset
from .._retrievers import DenseRetriever, FlatRetrievers
from .._tree import Tree
from ._engine import Navigator

SYSTEMS = ("decisionrag", "decisionrag+dense", "flat", "dense+judge", "bm25", "dense", "hybrid",
           "walk-only", "all+judge", "hybrid+judge")


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
            "hybrid+judge": lambda: RerankSystem(
                name, self._navigator(self.preset), flat.hybrid(strict=True)),
            "all+judge": lambda: EveryPassageSystem(name, self._navigator(self.preset)),
            "walk-only": lambda: NavigatorSystem(name, self._walk_only()),
        }
        if name not in builders:
            raise InputError(f"unknown system {name!r}: choose from {', '.join(SYSTEMS)}")
        return builders[name]()

    def _walk_only(self) -> Navigator:
        """The preset's walk with no flat candidates joining its passage stage."""
        if self.judge is None:
            raise InputError("navigation systems need a judge (--judge)")
        preset = replace(get_preset(self.preset, self.tree, self.judge), candidates=None, hybrid_k=0)
        return Navigator(self.tree, self.judge, preset, flat=self.flat)

    def _navigator(self, preset: str | Preset, retriever: Retriever | None = None) -> Navigator:
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
