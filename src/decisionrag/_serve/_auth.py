"""Bearer API keys, stored hashed in a key file, each allowed on some trees.

The key file is JSON::

    {"keys": [{"name": "search-app", "sha256": "<hex of the key's SHA-256>", "trees": ["docs"],
               "requests_per_minute": 120, "judge_tokens_per_minute": 200000},
              {"name": "admin", "sha256": "...", "trees": ["*"]}]}

Keys are 256-bit random tokens (`decisionrag keys add` makes one and prints it once), so a
plain SHA-256 is the right hash: nothing to brute-force, and checking is a dictionary lookup
plus a constant-time compare. The optional rates override the server's defaults for that key
(`null`: no limit for it). The file is re-read when it changes (revoking needs no restart).

A key is known by its hash, never by its name: its conversations and its rate buckets are
kept under `Principal.identity`, so two entries that share a name, or a name removed and
added again with a new key, never see each other's conversations. The file failing closes
the door: while it is missing, unreadable or invalid every keyed request is refused (503
``keys_unavailable``; /readyz says not ready) until a good file is back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._files import atomic_write
from ._errors import ServeError

KEY_PREFIX = "drag_"
RATES = ("requests_per_minute", "judge_tokens_per_minute")  # per-key limits a key file may set
log = logging.getLogger("decisionrag.serve")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.strip().encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a key's name (for people and logs), the trees it may read (`*`: all),
    its `identity` (the key's SHA-256: what its conversations and rate buckets are kept
    under) and the rates its key file entry sets (name -> per minute, None: no limit)."""

    name: str
    trees: frozenset[str]
    identity: str = "anonymous"
    rates: tuple[tuple[str, int | None], ...] = ()

    def rate(self, name: str, default: int | None) -> int | None:
        """This key's `name` rate: its own if its entry sets one, else `default`."""
        return dict(self.rates).get(name, default)

    def may_read(self, tree: str) -> bool:
        return "*" in self.trees or tree in self.trees

    def check(self, tree: str) -> None:
        if not self.may_read(tree):
            raise ServeError(403, "forbidden", f"the key {self.name!r} is not allowed on tree {tree!r}",
                             field="tree")


ANONYMOUS = Principal("anonymous", frozenset({"*"}))


def read_key_file(path: Path) -> dict[str, Principal]:
    """sha256 hex -> Principal; a clear error naming the file and entry otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the API key file ({exc.strerror})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: the API key file is not valid JSON ({exc})") from exc
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected an object with a list 'keys'")
    found: dict[str, Principal] = {}
    where_found: dict[str, str] = {}
    for number, entry in enumerate(entries, 1):
        where = f"{path}: keys[{number - 1}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object with 'name', 'sha256' and 'trees'")
        digest, name, trees = entry.get("sha256"), entry.get("name"), entry.get("trees", ["*"])
        if not isinstance(digest, str) or len(digest) != 64 or not _is_hex(digest):
            raise InputError(f"{where}: 'sha256' must be 64 hex digits (decisionrag keys hash)")
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: 'name' must be a non-empty string")
        if not isinstance(trees, list) or not all(isinstance(t, str) for t in trees):
            raise InputError(f"{where}: 'trees' must be a list of tree names (or [\"*\"])")
        digest = digest.lower()
        if digest in where_found:  # one key, two entries: which trees and rates? refuse to guess
            raise InputError(f"{where}: the same key as {where_found[digest]} (one entry per key)")
        where_found[digest] = f"keys[{number - 1}]"
        found[digest] = Principal(name, frozenset(trees), digest, _rates(entry, where))
    return found


def _rates(entry: dict[str, Any], where: str) -> tuple[tuple[str, int | None], ...]:
    rates: list[tuple[str, int | None]] = []
    for name in RATES:
        if name not in entry:
            continue
        value = entry[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{where}: {name!r} must be a whole number of at least 1 per minute, "
                             "or null (no limit for this key)")
        rates.append((name, value))
    return tuple(rates)


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


class KeyRing:
    """The keys a server accepts; `None` path: no keys (anyone on loopback may ask).

    Fail-closed: when the file goes missing, unreadable or invalid, `problem` says why and
    every key is refused until a good file is back (checked every `reload_seconds`)."""

    def __init__(self, path: str | os.PathLike[str] | None, reload_seconds: float = 1.0) -> None:
        self.path = Path(path) if path else None
        self.reload_seconds = reload_seconds
        self.problem: str | None = None
        self._keys: dict[str, Principal] = {}
        self._stamp: tuple[int, ...] | None = None
        self._checked = 0.0
        if self.path is not None:
            self._keys = read_key_file(self.path)  # at start a bad file stops the server
            self._stamp = self._stat()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def _stat(self) -> tuple[int, ...]:
        assert self.path is not None
        stat = self.path.stat()  # ctime too: a chmod that makes the file readable again counts
        return (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)

    def refresh(self) -> None:
        """Re-read the file if it changed (or is still broken); at most every `reload_seconds`."""
        now = time.monotonic()
        if self.path is None or now - self._checked < self.reload_seconds:
            return
        self._checked = now
        try:
            stamp = self._stat()
        except OSError as exc:
            self._fail(f"cannot read the API key file ({exc.strerror})")
            return
        if stamp == self._stamp and self.problem is None:
            return
        try:
            keys = read_key_file(self.path)
        except InputError as exc:
            self._fail(str(exc))
            return
        if self.problem is not None:
            log.warning("API key file %s is usable again: keys accepted", self.path)
        self._keys, self._stamp, self.problem = keys, stamp, None

    def _fail(self, reason: str) -> None:
        if reason != self.problem:  # once per new reason, not once per request
            log.error("API key file unusable, every key refused until it is fixed: %s", reason)
        self._keys, self._stamp, self.problem = {}, None, reason

    def authenticate(self, authorization: str | None) -> Principal:
        if self.path is None:
            return ANONYMOUS
        self.refresh()
        if self.problem is not None:
            raise ServeError(503, "keys_unavailable", "the server's API key file is missing or "
                             "unusable, so every key is refused until it is fixed",
                             headers={"Retry-After": "5"})
        challenge = {"WWW-Authenticate": 'Bearer realm="decisionrag"'}
        if not authorization:
            raise ServeError(401, "unauthorized", "an API key is required: send 'Authorization: Bearer KEY'",
                             headers=challenge)
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ServeError(401, "unauthorized", "use 'Authorization: Bearer KEY'", headers=challenge)
        digest = hash_key(token)
        for known, principal in self._keys.items():
            if hmac.compare_digest(known, digest):
                return principal
        raise ServeError(401, "unauthorized", "this API key is not known to the server",
                         headers={"WWW-Authenticate": 'Bearer realm="decisionrag", error="invalid_token"'})


def add_key(path: Path, name: str, trees: list[str], rates: dict[str, int | None] | None = None) -> str:
    """Create a key named `name` for `trees` (and its own `rates`, see `RATES`), store its
    hash in `path` (created if absent, written atomically, mode 0600) and return the key
    itself (shown once, never stored)."""
    data: dict[str, Any] = {"keys": []}
    if path.exists():
        read_key_file(path)  # refuse to rewrite a file we cannot read
        data = json.loads(path.read_text(encoding="utf-8"))
    if any(entry.get("name") == name for entry in data["keys"]):
        raise InputError(f"{path}: a key named {name!r} exists already (remove it first)")
    key = new_key()
    entry = {"name": name, "sha256": hash_key(key), "trees": trees or ["*"], **(rates or {})}
    _rates(entry, f"{path}: the new key")
    data["keys"].append(entry)
    _write(path, data)
    return key


def remove_key(path: Path, name: str) -> None:
    read_key_file(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    kept = [entry for entry in data["keys"] if entry.get("name") != name]
    if len(kept) == len(data["keys"]):
        raise InputError(f"{path}: no key named {name!r}")
    data["keys"] = kept
    _write(path, data)


def _write(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n", mode=0o600)  # hashes only, still private
