"""Navigation latency against the floor of the paper's Eq. 4: stages × one request's latency.

    python benchmarks/latency.py        # NQ shape: 1,000 clusters, 108,626 pages, 2.68 M paragraphs
    python benchmarks/latency.py --judge "simulated:latency=0.2,max_questions=64"   # self-hosted
    python benchmarks/latency.py --pages 10000 --paragraphs 250000 --clusters 100   # quick

Builds (once, cached at --tree) a three-level tree clusters → pages → paragraphs of Natural
Questions shape with synthetic text, then runs --queries queries one at a time with the
`nq` preset and the simulated judge (every request takes `latency` seconds, its own scoring
included; requests overlap up to the judge's concurrency, 256 by default). Prints per-query p50/p90, the floor
(sequential stages × latency), their ratio, and where the rest goes: per stage, the time
waiting for the judge against its floor, and the time outside the judge (tree reads,
rendering, splitting, sorting).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from decisionrag._judges import load_judge
from decisionrag._navigate import Navigator, get_preset
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter

NQ_CLUSTERS, NQ_PAGES, NQ_PARAGRAPHS = 1_000, 108_626, 2_680_000
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]


class Words:
    """A pseudo-word vocabulary and a long Zipf-like text to cut paragraphs from."""

    def __init__(self, rng: np.random.Generator, size: int = 4_000, text_words: int = 1_000_000) -> None:
        vocab: set[str] = set()
        while len(vocab) < size:
            vocab.add("".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), rng.integers(1, 4))))
        self.vocab = sorted(vocab)
        weights = 1.0 / np.arange(1, size + 1)
        ids = rng.choice(size, size=text_words, p=weights / weights.sum())
        words = [self.vocab[i] for i in ids]
        self.text = " ".join(words)
        self.starts = np.concatenate(([0], np.cumsum([len(w) + 1 for w in words])))
        self.rng = rng

    def paragraphs(self, n: int) -> list[str]:
        sizes = self.rng.integers(20, 41, n)
        firsts = self.rng.integers(0, len(self.starts) - 42, n)
        return [
            self.text[self.starts[f] : self.starts[f + s] - 1] for f, s in zip(firsts, sizes, strict=True)
        ]

    def title(self, lo: int = 2, hi: int = 5) -> str:
        n = int(self.rng.integers(lo, hi + 1))
        return " ".join(self.vocab[i].capitalize() for i in self.rng.integers(0, len(self.vocab), n))


def paragraph_counts(rng: np.random.Generator, pages: int, paragraphs: int) -> list[int]:
    raw = rng.lognormal(0.0, 1.0, pages)
    counts = np.maximum(1, np.floor(raw / raw.sum() * paragraphs)).astype(int)
    counts[np.argmax(counts)] += paragraphs - int(counts.sum())
    return counts.tolist()


def build(path: Path, clusters: int, pages: int, paragraphs: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    words = Words(rng)
    counts = paragraph_counts(rng, pages, paragraphs)
    started = time.perf_counter()
    with TreeWriter(path) as writer:
        for cluster in range(clusters):
            group = writer.add_group(f"Cluster {cluster}", key=f"g:c{cluster}")
            first, last = cluster * pages // clusters, (cluster + 1) * pages // clusters
            titles = []
            for page in range(first, last):
                title = words.title()
                titles.append(title)
                passages = [
                    PassageSpec(text, key=f"p{page}-{i}")
                    for i, text in enumerate(words.paragraphs(counts[page]))
                ]
                writer.add_document(DocumentSpec(title, passages, key=f"p{page}"), parent=group)
            writer.set_description(group, "Pages about " + ", ".join(titles[:12]) + ".")
    print(f"built {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def queries(tree: Tree, n: int, seed: int = 1) -> list[str]:
    """Questions made of a few words of random paragraphs (so some overlap exists)."""
    rng = np.random.default_rng(seed)
    total = tree.counts["document"]
    found = []
    for page in rng.integers(0, total, n).tolist():
        text = tree.passages(tree.node(f"p{page}").id, 1)[0].text.split()
        found.append("what is " + " ".join(text[:6]))
    return found


async def run(tree: Tree, judge_id: str, n: int, preset: str, fresh: bool, warm: bool) -> None:
    judge = load_judge(judge_id)
    navigator = Navigator(tree, judge, get_preset(preset, tree, judge))
    if warm:
        started = time.perf_counter()
        cached = navigator.warm()
        print(f"warmed {cached:,} nodes in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    latency = float(getattr(judge, "latency", 0.0))
    totals, floors, stage_rows = [], [], defaultdict(list)
    outside = []
    for question in queries(tree, n):
        if fresh:  # no group's children cached from earlier queries
            navigator = Navigator(tree, judge, navigator.preset)
        result = await navigator.aretrieve(question, k=10)
        totals.append(result.seconds)
        floors.append(result.trace.sequential_stages * latency)
        outside.append(result.seconds - sum(s.seconds for s in result.trace.stages))
        for stage in result.trace.stages:
            stage_rows[stage.name].append(stage)
    report(
        judge_id,
        f"{preset}{' (fresh Navigator per query)' if fresh else ''}{' (Navigator warmed)' if warm else ''}",
        tree,
        totals,
        floors,
        outside,
        stage_rows,
        latency,
    )


def report(
    judge_id: str,
    preset: str,
    tree: Tree,
    totals: list[float],
    floors: list[float],
    outside: list[float],
    stage_rows: dict[str, list],
    latency: float,
) -> None:
    counts = tree.counts
    p50, floor = statistics.median(totals), statistics.median(floors)
    p90 = sorted(totals)[max(0, math.ceil(0.9 * len(totals)) - 1)]
    print(
        f"tree: {counts.get('group', 0):,} clusters, {counts['document']:,} pages, "
        f"{counts['passage']:,} paragraphs; judge {judge_id}; preset {preset}; "
        f"{len(totals)} queries\n"
    )
    print("| metric | value |\n|---|---|")
    print(f"| p50 query time | {p50:.3f} s |\n| p90 query time | {p90:.3f} s |")
    print(f"| sequential stages × latency (floor) | {floor:.3f} s |")
    print(f"| **ratio p50 / floor** | **{p50 / floor:.3f}** |" if floor else "| ratio | n/a |")
    print(f"| time outside the judge (median) | {statistics.median(outside):.3f} s |\n")
    print(
        "| stage | candidates | requests | local work before sending (mean) | judge wait (mean) "
        "| floor | input tokens |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, stages in stage_rows.items():
        mean = statistics.fmean
        print(
            f"| {name} | {mean(s.n_candidates for s in stages):,.0f} "
            f"| {mean(s.requests for s in stages):.1f} "
            f"| {mean(s.local_seconds for s in stages):.3f} s "
            f"| {mean(s.seconds for s in stages):.3f} s | {latency:.3f} s "
            f"| {mean(s.input_tokens for s in stages):,.0f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path("out/bench/nq_shape.tree"))
    parser.add_argument("--clusters", type=int, default=NQ_CLUSTERS)
    parser.add_argument("--pages", type=int, default=NQ_PAGES)
    parser.add_argument("--paragraphs", type=int, default=NQ_PARAGRAPHS)
    parser.add_argument("--judge", default="simulated:latency=0.2")
    parser.add_argument("--preset", default="nq")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--fresh", action="store_true", help="a new Navigator (empty caches) per query")
    parser.add_argument("--warm", action="store_true", help="Navigator.warm() before the first query")
    args = parser.parse_args()
    if not args.tree.is_file():
        build(args.tree, args.clusters, args.pages, args.paragraphs)
    with Tree.open(args.tree) as tree:
        asyncio.run(run(tree, args.judge, args.queries, args.preset, args.fresh, args.warm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
