"""The walk page: one self-contained HTML file of a walk (and of an answer), and its data.

It reads a `Result` (and an `Answer`) and writes HTML; navigation knows nothing of it.
`walk_page` is the public entry; `walk_data` / `walk_stages` are the page's data as JSON
(what `/v1/retrieve` sends with ``walk: true``); `SCRIPT` / `STYLE` / `LEGEND` are shared with
the server's console, which draws walks with the same script.
"""

from __future__ import annotations

from typing import Any

from .._navigate import Result
from ._assets import SCRIPT, STYLE
from ._page import LEGEND, render_html, walk_data, walk_stages

__all__ = ["LEGEND", "SCRIPT", "STYLE", "walk_data", "walk_page", "walk_stages"]


def walk_page(shown: Result | Any, *, title: str | None = None) -> str:
    """One self-contained HTML page (no network needed to view it) of a walk — each stage
    with its candidates kept, pruned and reopened, and the ranking — for a `Result`; for an
    `Answer`, its walk with the answer and clickable citations above it."""
    if isinstance(shown, Result):
        return render_html(shown, None, title=title)
    return render_html(shown.result, shown, title=title)
