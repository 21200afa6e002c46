"""Runs in and out: TREC and JSONL runs read with clear errors, aligned to a dataset, scored
beside the built-in systems, and every system's run written back as TREC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionrag._app import run_evaluation
from decisionrag._cli import main
from decisionrag._errors import InputError
from decisionrag._eval import EvalSettings, MetricSpec, load_dataset
from decisionrag._eval._runner import write_runs
from decisionrag._eval._runs import align, parse_run_spec, read_run, trec_lines
from decisionrag._judges import ScriptedJudge
from test_eval_runner import write_dataset


@pytest.fixture()
def dataset_dir(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny-data")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- reading ---------------------------------------------------------------------------------


def test_trec_run_is_ordered_by_score_then_by_the_file(tmp_path: Path) -> None:
    run = read_run(write(tmp_path / "r.trec", "q1 Q0 b 2 1.0 x\nq1 Q0 a 1 1.0 x\nq1 Q0 c 3 5 x\n"))
    assert run.format == "trec" and run.name == "r"
    assert run.ids() == {"q1": ["c", "a", "b"]}  # c scores best; a before b by rank
    assert read_run(tmp_path / "r.trec", tie_break="docid").ids() == {"q1": ["c", "b", "a"]}


def test_jsonl_run(tmp_path: Path) -> None:
    text = json.dumps({"query_id": "q1", "results": [{"id": "a", "score": 0.5}, {"id": "b", "score": 0.9}]})
    run = read_run(write(tmp_path / "r.jsonl", text + "\n\n"), "vec")
    assert run.format == "jsonl" and run.name == "vec"
    assert run.rankings == {"q1": [("b", 0.9), ("a", 0.5)]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 a 1 1.0\n", "r.trec:1: expected 6 columns 'qid Q0 docid rank score tag', got 5"),
        ("q1 Q0 a 1 1.0 x\nq1 Q0 b 2 high x\n", "r.trec:2: score 'high' is not a number"),
        ("q1 Q0 a one 1.0 x\n", "r.trec:1: rank 'one' is not a number"),
        ("q1 Q0 a 1.5 1.0 x\n", "r.trec:1: rank '1.5' is not an integer"),
        ("q1 Q0 a 1 nan x\n", "r.trec:1: score must be finite"),
        ("q1 Q0 a 1 1 x\n\nq1 Q0 a 2 0.5 x\n", "r.trec:3: 'a' is retrieved twice for query 'q1' (line 1)"),
    ],
)
def test_malformed_trec_lines_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_run(write(tmp_path / "r.trec", text))
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query_id": "q1", "results": [}', "r.jsonl:2: not valid JSON"),
        ('{"query": "q1", "results": []}', "r.jsonl:2: field 'query_id' must be a non-empty string"),
        ('{"query_id": "q9", "results": {"a": 1}}', "r.jsonl:2: field 'results' must be a list"),
        ('{"query_id": "q2", "results": [{"id": "a"}]}', "r.jsonl:2: results[0]: field 'score' is missing"),
        ('{"query_id": "q2", "results": [{"id": 3, "score": 1}]}', "results[0]: field 'id' must be"),
        ('{"query_id": "q2", "results": [{"id": "a", "score": "x"}]}', "results[0]: field 'score' 'x'"),
        ('{"query_id": "q2", "results": [{"id": "a", "score": 1}, {"id": "a", "score": 0}]}',
         "r.jsonl:2: results[1]: 'a' is listed twice"),
        ('{"query_id": "q1", "results": []}', "r.jsonl:2: query 'q1' appears twice (line 1)"),
        ("[1, 2]", "r.jsonl:2: expected an object"),
    ],
)
def test_malformed_jsonl_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    first = json.dumps({"query_id": "q1", "results": [{"id": "a", "score": 1}]})
    with pytest.raises(InputError) as err:
        read_run(write(tmp_path / "r.jsonl", first + "\n" + line + "\n"))
    assert message in str(err.value)


def test_missing_empty_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such run file"):
        read_run(tmp_path / "absent.trec")
    with pytest.raises(InputError, match="the run is empty"):
        read_run(write(tmp_path / "empty.trec", "\n  \n"))
    (tmp_path / "latin.trec").write_bytes(b"q1 Q0 caf\xe9 1 1 x\n")
    with pytest.raises(InputError, match="not UTF-8"):
        read_run(tmp_path / "latin.trec")


def test_run_spec() -> None:
    assert parse_run_spec("my vector db=runs/v.trec") == ("my vector db", Path("runs/v.trec"))
    for bad in ("runs/v.trec", "=v.trec", "name="):
        with pytest.raises(InputError, match="expected NAME=FILE"):
            parse_run_spec(bad)


# -- alignment -------------------------------------------------------------------------------


def test_alignment_counts_missing_extra_unknown_and_cuts(tmp_path: Path) -> None:
    lines = [f"q1 Q0 p{i} {i} {10 - i} x" for i in range(1, 8)] + ["zz Q0 p1 1 1 x", "q2 Q0 nope 1 1 x"]
    run = read_run(write(tmp_path / "r.trec", "\n".join(lines)))
    rankings, info = align(run, ["q1", "q2", "q3"], {f"p{i}" for i in range(10)}, depth=5)
    assert [d for d, _ in rankings["q1"]] == ["p1", "p2", "p3", "p4", "p5"]
    assert rankings["q3"] == []
    assert info.missing_queries == ["q3"] and info.extra_queries == 1
    assert info.unknown_ids == 1 and info.retrieved == 6 and info.cut_to == 5
    notes = " ".join(info.warnings())
    assert "1 of 3 queries are missing" in notes and "count as empty" in notes
    assert "1 queries of" in notes and "1 of 6 retrieved ids" in notes


# -- with the built-in systems ---------------------------------------------------------------


def test_external_runs_are_scored_beside_the_systems(dataset_dir: Path, tmp_path: Path) -> None:
    # q3 and q4 right at rank 1, s1<::>1 wrong, s1<::>2 and q5 missing
    run_file = write(tmp_path / "ext.trec", "s1<::>1 Q0 vt1 1 3 x\ns1<::>1 Q0 pp1 2 2 x\n"
                     "q3 Q0 dl2 1 9 x\nq4 Q0 vt2 1 9 x\nq4 Q0 somewhere-else 2 1 x\n")
    settings = EvalSettings(systems=["decisionrag", "bm25"], spec=MetricSpec(ks=(1, 5), recall_ks=(1, 5)),
                            tree_cache=str(tmp_path / "t"), resamples=200)
    evaluation = run_evaluation(load_dataset(dataset_dir), settings, ScriptedJudge(),
                                external=[read_run(run_file, "ext")])
    report = evaluation.report
    assert list(report["systems"]) == ["decisionrag", "bm25", "ext"]
    assert report["baseline"] == "decisionrag" and "ext" in report["intervals"]
    ext = report["systems"]["ext"]
    assert ext["tiny_data_hit@1"] == pytest.approx(2 / 4)  # q3, q4 of the 4 with evidence
    assert ext["tiny_data_mrr@10"] == pytest.approx((0.5 + 1 + 1) / 4)
    assert "latency_p50" not in ext and "tokens_per_query" not in ext  # nothing was measured
    assert report["per_query"]["ext"]["hit@1"]["s1<::>2"] == 0.0  # missing: an empty ranking
    info = report["runs_in"]["ext"]
    assert info["missing_queries"] == 2 and info["unknown_ids"] == 1 and info["queries_in_run"] == 3
    assert any("2 of 5 queries are missing" in w for w in report["warnings"])
    assert report["recall_curve"]["ext"][0] == pytest.approx(2 / 4)
    assert len(report["recall_curve"]["bm25"]) == settings.depth
    json.dumps(report)

    paths = write_runs(evaluation.runs, tmp_path / "runs")
    assert [p.name for p in paths] == ["decisionrag.trec", "bm25.trec", "ext.trec"]
    again = read_run(tmp_path / "runs" / "ext.trec")
    assert again.ids() == {"s1<::>1": ["vt1", "pp1"], "q3": ["dl2"], "q4": ["vt2", "somewhere-else"]}
    for path in paths:  # every exported run reads back as the same rankings
        name = path.stem
        run = next(r for r in evaluation.runs if r.name == name)
        assert read_run(path).ids() == {q: r for q, r in run.rankings().items() if r}
        assert all(line.split()[5] == name for line in path.read_text().splitlines())


def test_export_keeps_strictly_decreasing_scores_and_replaces_others() -> None:
    lines = list(trec_lines({"a": ["x", "y"], "b": ["x", "y", "z"], "c": []},
                            {"a": [0.9, 0.2], "b": [0.5, 0.5, 0.1]}, "my run"))
    assert lines == [
        "a Q0 x 1 0.900000 my_run",
        "a Q0 y 2 0.200000 my_run",
        "b Q0 x 1 3.000000 my_run",  # a tie: N - rank + 1, so that trec_eval keeps our order
        "b Q0 y 2 2.000000 my_run",
        "b Q0 z 3 1.000000 my_run",
    ]
    with pytest.raises(InputError, match="whitespace"):
        list(trec_lines({"q": ["has space"]}, {}, "t"))


def test_cli_runs_only_and_names_clashes(dataset_dir: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    record = {"query_id": "q3", "results": [{"id": "dl2", "score": 1}]}
    run_file = write(tmp_path / "ext.jsonl", json.dumps(record))
    out = tmp_path / "r.json"
    code = main(["eval", str(dataset_dir), "--systems", "none", "--run", f"ext={run_file}",
                 "--json", str(out), "--save-runs", str(tmp_path / "runs"), "--no-progress"])
    assert code == 0
    captured = capsys.readouterr()
    assert "4 of 5 queries are missing" in captured.err
    assert "run ext: 1 queries in ext.jsonl" in captured.out
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["systems"]["ext"]["tiny_data_hit@1"] == pytest.approx(1 / 4)
    assert (tmp_path / "runs" / "ext.trec").read_text() == "q3 Q0 dl2 1 1.000000 ext\n"
    assert main(["eval", str(dataset_dir), "--systems", "bm25", "--run", f"bm25={run_file}"]) == 2
    assert "run names must differ" in capsys.readouterr().err
    assert main(["eval", str(dataset_dir), "--systems", "none"]) == 2
    assert "needs at least one --run" in capsys.readouterr().err
    bad = write(tmp_path / "bad.trec", "q3 Q0 dl2 1\n")
    assert main(["eval", str(dataset_dir), "--systems", "none", "--run", f"x={bad}"]) == 2
    err = capsys.readouterr().err
    assert "bad.trec:1: expected 6 columns" in err and "Traceback" not in err
