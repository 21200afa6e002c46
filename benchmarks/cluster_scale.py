"""Clustering at Natural Questions scale: embed, cluster into 1,000 groups, write the tree.

    python benchmarks/cluster_scale.py                          # 108,626 docs, 2.68 M passages
    python benchmarks/cluster_scale.py --docs 5000 --passages 120000 --groups 50

Writes the synthetic corpus (benchmarks/_synthetic.py) with TreeWriter, then runs
`cluster_documents` (bundled all-MiniLM-L6-v2 over each document's title + first sentence,
balanced k-means, offline extractive descriptions) and commits. Reports the time of every
phase, the process's peak RSS after each (VmHWM, monotonic), and the group-size
distribution. The embedding cache is off unless --cache is given, so embedding is timed.
``--encoder random`` replaces MiniLM by seeded random unit vectors, to time everything but
the encoder (k-means, balancing, describing, writing) at full scale in a few minutes.
``--precision`` chooses the encoder's (default auto: bfloat16 where the CPU has it natively).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from decisionrag import Tree, TreeWriter
from decisionrag._cluster import cluster_documents
from decisionrag._embed import resolve_precision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

NQ_DOCUMENTS = 108_626
NQ_PASSAGES = 2_680_000


def random_encoder(seed: int) -> object:
    rng = np.random.default_rng(seed)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return rng.standard_normal((len(texts), 384), dtype=np.float32)

    return encode


def main() -> None:
    from _synthetic import synthetic_documents

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=NQ_DOCUMENTS)
    parser.add_argument("--passages", type=int, default=NQ_PASSAGES)
    parser.add_argument("--groups", default="1000", help="number of groups or 'auto'")
    parser.add_argument("--model", default=None, help="sentence-transformers model")
    parser.add_argument("--out", type=Path,
                        default=Path(tempfile.gettempdir()) / "decisionrag-cluster-scale.tree")
    parser.add_argument("--cache", type=Path, help="embedding cache folder (default: no cache)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--encoder", choices=["minilm", "random"], default="minilm")
    parser.add_argument("--threads", type=int, help="torch threads for the encoder")
    parser.add_argument("--precision", choices=["auto", "float32", "bfloat16"], default="auto",
                        help="encoder precision (sets $DECISIONRAG_EMBED_PRECISION)")
    parser.add_argument("--max-tokens", type=int, default=64,
                        help="word pieces embedded per document (default 64)")
    args = parser.parse_args()
    os.environ["DECISIONRAG_EMBED_PRECISION"] = args.precision
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows: list[tuple[str, float, float]] = []
    start = time.perf_counter()
    with TreeWriter(args.out) as writer:
        writer.add_documents(synthetic_documents(args.docs, args.passages, args.seed))
        rows.append(("generate + write documents", time.perf_counter() - start, peak_rss_mb()))
        with tempfile.TemporaryDirectory() as scratch:
            model = "random" if args.encoder == "random" else args.model
            cpu = time.process_time()
            report = cluster_documents(writer, args.groups, model=model,
                                       progress=args.progress, seed=args.seed,
                                       cache=args.cache or scratch, use_cache=bool(args.cache),
                                       max_tokens=args.max_tokens,
                                       encode=random_encoder(args.seed)  # type: ignore[arg-type]
                                       if args.encoder == "random" else None)
        for phase in ("embed", "cluster", "write", "describe"):
            label = {"embed": "embed (read + encode)", "write": "write group nodes",
                     "describe": "describe (extractive)", "cluster": "k-means + balance"}[phase]
            rows.append((label, report.seconds[phase], float("nan")))
        rows[-1] = (rows[-1][0], rows[-1][1], peak_rss_mb())
        t0 = time.perf_counter()
    rows.append(("commit (indexes, counts)", time.perf_counter() - t0, peak_rss_mb()))
    clustering = sum(report.seconds.values()) + rows[-1][1]
    cpu = time.process_time() - cpu
    precision = resolve_precision() if args.encoder == "minilm" else "-"
    print(f"encoder: {args.encoder} (precision {precision}); {args.docs:,} documents, "
          f"{args.passages:,} passages -> {args.out} "
          f"({args.out.stat().st_size / 1e9:.2f} GB)\n")
    print("| phase | seconds | peak RSS so far (MB) |\n|---|---:|---:|")
    for label, seconds, rss in rows:
        print(f"| {label} | {seconds:.1f} | {'' if rss != rss else f'{rss:,.0f}'} |")
    print(f"| **embed + cluster + write tree** | **{clustering:.1f}** | |")
    print(f"| CPU time of the above (all threads) | {cpu:.1f} | |")
    print(f"| total (incl. corpus generation) | {time.perf_counter() - start:.1f} | "
          f"{peak_rss_mb():,.0f} |\n")
    print(report.summary() + "\n")
    print("| group size | groups |\n|---|---:|")
    for low, high, count in report.histogram(10):
        print(f"| {low}–{high} | {count} |")
    with Tree.open(args.out) as tree:
        top = tree.children(tree.root.id)
        print(f"\nroot children: {len(top)}; first group: {top[0].title!r}: {top[0].description!r}")


if __name__ == "__main__":
    main()
