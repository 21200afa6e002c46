"""`POST /v1/answer`: retrieve as `/v1/retrieve` does, then the server's answer model answers
from the top passages with bracketed citations; ``"stream": true`` sends server-sent events.

The retrieval half is `Service.retrieval` itself (keys, limits, conversations, deadline), so
its errors keep their statuses; the answer model's failures are 502 (``generator_failed``).
The request's deadline (``timeout``, else the server's ``--timeout``) covers the answer too:
the model gets what the walk left, and when it runs out the answer is a 504
(``deadline_exceeded``) — or, streamed, an ``event: error`` carrying that body, the stream
then closed however the model keeps its own going.
The prompt shows the turns the walk was given: the client's `messages`, or with only a
`conversation_id` the stored conversation's (as `decisionrag.answer` does with `history=`);
the answer is then stored as the agent's turn (a failed or abandoned one is not).
A server started without an answer model has no such route. A stream is
``event: retrieved`` (the ranked passages), ``event: delta`` (``{"text"}``) as the model
writes, then ``event: done`` (the whole answer, citations resolved) — or ``event: error``
(``{"error": {...}}``) when the model fails mid-answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from .._answer import Generator, Source, build_messages, find_citations, get_task, strip_citations
from .._answer._run import within, within_stream
from .._deadline import QueryDeadline
from .._errors import DecisionRAGError
from ._errors import ServeError
from ._logging import REQUEST_ID
from ._schemas import HitOut, RetrieveRequest, RetrieveResponse
from ._service import Retrieval

MAX_TOP = 50


class AnswerRequest(RetrieveRequest):
    """A retrieval request plus how to answer: from the `top` passages, as `task`."""

    top: int = Field(5, ge=1, le=MAX_TOP, description="passages given to the answer model (at most k)")
    task: Literal["auto", "qa", "short", "conversation"] = Field(
        "auto", description="qa: short answer with conditions; short: at most five words; "
        "conversation: the agent's next reply; auto: conversation when there are earlier turns")
    stream: bool = Field(False, description="server-sent events: retrieved, delta..., done")


class CitationOut(BaseModel):
    number: int
    valid: bool
    id: str | None = None
    doc_id: str | None = None
    path: list[str] | None = None
    metadata: dict[str, Any] | None = None


class GenerationOut(BaseModel):
    model: str
    input_tokens: int | None
    output_tokens: int | None
    seconds: float


class AnswerResponse(BaseModel):
    answer: str
    short_answer: str
    task: str
    citations: list[CitationOut]
    invalid_citations: list[int]
    sources: list[HitOut] = Field(description="the passages given to the model, numbered from 1")
    retrieval: RetrieveResponse
    generation: GenerationOut
    request_id: str


def answer_router(service: Any, principal: Any, generator: Generator, limiter: Any = None) -> APIRouter:
    """The router of ``POST /v1/answer`` over the app's `service`, callers by `principal`
    (mounted only when the server has an answer model, so its OpenAPI document tells);
    `limiter` (a `_rates.KeyLimiter`) takes the judge tokens of the retrieval from the key."""
    router = APIRouter()
    caller = Depends(principal)

    @router.post("/v1/answer", response_model=AnswerResponse, tags=["answers"],
                 responses=_responses())
    async def answer(body: AnswerRequest, who: Any = caller) -> Any:
        """Retrieve, then answer from the top passages citing them as [n] (SSE with stream)."""
        request_id = REQUEST_ID.get()
        seconds = body.timeout if body.timeout is not None else service.limits.default_timeout
        scope = QueryDeadline(seconds, from_now=True)  # the walk's and the answer's, together
        fields = body.model_dump(exclude={"top", "task", "stream"})
        retrieval: Retrieval = await _retrieval(service, limiter, who, RetrieveRequest(**fields), request_id)
        retrieved, query = retrieval.response, retrieval.query
        sources = retrieved.results[: body.top]
        task = get_task(body.task, query)
        messages = build_messages(query, [Source(i, tuple(h.path), h.text) for i, h in enumerate(sources, 1)],
                                  task)
        if body.stream:
            events = _events(generator, messages, task.max_tokens, task.name, sources, retrieval,
                             request_id, scope)
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        start = time.perf_counter()
        try:
            reply = await within(generator.generate(messages, max_tokens=task.max_tokens), scope,
                                 generator.name)
        except DecisionRAGError as exc:
            raise generation_error(exc, scope) from exc
        generation = GenerationOut(model=generator.name, input_tokens=reply.input_tokens,
                                   output_tokens=reply.output_tokens,
                                   seconds=round(time.perf_counter() - start, 4))
        await retrieval.reply(reply.text)
        return answer_response(reply.text, task.name, sources, retrieved, generation, request_id)

    return router


async def _retrieval(service: Any, limiter: Any, who: Any, body: RetrieveRequest, request_id: str
                     ) -> Retrieval:
    if limiter is None:
        return await service.retrieval(who, body, request_id)
    async with limiter.judged(who) as meter:
        retrieval: Retrieval = await service.retrieval(who, body, request_id)
        meter.tokens = retrieval.response.usage.input_tokens
    return retrieval


def answer_response(text: str, task: str, sources: Sequence[HitOut], retrieved: RetrieveResponse,
                    generation: GenerationOut, request_id: str) -> AnswerResponse:
    numbers = list(dict.fromkeys(n for mark in find_citations(text) for n in mark.numbers))
    citations = []
    for number in numbers:
        if 1 <= number <= len(sources):
            hit = sources[number - 1]
            citations.append(CitationOut(number=number, valid=True, id=hit.id, doc_id=hit.doc_id,
                                         path=hit.path, metadata=hit.metadata))
        else:
            citations.append(CitationOut(number=number, valid=False))
    _, found, tail = text.rpartition("Answer:")
    lines = (tail if found else text).strip().splitlines()
    return AnswerResponse(
        answer=text, short_answer=strip_citations(lines[0]) if lines else "", task=task,
        citations=citations, invalid_citations=[c.number for c in citations if not c.valid],
        sources=list(sources), retrieval=retrieved, generation=generation, request_id=request_id,
    )


def generation_error(exc: DecisionRAGError, scope: QueryDeadline) -> ServeError:
    """The answer model's failure as the client sees it: 504 when the request's deadline ran
    out (the retrieval's own 504 says the same), else 502."""
    if scope.remaining() <= 0:
        return ServeError(504, "deadline_exceeded",
                          f"the request's deadline of {scope.seconds:g} s passed while the answer "
                          f"was being written ({exc})", field="timeout")
    return ServeError(502, "generator_failed", str(exc))


async def _events(generator: Generator, messages: list[dict[str, str]], max_tokens: int, task: str,
                  sources: Sequence[HitOut], retrieval: Retrieval, request_id: str,
                  scope: QueryDeadline) -> AsyncIterator[bytes]:
    retrieved = retrieval.response
    yield _event("retrieved", retrieved.model_dump())
    start = time.perf_counter()
    pieces: list[str] = []
    tokens: tuple[int | None, int | None] = (None, None)
    try:
        async for piece in within_stream(generator.stream(messages, max_tokens=max_tokens), scope,
                                         generator.name):
            if piece.input_tokens is not None or piece.output_tokens is not None:
                tokens = (piece.input_tokens, piece.output_tokens)
            if piece.text:
                pieces.append(piece.text)
                yield _event("delta", {"text": piece.text})
    except DecisionRAGError as exc:
        yield _event("error", generation_error(exc, scope).body(request_id))
        return
    generation = GenerationOut(model=generator.name, input_tokens=tokens[0], output_tokens=tokens[1],
                               seconds=round(time.perf_counter() - start, 4))
    done = answer_response("".join(pieces), task, sources, retrieved, generation, request_id)
    try:
        await retrieval.reply(done.answer)
    except ServeError as exc:  # the answer could not be kept (the shared store is down): say so
        yield _event("error", exc.body(request_id))
        return
    yield _event("done", done.model_dump())


def _event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _responses() -> dict[int | str, dict[str, Any]]:
    from ._schemas import ErrorResponse

    described = {
        401: "no API key, or an unknown one", 403: "the key is not allowed on this tree",
        404: "no such tree", 413: "the request body is too large",
        422: "a field is invalid or over a limit (the field is named)",
        429: "the key is over its request or judge-token rate (see Retry-After)",
        502: "the judge or the answer model failed",
        503: "the judge queue is full, or the conversation store is unavailable (see Retry-After)",
        504: "the request's deadline passed",
    }
    found: dict[int | str, dict[str, Any]] = {s: {"model": ErrorResponse, "description": d}
                                              for s, d in described.items()}
    found[200] = {"content": {"text/event-stream": {}},  # events: retrieved, delta, done, error
                  "description": "the answer (JSON), or with stream: server-sent events"}
    return found
