"""Evaluating: the systems of `decisionrag eval` run over a dataset (engine: `decisionrag._eval`),
each navigation system assembled as `decisionrag ask` assembles its navigator."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._build import BuildReport
from .._build._indexes import store_bm25
from .._build._vectors import store_vectors
from .._eval import AnswerClient, Dataset, EvalSettings, Evaluation
from .._eval._runner import run_evaluation as _run
from .._eval._runs import ExternalRun
from .._judges import Judge
from .._tree import Tree
from .._tree._bm25 import bm25_folder
from .._tree._vectors import available_sets
from ._build import build_tree
from ._engine import open_judge
from ._systems import SystemFactory

FLAT_SYSTEMS = ("bm25", "dense", "hybrid")


def eval_judge(judge_id: str, systems: Sequence[str],
               options: Mapping[str, Any] | None = None) -> Judge | None:
    """The judge the navigation systems of an evaluation share, loaded as every door loads
    one (`open_judge`); None when every system is a flat baseline."""
    if all(name in FLAT_SYSTEMS for name in systems):
        return None
    return open_judge(judge_id, options)


def answer_client(model: str, base_url: str | None = None,
                  options: Mapping[str, Any] | None = None) -> AnswerClient:
    """The answer model of `eval --answers`, with the generator's typed options (temperature,
    concurrency, the retry policy: see `GeneratorOptions`)."""
    from .._answer import GeneratorOptions

    if not options:
        return AnswerClient(model, base_url=base_url)
    given = GeneratorOptions.parse(options, model)
    return AnswerClient(model, base_url=base_url, temperature=given.temperature,
                        concurrency=given.chosen("concurrency", 8), policy=given.policy())


def run_evaluation(
    dataset: Dataset,
    settings: EvalSettings,
    judge: Judge | None = None,
    progress: Callable[[str], None] | None = None,
    tree_path: Path | None = None,
    answers: AnswerClient | None = None,
    external: Sequence[ExternalRun] = (),
) -> Evaluation:
    """Run every system of `settings` on `dataset` (its tree built once and cached, or
    `tree_path`): the report and every system's retrievals. `judge` serves the navigation
    systems and is closed at the end; `answers` scores each system's top-5 passages by
    exact match and token F1; `external` runs are scored beside the systems."""

    def systems(tree: Tree) -> SystemFactory:
        return SystemFactory(tree, judge, settings.preset, settings.embed_model,
                             settings.embed_cache, dense_search=settings.dense_search)

    if settings.systems and tree_path is None:
        tree_path = dataset_tree(dataset, settings.tree_cache, progress=settings.progress)
    return _run(dataset, settings, systems, judge, progress, tree_path, answers, external)


def dataset_tree(dataset: Dataset, cache_dir: str | os.PathLike[str] | None = None, *,
                 progress: bool = False) -> Path:
    """The tree of the dataset's corpus, built as `decisionrag build` builds one (node
    vectors and the BM25 index stored with it when their extras are installed) on first use
    and reused afterwards; what a reused tree lacks of those is added."""
    target = dataset.tree_path(cache_dir)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        build_tree([dataset.corpus_path], target, format="jsonl", progress=progress)
        return target
    report = BuildReport(path=target)
    if not available_sets(target):
        store_vectors(report, required=False, progress=progress)
    if not bm25_folder(target).is_dir():
        store_bm25(report)
    return target


def evaluate(
    dataset: Dataset,
    settings: EvalSettings,
    judge: Judge | None = None,
    progress: Callable[[str], None] | None = None,
    tree_path: Path | None = None,
    answers: AnswerClient | None = None,
    external: Sequence[ExternalRun] = (),
) -> dict[str, Any]:
    """`run_evaluation`'s report (a JSON-able dict)."""
    return run_evaluation(dataset, settings, judge, progress, tree_path, answers, external).report
