from __future__ import annotations

from pathlib import Path

import pytest

from decisionrag import InputError, NodeKind, Tree
from decisionrag._build import build_tree
from decisionrag._build._markdown import parse_markdown, split_front_matter

GUIDE = """---
title: "Install guide"
tags: [setup]
---
# Install guide

Read this *first*, see [the site](https://example.org).

## Linux

- Download the **package**
  from the site.

  Then check it.
  - verify the checksum
  - unpack it
- Run `make`

| Distro | Command |
|--------|---------|
| Debian | apt |

```sh
make install
```

### Troubleshooting
Check the logs.

## Windows
Setext section
--------------
Under setext.
"""


def test_parse_markdown_sections_and_passages() -> None:
    doc = parse_markdown(GUIDE, "fallback")
    assert doc.title == "Install guide"
    got = [(p.section, p.text) for p in doc.passages]
    assert got == [
        ((), "Read this first, see the site."),
        (("Linux",), "Download the package from the site. Then check it."),
        (("Linux",), "verify the checksum"),
        (("Linux",), "unpack it"),
        (("Linux",), "Run make"),
        (("Linux",), "Distro | Command"),
        (("Linux",), "Debian | apt"),
        (("Linux",), "make install"),
        (("Linux", "Troubleshooting"), "Check the logs."),
        (("Setext section",), "Under setext."),
    ]


def test_first_h1_is_the_title_only_when_it_comes_first() -> None:
    doc = parse_markdown("# Title\n\ntext\n\n# Second top\n\nmore\n", "fb")
    assert doc.title == "Title"
    assert [(p.section, p.text) for p in doc.passages] == [((), "text"), (("Second top",), "more")]
    doc = parse_markdown("intro\n\n## Part\n\n# Late h1\n\nx\n", "file name")
    assert doc.title == "file name"
    assert [p.section for p in doc.passages] == [(), ("Late h1",)]
    # a front-matter title different from the first h1 keeps the h1 as a section
    doc = parse_markdown("---\ntitle: Meta\n---\n# Other\n\nx\n", "fb")
    assert doc.title == "Meta" and doc.passages[0].section == ("Other",)


def test_front_matter_parsing() -> None:
    fields, body = split_front_matter("---\ntitle: 'A: B'\nnested:\n  title: no\n---\nbody")
    assert fields["title"] == "A: B" and body == "body"
    assert split_front_matter("--- not front matter\nx") == ({}, "--- not front matter\nx")
    assert split_front_matter("---\nunterminated: yes\n") == ({}, "---\nunterminated: yes\n")


def test_markdown_folder_round_trip(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "guides" / "deep").mkdir(parents=True)
    (docs / "index.md").write_text("# Home\n\nWelcome.\n", encoding="utf-8")
    (docs / "guides" / "install.markdown").write_text(GUIDE, encoding="utf-8")
    (docs / "guides" / "deep" / "notes_on-things.md").write_text("Just a note.\n", encoding="utf-8")
    (docs / "guides" / "empty.md").write_text("---\ntitle: Nothing\n---\n\n", encoding="utf-8")
    (docs / "guides" / "latin1.md").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (docs / "image.png").write_bytes(b"\x89PNG")
    (docs / ".hidden.md").write_text("# Secret\n\nx\n", encoding="utf-8")

    report = build_tree([docs], tmp_path / "t.tree")
    assert report.counts["document"] == 3 and report.counts["passage"] == 12
    assert report.ignored == 1
    assert sorted((Path(f).name, why) for f, why in report.skipped) == [
        ("empty.md", "empty"), ("latin1.md", "undecodable (not UTF-8)")]
    with Tree.open(tmp_path / "t.tree") as tree:
        top = tree.children(tree.root.id)
        assert [(n.kind, n.title) for n in top] == [(NodeKind.GROUP, "guides"),
                                                    (NodeKind.DOCUMENT, "Home")]
        guides = tree.children(top[0].id)
        assert [(n.kind, n.title) for n in guides] == [(NodeKind.GROUP, "deep"),
                                                       (NodeKind.DOCUMENT, "Install guide")]
        note = tree.node("guides/deep/notes_on-things.md")
        assert note.title == "notes on things"
        assert note.meta["source"].endswith("notes_on-things.md")
        install = tree.node("guides/install.markdown")
        assert install.description == "Install guide — Linux; Setext section"
        assert [c.title for c in tree.children(install.id) if c.kind == NodeKind.SECTION] == [
            "Linux", "Setext section"]
        assert tree.root.n_passages == 12 and top[0].n_passages == 11


def test_two_folders_are_two_groups(tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "page.md").write_text(f"# {name} page\n\ntext\n", encoding="utf-8")
    build_tree([tmp_path / "alpha", tmp_path / "beta"], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        assert [n.title for n in tree.children(tree.root.id)] == ["alpha", "beta"]
        assert tree.node("beta/page.md").title == "beta page"


def test_error_after_documents_were_written_leaves_no_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.md", "b.md"):
        (src / name).write_text(f"# {name}\n\ntext\n", encoding="utf-8")
    (src / "z.jsonl").write_text('{"id": "p", "doc_id": "d", "text": "t"}\n{oops\n',
                                 encoding="utf-8")
    out = tmp_path / "out" / "t.tree"
    with pytest.raises(InputError, match=r"z\.jsonl, line 2"):
        build_tree([src], out)
    assert list(out.parent.iterdir()) == []  # neither the tree nor its temporary file
