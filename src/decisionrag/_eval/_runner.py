"""Runs systems over a dataset and writes the report: metrics, intervals, latency, cost, pruning.

Latency is measured around each query's whole retrieval, after the tree is open and the
flat indexes are built. Queries of one conversation run in order; each conversation starts
with a clean notepad. Every system sees the queries in the same order, one at a time.

External runs (files of another retriever's rankings, :mod:`._runs`) join the comparison
after the built-in systems: they are aligned to the dataset's queries, cut at the same depth
and scored by the same code; they have no latency or token figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InputError
from .._judges import Judge
from .._judges._base import cost_usd
from .._progress import step
from .._sync import run_sync
from .._tree import Tree
from ._answers import AnswerClient, answer_quality
from ._bootstrap import compare
from ._data import Dataset, EvalQuery
from ._metrics import (
    Judgments,
    MetricSpec,
    PerQuery,
    mean_metrics,
    metric_counts,
    score_run,
    text_groups,
)
from ._runs import ExternalRun, RunAlignment, align, run_file_name, write_trec
from ._systems import Retrieval, System, Systems

SystemsFor = Callable[[Tree], Systems]  # the systems of an evaluation, over its open tree

JEV_PRICE_PER_MILLION = 0.042  # USD per million input tokens


@dataclass
class EvalSettings:
    systems: list[str]
    preset: str = "auto"
    spec: MetricSpec = field(default_factory=MetricSpec)
    dedup_text: bool = False
    dedup_lowercase: bool = False
    # USD per million input tokens for every system; None: each judge's own cost (its usage)
    price_per_million: float | None = None
    tree_cache: str | None = None
    embed_model: str | None = None
    embed_cache: str | None = None
    resamples: int = 10_000
    seed: int = 0
    keep_runs: int = 0  # how many top keys per query to keep in the report (0: none)
    dense_search: str = "auto"  # dense/hybrid: "auto" (ANN from ANN_FROM passages), "exact", "ann"
    approximation_queries: int = 100  # queries whose ANN top 100 is checked against exact
    # show each long step on stderr (`decisionrag._progress`): the tree, preparing the
    # systems, each system's queries
    progress: bool = False

    @property
    def depth(self) -> int:
        return max((*self.spec.ks, *self.spec.recall_ks, self.spec.depth))


@dataclass
class SystemRun:
    """Everything one system produced on the dataset, per query."""

    name: str
    retrievals: dict[str, Retrieval] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    alignment: RunAlignment | None = None  # for a run read from a file

    def rankings(self) -> dict[str, list[str]]:
        return {q: r.ranking for q, r in self.retrievals.items()}


@dataclass
class Evaluation:
    """The report (JSON-able) and every system's per-query retrievals behind it."""

    report: dict[str, Any]
    runs: list[SystemRun]


Progress = Callable[[str], None]


def conversation_order(queries: Sequence[EvalQuery]) -> list[list[EvalQuery]]:
    """Queries grouped by conversation (first appearance order), turns in file order."""
    groups: dict[str, list[EvalQuery]] = {}
    for query in queries:
        groups.setdefault(query.conversation, []).append(query)
    return list(groups.values())


async def run_system(
    system: System,
    conversations: Sequence[Sequence[EvalQuery]],
    k: int,
    progress: Progress | None = None,
    show: bool = False,
) -> SystemRun:
    """Every query of `conversations` through `system`; `progress(name)` after each query,
    and with `show` one step on stderr counting them."""
    run = SystemRun(system.name)
    total = sum(len(c) for c in conversations)
    with step(system.name, total, "queries", enabled=show) as shown:
        for conversation in conversations:
            system.start_conversation()
            for query in conversation:
                start = time.perf_counter()
                retrieval = await system.run(query, k)
                run.seconds[query.id] = time.perf_counter() - start
                run.retrievals[query.id] = retrieval
                shown.advance(1)
                if progress:
                    progress(system.name)
    return run


def run_evaluation(
    dataset: Dataset,
    settings: EvalSettings,
    systems_for: SystemsFor,
    judge: Judge | None = None,
    progress: Progress | None = None,
    tree_path: Path | None = None,
    answers: AnswerClient | None = None,
    external: Sequence[ExternalRun] = (),
) -> Evaluation:
    """Run every system `systems_for(tree)` builds by the names in `settings` on `dataset`:
    the report (JSON-able) and every system's retrievals (for --save-runs and the HTML report).

    With an answer client, each system's top-5 passages are also answered from and scored
    by exact match and token F1 (metrics ``exact_match`` and ``token_f1``, over the queries
    with reference answers). `external` runs are scored beside the systems, in the order given.
    """
    clash = sorted({run.name for run in external} & set(settings.systems))
    if clash or len({run.name for run in external}) != len(external):
        raise InputError(f"run names must differ from each other and from the systems: {clash}")
    runs: list[SystemRun] = []
    pruning: dict[str, Any] = {}
    dense_search: dict[str, Any] | None = None
    if settings.systems:
        if tree_path is None:
            raise InputError("an evaluation of systems needs the dataset's tree (tree_path)")
        with Tree.open(tree_path) as tree:
            factory = systems_for(tree)
            systems = _prepare(factory, settings)
            runs = run_sync(_run_all(systems, dataset, settings.depth, judge, progress,
                                     settings.progress))
            if factory.opened_dense is not None:
                dense_search = approximation(factory.opened_dense, dataset, settings)
            pruning = {
                run.name: pruning_recall(run, dataset, tree)
                for run in runs
                if any(r.stages for r in run.retrievals.values())
            }
    runs.extend(external_runs(dataset, external, settings.depth))
    extra: dict[str, PerQuery] = {}
    if answers is not None:
        for run in runs:
            quality = run_sync(answer_quality(dataset, run.rankings(), answers))
            extra[run.name] = {"exact_match": quality["per_query"], "token_f1": quality["per_query_f1"]}
    report = build_report(dataset, settings, runs, pruning, extra)
    if dense_search is not None:
        report["dense_search"] = dense_search
    return Evaluation(report, runs)


def approximation(dense: Any, dataset: Dataset, settings: EvalSettings) -> dict[str, Any]:
    """How dense search ran ("ann" or "exact"), and for "ann" its recall@100 against an
    exact search, over the first `approximation_queries` queries (what `dense` is asked)."""
    out: dict[str, Any] = {"search": dense.search, "passages": dense.size}
    if dense.search == "ann":
        texts = [q.flat_text() for q in dataset.queries[: settings.approximation_queries]]
        out.update({"recall@100": dense.approximation_recall(texts, 100), "queries": len(texts),
                    "index": dense.ann.header.factory, "nprobe": dense.ann.nprobe})
    return out


def external_runs(dataset: Dataset, runs: Sequence[ExternalRun], depth: int) -> list[SystemRun]:
    """Runs read from files, aligned to the dataset's queries and cut at `depth`."""
    if not runs:
        return []
    known = set(dataset.corpus) | {p.doc_id for p in dataset.corpus.values()}
    query_ids = [q.id for q in dataset.queries]
    result = []
    for run in runs:
        rankings, alignment = align(run, query_ids, known, depth)
        retrievals = {
            q: Retrieval([i for i, _ in ranked], scores=[s for _, s in ranked])
            for q, ranked in rankings.items()
        }
        result.append(SystemRun(run.name, retrievals, {}, alignment))
    return result


def write_runs(runs: Sequence[SystemRun], folder: str | Path, **rule: Any) -> list[Path]:
    """Every system's run as ``<folder>/<system>.trec`` (TREC format, tagged with its name),
    each under the one output rule (`rule`: inputs, force, ... of `write_trec`)."""
    from .._files import check_output_folder

    target = check_output_folder(folder, flag=rule.get("flag", ""))
    return [
        write_trec(
            target / run_file_name(run.name),
            run.rankings(),
            {q: r.scores for q, r in run.retrievals.items()},
            run.name,
            **rule,
        )
        for run in runs
    ]


def _prepare(factory: Systems, settings: EvalSettings) -> list[System]:
    """The systems of `settings`, built (flat indexes, encoders, navigators) as one step."""
    with step("preparing systems", len(settings.systems), "systems",
              enabled=settings.progress) as shown:
        systems = []
        for name in settings.systems:
            shown.note(name)
            systems.append(factory.build(name))
            shown.advance(1)
        return systems


async def _run_all(
    systems: Sequence[System],
    dataset: Dataset,
    k: int,
    judge: Judge | None,
    progress: Progress | None,
    show: bool = False,
) -> list[SystemRun]:
    conversations = conversation_order(dataset.queries)
    try:
        return [await run_system(system, conversations, k, progress, show) for system in systems]
    finally:
        if judge is not None:
            await judge.aclose()


# -- scoring -------------------------------------------------------------------------------


def judgments_for(dataset: Dataset, settings: EvalSettings) -> Judgments:
    corpus = dataset.corpus
    groups = None
    if settings.dedup_text:
        groups = text_groups({pid: p.text for pid, p in corpus.items()}, settings.dedup_lowercase)
    gold_docs = {q.id: dataset.gold_docs(q.id) for q in dataset.queries}
    return Judgments(dataset.qrels, gold_docs, {pid: p.doc_id for pid, p in corpus.items()}, groups)


def build_report(
    dataset: Dataset,
    settings: EvalSettings,
    runs: Sequence[SystemRun],
    pruning: Mapping[str, Any],
    extra: Mapping[str, PerQuery] | None = None,
) -> dict[str, Any]:
    judgments = judgments_for(dataset, settings)
    per_query = {
        run.name: score_run(
            {q: r.ranking for q, r in run.retrievals.items()}, judgments, settings.spec
        )
        for run in runs
    }
    for name, values in (extra or {}).items():
        per_query[name].update(values)
    curve_spec = MetricSpec(ks=(), recall_ks=tuple(range(1, settings.depth + 1)), depth=settings.depth)
    prefix = dataset.prefix
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "prefix": prefix,
        "n_queries": len(dataset.queries),
        "metric_queries": metric_counts(per_query[runs[0].name]) if runs else {},
        "settings": _settings_dict(settings),
        "systems": {
            run.name: {
                **mean_metrics(per_query[run.name], prefix),
                **cost_and_latency(run, settings.price_per_million),
            }
            for run in runs
        },
        "baseline": runs[0].name if runs else None,
        "intervals": intervals(per_query, [run.name for run in runs], prefix, settings),
        "pruning": dict(pruning),
        "runs_in": {run.name: run.alignment.to_dict() for run in runs if run.alignment},
        "warnings": [w for run in runs if run.alignment for w in run.alignment.warnings()],
        "per_query": per_query,
        "per_query_cost": {run.name: per_query_cost(run) for run in runs if run.seconds},
        "recall_curve": {
            run.name: recall_curve(run.rankings(), judgments, curve_spec) for run in runs
        },
    }
    if settings.keep_runs:
        report["runs"] = {
            run.name: {q: r.ranking[: settings.keep_runs] for q, r in run.retrievals.items()}
            for run in runs
        }
    return report


def _settings_dict(settings: EvalSettings) -> dict[str, Any]:
    return {
        "preset": settings.preset,
        "ks": list(settings.spec.ks),
        "recall_ks": list(settings.spec.recall_ks),
        "depth": settings.depth,
        "dedup_text": settings.dedup_text,
        "dedup_lowercase": settings.dedup_lowercase,
        "price_per_million": settings.price_per_million,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "dense_search": settings.dense_search,
    }


def intervals(
    per_query: Mapping[str, PerQuery], names: Sequence[str], prefix: str, settings: EvalSettings
) -> dict[str, dict[str, list[float]]]:
    """Paired 95 % intervals of every metric of every system against the first one."""
    if not names:
        return {}
    base = per_query[names[0]]
    head = f"{prefix}_" if prefix else ""
    result: dict[str, dict[str, list[float]]] = {}
    for name in names[1:]:
        result[name] = {
            f"{head}{metric}": compare(
                values, base.get(metric, {}), resamples=settings.resamples, seed=settings.seed
            ).to_list()
            for metric, values in per_query[name].items()
        }
    return result


def recall_curve(
    rankings: Mapping[str, Sequence[str]], judgments: Judgments, spec: MetricSpec
) -> list[float]:
    """Mean Recall@k for k = 1 .. depth, over the queries with a relevant passage."""
    values = score_run(rankings, judgments, spec)
    curve = []
    for k in spec.recall_ks:
        column = values.get(f"recall@{k}", {})
        curve.append(sum(column.values()) / len(column) if column else 0.0)
    return curve


def per_query_cost(run: SystemRun) -> dict[str, dict[str, float]]:
    """Seconds and input tokens of every query (for the report's distributions)."""
    return {
        "seconds": dict(run.seconds),
        "tokens": {
            q: float(r.usage.input_tokens) if r.usage is not None else 0.0
            for q, r in run.retrievals.items()
        },
    }


def cost_and_latency(run: SystemRun, price_per_million: float | None) -> dict[str, Any]:
    """Latency percentiles, tokens and requests per query, and the cost: at
    `price_per_million` when given, else what the judge itself reported (a cached judgment
    costs nothing; a judge without a price costs 0). `tokens_estimated` says whether any
    token count was an estimate rather than the judge's own count."""
    if not run.seconds:  # a run read from a file: nothing was measured
        return {}
    seconds = np.array(list(run.seconds.values()))
    usages = [r.usage for r in run.retrievals.values() if r.usage is not None]
    n = max(len(run.retrievals), 1)
    tokens = sum(u.input_tokens for u in usages)
    if price_per_million is not None:
        cents = (cost_usd(tokens / n, price_per_million) or 0.0) * 100
    else:
        cents = sum(u.cost_usd or 0.0 for u in usages) / n * 100
    return {
        "latency_p50": float(np.percentile(seconds, 50)),
        "latency_p90": float(np.percentile(seconds, 90)),
        "tokens_per_query": tokens / n,
        "requests_per_query": sum(u.requests for u in usages) / n,
        "cents_per_query": cents,
        "tokens_estimated": any(u.estimated for u in usages),
    }


# -- pruning recall --------------------------------------------------------------------------


class _GoldPages:
    """Answers "does this kept node lead to (or lie inside) a gold page?" with cached lookups."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._nodes: dict[str, Any] = {}
        self._paths: dict[int, set[int]] = {}

    def _node(self, key: str) -> Any:
        if key not in self._nodes:
            try:
                self._nodes[key] = self.tree.node(key)
            except KeyError:
                self._nodes[key] = None
        return self._nodes[key]

    def _ancestors(self, doc_id: int) -> set[int]:
        if doc_id not in self._paths:
            self._paths[doc_id] = {n.id for n in self.tree.path(doc_id)}
        return self._paths[doc_id]

    def survives(self, kept: Sequence[str], gold_docs: set[str]) -> bool:
        gold = [n.id for n in (self._node(d) for d in gold_docs) if n is not None]
        ancestors = set().union(*(self._ancestors(d) for d in gold)) if gold else set()
        for key in kept:
            node = self._node(key)
            if node is not None and (node.id in ancestors or node.doc in gold):
                return True
        return False


def pruning_recall(run: SystemRun, dataset: Dataset, tree: Tree) -> dict[str, dict[str, float]]:
    """For each stage: the share of queries (with a gold page) whose gold page it kept."""
    pages = _GoldPages(tree)
    kept: dict[str, list[bool]] = {}
    for query_id, retrieval in run.retrievals.items():
        gold = dataset.gold_docs(query_id)
        if not gold:
            continue
        pages_kept: list[str] = []
        recovered: list[str] = []
        for index, (stage, keys) in enumerate(retrieval.stages):
            kept.setdefault(f"{index}:{stage}", []).append(pages.survives(keys, gold))
            if stage.startswith("page"):
                pages_kept = list(keys)
            elif stage == "recovery":
                recovered = list(keys)
        if pages_kept:  # what the passage stage opens: the kept pages and the recovered ones
            kept.setdefault("pages after recovery", []).append(
                pages.survives([*pages_kept, *recovered], gold))
    return {stage: {"survived": sum(v) / len(v), "queries": len(v)} for stage, v in kept.items()}
