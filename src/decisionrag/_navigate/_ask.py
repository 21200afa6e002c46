"""One question against one tree file: the code path of `decisionrag ask` and the demo."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._errors import InputError
from .._judges import Judge, load_judge
from .._query import Query
from .._sync import run_sync
from .._tree import Tree
from ._config import Preset, get_preset
from ._navigator import Navigator, Retriever
from ._result import Result


def ask_once(
    tree_path: str | os.PathLike[str],
    query: str | Query,
    *,
    judge_id: str = "embedded",
    preset: str | Preset = "auto",
    k: int = 10,
    overrides: Mapping[str, Any] | None = None,
    judge: Judge | None = None,
    hybrid: str | None = None,
) -> Result:
    """Open the tree, load the judge, answer once, release both. `hybrid` ("bm25" or
    "dense") adds that retriever's top passages to the passage stage."""
    with Tree.open(tree_path) as tree:
        active = judge or load_judge(judge_id)
        chosen = get_preset(preset, tree, active)
        given = {name: value for name, value in (overrides or {}).items() if value is not None}
        chosen = chosen.with_overrides(**given)
        navigator = Navigator(tree, active, chosen, retriever=_retriever(tree, hybrid))
        return run_sync(_ask(navigator, Query.of(query), k, close=judge is None))


def _retriever(tree: Tree, kind: str | None) -> Retriever | None:
    if kind is None:
        return None
    from .._retrievers import BM25Retriever, DenseRetriever

    if kind == "bm25":
        return BM25Retriever.from_tree(tree)
    if kind == "dense":
        return DenseRetriever.from_tree(tree)
    raise InputError(f"unknown hybrid retriever {kind!r}: use 'bm25' or 'dense'")


async def _ask(navigator: Navigator, query: Query, k: int, *, close: bool) -> Result:
    try:
        return await navigator.aretrieve(query, k=k)
    finally:
        if close:
            await navigator.judge.aclose()
