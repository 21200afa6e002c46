"""The engine assembly: the one place a ready navigator is put together.

Every door builds its navigator here — `decisionrag ask`, the Python API
(`decisionrag.Navigator`), every worker of `decisionrag serve`, `decisionrag mcp`, the LangChain
and LlamaIndex integrations, and `decisionrag eval` — so the same question gets the same
answer through each: the tree opened, the judge loaded (by id, with options), the preset
resolved for this tree and judge (`auto`), overrides applied, the tree's stored vectors and
word statistics attached as the judge reads them (`Judge.reads`), and the flat candidates the
preset names (`Preset.candidates`) opened over the tree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._errors import JudgeConfigError
from .._judges import Judge, load_judge
from .._navigate import Navigator as _Navigator
from .._navigate import Preset, Retriever, get_preset
from .._retrievers import FlatRetrievers
from .._sync import run_sync
from .._tree import Tree


class Navigator(_Navigator):
    """A ready navigator: walks `tree` with `judge` under `preset`.

    >>> navigator = Navigator("docs.tree")                       # the embedded judge, auto
    >>> navigator.retrieve("How do I rotate the API keys?").hits

    `tree`: an open `Tree` or a tree file (opened read-only). `judge`: a `Judge`, a judge id
    (loaded with `judge_options`) or a LangChain ``BaseDecisionModel``. `preset`: a name or a
    `Preset`, with `overrides` applied (None values ignored). Candidates from flat search join
    the passage stage as the preset says (`auto`: BM25 + dense fused, for a judge that reads
    stored vectors over a tree that has them); `hybrid` ("bm25", "dense" or "hybrid") or an
    explicit `retriever` chooses others; `flat` shares flat indexes between navigators of one
    tree. `concurrency` bounds the judge requests in flight within one query.

    A navigator is meant to be kept: it caches the tree's rendered entries, so a service
    opens one per (tree, judge, preset) and asks it many questions. `close()` releases what
    it opened itself (a tree file it was given by path, a judge it loaded by id)."""

    def __init__(
        self,
        tree: Tree | str | os.PathLike[str],
        judge: Judge | str | Any = "embedded",
        preset: str | Preset = "auto",
        *,
        overrides: Mapping[str, Any] | None = None,
        hybrid: str | None = None,
        retriever: Retriever | None = None,
        judge_options: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
        flat: FlatRetrievers | None = None,
    ) -> None:
        opened = tree if isinstance(tree, Tree) else Tree.open(tree)
        active: Judge | None = None
        try:
            active = open_judge(judge, judge_options)
            chosen = get_preset(preset, opened, active)
            chosen = chosen.with_overrides(
                **{name: value for name, value in (overrides or {}).items() if value is not None})
            kind = hybrid or chosen.candidates
            if retriever is None and kind is not None:
                retriever = (flat if flat is not None else FlatRetrievers(opened)).get(kind)
            super().__init__(opened, active, chosen, retriever=retriever, concurrency=concurrency)
        except BaseException:
            if active is not None and active is not judge:
                run_sync(active.aclose())
            if opened is not tree:
                opened.close()
            raise
        self._owns_tree = opened is not tree
        self._owns_judge = active is not judge

    async def aclose(self) -> None:
        """Release the judge this navigator loaded and the tree file it opened (those it was
        given stay open: their owner closes them)."""
        await aclose_navigator(self, judge=self._owns_judge, tree=self._owns_tree)

    def close(self) -> None:
        run_sync(self.aclose())


def open_judge(judge: Judge | str | Any = "embedded",
               options: Mapping[str, Any] | None = None) -> Judge:
    """The judge every door walks with: a `Judge` as it is (`options` must then be empty),
    else loaded by id (or from a LangChain model) with `options`, checked and typed by the
    backend's options class (`decisionrag._judges.judge_options`). The one loading path of
    `Navigator`, `decisionrag serve`/`mcp` (one judge shared by every tree) and `eval`."""
    if isinstance(judge, Judge):
        if options:
            raise JudgeConfigError(f"options {sorted(options)} cannot apply to a judge object")
        return judge
    return load_judge(judge, **dict(options or {}))


def open_navigator(
    tree: Tree | str | os.PathLike[str],
    judge: Judge | str | Any = "embedded",
    preset: str | Preset = "auto",
    **options: Any,
) -> Navigator:
    """A ready `Navigator` (the same as calling it; see there for `options`)."""
    return Navigator(tree, judge, preset, **options)


async def aclose_navigator(navigator: _Navigator, *, judge: bool = True, tree: bool = True) -> None:
    """Release a navigator's judge connections and tree file (each when asked)."""
    try:
        if judge:
            await navigator.judge.aclose()
    finally:
        if tree:
            navigator.tree.close()


def close_navigator(navigator: _Navigator, *, judge: bool = True, tree: bool = True) -> None:
    run_sync(aclose_navigator(navigator, judge=judge, tree=tree))
