"""`serve --workers N`: worker processes that do not outlive their master, and the master's
temporary folders (shared state, metrics) that do not outlive either.

A master killed with SIGKILL cannot stop its workers or remove its folders. Each worker asks
the kernel for SIGTERM when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``) and also
watches its parent's pid (everywhere else, and should the signal be missed); on that SIGTERM
it drains like any worker and, being an orphan, removes the master's temporary folders
(named in `TEMPORARY_ENV`). A master starting later removes the folders of masters that no
longer run (their pid is in the folder's name), should every worker have died as well.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from .._files import process_alive

TEMPORARY_ENV = "DECISIONRAG_SERVE_TEMPORARY"  # the master's temporary folders, os.pathsep-joined
MASTER_ENV = "DECISIONRAG_SERVE_MASTER"  # the master's pid
_FOLDER = re.compile(r"^decisionrag-(?:state|metrics)-(\d+)-")
_PR_SET_PDEATHSIG = 1
WATCH_SECONDS = 1.0


@contextlib.contextmanager
def temporary_folder(kind: str) -> Iterator[str]:
    """A temporary folder of this master (`kind`: state, metrics), its pid in the name;
    removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix=f"decisionrag-{kind}-{os.getpid()}-") as folder:
        yield folder


def remove_orphaned_folders(root: str | None = None) -> list[Path]:
    """Remove the temporary folders of masters that no longer run; the paths removed."""
    removed: list[Path] = []
    base = Path(root or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _FOLDER.match(entry.name)
        if match and entry.is_dir() and not process_alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def follow_master() -> None:
    """In a worker: end (SIGTERM, a graceful drain) when the master process is gone."""
    master = int(os.environ.get(MASTER_ENV) or os.getppid())
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != master:  # it died before the request above took effect
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def watch() -> None:
        while os.getppid() == master:
            threading.Event().wait(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="decisionrag-master-watch").start()


def orphaned() -> bool:
    """Whether this worker's master is gone."""
    master = os.environ.get(MASTER_ENV)
    return bool(master) and os.getppid() != int(master or 0)


def remove_master_folders() -> None:
    """In an orphaned worker, at shutdown: the master's temporary folders (the other workers
    may be removing them too; whatever is left is removed at the next start)."""
    if not orphaned():
        return
    for folder in filter(None, os.environ.get(TEMPORARY_ENV, "").split(os.pathsep)):
        if _FOLDER.match(Path(folder).name):
            shutil.rmtree(folder, ignore_errors=True)
