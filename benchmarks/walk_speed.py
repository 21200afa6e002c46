"""Offline walk speed: the embedded judge's walk against flat dense search, per query.

The two systems `decisionrag eval DATASET --systems decisionrag,dense` compares, assembled as
eval assembles them (one tree from eval's cache, one `FlatRetrievers`), run over the first
`--queries` queries one after the other. Each query is timed in wall-clock seconds and in
CPU seconds of this process (all its threads): on a machine shared with other work the CPU
time is what the code costs, the wall time what the load adds. With `--profile`, cProfile's
top functions of the walks (the judge then answers on the event loop's thread, which
cProfile sees, instead of its own), and each stage's time from the walks' traces (judge
wait and local work) are printed too.

    decisionrag eval ../shared/data/conditionalqa-dev --limit 1 --systems dense   # the tree
    python benchmarks/walk_speed.py ../shared/data/conditionalqa-dev --queries 40 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import time
from collections import defaultdict
from typing import Any

from decisionrag._app._evaluate import dataset_tree
from decisionrag._app._systems import SystemFactory
from decisionrag._eval._data import load_dataset
from decisionrag._judges import load_judge
from decisionrag._tree import Tree


async def timed(system: Any, query: Any) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    found = await system.run(query, 10)
    return time.perf_counter() - wall, time.process_time() - cpu, found


async def _inline(work: Any, request: Any) -> Any:
    return work(request)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--warm-up", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="tottime", help="cProfile's order (tottime, cumulative)")
    parser.add_argument("--top", type=int, default=20, help="functions the profile lists")
    args = parser.parse_args()

    dataset = load_dataset(args.dataset).limit(args.queries + args.warm_up)
    tree = Tree.open(dataset_tree(dataset))
    factory = SystemFactory(tree, load_judge("embedded"))
    walk, dense = factory.build("decisionrag"), factory.build("dense")
    queries = list(dataset.queries)
    for query in queries[: args.warm_up]:
        await walk.run(query, 10)
        await dense.run(query, 10)
    times: dict[str, list[tuple[float, float]]] = {"decisionrag": [], "dense": []}
    judge_wait: dict[str, float] = defaultdict(float)
    local: dict[str, float] = defaultdict(float)
    first_wait: dict[str, float] = defaultdict(float)
    first_local: dict[str, float] = defaultdict(float)
    profile = cProfile.Profile() if args.profile else None
    navigator = walk.navigator  # type: ignore[attr-defined]
    timed_results: list[Any] = []
    retrieve = navigator.aretrieve

    async def recorded(*given: Any, **options: Any) -> Any:  # the timed walk's trace
        result = await retrieve(*given, **options)
        timed_results.append(result)
        return result

    navigator.aretrieve = recorded
    if profile is not None:  # cProfile sees one thread: answer on the event loop's instead
        navigator.judge._on_worker = _inline
    for query in queries[args.warm_up:]:
        if profile is not None:
            profile.enable()
        wall, cpu, _ = await timed(walk, query)
        if profile is not None:
            profile.disable()
        times["decisionrag"].append((wall, cpu))
        for stage in timed_results.pop().trace.stages:
            first_wait[stage.name] += stage.seconds
            first_local[stage.name] += stage.local_seconds
        wall, cpu, _ = await timed(dense, query)
        times["dense"].append((wall, cpu))
        result = await retrieve(query.to_query(), k=10)
        for stage in result.trace.stages:
            judge_wait[stage.name] += stage.seconds
            local[stage.name] += stage.local_seconds
    n = len(queries) - args.warm_up
    medians = {}
    for name, pairs in times.items():
        medians[name] = (statistics.median(w for w, _ in pairs), statistics.median(c for _, c in pairs))
        print(f"{name:12s} p50 wall {medians[name][0] * 1000:8.1f} ms   p50 cpu "
              f"{medians[name][1] * 1000:8.1f} ms   ({n} queries)")
    print(f"ratio decisionrag / dense: wall {medians['decisionrag'][0] / medians['dense'][0]:.2f}, "
          f"cpu {medians['decisionrag'][1] / medians['dense'][1]:.2f}")
    print("\nper stage (mean per query, wall, traced; the timed walk, then a second walk of "
          "the same query):")
    for name in first_wait:
        print(f"  {name:14s} judge {first_wait[name] / n * 1000:7.1f} ms   "
              f"local {first_local[name] / n * 1000:7.1f} ms   |   again: judge "
              f"{judge_wait[name] / n * 1000:7.1f} ms   local {local[name] / n * 1000:7.1f} ms")
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.top)
        print(out.getvalue())
    tree.close()


if __name__ == "__main__":
    asyncio.run(main())
