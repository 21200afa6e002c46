"""What the terminal receives: never a raw control character from a document.

Documents can hold escape sequences (``ESC [ 2 J`` clears the screen, OSC 8 forges links),
bells, backspaces and bidi overrides that reorder what is shown. `SafeStream` writes every
such character as a visible ``\\uXXXX`` escape (valid inside JSON strings too, where the
only place they can appear in ``--json`` output is); newlines and tabs pass.
"""

from __future__ import annotations

import io
from typing import Any, TextIO

_UNSAFE = [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0D, 0x20), *range(0x7F, 0xA0),
           0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {code: f"\\u{code:04x}" for code in _UNSAFE}


def printable(text: str) -> str:
    """`text` with every control and bidi-control character made a visible escape."""
    return text if text.isprintable() else text.translate(_ESCAPES)


class SafeStream(io.TextIOBase):
    """A text stream that passes `printable` text to the stream it wraps."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
