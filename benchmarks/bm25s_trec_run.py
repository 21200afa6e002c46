"""A BM25 run made outside decisionrag, with bm25s alone, written as a TREC run file.

    python benchmarks/bm25s_trec_run.py ../shared/data/conditionalqa-dev bm25s.trec
    decisionrag eval ../shared/data/conditionalqa-dev --systems bm25 --run bm25s=bm25s.trec

This stands for "the retriever you already run": it imports nothing from decisionrag (only
bm25s, PyStemmer and numpy), reads a dataset in the shared format and writes the top
--depth passages of every query. It indexes what the built-in `bm25` system indexes (title,
heading path, text; Lucene BM25, k1 = 1.5, b = 0.75, English stemming and stopwords) and asks
what it asks (ConditionalQA's scenario + question), so through `--run` it must reproduce the
built-in system's numbers exactly; tests/test_eval_external_bm25.py checks that it does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bm25s
import numpy as np
import Stemmer


def passage_text(record: dict) -> str:
    """Title, heading path (a heading equal to the title left out), text, one per line."""
    title = (record.get("doc_title") or "").strip()
    path = [h for h in record.get("section") or [] if h and h != title]
    return "\n".join(p for p in (title, " > ".join(path), record["text"]) if p)


def query_text(record: dict) -> str:
    context = record.get("context") or ""
    return f"{context} {record['text']}".strip() if context else record["text"]


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="folder with corpus.jsonl and queries.jsonl")
    parser.add_argument("out", type=Path, help="TREC run file to write")
    parser.add_argument("--depth", type=int, default=100, help="passages per query (default 100)")
    args = parser.parse_args(argv)

    corpus = read_jsonl(args.dataset / "corpus.jsonl")
    queries = read_jsonl(args.dataset / "queries.jsonl")
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    tokens = bm25s.tokenize([passage_text(r) for r in corpus], stopwords="en", stemmer=stemmer,
                            show_progress=False)
    model.index(tokens, show_progress=False)
    ids = [r["id"] for r in corpus]

    lines = []
    for query in queries:
        words = bm25s.tokenize([query_text(query)], stopwords="en", stemmer=stemmer,
                               return_ids=False, show_progress=False)[0]
        words = [w for w in words if w in model.vocab_dict]
        scores = np.asarray(model.get_scores(words), dtype=np.float32) if words else np.zeros(len(ids))
        order = np.lexsort((np.arange(len(ids)), -scores))[: args.depth]  # ties: corpus order
        for rank, index in enumerate(order, 1):
            lines.append(f"{query['id']} Q0 {ids[index]} {rank} {scores[index]:.6f} bm25s\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(lines), encoding="utf-8")
    print(f"wrote {len(lines)} lines for {len(queries)} queries to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
