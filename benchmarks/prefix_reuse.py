"""Prefix reuse: one context with its N questions sent as one request, against N requests of
one question each over the same context (one at a time), through a judge: `jev-compatible:URL`
(a System One server; MODEL is the name it serves) or `local:FOLDER` (the in-process judge,
which encodes the context once a request and packs the questions after it). A judge that
shares the context between the questions of a request wins by about N; one that reads it once
per question (or caches prefixes across requests) shows no difference.

    python benchmarks/prefix_reuse.py http://127.0.0.1:8000 MODEL \
        --corpus ../shared/data/xquad-en/corpus.jsonl --passages 2 --questions 8 --repeats 2
    python benchmarks/prefix_reuse.py local:FOLDER - --passages 2 --questions 8 --repeats 2

Prints seconds and the server's reported input tokens for both shapes (median of repeats).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from decisionrag._judges import BinaryRequest, load_judge


def context_and_questions(corpus: Path, passages: int, questions: int) -> tuple[str, list[str]]:
    rows = [json.loads(line) for line, _ in zip(corpus.open(encoding="utf-8"), range(passages),
                                                strict=False)]
    context = "\n\n".join(f"[{i + 1}] {row['text']}" for i, row in enumerate(rows))
    asked = [f"Is the information needed to answer 'question {q + 1}' in passage "
             f"{q % passages + 1}?" for q in range(questions)]
    return context, asked


async def once(target: str, model: str, context: str, questions: list[str], split: bool,
               timeout: float) -> tuple[float, int, int]:
    if target.startswith("local:"):
        judge = load_judge(target)
    else:
        judge = load_judge(f"jev-compatible:{target}", model=model, concurrency=1,
                           timeout=timeout, deadline=timeout * 3)
    try:
        start = time.perf_counter()
        asked = [(q,) for q in questions] if split else [tuple(questions)]
        results = [await judge.binary(BinaryRequest(context, part)) for part in asked]
        return (time.perf_counter() - start, sum(r.usage.input_tokens for r in results),
                sum(r.usage.requests for r in results))
    finally:
        await judge.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a System One server's root URL, or local:FOLDER")
    parser.add_argument("model", help="the model name the server serves ('-' for local:)")
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/xquad-en/corpus.jsonl"))
    parser.add_argument("--passages", type=int, default=4)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    context, questions = context_and_questions(args.corpus, args.passages, args.questions)
    shapes = {"one request of N questions": False, "N requests of one question": True}
    rows = {}
    for name, split in shapes.items():
        runs = [asyncio.run(once(args.url, args.model, context, questions, split, args.timeout))
                for _ in range(args.repeats)]
        rows[name] = (statistics.median(r[0] for r in runs), runs[0][1], runs[0][2])
    print(f"context: {args.passages} passages, {len(context)} characters; N = {len(questions)}")
    for name, (seconds, tokens, requests) in rows.items():
        print(f"{name:28s} {seconds:7.2f} s  {tokens:6d} input tokens  {requests} request(s)")
    one, many = rows["one request of N questions"][0], rows["N requests of one question"][0]
    print(f"ratio (N requests / one request): {many / one:.2f}")


if __name__ == "__main__":
    main()
