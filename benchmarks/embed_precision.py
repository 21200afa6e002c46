"""Embedding precision: float32 against bfloat16 (speed, vector agreement, dense retrieval).

    .venv/bin/python benchmarks/embed_precision.py                 # 3,072 synthetic texts
    .venv/bin/python benchmarks/embed_precision.py --datasets conditionalqa-dev,xquad-en

Part 1 encodes the clustering input of the synthetic NQ-shaped corpus (title + first
sentence, 64 word pieces: benchmarks/_synthetic.py) with the bundled all-MiniLM-L6-v2 in each
precision and reports texts/s and the cosine of each bfloat16 vector with its float32 one.
Part 2 runs the `dense` system on shared datasets in each precision (fresh embedding caches)
and reports the dataset's Hit@1 / R@10 (%) and how many queries get the same top 1 and
the same top-10 ranking as with float32.
Which precision "auto" picks on this machine is printed first.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from decisionrag._app import evaluate
from decisionrag._cluster._embedding import MAX_TOKENS, document_text
from decisionrag._embed import load_encoder, resolve_precision
from decisionrag._eval import EvalSettings, load_dataset
from decisionrag._eval._metrics import MetricSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PRECISIONS = ("float32", "bfloat16")


def synthetic_texts(n: int) -> list[str]:
    from _synthetic import synthetic_documents

    return [document_text(d.title, "", d.passages[0].text)
            for d in synthetic_documents(n, n * 25, 0)]


def encode_timed(texts: list[str], precision: str) -> tuple[np.ndarray, float]:
    encoder = load_encoder(precision=precision)
    limit = encoder.model.max_seq_length
    encoder.model.max_seq_length = MAX_TOKENS
    try:
        encoder.encode(texts[:64])  # warm-up: first-call allocations and kernel selection
        start = time.perf_counter()
        vectors = encoder.encode(texts)
        return vectors, time.perf_counter() - start
    finally:
        encoder.model.max_seq_length = limit


def speed_table(n: int) -> None:
    texts = synthetic_texts(n)
    results = {p: encode_timed(texts, p) for p in PRECISIONS}
    reference = results["float32"][0]
    print(f"| precision | seconds for {n:,} texts | texts/s | cosine with float32: min / p1 / mean |")
    print("|---|---:|---:|---|")
    for precision, (vectors, seconds) in results.items():
        cosines = np.sum(vectors * reference, axis=1)
        print(f"| {precision} | {seconds:.1f} | {n / seconds:.0f} | {cosines.min():.5f} / "
              f"{np.percentile(cosines, 1):.5f} / {cosines.mean():.5f} |")


def dense_run(dataset_dir: Path, precision: str) -> tuple[dict[str, float], dict[str, list[str]]]:
    os.environ["DECISIONRAG_EMBED_PRECISION"] = precision
    dataset = load_dataset(dataset_dir)
    with tempfile.TemporaryDirectory() as scratch:
        settings = EvalSettings(systems=["dense"], spec=MetricSpec(recall_ks=(10,)),
                                embed_cache=scratch, keep_runs=10, resamples=0)
        report = evaluate(dataset, settings)
    return report["systems"]["dense"], report["runs"]["dense"]


def dense_table(names: list[str]) -> None:
    print("\n| dataset | precision | Hit@1 | R@10 | same top 1 as float32 | same top 10 |")
    print("|---|---|---:|---:|---:|---:|")
    for name in names:
        runs = {p: dense_run(DATA / name, p) for p in PRECISIONS}
        exact, fast = runs["float32"][1], runs["bfloat16"][1]
        same_top1 = sum(exact[q][:1] == ranking[:1] for q, ranking in fast.items())
        same = sum(exact[q] == ranking for q, ranking in fast.items())
        for precision, (metrics, _) in runs.items():
            hit = next(v for k, v in metrics.items() if k.endswith("hit@1"))
            recall = next(v for k, v in metrics.items() if k.endswith("recall@10"))
            tail = (f"{same_top1} / {len(fast)} | {same} / {len(fast)}"
                    if precision == "bfloat16" else " | ")
            print(f"| {name} | {precision} | {100 * hit:.1f} | {100 * recall:.1f} | {tail} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=3072)
    parser.add_argument("--datasets", default="", help="comma-separated shared datasets")
    parser.add_argument("--threads", type=int, help="torch threads")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    print(f"auto precision on this machine: {resolve_precision('auto')}\n")
    if args.texts:
        speed_table(args.texts)
    if args.datasets:
        dense_table([n for n in args.datasets.split(",") if n])


if __name__ == "__main__":
    main()
