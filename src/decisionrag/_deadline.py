"""One query's deadline: one clock and one retry budget for every call it makes.

`QueryDeadline` is set with ``with`` (or ``async with``) and read through a context variable,
so every HTTP call made inside it (`decisionrag._http`), in any task it starts, shares it; a
navigator applies its own as a backstop around the whole walk.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Iterator

from ._errors import DeadlineExceeded, JudgeConfigError

DEFAULT_RETRY_BUDGET = 48  # retries, all calls of one query together (a walk sends 5-30 requests)


class QueryDeadline:
    """One clock and one retry budget for every HTTP call made while it is active.

    A context manager (sync or async); calls made in tasks started inside it (``gather``)
    share it. `seconds` None means no deadline, only the retry budget. `problems` keeps the
    latest failures and `in_flight` counts the attempts out now (for a progress line)."""

    def __init__(self, seconds: float | None, *, retry_budget: int = DEFAULT_RETRY_BUDGET,
                 from_now: bool = False) -> None:
        if seconds is not None and not seconds > 0:
            raise JudgeConfigError(f"a deadline must be a positive number of seconds, not {seconds}")
        self.seconds = seconds
        # from_now: the clock runs from here (a command's deadline counts its start-up too),
        # not from the first `with`; entering again never restarts it
        self.from_now = from_now
        self.retry_budget = retry_budget
        self.retries = 0
        self.problems: list[str] = []
        self.in_flight = 0
        self.started = time.monotonic()
        self.entered = False  # the walk has begun (the judge loaded, the tree opened)
        self.entered_at: float | None = None
        self.first_request: float | None = None  # when the first HTTP attempt went out
        self._token: contextvars.Token[QueryDeadline | None] | None = None

    def remaining(self) -> float:
        if self.seconds is None:
            return math.inf
        return self.seconds - (time.monotonic() - self.started)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def request_started(self) -> None:
        """An HTTP attempt goes out (the HTTP layer calls this)."""
        self.in_flight += 1
        if self.first_request is None:
            self.first_request = time.monotonic()

    def waited(self) -> float | None:
        """Seconds since the first request went out (since the walk began for a judge that
        sends none); None before the walk began: loading a model is not waiting."""
        if not self.entered:
            return None
        since = self.first_request if self.first_request is not None else (
            self.entered_at or self.started)
        return time.monotonic() - since

    def note(self, problem: str) -> None:
        self.problems = [*self.problems[-4:], problem]

    def expired_error(self, who: str, doing: str) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"{who}: the query's deadline of {self.seconds:g}s passed {doing}"
            + (f" (last problem: {self.problems[-1]})" if self.problems else "")
        )

    @contextlib.contextmanager
    def active(self) -> Iterator[QueryDeadline]:
        """This deadline active for the code in the block (the HTTP layer reads it), its
        clock untouched: for a step of a query already under way (generating its answer)."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def __enter__(self) -> QueryDeadline:
        if not self.from_now:
            self.started = time.monotonic()
        self.entered = True
        self.entered_at = self.entered_at or time.monotonic()
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None

    async def __aenter__(self) -> QueryDeadline:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


_ACTIVE: contextvars.ContextVar[QueryDeadline | None] = contextvars.ContextVar(
    "decisionrag_query_deadline", default=None)


def active_deadline() -> QueryDeadline | None:
    """The `QueryDeadline` the running code is inside of, if any."""
    return _ACTIVE.get()
