"""`decisionrag mcp`: driven by the official `mcp` SDK's own client over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from _serve_helpers import write_tree
from conftest import require_module

mcp_client = require_module("mcp.client")
from mcp.client.stdio import StdioServerParameters


def _params(tree: Path) -> StdioServerParameters:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {"PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
    return StdioServerParameters(command=sys.executable, args=["-m", "decisionrag", "mcp", f"docs={tree}",
                                                              "--judge", "scripted"], env=env)


def _structured(result: object) -> dict[str, object]:
    found = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if found:
        return dict(found)
    text = result.content[0].text  # type: ignore[attr-defined]
    return dict(json.loads(text))


async def test_list_tools_and_call_retrieve_and_read_node(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "docs.tree")
    async with mcp_client.Client(_params(tree)) as client:
        tools = await client.list_tools()
        by_name = {tool.name: tool for tool in tools.tools}
        assert {"retrieve", "read_node", "list_trees"} <= set(by_name)
        schema = by_name["retrieve"].input_schema if hasattr(by_name["retrieve"], "input_schema") \
            else by_name["retrieve"].inputSchema
        assert "query" in schema["required"]

        found = await client.call_tool("retrieve", {"query": "How do I renew my passport?", "k": 2})
        assert not getattr(found, "is_error", getattr(found, "isError", False))
        hits = _structured(found)["results"]
        assert [hit["id"] for hit in hits] == ["https://example.org/passports#p0",  # type: ignore[index]
                                              "https://example.org/passports#p1"]
        assert hits[0]["path"] == ["Travel", "Passports", "Renew"]  # type: ignore[index]

        node = _structured(await client.call_tool("read_node", {"id": "https://example.org/passports"}))
        assert node["node"]["title"] == "Passports"  # type: ignore[index]
        assert [c["title"] for c in node["children"]] == ["Renew", "Lost"]  # type: ignore[union-attr]

        missing = await client.call_tool("read_node", {"id": "nope"})
        assert getattr(missing, "is_error", getattr(missing, "isError", False))
        assert "no node 'nope'" in missing.content[0].text  # type: ignore[union-attr]
