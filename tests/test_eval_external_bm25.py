"""A run made outside decisionrag (bm25s alone, benchmarks/bm25s_trec_run.py) read back through
`decisionrag eval --run` reproduces the built-in `bm25` system on conditionalqa-dev exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from decisionrag._cli import main

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bm25s_trec_run.py"


def test_the_script_does_not_use_decisionrag() -> None:
    source = SCRIPT.read_text()
    assert "decisionrag" not in source.split('"""', 2)[2]  # only the docstring names it


def test_bm25s_run_reproduces_the_built_in_bm25(shared_data: Path, tmp_path: Path) -> None:
    dataset = shared_data / "conditionalqa-dev"
    run_file = tmp_path / "bm25s.trec"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not our src/ on the path
    subprocess.run(
        [sys.executable, "-I", str(SCRIPT), str(dataset), str(run_file)],
        check=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert run_file.read_text().count("\n") == 285 * 100
    out = tmp_path / "report.json"
    code = main([
        "eval", str(dataset), "--systems", "bm25", "--run", f"bm25s={run_file}",
        "--cache-dir", str(tmp_path / "cache"), "--json", str(out), "--keep-runs", "10",
        "--save-runs", str(tmp_path / "runs"), "--no-progress",
    ])
    assert code == 0
    report = json.loads(out.read_text())
    ours, theirs = report["systems"]["bm25"], report["systems"]["bm25s"]
    metrics = [m for m in ours if m.startswith("cqa_")]
    assert len(metrics) == 11  # hit@1/5/10, recall@1/5/10, ndcg@10, mrr@10, page_hit@1/5/10
    assert {m: theirs[m] for m in metrics} == {m: ours[m] for m in metrics}
    assert ours["cqa_hit@1"] > 0.3  # a real BM25 result, not two empty runs
    assert report["per_query"]["bm25s"] == report["per_query"]["bm25"]
    assert report["runs"]["bm25s"] == report["runs"]["bm25"]  # the same top 10, in order
    for interval in report["intervals"]["bm25s"].values():
        assert interval == [0.0, 0.0, 0.0]
    info = report["runs_in"]["bm25s"]
    assert (info["queries_in_run"], info["missing_queries"], info["unknown_ids"]) == (285, 0, 0)
    assert info["cut_to"] == 10
    # our export of the built-in system is the script's run cut to the same depth
    exported = (tmp_path / "runs" / "bm25.trec").read_text().splitlines()
    script_top = [
        line for line in run_file.read_text().splitlines() if int(line.split()[3]) <= 10
    ]
    assert [line.split()[:4] for line in exported] == [line.split()[:4] for line in script_top]
