"""What a server answers, typed: ranked passages (`RemoteResult` of `RemoteHit`s) and answers
with citations (`RemoteAnswer`, and the `RemoteAnswerEvent`s of a streamed one).

Each mirrors its in-process twin (`Result`/`Hit`, `Answer`/`Citation`/`AnswerEvent`) where
the wire carries the same thing; `from_dict` reads the server's JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class RemoteHit:
    """One ranked passage from a server (the fields of `Hit.to_dict`, plus metadata)."""

    id: str
    doc_id: str
    score: float
    path: tuple[str, ...]
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    binary: float | None = None
    choice: float | None = None
    # other passages of the same text, collapsed into this one: {id, doc_id, path} each
    also_at: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "doc_id": self.doc_id, "score": self.score, "binary": self.binary,
                "choice": self.choice, "path": list(self.path), "text": self.text,
                "metadata": dict(self.metadata), "also_at": [dict(a) for a in self.also_at]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteHit:
        return cls(id=data["id"], doc_id=data.get("doc_id", ""), score=float(data["score"]),
                   path=tuple(data.get("path", ())), text=data.get("text", ""),
                   metadata=dict(data.get("metadata") or {}), binary=data.get("binary"),
                   choice=data.get("choice"),
                   also_at=tuple(dict(a) for a in data.get("also_at") or ()))


@dataclass(frozen=True, slots=True)
class RemoteResult:
    hits: list[RemoteHit]
    usage: dict[str, Any]
    tree: str
    seconds: float
    request_id: str
    conversation_id: str | None = None
    trace: list[dict[str, Any]] | None = None

    @property
    def ids(self) -> list[str]:
        return [hit.id for hit in self.hits]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteResult:
        return cls(hits=[RemoteHit.from_dict(h) for h in data.get("results", [])],
                   usage=dict(data.get("usage") or {}), tree=data.get("tree", ""),
                   seconds=float(data.get("seconds", 0.0)), request_id=data.get("request_id", ""),
                   conversation_id=data.get("conversation_id"), trace=data.get("trace"))


@dataclass(frozen=True, slots=True)
class RemoteCitation:
    """One passage number the answer cites. `valid` is false when no passage given to the
    answer model had that number (then `id`, `doc_id`, `path` are None and `hit` too);
    otherwise `hit` is that source passage, text included."""

    number: int
    valid: bool
    id: str | None = None
    doc_id: str | None = None
    path: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    hit: RemoteHit | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], sources: list[RemoteHit]) -> RemoteCitation:
        number, valid = int(data["number"]), bool(data.get("valid"))
        path = data.get("path")
        hit = sources[number - 1] if valid and 1 <= number <= len(sources) else None
        return cls(number=number, valid=valid, id=data.get("id"), doc_id=data.get("doc_id"),
                   path=tuple(path) if path is not None else None, metadata=data.get("metadata"),
                   hit=hit)


@dataclass(frozen=True, slots=True)
class RemoteGenerationUsage:
    """The answer model's side of the cost (the judge's is `RemoteAnswer.result.usage`);
    token counts are None when the model did not report them."""

    input_tokens: int | None
    output_tokens: int | None
    seconds: float

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteGenerationUsage:
        return cls(input_tokens=data.get("input_tokens"), output_tokens=data.get("output_tokens"),
                   seconds=float(data.get("seconds", 0.0)))


@dataclass(frozen=True, slots=True)
class RemoteAnswer:
    """An answer from ``POST /v1/answer``: `text` cites `sources` (numbered 1..n) as ``[n]``;
    `citations` are in order of first citation, resolved to their passage; `result` is the
    whole retrieval the sources were taken from; `model` the server's answer model."""

    text: str
    short_answer: str
    task: str
    model: str
    citations: list[RemoteCitation]
    invalid_citations: list[int]
    sources: list[RemoteHit]
    result: RemoteResult
    usage: RemoteGenerationUsage
    request_id: str

    @property
    def cited(self) -> list[RemoteHit]:
        """The passages the answer cites, in order of first citation."""
        return [c.hit for c in self.citations if c.hit is not None]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteAnswer:
        sources = [RemoteHit.from_dict(h) for h in data.get("sources", [])]
        generation = data.get("generation") or {}
        return cls(
            text=data["answer"], short_answer=data.get("short_answer", ""), task=data.get("task", ""),
            model=generation.get("model", ""),
            citations=[RemoteCitation.from_dict(c, sources) for c in data.get("citations", [])],
            invalid_citations=[int(n) for n in data.get("invalid_citations", [])], sources=sources,
            result=RemoteResult.from_dict(data.get("retrieval") or {}),
            usage=RemoteGenerationUsage.from_dict(generation), request_id=data.get("request_id", ""),
        )


@dataclass(frozen=True, slots=True)
class RemoteAnswerEvent:
    """One event of a streamed answer, as `AnswerEvent`: ``retrieved`` (`result`: the ranked
    passages), ``delta`` (`text`: more of the answer), then ``done`` (`answer`, whole)."""

    kind: Literal["retrieved", "delta", "done"]
    text: str = ""
    result: RemoteResult | None = None
    answer: RemoteAnswer | None = None
