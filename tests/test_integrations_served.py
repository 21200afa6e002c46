"""The framework retrievers over a live `decisionrag serve` (started here on 127.0.0.1): LangChain's
standard retriever suite unmodified, and the LlamaIndex retriever, through `decisionrag.Client`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module

require_module("langchain_tests")
require_module("llama_index.core")
require_module("fastapi")
require_module("uvicorn")

from langchain_tests.integration_tests import RetrieversIntegrationTests

from _processes import free_port, http_ok, stopped_at_exit, wait_until
from decisionrag import Tree
from decisionrag.integrations.langchain import DecisionRAGRetriever
from decisionrag.integrations.llamaindex import DecisionRAGRetriever as LlamaRetriever

QUERY = "What did the Normans do in England?"


@pytest.fixture(scope="module")
def server(xquad_tree: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "decisionrag", "serve", str(xquad_tree), "--judge", "embedded",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)})
    url = f"http://127.0.0.1:{port}"
    with stopped_at_exit(process):
        wait_until(process, http_ok(f"{url}/readyz"), what="decisionrag serve", timeout=90,
                   log=lambda: process.stderr.read() if process.stderr else "")
        yield url


class TestStandardRetrieverSuiteOverServe(RetrieversIntegrationTests):
    """LangChain's own retriever tests, unmodified, against a live server."""

    @pytest.fixture(autouse=True)
    def _over(self, server: str) -> None:
        self.params = {"url": server}

    @property
    def retriever_constructor(self) -> type[DecisionRAGRetriever]:
        return DecisionRAGRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return self.params

    @property
    def retriever_query_example(self) -> str:
        return QUERY


async def test_served_and_local_give_the_same_passages(server: str, xquad_tree: Path) -> None:
    remote = await DecisionRAGRetriever(url=server, k=3).ainvoke(QUERY)
    local = DecisionRAGRetriever(tree=str(xquad_tree), k=3).invoke(QUERY)
    assert [d.id for d in remote] == [d.id for d in local]
    assert [d.metadata["path"] for d in remote] == [d.metadata["path"] for d in local]
    local_scores = [d.metadata["score"] for d in local]
    assert [d.metadata["score"] for d in remote] == pytest.approx(local_scores, abs=1e-5)


async def test_llamaindex_retriever_over_the_server(server: str, xquad_tree: Path) -> None:
    nodes = await LlamaRetriever(url=server, k=2).aretrieve(QUERY)
    assert len(nodes) == 2
    with Tree.open(xquad_tree) as tree:
        for item in nodes:
            assert tree.node(item.node.node_id).text == item.node.get_content()
