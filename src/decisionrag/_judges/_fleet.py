"""Many judge servers behind one judge id: client-side spreading with affinity and health.

``jev-compatible:http://a:8000,http://b:8000,http://c:8000`` gives one judge whose requests
are spread over the servers listed (each a vLLM / SGLang / llm2jev / Ollama engine, or any
System One server). How a request picks its server:

* **Affinity.** Servers are ranked per request by rendezvous hashing of the request's state
  (the shared context). The parallel question batches of one context carry the same state,
  so they reach the same engine, whose prefix cache (vLLM automatic prefix caching, SGLang's
  radix cache) then serves every batch after the first; different contexts — other levels,
  other queries — spread over the fleet evenly.
* **Bounded load.** The first-ranked server is skipped while it has both all its connection
  slots (``concurrency``) busy and more than ``balance`` × the fleet's mean requests in flight
  (consistent hashing with bounded loads), so one hot context never queues behind a busy
  engine while others idle, and a light load keeps its affinity.
* **Health.** A server that fails (connection refused or reset, timeout, 5xx, 429) is taken
  out for a cooldown that doubles on each failure in a row (``cooldown`` … ``max_cooldown``
  seconds) and the request moves to the next-ranked server at once. When the cooldown has
  passed, a TCP connect probes the server before real traffic returns to it. A request fails
  only when every server has failed it, or the judge's deadline is spent.

Final errors (400, 401, 413, a malformed body) are the server's verdict on the request, not
on the server: they propagate unchanged and nobody is marked down.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from .._errors import JudgeConfigError, JudgeUnavailable
from .._http import HttpClient, RetryPolicy

PROBE_TIMEOUT = 1.0
FLEET_OPTIONS = ("balance", "cooldown", "max_cooldown")  # judge options (-o) a fleet takes


def split_urls(spec: str) -> list[str]:
    """The server roots of ``url[,url...]``, each checked, duplicates refused."""
    urls = [part.strip().rstrip("/") for part in spec.split(",") if part.strip()]
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise JudgeConfigError(f"judge fleet: {url!r} is not an http(s) URL")
    if len(set(urls)) != len(urls):
        raise JudgeConfigError(f"judge fleet: a server is listed twice in {spec!r}")
    return urls


@dataclass(slots=True)
class Member:
    """One server of the fleet and what the fleet knows of it."""

    url: str
    client: HttpClient
    in_flight: int = 0
    sent: int = 0
    failures: int = 0       # in a row
    down_until: float = 0.0

    def rank(self, key: bytes) -> int:
        return int.from_bytes(hashlib.blake2b(key + self.url.encode(), digest_size=8).digest(),
                              "big")


class FleetTransport:
    """A System One transport over several servers (see the module docstring)."""

    def __init__(self, urls: Sequence[str], *, path: str, headers: dict[str, str],
                 policy: RetryPolicy, concurrency: int, who: str, balance: float = 1.25,
                 cooldown: float = 2.0, max_cooldown: float = 30.0) -> None:
        if len(urls) < 2:
            raise JudgeConfigError(f"{who}: a fleet needs at least two servers")
        if balance < 1:
            raise JudgeConfigError(f"{who}: balance must be at least 1, not {balance}")
        self.path = path
        self.policy = policy
        self.who = who
        self.balance = balance
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        # one try per server per round: the fleet, not the member, decides where a retry goes
        member_policy = replace(policy, max_attempts=1)
        self.members = [Member(url, HttpClient(url, headers=headers, policy=member_policy,
                                               concurrency=concurrency, who=f"{who} [{url}]"))
                        for url in urls]

    async def post(self, body: dict[str, Any]) -> tuple[Any, float]:
        key = str(body.get("state", "")).encode("utf-8", errors="replace")
        start = time.monotonic()
        tried: set[str] = set()
        failed: list[str] = []
        while True:
            member = await self._pick(key, exclude=tried)
            if member is None:
                if await self._wait_for_recovery(start):
                    tried.clear()
                    continue
                raise JudgeUnavailable(f"{self.who}: every server failed "
                                       f"({'; '.join(failed[-len(self.members):]) or 'all are down'})")
            member.in_flight += 1
            member.sent += 1
            try:
                result = await member.client.post_json(self.path, body)
            except JudgeUnavailable as exc:
                self._mark_down(member)
                tried.add(member.url)
                failed.append(str(exc))
                if time.monotonic() - start >= self.policy.deadline:
                    raise JudgeUnavailable(f"{self.who}: deadline spent; "
                                           f"{'; '.join(failed)}") from exc
                continue
            finally:
                member.in_flight -= 1
            member.failures, member.down_until = 0, 0.0
            return result

    async def _pick(self, key: bytes, exclude: set[str]) -> Member | None:
        now = time.monotonic()
        usable = [m for m in self.members if m.url not in exclude]
        ranked = sorted(usable, key=lambda m: m.rank(key), reverse=True)
        healthy = [m for m in ranked if m.down_until <= now]
        if not healthy:
            return None
        mean_cap = math.ceil(self.balance * (sum(m.in_flight for m in healthy) + 1) / len(healthy))
        for member in healthy:
            # busy = past its own connection slots and past the fleet's bounded mean
            cap = max(mean_cap, member.client.concurrency)
            if member.in_flight < cap and await self._alive(member):
                return member
        for member in healthy:  # all busy: the first that is alive
            if await self._alive(member):
                return member
        return None

    async def _alive(self, member: Member) -> bool:
        """True for a server in good standing; a recovering one must accept a connection."""
        if member.failures == 0:
            return True
        parts = urlsplit(member.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, port), PROBE_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            self._mark_down(member)
            return False
        writer.close()
        return True

    def _mark_down(self, member: Member) -> None:
        member.failures += 1
        pause = min(self.max_cooldown, self.cooldown * 2 ** (member.failures - 1))
        member.down_until = time.monotonic() + pause

    async def _wait_for_recovery(self, start: float) -> bool:
        """Sleep until the first server's cooldown ends, if that is within the deadline."""
        soonest = min(m.down_until for m in self.members)
        wait = max(0.0, soonest - time.monotonic())
        if time.monotonic() - start + wait >= self.policy.deadline:
            return False
        await asyncio.sleep(wait)
        return True

    def stats(self) -> dict[str, dict[str, float]]:
        """Requests sent, requests in flight and health of every server."""
        now = time.monotonic()
        return {m.url: {"sent": m.sent, "in_flight": m.in_flight,
                        "healthy": float(m.down_until <= now)} for m in self.members}

    async def aclose(self) -> None:
        for member in self.members:
            await member.client.aclose()
