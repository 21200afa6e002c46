"""Tree paths are taken literally (issue 23): a name with ``#``, ``?``, ``%``, ``&``, ``=`` or
spaces opens that file, through build, ask, add, sync, stats and serve, and nothing else is
created beside it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from decisionrag._cli import main
from decisionrag._tree import Tree

NAMES = ["a b#c.tree", "q?mode=rw.tree", "pct%41%2F.tree", "x&y=1 #?%.tree"]
PASSPORTS = "# Passports\n\n## Renew\n\nRenew your passport online with a photo.\n"
VISAS = "# Visas\n\n## Apply\n\nApply for a visa at the embassy.\n"
DECOY = "# Decoy\n\n## Gardening\n\nPrune roses in winter.\n"


def _docs(folder: Path) -> Path:
    folder.mkdir()
    (folder / "passports.md").write_text(PASSPORTS)
    return folder


@pytest.mark.parametrize("name", NAMES)
def test_a_tree_path_round_trips_through_the_cli(name: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    docs = _docs(tmp_path / "docs #1?")
    decoys = tmp_path / "decoys"
    decoys.mkdir()
    (decoys / "decoy.md").write_text(DECOY)
    # what a URI cut at '#' or '?' would open instead: a real tree, so a wrong open answers
    for cut in {name.split("#")[0], name.split("?")[0], name.split("%")[0]} - {name}:
        assert main(["build", str(decoys), "-o", str(tmp_path / cut), "--quiet", "--no-vectors"]) == 0
    before = {p.name for p in tmp_path.iterdir()}
    tree = tmp_path / name
    assert main(["build", str(docs), "-o", str(tree), "--quiet", "--no-vectors"]) == 0
    assert main(["stats", str(tree), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["counts"]["document"] == 1
    assert main(["ask", str(tree), "renew passport", "--judge", "scripted", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["results"]
    assert hits and all("Passports" in " ".join(hit["path"]) for hit in hits)
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "visas.md").write_text(VISAS)
    assert main(["add", str(tree), str(tmp_path / "more"), "--quiet"]) == 0
    with Tree.open(tree) as opened:
        assert opened.counts["document"] == 2
    (docs / "passports.md").write_text(PASSPORTS + "\nThe fee is 80 euros.\n")
    assert main(["sync", str(tree), str(docs), str(tmp_path / "more"), "--quiet"]) == 0
    with Tree.open(tree) as opened:
        assert opened.counts["document"] == 2
        assert "80 euros" in " ".join(p.text for p in opened.iter_passages())
    for cut in {name.split("#")[0], name.split("?")[0], name.split("%")[0]} - {name}:
        with Tree.open(tmp_path / cut) as decoy:  # untouched, still the decoy
            assert decoy.counts["document"] == 1
            assert "roses" in " ".join(p.text for p in decoy.iter_passages())
    after = {p.name for p in tmp_path.iterdir()}
    assert after - before - {name + ".bm25"} == {name, "more"}  # no stray files beside it


def test_a_tree_path_round_trips_through_the_server(tmp_path: Path) -> None:
    from _serve_helpers import live_server, settings

    name = "served #1?x=%41.tree"
    tree = tmp_path / name
    assert main(["build", str(_docs(tmp_path / "docs")), "-o", str(tree), "--quiet",
                 "--no-vectors"]) == 0
    (tmp_path / "served ").write_bytes(b"")  # what a cut URI would open: empty, not a tree
    with live_server(settings({"docs": tree})) as url:
        stats = httpx.get(f"{url}/v1/trees/docs", timeout=10).json()
        assert stats["counts"]["document"] == 1
        found = httpx.post(f"{url}/v1/retrieve", json={"query": "renew passport", "k": 2},
                           timeout=10).json()
        assert "Passports" in found["results"][0]["path"]
    assert {p.name for p in tmp_path.iterdir()} - {name + ".bm25"} == {"docs", name, "served "}
