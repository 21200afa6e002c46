"""Choosing the approximate-nearest-neighbour library: faiss (IVF-PQ + exact re-rank), usearch
(HNSW, int8) and hnswlib (HNSW, float32), measured on the same vectors.

    pip install usearch hnswlib       # the two candidates that are not project dependencies
    python benchmarks/ann_compare.py --trees A.tree B.tree --random 100000

1. Recall@100 against exact inner-product search, on real vectors: the stored passage vectors
   of each tree given (`decisionrag build` stores them) queried with each dataset's queries
   embedded by the default query encoder (`--queries` per tree; a tree whose sibling
   `../shared/data/NAME` folder is not found is queried with its own passages' first words).
2. Build time, peak memory (VmHWM of a fresh process that builds from a float16 matrix on
   disk read in chunks, as `decisionrag vectors` does), size on disk, open time, the RSS a
   query process has after opening the index and 200 queries, and p50 query time, on
   `--random` random unit vectors (values do not change those costs; recall on random
   vectors means nothing and is not reported).

Every library gets the same query-time budget knob (faiss nprobe, HNSW ef) at two settings.
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

K = 100
CHUNK = 65_536


# -- the three candidates -------------------------------------------------------------------


def faiss_build(matrix: np.ndarray, path: Path, threads: int) -> None:
    import faiss

    faiss.omp_set_num_threads(threads)
    n, dim = matrix.shape
    nlist = max(1, min(4096, int(4 * np.sqrt(n))))
    nbits = 8 if n >= 10_000 else 4
    index = faiss.index_factory(dim, f"IVF{nlist},PQ{dim // 8}x{nbits}", faiss.METRIC_INNER_PRODUCT)
    faiss.downcast_index(faiss.extract_index_ivf(index)).do_polysemous_training = False
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(n, size=min(n, max(64 * nlist, 50_000)), replace=False))
    index.train(np.asarray(matrix[sample], dtype=np.float32))
    for start in range(0, n, CHUNK):
        block = np.asarray(matrix[start:start + CHUNK], dtype=np.float32)
        index.add_with_ids(block, np.arange(start, start + len(block), dtype=np.int64))
    faiss.write_index(index, str(path))


def faiss_open(path: Path) -> Any:
    import faiss

    return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)


def faiss_search(index: Any, query: np.ndarray, k: int, effort: int, exact: Any) -> np.ndarray:
    import faiss

    params = faiss.SearchParametersIVF(nprobe=effort)
    _, found = index.search(query[None, :], k * 4, params=params)
    found = found[0][found[0] >= 0]
    scores = exact(found) @ query  # re-rank from the stored vectors
    return found[np.argsort(-scores, kind="stable")[:k]]


def usearch_build(matrix: np.ndarray, path: Path, threads: int) -> None:
    from usearch.index import Index

    n, dim = matrix.shape
    index = Index(ndim=dim, metric="ip", dtype="i8", connectivity=16, expansion_add=128)
    for start in range(0, n, CHUNK):
        block = np.asarray(matrix[start:start + CHUNK], dtype=np.float32)
        index.add(np.arange(start, start + len(block), dtype=np.uint64), block, threads=threads)
    index.save(str(path))


def usearch_open(path: Path) -> Any:
    from usearch.index import Index

    return Index.restore(str(path), view=True)


def usearch_search(index: Any, query: np.ndarray, k: int, effort: int, exact: Any) -> np.ndarray:
    index.expansion_search = effort
    found = np.asarray(index.search(query, k * 2).keys, dtype=np.int64)
    scores = exact(found) @ query
    return found[np.argsort(-scores, kind="stable")[:k]]


def hnswlib_build(matrix: np.ndarray, path: Path, threads: int) -> None:
    import hnswlib

    n, dim = matrix.shape
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=n, ef_construction=128, M=16)
    for start in range(0, n, CHUNK):
        block = np.asarray(matrix[start:start + CHUNK], dtype=np.float32)
        index.add_items(block, np.arange(start, start + len(block)), num_threads=threads)
    index.save_index(str(path))


def hnswlib_open(path: Path) -> Any:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=384)
    index.load_index(str(path))
    return index


def hnswlib_search(index: Any, query: np.ndarray, k: int, effort: int, exact: Any) -> np.ndarray:
    index.set_ef(max(effort, k))
    labels, _ = index.knn_query(query[None, :], k=k, num_threads=1)
    return np.asarray(labels[0], dtype=np.int64)


LIBRARIES = {
    "faiss": (faiss_build, faiss_open, faiss_search, (32, 128), "MIT"),
    "usearch": (usearch_build, usearch_open, usearch_search, (128, 256), "Apache-2.0"),
    "hnswlib": (hnswlib_build, hnswlib_open, hnswlib_search, (128, 256), "Apache-2.0"),
}


# -- real vectors: recall ----------------------------------------------------------------------


def real_vectors(tree_path: Path, n_queries: int) -> tuple[np.ndarray, np.ndarray, str]:
    from decisionrag import Tree
    from decisionrag._embed import load_query_encoder
    from decisionrag._tree._vectors import open_vectors

    with Tree.open(tree_path) as tree:
        ids = [node.id for node in tree.iter_passages()]
        stored = open_vectors(tree)
        matrix = stored.take(ids)
        encoder = load_query_encoder(stored.model)
        folder = Path("../shared/data") / tree_path.name.removesuffix(".tree")
        if (folder / "queries.jsonl").is_file():
            from decisionrag._eval._data import read_queries

            texts = [q.flat_text() for q in read_queries(folder / "queries.jsonl")][:n_queries]
            source = f"{folder.name} queries"
        else:
            texts = [" ".join(n.text.split()[:8]) for _, n in zip(range(n_queries),
                                                                   tree.iter_passages(),
                                                                   strict=False)]
            source = "first words of passages"
    queries = np.stack([encoder.encode([t])[0] for t in texts]).astype(np.float32)
    return matrix, queries, source


def recall_on(matrix: np.ndarray, queries: np.ndarray, folder: Path) -> dict[str, Any]:
    k = min(K, len(matrix))
    exact_top = [set(np.argsort(-(matrix @ q), kind="stable")[:k].tolist()) for q in queries]

    def exact(ids: np.ndarray) -> np.ndarray:
        return matrix[ids]

    out: dict[str, Any] = {}
    for name, (build, open_, search, efforts, _licence) in LIBRARIES.items():
        path = folder / f"{name}.index"
        build(np.asarray(matrix, dtype=np.float16), path, 2)
        index = open_(path)
        for effort in efforts:
            hits = [len(exact_top[i] & set(search(index, q, k, effort, exact).tolist())) / k
                    for i, q in enumerate(queries)]
            out[f"{name}@{effort}"] = float(np.mean(hits))
        del index
    return out


# -- random vectors: cost at scale -------------------------------------------------------------


def write_random(path: Path, n: int, dim: int = 384) -> None:
    from numpy.lib.format import open_memmap

    out = open_memmap(path, mode="w+", dtype=np.float16, shape=(n, dim))
    rng = np.random.default_rng(0)
    for start in range(0, n, CHUNK):
        block = rng.standard_normal((min(n, start + CHUNK) - start, dim)).astype(np.float32)
        out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    out.flush()


def child_build(name: str, matrix_path: Path, index_path: Path, threads: int) -> dict[str, float]:
    matrix = np.load(matrix_path, mmap_mode="r")
    t0 = time.perf_counter()
    LIBRARIES[name][0](matrix, index_path, threads)
    return {"build_s": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb(),
            "bytes": index_path.stat().st_size}


def child_query(name: str, matrix_path: Path, index_path: Path) -> dict[str, float]:
    from decisionrag._tree._vectors import STORED_DTYPE  # noqa: F401  (the product's dtype)

    matrix = np.load(matrix_path, mmap_mode="r")
    t0 = time.perf_counter()
    index = LIBRARIES[name][1](index_path)
    open_s = time.perf_counter() - t0
    rss_open = current_rss_mb()
    rng = np.random.default_rng(7)
    out: dict[str, float] = {"open_s": open_s, "rss_after_open_mb": rss_open}

    def exact(ids: np.ndarray) -> np.ndarray:
        return np.stack([np.asarray(matrix[i], dtype=np.float32) for i in ids.tolist()])

    for effort in LIBRARIES[name][3]:
        times = []
        for _ in range(200):
            q = rng.standard_normal(matrix.shape[1]).astype(np.float32)
            q /= np.linalg.norm(q)
            t0 = time.perf_counter()
            LIBRARIES[name][2](index, q, K, effort, exact)
            times.append(time.perf_counter() - t0)
        out[f"p50_ms@{effort}"] = float(np.median(times) * 1e3)
        out[f"p99_ms@{effort}"] = float(np.percentile(times, 99) * 1e3)
    out["rss_after_400_queries_mb"] = current_rss_mb()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _child(*args: str) -> Any:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trees", type=Path, nargs="*", default=[])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--random", type=int, default=250_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ann-compare")
    parser.add_argument("--only", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, name, matrix, index = args.child
        result = (child_build(name, Path(matrix), Path(index), args.threads) if kind == "build"
                  else child_query(name, Path(matrix), Path(index)))
        print(json.dumps(result))
        return 0
    for name in list(LIBRARIES):
        if name not in args.only:
            del LIBRARIES[name]
    args.work.mkdir(parents=True, exist_ok=True)
    for tree in args.trees:
        matrix, queries, source = real_vectors(tree, args.queries)
        recall = recall_on(matrix, queries, args.work)
        print(json.dumps({"tree": tree.name, "passages": len(matrix), "queries": len(queries),
                          "source": source, "recall@100": recall}), flush=True)
    if args.random:
        matrix_path = args.work / f"random-{args.random}.npy"
        if not matrix_path.is_file():
            write_random(matrix_path, args.random)
        for name in LIBRARIES:
            index_path = args.work / f"random-{args.random}.{name}"
            built = _child("--child", "build", name, str(matrix_path), str(index_path),
                           "--threads", str(args.threads))
            queried = _child("--child", "query", name, str(matrix_path), str(index_path))
            print(json.dumps({"library": name, "licence": LIBRARIES[name][4], "n": args.random,
                              **built, **queried}), flush=True)
            index_path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
