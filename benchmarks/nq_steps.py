"""Local work per query on the NQ-shaped tree of `latency.py`, step by step (milliseconds).

Builds nothing: reads the tree `benchmarks/latency.py` built (``--tree``), runs WARM queries,
then N more with wall-clock timers around the steps that run before a level's requests go
out (entries, packing, rendering, ranking, the store's reads), and prints each step's mean
per query and each stage's local work (`StageTrace.local_seconds`). Timers nest (`packed`
includes `pack`), so the rows do not add up. The simulated judge's latency does not enter
local work; a short one makes the run quick.

    python benchmarks/latency.py --queries 20     # builds out/bench/nq_shape.tree once
    python benchmarks/nq_steps.py --warm 20 --queries 40
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from decisionrag._judges import load_judge
from decisionrag._navigate import Navigator, _level, _ranking, _render, _view, get_preset
from decisionrag._tree import Tree, _reader

sys.path.insert(0, str(Path(__file__).parent))
from latency import queries  # the same questions as latency.py (beside this file)
from walk_stages import SECONDS, TIMING, timed  # the same wall-clock timers

STEPS: list[tuple[Any, str, str]] = [  # (owner, attribute, label); older code may lack some
    (_view.TreeView, "entries", "view entries"),
    (_view.TreeView, "_new_entry", "  new entries (first sightings)"),
    (_level.LevelEngine, "packed", "packed (pack kept or made)"),
    (_level, "pack", "  pack"),
    (getattr(_render, "RequestPart", None), "of", "  RequestPart.of"),
    (_render, "binary_request", "binary_request"),
    (_render, "render_context", "render_context"),
    (_ranking.Ranking, "of", "Ranking.of"),
    (_reader.Tree, "passages_of", "store: passages of pages"),
]


async def profile(tree_path: Path, judge_id: str, warm: int, n: int) -> None:
    for owner, name, label in STEPS:
        function = getattr(owner, name, None)
        if function is not None:  # a step older code does not have is skipped
            setattr(owner, name, timed(function, label, False))
    tree = Tree.open(tree_path)
    judge = load_judge(judge_id)
    navigator = Navigator(tree, judge, get_preset("nq", tree, judge))
    asked = queries(tree, warm + n)
    for question in asked[:warm]:
        await navigator.aretrieve(question, k=10)
    local: defaultdict[str, list[float]] = defaultdict(list)
    TIMING[0] = True
    for question in asked[warm:]:
        result = await navigator.aretrieve(question, k=10)
        for stage in result.trace.stages:
            local[stage.name].append(stage.local_seconds)
    TIMING[0] = False
    print(f"{n} queries after {warm} ({tree_path.name}, {judge_id}); ms per query")
    for name, values in local.items():
        print(f"  stage {name:30s} local work median {statistics.median(values) * 1e3:6.2f}, "
              f"mean {statistics.fmean(values) * 1e3:6.2f}")
    for label, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
        print(f"  {label:38s} {seconds / n * 1e3:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path("out/bench/nq_shape.tree"))
    parser.add_argument("--judge", default="simulated:latency=0.05")
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--queries", type=int, default=40)
    arguments = parser.parse_args()
    asyncio.run(profile(arguments.tree, arguments.judge, arguments.warm, arguments.queries))


if __name__ == "__main__":
    main()
