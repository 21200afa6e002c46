"""The exception tree of decisionrag.

DecisionRAGError
├── InputError            bad user input: a file, line or field is named in the message
│   └── TreeFormatError   a tree file that is missing, corrupt or of another schema version
├── JudgeError            a decision model failed or answered something unusable
│   ├── JudgeConfigError  unknown judge id, missing key, missing optional dependency
│   ├── JudgeRequestError the server refused the request (400/401/403/404/422): retrying won't help
│   ├── JudgeUnavailable  retries exhausted (408/429/5xx, timeouts, connection errors)
│   │   └── DeadlineExceeded the query's deadline or retry budget ran out first
│   └── JudgeProtocolError the answer broke the protocol (missing answers, NaN, bad sums)
├── AnswerError           the answer (chat) model could not be reached or answered unusably
├── NavigationError       a navigation configuration that cannot run on this tree
└── ServerError           a decisionrag server answered with an error (Client)

Failures of outbound HTTP (httpx) are translated into this tree in `decisionrag._http` only.
"""

from __future__ import annotations


class DecisionRAGError(Exception):
    """Base class of every error decisionrag raises on purpose."""


class InputError(DecisionRAGError, ValueError):
    """A user-supplied input is malformed; the message names the file, line or field."""


class TreeFormatError(InputError):
    """A tree file is missing, corrupt, or written by an incompatible schema version."""


class JudgeError(DecisionRAGError):
    """A decision model could not give a usable answer."""


class JudgeConfigError(JudgeError):
    """A judge cannot be constructed: bad id, missing API key or missing optional dependency."""


class JudgeRequestError(JudgeError):
    """The server rejected the request; retrying the same request will not help."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class JudgeUnavailable(JudgeError):
    """The server kept failing (throttling, server errors, timeouts) after all retries."""


class DeadlineExceeded(JudgeUnavailable):
    """A query's deadline (or its budget of retries) ran out before the judge answered."""


class JudgeProtocolError(JudgeError):
    """The server answered, but the answer breaks the decision-model protocol."""


class AnswerError(DecisionRAGError):
    """The answer model could not be reached or answered something unusable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NavigationError(DecisionRAGError):
    """A navigation preset or setting cannot be applied to this tree."""


class MissingDependency(DecisionRAGError, ImportError):
    """An optional dependency is missing; the message names the extra that installs it."""


def missing_extra(package: str, extra: str) -> MissingDependency:
    """The error raised when an optional dependency is not installed."""
    return MissingDependency(
        f"{package!r} is not installed; install it with: pip install 'decisionrag[{extra}]'"
    )


class ServerError(DecisionRAGError):
    """A `decisionrag serve` server answered with an error (raised by `Client`).

    `status` is the HTTP status, `type` the error type in the body (``unauthorized``,
    ``server_busy``, ``deadline_exceeded`` …), `field` the request field at fault,
    `retry_after` the seconds the server asked to wait (503), `body` the whole error body.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        type: str = "",
        field: str | None = None,
        retry_after: float | None = None,
        request_id: str = "",
        body: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id
        self.body = body or {}
