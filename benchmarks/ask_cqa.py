"""`decisionrag ask`'s code path over every ConditionalQA dev query, with the embedded judge.

    python benchmarks/ask_cqa.py [--preset auto] [--data ../shared/data/conditionalqa-dev]

Builds the tree once from the dataset's corpus.jsonl (``out/bench/cqa.tree``) as
`decisionrag build` builds one — node vectors and the BM25 index stored with it, so the
walk is the default's (hybrid candidates, recovery) and embeds no candidate at query time;
a tree found there without vectors is rebuilt — loads the embedded judge once (its load time
is reported apart), then answers every query twice through ``ask`` (what `decisionrag ask`
runs: open the tree, navigate, close):

* cold: the judge's in-process caches start empty;
* warm: the same queries again, everything the first pass read now cached.

Reports errors (must be 0), p50/p90 seconds per query for both passes, and, as a sanity
check of the results, paragraph Hit@1 and Recall@10 against qrels.tsv.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from decisionrag._app import ask
from decisionrag._judges import Judge, load_judge
from decisionrag._query import Query

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "conditionalqa-dev"


def load_queries(folder: Path) -> list[Query]:
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        items = [json.loads(line) for line in lines if line.strip()]
    return [Query(text=i["text"], context=i.get("context", ""), id=i["id"]) for i in items]


def load_qrels(folder: Path) -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = defaultdict(set)
    with (folder / "qrels.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if float(row["score"]) > 0:
                relevant[row["query-id"]].add(row["corpus-id"])
    return relevant


def ensure_tree(folder: Path, out: Path) -> Path:
    """The tree `decisionrag build` writes (vectors and BM25 index required, not optional)."""
    from decisionrag import build_tree
    from decisionrag._tree._vectors import available_sets

    if out.is_file() and not available_sets(out):
        print(f"{out} has no stored vectors: rebuilding it", file=sys.stderr)
        out.unlink()
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        report = build_tree([folder / "corpus.jsonl"], out, format="jsonl", vectors=True, bm25=True)
        vectors = report.vectors.seconds if report.vectors is not None else float("nan")
        print(f"built {out}: {report.counts} in {report.seconds:.1f} s, vectors {vectors:.1f} s",
              file=sys.stderr)
    return out


def one_pass(
    tree: Path, queries: list[Query], judge: Judge, preset: str
) -> tuple[list[float], list, int]:
    seconds, rankings, errors = [], [], 0
    for query in queries:
        started = time.perf_counter()
        try:
            result = ask(tree, query, judge=judge, preset=preset, k=10)
        except Exception as exc:  # counted and shown: the benchmark's point is that there are none
            errors += 1
            print(f"error on {query.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            rankings.append([])
            continue
        seconds.append(time.perf_counter() - started)
        rankings.append(result.ids)
    return seconds, rankings, errors


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def quality(
    queries: list[Query], rankings: list[list[str]], qrels: dict[str, set[str]]
) -> tuple[float, float]:
    judged = [(q, r) for q, r in zip(queries, rankings, strict=True) if qrels.get(q.id)]
    hit1 = statistics.fmean(1.0 if r[:1] and r[0] in qrels[q.id] else 0.0 for q, r in judged)
    recall10 = statistics.fmean(
        len(set(r[:10]) & qrels[q.id]) / len(qrels[q.id]) for q, r in judged
    )
    return hit1, recall10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--tree", type=Path, default=Path("out/bench/cqa.tree"))
    parser.add_argument("--preset", default="auto")
    parser.add_argument("--limit", type=int, default=0, help="only the first N queries (0: all)")
    args = parser.parse_args()
    tree = ensure_tree(args.data, args.tree)
    queries = load_queries(args.data)[: args.limit or None]
    qrels = load_qrels(args.data)
    started = time.perf_counter()
    judge = load_judge("embedded")
    load_seconds = time.perf_counter() - started
    print(
        f"ConditionalQA dev: {len(queries)} queries; preset {args.preset}; embedded judge "
        f"(loaded in {load_seconds:.1f} s); tree with stored vectors\n"
    )
    print(
        "| pass | queries | errors | p50 | p90 | mean | Hit@1 | R@10 |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for name in ("cold", "warm"):
        seconds, rankings, errors = one_pass(tree, queries, judge, args.preset)
        hit1, recall10 = quality(queries, rankings, qrels)
        print(
            f"| {name} | {len(queries)} | {errors} | {quantile(seconds, 0.5):.3f} s "
            f"| {quantile(seconds, 0.9):.3f} s | {statistics.fmean(seconds):.3f} s "
            f"| {100 * hit1:.1f} | {100 * recall10:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
