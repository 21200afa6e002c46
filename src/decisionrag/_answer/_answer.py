"""What an answer is: the generated text, its citations resolved to the passages given,
the retrieval it came from, and what generating it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._navigate import Hit, Result
from ._citations import Mark, find_citations, strip_citations


@dataclass(frozen=True, slots=True)
class Citation:
    """One passage number the answer cites; `hit` is None when no passage had that number."""

    number: int
    hit: Hit | None

    @property
    def valid(self) -> bool:
        return self.hit is not None

    def to_dict(self) -> dict[str, Any]:
        hit = self.hit
        entry: dict[str, Any] = {"number": self.number, "valid": hit is not None}
        if hit is not None:
            entry.update(hit.to_dict())
        return entry


@dataclass(slots=True)
class GenerationUsage:
    """The generator's side of the cost (the judge's is in `result.usage`)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "seconds": round(self.seconds, 4)}


@dataclass(slots=True)
class Answer:
    """A generated answer. `sources` are the hits numbered 1..n in the prompt; `citations`
    the numbers the text cites, in order of first citation, each resolved to its hit or
    flagged (``valid`` false) when no passage had that number."""

    text: str
    result: Result
    sources: list[Hit]
    task: str
    model: str
    usage: GenerationUsage = field(default_factory=GenerationUsage)
    marks: list[Mark] = field(default_factory=list)

    @classmethod
    def of(cls, text: str, result: Result, sources: list[Hit], task: str, model: str,
           usage: GenerationUsage | None = None) -> Answer:
        return cls(text, result, sources, task, model, usage or GenerationUsage(), find_citations(text))

    @property
    def citations(self) -> list[Citation]:
        numbers = dict.fromkeys(n for mark in self.marks for n in mark.numbers)
        return [Citation(n, self.sources[n - 1] if 1 <= n <= len(self.sources) else None) for n in numbers]

    @property
    def cited(self) -> list[Hit]:
        """The passages the answer cites, in order of first citation."""
        return [c.hit for c in self.citations if c.hit is not None]

    @property
    def invalid_citations(self) -> list[int]:
        """Cited numbers that name no passage given to the generator."""
        return [c.number for c in self.citations if c.hit is None]

    @property
    def short_answer(self) -> str:
        """For the short-answer tasks: the text after the last ``Answer:``, first line,
        without citations (what exact match and token F1 compare)."""
        _, found, tail = self.text.rpartition("Answer:")
        body = tail if found else self.text
        lines = body.strip().splitlines()
        return strip_citations(lines[0]) if lines else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.text,
            "text": self.text,
            "short_answer": self.short_answer,
            "task": self.task,
            "model": self.model,
            "citations": [c.to_dict() for c in self.citations],
            "invalid_citations": self.invalid_citations,
            "marks": [[m.start, m.end, list(m.numbers)] for m in self.marks],
            "sources": [{"number": i, "id": h.key, "path": list(h.path)}
                        for i, h in enumerate(self.sources, 1)],
            "generation": self.usage.to_dict(),
            "retrieval": self.result.to_dict(),
        }
