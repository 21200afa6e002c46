"""Kept for imports written before `decisionrag._files`; the cache root lives there."""

from ._files import cache_root

__all__ = ["cache_root"]
