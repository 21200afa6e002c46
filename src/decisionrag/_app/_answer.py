"""Answering: one answer against one tree file (the code path of `decisionrag answer`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from .._answer import Answer, AnswerEvent, astream_answer, load_generator
from .._deadline import QueryDeadline
from .._query import Query
from .._sync import run_sync
from ._engine import Navigator


def answer_once(
    tree_path: str | os.PathLike[str],
    query: str | Query,
    *,
    judge_id: str = "embedded",
    preset: str = "auto",
    generator: str | None = None,
    base_url: str | None = None,
    top: int = 5,
    task: str = "auto",
    stream: bool = False,
    on_event: Callable[[AnswerEvent], None] | None = None,
    deadline: float | QueryDeadline | None = None,
    judge_options: Mapping[str, Any] | None = None,
    generator_options: Mapping[str, Any] | None = None,
) -> Answer:
    """Open the tree, the judge and the generator (checked first: a missing one fails
    before any walk), answer once, release all three. `deadline` (seconds from now, or a
    `QueryDeadline`) bounds everything: opening, the walk and the whole answer. The options
    go to the judge (`Navigator`'s `judge_options`) and to `load_generator`."""
    if deadline is not None and not isinstance(deadline, QueryDeadline):
        deadline = QueryDeadline(deadline, from_now=True)
    model = load_generator(generator, base_url=base_url, **dict(generator_options or {}))
    try:
        navigator = Navigator(tree_path, judge_id, preset, judge_options=judge_options)
    except BaseException:
        run_sync(model.aclose())
        raise

    async def run() -> Answer:
        try:
            found: Answer | None = None
            async for event in astream_answer(navigator, Query.of(query), generator=model, top=top,
                                              k=max(10, top), task=task, stream=stream,
                                              deadline=deadline):
                if on_event is not None:
                    on_event(event)
                found = event.answer or found
            assert found is not None
            return found
        finally:
            try:
                await model.aclose()
            finally:
                await navigator.aclose()

    return run_sync(run())
