"""`decisionrag mcp TREE...`: a Model Context Protocol tool server on stdio (official SDK).

Tools: `retrieve` (rank passages for a question), `read_node` (a node with its path and
children, to browse a corpus), `list_trees`. The same service as the HTTP app (leases on
swappable trees, the judge gate, deadlines), without keys: stdio is the caller's own process.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from .._errors import DecisionRAGError
from .._judges import Judge
from ._auth import ANONYMOUS
from ._errors import ServeError, problem_message
from ._schemas import RetrieveRequest
from ._service import Service, build_service
from ._settings import ServeSettings

INSTRUCTIONS = (
    "Search and browse document trees with decisionrag. `retrieve` returns the passages that "
    "best answer a question (with their document id and section path); `read_node` opens any "
    "node (a document, section or passage id from a result, or 'root') to read it and list its "
    "children; `list_trees` names the corpora served."
)


log = logging.getLogger("decisionrag.mcp")
T = TypeVar("T")


def tool_errors(tool: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A tool whose failures reach the client as a tool error that says why (the field at
    fault, the limit, the library's message) — never a bare "Error executing tool"."""

    @functools.wraps(tool)
    async def run(*args: Any, **kwargs: Any) -> T:
        try:
            return await tool(*args, **kwargs)
        except ToolError:
            raise
        except ServeError as exc:
            raise ToolError(exc.message) from exc
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {problem_message(dict(e))}"
                for e in exc.errors()[:5])
            raise ToolError(f"invalid input: {problems}") from exc
        except DecisionRAGError as exc:
            raise ToolError(str(exc)) from exc
        except RecursionError as exc:
            raise ToolError("invalid input: nested too deeply") from exc
        except Exception as exc:
            log.exception("tool %s failed", tool.__name__)
            raise ToolError(f"internal error ({type(exc).__name__}: {exc})") from exc

    return run


def create_mcp_server(settings: ServeSettings, judge: Judge | None = None) -> MCPServer:
    from .. import __version__

    service = build_service(settings, judge)
    server: MCPServer = MCPServer("decisionrag", instructions=INSTRUCTIONS, version=__version__)

    async def retrieve(query: str, tree: str | None = None, k: int = 5,
                       filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Rank the passages of a tree that answer `query`; returns the top `k` with id,
        doc_id, score, section path and text."""
        body = RetrieveRequest.model_validate({"query": query, "tree": tree, "k": k, "filters": filters})
        found = await service.retrieve(ANONYMOUS, body, "mcp")
        return {"tree": found.tree, "results": [hit.model_dump() for hit in found.results]}

    async def read_node(id: str = "root", tree: str | None = None, offset: int = 0,
                        limit: int = 50) -> dict[str, Any]:
        """Read a node of a tree (a passage, section, document or group id, or 'root'): its
        text, the path above it and its children (a page of `limit` from `offset`)."""
        found = service.node(ANONYMOUS, tree or service.registry.default, id, offset, limit)
        return found.model_dump()

    async def list_trees() -> dict[str, Any]:
        """The trees this server serves, with their document and passage counts."""
        return service.trees(ANONYMOUS).model_dump()

    for tool in (retrieve, read_node, list_trees):
        server.add_tool(tool_errors(tool))
    server.service = service  # type: ignore[attr-defined]
    return server


def run_mcp(settings: ServeSettings) -> None:
    import anyio

    server = create_mcp_server(settings)
    anyio.run(server.run_stdio_async)


__all__ = ["Service", "create_mcp_server", "run_mcp"]
