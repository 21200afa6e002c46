"""How many clusters must be kept to match flat scoring? (the paper's Figure 7 question)

    python benchmarks/cluster_budget.py                       # xquad-en and conditionalqa-dev
    python benchmarks/cluster_budget.py --groups 8 10 --judge embedded
    python benchmarks/cluster_budget.py --datasets mtrag-cloud-pooled --groups 63 --query-field rewrite

Each dataset's documents are clustered (bundled MiniLM, offline extractive descriptions)
into a forced number of groups. For every query with a gold document, the judge scores the
group descriptions in one binary request ("Is the page with the information needed to answer
the user's question likely in Topic n?") and keeps the top 10 %, 25 % and 50 % of groups.
Reported: the share of queries whose gold document's group is kept, and, as the flat
reference, the share whose gold document is among the judge's top-m documents when it scores
every document (title and headings) directly, m = the number of documents in the kept groups
for that query. A third column routes by embedding instead of by description: the query's
MiniLM vector against the stored group centroids (no judge), to tell whether the hierarchy or
the descriptions lose the gold group.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from decisionrag import Tree, TreeWriter, build_tree
from decisionrag._cluster import ExtractiveDescriber, cluster_documents
from decisionrag._embed import load_encoder
from decisionrag._judges._base import BinaryRequest, Candidate, Judge
from decisionrag._judges._registry import load_judge

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GROUP_QUESTION = ("Is the page with the information needed to answer the user's question "
                  "likely in Topic {n}?")
PAGE_QUESTION = "Is the information needed to answer the user's question on Page {n}?"
BUDGETS = (0.10, 0.25, 0.50)


@dataclass
class Query:
    id: str
    text: str
    gold: set[str]


def load_queries(folder: Path, field: str = "text") -> list[Query]:
    """Queries with at least one gold document (page-level qrels, else passage qrels). The
    query text is context + text, or with field="rewrite" the standalone rewrite of a
    conversational turn where the dataset has one."""
    passage_doc = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            passage_doc[record["id"]] = record["doc_id"]
    gold: dict[str, set[str]] = {}
    docs_file = folder / "qrels_docs.tsv"
    qrels = docs_file if docs_file.is_file() else folder / "qrels.tsv"
    for row in qrels.read_text(encoding="utf-8").splitlines()[1:]:
        qid, ref, score = row.split("\t")
        if int(score) > 0:
            gold.setdefault(qid, set()).add(ref if qrels == docs_file else passage_doc[ref])
    queries = []
    with open(folder / "queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["id"] in gold:
                text = " ".join(filter(None, [record.get("context"), record["text"]]))
                if field == "rewrite" and record.get("rewrite"):
                    text = record["rewrite"]
                queries.append(Query(record["id"], text, gold[record["id"]]))
    return queries


def render(query: str, label: str, texts: list[str], questions: list[str]) -> str:
    listed = "\n".join(f"{label} {i + 1}: {text}" for i, text in enumerate(texts))
    return f"User's question: {query}\n\n{listed}\n\n" + "\n".join(questions)


async def scores(judge: Judge, query: str, label: str, question: str,
                 items: list[tuple[str, str]]) -> list[float]:
    questions = [question.format(n=i + 1) for i in range(len(items))]
    texts = [text for _, text in items]
    request = BinaryRequest(render(query, label, texts, questions), tuple(questions), query=query,
                            candidates=tuple(Candidate(key, text) for key, text in items))
    return (await judge.binary(request)).probabilities


def cluster_tree(folder: Path, out: Path, n_groups: int, seed: int,
                 describer: ExtractiveDescriber) -> dict[str, float]:
    t0 = time.perf_counter()
    build_tree([folder / "corpus.jsonl"], out)
    writer = TreeWriter.update(out)
    with writer:
        report = cluster_documents(writer, n_groups, seed=seed, describer=describer)
    stats = report.size_stats()
    return {"seconds": time.perf_counter() - t0, "groups": report.groups, **stats}


def centroids(path: Path) -> dict[int, np.ndarray]:
    writer = TreeWriter.update(path)
    try:
        return {row[0]: np.frombuffer(row[3], np.float32) for row in writer.load_centroids(0)}
    finally:
        writer.abort()


async def evaluate(tree: Tree, queries: list[Query], judge: Judge) -> dict[float, tuple]:
    groups = tree.children(tree.root.id)
    by_centroid = np.stack([centroids(tree.file)[g.id] for g in groups])
    query_vectors = load_encoder().encode([q.text for q in queries])
    group_items = [(g.key, g.description) for g in groups]
    members = {g.key: [d.key for d in tree.children(g.id)] for g in groups}
    home = {doc: g for g, docs in members.items() for doc in docs}
    documents = list(tree.documents())
    doc_items = [(d.key, d.description or d.title) for d in documents]
    results: dict[float, list[tuple[bool, bool, bool, int]]] = {b: [] for b in BUDGETS}
    for query, vector in zip(queries, query_vectors, strict=True):
        group_p = await scores(judge, query.text, "Topic", GROUP_QUESTION, group_items)
        doc_p = await scores(judge, query.text, "Page", PAGE_QUESTION, doc_items)
        group_rank = sorted(range(len(groups)), key=lambda i: -group_p[i])
        centroid_rank = np.argsort(-(by_centroid @ vector), kind="stable")
        doc_rank = [doc_items[i][0] for i in sorted(range(len(documents)), key=lambda i: -doc_p[i])]
        for budget in BUDGETS:
            n_kept = max(1, math.ceil(budget * len(groups)))
            kept = {groups[i].key for i in group_rank[:n_kept]}
            near = {groups[int(i)].key for i in centroid_rank[:n_kept]}
            n_docs = sum(len(members[g]) for g in kept)
            cluster_hit = any(home.get(doc) in kept for doc in query.gold)
            centroid_hit = any(home.get(doc) in near for doc in query.gold)
            flat_hit = bool(query.gold & set(doc_rank[:n_docs]))
            results[budget].append((cluster_hit, centroid_hit, flat_hit, n_docs))
    summary = {}
    for budget, rows in results.items():
        shares = [100 * statistics.mean(r[i] for r in rows) for i in range(3)]
        summary[budget] = (*shares, statistics.mean(r[3] for r in rows))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["xquad-en", "conditionalqa-dev"])
    parser.add_argument("--groups", nargs="+", type=int, default=[8, 10],
                        help="forced number of groups, one per dataset")
    parser.add_argument("--judge", default="embedded")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--terms", type=int, default=10, help="terms in each description")
    parser.add_argument("--titles", type=int, default=8, help="titles in each description")
    parser.add_argument("--query-field", choices=["text", "rewrite"], default="text",
                        help="query text: context + text, or the rewrite of a conversational turn")
    args = parser.parse_args()
    describer = ExtractiveDescriber(n_terms=args.terms, n_titles=args.titles)
    judge = load_judge(args.judge)
    print("| dataset | queries | groups (min/median/max size) | kept groups | docs kept (mean) "
          "| gold group kept % | by centroid % | flat: gold in top-same-docs % |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, n_groups in zip(args.datasets, args.groups, strict=True):
            folder = DATA / name
            out = Path(tmp) / f"{name}.tree"
            built = cluster_tree(folder, out, n_groups, args.seed, describer)
            queries = load_queries(folder, args.query_field)
            with Tree.open(out) as tree:
                table = asyncio.run(evaluate(tree, queries, judge))
            sizes = f"{built['groups']:.0f} ({built['min']:.0f}/{built['median']:g}/{built['max']:.0f})"
            for budget, (cluster, centroid, flat, docs) in table.items():
                kept = max(1, math.ceil(budget * built["groups"]))
                print(f"| {name} | {len(queries)} | {sizes} | {budget:.0%} = {kept} | {docs:.1f} "
                      f"| {cluster:.1f} | {centroid:.1f} | {flat:.1f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
