"""Loading datasets in the shared format, their errors, and the cached tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionrag import InputError, Tree
from decisionrag._app._evaluate import dataset_tree
from decisionrag._eval._data import dataset_prefix, load_dataset

CORPUS = [
    {
        "id": "p1",
        "doc_id": "D1",
        "doc_title": "Passports",
        "section": ["Renew"],
        "text": "Renew online.",
    },
    {
        "id": "p2",
        "doc_id": "D1",
        "doc_title": "Passports",
        "section": ["Fees"],
        "text": "It costs 80.",
    },
    {
        "id": "p3",
        "doc_id": "D2",
        "doc_title": "Driving",
        "section": [],
        "text": "Apply for a licence.",
    },
]
QUERIES = [
    {"id": "c1<::>1", "text": "how do I renew?", "history": []},
    {
        "id": "c1<::>2",
        "text": "and the fee?",
        "history": [{"role": "user", "text": "how do I renew?"}],
        "rewrite": "passport fee?",
    },
    {"id": "q3", "text": "Can I drive?", "context": "I am 17.", "answers": ["no"]},
    {"id": "q4", "text": "Unanswerable?", "not_answerable": True},
]


def write_dataset(
    folder: Path,
    corpus: list[dict[str, Any]] = CORPUS,
    queries: list[dict[str, Any]] = QUERIES,
    qrels: str | None = None,
    qrels_docs: str | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels.tsv").write_text(
        qrels
        if qrels is not None
        else "query-id\tcorpus-id\tscore\nc1<::>1\tp1\t1\nc1<::>2\tp2\t1\nq3\tp3\t1\nother\tp3\t1\n"
    )
    if qrels_docs is not None:
        (folder / "qrels_docs.tsv").write_text(qrels_docs)
    return folder


def test_loads_queries_qrels_and_conversations(tmp_path: Path) -> None:
    data = load_dataset(write_dataset(tmp_path / "mini"))
    assert [q.id for q in data.queries] == ["c1<::>1", "c1<::>2", "q3", "q4"]
    assert [q.conversation for q in data.queries] == ["c1", "c1", "q3", "q4"]
    second = data.queries[1]
    assert second.rewrite == "passport fee?"
    query = second.to_query()
    assert query.history[0].text == "how do I renew?" and query.text == "and the fee?"
    cqa = data.queries[2]
    assert cqa.to_query().context == "I am 17." and cqa.flat_text() == "I am 17. Can I drive?"
    assert cqa.answers == ("no",)
    assert data.queries[3].not_answerable
    assert data.qrels == {"c1<::>1": {"p1": 1}, "c1<::>2": {"p2": 1}, "q3": {"p3": 1}}
    assert any("1 rows" in w for w in data.warnings)  # the row for "other" was skipped


def test_gold_pages_from_passages_or_qrels_docs(tmp_path: Path) -> None:
    data = load_dataset(write_dataset(tmp_path / "a"))
    assert data.gold_docs("c1<::>2") == {"D1"}
    assert data.gold_docs("q4") == set()
    docs = "query-id\tdoc-id\tscore\nq3\tD2\t1\nq4\tD1\t1\n"
    with_docs = load_dataset(write_dataset(tmp_path / "b", qrels_docs=docs))
    assert with_docs.gold_docs("q4") == {"D1"}


def test_limit_keeps_the_first_queries_and_their_qrels(tmp_path: Path) -> None:
    data = load_dataset(write_dataset(tmp_path / "mini")).limit(2)
    assert len(data.queries) == 2 and set(data.qrels) == {"c1<::>1", "c1<::>2"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
            "queries.jsonl:2: duplicate query id 'a'",
        ),
        ('{"id": "a", "text": "x"}\n{not json\n', "queries.jsonl:2: not valid JSON"),
        ('{"id": "a"}\n', "queries.jsonl:1: field 'text'"),
        ('{"id": "a", "text": "x", "history": [{"role": "bot", "text": "y"}]}\n', "history[0]"),
        ('{"id": "a", "text": "x", "answers": "no"}\n', "field 'answers'"),
        ("[1, 2]\n", "queries.jsonl:1: expected a JSON object"),
    ],
)
def test_bad_queries_name_file_and_line(tmp_path: Path, lines: str, message: str) -> None:
    folder = write_dataset(tmp_path / "bad")
    (folder / "queries.jsonl").write_text(lines)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_dataset(folder)


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("query\tcorpus\tscore\n", r"qrels.tsv:1: expected the header"),
        (
            "query-id\tcorpus-id\tscore\nc1<::>1\tp1\n",
            r"qrels.tsv:2: expected 3 tab-separated columns",
        ),
        (
            "query-id\tcorpus-id\tscore\nc1<::>1\tp1\tyes\n",
            r"qrels.tsv:2: score 'yes' is not a number",
        ),
    ],
)
def test_bad_qrels_name_file_and_line(tmp_path: Path, qrels: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_dataset(write_dataset(tmp_path / "bad", qrels=qrels))


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such dataset folder"):
        load_dataset(tmp_path / "nowhere")
    folder = write_dataset(tmp_path / "x")
    (folder / "qrels.tsv").unlink()
    with pytest.raises(InputError, match=r"missing qrels\.tsv"):
        load_dataset(folder)


def test_tree_is_built_once_and_keyed_by_corpus_content(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "mini")
    data = load_dataset(folder)
    path = dataset_tree(data, tmp_path / "cache")
    with Tree.open(path) as tree:
        assert tree.node("p2").text == "It costs 80."
        assert tree.document_of(tree.node("p2")).key == "D1"
        assert tree.counts["passage"] == 3
    stamp = path.stat().st_mtime_ns
    assert dataset_tree(load_dataset(folder), tmp_path / "cache") == path
    assert path.stat().st_mtime_ns == stamp
    write_dataset(folder, corpus=[*CORPUS, {"id": "p4", "doc_id": "D2", "text": "More."}])
    changed = dataset_tree(load_dataset(folder), tmp_path / "cache")
    assert changed != path and changed.is_file()


def test_prefixes() -> None:
    assert dataset_prefix("conditionalqa-dev") == "cqa"
    assert dataset_prefix("mtrag-cloud-pooled") == "mtrag"
    assert dataset_prefix("xquad-en") == "xquad"
    assert dataset_prefix("My Data-Set") == "my_data_set"


def test_shared_datasets_load(shared_data: Path) -> None:
    cqa = load_dataset(shared_data / "conditionalqa-dev")
    assert len(cqa.queries) == 285 and len(cqa.qrels) == 271
    assert sum(q.not_answerable for q in cqa.queries) == 14
    assert cqa.qrels_docs is not None and len(cqa.qrels_docs) == 285
    mtrag = load_dataset(shared_data / "mtrag-cloud-pooled")
    assert len(mtrag.queries) == 188
    assert len({q.conversation for q in mtrag.queries}) < 188
    assert not cqa.warnings and not mtrag.warnings
