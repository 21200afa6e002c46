"""An on-disk judgment cache around any judge: re-running an evaluation costs nothing.

``load_judge(ID, judgment_cache=PATH)`` wraps the judge in `CachedJudge`. Each request is keyed by
the SHA-256 of (judge id, model, request kind, context, questions or question and options,
query, candidates), so any change to what the judge would read is a different key. A hit
returns the stored probabilities exactly, with ``Usage(cached=1)`` and no requests, tokens or
cost; a miss asks the judge and stores its probabilities and its original usage.

Storage is one small JSON file per key (``PATH/ab/abcdef....json``), written to a temporary
file and renamed, so concurrent processes never see half a file and the last writer wins
with identical content. An unreadable entry is treated as a miss and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .._errors import JudgeConfigError
from .._files import write_json_atomic
from ._base import (
    BinaryRequest,
    BinaryResult,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    JudgeWrapper,
    Usage,
)

CACHE_FORMAT = 1


class CachedJudge(JudgeWrapper):
    """`inner` with its answers remembered on disk under `cache_dir`."""

    def __init__(self, inner: Judge, cache_dir: str | os.PathLike[str]) -> None:
        super().__init__(inner)
        self.directory = Path(cache_dir)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JudgeConfigError(
                f"cannot create the judgment cache {self.directory}: {exc}"
            ) from exc
        self.hits = 0
        self.misses = 0

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        key = self._key("binary", {"context": request.context, "questions": request.questions,
                                   "query": request.query, "search": request.search,
                                   "candidates": _pairs(request)})
        stored = self._read(key, len(request.questions))
        if stored is not None:
            return BinaryResult(stored, self._hit_usage())
        result = await self.inner.binary(request)
        self._write(key, "binary", result.probabilities, result.usage)
        return result

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        key = self._key("choice", {"context": request.context, "question": request.question,
                                   "options": request.options, "query": request.query,
                                   "search": request.search,
                                   "candidates": _pairs(request)})
        stored = self._read(key, len(request.options))
        if stored is not None:
            return ChoiceResult(stored, self._hit_usage())
        result = await self.inner.choice(request)
        self._write(key, "choice", result.probabilities, result.usage)
        return result

    # ------------------------------------------------------------ keys and files

    def _key(self, kind: str, fields: dict[str, Any]) -> str:
        identity = {"format": CACHE_FORMAT, "judge": self.inner.name,
                    "model": getattr(self.inner, "model", None), "kind": kind, **fields}
        text = json.dumps(identity, ensure_ascii=False, sort_keys=True, default=list)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def _read(self, key: str, expected: int) -> list[float] | None:
        try:
            entry = json.loads(self.path_for(key).read_text(encoding="utf-8"))
            values = [float(p) for p in entry["probabilities"]]
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        if len(values) != expected:
            self.misses += 1
            return None
        self.hits += 1
        return values

    def _write(self, key: str, kind: str, probabilities: list[float], usage: Usage) -> None:
        entry = {"format": CACHE_FORMAT, "judge": self.inner.name, "kind": kind,
                 "probabilities": probabilities, "usage": usage.to_dict()}
        write_json_atomic(self.path_for(key), entry)

    def _hit_usage(self) -> Usage:
        cost = None if self.price_per_million_input is None else 0.0
        return Usage(requests=0, input_tokens=0, output_tokens=0, seconds=0.0,
                     cost_usd=cost, cached=1)

    def __repr__(self) -> str:
        return f"<CachedJudge {self.name} in {self.directory}>"


def _pairs(request: BinaryRequest | ChoiceRequest) -> list[list[str]]:
    return [[c.id, c.text] for c in request.candidates]
