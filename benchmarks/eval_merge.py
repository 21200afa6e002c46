"""Merge `decisionrag eval --json` reports of one dataset that were run separately.

    .venv/bin/python benchmarks/eval_merge.py DATASET_DIR a.json b.json --out merged.json

Systems are taken in the order given (the first system of the first report is the baseline
of the intervals). Metrics and intervals are recomputed from the rankings the reports kept
(`--keep-runs N`, so metrics are exact only for cut-offs up to N); latency, usage and
pruning are copied from the report that ran the system. Only queries present in every
report's runs are scored, and `n_queries` says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from decisionrag._eval import EvalSettings, MetricSpec, load_dataset
from decisionrag._eval._metrics import mean_metrics, metric_counts, score_run
from decisionrag._eval._runner import intervals, judgments_for

_COPIED = ("latency_p50", "latency_p90", "tokens_per_query", "requests_per_query", "cents_per_query")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    reports = [json.loads(Path(p).read_text()) for p in args.reports]
    runs: dict[str, dict[str, list[str]]] = {}
    source: dict[str, dict[str, Any]] = {}
    for report in reports:
        for name, ranking in report["runs"].items():
            if name not in runs:
                runs[name], source[name] = ranking, report
    common = set.intersection(*(set(r) for r in runs.values()))
    dataset = load_dataset(args.dataset)
    dataset = type(dataset)(
        dataset.path,
        [q for q in dataset.queries if q.id in common],
        {k: v for k, v in dataset.qrels.items() if k in common},
        dataset.qrels_docs,
        dataset.warnings,
    )
    s = reports[0]["settings"]
    settings = EvalSettings(
        systems=list(runs),
        spec=MetricSpec(tuple(s["ks"]), tuple(s["recall_ks"])),
        dedup_text=s["dedup_text"],
        dedup_lowercase=s["dedup_lowercase"],
        resamples=s["resamples"],
        seed=s["seed"],
    )
    judgments = judgments_for(dataset, settings)
    per_query = {
        name: score_run({q: r for q, r in ranking.items() if q in common}, judgments, settings.spec)
        for name, ranking in runs.items()
    }
    prefix = dataset.prefix
    merged = {
        "dataset": dataset.name,
        "n_queries": len(common),
        "metric_queries": metric_counts(per_query[next(iter(runs))]),
        "settings": s,
        "systems": {
            name: {
                **mean_metrics(per_query[name], prefix),
                **{k: source[name]["systems"][name][k] for k in _COPIED},
            }
            for name in runs
        },
        "baseline": next(iter(runs)),
        "intervals": intervals(per_query, list(runs), prefix, settings),
        "pruning": {n: source[n]["pruning"][n] for n in runs if n in source[n].get("pruning", {})},
        "merged_from": args.reports,
    }
    Path(args.out).write_text(json.dumps(merged, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
