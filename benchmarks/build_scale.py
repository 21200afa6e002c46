"""Builds past one machine: the Ray engine's overhead, and clustering + writing at 10 M documents.

    python benchmarks/build_scale.py ray   [--corpus ../shared/data/mtrag-cloud-pooled/corpus.jsonl]
    python benchmarks/build_scale.py large [--docs 10000000] [--dim 384] [--workdir /tmp]

``ray``: the same build (parse + embed document descriptions with the bundled MiniLM + cluster
``auto`` + write) on the local engine and on ``--engine ray`` with a local 2-CPU Ray instance,
on the same 2 cores; reports wall time of each, the overhead ratio, and whether the two trees
are the same node for node.

``large``: the clustering and writing stages at 10 M documents, on synthetic unit vectors (a
seeded mixture of 50,000 topics) held in a memory-mapped file, never in RAM: write 10 M
documents (one passage each) with TreeWriter, partitioned k-means (``_cluster._large``: sample
→ coarse centres → chunked assignment → per-part balanced k-means), place the documents under
their groups, describe every group extractively, commit. Reports each phase's time, the
process's peak RSS and its peak anonymous memory (the memory map's file pages are counted in
RSS but are page cache, given back under pressure), and the tree file's size.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]


def _anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _nodes(path: Path) -> list[tuple[object, ...]]:
    from decisionrag import Tree

    tree = Tree.open(path)
    rows: list[tuple[object, ...]] = []
    stack = [tree.node("root").id]
    while stack:
        for child in tree.children(stack.pop()):
            rows.append((child.key, child.parent, child.pos, child.title, child.text))
            stack.append(child.id)
    return rows


def run_ray(corpus: Path, workdir: Path) -> None:
    from decisionrag._app import build_tree
    from decisionrag._scale import RayOptions, build_on_ray

    local_out, ray_out = workdir / "local.tree", workdir / "ray.tree"
    options = {"use_cache": False}
    start = time.perf_counter()
    local = build_tree([corpus], local_out, cluster="auto", cluster_options=options)
    local_s = time.perf_counter() - start
    start = time.perf_counter()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - start
    on_ray = build_on_ray([corpus], ray_out, cluster="auto",
                          options=RayOptions(batch_size=256, precision=None))
    ray_s = time.perf_counter() - start
    ray.shutdown()
    same = _nodes(local_out) == _nodes(ray_out)
    docs = local.counts["document"]
    print(f"corpus {corpus} — {docs:,} documents, {local.counts['passage']:,} passages, "
          f"{local.counts['group']:,} groups")
    print("| engine | wall s | documents/s | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| local | {local_s:.1f} | {docs / local_s:,.0f} | 1.00 |")
    print(f"| ray (2 CPUs, incl. {init_s:.1f} s start) | {ray_s:.1f} | {docs / ray_s:,.0f} | "
          f"{ray_s / local_s:.2f} |")
    print(f"same tree node for node: {same} (embeddings: MiniLM on both; on_ray counts "
          f"{on_ray.counts == local.counts})")


def _synthetic_vectors(path: Path, n: int, dim: int, topics: int, seed: int) -> np.memmap:
    from decisionrag._cluster._kmeans import normalise

    rng = np.random.default_rng(seed)
    centres = normalise(rng.standard_normal((topics, dim), dtype=np.float32))
    vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    for start in range(0, n, 50_000):
        size = min(50_000, n - start)
        truth = rng.integers(0, topics, size=size)
        noise = rng.standard_normal((size, dim), dtype=np.float32)
        noise *= 0.5 / np.sqrt(dim)
        vectors[start:start + size] = normalise(centres[truth] + noise)
    vectors.flush()
    return np.load(path, mmap_mode="r")


def run_large(n_docs: int, dim: int, workdir: Path, seed: int) -> None:
    from decisionrag import DocumentSpec, PassageSpec, TreeWriter
    from decisionrag._cluster._api import (
        _Docs,
        describe_groups,
        resolve_groups,
        save_clustering,
        write_groups,
    )
    from decisionrag._cluster._describe import ExtractiveDescriber
    from decisionrag._cluster._kmeans import DEFAULT_BRANCHING
    from decisionrag._cluster._large import faiss_kmeans, partitioned_hierarchy

    phases: dict[str, tuple[float, float, float, float]] = {}
    clock, cpu = time.perf_counter(), time.process_time()

    def mark(name: str) -> None:
        nonlocal clock, cpu
        now, now_cpu = time.perf_counter(), time.process_time()
        phases[name] = (now - clock, now_cpu - cpu, peak_rss_mb(), _anon_mb())
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {now - clock:,.1f} s", file=sys.stderr,
              flush=True)
        clock, cpu = now, now_cpu

    vectors = _synthetic_vectors(workdir / "vectors.npy", n_docs, dim, 50_000, seed)
    mark("generate vectors (memory map)")
    out = workdir / "large.tree"
    writer = TreeWriter(out)
    ids = np.empty(n_docs, dtype=np.int64)
    for i in range(n_docs):
        ids[i] = writer.add_document(DocumentSpec(
            title=f"Page {i}", key=f"d{i}", passages=[PassageSpec(f"Passage of page {i}.")]))
    mark("write documents")
    k = resolve_groups("auto", n_docs, DEFAULT_BRANCHING)
    hierarchy, bounds = partitioned_hierarchy(vectors, k, seed=seed)
    engine = "faiss" if faiss_kmeans() is not None else "scikit-learn"
    mark(f"partitioned k-means on {engine} ({k:,} leaf groups asked)")
    labels = [f"Page {i}" for i in range(n_docs)]
    docs = _Docs(ids, labels, labels, vectors)
    group_ids = write_groups(writer, hierarchy, docs)
    mark("write and place groups")
    describer = ExtractiveDescriber()
    describe_groups(writer, hierarchy, docs, group_ids, describer, progress=False)
    save_clustering(writer, hierarchy, group_ids, "synthetic", DEFAULT_BRANCHING, seed,
                    bounds.min_size, bounds.max_size, describer.name)
    mark("describe groups")
    del labels, docs
    writer.commit()
    mark("commit")
    sizes = hierarchy.levels[0].sizes
    print(f"{n_docs:,} documents, {dim}-d vectors ({n_docs * dim * 4 / 2**30:.1f} GiB memory map); "
          f"levels {' > '.join(str(len(lv.centroids)) for lv in reversed(hierarchy.levels))}; "
          f"leaf sizes min {sizes.min()} median {int(np.median(sizes))} max {sizes.max()} "
          f"(bounds {bounds.min_size}–{bounds.max_size}); tree file {out.stat().st_size / 2**30:.2f} GiB")
    print("| phase | wall s | CPU s | peak RSS MB (VmHWM) | anonymous RSS MB after |")
    print("|---|---:|---:|---:|---:|")
    for name, (seconds, cpu_s, peak, anon) in phases.items():
        print(f"| {name} | {seconds:,.1f} | {cpu_s:,.1f} | {peak:,.0f} | {anon:,.0f} |")
    print(f"| total | {sum(p[0] for p in phases.values()):,.1f} | "
          f"{sum(p[1] for p in phases.values()):,.1f} | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["ray", "large"])
    parser.add_argument("--corpus", type=Path,
                        default=ROOT.parent / "shared" / "data" / "mtrag-cloud-pooled" / "corpus.jsonl")
    parser.add_argument("--docs", type=int, default=10_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="build-scale-") as work:
        if args.mode == "ray":
            run_ray(args.corpus, Path(work))
        else:
            run_large(args.docs, args.dim, Path(work), args.seed)


if __name__ == "__main__":
    main()
