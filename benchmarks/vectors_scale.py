"""Node vectors at Natural-Questions scale: bytes on disk, open time, RSS of a querying
process, and embedding throughput.

    python benchmarks/vectors_scale.py                        # 108,626 docs, 2.68 M passages
    python benchmarks/vectors_scale.py --docs 10000 --passages 250000

1. Builds (or reuses, `--tree`) the synthetic NQ-shaped tree of `benchmarks/tree_scale.py`
   with 1,000 groups.
2. Embedding throughput: the real encoder (bundled MiniLM, the build's precision) over a
   sample of `--encode-sample` passages as `embed_tree` embeds them; the time to embed the
   whole corpus at that rate is an *extrapolation*, printed as such.
3. The store at full size: one row per node id (float16, 384-d), filled with random unit
   vectors — embedding 2.68 M passages on this machine would take hours, and the store's
   size, open time and memory do not depend on the values — written by
   `decisionrag._tree._vectors.write_vectors` (atomic).
4. Fresh processes query it: (a) the store alone — open, read the 16,000 page rows a page
   level of the `nq` shape holds and the passage rows of 30 pages, one chunked flat scan
   over every row; (b) a walk with the embedded judge (auto preset, no hybrid retriever:
   flat BM25 over 2.68 M passages is its own index) over `--queries` queries, once with the
   default query encoder (numpy, `decisionrag._bert`) and once with ``encoder=torch``
   (sentence-transformers), `--walk-runs` times each (the peak varies between identical
   runs: how many groups' pages the navigator reads ahead and caches while the group level
   is judged depends on timing). Each reports its peak RSS (VmHWM) and whether torch was loaded. Then the same
   walks after `Navigator.warm()` (every group's pages and their entries cached, as a server
   does at start-up: the most the navigator's caches hold at this size).
5. Query-encoding latency, one process: one query at a time, median of `--latency-runs`
   distinct queries, for the numpy encoder, torch float32 and torch at the build's precision;
   and the first query after loading (the judge warms its encoder up when it is loaded).

    python benchmarks/vectors_scale.py --tree T --skip-build   # reuse T and its vectors
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb
from decisionrag import NodeKind, Tree

MODEL = "all-MiniLM-L6-v2"
DIM = 384


def ensure_tree(path: Path, docs: int, passages: int) -> None:
    if path.is_file():
        return
    from tree_scale import build

    result = build(path, docs, passages, 0, 1000)
    print(f"built {path}: {result['file_mb']:.0f} MB in {result['total_s']:.0f} s", flush=True)


def n_rows(tree: Tree) -> int:
    largest = tree.root.id
    for node in tree.children(tree.root.id):
        largest = max(largest, node.id)
    for doc in tree.documents():
        largest = max(largest, doc.end)
    return largest + 1


def encode_rate(tree: Tree, sample: int) -> dict[str, float]:
    from decisionrag._embed import load_encoder
    from decisionrag._tree._vectors import passage_text

    encoder = load_encoder()
    texts = []
    for node in tree.iter_passages():
        texts.append(passage_text("", node.heading, node.text))
        if len(texts) >= sample:
            break
    encoder.encode(texts[:64])  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    encoder.encode(texts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"sample": len(texts), "per_s": len(texts) / wall, "cpu_per_s": len(texts) / cpu,
            "precision": encoder.precision}


def write_store(tree: Tree, rows: int, precision: str) -> dict[str, float]:
    from numpy.lib.format import open_memmap

    from decisionrag._tree._vectors import vectors_folder, write_vectors

    scratch = tree.file.with_name(tree.file.name + ".scratch.npy")
    matrix = open_memmap(scratch, mode="w+", dtype=np.float16, shape=(rows, DIM))
    rng = np.random.default_rng(0)
    for start in range(0, rows, 262_144):
        block = rng.standard_normal((min(rows, start + 262_144) - start, DIM)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        matrix[start:start + len(block)] = block
    matrix.flush()
    t0 = time.perf_counter()
    write_vectors(tree.file, matrix, model=MODEL, precision=precision, tree_meta=tree.meta)
    seconds = time.perf_counter() - t0
    del matrix
    scratch.unlink()
    size = sum(p.stat().st_size for p in vectors_folder(tree.file).iterdir())
    return {"write_s": seconds, "bytes": size}


def query_store(path: Path) -> dict[str, float]:
    from decisionrag._tree._vectors import open_vectors

    t0 = time.perf_counter()
    tree = Tree.open(path)
    vectors = open_vectors(tree)
    open_s = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    q = rng.standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    groups = [n for n in tree.children(tree.root.id) if n.kind == NodeKind.GROUP][:150]
    pages = [p for g in groups for p in tree.children(g.id)]
    t0 = time.perf_counter()
    page_scores = vectors.take([p.id for p in pages]) @ q
    best = [pages[i] for i in np.argsort(-page_scores)[:30]]
    parts = [np.asarray(vectors.rows(p.id, p.end + 1), np.float32) @ q for p in best]
    level_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    vectors.scan(q)
    scan_s = time.perf_counter() - t0
    return {"open_s": open_s, "pages": len(pages), "page_level_s": level_s,
            "part_rows": sum(len(p) for p in parts), "scan_s": scan_s,
            "peak_rss_mb": peak_rss_mb()}


def query_walk(path: Path, queries: int, encoder: str, warm: bool = False) -> dict[str, Any]:
    from decisionrag._judges import load_judge
    from decisionrag._navigate import Navigator

    t0 = time.perf_counter()
    tree = Tree.open(path)
    judge = load_judge("embedded", encoder=encoder)
    loaded_mb = current_rss_mb()
    navigator = Navigator(tree, judge, preset="auto")
    open_s = time.perf_counter() - t0
    cached = navigator.warm() if warm else 0  # what a server does at start-up
    warm_rss_mb = current_rss_mb()
    words = [n.text.split()[:6] for n in tree.passages(tree.documents().__next__().id)]
    texts = [" ".join(w) for w in words][:queries] or ["pseudo words"]
    seconds = []
    for text in texts:
        result = navigator.retrieve(text, k=10)
        seconds.append(result.seconds)
    return {"open_s": open_s, "walks": len(seconds), "walk_median_s": float(np.median(seconds)),
            "walk_first_s": seconds[0], "peak_rss_mb": peak_rss_mb(),
            "judge_loaded_rss_mb": loaded_mb, "encoder": type(judge.encoder).__name__,
            "cached_nodes": cached, "warm_rss_mb": warm_rss_mb,
            "stored_precision": navigator.view.vectors.precision if navigator.view.vectors
            else None, "torch_loaded": "torch" in sys.modules}


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def query_latency(runs: int) -> dict[str, dict[str, float]]:
    """Milliseconds to encode one query: the first after loading (as the judge loads it,
    warm-up included) and the median of `runs` distinct queries."""
    from decisionrag._embed import load_encoder, load_query_encoder, resolve_precision

    queries = [f"how do I renew passport number {i} from abroad in {2000 + i}?"
               for i in range(runs + 1)]
    encoders = {"numpy (float32)": lambda: load_query_encoder(encoder="numpy"),
                "torch float32": lambda: load_encoder(precision="float32")}
    built = resolve_precision()
    if built != "float32":
        encoders[f"torch {built}"] = lambda: load_encoder(precision=built)
    out = {}
    for label, load in encoders.items():
        t0 = time.perf_counter()
        encoder = load()
        encoder.encode(["warm-up"])
        load_s = time.perf_counter() - t0
        timings = []
        for query in queries:
            t0 = time.perf_counter()
            encoder.encode([query])
            timings.append((time.perf_counter() - t0) * 1e3)
        out[label] = {"load_s": load_s, "first_ms": timings[0],
                      "median_ms": float(np.median(timings[1:]))}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=108_626)
    parser.add_argument("--passages", type=int, default=2_680_000)
    parser.add_argument("--tree", type=Path,
                        default=Path(tempfile.gettempdir()) / "decisionrag-vectors-scale.tree")
    parser.add_argument("--encode-sample", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--latency-runs", type=int, default=50)
    parser.add_argument("--walk-runs", type=int, default=3,
                        help="walking processes per encoder (peak RSS varies between runs)")
    parser.add_argument("--skip-build", action="store_true",
                        help="reuse --tree and the vectors stored beside it")
    parser.add_argument("--child", choices=("store", "walk", "latency"), help=argparse.SUPPRESS)
    parser.add_argument("--encoder", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child = {"store": lambda: query_store(args.tree),
                 "walk": lambda: query_walk(args.tree, args.queries, args.encoder, args.warm),
                 "latency": lambda: query_latency(args.latency_runs)}[args.child]
        print(json.dumps(child()))
        return 0
    lines = ["| measure | value |", "|---|---:|"]
    if not args.skip_build:
        ensure_tree(args.tree, args.docs, args.passages)
    with Tree.open(args.tree) as tree:
        passages = tree.counts["passage"]
        rows = n_rows(tree)
        lines.append(f"| passages / node rows | {passages:,} / {rows:,} |")
        if not args.skip_build:
            rate = encode_rate(tree, args.encode_sample)
            store = write_store(tree, rows, rate["precision"])
            lines += [
                f"| embedding throughput ({rate['precision']}, {rate['sample']:,}-passage "
                f"sample) | {rate['per_s']:.0f} passages/s wall, {rate['cpu_per_s']:.0f}/s "
                "per CPU-second |",
                f"| embedding the whole corpus at that rate (extrapolated) | "
                f"{passages / rate['per_s'] / 3600:.1f} h |",
                f"| vectors on disk (float16 matrix + header) | {store['bytes'] / 1e6:,.0f} MB |",
                f"| writing them (atomic) | {store['write_s']:.1f} s |"]
    s = _child(args, "store")
    lines += [
        f"| open tree + vectors (fresh process) | {s['open_s'] * 1e3:.1f} ms |",
        f"| score {s['pages']:,} page rows + {s['part_rows']:,} passage rows of 30 pages | "
        f"{s['page_level_s'] * 1e3:.0f} ms |",
        f"| one chunked flat scan of every row | {s['scan_s']:.2f} s |",
        f"| peak RSS, store-only process | {s['peak_rss_mb']:.0f} MB |"]
    for encoder in ("numpy", "torch"):
        runs = [_child(args, "walk", "--encoder", encoder) for _ in range(args.walk_runs)]
        w = max(runs, key=lambda run: run["peak_rss_mb"])
        peaks = sorted(run["peak_rss_mb"] for run in runs)
        label = f"{encoder} query encoder ({w['encoder']}, torch loaded: {w['torch_loaded']})"
        lines += [
            f"| walk process, {label}: open tree + judge + navigator | {w['open_s']:.1f} s |",
            f"| walk (auto, embedded judge, {w['stored_precision']} vectors), first / median "
            f"of {w['walks']}, {encoder} | {w['walk_first_s']:.2f} / {w['walk_median_s']:.2f} s |",
            f"| RSS after loading the judge, {encoder} | {w['judge_loaded_rss_mb']:.0f} MB |",
            f"| **peak RSS, walking process, {encoder} query encoder** (largest of "
            f"{len(runs)} runs; all: {', '.join(f'{p:.0f}' for p in peaks)}) | "
            f"**{w['peak_rss_mb']:.0f} MB** |"]
    warmed = [_child(args, "walk", "--encoder", "numpy", "--warm") for _ in range(args.walk_runs)]
    w = max(warmed, key=lambda run: run["peak_rss_mb"])
    lines += [
        f"| walk process after `Navigator.warm()` ({w['cached_nodes']:,} groups and pages "
        f"cached, as a server starts): RSS after warming | {w['warm_rss_mb']:.0f} MB |",
        f"| **peak RSS, warmed walking process, numpy** (largest of {len(warmed)} runs; all: "
        f"{', '.join(f'{p:.0f}' for p in sorted(r['peak_rss_mb'] for r in warmed))}) | "
        f"**{w['peak_rss_mb']:.0f} MB** |"]
    for label, t in _child(args, "latency", "--latency-runs", str(args.latency_runs)).items():
        lines.append(f"| encode one query, {label}: first after load / median of "
                     f"{args.latency_runs} (load + warm-up {t['load_s']:.1f} s) | "
                     f"{t['first_ms']:.1f} / {t['median_ms']:.1f} ms |")
    print("\n".join(lines))
    return 0


def _child(args: argparse.Namespace, name: str, *extra: str) -> Any:
    out = subprocess.run([sys.executable, __file__, "--child", name, "--tree", str(args.tree),
                          "--queries", str(args.queries), *extra], capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise SystemExit(f"child {name} {' '.join(extra)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
