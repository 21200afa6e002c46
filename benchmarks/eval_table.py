"""Markdown tables from `decisionrag eval --json` reports (for docs/benchmarks.md).

    .venv/bin/python benchmarks/eval_table.py bench-out/conditionalqa-dev.json [...]

Per dataset: one row per system with the chosen metrics (in %) and, for every system but the
first, the paired 95 % bootstrap interval of its difference to the first; then latency,
tokens and cost per query; then the pruning recall of each navigation stage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

METRICS = (
    "hit@1",
    "hit@5",
    "recall@1",
    "recall@5",
    "recall@10",
    "recall@100",
    "ndcg@10",
    "mrr@10",
    "page_hit@1",
    "page_hit@5",
)


def cell(report: dict[str, Any], system: str, key: str) -> str:
    value = report["systems"][system].get(key)
    if value is None:
        return "–"
    text = f"{100 * value:.1f}"
    interval = report.get("intervals", {}).get(system, {}).get(key)
    if interval:
        diff, low, high = (100 * v for v in interval)
        text += f" ({diff:+.1f} [{low:+.1f}, {high:+.1f}])"
    return text


def metrics_table(report: dict[str, Any], metrics: tuple[str, ...]) -> list[str]:
    systems = list(report["systems"])
    prefix = next(k for k in report["systems"][systems[0]] if "@" in k).split("_")[0]
    keys = [f"{prefix}_{m}" for m in metrics if f"{prefix}_{m}" in report["systems"][systems[0]]]
    lines = [
        "| system | " + " | ".join(k.removeprefix(prefix + "_") for k in keys) + " |",
        "|---" * (len(keys) + 1) + "|",
    ]
    for system in systems:
        lines.append(f"| {system} | " + " | ".join(cell(report, system, k) for k in keys) + " |")
    return lines


def cost_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "| system | latency p50 (s) | latency p90 (s) | requests/q | tokens/q | ¢/q (Jev price) |",
        "|---|---|---|---|---|---|",
    ]
    for system, values in report["systems"].items():
        lines.append(
            f"| {system} | {values['latency_p50']:.3f} | {values['latency_p90']:.3f} | "
            f"{values.get('requests_per_query', 0):.1f} | {values['tokens_per_query']:.0f} | "
            f"{values.get('cents_per_query', 0):.3f} |"
        )
    return lines


def pruning_table(report: dict[str, Any]) -> list[str]:
    pruning: dict[str, dict[str, dict[str, float]]] = report.get("pruning", {})
    if not pruning:
        return []
    lines = ["| system | stage: share of queries whose gold page survived |", "|---|---|"]
    for system, stages in pruning.items():
        parts = [f"{name.split(':', 1)[1]} {100 * s['survived']:.1f}" for name, s in stages.items()]
        lines.append(
            f"| {system} | " + " → ".join(parts) + f" (n={next(iter(stages.values()))['queries']}) |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--metrics", default=",".join(METRICS))
    args = parser.parse_args()
    metrics = tuple(m for m in args.metrics.split(",") if m)
    for path in args.reports:
        report = json.loads(Path(path).read_text())
        counts = report.get("metric_queries", {})
        print(
            f"### {report['dataset']} ({report['n_queries']} queries; passage metrics over "
            f"{counts.get('hit@1', '?')}, page metrics over {counts.get('page_hit@1', '?')}; "
            f"preset {report['settings']['preset']}, dedup_text={report['settings']['dedup_text']})\n"
        )
        print("\n".join(metrics_table(report, metrics)), "\n")
        print("\n".join(cost_table(report)), "\n")
        pruning = pruning_table(report)
        if pruning:
            print("\n".join(pruning), "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
