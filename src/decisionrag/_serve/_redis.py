"""The Redis every replica shares (``serve --state redis://HOST:PORT/DB``): the connection and
the bound on each operation (the conversations kept there are `_conversations.RedisConversations`,
the rate buckets `_rates`).

`RedisState` owns one connection pool (redis-py's asyncio client, the 'redis' extra, imported
when a server is started with a Redis URL). Every operation runs through `RedisState.run`:
bounded by a timeout, and any failure (refused, reset, slow, a Redis error) becomes a 503
``state_unavailable`` with ``Retry-After``. After a connection failure, or a timeout while no
other operation succeeded either, the state is taken for down for a second (`BREAK_SECONDS`),
so requests that need it are answered at once rather than each waiting out its timeout (a
timeout among successes is this process being slow, not Redis: that request alone fails);
then the next operation tries again, on a new connection if the old one broke, so a restarted
Redis is used again without restarting the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from .._errors import InputError, missing_extra
from ._errors import ServeError

PASSWORD_ENV = "DECISIONRAG_REDIS_PASSWORD"
BREAK_SECONDS = 1.0  # after a failure, how long the state is taken for down
log = logging.getLogger("decisionrag.serve")
T = TypeVar("T")

def redact(url: str) -> str:
    """`url` without its password (for logs, banners and errors)."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hostport}").geturl()


def check_url(url: str) -> None:
    """A clear error for a URL that cannot name a Redis database."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise InputError(f"--state {redact(url)!r}: expected redis://HOST:PORT/DB or rediss://HOST:PORT/DB")
    try:
        _ = parts.port
    except ValueError:
        raise InputError(f"--state {redact(url)!r}: the port is not a number") from None
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise InputError(f"--state {redact(url)!r}: the database after the '/' must be a number")


def require_redis() -> Any:
    """redis-py's asyncio module, or the error naming the extra that installs it."""
    try:
        import redis.asyncio as aioredis
    except ImportError as exc:
        raise missing_extra("redis", "redis") from exc
    return aioredis


def connect(url: str, timeout: float) -> Any:
    """redis-py's asyncio client for `url`; the password from the URL, else $PASSWORD_ENV."""
    check_url(url)
    aioredis = require_redis()
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    options: dict[str, Any] = {
        "socket_timeout": timeout, "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 1),  # once: a connection Redis closed on restart is stale
        "health_check_interval": 30,
    }
    if urlsplit(url).password is None and os.environ.get(PASSWORD_ENV):
        options["password"] = os.environ[PASSWORD_ENV]
    return aioredis.from_url(url, **options)


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}/{unquote(parts.path.strip('/')) or '0'}"


class RedisState:
    """One Redis, reached through `run`: each operation bounded by `timeout` seconds, a
    failure turned into a 503 (see the module doc)."""

    def __init__(self, url: str, timeout: float) -> None:
        check_url(url)
        require_redis()  # a server started without the extra stops at once, saying which
        self.url = url
        self.where = _where(url)
        self.timeout = timeout
        self.failures = 0
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._down_until = 0.0
        self._down = False
        self._succeeded = 0.0  # when an operation last succeeded (monotonic)
        self._slow_logged = -60.0
        self._scripts: dict[str, Any] = {}

    def client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:  # a pool belongs to one event loop
            self._client, self._loop, self._scripts = connect(self.url, self.timeout), loop, {}
        return self._client

    def script(self, source: str) -> Any:
        """`source` registered once per client (sent by its digest, EVALSHA)."""
        client = self.client()
        if source not in self._scripts:
            self._scripts[source] = client.register_script(source)
        return self._scripts[source]

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    async def run(self, operation: Callable[[Any], Awaitable[T]], timeout: float | None = None) -> T:
        """`operation(client)` within min(`timeout`, the state's own); a 503 if it fails."""
        if not self.available:
            raise self.unavailable()
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeout

        bound = self.timeout if timeout is None else max(0.01, min(timeout, self.timeout))
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(operation(self.client()), bound)
        except (asyncio.TimeoutError, RedisTimeout) as exc:
            # Redis is slow, or this process is (its event loop behind under load): taken for
            # down only when nothing at all succeeded meanwhile
            raise self._failed(f"no answer within {bound:g} s", self._succeeded < started) from exc
        except (RedisError, OSError) as exc:
            raise self._failed(f"{type(exc).__name__}: {exc}", True) from exc
        self._succeeded = time.monotonic()
        if self._down:
            self._down = False
            log.warning("shared state %s answers again", self.where)
        return result

    def _failed(self, reason: str, down: bool) -> ServeError:
        self.failures += 1
        if down:
            self._down_until = time.monotonic() + BREAK_SECONDS
            if not self._down:  # one line per outage, not one per request
                self._down = True
                log.error("shared state %s unavailable: %s", self.where, reason)
        elif time.monotonic() - self._slow_logged > 10:
            self._slow_logged = time.monotonic()
            log.warning("shared state %s slow: %s (answered 503)", self.where, reason)
        return self.unavailable()

    def unavailable(self) -> ServeError:
        return ServeError(503, "state_unavailable", "the shared conversation store (Redis) is "
                          "unreachable or slow; nothing was changed, retry shortly",
                          headers={"Retry-After": str(max(1, round(BREAK_SECONDS)))})

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except Exception:  # closing a pool of another (finished) loop, or a dead Redis
                log.debug("closing the Redis pool", exc_info=True)
