"""Time to a clear error or a correct/degraded result, for every fault of the fault server.

For each fault of `decisionrag._judges._faults.FaultServer` (a real HTTP server on 127.0.0.1)
one query walks a small tree (6 pages, 4 page requests of 2 candidates: ``max_questions=2``)
with the judge's default retry policy and a per-query deadline (``--deadline``, default 10 s).
The outcome is ``same`` (the ranking equals the clean server's), ``degraded`` (stages and
unjudged counts), or the error's class and message; the wall time is measured around the
whole query, and ``within`` says whether it finished inside the deadline (+0.5 s slack for
closing connections).

    .venv/bin/python benchmarks/faults.py [--deadline 10] [--markdown]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from decisionrag import Navigator, Tree, build_tree, load_judge
from decisionrag._errors import DecisionRAGError
from decisionrag._judges._faults import FAULTS, POISON, FaultServer

TOPICS = ("passports", f"taxes {POISON}", "visas", "pensions", "driving licences", "benefits")
QUESTION = "How do I renew my passport?"


def corpus(folder: Path) -> Path:
    for i, topic in enumerate(TOPICS):
        (folder / f"{i}.md").write_text(
            f"# {topic}\n\n## Renew\n\nHow to renew {topic}.\n\n## Fees\n\nFees for {topic}.\n")
    return build_tree([folder], folder / "faults.tree").path


def run_one(tree: Tree, judge_id: str, deadline: float) -> tuple[str, float, list[str]]:
    return asyncio.run(_run_one(tree, judge_id, deadline))


async def _run_one(tree: Tree, judge_id: str, deadline: float) -> tuple[str, float, list[str]]:
    judge = load_judge(judge_id, max_questions=2)
    start = time.monotonic()
    try:
        result = await Navigator(tree, judge, "flat").aretrieve(QUESTION, k=5, deadline=deadline)
    except DecisionRAGError as exc:
        return f"{type(exc).__name__}: {shorten(str(exc))}", time.monotonic() - start, []
    finally:
        await judge.aclose()
    seconds = time.monotonic() - start
    if result.degraded:
        stages = ", ".join(f"{stage} {n} unjudged" for stage, n in result.degraded.items())
        return f"degraded ({stages})", seconds, result.ids
    return "ok", seconds, result.ids


def shorten(text: str, limit: int = 110) -> str:
    text = text.replace("|", "/")
    for noise in ("jev-compatible:http://127.0.0.1:",):
        while noise in text:
            start = text.index(noise)
            end = text.find(":", start + len(noise))
            text = text[:start] + "judge" + text[end:]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, FaultServer() as server:
        tree = Tree.open(corpus(Path(folder)))
        clean = run_one(tree, server.judge_id("ok"), args.deadline)[2]
        rows = []
        for fault in FAULTS:
            outcome, seconds, ids = run_one(tree, server.judge_id(fault), args.deadline)
            if outcome == "ok":
                outcome = "same ranking as the clean server" if ids == clean else "DIFFERENT ranking"
            within = "yes" if seconds <= args.deadline + 0.5 else "NO"
            rows.append((fault, f"{seconds:.2f}", within, str(server.counts[fault]), outcome))
        tree.close()
    header = ("fault", "seconds", "within deadline", "requests seen", "outcome")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
