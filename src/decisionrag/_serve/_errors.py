"""The errors the service answers with: one status, one type, one message (and the field)."""

from __future__ import annotations

from typing import Any


class ServeError(Exception):
    """An answer that is not a success. `field` names the request field at fault;
    `headers` go on the response (`Retry-After`, `WWW-Authenticate`); `extra` joins the body."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self, request_id: str = "") -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        error.update(self.extra)
        return {"error": error, "request_id": request_id}


def invalid(field: str, message: str) -> ServeError:
    return ServeError(422, "invalid_request", f"{field}: {message}", field=field)


def too_large(field: str, message: str) -> ServeError:
    return ServeError(413, "too_large", f"{field}: {message}", field=field)


def problem_message(problem: dict[str, Any]) -> str:
    """A validation problem of pydantic's in words: a text that fails the `VISIBLE` pattern
    has nothing to read (empty, or only spaces, control or invisible characters) — never the
    pattern itself."""
    if problem.get("type") == "string_pattern_mismatch":
        return "is empty (it has no visible character)"
    return str(problem.get("msg", "invalid"))
