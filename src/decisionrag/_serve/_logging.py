"""Structured logs: one JSON object a line, carrying the id of the request being served."""

from __future__ import annotations

import contextvars
import json
import logging
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
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def log_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` for the server: uvicorn's and ours as JSON on stderr;
    uvicorn's access log is off (the app logs every request itself, with its id)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    upper = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "decisionrag._serve._logging.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": upper, "propagate": False},
            "uvicorn.error": {"handlers": ["json"], "level": upper, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "decisionrag": {"handlers": ["json"], "level": upper, "propagate": False},
        },
    }
