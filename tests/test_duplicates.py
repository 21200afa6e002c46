"""Identical passages are one hit, with the other places listed on it (`Hit.also_at`), and
every door shows the same: Python, the CLI, the server, its Client, MCP's tool and LangChain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _serve_helpers import live_server, settings, write_tree
from conftest import require_module
from decisionrag import Client
from decisionrag._app import close_navigator, open_navigator
from decisionrag._cli import main
from decisionrag._navigate import Navigator, get_preset

SHARED = "Renew your passport online with a photo and the old passport."
CORPUS = {
    "Travel": {
        "passports": ("Passports", [(("Renew",), SHARED),
                                    (("Lost",), "Report a lost or stolen passport at once.")]),
        "visas": ("Visas", [(("Apply",), "Apply for a visa at the embassy.")]),
    },
    "Reference": {  # the same page copied into a second manual, as try.txt and compound.txt
        "manual": ("Manual", [(("Passports", "Renew"), "Renew  your passport online with a photo "
                                                       "and the old passport."),
                              (("Taxes",), "The income tax return is due in January.")]),
    },
}
QUERY = "How do I renew my passport online with a photo?"
ELSEWHERE = [{"id": "manual#p0", "doc_id": "manual", "path": ["Reference", "Manual", "Passports", "Renew"]}]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("dups") / "docs.tree", CORPUS)


def _top(results: list[dict[str, Any]]) -> dict[str, Any]:
    assert [r["id"] for r in results].count("passports#p0") + \
        [r["id"] for r in results].count("manual#p0") == 1, results
    return results[0]


def test_python_collapses_identical_passages_and_can_keep_them(tree: Path) -> None:
    navigator = open_navigator(tree, "scripted", "flat")
    try:
        result = navigator.retrieve(QUERY, k=5)
    finally:
        close_navigator(navigator)
    top = _top([hit.to_dict() for hit in result.hits])
    assert top["id"] == "passports#p0" and top["also_at"] == ELSEWHERE
    assert result.hits[0].also_at[0].key == "manual#p0"
    assert all(hit.also_at == () for hit in result.hits[1:])
    navigator = open_navigator(tree, "scripted", "flat",
                               overrides={"collapse_duplicates": False})
    try:
        kept = [hit.key for hit in navigator.retrieve(QUERY, k=5).hits]
    finally:
        close_navigator(navigator)
    assert {"passports#p0", "manual#p0"} <= set(kept)


def test_the_cli_lists_the_other_places(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", str(tree), QUERY, "--judge", "scripted", "--preset", "flat", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert _top(results)["also_at"] == ELSEWHERE
    assert main(["ask", str(tree), QUERY, "--judge", "scripted", "--preset", "flat"]) == 0
    assert "also at: Reference › Manual › Passports › Renew  [manual#p0]" in capsys.readouterr().out


def test_the_server_its_client_and_mcp_show_the_same(tree: Path) -> None:
    import httpx

    with live_server(settings({"docs": tree}, preset="flat")) as url:
        body = httpx.post(f"{url}/v1/retrieve", json={"query": QUERY, "k": 5}, timeout=60).json()
        assert _top(body["results"])["also_at"] == ELSEWHERE
        with Client(url) as client:
            hit = client.retrieve(QUERY, k=5).hits[0]
        assert list(hit.also_at) == ELSEWHERE and hit.to_dict()["also_at"] == ELSEWHERE
    require_module("mcp")
    import asyncio

    from decisionrag._serve._mcp import create_mcp_server

    server = create_mcp_server(settings({"docs": tree}, preset="flat"))
    found = asyncio.run(server.call_tool("retrieve", {"query": QUERY, "k": 5}))
    data = getattr(found, "structured_content", None) or getattr(found, "structuredContent", None) \
        or json.loads(found.content[0].text)
    assert _top(data["results"])["also_at"] == ELSEWHERE


def test_langchain_and_llamaindex_carry_the_other_places(tree: Path) -> None:
    require_module("langchain_core")
    from decisionrag.integrations.langchain import DecisionRAGRetriever

    docs = DecisionRAGRetriever(tree=str(tree), judge="scripted", preset="flat", k=5).invoke(QUERY)
    assert docs[0].metadata["id"] == "passports#p0" and docs[0].metadata["also_at"] == ELSEWHERE
    require_module("llama_index.core")
    from llama_index.core.schema import MetadataMode

    from decisionrag.integrations.llamaindex import DecisionRAGRetriever as LlamaRetriever

    nodes = LlamaRetriever(str(tree), judge="scripted", preset="flat", k=5).retrieve(QUERY)
    assert nodes[0].node.metadata["also_at"] == ELSEWHERE
    assert "also_at" not in nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)


def test_collapsing_is_the_default_of_every_preset(tree: Path) -> None:
    from decisionrag import Tree
    from decisionrag._judges import ScriptedJudge

    with Tree.open(tree) as opened:
        for name in ("md2d", "cqa", "mtrag", "nq", "flat", "auto"):
            assert get_preset(name, opened, ScriptedJudge()).collapse_duplicates
        result = Navigator(opened, ScriptedJudge(), preset="flat").retrieve(QUERY, k=2)
    assert len({" ".join(hit.node.text.split()) for hit in result.hits}) == 2


def test_duplicates_found_by_hash_are_confirmed_by_their_texts() -> None:
    """Passages are grouped by the hash of their whitespace-collapsed text and compared by
    the texts where hashes meet: the same text in other whitespace is a copy, another text
    under the same hash (a collision, forced here) is not."""
    from decisionrag._navigate._ranking import Scored
    from decisionrag._navigate._walk import collapse_duplicates
    from decisionrag._tree import Node, NodeKind

    def scored(key: str, text: str) -> Scored:
        node = Node(len(key), key, 0, NodeKind.PASSAGE, 0, 0, len(key), 1, "", "", (), text)
        return Scored(node, 0.5, 0.5)

    ranked = [scored("a", "Renew your passport."), scored("b", "Lost passports"),
              scored("c", " Renew\tyour\n passport. "), scored("d", "Visas")]
    kept, copies = collapse_duplicates(ranked)
    assert [s.node.key for s in kept] == ["a", "b", "d"] and list(copies) == ["a"]
    assert [n.key for n in copies["a"]] == ["c"]
    kept, copies = collapse_duplicates(ranked, [7, 7, 7, 7])  # every hash the same
    assert [s.node.key for s in kept] == ["a", "b", "d"] and [n.key for n in copies["a"]] == ["c"]
    # an exact copy is found by its text as it is, a copy in other whitespace by the text
    # collapsed, each matched to its own earlier text among those sharing the hash
    ranked += [scored("e", "Lost passports"), scored("f", "Renew  your passport.")]
    kept, copies = collapse_duplicates(ranked, [7] * 6)
    assert [s.node.key for s in kept] == ["a", "b", "d"]
    assert {k: [n.key for n in v] for k, v in copies.items()} == {"a": ["c", "f"], "b": ["e"]}


@pytest.mark.parametrize("seed", range(5))
def test_plain_hashes_meet_wherever_the_collapsed_texts_are_equal(seed: int) -> None:
    """`plain_hash` (whitespace removed, ASCII texts in one C pass) is equal for any two
    texts equal whitespace aside (`plain_text`), ASCII or not, over every kind of whitespace
    `str.split` splits on; texts with other words differ."""
    import random

    from decisionrag._navigate._view import plain_hash, plain_text
    from decisionrag._tree import Node, NodeKind

    def node(text: str) -> Node:
        return Node(1, "k", 0, NodeKind.PASSAGE, 0, 0, 1, 1, "", "", (), text)

    rng = random.Random(seed)
    spaces = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\u00a0", "\u2003", "\u3000"]
    words = ["passport", "Visa", "café", "naïve", "", "x", "ümlaut", "日本"]
    for _ in range(300):
        chosen = [rng.choice(words) for _ in range(rng.randint(0, 6))]
        texts = ["".join(rng.choice(spaces) * rng.randint(0, 2) + w + rng.choice(spaces) * rng.randint(1, 3)
                         for w in chosen) for _ in range(3)]
        texts.append(" ".join(w for w in chosen if w))  # the collapsed form, mostly ASCII
        hashes = {plain_hash(node(t)) for t in texts}
        assert len({plain_text(node(t)) for t in texts}) == 1 and len(hashes) == 1, texts
    assert plain_hash(node("Renew your passport.")) != plain_hash(node("Renew your visa."))
    assert plain_hash(node("café au lait")) != plain_hash(node("cafe au lait"))
