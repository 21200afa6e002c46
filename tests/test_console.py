"""The console's server side (`_serve._ui`) and what it reads: the page and its files under a
CSP that allows this server only, the tree's metadata keys (one answer from the library, the
CLI and the server), the walk as JSON (`walk: true`), pages of children, `decisionrag ui`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from _serve_helpers import console_trees, library_tree, live_server, settings
from conftest import require_module
from decisionrag._app import metadata_keys
from decisionrag._cli import main as cli_main
from decisionrag._serve import ServeLimits
from decisionrag._serve._auth import add_key
from decisionrag._serve._ui import CSP
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter
from decisionrag._walkpage import walk_page

require_module("fastapi")

HTTP = httpx.Client(timeout=30)
ROOT = Path(__file__).resolve().parents[1]
UI_FILES = ROOT / "src" / "decisionrag" / "_serve" / "ui"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return console_trees(tmp_path_factory.mktemp("console"))


@pytest.fixture(scope="module")
def server(trees: dict[str, Path]) -> str:
    with live_server(settings(trees)) as url:
        yield url  # type: ignore[misc]


# -- the page and its files --------------------------------------------------------------------

def test_the_page_loads_only_from_this_server(server: str) -> None:
    page = HTTP.get(f"{server}/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    policy = dict(part.strip().split(" ", 1) for part in CSP.split(";"))
    assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'"
    assert policy["connect-src"] == "'self'" and policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "no inline script"
    assert not re.search(r"\sstyle=|\son[a-z]+=", html), "no inline style or handler"
    assert "How to read the walk" in html  # the walk page's legend, the same text
    referenced = re.findall(r'(?:src|href)="([^"#]+)"', html)
    assert referenced and all(ref.startswith("/ui/") or ref.startswith("data:") for ref in referenced)
    for ref in referenced:
        if ref.startswith("/ui/"):
            asset = HTTP.get(f"{server}{ref}")
            assert asset.status_code == 200 and asset.headers["content-security-policy"] == CSP
            kind = "text/javascript" if ref.endswith(".js") else "text/css"
            assert asset.headers["content-type"].startswith(kind)
            assert not re.search(r"https?://|\b(?:innerHTML|outerHTML|eval|new Function|document\.write)\b",
                                 asset.text), ref
    assert HTTP.get(f"{server}/ui/assets/nothing.js").status_code == 404
    assert HTTP.get(f"{server}/", follow_redirects=False).headers["location"] == "/ui"


def test_assets_revalidate_by_etag(server: str) -> None:
    first = HTTP.get(f"{server}/ui/assets/console.js")
    again = HTTP.get(f"{server}/ui/assets/console.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert first.headers["cache-control"] == "no-cache"


def test_the_walk_script_is_the_walk_pages(server: str, tmp_path: Path) -> None:
    from decisionrag._judges import ScriptedJudge
    from decisionrag._navigate import Navigator
    from decisionrag._walkpage import SCRIPT, STYLE

    assert HTTP.get(f"{server}/ui/assets/walk.js").text == SCRIPT
    assert HTTP.get(f"{server}/ui/assets/walk.css").text == STYLE
    with Tree.open(library_tree(tmp_path / "books.tree")) as tree:
        page = walk_page(Navigator(tree, ScriptedJudge()).retrieve("Dune chapter"))
    assert SCRIPT in page and STYLE in page


def test_config_says_what_the_page_may_offer(trees: dict[str, Path], server: str, tmp_path: Path) -> None:
    config = HTTP.get(f"{server}/ui/config.json").json()
    assert config["keys"] is False and config["answers"] is False and config["filters"] is True
    assert config["max_k"] == 100 and config["children_page"] == 100 and "auto" in config["presets"]
    key_file = tmp_path / "keys.json"
    add_key(key_file, "admin", [])
    with live_server(settings(trees, api_key_file=str(key_file),
                              limits=ServeLimits(max_children=20))) as keyed:
        config = HTTP.get(f"{keyed}/ui/config.json").json()
        assert config["keys"] is True and config["children_page"] == 20
        assert HTTP.get(f"{keyed}/ui").status_code == 200  # the page itself needs no key
        assert HTTP.get(f"{keyed}/v1/trees").status_code == 401  # what it shows does


def test_no_ui_serves_no_console(trees: dict[str, Path]) -> None:
    with live_server(settings(trees, ui=False)) as url:
        assert HTTP.get(f"{url}/ui").status_code == 404
        assert HTTP.get(f"{url}/ui/assets/console.js").status_code == 404
        assert HTTP.get(f"{url}/v1/trees").status_code == 200


def test_the_console_is_not_in_the_api_document(server: str) -> None:
    document = HTTP.get(f"{server}/openapi.json").json()
    assert not [path for path in document["paths"] if path == "/" or path.startswith("/ui")]
    operation = document["paths"]["/v1/trees/{name}/metadata"]["get"]
    assert set(operation["responses"]) >= {"200", "401", "403", "404"}
    schemas = document["components"]["schemas"]
    assert schemas["RetrieveRequest"]["properties"]["walk"]["type"] == "boolean"
    assert "rows" in schemas["WalkStageOut"]["properties"]
    assert {"key", "documents", "values", "numbers", "texts"} <= set(schemas["MetadataKey"]["properties"])


def test_the_wheel_ships_the_console_files() -> None:
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+)
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    line = re.search(r"^decisionrag = \[(.*)\]$", section, re.MULTILINE)
    assert line, section
    patterns = re.findall(r'"([^"]+)"', line.group(1))
    package = ROOT / "src" / "decisionrag"
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    files = {path for path in UI_FILES.iterdir() if path.is_file()}
    assert files and files <= shipped


# -- metadata keys ------------------------------------------------------------------------------

def test_metadata_keys_of_a_tree(trees: dict[str, Path], server: str) -> None:
    found = HTTP.get(f"{server}/v1/trees/books/metadata").json()
    assert found["tree"] == "books" and found["documents"] == 6 and found["summarised"] is True
    keys = {entry["key"]: entry for entry in found["keys"]}
    assert list(keys) == sorted(keys) == ["lang", "page", "tags", "year"]
    assert keys["year"]["documents"] == 6 and keys["year"]["numbers"] == [1759, 1969]
    assert keys["year"]["values"] == [1759, 1815, 1854, 1961, 1965, 1969] and keys["year"]["texts"] is None
    assert keys["lang"]["values"] == ["en", "fr", "pl"] and keys["lang"]["texts"] == ["en", "pl"]
    assert keys["tags"]["documents"] == 5 and keys["tags"]["values"] == ["novel", "satire", "sf"]
    assert keys["page"]["documents"] == 6  # from the passages: each document counted once
    with Tree.open(trees["books"]) as tree:
        assert metadata_keys(tree) == {k: v for k, v in found.items() if k != "tree"}


def test_metadata_keys_agree_between_the_cli_and_the_server(
        trees: dict[str, Path], server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["stats", str(trees["books"]), "--metadata", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["metadata"]
    served = HTTP.get(f"{server}/v1/trees/books/metadata").json()
    assert printed == {k: v for k, v in served.items() if k != "tree"}
    assert cli_main(["stats", str(trees["books"]), "--metadata"]) == 0
    text = capsys.readouterr().out
    assert "metadata keys (over 6 documents):" in text
    assert '  year: 6 documents; values 1759, 1815, 1854, 1961, 1965, 1969; numbers 1759–1969' in text


def test_many_values_are_summarised_as_more(tmp_path: Path) -> None:
    path = tmp_path / "many.tree"
    with TreeWriter(path) as writer:
        for i in range(70):
            writer.add_document(DocumentSpec(f"Doc {i}", [PassageSpec(f"text {i}")], key=f"d{i}",
                                             meta={"n": i, "name": f"n{i:02d}"}))
    with Tree.open(path) as tree:
        found = {entry["key"]: entry for entry in metadata_keys(tree)["keys"]}
    assert found["n"]["values"] is None and found["n"]["numbers"] == [0, 69]
    assert found["name"]["values"] is None and found["name"]["texts"] == ["n00", "n69"]


def test_metadata_needs_a_key_that_may_read_the_tree(trees: dict[str, Path], tmp_path: Path) -> None:
    key_file = tmp_path / "keys.json"
    docs_only = add_key(key_file, "docs-app", ["docs"])
    with live_server(settings(trees, api_key_file=str(key_file))) as url:
        assert HTTP.get(f"{url}/v1/trees/books/metadata").status_code == 401
        auth = {"Authorization": f"Bearer {docs_only}"}
        refused = HTTP.get(f"{url}/v1/trees/books/metadata", headers=auth)
        assert refused.status_code == 403 and refused.json()["error"]["field"] == "tree"
        assert HTTP.get(f"{url}/v1/trees/docs/metadata", headers=auth).status_code == 200
        assert HTTP.get(f"{url}/v1/trees/nope/metadata", headers={
            "Authorization": f"Bearer {add_key(key_file, 'all', [])}"}).status_code == 404


# -- the walk as JSON, pages of children -------------------------------------------------------

def test_walk_true_sends_every_candidate_of_every_stage(server: str) -> None:
    body = {"tree": "books", "query": "Which chapter does Dune open with?", "k": 4, "trace": True}
    plain = HTTP.post(f"{server}/v1/retrieve", json=body).json()
    assert plain["walk"] is None
    walked = HTTP.post(f"{server}/v1/retrieve", json={**body, "walk": True}).json()
    assert [h["id"] for h in walked["results"]] == [h["id"] for h in plain["results"]]
    assert len(walked["walk"]) == len(walked["trace"]) >= 3
    for stage, traced in zip(walked["walk"], walked["trace"], strict=True):
        assert stage["name"] == traced["name"] and stage["n_candidates"] == traced["n_candidates"]
        rows = stage["rows"]
        assert len(rows) == stage["n_candidates"] and stage["kept"] == len(traced["kept"])
        kept_keys = [row[0] for row in rows if row[3] in ("kept", "opened")]
        assert kept_keys == [key for key, _ in traced["kept"]]
        assert sum(row[3] == "pruned" for row in rows) == stage["pruned"] - stage["reopened_not_kept"]
        assert all(isinstance(row[1], str) and row[1] for row in rows)
    first = walked["walk"][0]["rows"][0]
    assert first[1] in ("Old", "New") and first[4] == ""  # a group, reached from the root


def test_children_come_a_page_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "flat.tree"
    with TreeWriter(path) as writer:
        for i in range(250):
            writer.add_document(DocumentSpec(f"Doc {i}", [PassageSpec(f"text {i}")], key=f"d{i}"))
    with Tree.open(path) as tree:
        root = tree.root.id
        assert [n.key for n in tree.children(root, limit=3, offset=200)] == ["d200", "d201", "d202"]
        assert [n.key for n in tree.children(root, offset=248)] == ["d248", "d249"]
        assert len(tree.children(root)) == 250
    with live_server(settings({"flat": path})) as url:
        page = HTTP.get(f"{url}/v1/trees/flat/nodes/root", params={"offset": 240, "limit": 100}).json()
        assert [c["id"] for c in page["children"]] == [f"d{i}" for i in range(240, 250)]
        assert page["children_total"] == 250 and page["offset"] == 240


# -- decisionrag ui ----------------------------------------------------------------------------

def test_decisionrag_ui_prints_the_consoles_address(trees: dict[str, Path]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "decisionrag", "ui", f"books={trees['books']}", str(trees["docs"]),
         "--judge", "scripted"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/ui", line)
        assert match, line
        page = HTTP.get(line)
        assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
        listing = HTTP.get(line.replace("/ui", "/v1/trees")).json()["trees"]
        assert [t["name"] for t in listing] == ["books", "docs"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        assert "decisionrag ui: trees books, docs; judge scripted" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_decisionrag_ui_rejects_what_serve_rejects(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "decisionrag", "ui", str(tmp_path / "missing.tree")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no such tree file" in result.stderr
