"""Fit (and check) the constants of the embedded judge's calibration.

Builds navigation-shaped requests from a labelled dataset — a document stage (every
document title against the query) and a passage stage (the passages of the `--top-docs`
most similar documents) — embeds them with the embedded judge's own encoder and cache,
fits P(yes) = sigmoid(bias + w_sim * s + w_lead * lead) by maximum likelihood on the fit
dataset, fits the choice temperature on the passage stage's top 20, and reports log loss,
Brier score and expected calibration error (ECE, 10 bins) on every dataset given.

    .venv/bin/python benchmarks/embedded_calibration.py --fit xquad-en \
        --check conditionalqa-dev

The first dataset is the fit set (in-sample numbers); the others are held out.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from decisionrag._judges._embedded import EmbeddedJudge, embedded_judge, leads

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@dataclass
class Request:
    stage: str
    similarities: np.ndarray
    labels: np.ndarray


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: Path) -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = defaultdict(set)
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if float(row["score"]) > 0:
                relevant[row["query-id"]].add(row["corpus-id"])
    return relevant


def query_text(query: dict) -> str:
    return " ".join(filter(None, [query["text"], query.get("context", "")]))


def build_requests(judge: EmbeddedJudge, folder: Path, top_docs: int) -> list[Request]:
    corpus = read_jsonl(folder / "corpus.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    qrels = read_qrels(folder / "qrels.tsv")
    docs: dict[str, list[int]] = defaultdict(list)
    titles: dict[str, str] = {}
    for index, row in enumerate(corpus):
        docs[row["doc_id"]].append(index)
        titles.setdefault(row["doc_id"], row["doc_title"] or row["text"][:200])
    doc_ids = list(docs)
    title_vectors = judge.embed([titles[d] for d in doc_ids])
    passage_vectors = judge.embed([row["text"] for row in corpus])
    queries = [q for q in queries if qrels.get(q["id"])]
    query_vectors = judge.embed([query_text(q) for q in queries])
    requests: list[Request] = []
    for query, vector in zip(queries, query_vectors, strict=True):
        gold = qrels[query["id"]]
        gold_docs = {row["doc_id"] for row in corpus if row["id"] in gold}
        doc_sims = title_vectors @ vector
        requests.append(Request("document", doc_sims,
                                np.array([d in gold_docs for d in doc_ids], dtype=float)))
        kept = [doc_ids[i] for i in np.argsort(-doc_sims)[:top_docs]]
        members = [i for d in kept for i in docs[d]]
        requests.append(Request("passage", passage_vectors[members] @ vector,
                                np.array([corpus[i]["id"] in gold for i in members], dtype=float)))
    return requests


def features(requests: list[Request], with_lead: bool) -> tuple[np.ndarray, np.ndarray]:
    rows, labels = [], []
    for request in requests:
        columns = [np.ones_like(request.similarities), request.similarities]
        if with_lead:
            columns.append(leads(request.similarities))
        rows.append(np.stack(columns, axis=1))
        labels.append(request.labels)
    return np.concatenate(rows), np.concatenate(labels)


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 50) -> np.ndarray:
    """Maximum likelihood by Newton's method (a tiny ridge keeps it well-posed)."""
    weights = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ weights)))
        gradient = x.T @ (p - y) + 1e-6 * weights
        hessian = (x * (p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-9:
            break
    return weights


def calibration_report(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    eps = 1e-12
    log_loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
    bins = np.minimum((p * 10).astype(int), 9)
    ece = sum(abs(p[bins == b].mean() - y[bins == b].mean()) * np.mean(bins == b)
              for b in range(10) if np.any(bins == b))
    return {"log_loss": float(log_loss), "brier": float(np.mean((p - y) ** 2)), "ece": float(ece),
            "mean_p": float(p.mean()), "rate": float(y.mean())}


def choice_pools(requests: list[Request], size: int = 20) -> list[tuple[np.ndarray, np.ndarray]]:
    pools = []
    for request in requests:
        if request.stage != "passage":
            continue
        top = np.argsort(-request.similarities)[:size]
        if request.labels[top].any():
            pools.append((request.similarities[top], request.labels[top]))
    return pools


def choice_nll(pools: list[tuple[np.ndarray, np.ndarray]], temperature: float) -> float:
    total = 0.0
    for sims, labels in pools:
        scaled = sims / temperature
        log_p = scaled - scaled.max() - np.log(np.exp(scaled - scaled.max()).sum())
        total -= np.log(np.exp(log_p[labels > 0]).sum())
    return total / len(pools)


def fit_temperature(pools: list[tuple[np.ndarray, np.ndarray]]) -> float:
    grid = np.exp(np.linspace(np.log(0.005), np.log(1.0), 400))
    return float(grid[np.argmin([choice_nll(pools, t) for t in grid])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", default="xquad-en")
    parser.add_argument("--check", nargs="*", default=["conditionalqa-dev"])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--top-docs", type=int, default=3)
    parser.add_argument("--cache-dir", default=None, help="embedding cache (default: the judge's)")
    args = parser.parse_args()
    judge = embedded_judge()
    sets = {name: build_requests(judge, args.data / name, args.top_docs)
            for name in [args.fit, *args.check]}
    fitted = {lead: fit_logistic(*features(sets[args.fit], lead)) for lead in (False, True)}
    temperature = fit_temperature(choice_pools(sets[args.fit]))
    bias, w_sim, w_lead = fitted[True]
    print(f"fitted on {args.fit}: bias={bias:.4f} similarity={w_sim:.4f} lead={w_lead:.4f} "
          f"temperature={temperature:.4f}   (similarity only: bias={fitted[False][0]:.4f} "
          f"similarity={fitted[False][1]:.4f})\n")
    print("| dataset | stage | model | candidates | log loss | Brier | ECE | mean P | rate |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name, requests in sets.items():
        tag = f"{name} (fit)" if name == args.fit else f"{name} (held out)"
        for stage in ("document", "passage", "all"):
            chosen = [r for r in requests if stage in ("all", r.stage)]
            for lead, label in ((False, "sim only"), (True, "sim + lead")):
                x, y = features(chosen, lead)
                p = 1.0 / (1.0 + np.exp(-(x @ fitted[lead])))
                r = calibration_report(p, y)
                print(f"| {tag} | {stage} | {label} | {len(y)} | {r['log_loss']:.4f} | "
                      f"{r['brier']:.4f} | {r['ece']:.4f} | {r['mean_p']:.4f} | {r['rate']:.4f} |")
    print("\n| dataset | choice pools (top 20 with a gold) | NLL at fitted T | NLL at T=1 "
          "| best T for this set | NLL at it |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, requests in sets.items():
        pools = choice_pools(requests)
        own = fit_temperature(pools)
        print(f"| {name} | {len(pools)} | {choice_nll(pools, temperature):.4f} | "
              f"{choice_nll(pools, 1.0):.4f} | {own:.4f} | {choice_nll(pools, own):.4f} |")
    print(f"\nencoder calls {judge.stats.encoder_calls}, texts encoded {judge.stats.encoded}, "
          f"memory hits {judge.stats.memory_hits}, disk hits {judge.stats.disk_hits}")


if __name__ == "__main__":
    main()
