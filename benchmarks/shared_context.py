"""The paper's central ablation on a real model: binary judgments of the candidates read in
one shared context against independent judgments, one candidate per request.

For each of the first --queries queries (with evidence) of each dataset, flat dense
retrieval gives the top --candidates passages; the judge then scores them through the
walk's own last stage (`Navigator.arerank`: shared contexts grouped by page and section, in
reading order, with page titles and headings above the passages):

* ``shared``: all candidates in one request, one yes/no question each;
* ``independent``: one request per candidate, holding that candidate alone.

The multiple-choice step is off in both, so the orders compared are those of the binary
P(yes) alone. Reported per dataset: Hit@1 of dense's own order and of both judge orders
(and how often the gold passage is among the candidates at all, the ceiling), requests,
input tokens (the judge's count, or its estimate) and seconds per query.

    decisionrag models prepare smollm2
    OMP_NUM_THREADS=1 python benchmarks/shared_context.py --judge local:FOLDER \
        --dataset xquad-en --dataset conditionalqa-dev --queries 20 --candidates 10
    python benchmarks/shared_context.py --judge embedded    # a judge that reads no context

Trees are the ones `decisionrag eval` builds and caches for the dataset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from decisionrag._app import Navigator
from decisionrag._app._evaluate import dataset_tree
from decisionrag._eval import load_dataset
from decisionrag._judges import Usage, load_judge
from decisionrag._navigate import get_preset
from decisionrag._retrievers import FlatRetrievers
from decisionrag._tree import Tree

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@dataclass
class Tally:
    hits: int = 0
    usage: Usage = field(default_factory=Usage)
    seconds: list[float] = field(default_factory=list)

    def add(self, hit: bool, usage: Usage, seconds: float) -> None:
        self.hits += hit
        self.usage = self.usage + usage
        self.seconds.append(seconds)


async def judged(navigator: Navigator, query: Any, keys: list[str]) -> tuple[str, Usage, float]:
    """The top key of one shared-context judgment of `keys`, its usage and seconds."""
    start = time.perf_counter()
    result = await navigator.arerank(query, keys, k=len(keys))
    return result.hits[0].node.key, result.usage, time.perf_counter() - start


async def independent(navigator: Navigator, query: Any, keys: list[str]) -> tuple[str, Usage, float]:
    """The key with the highest P(yes) when each candidate is judged alone."""
    start, usage, scores = time.perf_counter(), Usage(), {}
    for key in keys:
        result = await navigator.arerank(query, [key], k=1)
        scores[key] = result.hits[0].binary
        usage = usage + result.usage
    best = max(keys, key=lambda key: (scores[key], -keys.index(key)))
    return best, usage, time.perf_counter() - start


async def run_dataset(name: str, data: Path, judge_id: str, queries: int, candidates: int,
                      judge: Any) -> dict[str, Any]:
    dataset = load_dataset(data / name)
    tree = Tree.open(dataset_tree(dataset))
    flat = FlatRetrievers(tree)
    preset = get_preset("auto", tree, judge)
    binary_only = replace(preset, choice=replace(preset.choice, mode="off"))
    navigator = Navigator(tree, judge, binary_only, flat=flat)
    dense = flat.dense()
    asked = [q for q in dataset.queries if any(v > 0 for v in dataset.qrels.get(q.id, {}).values())]
    asked = asked[:queries]
    tallies = {"dense": Tally(), "shared": Tally(), "independent": Tally()}
    ceiling = 0
    for number, query in enumerate(asked, 1):
        gold = {key for key, grade in dataset.qrels[query.id].items() if grade > 0}
        start = time.perf_counter()
        keys = [key for key, _ in dense.retrieve(query.flat_text(), candidates)]
        tallies["dense"].add(keys[0] in gold, Usage(), time.perf_counter() - start)
        ceiling += bool(gold & set(keys))
        for label, how in (("shared", judged), ("independent", independent)):
            best, usage, seconds = await how(navigator, query.to_query(), keys)
            tallies[label].add(best in gold, usage, seconds)
        print(f"{name} {number}/{len(asked)}: " + ", ".join(
            f"{label} {t.hits}" for label, t in tallies.items()), file=sys.stderr, flush=True)
    await navigator.aclose()
    tree.close()
    n = len(asked)
    return {
        "dataset": name, "judge": judge_id, "queries": n, "candidates": candidates,
        "gold_in_candidates": ceiling,
        "orders": {label: {
            "hit@1": t.hits, "requests_per_query": t.usage.requests / n,
            "input_tokens_per_query": t.usage.input_tokens / n,
            "tokens_estimated": t.usage.estimated,
            "seconds_p50": statistics.median(t.seconds), "seconds_mean": statistics.fmean(t.seconds),
        } for label, t in tallies.items()},
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | order | Hit@1 | requests / query | input tokens / query | s / query (p50) |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        for label, order in row["orders"].items():
            tokens = ("—" if label == "dense" else
                      f"{order['input_tokens_per_query']:,.0f}"
                      + (" (est.)" if order["tokens_estimated"] else ""))
            requests = "—" if label == "dense" else f"{order['requests_per_query']:.1f}"
            lines.append(f"| {row['dataset']} | {label} | {order['hit@1']} / {row['queries']} "
                         f"(gold in top {row['candidates']}: {row['gold_in_candidates']}) | "
                         f"{requests} | {tokens} | {order['seconds_p50']:.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", default="embedded", help="a judge id (default embedded)")
    parser.add_argument("--dataset", action="append", help="dataset folder names "
                        "(default xquad-en and conditionalqa-dev)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    judge = load_judge(args.judge)
    rows = [asyncio.run(run_dataset(name, args.data, args.judge, args.queries, args.candidates, judge))
            for name in args.dataset or ["xquad-en", "conditionalqa-dev"]]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
