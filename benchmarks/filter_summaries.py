"""Cost of the metadata summaries that filters prune by, at Natural-Questions document count.

    python benchmarks/filter_summaries.py                  # 108,626 documents, 1,000 groups
    python benchmarks/filter_summaries.py --docs 10000 --groups 100

Writes a tree whose documents carry file-like metadata (source, mtime, product out of 12,
year 2015-2026, lang out of 4) and whose passages carry a page number, then measures on the
finished file: the time `write_summaries` takes (it runs inside every commit; here run again
on a copy), and, for a filter on product/year/lang, reading the root's children's summaries
and deciding them (the work the group stage adds per query; cached per navigator after).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from decisionrag import Tree, TreeWriter
from decisionrag._navigate._filters import parse_filters
from decisionrag._tree import DocumentSpec, PassageSpec
from decisionrag._tree._summaries import write_summaries

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

PRODUCTS = [f"product-{i}" for i in range(12)]
LANGS = ["en", "de", "fr", "ja"]


def build(path: Path, n_docs: int, n_groups: int, passages: int, seed: int) -> float:
    rng = random.Random(seed)
    start = time.perf_counter()
    with TreeWriter(path) as writer:
        for d in range(n_docs):
            meta = {"source": f"corpus/dir{d % 97}/doc{d}.pdf", "mtime": "2026-11-30T12:00:00Z",
                    "product": rng.choice(PRODUCTS), "year": rng.randint(2015, 2026),
                    "lang": rng.choice(LANGS)}
            specs = [PassageSpec(f"passage {p} of document {d}", key=f"d{d}-p{p}",
                                 meta={"page": p + 1}) for p in range(passages)]
            writer.add_document(DocumentSpec(f"Document {d}", specs, key=f"d{d}",
                                             groups=(f"group {d % n_groups}",), meta=meta))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=108_626)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.tree"
        built = build(path, args.docs, args.groups, args.passages, args.seed)
        copy = Path(tmp) / "copy.tree"
        shutil.copy(path, copy)
        db = sqlite3.connect(copy, isolation_level=None)
        db.execute("BEGIN")
        t0 = time.perf_counter()
        write_summaries(db)
        summaries_s = time.perf_counter() - t0
        db.execute("ROLLBACK")
        db.close()
        spec = parse_filters({"product": "product-3", "year": {"gte": 2024},
                              "lang": {"in": ["en", "de"]}})
        assert spec is not None
        with Tree.open(path) as tree:
            t0 = time.perf_counter()
            groups = tree.children(tree.root.id)
            found = tree.metadata_summaries([g.id for g in groups]) or {}
            kept = sum(spec.may_match(found[g.id]) for g in groups)
            decide_s = time.perf_counter() - t0
            docs = tree.children(groups[0].id)
            t0 = time.perf_counter()
            doc_rows = tree.metadata_summaries([d.id for d in docs]) or {}
            kept_docs = sum(spec.may_match(doc_rows[d.id]) for d in docs)
            decide_docs_s = time.perf_counter() - t0
    print(f"| documents | groups | passages | build s (incl. summaries) | write_summaries s "
          f"| group level: read + decide ms (kept) | one group's {len(docs)} documents ms (kept) "
          "| peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.docs:,} | {args.groups:,} | {args.docs * args.passages:,} | {built:.1f} "
          f"| {summaries_s:.2f} | {decide_s * 1e3:.1f} ({kept}) | {decide_docs_s * 1e3:.1f} "
          f"({kept_docs}) | {peak_rss_mb():.0f} |")


if __name__ == "__main__":
    main()
