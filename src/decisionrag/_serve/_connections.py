"""Connections held open by clients that never finish a request: bounded, timed out, counted.

uvicorn's HTTP/1.1 protocol waits for a request's head and body as long as the client likes,
and keeps every connection it accepts; a few thousand clients that send half a request
(``slowloris``) exhaust the process's file descriptors and nothing else is served. The
protocol here (`GuardedH11Protocol`, uvicorn's h11 protocol with one guard per server) adds:

* a deadline for the client's side of each request: its head within `header_timeout`
  seconds of the connection (or of the previous response, on a kept-alive connection), its
  body within `body_timeout` more — a client that trickles a byte at a time gains nothing;
* a cap on connections waiting for their client (`max_pending_connections`): a new one
  beyond it closes the one that has waited longest, so a flood of half-open connections
  never keeps out a client that sends its request at once (a health check, a real user);
* a cap on all connections (`max_connections`): beyond it a new connection is closed at once;
* one log line a second at most about what was closed, with counts.

The app's own middleware still bounds the body it reads (`body_timeout`: a JSON 408) and its
size (413); this layer is the backstop for clients that never get as far as the app.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("decisionrag.serve")

SWEEP_SECONDS = 0.5  # how often waiting connections are looked at
BODY_GRACE = 5.0  # seconds past `body_timeout` before the protocol closes what the app did not


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_pending_connections: int = 256
    max_connections: int = 4096

    @classmethod
    def of(cls, limits: Any) -> ConnectionLimits:
        """These limits from a `ServeLimits` (fields of the same names)."""
        return cls(**{name: getattr(limits, name) for name in cls.__dataclass_fields__
                      if hasattr(limits, name)})


class Guard:
    """The waiting connections of one server (shared by its protocol instances)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.waiting: OrderedDict[GuardedH11Protocol, tuple[float, bool]] = OrderedDict()
        self.closed_slow = 0  # closed for not sending their request in time
        self.refused = 0  # closed because of a cap
        self._reported = (0, 0)
        self._sweeping = False

    def opened(self, protocol: GuardedH11Protocol) -> bool:
        """Admit a new connection (False: it was refused and closed)."""
        if len(protocol.connections) > self.limits.max_connections:
            self.refused += 1
            protocol.transport.close()
            self._schedule(protocol)
            return False
        while len(self.waiting) >= self.limits.max_pending_connections:
            oldest, _ = self.waiting.popitem(last=False)
            self.refused += 1
            oldest.transport.close()
        self.waiting[protocol] = (time.monotonic(), False)
        self._schedule(protocol)
        return True

    def update(self, protocol: GuardedH11Protocol) -> None:
        """After the client sent bytes or the server answered: is it waiting for the client?"""
        cycle = protocol.cycle
        if cycle is None or cycle.response_complete:
            state: bool | None = False  # waiting for a request's head
        elif cycle.more_body and not cycle.response_started:
            state = True  # waiting for its body
        else:
            state = None  # the request is in; the app has it
        known = self.waiting.get(protocol)
        if state is None:
            self.waiting.pop(protocol, None)
        elif known is None or known[1] != state:
            self.waiting[protocol] = (time.monotonic(), state)

    def closed(self, protocol: GuardedH11Protocol) -> None:
        self.waiting.pop(protocol, None)

    def _schedule(self, protocol: GuardedH11Protocol) -> None:
        if not self._sweeping:
            self._sweeping = True
            protocol.loop.call_later(SWEEP_SECONDS, self._sweep, protocol.loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        head, body = self.limits.header_timeout, self.limits.body_timeout + BODY_GRACE
        for protocol, (since, for_body) in list(self.waiting.items()):
            if now - since > (body if for_body else head):
                self.waiting.pop(protocol, None)
                self.closed_slow += 1
                protocol.transport.close()
        self._report()
        if self.waiting:
            loop.call_later(SWEEP_SECONDS, self._sweep, loop)
        else:
            self._sweeping = False

    def _report(self) -> None:
        counts = (self.closed_slow, self.refused)
        if counts != self._reported:
            slow, refused = counts[0] - self._reported[0], counts[1] - self._reported[1]
            log.warning("connections closed", extra={"fields": {
                "slow_clients": slow, "over_cap": refused, "waiting": len(self.waiting),
                "header_timeout": self.limits.header_timeout,
                "max_pending_connections": self.limits.max_pending_connections}})
            self._reported = counts


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under this server's `Guard` (see the module docstring).

    `configure` sets the limits of the process (each `--workers` process calls it)."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    @classmethod
    def configure(cls, limits: ConnectionLimits) -> None:
        cls.limits = limits

    @property
    def guard(self) -> Guard:
        found: Guard | None = getattr(self.server_state, "decisionrag_guard", None)
        if found is None:
            found = Guard(self.limits)
            self.server_state.decisionrag_guard = found  # type: ignore[attr-defined]
        return found

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.guard.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if not self.transport.is_closing():
            self.guard.update(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self.guard.update(self)


PROTOCOL = f"{__name__}:GuardedH11Protocol"  # uvicorn's `http=` (an import path: workers spawn)
