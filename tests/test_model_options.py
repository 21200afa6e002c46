"""``--judge-option`` and ``--generator-option``: parsed in one place, typed and checked
against the backend's options like ``load_judge(id, **options)``, refused before anything
is opened, and carried through the application layer to the judge by every door."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _standin_server import standin_server
from decisionrag import build_tree
from decisionrag._cli import main
from decisionrag._errors import AnswerError, InputError, JudgeConfigError
from decisionrag._judges import judge_options
from decisionrag._judges._options import parse_assignments

QUESTION = "How do I renew a passport?"


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("options")
    rows = [{"id": f"d{d}-p{p}", "doc_id": f"d{d}", "doc_title": f"Guide {d}",
             "text": f"Guide {d} paragraph {p}: passport renewal step {p} and fees."}
            for d in range(3) for p in range(6)]
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    build_tree([corpus], folder / "small.tree")
    return folder / "small.tree"


# -- parsing and typing -----------------------------------------------------------------------


def test_assignments_are_split_once_and_refuse_bad_items() -> None:
    assert parse_assignments(["model=a=b", " timeout = 5 "], "--judge-option") == {
        "model": "a=b", "timeout": "5"}
    with pytest.raises(InputError, match=r"--judge-option 'model': expected KEY=VALUE"):
        parse_assignments(["model"], "--judge-option")
    with pytest.raises(InputError, match=r"--judge-option '=x': expected KEY=VALUE"):
        parse_assignments(["=x"], "--judge-option")
    with pytest.raises(InputError, match="--judge-option: model is given twice"):
        parse_assignments(["model=a", "model=b"], "--judge-option")


def test_values_are_typed_by_the_backends_options() -> None:
    typed = judge_options("jev-compatible:http://127.0.0.1:1",
                          {"model": "smol", "questions_per_call": "8", "timeout": "300",
                           "max_questions": "none", "judgment_cache": "cache"})
    assert typed == {"model": "smol", "questions_per_call": 8, "timeout": 300.0,
                     "max_questions": None, "judgment_cache": "cache"}
    assert judge_options("local:some/folder", {"trust_remote_code": "false",
                                               "max_batch_tokens": "512"}) == {
        "trust_remote_code": False, "max_batch_tokens": 512}
    assert judge_options("embedded", {"workers": "2"}) == {"workers": 2}


def test_unknown_keys_and_bad_values_name_the_flag() -> None:
    with pytest.raises(JudgeConfigError, match=r"--judge-option modle=\.\.\.: the jev-compatible "
                       r"judge has no option 'modle'; its options: .*\bmodel\b"):
        judge_options("jev-compatible:http://127.0.0.1:1", {"modle": "x"})
    with pytest.raises(JudgeConfigError, match=r"--judge-option: .*option timeout='soon' is not "
                       r"a valid float"):
        judge_options("jev-compatible:http://127.0.0.1:1", {"timeout": "soon"})
    with pytest.raises(JudgeConfigError, match=r"trust_remote_code='maybe' is not a valid bool"):
        judge_options("local:x", {"trust_remote_code": "maybe"})


@pytest.mark.parametrize(("argv", "message"), [
    (["ask", "{tree}", QUESTION, "--judge-option", "model"], "--judge-option 'model': expected KEY=VALUE"),
    (["ask", "{tree}", QUESTION, "--judge", "jev-compatible:http://127.0.0.1:1",
      "--judge-option", "modle=x"], "the jev-compatible judge has no option 'modle'"),
    (["ask", "{tree}", QUESTION, "--judge-option", "workers=many"],
     "option workers='many' is not a valid int"),
    (["answer", "{tree}", QUESTION, "--generator", "openai-compatible:m",
      "--generator-option", "temprature=0.2"], "--generator-option temprature=...: the answer "
     "model has no option 'temprature'"),
    (["answer", "{tree}", QUESTION, "--generator", "openai-compatible:m",
      "--generator-option", "temperature=warm"], "option temperature='warm' is not a valid float"),
    (["eval", "{tree}", "--judge-option", "nope=1"], "the embedded judge has no option 'nope'"),
    (["serve", "{tree}", "--judge-option", "nope=1"], "the embedded judge has no option 'nope'"),
    (["mcp", "{tree}", "--judge-option", "timeout"], "--judge-option 'timeout': expected KEY=VALUE"),
])
def test_every_command_refuses_a_bad_option_before_opening_anything(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such.tree"  # never opened: the options are refused first
    code = main([part.replace("{tree}", str(missing)) for part in argv])
    assert code == 2
    assert message in capsys.readouterr().err


def test_generator_options_reach_the_generator() -> None:
    from decisionrag._answer import load_generator

    model = load_generator("openai-compatible:m", base_url="http://127.0.0.1:1/v1",
                           temperature="0.3", max_attempts="2", timeout="7")
    assert model.temperature == 0.3
    assert model.chat.http.policy.max_attempts == 2 and model.chat.http.policy.timeout == 7.0
    with pytest.raises(AnswerError, match="unknown options"):
        load_generator("openai-compatible:m", colour="red")


# -- the options reach the judge --------------------------------------------------------------


def test_ask_sends_the_model_and_packs_by_the_option(small_tree: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with standin_server() as server:
        code = main(["ask", str(small_tree), QUESTION, "--judge", f"jev-compatible:{server.url}",
                     "--judge-option", "model=smollm2-served", "--judge-option",
                     "questions_per_call=2", "--json"])
        bodies = server.requests()
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["results"]
    assert bodies and {body["model"] for body in bodies} == {"smollm2-served"}
    assert max(len(body["questions"]) for body in bodies) <= 2  # typed: an int, not "2"


def test_serve_settings_carry_typed_options_to_the_shared_judge(small_tree: Path) -> None:
    from decisionrag._cli import build_parser
    from decisionrag._cli._serve_cmds import _settings
    from decisionrag._serve._service import build_service
    from decisionrag._serve._settings import ServeSettings
    from decisionrag._sync import run_sync

    with standin_server() as server:
        args = build_parser().parse_args(
            ["serve", str(small_tree), "--judge", f"jev-compatible:{server.url}",
             "--judge-option", "model=served", "--judge-option", "timeout=30"])
        settings = ServeSettings.from_json(_settings(args).to_json())  # as a worker reads them
        assert settings.judge_options == {"model": "served", "timeout": 30.0}
        service = build_service(settings)
        try:
            assert service.judge.inner.model == "served"  # type: ignore[attr-defined]
        finally:
            run_sync(service.judge.aclose())


def test_the_wait_line_names_what_is_waited_for() -> None:
    from decisionrag._cli._waiting import _line
    from decisionrag._deadline import QueryDeadline

    scope = QueryDeadline(60)
    assert _line(scope, 10).startswith("decisionrag: still waiting for the judge after 10s")
    assert _line(scope, 10, "the judge or the answer model").startswith(
        "decisionrag: still waiting for the judge or the answer model after 10s")
