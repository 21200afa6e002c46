"""Retrieve, then answer from the top passages: `aanswer`, `answer`, and their streams.

>>> navigator = Navigator(Tree.open("docs.tree"), load_judge("embedded"))
>>> reply = answer(navigator, "How do I rotate the API keys?", generator="openai-compatible:gpt-4o-mini")
>>> print(reply.text); [hit.path for hit in reply.cited]
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .._deadline import QueryDeadline
from .._errors import AnswerError, InputError
from .._navigate import Hit, Navigator, Result
from .._query import Query, Turn
from .._sync import run_sync
from ._answer import Answer, GenerationUsage
from ._generator import Generation, Generator, load_generator
from ._prompts import Source, Task, build_messages, get_task

DEFAULT_TOP = 5  # passages given to the generator (the paper answers from the top five)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """One event of a streamed answer: ``retrieved`` (the passages are ranked; `result`),
    ``delta`` (more answer text; `text`), then ``done`` (`answer`, citations resolved)."""

    kind: Literal["retrieved", "delta", "done"]
    text: str = ""
    result: Result | None = None
    answer: Answer | None = None


def sources_of(hits: Sequence[Hit]) -> list[Source]:
    return [Source(i, hit.path, hit.node.text) for i, hit in enumerate(hits, 1)]


def prompt_for(result: Result, top: int, task: str | Task) -> tuple[list[Hit], Task, list[dict[str, str]]]:
    """The passages given (the first `top` hits, numbered 1..top), the task and the messages."""
    if top < 1:
        raise InputError(f"top must be at least 1, not {top}")
    chosen = get_task(task, result.query)
    hits = result.hits[:top]
    return hits, chosen, build_messages(result.query, sources_of(hits), chosen)


async def aanswer(
    navigator: Navigator,
    query: str | Query,
    *,
    generator: str | Generator | None = None,
    history: Sequence[Turn | dict[str, Any]] | None = None,
    top: int = DEFAULT_TOP,
    k: int = 10,
    task: str | Task = "auto",
    notepad: Sequence[str] | None = None,
    deadline: float | QueryDeadline | None = None,
) -> Answer:
    """Walk the tree for `query`, then have `generator` answer from the top `top` passages
    with bracketed citations. A generator given by id is opened and closed here.
    `deadline` (seconds, or a `QueryDeadline`) bounds the walk and the answer together."""
    answer: Answer | None = None
    async for event in astream_answer(navigator, query, generator=generator, history=history, top=top,
                                      k=k, task=task, notepad=notepad, stream=False,
                                      deadline=deadline):
        answer = event.answer or answer
    assert answer is not None
    return answer


def answer(navigator: Navigator, query: str | Query, **options: Any) -> Answer:
    """The synchronous twin of `aanswer` (safe inside a running event loop too)."""
    return run_sync(aanswer(navigator, query, **options))


async def astream_answer(
    navigator: Navigator,
    query: str | Query,
    *,
    generator: str | Generator | None = None,
    history: Sequence[Turn | dict[str, Any]] | None = None,
    top: int = DEFAULT_TOP,
    k: int = 10,
    task: str | Task = "auto",
    notepad: Sequence[str] | None = None,
    stream: bool = True,
    deadline: float | QueryDeadline | None = None,
) -> AsyncIterator[AnswerEvent]:
    """`aanswer` as events: ``retrieved``, ``delta``s as the model writes, ``done``.

    `deadline` (seconds, or a `QueryDeadline`) covers the walk and the whole answer: the
    model's requests and retries fit in what the walk left, and a stream is cut when it runs
    out, however the model keeps it going (`AnswerError` saying so)."""
    model, owned = _generator(generator)
    scope = deadline if isinstance(deadline, QueryDeadline) or deadline is None else \
        QueryDeadline(deadline, from_now=True)
    try:
        result = await navigator.aretrieve(query, history, k=max(k, top), notepad=notepad,
                                           deadline=scope)
        yield AnswerEvent("retrieved", result=result)
        hits, chosen, messages = prompt_for(result, top, task)
        start = time.perf_counter()
        pieces: list[Generation] = []
        if stream:
            async for piece in within_stream(model.stream(messages, max_tokens=chosen.max_tokens),
                                             scope, model.name):
                pieces.append(piece)
                if piece.text:
                    yield AnswerEvent("delta", text=piece.text)
        else:
            pieces.append(await within(model.generate(messages, max_tokens=chosen.max_tokens),
                                       scope, model.name))
        usage = _usage(pieces, time.perf_counter() - start)
        text = "".join(p.text for p in pieces)
        yield AnswerEvent("done", answer=Answer.of(text, result, hits, chosen.name, model.name, usage))
    finally:
        if owned:
            await model.aclose()


async def within(work: Awaitable[T], scope: QueryDeadline | None, who: str) -> T:
    """`work` (one step of the answer) inside `scope`: the HTTP layer's calls share its clock
    and retry budget, and a backstop timer cuts the step when the scope runs out."""
    if scope is None:
        return await work
    with scope.active():
        left = scope.remaining()
        try:
            async with asyncio.timeout(None if left == math.inf else max(left, 0.0)):
                return await work
        except TimeoutError as exc:
            raise AnswerError(f"{who}: the query's deadline of {scope.seconds:g}s passed while "
                              "the answer was being written") from exc


async def within_stream(pieces: AsyncIterator[T], scope: QueryDeadline | None,
                        who: str) -> AsyncIterator[T]:
    """The items of `pieces`, each awaited `within` `scope`; the stream is closed (its
    connection released) however it ends."""
    iterator = aiter(pieces)
    try:
        while True:
            try:
                item = await within(anext(iterator), scope, who)
            except StopAsyncIteration:
                return
            yield item
    finally:
        closing = getattr(iterator, "aclose", None)
        if closing is not None:
            await closing()


def stream_answer(navigator: Navigator, query: str | Query, **options: Any) -> Iterator[AnswerEvent]:
    """`astream_answer` for synchronous code: events as they come, from a worker thread."""
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    async def pump() -> None:
        async for event in astream_answer(navigator, query, **options):
            events.put(("event", event))
            if stop.is_set():
                return

    def work() -> None:
        try:
            asyncio.run(pump())
            events.put(("end", None))
        except BaseException as exc:  # handed to the consumer's thread
            events.put(("error", exc))

    worker = threading.Thread(target=work, daemon=True, name="decisionrag-answer")
    worker.start()
    try:
        while True:
            kind, value = events.get()
            if kind == "event":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()


def _generator(generator: str | Generator | None) -> tuple[Generator, bool]:
    if generator is None or isinstance(generator, str):
        return load_generator(generator), True
    return generator, False


def _usage(pieces: Sequence[Generation], seconds: float) -> GenerationUsage:
    inputs = [p.input_tokens for p in pieces if p.input_tokens is not None]
    outputs = [p.output_tokens for p in pieces if p.output_tokens is not None]
    return GenerationUsage(requests=1, input_tokens=max(inputs, default=0),
                           output_tokens=max(outputs, default=0), seconds=seconds)
