"""Conversations a client named with `conversation_id`: history and notepad, LRU + TTL bound.

Two stores behind one interface — `get(key)` (a copy of the state, empty if unknown),
`update(key, change)` (read, change, write back, as one step), `len()`, `capacity`, `ttl`:

* `MemoryConversations`: one process's ordered dict (one worker without a state folder).
* `FileConversations`: a folder every worker of one server shares. A conversation is one JSON
  file named by a digest of its key (ids are client-chosen: never a file name), replaced by
  `atomic_write`, so a reader sees the old state or the new one, even if a worker dies mid-write.
  An update holds an `fcntl.flock` on one of a fixed set of lock files (the key's stripe: lock
  files are never removed, so two processes can never lock two different files for one key).
  Creating a conversation counts it in ``index.json`` under a folder-wide lock; when the count
  passes `capacity`, or `ttl` (at most a minute) has passed since the last sweep, a sweep
  removes the idle ones and then the least recently used, by file time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .._files import content_key, remove_stale_temporaries, write_json_atomic
from .._query import Turn

ConversationKey = tuple[str, str, str]  # (key name, tree, conversation id)
Change = Callable[["ConversationState"], None]
STRIPES = 64  # lock files of a FileConversations folder
_VERSION = 1


@dataclass(slots=True)
class ConversationState:
    history: list[Turn] = field(default_factory=list)
    notepad: list[str] = field(default_factory=list)
    touched: float = 0.0

    def remember(self, page_key: str) -> None:
        """The page of the top hit moves to the front of the notepad (as `Conversation` does)."""
        if page_key in self.notepad:
            self.notepad.remove(page_key)
        self.notepad.insert(0, page_key)

    def copy(self) -> ConversationState:
        return ConversationState(list(self.history), list(self.notepad), self.touched)

    def to_json(self) -> dict[str, Any]:
        return {"version": _VERSION, "touched": self.touched, "notepad": self.notepad,
                "history": [[turn.role, turn.text] for turn in self.history]}

    @classmethod
    def from_json(cls, data: Any) -> ConversationState:
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError("not a conversation of this version")
        return cls([Turn(str(role), str(text)) for role, text in data["history"]],
                   [str(key) for key in data["notepad"]], float(data["touched"]))


class ConversationStore(Protocol):
    capacity: int
    ttl: float

    def __len__(self) -> int: ...
    def get(self, key: ConversationKey) -> ConversationState: ...
    def update(self, key: ConversationKey, change: Change) -> ConversationState: ...


def open_conversations(capacity: int, ttl: float, folder: str | None) -> ConversationStore:
    """The store of a server: shared files in `folder`, else this process's memory."""
    if folder is None:
        return MemoryConversations(capacity, ttl)
    return FileConversations(Path(folder) / "conversations", capacity, ttl)


class MemoryConversations:
    """At most `capacity` conversations, least recently used dropped first; one idle for
    `ttl` seconds is forgotten. Keyed by API key name too, so keys never share one."""

    def __init__(self, capacity: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock
        self._items: OrderedDict[ConversationKey, ConversationState] = OrderedDict()

    def __len__(self) -> int:
        self._expire(self.clock())
        return len(self._items)

    def get(self, key: ConversationKey) -> ConversationState:
        self._expire(self.clock())
        state = self._items.get(key)
        return state.copy() if state is not None else ConversationState()

    def update(self, key: ConversationKey, change: Change) -> ConversationState:
        now = self.clock()
        self._expire(now)
        state = self._items.pop(key, None) or ConversationState()
        change(state)
        state.touched = now
        self._items[key] = state
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return state.copy()

    def _expire(self, now: float) -> None:
        while self._items:
            oldest_key, oldest = next(iter(self._items.items()))
            if now - oldest.touched < self.ttl:
                return
            del self._items[oldest_key]


class FileConversations:
    """The conversations of every worker of one server, in `folder` (see the module doc)."""

    def __init__(self, folder: str | os.PathLike[str], capacity: int, ttl: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.folder = Path(folder)
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock  # wall time: shared by processes, and kept across restarts
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # what users said: private
        (self.folder / "locks").mkdir(exist_ok=True)

    def path(self, key: ConversationKey) -> Path:
        digest = content_key(*key, length=40)
        return self.folder / digest[:2] / f"{digest}.json"

    def __len__(self) -> int:
        now = self.clock()
        return sum(1 for _, touched in self._files() if now - touched < self.ttl)

    def get(self, key: ConversationKey) -> ConversationState:
        state = self._read(self.path(key), self.clock())
        return state if state is not None else ConversationState()

    def update(self, key: ConversationKey, change: Change) -> ConversationState:
        path = self.path(key)
        with self._locked(f"{int(path.stem[:8], 16) % STRIPES:02d}"):
            now = self.clock()
            created = not path.exists()
            state = self._read(path, now) or ConversationState()
            change(state)
            state.touched = now
            write_json_atomic(path, state.to_json())
            os.utime(path, (now, now))  # the sweep orders by file time
        if created:
            self._count_new(now)
        return state

    # -- files ---------------------------------------------------------------------------

    def _read(self, path: Path, now: float) -> ConversationState | None:
        """The state in `path`; None when absent, idle past the TTL, or unreadable."""
        try:
            state = ConversationState.from_json(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # damaged: the conversation starts again rather than the request failing
        return state if now - state.touched < self.ttl else None

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        fd = os.open(self.folder / "locks" / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
            yield
        finally:
            os.close(fd)

    def _count_new(self, now: float) -> None:
        index = self.folder / "index.json"
        with self._locked("index"):
            try:
                data = json.loads(index.read_bytes())
                count, swept = int(data["count"]) + 1, float(data["swept"])
            except (OSError, ValueError, KeyError, TypeError):
                count, swept = self.capacity + 1, 0.0  # unknown: count them
            if count > self.capacity or now - swept >= min(self.ttl, 60.0):
                count, swept = self._sweep(now), now
            write_json_atomic(index, {"count": count, "swept": swept})

    def _files(self) -> Iterator[tuple[Path, float]]:
        for shard in self.folder.iterdir():
            if shard.name == "locks" or not shard.is_dir():
                continue
            for entry in os.scandir(shard):
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    with contextlib.suppress(FileNotFoundError):
                        yield Path(entry.path), entry.stat().st_mtime
                elif entry.name.endswith(".tmp"):  # a writer that died: remove its leftovers
                    target = entry.name[1:].partition(".json.")[0] + ".json"
                    remove_stale_temporaries(shard / target)

    def _sweep(self, now: float) -> int:
        """Remove the idle conversations, then the least recently used past `capacity`;
        how many are left."""
        kept: list[tuple[float, Path]] = []
        for path, touched in self._files():
            if now - touched >= self.ttl:
                path.unlink(missing_ok=True)
            else:
                kept.append((touched, path))
        kept.sort()
        for _, path in kept[: max(0, len(kept) - self.capacity)]:
            path.unlink(missing_ok=True)
        return min(len(kept), self.capacity)
