"""Input tokens per query on the NQ-shaped tree, split into shared context and question text,
for the paper's question wording and the compact form (``--questions compact``).

    python benchmarks/token_thrift.py                 # 20 queries, both forms
    python benchmarks/token_thrift.py --queries 5 --tree out/bench/nq_shape.tree

Uses the tree of benchmarks/latency.py (built there once and cached at --tree: 1,000 clusters
→ 108,626 pages → 2.68 M paragraphs), the `nq` preset, and a judge with hosted Jev's limits
(no question limit, 64,000 tokens a request) that counts every request's tokens with the
library's estimate (4 characters a token): context = the rendered state, questions = the
per-candidate question texts (binary) or the question and option labels (choice). Billing
is Jev's: $0.042 per million input tokens, questions included.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from decisionrag._judges import BinaryRequest, BinaryResult, ChoiceRequest, ChoiceResult
from decisionrag._judges._base import estimate_tokens
from decisionrag._judges._testing import HOSTED_LIMITS, SimulatedJudge
from decisionrag._navigate import Navigator, get_preset
from latency import NQ_CLUSTERS, NQ_PAGES, NQ_PARAGRAPHS, build, queries

PRICE = 0.042  # USD per million input tokens (Jev)


class CountingJudge(SimulatedJudge):
    """Hosted-Jev limits, no latency; books context and question tokens per stage."""

    def __init__(self) -> None:
        super().__init__(0.0, limits=HOSTED_LIMITS)
        self.context = 0
        self.questions = 0

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        self.context += estimate_tokens(request.context)
        self.questions += estimate_tokens("".join(request.questions))
        return await super().binary(request)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        self.context += estimate_tokens(request.context)
        self.questions += estimate_tokens(request.question + "".join(request.options))
        return await super().choice(request)


async def measure(navigator: Navigator, texts: list[str]) -> dict[str, list[float]]:
    judge = navigator.judge
    assert isinstance(judge, CountingJudge)
    rows: dict[str, list[float]] = defaultdict(list)
    for text in texts:
        judge.context = judge.questions = 0
        result = await navigator.aretrieve(text, k=10)
        rows["context"].append(judge.context)
        rows["questions"].append(judge.questions)
        rows["total"].append(judge.context + judge.questions)
        rows["reported"].append(result.usage.input_tokens)
        for stage in result.trace.stages:
            rows[f"stage:{stage.name}"].append(stage.input_tokens)
        rows["top1"].append(hash(tuple(result.ids[:1])))
    return rows


def wordpiece(tree: object) -> None:
    """Question lengths under a real subword tokenizer too (the bundled all-MiniLM-L6-v2
    WordPiece), since chars/4 undercounts digits and short strings."""
    try:
        from transformers import AutoTokenizer

        from decisionrag._embed import default_model_path
    except ImportError:
        return
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    except Exception:
        return
    from decisionrag._navigate._render import questions

    print("\n| page question (n = 12,345) | chars/4 estimate | WordPiece tokens |")
    print("|---|---|---|")
    for form in ("paper", "compact"):
        text = questions("document", "qa", 12_345, form)[-1]
        print(f"| {form}: `{text}` | {estimate_tokens(text)} | {len(tokenizer.tokenize(text))} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path("out/bench/nq_shape.tree"))
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--preset", default="nq")
    args = parser.parse_args()
    if not args.tree.exists():
        args.tree.parent.mkdir(parents=True, exist_ok=True)
        build(args.tree, NQ_CLUSTERS, NQ_PAGES, NQ_PARAGRAPHS)
    from decisionrag._tree import Tree

    with Tree.open(args.tree) as tree:
        texts = queries(tree, args.queries)
        results = {}
        for form in ("paper", "compact"):
            judge = CountingJudge()
            preset = get_preset(args.preset, tree, judge).with_overrides(questions=form)
            results[form] = asyncio.run(measure(Navigator(tree, judge, preset), texts))
    print(f"{args.queries} queries, preset {args.preset}, tree {args.tree} "
          f"({NQ_PAGES:,} pages); mean input tokens per query\n")
    print("| question form | context | questions | total | questions share | cost per query |")
    print("|---|---|---|---|---|---|")
    for form, rows in results.items():
        context, questions = statistics.mean(rows["context"]), statistics.mean(rows["questions"])
        total = context + questions
        print(f"| {form} | {context:,.0f} | {questions:,.0f} | {total:,.0f} | {questions / total:.1%} | "
              f"{total * PRICE / 1e6 * 100:.2f} ¢ |")
    stages = sorted({k for rows in results.values() for k in rows if k.startswith("stage:")})
    print("\n| stage | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for key in stages:
        cells = [f"{statistics.mean(rows[key]):,.0f}" if key in rows else "-" for rows in results.values()]
        print(f"| {key[6:]} | " + " | ".join(cells) + " |")
    wordpiece(tree)
    same = sum(a == b for a, b in zip(results["paper"]["top1"], results["compact"]["top1"], strict=True))
    print(f"\nsame top-1 passage under both forms: {same}/{args.queries} "
          "(the simulated judge ignores question text; see docs for what this does not measure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
