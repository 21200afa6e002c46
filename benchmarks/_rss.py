"""Peak resident memory of this process, for the scale benchmarks (standard library only)."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak RSS. On Linux ru_maxrss carries over the RSS the parent had when it
    forked us (it survives exec), so the kernel's high-water mark of our own memory, VmHWM, is
    read instead; getrusage elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
