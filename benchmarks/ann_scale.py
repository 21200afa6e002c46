"""The search indexes stored with a tree at Natural-Questions size: BM25 (streamed) and the ANN
index over the vectors, built, opened and queried; and the ANN's recall on real vectors.

    python benchmarks/ann_scale.py --tree nq.tree            # 108,626 docs, 2.68 M passages
    python benchmarks/ann_scale.py --tree T --docs 10000 --passages 250000
    python benchmarks/ann_scale.py --recall-trees A.tree B.tree --sample 10000   # recall only

1. The synthetic NQ-shaped tree of `benchmarks/tree_scale.py` (1,000 groups) with random unit
   vectors stored beside it as `benchmarks/vectors_scale.py` writes them (values do not
   change sizes, times or memory), built once and reused (`--tree`).
2. Fresh processes build the BM25 index (`decisionrag._tree._bm25.write_bm25`, one streaming
   pass) and the ANN index (`decisionrag._tree._ann.write_ann`): time and peak RSS (VmHWM).
3. A fresh process opens the tree as a service does (`open_navigator`: embedded judge,
   `auto` preset, which now attaches hybrid candidates: the stored BM25 index and dense
   search through the ANN index), then times `--queries` dense top-100 searches, BM25
   top-100, hybrid top-20 and whole walks (p50 / p99), and reports its RSS.
4. Recall@100 of the ANN search against exact search on real vectors: each `--recall-trees`
   tree's stored vectors (an index is built beside them whatever their size) queried with its
   dataset's queries, and `--sample` passages of the synthetic tree embedded by the real
   encoder, queried with the first words of other passages.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb
from decisionrag import Tree

K = 100


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ensure_tree(path: Path, docs: int, passages: int) -> None:
    from decisionrag._embed import resolve_precision
    from decisionrag._tree._vectors import available_sets

    if not path.is_file():
        from tree_scale import build

        built = build(path, docs, passages, 0, 1000)
        print(f"built {path}: {built['file_mb']:.0f} MB in {built['total_s']:.0f} s", flush=True)
    if not available_sets(path):
        from vectors_scale import n_rows, write_store

        with Tree.open(path) as tree:
            stored = write_store(tree, n_rows(tree), resolve_precision())
        print(f"random vectors written in {stored['write_s']:.0f} s", flush=True)


def child_bm25(path: Path) -> dict[str, Any]:
    from decisionrag._tree._bm25 import bm25_folder, write_bm25

    t0 = time.perf_counter()
    with Tree.open(path) as tree:
        header = json.loads(write_bm25(tree).read_text("utf-8"))
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in bm25_folder(path).iterdir())
    return {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "bytes": size,
            "terms": header["terms"], "entries": header["entries"]}


def child_ann(path: Path) -> dict[str, Any]:
    from decisionrag._tree._ann import write_ann
    from decisionrag._tree._vectors import open_vectors

    t0 = time.perf_counter()
    with Tree.open(path) as tree:
        stored = open_vectors(tree)
        report = write_ann(path, stored, tree.passage_ids(), tree.meta)
    seconds = time.perf_counter() - t0
    folder = stored.path.parent
    size = sum(p.stat().st_size for p in folder.glob("*.faiss"))
    return {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "bytes": size,
            "factory": report.factory}


def _queries(tree: Tree, n: int) -> list[str]:
    texts: list[str] = []
    for index, doc in enumerate(tree.documents()):
        if index % 997 == 0:
            texts.append(" ".join(tree.passages(doc.id, limit=1)[0].text.split()[:6]))
        if len(texts) >= n:
            break
    return texts


def _p(times: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.median(times) * 1e3), "p99_ms": float(np.percentile(times, 99) * 1e3)}


def child_query(path: Path, n: int) -> dict[str, Any]:
    from decisionrag._app import open_navigator

    t0 = time.perf_counter()
    navigator = open_navigator(path, "embedded", "auto")
    open_s = time.perf_counter() - t0
    rss_open = current_rss_mb()
    hybrid = navigator.retriever
    out: dict[str, Any] = {"open_s": open_s, "rss_after_open_mb": rss_open,
                           "retriever": type(hybrid).__name__,
                           "dense_search": getattr(getattr(hybrid, "dense", None), "search", None),
                           "preset_candidates": navigator.preset.candidates}
    texts = _queries(navigator.tree, n)
    dense, bm25 = hybrid.dense, hybrid.bm25
    vectors = [dense.query_vector(t) for t in texts]
    timings: dict[str, list[float]] = {"dense": [], "bm25": [], "hybrid": [], "walk": []}
    for text, vector in zip(texts, vectors, strict=True):
        t0 = time.perf_counter()
        dense.retrieve_vector(vector, K)
        timings["dense"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bm25.retrieve(text, K)
        timings["bm25"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        hybrid.retrieve(text, 20)
        timings["hybrid"].append(time.perf_counter() - t0)
    out["rss_after_searches"] = rss_parts()
    for text in texts:
        t0 = time.perf_counter()
        navigator.retrieve(text, k=10)
        timings["walk"].append(time.perf_counter() - t0)
    for name, values in timings.items():
        out[name] = _p(values)
    out.update({"queries": len(texts), "rss_mb": current_rss_mb(), "peak_rss_mb": peak_rss_mb(),
                "rss_after_walks": rss_parts(), "torch_loaded": "torch" in sys.modules})
    return out


def rss_parts() -> dict[str, float]:
    """The resident set split as the kernel counts it: anonymous memory (the process's own
    objects) and file pages mapped from the indexes and the tree (shared, evictable)."""
    parts = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            parts[name] = round(int(value.split()[0]) / 1024, 1)
    return parts


# -- recall on real vectors -------------------------------------------------------------------


def recall_of(dense_ann: Any, dense_exact: Any, vectors: list[np.ndarray],
              probes: list[int | None]) -> dict[str, float]:
    out = {}
    truths = [[key for key, _ in dense_exact.retrieve_vector(v, K)] for v in vectors]
    for nprobe in probes:
        shares = []
        for vector, truth in zip(vectors, truths, strict=True):
            ids, _ = dense_ann.ann.search(vector, K, nprobe=nprobe)
            found = set(dense_ann._keys_of(ids))
            shares.append(len(found.intersection(truth)) / max(1, len(truth)))
        out[f"nprobe={nprobe or dense_ann.ann.nprobe}"] = float(np.mean(shares))
    return out


def child_recall_tree(path: Path, n: int) -> dict[str, Any]:
    """Recall on one dataset tree's real vectors, with an index built beside them."""
    from decisionrag._eval._data import read_queries
    from decisionrag._retrievers import DenseRetriever
    from decisionrag._tree._ann import write_ann
    from decisionrag._tree._vectors import open_vectors

    with Tree.open(path) as tree:
        stored = open_vectors(tree)
        report = write_ann(path, stored, tree.passage_ids(), tree.meta)
        ann = DenseRetriever.from_tree(tree, search="ann")
        exact = DenseRetriever.from_tree(tree, search="exact")
        folder = Path("../shared/data") / path.name.removesuffix(".tree")
        texts = [q.flat_text() for q in read_queries(folder / "queries.jsonl")][:n]
        vectors = [ann.query_vector(t) for t in texts]
        nlist = int(report.factory.split(",")[0].removeprefix("IVF") or 1) \
            if report.factory.startswith("IVF") else 1
        probes = sorted({None, max(1, nlist // 32), max(1, nlist // 8), nlist})
        return {"tree": path.name, "passages": len(tree.passage_ids()), "queries": len(texts),
                "factory": report.factory, "recall@100": recall_of(ann, exact, vectors, probes)}


def child_recall_sample(path: Path, sample: int, n: int, scratch: Path) -> dict[str, Any]:
    """Recall on `sample` passages of the synthetic tree embedded by the real encoder."""
    from decisionrag import DocumentSpec, PassageSpec, TreeWriter
    from decisionrag._build._vectors import embed_tree
    from decisionrag._retrievers import DenseRetriever

    rng = np.random.default_rng(3)
    sub = scratch / f"sample-{sample}.tree"
    with Tree.open(path) as tree:
        docs = list(tree.documents())
        chosen = rng.permutation(len(docs))
        specs, count, queries = [], 0, []
        for index in chosen.tolist():
            passages = tree.passages(docs[index].id)
            if count >= sample:
                queries.append(" ".join(passages[0].text.split()[:6]))
                if len(queries) >= n:
                    break
                continue
            specs.append(DocumentSpec(docs[index].title, [PassageSpec(p.text, p.heading)
                                                          for p in passages],
                                      key=docs[index].key))
            count += len(passages)
    if not sub.is_file():
        with TreeWriter(sub) as writer:
            for spec in specs:
                writer.add_document(spec)
        t0 = time.perf_counter()
        embed_tree(sub, ann=True)
        print(f"embedded {count:,} sample passages in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
    with Tree.open(sub) as tree:
        ann = DenseRetriever.from_tree(tree, search="ann")
        exact = DenseRetriever.from_tree(tree, search="exact")
        vectors = [ann.query_vector(t) for t in queries]
        nlist = int(ann.ann.header.factory.split(",")[0].removeprefix("IVF"))
        probes = sorted({None, max(1, nlist // 32), max(1, nlist // 8), nlist}, key=lambda p: p or 0)
        return {"tree": "synthetic sample", "passages": len(tree.passage_ids()),
                "queries": len(vectors), "factory": ann.ann.header.factory,
                "recall@100": recall_of(ann, exact, vectors, probes)}


def _child(*args: str) -> Any:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-4000:]}")
    sys.stderr.write(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path,
                        default=Path(tempfile.gettempdir()) / "decisionrag-ann-scale.tree")
    parser.add_argument("--docs", type=int, default=108_626)
    parser.add_argument("--passages", type=int, default=2_680_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--recall-trees", type=Path, nargs="*", default=[])
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--sample", type=int, default=0, help="synthetic passages to embed")
    parser.add_argument("--skip", nargs="*", default=[], choices=("build", "bm25", "ann", "query"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = {"bm25": lambda: child_bm25(args.tree), "ann": lambda: child_ann(args.tree),
                  "query": lambda: child_query(args.tree, args.queries),
                  "recall-tree": lambda: child_recall_tree(Path(rest[0]), args.recall_queries),
                  "recall-sample": lambda: child_recall_sample(
                      args.tree, args.sample, args.recall_queries, args.tree.parent)}[kind]()
        print(json.dumps(result))
        return 0
    common = ["--tree", str(args.tree), "--queries", str(args.queries),
              "--recall-queries", str(args.recall_queries), "--sample", str(args.sample)]
    for tree in args.recall_trees:
        print(json.dumps(_child("--child", "recall-tree", str(tree), *common)), flush=True)
    if "build" not in args.skip:
        ensure_tree(args.tree, args.docs, args.passages)
    for step in ("bm25", "ann", "query"):
        if step not in args.skip:
            print(json.dumps({step: _child("--child", step, *common)}), flush=True)
    if args.sample:
        print(json.dumps(_child("--child", "recall-sample", *common)), flush=True)
    print(f"load average: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
