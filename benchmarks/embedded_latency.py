"""Latency of the embedded judge on one request of 50 candidates.

Candidates are 50 consecutive passages of the shared ConditionalQA corpus (realistic
lengths) or, with ``--dataset xquad-en``, Wikipedia paragraphs (long). After a warm-up
(model load and first inference), each mode is repeated and timed inside one event loop:

* cold: a fresh judge without any cache, so the query and the 50 texts are encoded;
* stored vectors: a fresh judge given candidates that carry their stored vectors (as the
  walk over a tree built with vectors does), so only the query is encoded;
* memory cache: the same judge again (the in-process LRU holds the vectors).

    .venv/bin/python benchmarks/embedded_latency.py [--dataset conditionalqa-dev --repeats 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import torch

from decisionrag._embed import load_encoder
from decisionrag._judges._base import BinaryRequest, Candidate, ChoiceRequest
from decisionrag._judges._embedded import EmbeddedJudge

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def load_request(dataset: str, count: int, offset: int) -> tuple[str, list[Candidate]]:
    with (DATA / dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle][offset: offset + count]
    with (DATA / dataset / "queries.jsonl").open(encoding="utf-8") as handle:
        query = json.loads(handle.readline())["text"]
    return query, [Candidate(row["id"], row["text"]) for row in rows]


def binary_request(query: str, candidates: list[Candidate]) -> BinaryRequest:
    questions = tuple(f"Does Passage {i} contain the information?" for i in range(len(candidates)))
    return BinaryRequest("", questions, query, tuple(candidates))


async def timings(run: Callable[[], Awaitable[object]], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await run()
        times.append((time.perf_counter() - start) * 1000)
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


async def measure(query: str, candidates: list[Candidate], repeats: int, cold_repeats: int,
                  folder: Path) -> dict[str, list[float]]:
    encoder = load_encoder()
    request = binary_request(query, candidates)
    choice = ChoiceRequest("", "Which passage?", tuple(c.id for c in candidates), query,
                           tuple(candidates))
    await EmbeddedJudge(encoder).binary(request)  # warm-up: first inference
    warm = EmbeddedJudge(encoder)
    await warm.binary(request)  # fills this judge's LRU
    rows = encoder.encode([c.text for c in candidates])
    stored = binary_request(query, [Candidate(c.id, c.text, vectors=rows[i:i + 1])
                                    for i, c in enumerate(candidates)])
    return {
        "binary, cold (encode 51 texts)": await timings(
            lambda: EmbeddedJudge(encoder).binary(request), cold_repeats),
        "binary, stored vectors (new judge: encode the query)": await timings(
            lambda: EmbeddedJudge(encoder).binary(stored), repeats),
        "binary, memory cache": await timings(lambda: warm.binary(request), repeats),
        "choice, memory cache": await timings(lambda: warm.choice(choice), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="conditionalqa-dev")
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold-repeats", type=int, default=5)
    args = parser.parse_args()
    query, candidates = load_request(args.dataset, args.candidates, args.offset)
    lengths = [len(c.text) for c in candidates]
    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(measure(query, candidates, args.repeats, args.cold_repeats,
                                      Path(folder)))
    print(f"{len(candidates)} candidates from {args.dataset} (text length median "
          f"{statistics.median(lengths):.0f} chars, max {max(lengths)}); torch threads "
          f"{torch.get_num_threads()}; after a warm-up\n")
    print("| mode | runs | median ms | p90 ms |")
    print("|---|---:|---:|---:|")
    for mode, values in results.items():
        print(f"| {mode} | {len(values)} | {statistics.median(values):.1f} | {p90(values):.1f} |")


if __name__ == "__main__":
    main()
