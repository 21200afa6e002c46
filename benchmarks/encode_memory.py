"""Memory growth while encoding many texts: one call vs chunks vs chunks + heap trimming.

    .venv/bin/python benchmarks/encode_memory.py            # 12,000 texts, chunks of 2,000

Each mode runs in a fresh process that encodes the clustering input of the synthetic
NQ-shaped corpus (title + first sentence, 64 word pieces; benchmarks/_synthetic.py) with the
bundled MiniLM, and reports RSS before encoding, after it, the growth per text and the peak.
Modes: ``one-call`` (every text in one sentence-transformers call), ``chunks`` (chunks without
giving freed heap back), ``chunks+trim`` (what `Encoder.encode` does: malloc_trim after each).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

MODES = ("one-call", "chunks", "chunks+trim")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(mode: str, n: int, chunk: int, threads: int) -> dict[str, float]:
    import torch

    from _synthetic import synthetic_documents
    from decisionrag import _embed
    from decisionrag._cluster._embedding import MAX_TOKENS, document_text

    torch.set_num_threads(threads)
    texts = [document_text(d.title, "", d.passages[0].text)
             for d in synthetic_documents(n, n * 25, 0)]
    encoder = _embed.load_encoder(precision="float32")
    encoder.model.max_seq_length = MAX_TOKENS
    encoder.encode(texts[:64])  # warm-up
    if mode == "chunks":
        _embed.release_freed_memory = lambda: None  # type: ignore[assignment]
    before = rss_mb()
    encoder.encode(texts, chunk_size=n if mode == "one-call" else chunk)
    after = rss_mb()
    return {"before": before, "after": after, "per_text_kb": (after - before) * 1024 / n,
            "peak": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=12_000)
    parser.add_argument("--chunk", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.texts, args.chunk, args.threads)))
        return
    print(f"{args.texts:,} texts, chunks of {args.chunk:,}, float32, {args.threads} torch threads\n")
    print("| mode | RSS before (MB) | RSS after (MB) | growth per text (KB) | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|")
    for mode in MODES:
        command = [sys.executable, __file__, "--mode", mode, "--texts", str(args.texts),
                   "--chunk", str(args.chunk), "--threads", str(args.threads)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        row = json.loads(output.strip().splitlines()[-1])
        print(f"| {mode} | {row['before']:,.0f} | {row['after']:,.0f} | "
              f"{row['per_text_kb']:.1f} | {row['peak']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
