"""The layering that the import contract (pyproject.toml, `lint-imports`) cannot see."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from _navigate_helpers import pets_tree, preset
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate import Navigator, Stage

SOURCE = Path(__file__).parents[1] / "src" / "decisionrag"


def _imports_of_the_package_root(path: Path, package: Path = SOURCE) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            relative_root = node.level > 0 and not node.module and (
                node.level == len(path.relative_to(package).parts))
            if relative_root or (node.level == 0 and node.module == "decisionrag"):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(a.name == "decisionrag" for a in node.names):
            lines.append(node.lineno)
    return lines


def _loaded_by_the_root() -> list[Path]:
    """The modules `import decisionrag` loads (in a fresh interpreter): those below the root."""
    code = "import decisionrag, sys; print('\\n'.join(m for m in sys.modules if m.startswith('decisionrag')))"
    names = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                           text=True).stdout.split()
    files = [Path(module.__file__) for name in names
             if (module := sys.modules.get(name) or importlib.import_module(name)).__file__]
    return sorted(f for f in files if f.is_relative_to(SOURCE) and f != SOURCE / "__init__.py")


def test_no_module_below_the_root_imports_it() -> None:
    """The root imports these modules; one importing the root back (e.g. for `__version__`)
    would close a cycle. The version lives in `decisionrag._version`. Shells the root does not
    import (the CLI, integrations) may use the public API from the root."""
    below = _loaded_by_the_root()
    assert SOURCE / "_eval" / "_data.py" in below and len(below) > 30
    offenders = {str(p.relative_to(SOURCE)): lines for p in below
                 if (lines := _imports_of_the_package_root(p))}
    assert offenders == {}


def test_the_check_finds_a_root_import(tmp_path: Path) -> None:
    planted = tmp_path / "decisionrag" / "_eval" / "_data.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("from .. import __version__\nimport decisionrag\nfrom . import _x\n")
    assert _imports_of_the_package_root(planted, tmp_path / "decisionrag") == [1, 2]


def test_trace_names_come_from_the_stage_enum(tmp_path: Path) -> None:
    with pets_tree(tmp_path / "pets.tree") as tree:
        result = Navigator(tree, ScriptedJudge(), preset()).retrieve("dog food")
    names = [stage.name for stage in result.trace.stages]
    assert names[0] == Stage.GROUP.at(0) == "group 1"
    assert {Stage.PAGE.value, Stage.PASSAGE.value} <= set(names)
    assert Stage.rescore(Stage.PAGE.value) == "page rescore"


def test_the_architecture_page_quotes_the_contract_as_it_is() -> None:
    root = Path(__file__).parents[1]

    def layers(text: str) -> str:
        start = text.index("layers = [")
        return text[start:text.index("]", start)]

    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert layers(page) == layers(pyproject)


def test_only_the_store_knows_sqlite() -> None:
    """SQL and sqlite's exceptions stay inside `decisionrag._tree` (typed methods outside)."""
    users = []
    for path in SOURCE.rglob("*.py"):
        if path.is_relative_to(SOURCE / "_tree"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] == "sqlite3" for name in names):
                users.append(str(path.relative_to(SOURCE)))
    assert users == []
