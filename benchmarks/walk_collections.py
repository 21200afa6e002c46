"""Where Python's collector runs during NQ-shaped walks: in the judge's waits, or in the
walk's own work between an answer and the next requests (where it adds to the query's time).

Reads the tree `benchmarks/latency.py` built (``--tree``), runs its questions one at a time
with the `nq` preset and the simulated judge, and times every collection (`gc.callbacks`).
A collection is "in a wait" while a level's requests are out (from `LevelEngine.sending`
until the level's answers are back), else "in the walk". Prints, per query, the time over
the floor and the collections' milliseconds on each side, then their medians.

    python benchmarks/latency.py --queries 20     # builds out/bench/nq_shape.tree once
    python benchmarks/walk_collections.py --queries 20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from decisionrag._judges import load_judge
from decisionrag._navigate import Navigator, _level, get_preset
from decisionrag._tree import Tree

sys.path.insert(0, str(Path(__file__).parent))
from latency import queries  # the same questions as latency.py (beside this file)

WAITING = [False]
SPENT = {"wait": 0.0, "walk": 0.0}
STARTED = [0.0]


def on_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        STARTED[0] = time.perf_counter()
    else:
        SPENT["wait" if WAITING[0] else "walk"] += time.perf_counter() - STARTED[0]


def install() -> None:
    """Mark the waits: from the moment a level's requests go out until its answers are in."""
    engine = _level.LevelEngine
    sending = engine.sending

    def marked_sending(self: Any, stage: Any) -> float:
        WAITING[0] = True
        return sending(self, stage)

    def answered(function: Any) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            finally:
                WAITING[0] = False
        return wrapper

    engine.sending = marked_sending  # type: ignore[method-assign]
    engine.judge_entries = answered(engine.judge_entries)  # type: ignore[method-assign]
    engine.send_choice = answered(engine.send_choice)  # type: ignore[method-assign]


async def run(tree_path: Path, judge_id: str, n: int) -> None:
    install()
    tree = Tree.open(tree_path)
    judge = load_judge(judge_id)
    latency = float(getattr(judge, "latency", 0.0))
    navigator = Navigator(tree, judge, get_preset("nq", tree, judge))
    gc.callbacks.append(on_collection)
    rows = []
    for question in queries(tree, n):
        SPENT.update(wait=0.0, walk=0.0)
        result = await navigator.aretrieve(question, k=10)
        over = result.seconds - result.trace.sequential_stages * latency
        rows.append((over * 1e3, SPENT["walk"] * 1e3, SPENT["wait"] * 1e3))
    gc.callbacks.remove(on_collection)
    print(f"{n} queries ({tree_path.name}, {judge_id}); ms per query")
    print("| query | over the floor | collections in the walk | in the waits |\n|---|---|---|---|")
    for i, (over, walk, wait) in enumerate(rows):
        print(f"| {i} | {over:.1f} | {walk:.2f} | {wait:.2f} |")
    medians = [statistics.median(row[k] for row in rows) for k in range(3)]
    print(f"| median | {medians[0]:.1f} | {medians[1]:.2f} | {medians[2]:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path("out/bench/nq_shape.tree"))
    parser.add_argument("--judge", default="simulated:latency=0.2")
    parser.add_argument("--queries", type=int, default=20)
    arguments = parser.parse_args()
    asyncio.run(run(arguments.tree, arguments.judge, arguments.queries))


if __name__ == "__main__":
    main()
