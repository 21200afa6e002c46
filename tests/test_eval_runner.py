"""The evaluation runner end to end on a tiny dataset, with a scripted judge and real navigation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionrag._app import evaluate
from decisionrag._cli import main
from decisionrag._eval import EvalSettings, MetricSpec, load_dataset
from decisionrag._eval._data import EvalQuery
from decisionrag._eval._runner import conversation_order, run_system
from decisionrag._eval._systems import Retrieval
from decisionrag._judges import ScriptedJudge

DOCS = {
    "passport": (
        "Passports",
        [
            ("pp1", ["Renewing"], "Renew your adult passport online with a digital photo."),
            ("pp2", ["Fees"], "The passport renewal fee is 88 pounds when you apply online."),
            ("pp3", ["Lost passports"], "Report a lost or stolen passport to the police."),
        ],
    ),
    "driving": (
        "Driving licences",
        [
            (
                "dl1",
                ["Provisional"],
                "Apply for a provisional driving licence at 15 years and 9 months.",
            ),
            ("dl2", ["Address"], "Change the address on your driving licence for free."),
        ],
    ),
    "tax": (
        "Vehicle tax",
        [
            ("vt1", [], "Tax your vehicle online with the reference number from your log book."),
            ("vt2", [], "A vehicle tax refund is paid automatically when you sell the car."),
        ],
    ),
}
QUERIES = [
    ("s1<::>1", "how do I renew my adult passport online", ["pp1"], "passport"),
    ("s1<::>2", "what is the passport renewal fee", ["pp2"], "passport"),
    ("q3", "change address on my driving licence", ["dl2"], "driving"),
    ("q4", "vehicle tax refund when I sell the car", ["vt2"], "tax"),
    ("q5", "who won the football", [], None),
]


def write_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True)
    corpus = [
        {"id": pid, "doc_id": doc, "doc_title": title, "section": section, "text": text}
        for doc, (title, passages) in DOCS.items()
        for pid, section, text in passages
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = []
    for qid, text, _, _ in QUERIES:
        earlier = [
            q[1]
            for q in QUERIES
            if qid.startswith("s1<::>") and q[0].startswith("s1<::>") and q[0] < qid
        ]
        queries.append(
            {"id": qid, "text": text, "history": [{"role": "user", "text": t} for t in earlier]}
        )
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    rows = [f"{qid}\t{pid}\t1" for qid, _, gold, _ in QUERIES for pid in gold]
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return folder


@pytest.fixture()
def dataset_dir(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny-data")


def test_report_shape_and_values(dataset_dir: Path, tmp_path: Path) -> None:
    dataset = load_dataset(dataset_dir)
    settings = EvalSettings(
        systems=["decisionrag", "bm25", "flat"],
        preset="auto",
        spec=MetricSpec(ks=(1, 5), recall_ks=(1, 5)),
        tree_cache=str(tmp_path / "trees"),
        resamples=500,
        keep_runs=3,
        price_per_million=0.042,  # one price for every system (default: each judge's own)
    )
    judge = ScriptedJudge()  # word overlap between query and candidate text
    report = evaluate(dataset, settings, judge)
    assert report["dataset"] == "tiny-data" and report["n_queries"] == 5
    assert report["metric_queries"]["hit@1"] == 4  # q5 has no evidence
    systems = report["systems"]
    assert list(systems) == ["decisionrag", "bm25", "flat"]
    for values in systems.values():
        assert {
            "tiny_data_hit@1",
            "tiny_data_recall@5",
            "tiny_data_ndcg@10",
            "tiny_data_mrr@10",
            "tiny_data_page_hit@1",
            "latency_p50",
            "latency_p90",
            "tokens_per_query",
        } <= set(values)
        assert 0 < values["latency_p50"] <= values["latency_p90"]
    # word overlap finds every gold passage on this corpus, as does BM25
    assert systems["decisionrag"]["tiny_data_hit@1"] == 1.0
    assert systems["bm25"]["tiny_data_hit@1"] == 1.0
    assert (
        systems["decisionrag"]["tokens_per_query"] > 0 and systems["bm25"]["tokens_per_query"] == 0
    )
    assert systems["decisionrag"]["cents_per_query"] == pytest.approx(
        systems["decisionrag"]["tokens_per_query"] * 0.042e-4
    )
    assert set(report["intervals"]) == {"bm25", "flat"}
    diff, low, high = report["intervals"]["bm25"]["tiny_data_hit@1"]
    assert diff == 0.0 and low == 0.0 and high == 0.0
    pruning = report["pruning"]["decisionrag"]
    assert pruning and all(0.0 <= stage["survived"] <= 1.0 for stage in pruning.values())
    assert all(stage["queries"] == 4 for stage in pruning.values())
    assert "bm25" not in report["pruning"]
    assert report["runs"]["bm25"]["q3"][0] == "dl2"
    json.dumps(report)  # JSON-able


def test_judge_requests_were_made_in_conversation_order(dataset_dir: Path, tmp_path: Path) -> None:
    judge = ScriptedJudge()
    settings = EvalSettings(systems=["decisionrag"], tree_cache=str(tmp_path / "t"), resamples=100)
    evaluate(load_dataset(dataset_dir), settings, judge)
    queries = [call.query for call in judge.calls]
    first = next(i for i, q in enumerate(queries) if "renew my adult passport" in q)
    second = next(i for i, q in enumerate(queries) if "renewal fee" in q)
    assert first < second


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.events: list[str] = []

    def start_conversation(self) -> None:
        self.events.append("start")

    async def run(self, query: EvalQuery, k: int) -> Retrieval:
        self.events.append(query.id)
        return Retrieval([])


async def test_conversations_run_in_order_with_a_fresh_start() -> None:
    queries = [
        EvalQuery("a<::>1", "x"),
        EvalQuery("b<::>1", "x"),
        EvalQuery("a<::>2", "x"),
        EvalQuery("c", "x"),
    ]
    groups = conversation_order(queries)
    assert [[q.id for q in g] for g in groups] == [["a<::>1", "a<::>2"], ["b<::>1"], ["c"]]
    recorder = _Recorder()
    run = await run_system(recorder, groups, k=5)
    assert recorder.events == ["start", "a<::>1", "a<::>2", "start", "b<::>1", "start", "c"]
    assert set(run.seconds) == {"a<::>1", "a<::>2", "b<::>1", "c"}


def test_cli_prints_a_table_and_writes_json(
    dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    code = main(
        [
            "eval",
            str(dataset_dir),
            "--systems",
            "decisionrag,bm25",
            "--judge",
            "scripted",
            "--json",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
            "--dedup-text",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "tiny_data_hit@1" in printed and "decisionrag" in printed and "bm25" in printed
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["settings"]["dedup_text"] is True
    assert set(report["systems"]) == {"decisionrag", "bm25"}


def test_cli_rejects_unknown_systems_in_one_line(
    dataset_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(dataset_dir), "--systems", "bm25,splade"]) == 2
    err = capsys.readouterr().err
    assert "unknown system" in err and "Traceback" not in err


@pytest.mark.slow
def test_dense_systems_end_to_end(dataset_dir: Path, tmp_path: Path) -> None:
    settings = EvalSettings(
        systems=["dense", "dense+judge", "decisionrag+dense"],
        tree_cache=str(tmp_path / "t"),
        embed_cache=str(tmp_path / "e"),
        resamples=100,
    )
    report = evaluate(load_dataset(dataset_dir), settings, ScriptedJudge())
    systems = report["systems"]
    assert systems["dense"]["tiny_data_hit@5"] == 1.0
    assert systems["dense+judge"]["tiny_data_hit@1"] == 1.0
    assert systems["decisionrag+dense"]["tokens_per_query"] > 0
    # passage embeddings are stored with the dataset's tree (TREE.vectors/), not re-made per run
    assert list((tmp_path / "t").glob("*.tree.vectors/*.npy"))


def test_cost_is_each_judges_own_and_a_cached_rerun_costs_nothing(
    dataset_dir: Path, tmp_path: Path
) -> None:
    from decisionrag._judges._cache import CachedJudge

    def run(judge: ScriptedJudge | CachedJudge) -> dict[str, float]:
        settings = EvalSettings(systems=["decisionrag"], tree_cache=str(tmp_path / "trees"),
                                resamples=10)
        return evaluate(load_dataset(dataset_dir), settings, judge)["systems"]["decisionrag"]

    free = run(ScriptedJudge())
    assert free["tokens_per_query"] > 0 and free["cents_per_query"] == 0.0  # no price set
    priced = ScriptedJudge()
    priced.price_per_million_input = 1.0
    first = run(CachedJudge(priced, tmp_path / "judgments"))
    assert first["cents_per_query"] == pytest.approx(first["tokens_per_query"] * 1e-4)
    again = run(CachedJudge(ScriptedJudge(), tmp_path / "judgments"))
    assert again["requests_per_query"] == 0 and again["tokens_per_query"] == 0
    assert again["cents_per_query"] == 0.0
