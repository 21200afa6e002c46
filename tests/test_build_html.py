from __future__ import annotations

from pathlib import Path

from decisionrag import NodeKind, Tree
from decisionrag._build import build_tree
from decisionrag._build._html import parse_html

PAGE = """<!DOCTYPE html>
<html><head><title>os — Operating system interfaces — Python docs</title>
<style>p { color: red }</style><script>var p = "<p>not text</p>";</script></head>
<body>
<header><p>Site header</p></header>
<nav><ul><li>Home</li><li>Library</li></ul></nav>
<div class="related" role="navigation"><ul><li>previous</li></ul></div>
<div class="body">
<h1>os — Operating system interfaces<a class="headerlink" href="#os">¶</a></h1>
<p>This module provides a <em>portable</em> way<br>of using OS features.</p>
<h2>Files</h2>
<ul>
  <li><p>Opening files.</p> More about opening.
    <ul><li>Read mode</li><li>Write <b>mode</b></li></ul>
  </li>
  <li>Closing files</li>
</ul>
<h3>Table of modes</h3>
<table><thead><tr><th>Mode</th><th>Meaning</th></tr></thead>
<tbody><tr><td>r</td><td>read</td></tr><tr><td></td><td></td></tr></tbody></table>
<pre>import os
os.listdir(".")</pre>
<h4>Note</h4>
<dl><dt>os.getcwd()</dt><dd><p>Return the working directory.</p></dd></dl>
<h2>Processes</h2>
<div><p>Spawn them.</p></div>
</div>
<aside><p>Sidebar</p></aside>
<footer><p>© Footer</p></footer>
</body></html>
"""


def test_parse_html_sections_passages_and_chrome() -> None:
    doc = parse_html(PAGE, "fallback")
    assert doc.title == "os — Operating system interfaces"
    got = [(p.section, p.text) for p in doc.passages]
    assert got == [
        ((), "This module provides a portable way of using OS features."),
        (("Files",), "Opening files. More about opening."),
        (("Files",), "Read mode"),
        (("Files",), "Write mode"),
        (("Files",), "Closing files"),
        (("Files", "Table of modes"), "Mode | Meaning"),
        (("Files", "Table of modes"), "r | read"),
        (("Files", "Table of modes"), 'import os\nos.listdir(".")'),
        (("Files", "Table of modes"), "Note"),
        (("Files", "Table of modes"), "os.getcwd()"),
        (("Files", "Table of modes"), "Return the working directory."),
        (("Processes",), "Spawn them."),
    ]
    assert not any(word in p.text for p in doc.passages
                   for word in ("Site header", "Home", "previous", "Sidebar", "Footer", "not text"))


def test_title_rules() -> None:
    # several h1s: all are sections, <title> is the title
    doc = parse_html("<title>Site</title><h1>One</h1><p>a</p><h1>Two</h1><p>b</p>", "fb")
    assert doc.title == "Site" and [p.section for p in doc.passages] == [("One",), ("Two",)]
    # an h1 unrelated to <title> stays a section
    doc = parse_html("<title>Site</title><h1>Other</h1><p>a</p>", "fb")
    assert doc.title == "Site" and doc.passages[0].section == ("Other",)
    # no <title>: the single h1 is the title
    doc = parse_html("<h1>Only</h1><p>a</p>", "fb")
    assert doc.title == "Only" and doc.passages[0].section == ()
    assert parse_html("<p>x</p>", "file name").title == "file name"


def test_main_element_limits_the_content() -> None:
    doc = parse_html("<body><div><p>menu text</p></div><main><p>content</p></main></body>", "fb")
    assert [p.text for p in doc.passages] == ["content"]


def test_html_folder_round_trip(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "library").mkdir(parents=True)
    (site / "library" / "os.html").write_text(PAGE, encoding="utf-8")
    (site / "index.htm").write_text("<title>Index</title><p>Start here.</p>", encoding="utf-8")
    (site / "blank.html").write_text("<html><body><nav><p>x</p></nav></body></html>",
                                     encoding="utf-8")
    (site / "style.css").write_text("p {}", encoding="utf-8")
    report = build_tree([site], tmp_path / "t.tree")
    assert report.counts["document"] == 2 and report.counts["passage"] == 13
    assert [(Path(f).name, why) for f, why in report.skipped] == [("blank.html", "empty")]
    with Tree.open(tmp_path / "t.tree") as tree:
        os_doc = tree.node("library/os.html")
        assert os_doc.title == "os — Operating system interfaces"
        assert os_doc.description == "os — Operating system interfaces — Files; Processes"
        sections = [n for n in tree.subtree(os_doc.id) if n.kind == NodeKind.SECTION]
        assert [(s.title, s.n_passages) for s in sections] == [
            ("Files", 10), ("Table of modes", 6), ("Processes", 1)]
        assert tree.path(os_doc.id)[1].title == "library"
