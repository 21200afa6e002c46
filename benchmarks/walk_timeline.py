"""When each step of an offline walk begins and ends: the median, over a dataset's queries,
of each mark's time since the walk started (milliseconds).

`walk_stages.py` sums each step's time; this shows where the steps fall on the walk's one
line of time, the judge's thread included: the query's encoding, the page level's products
and word scores on the judge's thread while the event loop waits, then the rescoring pass,
expansion, hybrid candidates and the passage stage on the loop's thread. Queries run in
conversation order through the ``decisionrag`` system exactly as ``eval`` builds it (all of
them; ``--limit`` for fewer), once each, so every walk encodes its query.

    python benchmarks/walk_timeline.py ../shared/data/mtrag-cloud-pooled
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from decisionrag._app._evaluate import dataset_tree
from decisionrag._app._systems import SystemFactory
from decisionrag._eval._data import load_dataset
from decisionrag._eval._runner import conversation_order
from decisionrag._judges import _embedded, load_judge
from decisionrag._navigate import _ranking, _walk
from decisionrag._tree import Tree

MARKS: dict[str, float] = {}
TIMING = [False]


def mark(name: str) -> None:
    """The first time `name` is reached in this walk (a step that runs twice keeps its first)."""
    if TIMING[0] and name not in MARKS:
        MARKS[name] = time.perf_counter()


def marked_async(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(f"{name} begins")
        try:
            return await function(*args, **kwargs)
        finally:
            mark(f"{name} ends")

    return wrapper


def marked(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(f"{name} begins")
        try:
            return function(*args, **kwargs)
        finally:
            mark(f"{name} ends")

    return wrapper


def install() -> None:
    walk = _walk.Walk
    for name in ("route", "judge_pages", "recover", "expand", "judge_passages", "finish"):
        setattr(walk, name, marked_async(getattr(walk, name), f"walk.{name}"))
    walk.with_extra_passages = marked(walk.with_extra_passages, "walk.with_extra_passages (hybrid)")
    _ranking.rescore = marked_async(_ranking.rescore, "rescoring pass")
    judge = _embedded.EmbeddedJudge
    level = "_binary_level" if hasattr(judge, "_binary_level") else "_binary_many"  # (older code)
    setattr(judge, level, marked(getattr(judge, level), "judge thread: a level"))
    judge.query_vector = marked(judge.query_vector, "judge thread: query encoding")
    judge._fill_own_and_best = marked(judge._fill_own_and_best, "judge: products")
    judge._lexical = marked(judge._lexical, "judge: word scores")


async def timeline(dataset_path: str, limit: int | None) -> None:
    dataset = load_dataset(dataset_path)
    if limit:
        dataset = dataset.limit(limit)
    factory = SystemFactory(Tree.open(dataset_tree(dataset)), load_judge("embedded"))
    system = factory.build("decisionrag")
    offsets: defaultdict[str, list[float]] = defaultdict(list)
    totals = []
    for conversation in conversation_order(list(dataset.queries)):
        system.start_conversation()
        for query in conversation:
            MARKS.clear()
            TIMING[0] = True
            start = time.perf_counter()
            await system.run(query, 10)
            totals.append(time.perf_counter() - start)
            TIMING[0] = False
            for name, at in MARKS.items():
                offsets[name].append((at - start) * 1e3)
    print(f"{len(totals)} walks, p50 {statistics.median(totals) * 1e3:.2f} ms; "
          "median ms since the walk began:")
    for name, values in sorted(offsets.items(), key=lambda item: statistics.median(item[1])):
        print(f"  {statistics.median(values):7.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--limit", type=int, default=None, help="the first N queries only")
    args = parser.parse_args()
    install()
    asyncio.run(timeline(args.dataset, args.limit))


if __name__ == "__main__":
    main()
