"""Per-step profile of the offline walk: milliseconds per walk in each step.

Wraps the walk's steps (levels, requests, the embedded judge's scoring, hybrid retrieval,
entries, term counts, duplicate collapse) with wall-clock timers, runs WARM queries through
the ``decisionrag`` and ``dense`` systems exactly as ``eval`` builds them, then N more with
the timers on for the walk only, and prints the p50 of both systems and each step's mean.
Timers nest (a level includes its requests), so the rows do not add up.

    python benchmarks/walk_stages.py ../shared/data/mtrag-cloud-pooled --warm 30 --queries 150
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from decisionrag import _retrievers, _words
from decisionrag._app._evaluate import dataset_tree
from decisionrag._app._systems import SystemFactory
from decisionrag._eval._data import load_dataset
from decisionrag._judges import _embedded, _evidence, load_judge
from decisionrag._navigate import _level, _ranking, _render, _view, _walk
from decisionrag._tree import Tree

SECONDS: defaultdict[str, float] = defaultdict(float)
TIMING = [False]

STEPS: list[tuple[Any, str, str, bool]] = [
    (_render, "clean_line", "clean_line", False),
    (_words, "term_counts", "term_counts (texts new to the walk)", False),
    (_embedded.EmbeddedJudge, "query_vector", "query encoding", False),
    (_embedded.EmbeddedJudge, "_binary_many", "embedded binary_many", False),
    (_embedded.EmbeddedJudge, "_lexical", "lexical scores", False),
    (_embedded.EmbeddedJudge, "_usage", "usage bookkeeping", False),
    (_evidence.RowsPlan, "fill", "plan fill (stored rows)", False),
    (_retrievers.HybridRetriever, "retrieve", "hybrid retrieve", False),
    (_retrievers.HybridRetriever, "ranked_ids", "hybrid candidates (by node id)", False),
    (_retrievers.BM25Retriever, "ranked_ids", "  bm25", False),
    (_retrievers.DenseRetriever, "ranked_ids", "  dense", False),
    (_retrievers, "rrf", "  rrf (keyed)", False),
    (_retrievers, "rrf_ids", "  rrf_ids", False),
    (_view.TreeView, "entries", "view entries", False),
    (_walk, "collapse_duplicates", "collapse duplicates", False),
    (_level, "pack", "pack", False),
    (_render.RequestPart, "request", "RequestPart.request", False),
    (_ranking.Ranking, "of", "Ranking.of", False),
    (_walk.Walk, "judge_pages", "page stage", True),
    (_walk.Walk, "heading_stage", "heading stage", True),
    (_walk.Walk, "judge_passages", "passage stage", True),
    (_walk.Walk, "expand", "expand", True),
    (_walk.Walk, "finish", "finish", True),
    (_ranking, "rescore", "rescore", True),
]


def timed(function: Callable[..., Any], label: str, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                if TIMING[0]:
                    SECONDS[label] += time.perf_counter() - start

        return awaited

    def called(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            if TIMING[0]:
                SECONDS[label] += time.perf_counter() - start

    return called


def install_timers() -> None:
    for owner, name, label, is_async in STEPS:
        function = getattr(owner, name, None)
        if function is not None:  # a step older code does not have is skipped
            setattr(owner, name, timed(function, label, is_async))


async def profile(dataset_path: str, warm: int, queries: int) -> None:
    dataset = load_dataset(dataset_path).limit(warm + queries)
    factory = SystemFactory(Tree.open(dataset_tree(dataset)), load_judge("embedded"))
    walk, dense = factory.build("decisionrag"), factory.build("dense")
    asked = list(dataset.queries)
    for query in asked[:warm]:
        await walk.run(query, 10)
        await dense.run(query, 10)
    walks, denses = [], []
    for query in asked[warm:]:
        TIMING[0] = True
        start = time.perf_counter()
        await walk.run(query, 10)
        walks.append(time.perf_counter() - start)
        TIMING[0] = False
        start = time.perf_counter()
        await dense.run(query, 10)
        denses.append(time.perf_counter() - start)
    walk_p50, dense_p50 = statistics.median(walks), statistics.median(denses)
    print(
        f"{len(walks)} queries: walk p50 {walk_p50 * 1e3:.1f} ms (mean "
        f"{statistics.mean(walks) * 1e3:.1f}), dense p50 {dense_p50 * 1e3:.1f} ms, "
        f"ratio {walk_p50 / dense_p50:.2f}"
    )
    for label, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
        print(f"  {label:38s} {seconds / len(walks) * 1e3:7.2f} ms/walk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--queries", type=int, default=150)
    arguments = parser.parse_args()
    install_timers()
    asyncio.run(profile(arguments.dataset, arguments.warm, arguments.queries))


if __name__ == "__main__":
    main()
