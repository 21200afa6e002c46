"""The ablation systems of `decisionrag eval` (walk-only, all+judge, hybrid+judge) run on a
tiny dataset with the embedded judge, and each is what its name says."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import require_module
from decisionrag._app import SYSTEMS, SystemFactory, evaluate, parse_systems
from decisionrag._app._evaluate import dataset_tree
from decisionrag._eval import EvalSettings, load_dataset
from decisionrag._tree import Tree
from test_eval_runner import DOCS, write_dataset

require_module("sentence_transformers")

ABLATIONS = ["walk-only", "all+judge", "hybrid+judge"]
N_PASSAGES = sum(len(passages) for _, passages in DOCS.values())


@pytest.fixture(scope="module")
def judge():  # type: ignore[no-untyped-def]
    from decisionrag._judges import load_judge

    return load_judge("embedded")


@pytest.fixture()
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    dataset = write_dataset(tmp_path / "tiny-data")
    return dataset, dataset_tree(load_dataset(dataset), tmp_path / "trees")


def test_the_ablations_are_known_systems() -> None:
    assert set(ABLATIONS) <= set(SYSTEMS)
    assert parse_systems("walk-only,all+judge,hybrid+judge") == ABLATIONS


def test_walk_only_has_no_flat_candidates_where_the_default_has_them(
    tiny: tuple[Path, Path], judge: object
) -> None:
    _, tree_path = tiny
    with Tree.open(tree_path) as tree:
        factory = SystemFactory(tree, judge)  # type: ignore[arg-type]
        default = factory.build("decisionrag")
        walk_only = factory.build("walk-only")
        assert default.navigator.retriever is not None  # type: ignore[attr-defined]
        assert walk_only.navigator.retriever is None  # type: ignore[attr-defined]
        assert walk_only.navigator.preset.hybrid_k == 0  # type: ignore[attr-defined]
        # everything else of the walk is the default's
        assert (walk_only.navigator.preset.documents  # type: ignore[attr-defined]
                == default.navigator.preset.documents)  # type: ignore[attr-defined]


def test_every_ablation_runs_and_all_judge_judges_every_passage(
    tiny: tuple[Path, Path], judge: object, tmp_path: Path
) -> None:
    dataset, tree_path = tiny
    settings = EvalSettings(systems=["decisionrag", *ABLATIONS], resamples=100,
                            embed_cache=str(tmp_path / "e"))
    report = evaluate(load_dataset(dataset), settings, judge, tree_path=tree_path)  # type: ignore[arg-type]
    systems = report["systems"]
    for name in ABLATIONS:
        assert systems[name]["tiny_data_hit@5"] > 0.5, name


def test_all_judge_reranks_every_passage(tiny: tuple[Path, Path], judge: object) -> None:
    import asyncio

    from decisionrag._eval._data import EvalQuery

    _, tree_path = tiny
    with Tree.open(tree_path) as tree:
        system = SystemFactory(tree, judge).build("all+judge")  # type: ignore[arg-type]
        retrieval = asyncio.run(system.run(EvalQuery(id="q", text="vehicle tax refund"), N_PASSAGES))
    assert len(retrieval.ranking) == N_PASSAGES
    assert retrieval.ranking[0] == "vt2"
