"""`decisionrag mcp TREE...`: a Model Context Protocol tool server on stdio (official SDK).

Tools: `retrieve` (rank passages for a question), `read_node` (a node with its path and
children, to browse a corpus), `list_trees`. The same service as the HTTP app (leases on
swappable trees, the judge gate, deadlines), without keys: stdio is the caller's own process.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .._judges import Judge
from ._auth import ANONYMOUS
from ._errors import ServeError
from ._schemas import RetrieveRequest
from ._service import Service, build_service
from ._settings import ServeSettings

INSTRUCTIONS = (
    "Search and browse document trees with decisionrag. `retrieve` returns the passages that "
    "best answer a question (with their document id and section path); `read_node` opens any "
    "node (a document, section or passage id from a result, or 'root') to read it and list its "
    "children; `list_trees` names the corpora served."
)


def create_mcp_server(settings: ServeSettings, judge: Judge | None = None) -> MCPServer:
    from .. import __version__

    service = build_service(settings, judge)
    server: MCPServer = MCPServer("decisionrag", instructions=INSTRUCTIONS, version=__version__)

    async def retrieve(query: str, tree: str | None = None, k: int = 5,
                       filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Rank the passages of a tree that answer `query`; returns the top `k` with id,
        doc_id, score, section path and text."""
        try:
            body = RetrieveRequest.model_validate({"query": query, "tree": tree, "k": k, "filters": filters})
            found = await service.retrieve(ANONYMOUS, body, "mcp")
        except ServeError as exc:
            raise ToolError(exc.message) from exc
        return {"tree": found.tree, "results": [hit.model_dump() for hit in found.results]}

    async def read_node(id: str = "root", tree: str | None = None, offset: int = 0,
                        limit: int = 50) -> dict[str, Any]:
        """Read a node of a tree (a passage, section, document or group id, or 'root'): its
        text, the path above it and its children (a page of `limit` from `offset`)."""
        try:
            found = service.node(ANONYMOUS, tree or service.registry.default, id, offset, limit)
        except ServeError as exc:
            raise ToolError(exc.message) from exc
        return found.model_dump()

    async def list_trees() -> dict[str, Any]:
        """The trees this server serves, with their document and passage counts."""
        return service.trees(ANONYMOUS).model_dump()

    server.add_tool(retrieve)
    server.add_tool(read_node)
    server.add_tool(list_trees)
    server.service = service  # type: ignore[attr-defined]
    return server


def run_mcp(settings: ServeSettings) -> None:
    import anyio

    server = create_mcp_server(settings)
    anyio.run(server.run_stdio_async)


__all__ = ["Service", "create_mcp_server", "run_mcp"]
