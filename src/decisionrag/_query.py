"""A query: the user's question, optionally with their situation and earlier turns."""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ._errors import InputError


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

    @property
    def search_text(self) -> str:
        """What a similarity search is asked (flat retrievers, hybrid candidates, judges that
        embed the query): the user's situation (if any) and the question — in a conversation
        the current turn, without the earlier ones."""
        return f"{self.context} {self.text}".strip()

    def check(self) -> Query:
        """This query, or `InputError` when it cannot be asked: an empty question, or text
        that is not valid Unicode (a byte that was not UTF-8 on the command line arrives as a
        lone surrogate, which no judge can be sent)."""
        if not isinstance(self.text, str) or not is_visible(self.text):
            raise InputError("the question is empty: ask something")
        _check_text(self.text, "the question")
        _check_text(self.context, "the context")
        for number, turn in enumerate(self.history, 1):
            _check_text(turn.text, f"turn {number} of the history")
        return self

    def last_turns(self, n: int = 6) -> tuple[Turn, ...]:
        """The last `n` turns including the current user turn."""
        turns = (*self.history, Turn("user", self.text))
        return turns[-n:]


# What counts as something to read: any character but white space, control and format
# characters (zero-width, bidi, soft hyphen, tags, variation selectors), combining diacritics
# and blank fillers. One pattern, written with the characters themselves so that every regex
# engine reads it alike: the server's JSON schema states it (`pattern`) and `Query.check`
# applies it.
VISIBLE = ("[^\\s\x00-\x1f\x7f-\xa0\xad\u0300-\u036f\u034f\u061c\u115f\u1160\u17b4\u17b5"
           "\u180b-\u180f\u200b-\u200f\u2028-\u202f\u205f-\u206f\u2800\u3000\u3164\ufe00-\ufe0f"
           "\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e0fff]")
_VISIBLE = re.compile(VISIBLE)


def is_visible(text: str) -> bool:
    """Whether `text` has something to read (a character `VISIBLE` matches). A lone
    surrogate counts: `Query.check` then names the byte that was not UTF-8."""
    return _VISIBLE.search(text) is not None


def _check_text(text: str, what: str) -> None:
    if not isinstance(text, str):
        raise InputError(f"{what} must be text, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        byte = ord(bad) - 0xDC00 if 0xDC80 <= ord(bad) <= 0xDCFF else None
        shown = f"byte 0x{byte:02x}" if byte is not None else f"character U+{ord(bad):04X}"
        raise InputError(f"{what} is not valid UTF-8 text: {shown} at position {exc.start} "
                         "(re-encode it as UTF-8)") from None


class SharedWork:
    """What one walk computes once and all its parts reuse (the query's embedding, asked for
    by the judge and by the hybrid retriever alike): values by key, each computed by the
    first part that asks. Thread-safe (the embedded judge computes on its own thread)."""

    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value under `key`, computed by `compute()` the first time it is asked for."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            value = self._values[key] = compute()
            return value


_SHARED: contextvars.ContextVar[SharedWork | None] = contextvars.ContextVar(
    "decisionrag_shared_work", default=None)


@contextmanager
def shared_work() -> Iterator[SharedWork]:
    """A fresh `SharedWork` for what runs inside (one walk; its judge's requests and
    retriever calls run in copies of this context, and so see it)."""
    work = SharedWork()
    token = _SHARED.set(work)
    try:
        yield work
    finally:
        _SHARED.reset(token)


def current_shared_work() -> SharedWork | None:
    """The `SharedWork` of the walk running in this context, or None outside one."""
    return _SHARED.get()
