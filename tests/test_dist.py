"""The wheel (`make dist`, `python -m build`) installs with no index and works: its metadata
names the license and the extras, and a fresh virtualenv runs the offline demo's path
(build a tree, store vectors, ask the embedded judge) from it."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import require_module

pytestmark = pytest.mark.slow  # builds a wheel and a virtualenv

ROOT = Path(__file__).resolve().parents[1]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="", HF_HUB_OFFLINE="1")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_module("build")
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the build backend installed here (setuptools >= 77) builds it, offline
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(out), str(project)], check=True, capture_output=True, env=_clean_env(),
                   timeout=300)
    return next(out.glob("decisionrag-*-py3-none-any.whl"))


def test_the_wheel_names_its_license_extras_and_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for extra in ("embedded", "demo", "torch", "eval", "serve", "dev"):
        assert f"Provides-Extra: {extra}" in metadata
    demo = [line for line in metadata.splitlines() if 'extra == "demo"' in line]
    assert demo and not any("sentence-transformers" in line or "torch" in line for line in demo)
    assert "decisionrag/py.typed" in names and "decisionrag/_progress.py" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_the_wheel_installs_with_no_index_and_answers_offline(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = _clean_env()
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    str(wheel)], check=True, env=env, timeout=300)
    # its dependencies come from this environment's site-packages (on the disk, no index);
    # a path in a .pth file is not itself scanned for .pth files, so this checkout's
    # editable install of decisionrag stays out of sight
    fresh_site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    (fresh_site / "zz-dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    where = subprocess.run([str(python), "-c", "import decisionrag; print(decisionrag.__file__)"],
                           check=True, capture_output=True, text=True, env=env).stdout
    assert where.startswith(str(fresh_site)), where
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keys.md").write_text("# API keys\n\nRotate a key under Settings > Keys > Rotate.\n\n"
                                  "# Billing\n\nInvoices are sent on the first of the month.\n")
    command = venv / "bin" / "decisionrag"
    subprocess.run([str(command), "build", str(docs), "-o", str(tmp_path / "docs.tree")],
                   check=True, env=env, timeout=600, capture_output=True)
    asked = subprocess.run([str(command), "ask", str(tmp_path / "docs.tree"),
                            "How do I rotate a key?", "--top", "1"],
                           check=True, env=env, timeout=600, capture_output=True, text=True)
    assert "Rotate a key under Settings" in asked.stdout
