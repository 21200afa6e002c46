"""Fit the embedded judge's constants on ONE dataset, by walking it; report the others held out.

Steps, all on the fit dataset only:

1. walk it once (``decisionrag``, auto preset) recording the evidence of every candidate of
   every binary request: own similarity, best-part similarity, lexical score; label: the
   candidate is, or holds, a gold passage;
2. the evidence weights by maximum likelihood: logistic regression of the label on
   (own, best, lexical); ``part_weight = w_best / (w_own + w_best)`` and
   ``lexical_weight = w_lex / (w_own + w_best)`` (the fused score keeps the similarity scale);
   with ``--grid``, a grid search on the fit set's retrieval metric instead (slow);
3. walk it again with those weights and fit the calibration (bias, w_sim, w_lead) by logistic
   regression on the fused scores and their leads, and the choice temperature by maximum
   likelihood on the final choices.

Then every dataset given is evaluated with the fitted constants (the first is in-sample).

    python benchmarks/embedded_fit.py conditionalqa-dev --check xquad-en mtrag-cloud-pooled

Each request the judge answers is labelled with the id of the query being walked (the
evaluation runs queries one at a time, in conversation order), never matched by text: 33 of
conditionalqa-dev's 285 queries share their question with another. `--data` is the folder of
the shared datasets (default: ``../shared/data`` beside the checkout).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from decisionrag._app import evaluate
from decisionrag._eval import EvalSettings, load_dataset
from decisionrag._eval._runner import conversation_order
from decisionrag._judges._base import (
    BinaryRequest,
    BinaryResult,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    JudgeWrapper,
)
from decisionrag._judges._calibration import Calibration, leads
from decisionrag._judges._embedded import EmbeddedJudge, embedded_judge, searched_text

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


class Recorder(JudgeWrapper):
    """The embedded judge, recording the fused scores of every request it answers, each
    under the id of the query being walked (`next_query` is the evaluation's progress
    callback, called after each query)."""

    inner: EmbeddedJudge

    def __init__(self, inner: EmbeddedJudge) -> None:
        super().__init__(inner)
        self.binary_log: list[tuple[str, list[str], np.ndarray]] = []
        self.choice_log: list[tuple[str, list[str], np.ndarray]] = []
        self.evidence_log: list[tuple[str, list[str], np.ndarray]] = []
        self.order: list[str] = []
        self.position = 0

    def start(self, order: list[str]) -> None:
        self.order, self.position = order, 0

    def next_query(self, _system: str) -> None:
        self.position += 1

    @property
    def query_id(self) -> str:
        return self.order[self.position]

    def _scores(self, request: BinaryRequest | ChoiceRequest) -> np.ndarray:
        lexicon = request.statistics
        return self.inner.scores(searched_text(request), request.candidates, lexicon)

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        result = await self.inner.binary(request)
        ids = [c.id for c in request.candidates]
        self.binary_log.append((self.query_id, ids, self._scores(request)))
        evidence = self.inner.evidence(searched_text(request), request.candidates,
                                       request.statistics)
        self.evidence_log.append((self.query_id, ids, np.stack(evidence, axis=1)))
        return result

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        result = await self.inner.choice(request)
        ids = [c.id for c in request.candidates]
        self.choice_log.append((self.query_id, ids, self._scores(request)))
        return result


def run(dataset: Any, judge: Judge, metric: str, limit: int | None) -> tuple[float, dict[str, Any]]:
    data = dataset.limit(limit) if limit else dataset
    settings = EvalSettings(systems=["decisionrag"], resamples=10)
    progress = None
    if isinstance(judge, Recorder):
        judge.start([q.id for conversation in conversation_order(data.queries) for q in conversation])
        progress = judge.next_query
    report = evaluate(data, settings, judge, progress)
    values = report["systems"]["decisionrag"]
    key = next(k for k in values if k.endswith("_" + metric))
    return float(values[key]), values


def fit_calibration(recorder: Recorder, dataset: Any, base: Calibration) -> Calibration:
    from sklearn.linear_model import LogisticRegression

    rows, labels = [], []
    for query_id, ids, scores in recorder.binary_log:
        gold = _gold(dataset, query_id)
        if len(ids) < 2:
            continue
        lead = leads(scores)
        for key, s, lv in zip(ids, scores, lead, strict=True):
            rows.append((s, lv))
            labels.append(key in gold)
    model = LogisticRegression(C=100.0, max_iter=1000).fit(np.asarray(rows), np.asarray(labels))
    w_sim, w_lead = (float(w) for w in model.coef_[0])
    best_t, best_ll = base.temperature, -np.inf
    for t in np.geomspace(0.005, 0.5, 60):
        ll = 0.0
        for query_id, ids, scores in recorder.choice_log:
            gold = _gold(dataset, query_id)
            hits = [i for i, key in enumerate(ids) if gold and key in gold]
            if not hits:
                continue
            z = scores / t
            z = z - z.max()
            p = np.exp(z) / np.exp(z).sum()
            ll += float(np.log(max(p[hits].sum(), 1e-12)))
        if ll > best_ll:
            best_t, best_ll = float(t), ll
    return dataclasses.replace(base, bias=float(model.intercept_[0]), similarity=w_sim,
                               lead=w_lead, temperature=best_t)


def fit_weights(recorder: Recorder, dataset: Any, base: Calibration) -> Calibration:
    from sklearn.linear_model import LogisticRegression

    rows, labels = [], []
    for query_id, ids, evidence in recorder.evidence_log:
        gold = _gold(dataset, query_id)
        rows.extend(evidence.tolist())
        labels.extend(key in gold for key in ids)
    model = LogisticRegression(C=100.0, max_iter=2000).fit(np.asarray(rows), np.asarray(labels))
    w_own, w_best, w_lex = (float(w) for w in model.coef_[0])
    print(f"evidence weights (logistic, {len(rows):,} candidates, {sum(labels):,} gold): "
          f"own {w_own:.3f}, best part {w_best:.3f}, lexical {w_lex:.3f}", flush=True)
    scale = max(w_own + w_best, 1e-9)
    return dataclasses.replace(base, part_weight=min(1.0, max(0.0, w_best / scale)),
                               lexical_weight=max(0.0, w_lex / scale))


def _gold(dataset: Any, query_id: str) -> set[str]:
    """The passages and pages labelled relevant to the query `query_id` (empty: none, e.g. a
    not-answerable question: its candidates are all negatives)."""
    passages = {key for key, score in dataset.qrels.get(query_id, {}).items() if score > 0}
    return passages | dataset.gold_docs(query_id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fit", help="the dataset (a folder name under --data) to fit on")
    parser.add_argument("--data", type=Path, default=DATA,
                        help="the shared datasets' folder (default ../shared/data beside the checkout)")
    parser.add_argument("--check", nargs="*", default=[])
    parser.add_argument("--metric", default="hit@1")
    parser.add_argument("--limit", type=int, default=None, help="fit on the first N queries")
    parser.add_argument("--parts", default="0,0.25,0.5,0.75,1")
    parser.add_argument("--lexical", default="0,0.15,0.3,0.5,0.8")
    parser.add_argument("--grid", action="store_true", help="grid search instead of step 2")
    args = parser.parse_args()
    judge = embedded_judge()
    fit = load_dataset(args.data / args.fit)
    base = judge.calibration
    best: tuple[float, Calibration] = (-1.0, base)
    if args.grid:
        print(f"grid on {args.fit} ({args.metric}):")
        for part, lexical in itertools.product(map(float, args.parts.split(",")),
                                               map(float, args.lexical.split(","))):
            judge.calibration = dataclasses.replace(base, part_weight=part, lexical_weight=lexical)
            started = time.perf_counter()
            value, _ = run(fit, judge, args.metric, args.limit)
            print(f"  part_weight={part:<5} lexical_weight={lexical:<5} {args.metric}={value:.3f}"
                  f"  ({time.perf_counter() - started:.0f} s)", flush=True)
            if value > best[0]:
                best = (value, judge.calibration)
    else:
        recorder = Recorder(judge)
        value, _ = run(fit, recorder, args.metric, args.limit)
        print(f"{args.fit} with the starting constants: {args.metric}={value:.3f}", flush=True)
        best = (value, fit_weights(recorder, fit, base))
    judge.calibration = best[1]
    recorder = Recorder(judge)
    run(fit, recorder, args.metric, args.limit)
    fitted = fit_calibration(recorder, fit, best[1])
    print(f"fitted: {fitted}")
    judge.calibration = fitted
    for name in [args.fit, *args.check]:
        value, _ = run(load_dataset(args.data / name), judge, args.metric if name == args.fit else
                       ("recall@5" if "mtrag" in name else "hit@1"), None)
        tag = "fit" if name == args.fit else "held out"
        print(f"{name} ({tag}): {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
