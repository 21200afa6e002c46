"""Documents updated and deleted in place: add replaces, remove, sync equals a fresh build."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from decisionrag import InputError, NodeKind, Tree
from decisionrag._app import sync_sources
from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._cluster._update import edit_documents
from test_cluster import NAMES, build, fake_encode, make_docs


def write(path: Path, text: str, mtime: int = 1_700_000_000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


def corpus(root: Path) -> Path:
    docs = root / "docs"
    write(docs / "alpha.md", "---\nproduct: billing\nyear: 2023\n---\n# Alpha\n\n## Pay\n\nPay monthly.\n")
    write(docs / "beta.md", "# Beta\n\nBeta text.\n\nMore beta.\n")
    write(docs / "guides" / "gamma.md", "# Gamma\n\n## Setup\n\nInstall it.\n")
    write(docs / "guides" / "old" / "delta.md", "# Delta\n\nLegacy notes.\n")
    write(docs / "faq.jsonl", json.dumps({"id": "q1", "doc_id": "faq", "doc_title": "FAQ",
                                          "text": "Ask us.", "metadata": {"lang": "en"}}) + "\n")
    return docs


def snapshot(path: Path) -> dict[str, Any]:
    """Everything a reader can see of a tree's documents, independent of node ids and order."""
    with Tree.open(path) as tree:
        documents = {}
        for doc in tree.documents():
            groups = tuple(n.title for n in tree.path(doc.id)[1:-1])
            nodes = tree.subtree(doc.id)
            documents[doc.key] = {
                "groups": groups, "title": doc.title, "description": doc.description,
                "meta": doc.meta, "n_passages": doc.n_passages,
                "sections": [(n.key, n.heading) for n in nodes if n.kind == NodeKind.SECTION],
                "passages": [(n.key, n.text, n.heading, n.meta) for n in nodes
                             if n.kind == NodeKind.PASSAGE],
            }
        groups = sorted((tuple(n.title for n in tree.path(g.id)[1:]), g.n_passages)
                        for g in _groups(tree, tree.root.id))
        summary = tree.metadata_summaries([tree.root.id])
        assert summary is not None
        root = summary[tree.root.id]
        return {"documents": documents, "groups": groups, "counts": tree.counts,
                "root_passages": tree.root.n_passages, "root_summary": (
                    root.documents, {k: (e.n, e.values) for k, e in root.keys.items()})}


def _groups(tree: Tree, node_id: int) -> list[Any]:
    found = []
    for child in tree.children(node_id):
        if child.kind == NodeKind.GROUP:
            found.append(child)
            found.extend(_groups(tree, child.id))
    return found


def test_sync_after_edits_equals_a_fresh_build(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    tree = tmp_path / "t.tree"
    build_tree([docs], tree)
    with Tree.open(tree) as opened:
        order_before = [n.key for n in opened.children(opened.root.id)]
    write(docs / "alpha.md", "---\nproduct: billing\nyear: 2025\n---\n# Alpha\n\n## Pay\n\n"
          "Pay yearly now.\n\n## Refunds\n\nWithin a week.\n")  # edited
    (docs / "guides" / "old" / "delta.md").unlink()  # deleted: its group empties
    write(docs / "guides" / "epsilon.md", "# Epsilon\n\nNew here.\n")  # added
    write(docs / "beta.md", "# Beta\n\nBeta text.\n\nMore beta.\n", mtime=1_800_000_000)  # touched
    report = sync_sources(tree, [docs])
    assert (report.added, report.changed, report.removed) == (
        ["guides/epsilon.md"], ["alpha.md"], ["guides/old/delta.md"])
    assert report.unchanged == 3 and report.touched == ["beta.md"]
    assert report.edit.removed_groups == 1
    fresh = tmp_path / "fresh.tree"
    build_tree([docs], fresh)
    assert snapshot(tree) == snapshot(fresh)
    with Tree.open(tree) as opened:  # the edited document kept its place in reading order
        assert [n.key for n in opened.children(opened.root.id)] == order_before
    again = sync_sources(tree, [docs])
    assert (again.added, again.changed, again.removed, again.unchanged) == ([], [], [], 5)


def test_sync_dry_run_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = corpus(tmp_path)
    tree = tmp_path / "t.tree"
    build_tree([docs], tree)
    (docs / "beta.md").unlink()
    before = tree.read_bytes()
    assert main(["sync", str(tree), str(docs), "--dry-run", "--quiet"]) == 0
    assert tree.read_bytes() == before
    assert main(["sync", str(tree), str(docs)]) == 0
    out = capsys.readouterr().out
    assert "removed beta.md" in " ".join(out.split())
    assert "synced: 0 added, 0 changed, 1 removed, 4 unchanged" in out


def test_add_replaces_by_key_or_source_and_remove(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    docs = corpus(tmp_path)
    tree = tmp_path / "t.tree"
    build_tree([docs], tree)
    write(docs / "guides" / "gamma.md", "# Gamma v2\n\nReinstall it.\n")
    assert main(["add", str(tree), str(docs / "guides" / "gamma.md"), "--quiet"]) == 0
    with Tree.open(tree) as opened:  # named explicitly its key would be gamma.md: same source
        gamma = opened.node("guides/gamma.md")
        assert gamma.title == "Gamma v2" and opened.counts["document"] == 5
        assert [p.text for p in opened.passages(gamma.id)] == ["Reinstall it."]
        assert opened.node(gamma.parent or 0).title == "guides"
    before = tree.read_bytes()
    assert main(["remove", str(tree), "beta.md", "nope"]) == 2
    assert "has no document 'nope'; nothing was changed" in capsys.readouterr().err
    assert tree.read_bytes() == before
    assert main(["remove", str(tree), "beta.md", "guides/old/delta.md"]) == 0
    assert "removed 2 documents" in capsys.readouterr().out
    with Tree.open(tree) as opened:
        assert sorted(n.key for n in opened.documents()) == ["alpha.md", "faq", "guides/gamma.md"]
        assert [g.title for g in _groups(opened, opened.root.id)] == ["guides"]
        assert opened.counts["group"] == 1 and opened.root.n_passages == 3


def test_removal_keeps_a_clustered_tree_consistent(tmp_path: Path) -> None:
    path = tmp_path / "c.tree"
    build(path, make_docs(dict.fromkeys(NAMES, 6)), 6, min_size=1, max_size=40)
    with Tree.open(path) as tree:
        leaf = tree.node(tree.node("d-opera-0").parent or 0)
        members = [n.key for n in tree.children(leaf.id)]
        groups_before = tree.counts["group"]
    report = edit_documents(path, remove=members, encode=fake_encode, model="fake")
    assert sorted(report.removed) == sorted(members) and report.removed_groups >= 1
    with Tree.open(path) as tree:
        with pytest.raises(KeyError):
            tree.node(leaf.id)
        assert tree.counts["group"] == groups_before - report.removed_groups
        assert tree.counts["document"] == 6 * len(NAMES) - len(members)
    with pytest.raises(InputError, match="has no document"):
        edit_documents(path, remove=members)
