"""The quality tables of README.md and docs/benchmarks.md are what benchmarks/claims.py
generates from the committed run files (docs/runs): no figure typed by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def claims() -> ModuleType:
    spec = importlib.util.spec_from_file_location("claims", ROOT / "benchmarks" / "claims.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("claims", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_docs_tables_match_the_run_files(shared_data: Path) -> None:
    module = claims()
    generated = module.tables(module.score(shared_data, module.RUNS), module.RUNS)
    for key, target in module.TARGETS:
        text = target.read_text(encoding="utf-8")
        assert module.rewrite(text, key, generated[key]) == text, (
            f"{target.name} differs from docs/runs: python benchmarks/claims.py --write")


def test_every_claimed_dataset_has_runs_of_the_default_and_its_ablations() -> None:
    module = claims()
    for claim in module.CLAIMS:
        folder = module.RUNS / claim.dataset
        if not folder.is_dir():
            continue  # a dataset not run is shown as "not run" in the tables
        for system in ("decisionrag", "walk-only", "hybrid+judge", "all+judge"):
            assert (folder / f"{system}.trec").is_file(), (claim.dataset, system)


def test_rewrite_replaces_only_between_the_markers() -> None:
    module = claims()
    start, end = module.MARKERS["table"]
    text = f"before\n{start}\nold\n{end}\nafter\n"
    assert module.rewrite(text, "table", "new") == f"before\n{start}\nnew\n{end}\nafter\n"
