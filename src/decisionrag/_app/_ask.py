"""Asking: open a navigator over a tree (judge, preset, hybrid retriever), retrieve, release.

Loading models (judges, dense retrievers) happens here, above navigation, which only ever
receives a `Judge` and a `Retriever`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._deadline import QueryDeadline
from .._errors import InputError
from .._judges import Judge, load_judge
from .._navigate import Navigator, Preset, Result, Retriever, get_preset
from .._query import Query
from .._sync import run_sync
from .._tree import Tree

HYBRID_KINDS = ("bm25", "dense", "hybrid")


def load_retriever(tree: Tree, kind: str | None, **options: Any) -> Retriever | None:
    """The flat retriever named `kind` ("bm25", "dense" or "hybrid": both fused by
    reciprocal rank) over `tree`'s passages, or None."""
    if kind is None:
        return None
    from .._retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    if kind == "bm25":
        return BM25Retriever.from_tree(tree, **options)
    if kind == "dense":
        return DenseRetriever.from_tree(tree, **options)
    if kind == "hybrid":
        return HybridRetriever.from_tree(tree, **options)
    raise InputError(f"unknown hybrid retriever {kind!r}: use 'bm25', 'dense' or 'hybrid'")


def open_navigator(
    tree: Tree | str | os.PathLike[str],
    judge: Judge | str = "embedded",
    preset: str | Preset = "auto",
    *,
    overrides: Mapping[str, Any] | None = None,
    hybrid: str | None = None,
    retriever: Retriever | None = None,
    judge_options: Mapping[str, Any] | None = None,
) -> Navigator:
    """A ready `Navigator`: `tree` (an open `Tree` or a tree file, opened read-only), `judge`
    (a `Judge` or a judge id, loaded with `judge_options`), `preset` (a name or a `Preset`)
    with `overrides` applied (None values ignored), and a hybrid retriever (`hybrid`: "bm25",
    "dense" or "hybrid", or an explicit `retriever`; by default the one the preset's
    `candidates` names: `auto` picks "hybrid" for trees that store vectors).

    A navigator is meant to be kept: it caches the tree's rendered entries, so a service
    opens one per (tree, judge, preset) and asks it many questions. Release it with
    `close_navigator`."""
    opened = tree if isinstance(tree, Tree) else Tree.open(tree)
    try:
        active = load_judge(judge, **dict(judge_options or {})) if isinstance(judge, str) else judge
        chosen = get_preset(preset, opened, active)
        given = {name: value for name, value in (overrides or {}).items() if value is not None}
        chosen = chosen.with_overrides(**given)
        return Navigator(opened, active, chosen,
                         retriever=retriever or load_retriever(opened, hybrid or chosen.candidates))
    except BaseException:
        if opened is not tree:
            opened.close()
        raise


async def aclose_navigator(navigator: Navigator, *, judge: bool = True, tree: bool = True) -> None:
    """Release what `open_navigator` acquired: the judge's connections and the tree file."""
    try:
        if judge:
            await navigator.judge.aclose()
    finally:
        if tree:
            navigator.tree.close()


def close_navigator(navigator: Navigator, *, judge: bool = True, tree: bool = True) -> None:
    run_sync(aclose_navigator(navigator, judge=judge, tree=tree))


async def aask(navigator: Navigator, query: str | Query, k: int = 10,
               filters: Mapping[str, Any] | None = None, *,
               deadline: float | QueryDeadline | None = None,
               max_input_tokens: int | None = None) -> Result:
    """One retrieval on an open navigator (what a service runs per request); `filters` keep
    the passages whose metadata match (see `Navigator.aretrieve`); `deadline` (seconds or a
    `QueryDeadline`) bounds all of it."""
    return await navigator.aretrieve(Query.of(query), k=k, filters=filters, deadline=deadline,
                                     max_input_tokens=max_input_tokens)


def ask(
    tree_path: str | os.PathLike[str],
    query: str | Query,
    *,
    judge_id: str = "embedded",
    preset: str | Preset = "auto",
    k: int = 10,
    overrides: Mapping[str, Any] | None = None,
    judge: Judge | None = None,
    hybrid: str | None = None,
    filters: Mapping[str, Any] | None = None,
    deadline: float | QueryDeadline | None = None,
    max_input_tokens: int | None = None,
) -> Result:
    """Open the tree, load the judge, answer once, release both (a `judge` passed in is not
    closed). `hybrid` ("bm25" or "dense") adds that retriever's top passages to the passage
    stage; `filters` keep only passages whose metadata match; `deadline` bounds the query.
    The code path of `decisionrag ask` and the demo."""
    query = Query.of(query).check()  # before a model is loaded for it
    navigator = open_navigator(tree_path, judge or judge_id, preset, overrides=overrides,
                               hybrid=hybrid)
    return run_sync(_ask_and_close(navigator, query, k, filters,
                                   close_judge=judge is None, deadline=deadline,
                                   max_input_tokens=max_input_tokens))


async def _ask_and_close(navigator: Navigator, query: Query, k: int,
                         filters: Mapping[str, Any] | None, *, close_judge: bool,
                         deadline: float | QueryDeadline | None = None,
                         max_input_tokens: int | None = None) -> Result:
    try:
        return await aask(navigator, query, k, filters, deadline=deadline,
                          max_input_tokens=max_input_tokens)
    finally:
        await aclose_navigator(navigator, judge=close_judge)


ask_once = ask  # the name benchmarks and older callers use
