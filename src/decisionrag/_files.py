"""Files on disk: the cache root, the one atomic writer, the one content-keyed cache.

* `cache_root()` — where every slow result is kept (embeddings, judgments, descriptions,
  dataset trees): ``$DECISIONRAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/decisionrag``, else
  ``~/.cache/decisionrag``.
* `atomic_write` / `atomic_path` — a file appears complete or not at all: it is written to a
  temporary file beside its target and renamed into place; a failure leaves no file behind.
  `temporary_beside` + `os.replace` is the same protocol for writers that keep the temporary
  file open over a longer life (the tree writer).
* `ContentCache` — a folder of entries named by a digest of what produced them
  (`content_key`), written atomically; a damaged or foreign entry reads as a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

PathLike = str | os.PathLike[str]


def cache_root() -> Path:
    """$DECISIONRAG_CACHE_DIR, else $XDG_CACHE_HOME/decisionrag, else ~/.cache/decisionrag."""
    explicit = os.environ.get("DECISIONRAG_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "decisionrag"


# ---------------------------------------------------------------- atomic writes


def temporary_beside(path: PathLike, suffix: str = ".tmp") -> Path:
    """A new empty temporary file in `path`'s folder (created), for a later ``os.replace``.

    Its name carries this process's id (``.NAME.PID.RANDOM.tmp``) and its mode follows the
    umask, as a file made with ``open`` would (mkstemp's 0600 would make every tree private).
    Temporary files of `path` left by writers that died (SIGKILL, power loss) are removed
    first: a process that no longer exists cannot come back for them."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target, suffix)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=suffix,
                               dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    finally:
        os.close(fd)
    return Path(tmp)


def current_umask() -> int:
    """The process umask (read from /proc where it can be, without changing it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_LEGACY_AGE = 24 * 3600.0  # seconds: a temporary file without a pid older than this is abandoned


def temporary_folder_beside(path: PathLike, suffix: str = ".tmp") -> Path:
    """A new empty temporary folder in `path`'s folder, for a later ``os.replace`` of a whole
    folder; named, moded and cleaned up after dead writers as `temporary_beside` does."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target, suffix)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=suffix,
                                dir=target.parent))
    os.chmod(tmp, 0o777 & ~current_umask())
    return tmp


def remove_stale_temporaries(path: PathLike, suffix: str = ".tmp") -> list[Path]:
    """Delete the temporary files (and folders) of `path` whose writer is dead; the paths
    removed.

    Also removes, when older than a day, the pid-less names of earlier versions
    (``NAME.RANDOM.tmp``, ``.NAME.RANDOM.tmp``)."""
    target = Path(path)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.endswith(suffix):
            continue
        for prefix in (f".{target.name}.", f"{target.name}."):
            if name.startswith(prefix) and _abandoned(name[len(prefix):-len(suffix)], entry):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
                    removed.append(Path(entry.path))
                break
    return removed


def _abandoned(middle: str, entry: os.DirEntry[str]) -> bool:
    pid, _, rest = middle.partition(".")
    if pid.isdigit() and rest and "." not in rest:
        return not _process_alive(int(pid))
    if "." in middle or len(middle) != 8:
        return False  # not a name a writer of ours made
    try:
        return time.time() - entry.stat(follow_symlinks=False).st_mtime > _LEGACY_AGE
    except OSError:
        return False


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # another user's process, or not ours to judge
    return True


@contextlib.contextmanager
def atomic_path(path: PathLike, *, mode: int | None = None, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path to write; renamed to `path` when the block succeeds, removed if not.
    The file gets `mode`, or (None) what the umask gives a new file."""
    target = Path(path)
    tmp = temporary_beside(target, suffix)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(
    path: PathLike, data: bytes | str | Callable[[IO[bytes]], Any], *, mode: int | None = None
) -> Path:
    """Write `data` (bytes, text as UTF-8, or a function writing to a binary stream) to `path`
    so that readers see the old file or the complete new one, never a part."""
    target = Path(path)
    with atomic_path(target, mode=mode) as tmp, open(tmp, "wb") as stream:
        if callable(data):
            data(stream)
        else:
            stream.write(data.encode("utf-8") if isinstance(data, str) else data)
    return target


def write_json_atomic(path: PathLike, value: Any, *, indent: int | None = None) -> Path:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return atomic_write(path, text + ("\n" if indent is not None else ""))


# ---------------------------------------------------------------- content-keyed cache


def content_key(*parts: str | Iterable[str], length: int = 32) -> str:
    """A hex digest of `parts` (strings, or iterables of strings hashed item by item).

    Items are separated by a byte no text contains, so ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        items = [part] if isinstance(part, str) else part
        digest.update(b"\x1d")
        for item in items:
            digest.update(b"\x1e" + item.encode("utf-8"))
    return digest.hexdigest()[:length]


class ContentCache:
    """Entries under ``ROOT/NAMESPACE`` named by content keys; ROOT defaults to `cache_root()`."""

    def __init__(self, namespace: str, root: PathLike | None = None) -> None:
        base = Path(root).expanduser() if root else cache_root()
        self.folder = base / namespace if namespace else base

    def path(self, key: str, suffix: str) -> Path:
        return self.folder / f"{key}{suffix}"

    def read_json(self, key: str) -> Any | None:
        try:
            return json.loads(self.path(key, ".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent or damaged: a miss

    def write_json(self, key: str, value: Any) -> Path:
        return write_json_atomic(self.path(key, ".json"), value)

    def read_array(self, key: str) -> np.ndarray | None:
        try:
            return np.load(self.path(key, ".npy"))
        except (OSError, ValueError):
            return None

    def write_array(self, key: str, array: np.ndarray) -> Path:
        return atomic_write(self.path(key, ".npy"), lambda stream: np.save(stream, array))
