"""Where decisionrag keeps its caches (embeddings, trees of datasets, group descriptions)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$DECISIONRAG_CACHE_DIR, else $XDG_CACHE_HOME/decisionrag, else ~/.cache/decisionrag."""
    explicit = os.environ.get("DECISIONRAG_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "decisionrag"
