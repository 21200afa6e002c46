"""The console at ``/ui``: one page over this server's own API, for people who do not write code.

It browses a tree (``/v1/trees``, the node endpoint a page of children at a time), searches it
(``/v1/retrieve`` with ``walk: true``, filters from ``/v1/trees/{name}/metadata``), draws the
walk with the walk page's own stylesheet and script (`decisionrag._walkpage`, served here as
files) and, when the server has an answer model, streams ``/v1/answer``. It holds no logic of
its own: every figure it shows comes from those endpoints, with the caller's key.

Nothing is inline and nothing comes from elsewhere: the page, its script and its styles are
files of this package (``ui/``) or of the walk view, served by this app under a
Content-Security-Policy that lets the page load and connect to this server only. So it works
with no network, and text from a tree (a passage, a title) can never run as script.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from .._navigate import PRESET_NAMES
from .._walkpage import LEGEND, SCRIPT, STYLE
from ._errors import ServeError
from ._settings import ServeSettings

CHILDREN_PAGE = 100  # children the tree browser asks for at a time
CSP = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "connect-src 'self'", "font-src 'self'", "object-src 'none'", "base-uri 'none'",
    "form-action 'none'", "frame-ancestors 'none'",
])
_HEADERS = {
    "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache",
}
_TYPES = {"css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
          "html": "text/html; charset=utf-8"}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str

    @classmethod
    def of(cls, text: str, kind: str) -> Asset:
        body = text.encode("utf-8")
        return cls(body, _TYPES[kind], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    def response(self, request: Request) -> Response:
        headers = {**_HEADERS, "ETag": self.etag}
        if request.headers.get("if-none-match") == self.etag:
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=self.media_type, headers=headers)


def _file(name: str) -> str:
    return resources.files(__package__).joinpath("ui", name).read_text(encoding="utf-8")


def console_assets() -> dict[str, Asset]:
    """The page and the files it loads, by path under ``/ui``."""
    page = _file("console.html").replace("<!--walk-legend-->", LEGEND)
    return {
        "": Asset.of(page, "html"),
        "assets/console.js": Asset.of(_file("console.js"), "js"),
        "assets/console.css": Asset.of(_file("console.css"), "css"),
        "assets/walk.js": Asset.of(SCRIPT, "js"),
        "assets/walk.css": Asset.of(STYLE, "css"),
    }


def console_config(settings: ServeSettings, *, keys: bool, answers: bool, filters: bool) -> dict[str, Any]:
    """What the page must know before its first call: no secrets, the same for every caller."""
    from .. import __version__

    limits = settings.limits
    return {
        "version": __version__, "keys": keys, "answers": answers, "filters": filters,
        "presets": list(PRESET_NAMES), "default_preset": settings.preset, "max_k": limits.max_k,
        "children_page": min(CHILDREN_PAGE, limits.max_children),
    }


def ui_router(settings: ServeSettings, *, keys: bool, answers: bool, filters: bool) -> APIRouter:
    """``GET /ui`` (the page), ``/ui/assets/…`` (its files), ``/ui/config.json``; ``/`` leads
    to the page. None of them is in the OpenAPI document: they are not the API."""
    router = APIRouter(include_in_schema=False)
    assets = console_assets()
    config = console_config(settings, keys=keys, answers=answers, filters=filters)

    @router.get("/")
    async def home() -> Response:
        return RedirectResponse("/ui", status_code=307)

    @router.get("/ui")
    async def page(request: Request) -> Response:
        return assets[""].response(request)

    @router.get("/ui/config.json")
    async def ui_config() -> Response:
        return JSONResponse(config, headers=_HEADERS)

    @router.get("/ui/assets/{name}")
    async def asset(name: str, request: Request) -> Response:
        found = assets.get(f"assets/{name}")
        if found is None:
            raise ServeError(404, "not_found", f"no console file {name!r}")
        return found.response(request)

    return router


__all__ = ["CSP", "console_assets", "console_config", "ui_router"]
