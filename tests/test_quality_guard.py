"""Quality guards: the default system (`decisionrag`, embedded judge, `auto`) on a fixed seeded
subset of each shared dataset must not fall below the lower end of the 95 % interval of the
figure recorded in tests/quality_guard.json.

A change that costs more than the interval's half-width (e.g. xquad-en Hit@1 from 94 to 60,
or perturbed constants of the embedded judge) fails here. The recorded figures come from
this file's own recorder; after a change that is meant to move quality, re-record them and
say why in the commit:

    PYTHONPATH=src python tests/test_quality_guard.py --record [--dataset NAME]

The subsets are small so that each guard runs in about a minute on 2 cores once the
dataset's tree (with its vectors) is built and cached (`decisionrag eval` builds and keeps it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

RECORD = Path(__file__).with_name("quality_guard.json")
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# dataset -> (headline metric, conversations (= queries where there is no history) in the
# subset); the subset is drawn with random.Random(SEED) over the dataset's conversations
SUBSETS: dict[str, tuple[str, int]] = {
    "xquad-en": ("hit@1", 300),
    "conditionalqa-dev": ("hit@1", 150),
    "mtrag-cloud-pooled": ("recall@5", 10),
}
SEED = 0


def subset(dataset: Any, size: int, seed: int = SEED) -> Any:
    """A fixed sample of `size` whole conversations (single queries where there are none),
    in the dataset's order."""
    conversations: dict[str, list[Any]] = {}
    for query in dataset.queries:
        conversations.setdefault(query.conversation, []).append(query)
    chosen = set(random.Random(seed).sample(sorted(conversations), min(size, len(conversations))))
    return dataclasses.replace(
        dataset, queries=[q for q in dataset.queries if q.conversation in chosen])


def measure(name: str, data: Path = SHARED, judge: Any = None) -> dict[str, Any]:
    """The default's headline metric on the dataset's subset, with its 95 % interval."""
    from decisionrag._app import run_evaluation
    from decisionrag._eval import EvalSettings, compare, load_dataset
    from decisionrag._judges import load_judge

    metric, size = SUBSETS[name]
    sample = subset(load_dataset(data / name), size)
    active = judge if judge is not None else load_judge("embedded")
    evaluation = run_evaluation(sample, EvalSettings(systems=["decisionrag"], resamples=10),
                                active)
    values = evaluation.report["per_query"]["decisionrag"][metric]
    interval = compare(values, dict.fromkeys(values, 0.0))
    return {"metric": metric, "conversations": size, "seed": SEED, "queries": len(values),
            "value": round(interval.diff, 4), "low": round(interval.low, 4),
            "high": round(interval.high, 4)}


def recorded() -> dict[str, Any]:
    return dict(json.loads(RECORD.read_text(encoding="utf-8"))["datasets"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUBSETS))
def test_the_default_keeps_its_recorded_quality(name: str, shared_data: Path) -> None:
    from conftest import require_module

    require_module("sentence_transformers")  # the stored vectors' encoder (`embedded` extra)
    figure = recorded()[name]
    found = measure(name, shared_data)
    assert found["queries"] == figure["queries"], "the subset changed: re-record the figures"
    assert found["value"] >= figure["low"], (
        f"{name}: {figure['metric']} on the guard's {figure['queries']} queries fell to "
        f"{100 * found['value']:.1f}, below the recorded {100 * figure['value']:.1f} by more "
        f"than its interval [{100 * figure['low']:.1f}, {100 * figure['high']:.1f}]"
    )


def test_the_record_covers_every_guard_and_says_how_it_was_made() -> None:
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert set(record["datasets"]) == set(SUBSETS)
    assert "tests/test_quality_guard.py --record" in record["command"]
    for name, figure in record["datasets"].items():
        metric, size = SUBSETS[name]
        assert (figure["metric"], figure["conversations"], figure["seed"]) == (metric, size, SEED)
        assert figure["low"] <= figure["value"] <= figure["high"]


def test_the_subset_is_fixed_and_whole_conversations() -> None:
    from decisionrag._eval._data import EvalQuery

    holder = dataclasses.make_dataclass("Holder", [("queries", list)])
    queries = [EvalQuery(id=f"c{c}<::>{t}", text="q") for c in range(20) for t in range(3)]
    sample = subset(holder(queries), 5)
    assert [q.id for q in sample.queries] == [q.id for q in subset(holder(queries), 5).queries]
    assert len(sample.queries) == 15 and len({q.conversation for q in sample.queries}) == 5
    assert [q.id for q in sample.queries] != [q.id for q in subset(holder(queries), 5, seed=1).queries]


def main() -> int:
    parser = argparse.ArgumentParser(description="record the quality guards' figures")
    parser.add_argument("--record", action="store_true", required=True)
    parser.add_argument("--dataset", action="append", help="only these (default: all)")
    parser.add_argument("--data", type=Path, default=SHARED)
    args = parser.parse_args()
    record = (json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file()
              else {"datasets": {}})
    record["command"] = "PYTHONPATH=src HF_HUB_OFFLINE=1 python tests/test_quality_guard.py --record"
    for name in args.dataset or sorted(SUBSETS):
        record["datasets"][name] = measure(name, args.data)
        print(name, record["datasets"][name], flush=True)
    record["datasets"] = dict(sorted(record["datasets"].items()))
    RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
