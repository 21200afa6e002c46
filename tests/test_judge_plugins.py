"""Judge backends are records; a third-party package registers one through the
``decisionrag.judges`` entry-point group, the same hook the built-ins use."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._cli import main
from decisionrag._errors import JudgeConfigError
from decisionrag._judges import _backends as backends
from decisionrag._judges import load_judge, parse_judge_id
from decisionrag._judges._options import HttpJudgeOptions
from decisionrag._judges._registry import BACKEND_INFO, BACKENDS

PLUGIN = '''
from dataclasses import dataclass

from decisionrag._judges import ScriptedJudge
from decisionrag._judges._backends import Backend
from decisionrag._judges._options import JudgeOptions


@dataclass(frozen=True)
class EchoOptions(JudgeOptions):
    default: float = 0.5


def echo_judge(model, **options):
    given = EchoOptions.parse(options, f"echo:{model}")
    judge = ScriptedJudge({}, default=given.default, name=f"echo:{model}")
    judge.plugin_model = model
    return judge


BACKEND = Backend("echo", echo_judge, "a plugin's judge (test)", "echo:anything",
                  env=("ECHO_KEY",), options=EchoOptions)
'''


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    """A fake installed distribution: a module and its dist-info with the entry point."""
    (tmp_path / "echo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "echo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[decisionrag.judges]\necho = echo_plugin:BACKEND\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert backends.load_plugins(reload=True) == ["echo"]
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("echo_plugin", None)
        backends.unregister_backend("echo")
        backends.load_plugins(reload=True)


def test_a_plugin_backend_loads_like_a_builtin(plugin: Path) -> None:
    assert parse_judge_id("echo:m1").backend == "echo"
    judge = load_judge("echo:m1", default="0.25")
    assert judge.name == "echo:m1" and judge.plugin_model == "m1"  # type: ignore[attr-defined]
    assert judge.binary_sync  # a real Judge
    with pytest.raises(JudgeConfigError, match=r"unknown options \['colour'\]; known options: default"):
        load_judge("echo:m1", colour="blue")


def test_judges_listing_is_generated_from_the_records(
    plugin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judges"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("echo "))
    assert "echo:anything" in line and "ECHO_KEY" in line and "set by the model" in line
    assert "echo" in BACKENDS_NOW() and sorted(i.backend for i in info_now()) == sorted(BACKENDS_NOW())


def BACKENDS_NOW() -> tuple[str, ...]:
    from decisionrag._judges import _registry

    return _registry.BACKENDS  # type: ignore[no-any-return]


def info_now() -> tuple[object, ...]:
    from decisionrag._judges import _registry

    return _registry.BACKEND_INFO  # type: ignore[no-any-return]


def test_builtins_are_registered_through_the_same_hook() -> None:
    assert set(BACKENDS) >= {"typesafe", "openrouter", "jev-compatible", "openai", "local",
                             "embedded", "scripted", "simulated"}
    assert all(backends.backend(name) is not None for name in BACKENDS)
    assert [i.backend for i in BACKEND_INFO] == list(BACKENDS)
    with pytest.raises(JudgeConfigError, match="already registered"):
        backends.register_backend(backends.Backend("scripted", "x:y", "other", "scripted"))


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path: Path) -> None:
    info = tmp_path / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[decisionrag.judges]\nbroken = no_such_module:X\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.warns(RuntimeWarning, match="broken"):
            assert backends.load_plugins(reload=True) == []
        assert load_judge("scripted").name == "scripted"
    finally:
        sys.path.remove(str(tmp_path))
        backends.load_plugins(reload=True)


def test_typed_options_convert_and_reject() -> None:
    given = HttpJudgeOptions.parse({"concurrency": "4", "max_questions": "none", "timeout": 5},
                                   "x")
    assert (given.concurrency, given.max_questions, given.policy().timeout) == (4, None, 5)
    assert given.given == {"concurrency", "max_questions", "timeout"}
    with pytest.raises(JudgeConfigError, match=r"x: option concurrency='many' is not a valid int"):
        HttpJudgeOptions.parse({"concurrency": "many"}, "x")
    with pytest.raises(JudgeConfigError, match=r"unknown options \['colour'\]"):
        HttpJudgeOptions.parse({"colour": "blue"}, "x")
