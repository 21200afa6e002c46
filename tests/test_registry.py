"""Judge ids are parsed in one place; each backend's factory gets its model and options."""

from __future__ import annotations

import pytest

from decisionrag._cli import main
from decisionrag._errors import JudgeConfigError
from decisionrag._judges import SimulatedJudge, load_judge, parse_judge_id
from decisionrag._judges._registry import BACKEND_INFO, BACKENDS, parse_options


@pytest.mark.parametrize(
    ("judge_id", "backend", "model"),
    [
        ("typesafe:jev-1.13", "typesafe", "jev-1.13"),
        ("openrouter:typesafe/jev-1.13", "openrouter", "typesafe/jev-1.13"),
        ("openai:gpt-6-luna", "openai", "gpt-6-luna"),
        ("jev-compatible:http://127.0.0.1:8000", "jev-compatible", "http://127.0.0.1:8000"),
        ("local:/x", "local", "/x"),
        ("embedded", "embedded", ""),
        ("scripted", "scripted", ""),
        ("simulated:latency=0.2", "simulated", "latency=0.2"),
        ("  typesafe:jev-1.13 ", "typesafe", "jev-1.13"),
    ],
)
def test_parse_judge_id(judge_id: str, backend: str, model: str) -> None:
    parsed = parse_judge_id(judge_id)
    assert (parsed.backend, parsed.model) == (backend, model)


@pytest.mark.parametrize("judge_id", ["gpt4", "claude:opus", "", "Typesafe:jev-1.13"])
def test_unknown_backend_is_a_config_error(judge_id: str) -> None:
    with pytest.raises(JudgeConfigError, match="backend must be one of"):
        parse_judge_id(judge_id)


def test_simulated_options_reach_the_judge() -> None:
    judge = load_judge("simulated:latency=0.2,concurrency=3")
    assert isinstance(judge, SimulatedJudge)
    assert judge.latency == 0.2 and judge.name == "simulated:latency=0.2,concurrency=3"


def test_bad_options() -> None:
    with pytest.raises(JudgeConfigError, match="name=value"):
        parse_options("latency")
    with pytest.raises(JudgeConfigError, match="unknown options"):
        load_judge("simulated:latency=0.1,speed=9")
    with pytest.raises(JudgeConfigError, match="unknown options"):
        load_judge("jev-compatible:http://127.0.0.1:8000", colour="blue")


def test_http_backends_are_built_without_sending_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "k")
    monkeypatch.setenv("OPENROUTER_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    typesafe = load_judge("typesafe:jev-1.13")
    assert typesafe.limits.max_options == 255 and typesafe.price_per_million_input == 0.042
    openrouter = load_judge("openrouter:typesafe/jev-1.13", concurrency=2)
    assert openrouter.price_per_million_input == 0.042
    hosted = load_judge("jev-compatible:http://127.0.0.1:8000/v1/systemone", max_questions=32)
    assert hosted.limits.max_questions == 32 and hosted.price_per_million_input is None
    assert load_judge("openai:gpt-6-luna").limits.max_options == 255


def test_jev_compatible_needs_a_url() -> None:
    with pytest.raises(JudgeConfigError, match="root URL"):
        load_judge("jev-compatible:127.0.0.1:8000")


def test_every_backend_is_described() -> None:
    assert sorted(info.backend for info in BACKEND_INFO) == sorted(BACKENDS)


def test_cli_lists_the_judges(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judges"]) == 0
    out = capsys.readouterr().out
    for backend in BACKENDS:
        assert backend in out
    assert "TYPESAFE_API_KEY" in out and "OPENROUTER_API_KEY" in out


def test_cli_probe_prints_probabilities_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["judge", "scripted", "--context", "passport renewal",
                 "-q", "passport renewal form", "-q", "tax credits"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split()[0] == "1.0000" and lines[1].split()[0] == "0.0000"
    assert lines[2].startswith("usage: requests=1")


def test_cli_probe_reports_a_bad_id_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "nope:x", "--context", "c", "-q", "q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("decisionrag: error: unknown judge 'nope:x'") and "Traceback" not in err
