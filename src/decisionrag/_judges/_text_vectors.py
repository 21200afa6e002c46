"""The embedded judge's vectors of texts: an in-memory LRU by digest (queries, and texts of
candidates without stored vectors), and the encoding of new texts in pieces, the query's
deadline checked between them."""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._deadline import active_deadline
from .._progress import Step

# characters encoded at once by an encoder that cannot report its progress (the query's
# deadline is checked between such pieces; the bundled encoders are checked after every
# forward pass instead, through their progress step)
ENCODE_CHARS = 20_000


def text_digest(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


@dataclass(slots=True)
class CacheStats:
    """What the in-memory embedding cache did: calls to the encoder, texts encoded, hits."""

    encoder_calls: int = 0
    encoded: int = 0
    memory_hits: int = 0


class VectorCache:
    """An in-process LRU of vectors by digest (queries, and texts of candidates without
    stored vectors)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> np.ndarray | None:
        with self._lock:
            vector = self._memory.get(digest)
            if vector is not None:
                self._memory.move_to_end(digest)
            return vector

    def put(self, digest: str, vector: np.ndarray) -> None:
        with self._lock:
            self._memory[digest] = vector
            self._memory.move_to_end(digest)
            while len(self._memory) > self.size:
                self._memory.popitem(last=False)


def pieces(items: list[tuple[str, str]], chars: int) -> list[list[tuple[str, str]]]:
    """`items` (digest, text) in consecutive pieces of about `chars` characters of text."""
    found: list[list[tuple[str, str]]] = [[]]
    size = 0
    for item in items:
        if found[-1] and size + len(item[1]) > chars:
            found.append([])
            size = 0
        found[-1].append(item)
        size += len(item[1])
    return [piece for piece in found if piece]


class DeadlineStep(Step):
    """A silent progress step that stops the encoding it follows once the query's deadline
    has passed (checked after every forward pass)."""

    def __init__(self, who: str) -> None:
        super().__init__("", enabled=False)
        self.who = who

    def advance(self, n: float = 1, cost: float = 0.0) -> None:
        check_deadline(self.who)
        super().advance(n, cost=cost)


def reports_progress(encoder: Any) -> bool:
    """Whether the encoder's `encode` takes a progress step (the bundled ones do)."""
    try:
        return "progress" in inspect.signature(encoder.encode).parameters
    except (TypeError, ValueError):
        return False


def check_deadline(who: str) -> None:
    scope = active_deadline()
    if scope is not None and scope.remaining() <= 0:
        raise scope.expired_error(who, "while candidates were being embedded")
