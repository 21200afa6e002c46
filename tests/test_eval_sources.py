"""Datasets as people have them: BEIR folders read directly, and one's own labels over a tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionrag._app import evaluate
from decisionrag._cli import main
from decisionrag._errors import InputError
from decisionrag._eval import EvalSettings, MetricSpec
from decisionrag._eval._sources import TreeDataset, load_beir, open_dataset, split_text
from test_eval_runner import write_dataset

BEIR_DOCS = [
    ("D1", "Passports", "Renew your adult passport online with a digital photo.\n\n"
     "The passport renewal fee is 88 pounds when you apply online."),
    ("D2", "Driving licences", "Change the address on your driving licence for free."),
    ("D3", "Vehicle tax", "A vehicle tax refund is paid automatically when you sell the car."),
    ("D4", "", "Report a lost or stolen passport to the police."),
]
BEIR_QUERIES = [("Q1", "passport renewal fee"), ("Q2", "change address on driving licence"),
                ("Q3", "vehicle tax refund"), ("Q9", "a training query")]


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": i, "title": t, "text": x, "metadata": {}} for i, t, x in BEIR_DOCS]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = [{"_id": i, "text": t, "metadata": {}} for i, t in BEIR_QUERIES]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nQ1\tD1\t2\nQ1\tD4\t1\nQ2\tD2\t1\nQ3\tD3\t1\n")
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nQ9\tD4\t1\n")
    return folder


def test_beir_whole_documents_are_passages_with_beir_ids(tmp_path: Path) -> None:
    dataset = open_dataset(write_beir(tmp_path / "scifake"), cache_dir=tmp_path / "c")
    assert [q.id for q in dataset.queries] == ["Q1", "Q2", "Q3"]  # only the split's labelled queries
    assert dataset.qrels["Q1"] == {"D1": 2, "D4": 1} and dataset.qrels_docs is None
    assert set(dataset.corpus) == {"D1", "D2", "D3", "D4"}
    assert dataset.corpus["D1"].doc_id == "doc:D1"
    assert dataset.gold_docs("Q1") == {"doc:D1", "doc:D4"}
    settings = EvalSettings(systems=["bm25"], spec=MetricSpec(ks=(1,), recall_ks=(1, 2)),
                            tree_cache=str(tmp_path / "t"), resamples=50, keep_runs=2)
    report = evaluate(dataset, settings)
    assert report["systems"]["bm25"]["scifake_hit@1"] == 1.0
    assert report["systems"]["bm25"]["scifake_recall@2"] == 1.0
    assert report["runs"]["bm25"]["Q1"] == ["D1", "D4"]  # our run speaks BEIR's ids
    # the untitled document got a derived title, and the converted corpus is cached
    assert len(list((tmp_path / "c" / "beir").glob("*/corpus.jsonl"))) == 1


def test_beir_split_passages_score_pages(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifake")
    dataset = load_beir(folder, passages="split", cache_dir=tmp_path / "c")
    assert {p for p in dataset.corpus if p.startswith("D1")} == {"D1#1", "D1#2"}
    assert dataset.corpus["D1#2"].doc_id == "D1"
    assert dataset.qrels == {} and dataset.qrels_docs is not None and dataset.qrels_docs["Q1"]["D1"] == 2
    settings = EvalSettings(systems=["bm25"], spec=MetricSpec(ks=(1,), recall_ks=(1,)),
                            tree_cache=str(tmp_path / "t"), resamples=50)
    report = evaluate(dataset, settings)
    assert set(m for m in report["systems"]["bm25"] if "@" in m) == {"scifake_page_hit@1"}
    assert report["systems"]["bm25"]["scifake_page_hit@1"] == 1.0


def test_beir_other_split_and_errors(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "scifake")
    assert [q.id for q in open_dataset(folder, split="train", cache_dir=tmp_path / "c").queries] == ["Q9"]
    with pytest.raises(InputError, match=r"missing qrels/dev.tsv \(splits here: \['test', 'train'\]\)"):
        open_dataset(folder, split="dev")
    (folder / "corpus.jsonl").write_text('{"_id": "D1", "title": "t", "text": "x"}\n{"title": "t"}\n')
    with pytest.raises(InputError, match=r"corpus.jsonl:2: field '_id' must be a non-empty string"):
        open_dataset(folder, cache_dir=tmp_path / "c2")


def test_split_text_windows_whole_sentences() -> None:
    text = "One two three. Four five six. Seven eight.\n\nNine ten."
    assert split_text(text, max_words=6) == ["One two three. Four five six.", "Seven eight.", "Nine ten."]
    assert split_text("   ") == ["   "]


def test_cli_reads_a_beir_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_beir(tmp_path / "scifake")
    code = main(["eval", str(folder), "--systems", "bm25", "--cache-dir", str(tmp_path / "c"),
                 "--no-progress", "--ks", "1"])
    assert code == 0
    assert "scifake_hit@1" in capsys.readouterr().out


# -- one's own labels over an existing tree ------------------------------------------------------


@pytest.fixture()
def tree_file(tmp_path: Path) -> Path:
    folder = write_dataset(tmp_path / "tiny-data")
    target = tmp_path / "docs.tree"
    assert main(["build", str(folder / "corpus.jsonl"), "-o", str(target)]) == 0
    return target


def test_own_labels_over_a_tree(tree_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "a", "text": "passport renewal fee"}) + "\n"
                       + json.dumps({"_id": "b", "text": "vehicle tax refund when I sell"}) + "\n")
    qrels = tmp_path / "labels.qrels"  # TREC qrels: a passage label, a page label, a stray id
    qrels.write_text("a 0 pp2 1\nb 0 tax 1\nb 0 nowhere 1\nzz 0 pp1 1\n")
    dataset = open_dataset(tree_file, queries=queries, qrels=qrels)
    assert isinstance(dataset, TreeDataset)
    assert dataset.qrels == {"a": {"pp2": 1}} and dataset.qrels_docs == {"b": {"tax": 1}}
    assert any("1 labelled ids are neither" in w for w in dataset.warnings)
    out = tmp_path / "r.json"
    code = main(["eval", str(tree_file), "--queries", str(queries), "--qrels", str(qrels),
                 "--systems", "bm25", "--ks", "1", "--json", str(out), "--no-progress"])
    assert code == 0
    assert "neither passages nor documents" in capsys.readouterr().err
    report: dict[str, Any] = json.loads(out.read_text())
    bm25 = report["systems"]["bm25"]
    assert report["metric_queries"] == {"hit@1": 1, "recall@1": 1, "ndcg@10": 1, "mrr@10": 1,
                                        "page_hit@1": 2}
    assert report["dataset"] == "docs"  # the tree's name
    assert bm25["docs_hit@1"] == 1.0 and bm25["docs_page_hit@1"] == 1.0


def test_a_tree_needs_queries_and_qrels(tree_file: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="needs --queries and --qrels"):
        open_dataset(tree_file)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a pp1 1\n")
    with pytest.raises(InputError, match=r"bad.tsv:1: expected TREC qrels 'qid iter docid rel'"):
        open_dataset(tree_file, queries=queries, qrels=bad)
