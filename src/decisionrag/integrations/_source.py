"""Where framework retrievers get passages from: a local tree file or a `decisionrag serve` URL.

Both give the same records (`Passage`), so each framework adapter only converts them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._app import aask, open_navigator
from .._errors import InputError
from .._judges import Judge, load_judge
from .._sync import run_sync


@dataclass(frozen=True, slots=True)
class Passage:
    """One ranked passage as the integrations hand it on."""

    id: str
    doc_id: str
    score: float
    path: tuple[str, ...]
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    also_at: tuple[Mapping[str, Any], ...] = ()  # the same text elsewhere: {id, doc_id, path}

    def describe(self) -> dict[str, Any]:
        """The framework-side metadata: the hit's own metadata, then our fields on top
        (``also_at``: the other passages of the same text, collapsed into this one)."""
        return {**dict(self.metadata), "id": self.id, "doc_id": self.doc_id,
                "score": self.score, "path": list(self.path),
                "also_at": [dict(place) for place in self.also_at]}

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> Passage:
        """From a hit's ``to_dict()`` or a `/v1/retrieve` result."""
        return cls(id=str(item["id"]), doc_id=str(item.get("doc_id", "")),
                   score=float(item.get("score", 0.0)),
                   path=tuple(str(p) for p in item.get("path", ())),
                   text=str(item.get("text", "")),
                   metadata=dict(item.get("metadata") or {}),
                   also_at=tuple(dict(place) for place in item.get("also_at") or ()))


class Source(Protocol):
    def retrieve(self, query: str, k: int) -> list[Passage]: ...

    async def aretrieve(self, query: str, k: int) -> list[Passage]: ...


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, not {k!r}")
    return k


class TreeSource:
    """A tree file walked in this process by a Navigator, opened on first use."""

    def __init__(self, tree: str | os.PathLike[str], judge: str | Judge | Any = "embedded",
                 preset: str = "auto", judge_options: Mapping[str, Any] | None = None) -> None:
        self.tree_path = os.fspath(tree)
        self.judge_spec = judge
        self.preset = preset
        self.judge_options = dict(judge_options or {})
        self._navigator: Any = None
        self._lock = threading.Lock()

    @property
    def navigator(self) -> Any:
        with self._lock:
            if self._navigator is None:
                judge = self.judge_spec
                if not isinstance(judge, Judge):
                    judge = load_judge(judge, **self.judge_options)
                self._navigator = open_navigator(self.tree_path, judge, self.preset)
            return self._navigator

    def retrieve(self, query: str, k: int) -> list[Passage]:
        return run_sync(self.aretrieve(query, k))

    async def aretrieve(self, query: str, k: int) -> list[Passage]:
        result = await aask(self.navigator, query, k)
        return [Passage.from_dict(_hit_dict(hit)) for hit in result.hits[:k]]


def _hit_dict(hit: Any) -> dict[str, Any]:
    item: dict[str, Any] = hit.to_dict()
    item["score"] = hit.score  # unrounded
    item.setdefault("metadata", dict(getattr(hit, "metadata", None) or {}))
    return item


class ServiceSource:
    """A `decisionrag serve` instance, through `decisionrag.Client`."""

    def __init__(self, url: str, api_key: str | None = None, tree: str | None = None,
                 preset: str | None = None) -> None:
        self.url = url
        self.api_key = api_key
        self.tree = tree
        self.preset = preset
        self._clients: dict[int, Any] = {}

    def _client(self) -> Any:
        try:
            from .. import Client
        except ImportError as exc:
            raise InputError("this decisionrag has no Client: serving a URL needs decisionrag "
                             "with the serve client (pip install 'decisionrag[serve]')") from exc
        return Client(self.url, api_key=self.api_key)

    def _options(self) -> dict[str, Any]:
        return {name: value for name, value in (("tree", self.tree), ("preset", self.preset))
                if value is not None}

    def retrieve(self, query: str, k: int) -> list[Passage]:
        client = self._client()
        try:
            answer = client.retrieve(query, k=k, **self._options())
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                close()
        return [Passage.from_dict(_as_dict(item)) for item in _results(answer)][:k]

    async def aretrieve(self, query: str, k: int) -> list[Passage]:
        client = self._client()
        try:
            answer = await client.aretrieve(query, k=k, **self._options())
        finally:
            aclose = getattr(client, "aclose", None)
            if aclose is not None:
                await aclose()
        return [Passage.from_dict(_as_dict(item)) for item in _results(answer)][:k]


def _results(answer: Any) -> list[Any]:
    if isinstance(answer, Mapping):
        return list(answer.get("results", ()))
    results = getattr(answer, "results", None)
    if results is None:
        results = getattr(answer, "hits", answer)
    return list(results)


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    to_dict = getattr(item, "to_dict", None)
    if to_dict is not None:
        return dict(to_dict())
    return {name: getattr(item, name) for name in ("id", "doc_id", "score", "path", "text", "metadata")
            if hasattr(item, name)}


def open_source(*, tree: str | os.PathLike[str] | None, url: str | None, judge: Any,
                preset: str | None, api_key: str | None,
                judge_options: Mapping[str, Any] | None = None) -> Source:
    """The source a retriever's fields name: a tree file, or a server URL (where `tree`, if
    given, names one of the server's trees)."""
    if url is not None:
        return ServiceSource(url, api_key=api_key, tree=None if tree is None else os.fspath(tree),
                             preset=preset)
    if tree is None:
        raise InputError("give tree= (a tree file) or url= (a decisionrag serve URL)")
    return TreeSource(tree, judge, preset or "auto", judge_options)
