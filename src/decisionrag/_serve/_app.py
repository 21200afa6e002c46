"""The FastAPI app: routes, the request-id/log/metrics/body-size middleware, error bodies.

`create_app(settings)` builds one app (trees opened, judge loaded, before it serves);
`app_from_environment()` is the factory `--workers N` processes import.

Seam for more endpoints (e.g. ``POST /v1/answer``): pass `routers=[...]` (FastAPI
`APIRouter`s) to `create_app`; a route gets the caller with ``Depends(app.state.principal)``
and the shared `Service` (trees, judge gate, deadlines, conversations) as
``request.app.state.service``; raise `ServeError` for an error answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._answer import load_generator
from .._judges import Judge
from .._navigate import PRESET_NAMES
from ._answer import answer_router
from ._auth import KeyRing, Principal
from ._connections import ConnectionLimits, GuardedH11Protocol
from ._conversation_routes import conversation_router
from ._docs import mount_offline_docs
from ._errors import ServeError, problem_message, too_large
from ._logging import REQUEST_ID
from ._metrics import Metrics
from ._rates import KeyLimiter
from ._schemas import (
    ErrorResponse,
    Health,
    NodeResponse,
    Ready,
    RerankedDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    RetrieveRequest,
    RetrieveResponse,
    TeiRerankResult,
    TreeMetadata,
    TreesResponse,
    TreeStats,
    UsageOut,
    apply_limits,
)
from ._service import build_service
from ._settings import ServeSettings
from ._ui import ui_router
from ._workers import follow_master, remove_master_folders

log = logging.getLogger("decisionrag.serve")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {
        401: "no API key, or an unknown one", 403: "the key is not allowed on this tree",
        404: "no such tree or node", 413: "the request body is too large",
        422: "a field is invalid or over a limit (the field is named)",
        429: "the key is over its request or judge-token rate (see Retry-After)",
        503: "the judge queue is full, the judge or the conversation store is unavailable, or the "
             "key file is unusable (see Retry-After)",
        504: "the request's deadline passed (the body says what was done)",
        502: "the judge failed",
    }
    found: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {"model": ErrorResponse, "description": described[status]}
        if status in (429, 503):
            entry["headers"] = {"Retry-After": {"schema": {"type": "string"},
                                                "description": "seconds to wait before retrying"}}
        found[status] = entry
    return found


def create_app(
    settings: ServeSettings,
    *,
    judge: Judge | None = None,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """An app serving `settings.trees` with `judge` (else `load_judge(settings.judge)`)."""
    from .. import __version__

    limits = settings.limits
    keys = KeyRing(settings.api_key_file, settings.reload_seconds)
    service = build_service(settings, judge)
    metrics, registry, gated = service.metrics, service.registry, service.judge
    limiter = KeyLimiter(limits, service.conversations.shared)  # per key, shared through Redis
    generator = load_generator(settings.generator, base_url=settings.generator_base_url,
                               **settings.generator_options) \
        if settings.generator else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await _check_state(service.conversations)
        yield
        await service.conversations.aclose()
        registry.close()
        await gated.aclose()
        if generator is not None:
            await generator.aclose()
        Metrics.worker_exited(os.getpid())
        remove_master_folders()  # a worker whose master was killed: nobody else will

    app = FastAPI(
        title="decisionrag",
        version=__version__,
        summary="Retriever-free retrieval: a decision model walks a tree of your corpus.",
        lifespan=lifespan,
        docs_url=None,  # mounted from local files below: FastAPI's page needs a CDN
        redoc_url=None,
    )
    mount_offline_docs(app)
    app.state.service = service
    app.state.limiter = limiter
    app.state.settings = settings
    app.state.draining = False
    bearer = HTTPBearer(auto_error=False, description="an API key from `decisionrag keys add`")

    async def keyed(request: Request, _: Any = Security(bearer)) -> Principal:  # noqa: B008
        who = keys.authenticate(request.headers.get("authorization"))
        await limiter.admit(who)
        return who

    async def open_to_loopback(request: Request) -> Principal:
        who = keys.authenticate(None)
        await limiter.admit(who)
        return who

    # the security scheme is in the OpenAPI document only when keys are required
    principal = keyed if keys.enabled else open_to_loopback
    app.state.principal = principal
    caller = Depends(principal)

    @app.post("/v1/retrieve", response_model=RetrieveResponse, tags=["retrieval"],
              responses=_errors(401, 403, 404, 413, 422, 429, 502, 503, 504))
    async def retrieve(body: RetrieveRequest, who: Principal = caller) -> RetrieveResponse:
        """Rank passages of a tree for a query or a conversation."""
        async with limiter.judged(who) as meter:
            response = await service.retrieve(who, body, REQUEST_ID.get())
            meter.tokens = response.usage.input_tokens
        return response

    async def cohere_rerank(body: RerankRequest, who: Principal = caller) -> RerankResponse:
        """Rerank `documents` (Cohere) or `texts` (TEI) for `query` as a walk's passage stage
        judges its candidates (P(yes) in one shared context), then reorder the best by its
        multiple choice; with `tree`, that tree's word statistics, and passages by `id`."""
        async with limiter.judged(who) as meter:
            ranked, usage, texts = await service.rerank(who, body)
            meter.tokens = int(usage.get("input_tokens", 0))
        return RerankResponse(
            id=REQUEST_ID.get(),
            results=[RerankResult(index=i, relevance_score=round(score, 6),
                                  document=RerankedDocument(text=texts[i]) if body.return_documents else None)
                     for i, score in ranked],
            usage=UsageOut(**usage),
            meta={"judge": gated.name, "billed_units": {"input_tokens": usage.get("input_tokens", 0)}},
        )

    for path in ("/v1/rerank", "/v2/rerank"):
        app.post(path, response_model=RerankResponse, tags=["rerank"],
                 responses=_errors(401, 403, 404, 413, 422, 429, 502, 503, 504))(cohere_rerank)

    @app.post("/rerank", response_model=list[TeiRerankResult], tags=["rerank"],
              responses=_errors(401, 403, 404, 413, 422, 429, 502, 503, 504))
    async def tei_rerank(body: RerankRequest, who: Principal = caller) -> list[TeiRerankResult]:
        """Hugging Face TEI's rerank: a list of {index, score}, best first."""
        async with limiter.judged(who) as meter:
            ranked, usage, texts = await service.rerank(who, body)
            meter.tokens = int(usage.get("input_tokens", 0))
        return [TeiRerankResult(index=i, score=round(score, 6), text=texts[i] if body.return_text else None)
                for i, score in ranked]

    @app.get("/v1/trees", response_model=TreesResponse, tags=["trees"], responses=_errors(401))
    async def trees(who: Principal = caller) -> TreesResponse:
        """The trees this key may read."""
        return service.trees(who)

    @app.get("/v1/trees/{name}", response_model=TreeStats, tags=["trees"], responses=_errors(401, 403, 404))
    async def tree_stats(name: str, who: Principal = caller) -> TreeStats:
        """A tree's counts by kind and depth, file size, schema version, generation."""
        return service.tree_stats(who, name)

    @app.get("/v1/trees/{name}/metadata", response_model=TreeMetadata, tags=["trees"],
             responses=_errors(401, 403, 404))
    async def tree_metadata(name: str, who: Principal = caller) -> TreeMetadata:
        """The metadata keys of a tree's documents: per key how many documents have it, its
        values and ranges (what `filters` can test)."""
        return service.tree_metadata(who, name)

    @app.get("/v1/trees/{name}/nodes/{node_id:path}", response_model=NodeResponse, tags=["trees"],
             responses=_errors(401, 403, 404, 422))
    async def node(
        name: str,
        node_id: str = Path(description="a node key (passage id, document id, `root`) or integer id"),
        offset: int = Query(0, ge=0, le=10_000_000),
        limit: int = Query(100, ge=1, le=limits.max_children),
        who: Principal = caller,
    ) -> NodeResponse:
        """A node, the path above it and a page of its children."""
        return service.node(who, name, node_id, offset, limit)

    @app.get("/healthz", response_model=Health, tags=["operations"])
    async def healthz() -> Health:
        """The process is alive."""
        return Health(status="ok", version=__version__)

    @app.get("/readyz", response_model=Ready, tags=["operations"],
             responses={503: {"model": Ready,
                              "description": "draining, no tree open, or an unusable key file"}})
    async def readyz() -> Response:
        """Ready to take requests (503 while draining at shutdown, or while the API key
        file is missing or unusable: every key is refused then)."""
        keys.refresh()
        status = "draining" if app.state.draining else \
            "ready" if registry.names and keys.problem is None else "not_ready"
        body = Ready(status=status, trees=registry.names, judge=gated.name)  # type: ignore[arg-type]
        return JSONResponse(body.model_dump(), status_code=200 if status == "ready" else 503)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["operations"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format"}})
    async def prometheus() -> Response:
        """Prometheus metrics (text exposition format)."""
        return Response(metrics.render(), media_type=metrics.content_type)

    app.include_router(conversation_router(service, principal))
    if generator is not None:
        app.include_router(answer_router(service, principal, generator, limiter))
    if settings.ui:
        app.include_router(ui_router(settings, keys=keys.enabled, answers=generator is not None,
                                     filters=service.filters_supported))
    for router in routers:
        app.include_router(router)

    _error_handlers(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            document = get_openapi(title=app.title, version=app.version, summary=app.summary,
                                   routes=app.routes)
            app.openapi_schema = apply_limits(document, limits, PRESET_NAMES,
                                              filters=service.filters_supported)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(RequestMiddleware, metrics=metrics, max_body_bytes=limits.max_body_bytes,
                       body_timeout=limits.body_timeout)
    return app


async def _check_state(store: Any) -> None:
    """At start, say in the log when the shared state does not answer (the server starts all
    the same: requests that need no state work, and it is used as soon as it answers)."""
    if store.shared is None:
        return
    try:
        await store.shared.run(lambda client: client.ping())
    except ServeError:
        log.error("the shared state at %s does not answer yet; conversations get 503 until it does",
                  store.shared.where)


def _error_handlers(app: FastAPI) -> None:
    async def serve_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServeError)
        return JSONResponse(exc.body(REQUEST_ID.get()), status_code=exc.status, headers=exc.headers)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = list(exc.errors())
        first = problems[0] if problems else {"loc": ("body",), "msg": "invalid"}
        field = _field(first.get("loc", ()))
        errors = [{"field": _field(e.get("loc", ())), "message": problem_message(e)}
                  for e in problems[:20]]
        error = ServeError(422, "invalid_request", f"{field}: {problem_message(first)}", field=field,
                           extra={"errors": errors})
        return JSONResponse(error.body(REQUEST_ID.get()), status_code=422)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        error = ServeError(exc.status_code, kind, str(exc.detail))
        return JSONResponse(error.body(REQUEST_ID.get()), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error")
        error = ServeError(500, "internal_error", "the server failed; the log has the request id")
        return JSONResponse(error.body(REQUEST_ID.get()), status_code=500)

    app.add_exception_handler(ServeError, serve_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def _field(loc: Sequence[Any]) -> str:
    """`("body", "messages", 2, "content")` -> `messages[2].content`; the whole body -> `body`."""
    name = ""
    for part in loc[1:]:  # loc[0] says where: body, query, path, header
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else str(part)
    return name or "body"


class RequestMiddleware:
    """Outermost layer: a request id (the client's X-Request-ID if sane), the body-size
    limit and the time its body may take (413, 408), the metrics, and one JSON log line per
    request. Whatever goes wrong below — an unexpected exception, or the request being
    cancelled because the shutdown drain ran out — the client gets the JSON error body with
    the request id, never uvicorn's plain-text 500."""

    def __init__(self, app: ASGIApp, metrics: Metrics, max_body_bytes: int,
                 body_timeout: float = 30.0) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.match(given) else os.urandom(8).hex()
        token = REQUEST_ID.set(request_id)
        start = time.perf_counter()
        status = 500
        recorded = False
        self.metrics.in_flight.inc()

        def record() -> None:
            """Count the request once, before its last byte goes out (so that a client's next
            request sees it in /metrics)."""
            nonlocal recorded
            if recorded:
                return
            recorded = True
            seconds = time.perf_counter() - start
            template = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.in_flight.dec()
            self.metrics.requests.labels(scope["method"], template, str(status)).inc()
            self.metrics.latency.labels(template).observe(seconds)
            log.info("request", extra={"request_id": request_id, "fields": {
                "method": scope["method"], "path": scope["path"], "route": template,
                "status": status, "ms": round(seconds * 1000, 1)}})

        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status = message["status"]
                started = True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                record()
            await send(message)

        async def answer(error: ServeError) -> None:
            response = JSONResponse(error.body(request_id), status_code=error.status,
                                    headers=error.headers)
            await response(scope, receive, send_with_id)

        try:
            body_receive = await self._bounded_body(headers, receive)
            if isinstance(body_receive, ServeError):
                await answer(body_receive)
            else:
                await self.app(scope, body_receive, send_with_id)
        except asyncio.CancelledError:
            if started:
                raise
            await answer(ServeError(503, "shutting_down", "the server is shutting down and "
                                    "could not finish this request in its drain time; retry",
                                    headers={"Retry-After": "1"}))
        except Exception:
            if started:
                raise
            log.exception("unexpected error")
            await answer(ServeError(500, "internal_error",
                                    "the server failed; the log has the request id"))
        finally:
            record()
            REQUEST_ID.reset(token)

    async def _bounded_body(self, headers: dict[str, str],
                            receive: Receive) -> Receive | ServeError:
        """The body read up to the limit and replayed; the error when it is over the limit
        (413) or not in within `body_timeout` seconds (408)."""
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return self._too_large()
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        break
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        return self._too_large()
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return ServeError(408, "request_timeout", f"body: not received within "
                              f"{self.body_timeout:g} s (body_timeout)", field="body",
                              headers={"Connection": "close"})
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    def _too_large(self) -> ServeError:
        return too_large("body", f"larger than this server's limit of {self.max_body_bytes:,} "
                         "bytes (max_body_bytes)")


def app_from_environment() -> FastAPI:
    """The app a `--workers N` process serves (settings from DECISIONRAG_SERVE_SETTINGS): it
    ends with its master, and takes the master's connection limits."""
    settings = ServeSettings.from_environment()
    follow_master()
    GuardedH11Protocol.configure(ConnectionLimits.of(settings.limits))
    return create_app(settings)


__all__ = ["app_from_environment", "create_app"]
