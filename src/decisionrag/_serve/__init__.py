"""`decisionrag serve`: the HTTP retrieval service (FastAPI), and `decisionrag mcp`.

Needs the `serve` extra (FastAPI, uvicorn, prometheus-client; `mcp` for the MCP server).
"""

from ._settings import ServeLimits, ServeSettings

__all__ = ["ServeLimits", "ServeSettings"]
