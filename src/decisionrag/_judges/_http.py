"""What HTTP judges add to the outbound-HTTP layer (`decisionrag._http`): usage accounting.

The client, retry policy and error translation live in `decisionrag._http`; the names are
re-exported here so backend modules read ``from ._http import HttpClient, make_usage``.
"""

from __future__ import annotations

import math
from typing import Any

from .._errors import JudgeProtocolError
from .._http import (
    DEFAULT_CONCURRENCY,
    RETRY_STATUSES,
    HttpClient,
    PerLoop,
    Reply,
    Retryable,
    RetryPolicy,
    check_status,
    dump_json,
    parse_json,
    parse_retry_after,
    server_message,
    with_retries,
)
from ._base import Usage, cost_usd

__all__ = [
    "DEFAULT_CONCURRENCY", "RETRY_STATUSES", "HttpClient", "PerLoop", "Reply", "RetryPolicy",
    "Retryable", "check_status", "dump_json", "make_usage", "parse_json", "parse_retry_after",
    "server_message", "token_count", "with_retries",
]


def token_count(value: Any, field: str, who: str) -> int | None:
    """A usage token count: None when absent; a finite number >= 0 is rounded to an int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeProtocolError(f"{who}: usage.{field} is {value!r}, not a token count")
    if not math.isfinite(value) or value < 0:
        raise JudgeProtocolError(f"{who}: usage.{field} is {value!r}, not a token count")
    return round(value)


def make_usage(
    reported: Any, estimate: int, seconds: float, price: float | None, who: str
) -> Usage:
    """Usage of one request from the server's ``usage`` object (estimated when it is absent)."""
    fields = reported if isinstance(reported, dict) else {}
    input_tokens = token_count(fields.get("input_tokens"), "input_tokens", who)
    output_tokens = token_count(fields.get("output_tokens"), "output_tokens", who)
    tokens = estimate if input_tokens is None else input_tokens
    cost = cost_usd(tokens, price)
    return Usage(requests=1, input_tokens=tokens, output_tokens=output_tokens or 0,
                 seconds=seconds, cost_usd=cost)
