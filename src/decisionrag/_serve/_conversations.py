"""Conversations a client named with `conversation_id`: history and notepad, LRU + TTL bound.

Three stores behind one asynchronous interface — `aget(key)` (a copy of the state, empty if
unknown), `aupdate(key, change)` (read, change, write back, as one step), `adelete(key)`,
`capacity`, `ttl` — where `key` is (the API key's identity, tree, conversation id):

* `MemoryConversations`: one process's ordered dict (one worker without a state folder).
* `FileConversations`: a folder every worker of one server shares. A conversation is one JSON
  file named by a digest of its key (ids are client-chosen: never a file name), replaced by
  `atomic_write`, so a reader sees the old state or the new one, even if a worker dies mid-write.
  An update holds an `fcntl.flock` on one of a fixed set of lock files (the key's stripe: lock
  files are never removed, so two processes can never lock two different files for one key).
  Creating a conversation counts it in ``index.json`` under a folder-wide lock; when the count
  passes `capacity`, or `ttl` (at most a minute) has passed since the last sweep, a sweep
  removes the idle ones and then the least recently used, by file time.
* `RedisConversations`: one Redis every replica on every host shares (``serve --state
  redis://...``, reached through `_redis.RedisState`), one key per conversation under the
  same digest, updated by a transaction.

The first two also answer synchronously (`get`, `update`, `delete`, `len`).
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
from ._errors import ServeError

ConversationKey = tuple[str, str, str]  # (API key identity, tree, conversation id)
Change = Callable[["ConversationState"], None]
STRIPES = 64  # lock files of a FileConversations folder
REDIS_PREFIX = "decisionrag:"
MAX_ATTEMPTS = 64  # WATCH retries of one Redis update (only under extreme contention)
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
    clock: Callable[[], float]  # what `ConversationState.touched` is measured by
    shared: Any  # the `_redis.RedisState` a Redis store talks through (rate buckets use it too)

    async def aget(self, key: ConversationKey, timeout: float | None = None) -> ConversationState: ...
    async def aupdate(self, key: ConversationKey, change: Change,
                      timeout: float | None = None) -> ConversationState: ...
    async def adelete(self, key: ConversationKey, timeout: float | None = None) -> bool: ...
    async def aclose(self) -> None: ...


def open_conversations(capacity: int, ttl: float, folder: str | None, url: str | None = None,
                       timeout: float = 2.0) -> ConversationStore:
    """The store of a server: Redis at `url` (every replica), else shared files in `folder`
    (every worker of one host), else this process's memory. `timeout`: the most one Redis
    operation may wait."""
    if url is not None:
        from ._redis import RedisState

        return RedisConversations(RedisState(url, timeout), capacity, ttl)
    if folder is None:
        return MemoryConversations(capacity, ttl)
    return FileConversations(Path(folder) / "conversations", capacity, ttl)


class _Local:
    """The asynchronous interface of a store that answers at once (memory, local files)."""

    shared = None

    def get(self, key: ConversationKey) -> ConversationState:
        raise NotImplementedError

    def update(self, key: ConversationKey, change: Change) -> ConversationState:
        raise NotImplementedError

    def delete(self, key: ConversationKey) -> bool:
        raise NotImplementedError

    async def aget(self, key: ConversationKey, timeout: float | None = None) -> ConversationState:
        return self.get(key)

    async def aupdate(self, key: ConversationKey, change: Change,
                      timeout: float | None = None) -> ConversationState:
        return self.update(key, change)

    async def adelete(self, key: ConversationKey, timeout: float | None = None) -> bool:
        return self.delete(key)

    async def aclose(self) -> None:
        return None


class MemoryConversations(_Local):
    """At most `capacity` conversations, least recently used dropped first; one idle for
    `ttl` seconds is forgotten. Keyed by API key identity too, so keys never share one."""

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

    def delete(self, key: ConversationKey) -> bool:
        self._expire(self.clock())
        return self._items.pop(key, None) is not None

    def _expire(self, now: float) -> None:
        while self._items:
            oldest_key, oldest = next(iter(self._items.items()))
            if now - oldest.touched < self.ttl:
                return
            del self._items[oldest_key]


class FileConversations(_Local):
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

    def delete(self, key: ConversationKey) -> bool:
        path = self.path(key)
        with self._locked(f"{int(path.stem[:8], 16) % STRIPES:02d}"):
            known = self._read(path, self.clock()) is not None
            path.unlink(missing_ok=True)
        return known

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


# the least recently used conversations past the capacity, and index entries past the TTL
_TRIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[1], over)
  for i = 1, #gone, 2 do redis.call('DEL', ARGV[3] .. gone[i]) end
end
return math.max(over, 0)
"""


class RedisConversations:
    """The conversations of every replica on every host, in the Redis of `shared` (a
    `_redis.RedisState`).

    A conversation is one string key, ``decisionrag:conv:<digest of the key>``, holding the
    JSON of the folder store, with the TTL as its expiry. An update is a WATCH / MULTI / EXEC
    transaction, retried when another replica wrote the key in between, so two turns sent at
    once to two servers are both kept and a reader never sees half a write. A sorted set
    (``decisionrag:conv:index``: digest -> last use) bounds how many are kept: when a new
    conversation passes `capacity`, a script removes the least recently used."""

    def __init__(self, shared: Any, capacity: int, ttl: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.shared = shared
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock  # wall time: the index's order, shared by the hosts
        self.index = f"{REDIS_PREFIX}conv:index"

    def digest(self, key: ConversationKey) -> str:
        return content_key(*key, length=40)

    def name(self, key: ConversationKey) -> str:
        return f"{REDIS_PREFIX}conv:{self.digest(key)}"

    def _decode(self, raw: bytes | None) -> ConversationState | None:
        if raw is None:
            return None
        try:
            state = ConversationState.from_json(json.loads(raw))
        except (ValueError, KeyError, TypeError):
            return None  # damaged: the conversation starts again rather than the request failing
        return state if self.clock() - state.touched < self.ttl else None

    async def aget(self, key: ConversationKey, timeout: float | None = None) -> ConversationState:
        raw = await self.shared.run(lambda client: client.get(self.name(key)), timeout)
        return self._decode(raw) or ConversationState()

    async def aupdate(self, key: ConversationKey, change: Change,
                      timeout: float | None = None) -> ConversationState:
        name, digest = self.name(key), self.digest(key)

        async def transaction(client: Any) -> tuple[ConversationState, bool]:
            from redis.exceptions import WatchError

            async with client.pipeline(transaction=True) as pipe:
                for _ in range(MAX_ATTEMPTS):
                    try:
                        await pipe.watch(name)
                        before = self._decode(await pipe.get(name))
                        state = before.copy() if before is not None else ConversationState()
                        change(state)
                        state.touched = self.clock()
                        pipe.multi()
                        pipe.set(name, json.dumps(state.to_json()), px=max(1, int(self.ttl * 1000)))
                        pipe.zadd(self.index, {digest: state.touched})
                        await pipe.execute()
                        return state, before is None
                    except WatchError:  # another replica wrote it in between: read it again
                        await pipe.reset()
                raise ConnectionError(f"{MAX_ATTEMPTS} replicas wrote one conversation at once")

        state, created = await self.shared.run(transaction, timeout)
        if created:
            await self._trim(timeout)
        return state

    async def _trim(self, timeout: float | None) -> None:
        cutoff = self.clock() - self.ttl
        with contextlib.suppress(ServeError):  # the turn is kept; the next new conversation trims
            await self.shared.run(lambda client: self.shared.script(_TRIM)(
                keys=[self.index], args=[self.capacity, cutoff, f"{REDIS_PREFIX}conv:"]), timeout)

    async def adelete(self, key: ConversationKey, timeout: float | None = None) -> bool:
        name, digest = self.name(key), self.digest(key)

        async def forget(client: Any) -> bool:
            async with client.pipeline(transaction=True) as pipe:
                pipe.get(name)
                pipe.delete(name)
                pipe.zrem(self.index, digest)
                raw, _, _ = await pipe.execute()
            return self._decode(raw) is not None

        return await self.shared.run(forget, timeout)

    async def alen(self, timeout: float | None = None) -> int:
        cutoff = self.clock() - self.ttl
        return int(await self.shared.run(lambda client: client.zcount(self.index, cutoff, "+inf"), timeout))

    async def aclose(self) -> None:
        await self.shared.aclose()
