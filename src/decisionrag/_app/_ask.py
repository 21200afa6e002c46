"""Asking: one retrieval on a ready navigator, or open → retrieve → release in one call."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._deadline import QueryDeadline
from .._judges import Judge
from .._navigate import Preset, Result
from .._query import Query
from .._sync import run_sync
from ._engine import Navigator


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
    judge_options: Mapping[str, Any] | None = None,
    hybrid: str | None = None,
    filters: Mapping[str, Any] | None = None,
    deadline: float | QueryDeadline | None = None,
    max_input_tokens: int | None = None,
) -> Result:
    """Open the tree, load the judge, answer once, release both (a `judge` passed in is not
    closed). `hybrid` ("bm25", "dense" or "hybrid") replaces the preset's flat candidates;
    `filters` keep only passages whose metadata match; `deadline` bounds the query.
    The code path of `decisionrag ask` and the demo."""
    query = Query.of(query).check()  # before a model is loaded for it
    navigator = Navigator(tree_path, judge or judge_id, preset, overrides=overrides,
                          hybrid=hybrid, judge_options=judge_options)
    return run_sync(_ask_and_close(navigator, query, k, filters, deadline, max_input_tokens))


async def _ask_and_close(navigator: Navigator, query: Query, k: int,
                         filters: Mapping[str, Any] | None,
                         deadline: float | QueryDeadline | None,
                         max_input_tokens: int | None) -> Result:
    try:
        return await aask(navigator, query, k, filters, deadline=deadline,
                          max_input_tokens=max_input_tokens)
    finally:
        await navigator.aclose()
