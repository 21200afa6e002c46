"""Per-key rates: requests per minute and judge tokens per minute, as token buckets.

A bucket holds at most a minute's worth and refills continuously, so a key may send its
minute's requests at once and then one every 60/N seconds. A request takes one token of its
key's request bucket or is answered 429 with ``Retry-After`` (the seconds until a token is
back). Judge tokens are known only once a request has run: a request that uses the judge is
let in while its key's token bucket is above zero, and what it spent is taken afterwards (the
bucket may go below zero; the key then waits until it has refilled).

The rates come from the server's limits (``--requests-per-minute``, ``--judge-tokens-per-
minute``; 0: none) and a key file entry may set its own (`_auth`). With ``--state redis://``
the buckets live in that Redis, changed by one script per request with Redis's own clock, so
every replica on every host draws from the same buckets. Without Redis, or while it does not
answer, each process keeps its own (the bound is then per process).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .._files import content_key
from ._auth import Principal
from ._errors import ServeError
from ._settings import ServeLimits

REQUESTS, TOKENS = "requests_per_minute", "judge_tokens_per_minute"
_WHAT = {REQUESTS: "requests per minute", TOKENS: "judge tokens per minute"}

# KEYS[1]: the bucket (a hash: tokens, at). ARGV: per minute, cost, mode. Returns the
# milliseconds to wait (0: done). take: cost tokens or wait; check: wait unless above zero;
# debit: take cost, even below zero.
_BUCKET = """
local per_minute = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local rate = per_minute / 60.0
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1]) or per_minute
local at = tonumber(held[2]) or now
if now > at then tokens = math.min(per_minute, tokens + (now - at) * rate) end
local wait = 0
if ARGV[3] == 'take' then
  if tokens >= cost then tokens = tokens - cost else wait = (cost - tokens) / rate end
elseif ARGV[3] == 'check' then
  if tokens <= 0 then wait = (1 - tokens) / rate end
else
  tokens = tokens - cost
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(math.max(now, at)))
redis.call('PEXPIRE', KEYS[1], math.ceil((per_minute - tokens) / rate * 1000) + 1000)
return math.ceil(wait * 1000)
"""


class MemoryBuckets:
    """One process's buckets: the same arithmetic as the Redis script."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._held: dict[str, tuple[float, float]] = {}

    def draw(self, bucket: str, per_minute: int, cost: float, mode: str) -> float:
        """Seconds to wait (0: done); see the script."""
        now, rate = self.clock(), per_minute / 60.0
        tokens, at = self._held.get(bucket, (float(per_minute), now))
        if now > at:
            tokens = min(float(per_minute), tokens + (now - at) * rate)
        wait = 0.0
        if mode == "take":
            if tokens >= cost:
                tokens -= cost
            else:
                wait = (cost - tokens) / rate
        elif mode == "check":
            if tokens <= 0:
                wait = (1 - tokens) / rate
        else:
            tokens -= cost
        self._held[bucket] = (tokens, max(now, at))
        return wait


@dataclass(slots=True)
class Meter:
    """The judge tokens one request spent (taken from its key's bucket when it ends)."""

    tokens: int = 0


class KeyLimiter:
    """The per-key rates of one server; `shared` (a `_redis.RedisState`): every replica's
    buckets, else this process's."""

    def __init__(self, limits: ServeLimits, shared: Any = None) -> None:
        self.limits = limits
        self.shared = shared
        self.local = MemoryBuckets()

    def rate(self, who: Principal, name: str) -> int | None:
        return who.rate(name, getattr(self.limits, name) or None)

    async def admit(self, who: Principal) -> None:
        """Take one request from `who`'s bucket, or 429."""
        per_minute = self.rate(who, REQUESTS)
        if per_minute:
            self._check(who, REQUESTS, per_minute, await self._draw(who, REQUESTS, per_minute, 1, "take"))

    @asynccontextmanager
    async def judged(self, who: Principal) -> AsyncIterator[Meter]:
        """Around work that uses the judge: 429 while `who`'s token bucket is empty; what
        the work spent (`Meter.tokens`, or the ``done`` of a 504) is taken afterwards."""
        per_minute = self.rate(who, TOKENS)
        if per_minute:
            self._check(who, TOKENS, per_minute, await self._draw(who, TOKENS, per_minute, 0, "check"))
        meter = Meter()
        try:
            yield meter
        except ServeError as exc:
            done = exc.extra.get("done")
            if isinstance(done, dict):
                meter.tokens += int(done.get("input_tokens", 0))
            raise
        finally:
            if per_minute and meter.tokens > 0:
                await self._draw(who, TOKENS, per_minute, meter.tokens, "debit")

    async def _draw(self, who: Principal, name: str, per_minute: int, cost: float, mode: str) -> float:
        bucket = f"decisionrag:rate:{content_key(who.identity, length=40)}:{name}"
        if self.shared is not None and self.shared.available:
            script = self.shared.script(_BUCKET)
            try:
                waited = await self.shared.run(
                    lambda client: script(keys=[bucket], args=[per_minute, cost, mode], client=client))
            except ServeError:
                pass  # Redis does not answer: this process's bucket bounds the key meanwhile
            else:
                return float(waited) / 1000
        return self.local.draw(bucket, per_minute, cost, mode)

    def _check(self, who: Principal, name: str, per_minute: int, wait: float) -> None:
        if wait <= 0:
            return
        seconds = max(1, math.ceil(wait))
        raise ServeError(429, "rate_limited",
                         f"the key {who.name!r} is over its limit of {per_minute:,} {_WHAT[name]}; "
                         f"retry in {seconds} s", headers={"Retry-After": str(seconds)},
                         extra={"limit": name, "per_minute": per_minute})
