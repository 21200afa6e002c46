"""Quality guards: the default system (`decisionrag`, embedded judge, `auto`) on a fixed seeded
subset of each shared dataset must not fall below the lower end of the 95 % interval of the
figure recorded in tests/quality_guard.json.

A change that costs more than the interval's half-width (e.g. xquad-en Hit@1 from 94 to 60,
or perturbed constants of the embedded judge) fails here. The recorded figures come from
this file's own recorder; after a change that is meant to move quality, re-record them and
say why in the commit:

    PYTHONPATH=src python tests/test_quality_guard.py --record [--dataset NAME]

The subsets are small so that each guard runs in about a minute on 2 cores once the
dataset's tree (with its vectors) is built and cached (`decisionrag eval` builds and keeps it;
mtrag-cloud-pooled's guard builds a tree of its corpus subset, a few minutes the first time).
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
# subset, passages of the corpus subset or None for the whole corpus); the subset is drawn
# with random.Random(SEED) over the dataset's conversations. mtrag-cloud-pooled's whole
# corpus (11,914 long passages) takes minutes to embed on 2 cores, past a guard's budget:
# its guard searches the documents of its conversations' gold passages among random other
# documents of the pool, about 2,000 passages in all (its own figure, recorded the same way).
SUBSETS: dict[str, tuple[str, int, int | None]] = {
    "xquad-en": ("hit@1", 100, None),
    "conditionalqa-dev": ("hit@1", 60, None),
    "mtrag-cloud-pooled": ("recall@5", 8, 2_000),
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


def corpus_subset(dataset: Any, passages: int, seed: int = SEED) -> Any:
    """The dataset with its corpus cut to the documents of its queries' gold passages plus
    random other documents up to `passages` passages, in the corpus's order; written once
    under the cache root (same content, same file: the tree built for it is reused)."""
    from decisionrag._eval._data import read_corpus
    from decisionrag._files import cache_root

    rows = list(read_corpus(dataset.corpus_path))
    sizes: dict[str, int] = {}
    for row in rows:
        sizes[row.doc_id] = sizes.get(row.doc_id, 0) + 1
    gold = {passage for labels in dataset.qrels.values()
            for passage, grade in labels.items() if grade > 0}
    kept = {row.doc_id for row in rows if row.id in gold}
    others = [doc for doc in sizes if doc not in kept]
    total = sum(sizes[doc] for doc in kept)
    for doc in random.Random(seed).sample(others, len(others)):
        if total >= passages:
            break
        kept.add(doc)
        total += sizes[doc]
    lines = [line for line in dataset.corpus_path.read_text(encoding="utf-8").splitlines()
             if line.strip() and json.loads(line)["doc_id"] in kept]
    target = cache_root() / "quality-guard" / f"{dataset.name}-{passages}-{seed}" / "corpus.jsonl"
    text = "\n".join(lines) + "\n"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    return dataclasses.replace(dataset, corpus_file=target)


def measure(name: str, data: Path = SHARED, judge: Any = None) -> dict[str, Any]:
    """The default's headline metric on the dataset's subset, with its 95 % interval."""
    from decisionrag._app import run_evaluation
    from decisionrag._eval import EvalSettings, compare, load_dataset
    from decisionrag._judges import load_judge

    metric, size, passages = SUBSETS[name]
    sample = subset(load_dataset(data / name), size)
    if passages is not None:
        sample = corpus_subset(sample, passages)
    active = judge if judge is not None else load_judge("embedded")
    evaluation = run_evaluation(sample, EvalSettings(systems=["decisionrag"], resamples=10),
                                active)
    values = evaluation.report["per_query"]["decisionrag"][metric]
    interval = compare(values, dict.fromkeys(values, 0.0))
    return {"metric": metric, "conversations": size, "corpus_passages": passages, "seed": SEED,
            "queries": len(values),
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
        metric, size, passages = SUBSETS[name]
        assert (figure["metric"], figure["conversations"], figure["corpus_passages"],
                figure["seed"]) == (metric, size, passages, SEED)
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
