"""What a server is told at start: the trees it serves, its judge, its limits and its keys.

Settings travel to `--workers N` processes as JSON in one environment variable, so every
worker builds the same app from the same values.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InputError

SETTINGS_ENV = "DECISIONRAG_SERVE_SETTINGS"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_MAY_BE_ZERO = frozenset({"max_judge_queue", "requests_per_minute", "judge_tokens_per_minute"})
STATE_SCHEMES = ("redis://", "rediss://")


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """Bounds on what one request may ask and on what the server takes on at once."""

    max_body_bytes: int = 1_000_000
    max_query_chars: int = 4_000
    max_k: int = 100
    max_messages: int = 50
    max_conversation_chars: int = 32_000
    max_documents: int = 1_000
    max_document_chars: int = 20_000
    default_timeout: float = 30.0
    min_timeout: float = 0.1
    max_timeout: float = 300.0
    max_judge_requests: int = 64
    max_judge_queue: int = 512
    max_conversations: int = 10_000
    conversation_ttl: float = 3_600.0
    max_children: int = 1_000
    # per key, shared by every replica through --state redis:// (else per process); 0: none.
    # A key file entry may set its own (see _auth).
    requests_per_minute: int = 0
    judge_tokens_per_minute: int = 0
    state_timeout: float = 2.0  # the most one conversation-store operation may wait (Redis)
    # clients that never finish a request (issue 23; decisionrag._serve._connections)
    header_timeout: float = 10.0  # seconds for a request's head, from the connection
    body_timeout: float = 30.0  # seconds for its body, once the head is in
    max_pending_connections: int = 256  # connections waiting for their client; the oldest goes
    max_connections: int = 4_096  # all connections; beyond, a new one is closed at once

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if isinstance(value, float):
                if not value > 0:
                    raise InputError(f"limit {item.name}={value!r}: must be a positive number of seconds")
                continue
            floor = 0 if item.name in _MAY_BE_ZERO else 1
            if value < floor:
                raise InputError(f"limit {item.name}={value!r}: must be at least {floor}")
        if not self.min_timeout <= self.default_timeout <= self.max_timeout:
            raise InputError(f"limit default_timeout={self.default_timeout} is not between min_timeout="
                             f"{self.min_timeout} and max_timeout={self.max_timeout}")

    def replace(self, assignments: dict[str, str]) -> ServeLimits:
        """These limits with `name=value` assignments (CLI `--limit`); unknown names rejected."""
        types = {item.name: item.type for item in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for name, text in assignments.items():
            if name not in types:
                raise InputError(f"unknown limit {name!r}; known: {', '.join(sorted(types))}")
            kind = float if "float" in str(types[name]) else int
            try:
                changes[name] = kind(text)
            except ValueError:
                raise InputError(f"limit {name}={text!r} is not a{'' if kind is int else ' '}"
                                 f"{'n integer' if kind is int else 'number'}") from None
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """`trees`: (name, path) pairs, the first one the default; `judge`: a judge id;
    `generator`: the answer model id for ``POST /v1/answer`` (None: that endpoint says 501);
    `state_dir`: the folder of the state every worker shares (conversations); `state_url`:
    the Redis every replica shares instead (conversations and per-key rate buckets,
    ``redis://HOST:PORT/DB`` or ``rediss://``); `ui`: whether the console is served at ``/ui``."""

    trees: tuple[tuple[str, str], ...]
    judge: str = "embedded"
    judge_options: dict[str, Any] = field(default_factory=dict)  # typed (`judge_options`)
    preset: str = "auto"
    api_key_file: str | None = None
    limits: ServeLimits = field(default_factory=ServeLimits)
    reload_seconds: float = 1.0  # how often tree and key files are checked for replacement
    warm: bool = True
    generator: str | None = None  # the answer model of POST /v1/answer (openai-compatible:MODEL)
    generator_base_url: str | None = None
    generator_options: dict[str, Any] = field(default_factory=dict)  # typed (`GeneratorOptions`)
    state_dir: str | None = None  # what workers share (conversations); None: one worker's memory
    ui: bool = True  # the console at /ui
    state_url: str | None = None  # Redis shared by every replica (conversations, rate buckets)

    def __post_init__(self) -> None:
        if not self.trees:
            raise InputError("serve: give at least one tree file")
        if self.state_url is not None:
            if not self.state_url.startswith(STATE_SCHEMES):  # (not echoed: it may hold a password)
                raise InputError("--state: expected redis://HOST:PORT/DB or rediss://HOST:PORT/DB "
                                 "(a folder is --state-dir DIR)")
            if self.state_dir is not None:
                raise InputError("give --state (Redis) or --state-dir (a folder), not both")
        seen: set[str] = set()
        for name, _ in self.trees:
            if not _NAME.match(name):
                raise InputError(f"tree name {name!r}: use letters, digits, '.', '_' or '-' "
                                 "(at most 64), e.g. NAME=PATH")
            if name in seen:
                raise InputError(f"two trees are named {name!r}; name them with NAME=PATH")
            seen.add(name)

    @property
    def default_tree(self) -> str:
        return self.trees[0][0]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        data = json.loads(text)
        data["trees"] = tuple(tuple(pair) for pair in data["trees"])
        data["limits"] = ServeLimits(**data["limits"])
        return cls(**data)

    @classmethod
    def from_environment(cls) -> ServeSettings:
        text = os.environ.get(SETTINGS_ENV)
        if not text:
            raise InputError(f"{SETTINGS_ENV} is not set: start workers with `decisionrag serve`")
        return cls.from_json(text)


def tree_argument(text: str) -> tuple[str, str]:
    """`NAME=PATH` or `PATH` (named after the file: `docs.tree` -> `docs`)."""
    name, sep, path = text.partition("=")
    if sep and name and not Path(text).exists():
        return name, path
    stem = Path(text).name
    return (stem[: -len(".tree")] if stem.endswith(".tree") else Path(stem).stem or stem), text
