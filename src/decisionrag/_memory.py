"""Handing memory the process has freed back to the operating system.

A walk over an NQ-sized level builds and drops tens of megabytes of short-lived objects
(16,000 candidates' requests, arrays, lists). glibc keeps the freed chunks in its heaps for
reuse, so the resident set of a long-running querying process creeps up by what its biggest
walks ever held at once, though nothing holds it: 28 MB of 347 at NQ size after 30 walks
(docs/benchmarks.md, issue 30). `release_freed` asks glibc to return them (`malloc_trim`,
about 2 ms there); elsewhere (musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed() -> bool:
    """Return the heap's free memory to the system; whether this C library can."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
