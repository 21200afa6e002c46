"""A query: the user's question, optionally with their situation and earlier turns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: ``role`` is "user" or "agent"."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    """What retrieval is asked: `text` (the question or last user turn), optional `context`
    (the user's situation, as in ConditionalQA) and `history` (earlier turns, oldest first)."""

    text: str
    context: str = ""
    history: tuple[Turn, ...] = field(default=())
    id: str = ""

    @classmethod
    def of(cls, query: str | Query, history: Sequence[Turn | Mapping[str, Any]] | None = None) -> Query:
        """Normalise a string or Query plus optional history (dicts with role/text allowed)."""
        turns = tuple(
            t if isinstance(t, Turn) else Turn(str(t["role"]), str(t["text"])) for t in history or ()
        )
        if isinstance(query, Query):
            return query if not turns else Query(query.text, query.context, turns, query.id)
        return cls(text=query, history=turns)

    @property
    def is_conversational(self) -> bool:
        return bool(self.history)

    def last_turns(self, n: int = 6) -> tuple[Turn, ...]:
        """The last `n` turns including the current user turn."""
        turns = (*self.history, Turn("user", self.text))
        return turns[-n:]
