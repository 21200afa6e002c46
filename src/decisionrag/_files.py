"""Files on disk: the cache root, the one atomic writer, the one content-keyed cache.

* `cache_root()` — where every slow result is kept (embeddings, judgments, descriptions,
  dataset trees): ``$DECISIONRAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/decisionrag``, else
  ``~/.cache/decisionrag``.
* `atomic_write` / `atomic_path` — a file appears complete or not at all: it is written to a
  temporary file beside its target and renamed into place; a failure leaves no file behind.
  `temporary_beside` + `os.replace` is the same protocol for writers that keep the temporary
  file open over a longer life (the tree writer).
* `check_output` / `write_output` — the one rule for every file a command writes (a tree,
  an HTML page, a report, a run): never one of the command's inputs, a folder, a device or
  pipe, nor (without ``force``) a symbolic link or a file decisionrag did not write.
* `ContentCache` — a folder of entries named by a digest of what produced them
  (`content_key`), written atomically; a damaged or foreign entry reads as a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._errors import InputError

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
    with _removed_on_error(tmp, os.unlink):
        try:
            os.fchmod(fd, 0o666 & ~current_umask())
        finally:
            os.close(fd)
    return Path(tmp)


@contextlib.contextmanager
def _removed_on_error(made: str, remove: Callable[[str], None]) -> Iterator[None]:
    """`made` removed when the block ends in any exception: a SIGTERM, which the CLI turns
    into SystemExit, can land between making a temporary file and returning it."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            remove(made)
        raise


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
    made = tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=suffix,
                            dir=target.parent)
    with _removed_on_error(made, os.rmdir):
        os.chmod(made, 0o777 & ~current_umask())
    return Path(made)


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


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts as alive)."""
    return _process_alive(pid)


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


# ---------------------------------------------------------------- where an output may go


@dataclass(frozen=True, slots=True)
class OutputKind:
    """What a command writes: its `name` for messages (``a decisionrag tree``) and `ours`,
    whether a file already there is one decisionrag wrote of that kind (replaced without
    ``--force``)."""

    name: str
    ours: Callable[[Path], bool]


ANY_OUTPUT = OutputKind("a file decisionrag wrote", lambda path: False)


def check_output(out: PathLike, inputs: Iterable[PathLike] = (), *, force: bool = False,
                 kind: OutputKind = ANY_OUTPUT, within: Iterable[PathLike] = (),
                 flag: str = "", inputs_are: str = "this command's inputs") -> Path:
    """`out` as a Path, or `InputError` saying why the command must not write there.

    The one rule of every output (``build -o``, ``--html``, ``eval --json`` ...):

    * never a folder, a device, a pipe or a socket, nor one of the command's `inputs` (the
      tree it reads, its sources, a history file) or an existing file inside one of the
      `within` folders (the tree's vectors and indexes) — not even with `force`;
    * a symbolic link is refused, even with `force`: renaming over it would replace the link
      (as root, ``/dev/stdout`` itself), writing through it a file named elsewhere;
    * an existing regular file is replaced when it is one of ours (`kind.ours`), else only
      with `force`.

    Writing itself goes through `atomic_write` (`write_output` does both)."""
    path = Path(out).expanduser()
    where = f"{flag} {path}" if flag else str(path)
    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{where}: is a folder; name the file to write")
    for given in inputs:
        if _same_file(path, Path(given)):
            raise InputError(f"{where}: is one of {inputs_are}; refusing to overwrite it "
                             "(name another output file)")
    for folder in within:
        if path.exists() and _inside(path, Path(folder)):
            raise InputError(f"{where}: is inside {folder}, which this command reads; refusing "
                             "to overwrite it (name another output file)")
    try:
        info = path.lstat()
    except OSError:  # nothing there (or its folder cannot be made): the writer will say
        return path
    if stat.S_ISLNK(info.st_mode):
        return _symlink_output(path, where)
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{where}: is not a regular file (a device, pipe or socket); "
                         "refusing to replace it, even with --force")
    if force or kind.ours(path):
        return path
    raise InputError(f"{where}: exists and is not {kind.name}; refusing to overwrite it "
                     "(pass --force to replace it, or name another output file)")


def _symlink_output(path: Path, where: str) -> Path:
    raise InputError(f"{where}: is a symbolic link (to {os.readlink(path)}); refusing to replace "
                     "it or write through it, even with --force (name the file itself)")


def write_output(out: PathLike, data: bytes | str | Callable[[IO[bytes]], Any], *,
                 inputs: Iterable[PathLike] = (), force: bool = False,
                 kind: OutputKind = ANY_OUTPUT, within: Iterable[PathLike] = (),
                 flag: str = "") -> Path:
    """`check_output`, then `atomic_write`; a file system error is an `InputError` naming
    the path."""
    path = check_output(out, inputs, force=force, kind=kind, within=within, flag=flag)
    try:
        return atomic_write(path, data)
    except OSError as exc:
        where = f"{flag} {path}" if flag else str(path)
        raise InputError(f"{where}: cannot write it ({exc.strerror or exc})") from exc


def check_output_folder(folder: PathLike, *, flag: str = "") -> Path:
    """A folder an option writes files into (``--save-runs DIR``): an existing file or
    device there is refused with a clear message; a missing folder is made later."""
    path = Path(folder).expanduser()
    where = f"{flag} {path}" if flag else str(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{where}: is not a folder; name a folder to write into")
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def starts_with(path: Path, marker: bytes, *, within: int = 4096) -> bool:
    """Whether `marker` is in the first `within` bytes of the file (for `OutputKind.ours`)."""
    try:
        with path.open("rb") as handle:
            return marker in handle.read(within)
    except OSError:
        return False


HTML_GENERATOR = '<meta name="generator" content="decisionrag">'
HTML_PAGE = OutputKind("an HTML page decisionrag wrote",
                       lambda path: starts_with(path, HTML_GENERATOR.encode()))


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
