"""Conversations a client named with `conversation_id`: history and notepad, LRU + TTL bound."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from .._query import Turn

ConversationKey = tuple[str, str, str]  # (key name, tree, conversation id)


@dataclass(slots=True)
class ConversationState:
    history: list[Turn] = field(default_factory=list)
    notepad: list[str] = field(default_factory=list)
    touched: float = field(default_factory=time.monotonic)

    def remember(self, page_key: str) -> None:
        """The page of the top hit moves to the front of the notepad (as `Conversation` does)."""
        if page_key in self.notepad:
            self.notepad.remove(page_key)
        self.notepad.insert(0, page_key)


class ConversationStore:
    """At most `capacity` conversations, least recently used dropped first; one idle for
    `ttl` seconds is forgotten. Keyed by API key name too, so keys never share one."""

    def __init__(self, capacity: int, ttl: float) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._items: OrderedDict[ConversationKey, ConversationState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: ConversationKey) -> ConversationState:
        now = time.monotonic()
        self._expire(now)
        state = self._items.get(key)
        if state is None:
            state = self._items[key] = ConversationState()
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        state.touched = now
        return state

    def _expire(self, now: float) -> None:
        while self._items:
            oldest_key, oldest = next(iter(self._items.items()))
            if now - oldest.touched < self.ttl:
                return
            del self._items[oldest_key]
