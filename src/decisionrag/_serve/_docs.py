"""The interactive API docs at ``/docs``, served with no network.

FastAPI's default page loads Swagger UI from a CDN, so on a machine without internet (where
many retrieval services run) it is blank. The assets come from the `swagger-ui-bundle`
package instead and are served by the app itself under ``/docs/static``.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = "/docs/static"


def mount_offline_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` from local files; call with a FastAPI built with docs_url=None."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount(STATIC, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} — API",
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon-32x32.png")
