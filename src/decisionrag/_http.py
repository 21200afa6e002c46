"""The one outbound-HTTP layer of decisionrag: every call to a model server goes through here.

HTTP judges, the group describer and the answer model all send their requests through
`HttpClient` (the TypeSafe SDK judge through `with_retries` and `PerLoop` directly), so that
concurrency, retries, deadlines and error translation behave the same for every caller:

* at most `concurrency` requests in flight per judge (default 8); a request waiting to retry
  does not hold a slot;
* 408, 425, 429 and every 5xx, timeouts and connection errors are retried with exponential
  backoff and jitter, honouring ``Retry-After`` (seconds or an HTTP date) and
  ``retry-after-ms``, capped at `RetryPolicy.retry_after_cap`; all attempts and waits of one
  call fit in `RetryPolicy.deadline` seconds; when they are spent, `JudgeUnavailable`;
* any other 4xx (400, 401, 403, 404, 413, 422, ...) is final: `JudgeRequestError` carrying the
  status and the server's own message;
* a 2xx body that is not strict JSON (NaN and Infinity are not JSON) is `JudgeProtocolError`;
* every attempt is bounded as a whole (connect, headers and every byte of the body: a server
  that trickles one byte a second is cut off at `RetryPolicy.timeout`, not reset per byte);
* every body is bounded in size after decompression (`HttpClient.max_response_bytes`, and
  per line of a stream `MAX_LINE_BYTES`): bodies are read raw and inflated here, a piece at a
  time, so a gzip bomb stops at the cap instead of expanding in memory; a stream is also cut
  at its call's deadline (`RetryPolicy.deadline`, or the query's), however often the server
  sends keep-alive comments or more text;
* within a `QueryDeadline` (``with QueryDeadline(10): ...``, or ``deadline=`` of a
  Navigator query) every call of the query shares one clock and one retry budget: attempts
  are cut at the query's end, a ``Retry-After`` that reaches past it ends the call at once
  (`DeadlineExceeded`), and retries stop when the query's budget of retries is spent.

The exception classes are those of an `ErrorFamily`: judges and the describer use
`JUDGE_ERRORS` (above), the answer model `ANSWER_ERRORS` (every failure an `AnswerError`).
Third-party (httpx) exceptions are translated here and nowhere else, always ``raise ... from exc``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import math
import random
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

from ._deadline import QueryDeadline, active_deadline
from ._errors import (
    AnswerError,
    DeadlineExceeded,
    JudgeConfigError,
    JudgeProtocolError,
    JudgeRequestError,
    JudgeUnavailable,
)

T = TypeVar("T")

DEFAULT_CONCURRENCY = 8
RETRY_STATUSES = frozenset({408, 425, 429})  # and every 5xx
_MESSAGE_LIMIT = 300
MAX_RESPONSE_BYTES = 32 * 2**20  # a reply, decompressed: judges' and chat replies are KBs
MAX_LINE_BYTES = 2**20  # one line of a server-sent-event stream
ACCEPT_ENCODING = "gzip, deflate"  # what `BodyReader` inflates; nothing else is asked for


@dataclass(frozen=True, slots=True)
class ErrorFamily:
    """The exception classes one caller's HTTP failures are translated to."""

    config: Callable[[str], Exception]
    request: Callable[..., Exception]  # called as request(message, status=...)
    unavailable: Callable[[str], Exception]
    protocol: Callable[[str], Exception]


JUDGE_ERRORS = ErrorFamily(JudgeConfigError, JudgeRequestError, JudgeUnavailable,
                           JudgeProtocolError)
ANSWER_ERRORS = ErrorFamily(AnswerError, AnswerError, AnswerError, AnswerError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long and how often one judge call may try. All times in seconds."""

    max_attempts: int = 5
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    jitter: float = 0.25
    retry_after_cap: float = 60.0
    timeout: float = 60.0
    deadline: float = 180.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise JudgeConfigError("max_attempts must be at least 1")
        if self.timeout <= 0 or self.deadline <= 0:
            raise JudgeConfigError("timeout and deadline must be positive numbers of seconds")

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based) when the server names none."""
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
        return delay * (1 - random.random() * self.jitter)


class Retryable(Exception):
    """An attempt failed in a way that may pass (throttling, server error, timeout)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(slots=True)
class Reply:
    """One HTTP response, read in full."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    seconds: float


# ---------------------------------------------------------------- retries


async def with_retries(
    attempt: Callable[[float], Awaitable[T]], policy: RetryPolicy, who: str,
    errors: ErrorFamily = JUDGE_ERRORS,
) -> T:
    """Run `attempt(timeout)` until it returns, raises a final error, or the policy is spent.

    `attempt` raises `Retryable` for failures worth another try; anything else propagates.
    Each attempt is cut at `timeout` as a whole (however the bytes trickle in); the active
    `QueryDeadline`, if any, bounds the attempts, the waits and the number of retries too.
    """
    query = active_deadline()
    start = time.monotonic()
    last: Retryable | None = None
    tries = 0
    while tries < policy.max_attempts:
        remaining = _remaining(policy, start, query)
        if remaining <= 0:
            break
        tries += 1
        try:
            return await _bounded(attempt, min(policy.timeout, remaining), who, query)
        except Retryable as exc:
            last = exc
            if query is not None:
                query.note(str(exc))
        delay = _next_delay(last, tries, policy)
        if tries >= policy.max_attempts:
            break
        if query is not None and last.retry_after is not None and last.retry_after > query.remaining():
            raise _unavailable_for(query, errors, f"{who}: the server asked to retry after "
                                   f"{last.retry_after:g}s, past the query's deadline "
                                   f"({max(0.0, query.remaining()):.1f}s left): {last}") from last
        if delay >= _remaining(policy, start, query):
            break
        if query is not None:
            if query.retries >= query.retry_budget:
                raise _unavailable_for(query, errors, f"{who}: the query's budget of "
                                       f"{query.retry_budget} retries is spent: {last}") from last
            query.retries += 1
        await asyncio.sleep(delay)
    elapsed = time.monotonic() - start
    message = f"{who}: gave up after {tries} attempt(s) in {elapsed:.1f}s: {last}"
    if query is not None and query.remaining() <= 0:
        raise _unavailable_for(query, errors, f"{who}: the query's deadline of "
                               f"{query.seconds:g}s passed after {tries} attempt(s): {last}") from last
    raise errors.unavailable(message) from last


def _remaining(policy: RetryPolicy, start: float, query: QueryDeadline | None) -> float:
    left = policy.deadline - (time.monotonic() - start)
    return left if query is None else min(left, query.remaining())


def _unavailable_for(query: QueryDeadline, errors: ErrorFamily, message: str) -> Exception:
    if errors is JUDGE_ERRORS:
        return DeadlineExceeded(message)
    return errors.unavailable(message)


async def _bounded(attempt: Callable[[float], Awaitable[T]], timeout: float, who: str,
                   query: QueryDeadline | None) -> T:
    """One attempt, cut at `timeout` seconds whatever it is doing (connect, headers, body)."""
    if query is not None:
        query.request_started()
    try:
        async with asyncio.timeout(timeout):
            return await attempt(timeout)
    except TimeoutError as exc:
        raise Retryable(f"{who}: no response within {timeout:.1f}s (headers and the whole body)") from exc
    finally:
        if query is not None:
            query.in_flight -= 1


def _next_delay(error: Retryable, tries: int, policy: RetryPolicy) -> float:
    if error.retry_after is not None:
        return min(max(0.0, error.retry_after), policy.retry_after_cap)
    return policy.backoff(tries)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = _finite(lowered.get("retry-after-ms"))
    if millis is not None and millis >= 0:
        return millis / 1000
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _finite(raw)
    if seconds is not None:
        return seconds if seconds >= 0 else None
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _finite(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- statuses and bodies


def is_retryable_status(status: int) -> bool:
    """408, 425, 429 and every 5xx: worth another try."""
    return status in RETRY_STATUSES or status >= 500


def check_status(reply: Reply, who: str, errors: ErrorFamily = JUDGE_ERRORS) -> None:
    """Nothing for 2xx; `Retryable` for 408/425/429/5xx; `errors.request` otherwise."""
    status = reply.status
    if 200 <= status < 300:
        return
    message = f"{who}: HTTP {status}: {server_message(reply.body)}"
    if is_retryable_status(status):
        raise Retryable(message, parse_retry_after(reply.headers))
    if 300 <= status < 400:
        where = reply.headers.get("location", "?")
        message = f"{who}: HTTP {status} redirect to {where} (not followed: check the URL)"
    raise errors.request(message, status=status)


def server_message(body: bytes) -> str:
    """The human part of an error body: FastAPI ``detail``, ``error``, ``message`` or text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _shorten(text) or "(empty body)"
    return _shorten(_message_of(data) or text)


def _message_of(data: Any) -> str | None:
    if isinstance(data, str):
        return data
    if not isinstance(data, dict):
        return None
    for key in ("detail", "error", "message"):
        value = data.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return _message_of(value)
        if key == "detail" and isinstance(value, list):
            return "; ".join(_validation_item(item) for item in value[:5])
    return None


def _validation_item(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    location = [str(part) for part in item.get("loc", []) if part != "body"]
    text = str(item.get("msg", item))
    return f"{'.'.join(location)}: {text}" if location else text


def _shorten(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(body: bytes, who: str, errors: ErrorFamily = JUDGE_ERRORS) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity; anything else is `errors.protocol`."""
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise errors.protocol(f"{who}: the response body is not UTF-8") from exc
    except RecursionError as exc:
        raise errors.protocol(f"{who}: the response body is JSON nested too deeply to read "
                              f"({len(body):,} bytes)") from exc
    except ValueError as exc:
        start = body[:40].decode("utf-8", errors="replace")
        raise errors.protocol(
            f"{who}: the response body is not JSON ({exc}); it starts {start!r}"
        ) from exc


def dump_json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")


# ---------------------------------------------------------------- server-sent event lines

_LINE_END = re.compile(r"\r\n|\r|\n")


class LineSplitter:
    """Text in, complete lines out, as server-sent events define lines: they end at CRLF,
    CR or LF and nowhere else. Not at U+2028, U+2029, U+0085, \\v, \\f or the other
    characters `str.splitlines` (and so httpx's ``aiter_lines``) breaks on: servers write
    non-ASCII raw inside their JSON, and an answer may contain any of them.

    Incremental: feed text as it arrives, split anywhere; a CR at the end of a piece is held
    back, since it may be the first half of a CRLF. The one splitter of the package, used
    by `HttpClient.post_lines` and by the service client's event reader."""

    def __init__(self) -> None:
        self._pending = ""  # text after the last line end (at most a trailing CR of one)

    @property
    def pending(self) -> int:
        """Characters of the line not yet ended."""
        return len(self._pending)

    def feed(self, text: str) -> list[str]:
        """The lines `text` completes, without their line ends."""
        text = self._pending + text
        lines: list[str] = []
        start = 0
        for match in _LINE_END.finditer(text):
            if match.group() == "\r" and match.end() == len(text):
                break
            lines.append(text[start:match.start()])
            start = match.end()
        self._pending = text[start:]
        return lines

    def close(self) -> list[str]:
        """The end of the stream: text after the last line end is a last line (a held-back
        CR ends its line); the splitter is then empty."""
        rest, self._pending = self._pending, ""
        if not rest:
            return []
        return [rest[:-1] if rest.endswith("\r") else rest]


# ---------------------------------------------------------------- bounded bodies


class BodyReader:
    """A response body read raw and inflated here (``Content-Encoding`` gzip, deflate or
    none), a piece at a time, never past `limit` bytes of output: a small compressed body
    that would expand to gigabytes is stopped at the cap, having used no more memory."""

    def __init__(self, encoding: str, limit: int, who: str, errors: ErrorFamily) -> None:
        coding = encoding.strip().lower()
        if coding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise errors.protocol(f"{who}: the response is encoded as {encoding!r}; decisionrag "
                                  f"asks for {ACCEPT_ENCODING} only")
        self._inflate = None if coding in ("", "identity") else zlib.decompressobj(
            16 + zlib.MAX_WBITS if "gzip" in coding else zlib.MAX_WBITS)
        self._raw_deflate = coding == "deflate"  # some servers send deflate without its header
        self.limit, self.who, self.errors = limit, who, errors
        self.size = 0

    def feed(self, data: bytes) -> bytes:
        """The body bytes `data` (raw, as received) stands for; `errors.protocol` past the limit."""
        if self._inflate is not None and data:
            data = self._inflated(data)
        self.size += len(data)
        if self.size > self.limit:
            raise self.errors.protocol(f"{self.who}: the response is larger than "
                                       f"{self.limit:,} bytes (after decompression); refused")
        return data

    def _inflated(self, data: bytes) -> bytes:
        assert self._inflate is not None
        room = self.limit - self.size + 1  # one byte over is enough to know
        try:
            out = self._inflate.decompress(data, room)
        except zlib.error as exc:
            if not (self._raw_deflate and self.size == 0):
                raise self.errors.protocol(f"{self.who}: the compressed response is damaged "
                                           f"({exc})") from exc
            self._inflate, self._raw_deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
            return self._inflated(data)
        if self._inflate.unconsumed_tail and len(out) < room:  # pragma: no cover - zlib contract
            out += self._inflate.decompress(self._inflate.unconsumed_tail, room - len(out))
        return out


async def read_body(response: Any, limit: int, who: str, errors: ErrorFamily) -> bytes:
    """The whole body of a streamed httpx `response`, bounded by `BodyReader`."""
    reader = BodyReader(response.headers.get("content-encoding", ""), limit, who, errors)
    parts = [reader.feed(chunk) async for chunk in response.aiter_raw()]
    return b"".join(parts)


# ---------------------------------------------------------------- per-event-loop state


class PerLoop(Generic[T]):
    """One `factory()` value per running event loop.

    Async HTTP clients and semaphores are bound to the loop they were first used in, and the
    sync wrappers (`Judge.binary_sync`) start a fresh loop per call.
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: T | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self._value is None or self._loop is not loop:
            self._value = self._factory()
            self._loop = loop
        return self._value

    def current(self) -> T | None:
        """The value for the running loop, if one was made in it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self._value if self._loop is loop else None

    def forget(self) -> None:
        self._value = None
        self._loop = None


# ---------------------------------------------------------------- the client


class HttpClient:
    """JSON over HTTP with bounded concurrency and retries, for one judge or chat model.

    `attempts` counts the requests actually sent (retries included)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        policy: RetryPolicy | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        who: str = "judge",
        errors: ErrorFamily = JUDGE_ERRORS,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if concurrency < 1:
            raise errors.config(f"{who}: concurrency must be at least 1")
        self.max_response_bytes = max_response_bytes
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.policy = policy or RetryPolicy()
        self.concurrency = concurrency
        self.who = who
        self.errors = errors
        self.attempts = 0
        self._state: PerLoop[tuple[Any, asyncio.Semaphore]] = PerLoop(self._new_state)

    def _new_state(self) -> tuple[Any, asyncio.Semaphore]:
        import httpx

        limits = httpx.Limits(max_connections=self.concurrency,
                              max_keepalive_connections=self.concurrency)
        client = httpx.AsyncClient(base_url=self.base_url, limits=limits,
                                   follow_redirects=False)
        return client, asyncio.Semaphore(self.concurrency)

    async def post_json(self, path: str, payload: Any) -> tuple[Any, float]:
        """POST `payload` to `path`; the decoded JSON answer and the seconds the call took."""
        body = dump_json(payload)
        start = time.perf_counter()

        async def attempt(timeout: float) -> Reply:
            reply = await self._send(path, body, timeout)
            check_status(reply, self.who, self.errors)
            return reply

        reply = await with_retries(attempt, self.policy, self.who, self.errors)
        return parse_json(reply.body, self.who, self.errors), time.perf_counter() - start

    async def get_json(self, path: str) -> tuple[Any, float]:
        """GET `path` (e.g. ``/v1/models``), retried like a POST; the decoded JSON answer."""
        start = time.perf_counter()

        async def attempt(timeout: float) -> Reply:
            reply = await self._send(path, None, timeout)
            check_status(reply, self.who, self.errors)
            return reply

        reply = await with_retries(attempt, self.policy, self.who, self.errors)
        return parse_json(reply.body, self.who, self.errors), time.perf_counter() - start

    async def _send(self, path: str, body: bytes | None, timeout: float) -> Reply:
        """POST `body` to `path` (GET when `body` is None); the body read whole, bounded in
        size (`max_response_bytes`, decompressed)."""
        client, slots = self._state.get()
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Accept-Encoding": ACCEPT_ENCODING, **self.headers}
        async with slots:
            start = time.perf_counter()
            self.attempts += 1
            with self._translated(timeout):
                request = client.build_request("GET" if body is None else "POST", path,
                                               content=body, headers=headers, timeout=timeout)
                response = await client.send(request, stream=True)
                try:
                    content = await read_body(response, self.max_response_bytes, self.who,
                                              self.errors)
                finally:
                    await response.aclose()
        return Reply(response.status_code, response.headers, content, time.perf_counter() - start)

    async def post_lines(self, path: str, payload: Any) -> AsyncIterator[str]:
        """POST `payload` to `path` and yield the response's lines as they arrive (for
        server-sent events: split by `LineSplitter`, at CRLF, CR and LF only). Attempts are
        retried as `post_json`'s are until a 2xx status comes back; once lines flow, a broken
        or stalled connection is `unavailable` (half an answer cannot be sent again without
        showing it twice). The whole call ends by its deadline — `RetryPolicy.deadline`, or
        the active query's if sooner — however the server keeps the stream alive (comments,
        endless text); the stream is bounded in size (`max_response_bytes`, a line
        `MAX_LINE_BYTES`). The stream holds one concurrency slot while it is read."""
        import httpx

        body = dump_json(payload)
        client, slots = self._state.get()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "Accept-Encoding": ACCEPT_ENCODING, **self.headers}
        query = active_deadline()
        ends = time.monotonic() + min(self.policy.deadline,
                                      query.remaining() if query is not None else math.inf)

        async def attempt(timeout: float) -> Any:
            self.attempts += 1
            request = client.build_request("POST", path, content=body, headers=headers,
                                           timeout=timeout)
            with self._translated(timeout):
                response = await client.send(request, stream=True)
                if not 200 <= response.status_code < 300:
                    try:
                        content = await read_body(response, self.max_response_bytes, self.who,
                                                  self.errors)
                    finally:
                        await response.aclose()
                    check_status(Reply(response.status_code, response.headers, content, 0.0),
                                 self.who, self.errors)
            return response

        async with slots:
            response = await with_retries(attempt, self.policy, self.who, self.errors)
            try:
                async for line in self._lines(response, ends, query):
                    yield line
            except httpx.TimeoutException as exc:
                raise self.errors.unavailable(
                    f"{self.who}: the stream stalled for {self.policy.timeout:.1f}s") from exc
            except httpx.HTTPError as exc:
                raise self.errors.unavailable(f"{self.who}: the stream broke off: {exc!r}") from exc
            finally:
                await response.aclose()

    async def _lines(self, response: Any, ends: float,
                     query: QueryDeadline | None) -> AsyncIterator[str]:
        """The lines of a streamed `response`, each piece read before `ends`."""
        reader = BodyReader(response.headers.get("content-encoding", ""),
                            self.max_response_bytes, self.who, self.errors)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        lines = LineSplitter()
        pieces = response.aiter_raw()
        while True:
            try:
                async with asyncio.timeout(max(0.0, ends - time.monotonic())):
                    raw = await anext(pieces)
            except StopAsyncIteration:
                break
            except TimeoutError as exc:
                raise self._stream_expired(query) from exc
            for line in lines.feed(text.decode(reader.feed(raw))):
                yield line
            if lines.pending > MAX_LINE_BYTES:
                raise self.errors.protocol(f"{self.who}: a line of the stream is longer than "
                                           f"{MAX_LINE_BYTES:,} characters; refused")
        for line in lines.feed(text.decode(b"", final=True)) + lines.close():
            yield line

    def _stream_expired(self, query: QueryDeadline | None) -> Exception:
        if query is not None and query.remaining() <= 0:
            message = (f"{self.who}: the query's deadline of {query.seconds:g}s passed while "
                       "the reply was streaming")
            return DeadlineExceeded(message) if self.errors is JUDGE_ERRORS else \
                self.errors.unavailable(message)
        return self.errors.unavailable(f"{self.who}: the stream went on past its deadline of "
                                       f"{self.policy.deadline:g}s; cut off")

    @contextlib.contextmanager
    def _translated(self, timeout: float) -> Iterator[None]:
        """httpx's failures of one attempt as `Retryable` or the family's config error."""
        import httpx

        try:
            yield
        except httpx.TimeoutException as exc:
            raise Retryable(f"{self.who}: no response within {timeout:.1f}s") from exc
        except httpx.UnsupportedProtocol as exc:
            raise self.errors.config(f"{self.who}: bad URL {self.base_url!r}: {exc}") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"{self.who}: connection failed: {exc!r}") from exc
        except httpx.InvalidURL as exc:
            raise self.errors.config(f"{self.who}: bad URL {self.base_url!r}: {exc}") from exc

    async def aclose(self) -> None:
        state = self._state.current()
        self._state.forget()
        if state is not None:
            await state[0].aclose()


# ---------------------------------------------------------------- a decisionrag server


class ServiceConnection:
    """Sync and async HTTP to one `decisionrag serve` server: what `decisionrag.Client` sends
    through. Connection pools are made on first use (one async pool per event loop); httpx's
    failures become `ServerError` here (status 0: the server could not be reached, or a
    stream broke off). `transport` / `async_transport`: httpx transports to use instead of the
    network (tests that do not test the network: `httpx.MockTransport`, an ASGI app)."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None,
                 timeout: float = 60.0, transport: Any = None, async_transport: Any = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.transport = transport
        self.async_transport = async_transport
        self._sync: Any = None
        self._async: PerLoop[Any] = PerLoop(self._new_async)

    def _client(self) -> Any:
        import httpx

        if self._sync is None:
            self._sync = httpx.Client(base_url=self.base_url, headers=self.headers,
                                      timeout=self.timeout, transport=self.transport)
        return self._sync

    def _new_async(self) -> Any:
        import httpx

        return httpx.AsyncClient(base_url=self.base_url, headers=self.headers,
                                 timeout=self.timeout, transport=self.async_transport)

    def request(self, method: str, path: str, *, json: Any = None,
                params: Mapping[str, Any] | None = None) -> Reply:
        """One request, its response read in full."""
        start = time.perf_counter()
        with _reaching(self.base_url):
            response = self._client().request(method, path, json=json, params=params)
        return Reply(response.status_code, response.headers, response.content,
                     time.perf_counter() - start)

    async def arequest(self, method: str, path: str, *, json: Any = None,
                       params: Mapping[str, Any] | None = None) -> Reply:
        start = time.perf_counter()
        with _reaching(self.base_url):
            response = await self._async.get().request(method, path, json=json, params=params)
        return Reply(response.status_code, response.headers, response.content,
                     time.perf_counter() - start)

    @contextlib.contextmanager
    def stream(self, method: str, path: str, *, json: Any = None,
               headers: Mapping[str, str] | None = None) -> Iterator[Streamed]:
        """A streamed response: its status and headers (the body read when the status is not
        2xx), and its text as it arrives; a connection that breaks off raises `ServerError`."""
        with _reaching(self.base_url), self._client().stream(
                method, path, json=json, headers=headers) as response:
            if not response.is_success:
                response.read()
            yield Streamed(response)

    @contextlib.asynccontextmanager
    async def astream(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> AsyncIterator[Streamed]:
        with _reaching(self.base_url):
            async with self._async.get().stream(method, path, json=json, headers=headers) as response:
                if not response.is_success:
                    await response.aread()
                yield Streamed(response)

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        self.close()
        pool = self._async.current()
        self._async.forget()
        if pool is not None:
            await pool.aclose()


class Streamed:
    """A response whose body is still arriving (`ServiceConnection.stream`)."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status: int = response.status_code
        self.headers: Mapping[str, str] = response.headers
        self.ok: bool = response.is_success

    @property
    def body(self) -> bytes:
        """The body of a response that was not a success (read in full)."""
        return bytes(self._response.content)

    def iter_text(self) -> Iterator[str]:
        with _broken_off():
            yield from self._response.iter_text()

    async def aiter_text(self) -> AsyncIterator[str]:
        with _broken_off():
            async for text in self._response.aiter_text():
                yield text


@contextlib.contextmanager
def _reaching(base_url: str) -> Iterator[None]:
    """httpx's failure to get a response from `base_url` as a `ServerError` (status 0)."""
    import httpx

    from ._errors import ServerError

    try:
        yield
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the server at {base_url}: {exc!r}", status=0,
                          type="connection") from exc


@contextlib.contextmanager
def _broken_off() -> Iterator[None]:
    import httpx

    from ._errors import ServerError

    try:
        yield
    except httpx.HTTPError as exc:
        raise ServerError(f"the stream broke off: {exc!r}", status=0, type="connection") from exc
