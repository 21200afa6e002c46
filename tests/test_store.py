from __future__ import annotations

from pathlib import Path

import pytest

from decisionrag import DocumentSpec, NodeKind, PassageSpec, Tree, TreeFormatError, TreeWriter


def _doc(key: str, title: str, sections: list[tuple[tuple[str, ...], str]], groups=()) -> DocumentSpec:
    return DocumentSpec(title=title, key=key, groups=tuple(groups),
                        passages=[PassageSpec(text, section) for section, text in sections])


def test_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "t.tree"
    with TreeWriter(out) as writer:
        writer.add_document(_doc("a", "Alpha", [((), "intro"), (("H1",), "one"), (("H1", "H2"), "two"),
                                                (("H1",), "three"), (("Z",), "four")], groups=["G"]))
        writer.add_document(_doc("b", "Beta", [((), "only")], groups=["G", "Sub"]))
        writer.add_document(_doc("c", "Gamma", [((), "x")]))
    with Tree.open(out) as tree:
        assert tree.counts["passage"] == 7 and tree.counts["document"] == 3
        top = tree.children(tree.root.id)
        assert [n.title for n in top] == ["G", "Gamma"]
        assert top[0].kind == NodeKind.GROUP and top[0].n_passages == 6
        assert tree.root.n_passages == 7
        a = tree.node("a")
        assert a.description == "Alpha — H1; Z"
        assert [p.text for p in tree.passages(a.id)] == ["intro", "one", "two", "three", "four"]
        two = next(p for p in tree.passages(a.id) if p.text == "two")
        assert two.heading == ("H1", "H2")
        assert [n.title for n in tree.path(two.id)] == ["", "G", "Alpha", "H1", "H2", ""]
        assert [n.kind for n in tree.children(a.id)] == [NodeKind.PASSAGE, NodeKind.SECTION, NodeKind.SECTION]
        h1 = tree.children(a.id)[1]
        assert h1.n_passages == 3 and [p.text for p in tree.passages(h1.id)] == ["one", "two", "three"]
        assert [p.text for p in tree.passages(a.id, limit=2)] == ["intro", "one"]
        b = tree.node("b")
        assert [n.title for n in tree.path(b.id)][1:] == ["G", "Sub", "Beta"]


def test_interrupted_build_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "t.tree"
    with pytest.raises(RuntimeError), TreeWriter(out) as writer:
        writer.add_document(_doc("a", "Alpha", [((), "x")]))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_not_a_tree(tmp_path: Path) -> None:
    bogus = tmp_path / "x.tree"
    bogus.write_text("hello")
    with pytest.raises(TreeFormatError, match="not a decisionrag tree"):
        Tree.open(bogus)
    with pytest.raises(TreeFormatError, match="no such tree"):
        Tree.open(tmp_path / "missing.tree")


def test_update_adds_documents(tmp_path: Path) -> None:
    out = tmp_path / "t.tree"
    with TreeWriter(out) as writer:
        writer.add_document(_doc("a", "Alpha", [((), "x")], groups=["G"]))
    with TreeWriter.update(out) as writer:
        writer.add_document(_doc("b", "Beta", [((), "y")], groups=["G"]))
    with Tree.open(out) as tree:
        group = tree.children(tree.root.id)
        assert len(group) == 1
        assert [d.key for d in tree.children(group[0].id)] == ["a", "b"]
        assert group[0].n_passages == 2


def test_one_ancestry_walk_for_writer_reader_and_view(tmp_path: Path) -> None:
    from decisionrag._navigate._view import TreeView
    from decisionrag._tree import ancestry

    out = tmp_path / "t.tree"
    with TreeWriter(out) as writer:
        writer.add_document(_doc("a", "Alpha", [(("H",), "x")], groups=["G", "Sub"]))
    with TreeWriter.update(out) as writer:  # the writer finds G > Sub again by its ancestry
        writer.add_document(_doc("b", "Beta", [((), "y")], groups=["G", "Sub"]))
    with Tree.open(out) as tree:
        assert tree.counts["group"] == 2
        passage = tree.passages(tree.node("a").id)[0]
        chain = tree.path(passage.id)
        assert [n.title for n in chain] == ["", "G", "Sub", "Alpha", "H", ""]
        assert ancestry(passage.id, tree.node) == chain and ancestry(None, tree.node) == []
        view = TreeView(tree, len)
        beta = tree.node("b")
        assert [n.title for n in view.ancestors(beta)] == ["G", "Sub"]
        assert view.ancestors(beta) == tree.path(beta.id)[1:-1]
        assert view.ancestors(tree.root) == []
        assert view.path(passage) == ("G", "Sub", "Alpha", "H")
