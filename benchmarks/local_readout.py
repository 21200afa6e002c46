"""Shared-context batched readout vs separate forward passes, on a small random causal LM.

50 yes/no questions over a ~1,000-token shared context (real ConditionalQA passages when
the shared data is present). The batched readout encodes the context once and reads all
questions in one packed pass (block attention mask, restarted positions); the baseline runs
one ordinary forward pass over context + question per question. Both read P(yes) from the
same " Yes"/" No" logits, so the answers must agree.

    .venv/bin/python benchmarks/local_readout.py [--layers 4 --hidden 256 --repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from decisionrag._embed import default_model_path
from decisionrag._judges._base import BinaryRequest
from decisionrag._judges._local import LocalJudge

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "conditionalqa-dev"


def passages(count: int) -> list[str]:
    if not (DATA / "corpus.jsonl").is_file():
        return [f"Paragraph {i}: rules, dates and forms that apply in case {i}." for i in range(count)]
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(count), handle, strict=False)]
    return [row["text"] for row in rows]


def shared_context(judge: LocalJudge, target_tokens: int, questions: int) -> str:
    query = "User question: can I appeal against my exam result, and how long does it take?"
    lines = [query]
    for number, text in enumerate(passages(400), start=1):
        lines.append(f"Passage {number}: {text}")
        if len(judge.context_ids("\n".join(lines))) >= target_tokens and number >= questions:
            break
    return "\n".join(lines)


def build_judge(layers: int, hidden: int) -> LocalJudge:
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(default_model_path())
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden,
        num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=hidden // 64,
        max_position_embeddings=2048, attn_implementation="sdpa",
    )
    return LocalJudge(transformers.LlamaForCausalLM(config), tokenizer)


def separate_passes(judge: LocalJudge, context: str, questions: list[str]) -> list[float]:
    context_ids = judge.context_ids(context)
    answers = []
    for question in questions:
        logits = judge.plain_readout(context_ids + judge.binary_question_ids(question),
                                     (judge.yes_token, judge.no_token))
        answers.append(float(torch.softmax(logits, dim=-1)[0]))
    return answers


def measure(function: Callable[[], list[float]]) -> tuple[float, float, list[float]]:
    """Wall and CPU seconds of one call (CPU time is less sensitive to other processes)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--context-tokens", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    judge = build_judge(args.layers, args.hidden)
    context = shared_context(judge, args.context_tokens, args.questions)
    questions = [f"Does Passage {n} contain information needed to answer the user's question?"
                 for n in range(1, args.questions + 1)]
    request = BinaryRequest(context, tuple(questions))
    asyncio.run(judge.binary(request))  # warm-up of both paths
    separate_passes(judge, context, questions[:2])
    runs: dict[str, list[tuple[float, float]]] = {"batched": [], "separate": []}
    for _ in range(args.repeats):  # interleaved, so that both see the same machine load
        *times, batched = measure(lambda: asyncio.run(judge.binary(request)).probabilities)
        runs["batched"].append((times[0], times[1]))
        *times, separate = measure(lambda: separate_passes(judge, context, questions))
        runs["separate"].append((times[0], times[1]))
    wall = {k: statistics.median(t[0] for t in v) for k, v in runs.items()}
    cpu = {k: statistics.median(t[1] for t in v) for k, v in runs.items()}
    context_tokens = len(judge.context_ids(context))
    question_tokens = sum(len(judge.binary_question_ids(q)) for q in questions)
    diff = max(abs(a - b) for a, b in zip(batched, separate, strict=True))
    print(f"model: random Llama, {args.layers} layers, hidden {args.hidden}, "
          f"torch threads {torch.get_num_threads()}; context {context_tokens} tokens, "
          f"{len(questions)} questions ({question_tokens} question tokens); "
          f"median of {args.repeats} interleaved runs after a warm-up\n")
    print("| readout | forward passes | tokens processed | wall s | CPU s | speed-up wall | "
          "speed-up CPU | max abs diff P(yes) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| shared context, batched | 2 | {context_tokens + question_tokens} | "
          f"{wall['batched']:.3f} | {cpu['batched']:.3f} | "
          f"{wall['separate'] / wall['batched']:.1f}x | {cpu['separate'] / cpu['batched']:.1f}x | "
          f"{diff:.2e} |")
    print(f"| separate passes | {len(questions)} | "
          f"{len(questions) * context_tokens + question_tokens} | {wall['separate']:.3f} | "
          f"{cpu['separate']:.3f} | 1.0x | 1.0x | - |")


if __name__ == "__main__":
    main()
