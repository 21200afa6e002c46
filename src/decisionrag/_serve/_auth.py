"""Bearer API keys, stored hashed in a key file, each allowed on some trees.

The key file is JSON::

    {"keys": [{"name": "search-app", "sha256": "<hex of the key's SHA-256>", "trees": ["docs"]},
              {"name": "admin", "sha256": "...", "trees": ["*"]}]}

Keys are 256-bit random tokens (`decisionrag keys add` makes one and prints it once), so a
plain SHA-256 is the right hash: nothing to brute-force, and checking is a dictionary lookup
plus a constant-time compare. The file is re-read when it changes (revoking needs no restart).
"""

from __future__ import annotations

import hashlib
import hmac
import json
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


def hash_key(key: str) -> str:
    return hashlib.sha256(key.strip().encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a key's name and the trees it may read (`*`: all)."""

    name: str
    trees: frozenset[str]

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
        found[digest.lower()] = Principal(name, frozenset(trees))
    return found


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


class KeyRing:
    """The keys a server accepts; `None` path: no keys (anyone on loopback may ask)."""

    def __init__(self, path: str | os.PathLike[str] | None, reload_seconds: float = 1.0) -> None:
        self.path = Path(path) if path else None
        self.reload_seconds = reload_seconds
        self._keys: dict[str, Principal] = {}
        self._stamp: tuple[int, int] | None = None
        self._checked = 0.0
        if self.path is not None:
            self._load()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def _load(self) -> None:
        assert self.path is not None
        stat = self.path.stat() if self.path.exists() else None
        self._keys = read_key_file(self.path)
        self._stamp = (stat.st_ino, stat.st_mtime_ns) if stat else None

    def _refresh(self) -> None:
        now = time.monotonic()
        if self.path is None or now - self._checked < self.reload_seconds:
            return
        self._checked = now
        try:
            stat = self.path.stat()
        except OSError:
            return
        if (stat.st_ino, stat.st_mtime_ns) != self._stamp:
            try:
                self._load()
            except InputError:
                import logging

                logging.getLogger("decisionrag.serve").exception("API key file changed but is unusable; "
                                                                 "keeping the previous keys")
                self._stamp = (stat.st_ino, stat.st_mtime_ns)

    def authenticate(self, authorization: str | None) -> Principal:
        if self.path is None:
            return ANONYMOUS
        self._refresh()
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


def add_key(path: Path, name: str, trees: list[str]) -> str:
    """Create a key named `name` for `trees`, store its hash in `path` (created if absent,
    written atomically, mode 0600) and return the key itself (shown once, never stored)."""
    data: dict[str, Any] = {"keys": []}
    if path.exists():
        read_key_file(path)  # refuse to rewrite a file we cannot read
        data = json.loads(path.read_text(encoding="utf-8"))
    if any(entry.get("name") == name for entry in data["keys"]):
        raise InputError(f"{path}: a key named {name!r} exists already (remove it first)")
    key = new_key()
    data["keys"].append({"name": name, "sha256": hash_key(key), "trees": trees or ["*"]})
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
