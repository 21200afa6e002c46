"""Structured logs: one JSON object a line, carrying the id of the request being served;
repeated lines rate-limited (`RateLimit`), so that a flood of bad requests cannot flood the log."""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from typing import Any

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("decisionrag_request_id", default="")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,  # which worker of `--workers N`
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        suppressed = getattr(record, "suppressed", None)
        if suppressed:
            entry["suppressed"] = suppressed  # lines like this one dropped just before it
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class RateLimit(logging.Filter):
    """At most `burst` lines of one kind per `window` seconds; the rest are dropped and
    counted, and the next line of that kind says how many (``suppressed``). A kind is the
    logger, level and message template — and for request lines the route and status, so
    that a flood of 401s or 408s is cut while other requests are still logged. Lines of
    requests that succeeded are never dropped (the access log stays whole)."""

    def __init__(self, burst: int = 20, window: float = 1.0) -> None:
        super().__init__()
        self.burst, self.window = burst, window
        self._seen: dict[tuple[Any, ...], list[float]] = {}  # kind -> [window start, count, dropped]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        fields = getattr(record, "fields", None)
        extra = (fields.get("route"), fields.get("status")) if isinstance(fields, dict) else ()
        if len(extra) == 2 and isinstance(extra[1], int) and extra[1] < 400:
            return True
        kind = (record.name, record.levelno, str(record.msg), *extra)
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 10_000:
                self._seen.clear()
            entry = self._seen.setdefault(kind, [now, 0, 0])
            if now - entry[0] >= self.window:
                dropped = int(entry[2])
                entry[:] = [now, 0, 0]
                if dropped:
                    record.suppressed = dropped
            entry[1] += 1
            if entry[1] > self.burst:
                entry[2] += 1
                return False
        return True


def log_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` for the server: uvicorn's and ours as JSON on stderr;
    uvicorn's access log is off (the app logs every request itself, with its id); lines of
    one kind are rate-limited (`RateLimit`), asyncio's too (a storm of accept errors)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr",
               "filters": ["rate"]}
    upper = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "decisionrag._serve._logging.JsonFormatter"}},
        "filters": {"rate": {"()": "decisionrag._serve._logging.RateLimit"}},
        "handlers": {"json": handler},
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": upper, "propagate": False},
            "uvicorn.error": {"handlers": ["json"], "level": upper, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "decisionrag": {"handlers": ["json"], "level": upper, "propagate": False},
            "asyncio": {"handlers": ["json"], "level": "WARNING", "propagate": False},
        },
    }
