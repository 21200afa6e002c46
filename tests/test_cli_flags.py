"""Command-line flags are never abbreviated: `serve --state redis://...` must not be taken for
`--state-dir` (argparse's prefix matching, off for every command and subcommand)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._cli import build_parser, main


def every_parser(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from every_parser(child)


def test_no_command_takes_an_abbreviated_flag() -> None:
    parsers = dict(every_parser(build_parser()))
    assert {"decisionrag serve", "decisionrag keys add", "decisionrag ask"} <= set(parsers)
    assert [prog for prog, parser in parsers.items() if parser.allow_abbrev] == []


@pytest.mark.parametrize(("argv", "said"), [
    (["serve", "docs.tree", "--state-d", "folder"], "unrecognized arguments: --state-d"),
    (["serve", "docs.tree", "--max-judge", "4"], "unrecognized arguments: --max-judge"),
    (["ask", "docs.tree", "question", "--jud", "scripted"], "unrecognized arguments: --jud"),
    (["keys", "add", "keys.json", "--nam", "app"], "required: --name"),
])
def test_an_abbreviated_flag_is_refused(argv: list[str], said: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing made: no folder, no key file


def test_state_takes_a_redis_url_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from _serve_helpers import write_tree

    tree = write_tree(tmp_path / "docs.tree")
    monkeypatch.chdir(tmp_path)
    assert main(["serve", str(tree), "--state", "http://:s3cret@db:6379/0", "--port", "1"]) == 2
    assert main(["serve", str(tree), "--state", "redis://db:6379/0", "--state-dir", "x", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "expected redis://HOST:PORT/DB" in err and "not both" in err and "s3cret" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.tree"]  # no folder named 'redis:'


def test_keys_add_takes_a_keys_own_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key_file = tmp_path / "keys.json"
    assert main(["keys", "add", str(key_file), "--name", "app", "--requests-per-minute", "5",
                 "--judge-tokens-per-minute", "20000"]) == 0
    assert main(["keys", "add", str(key_file), "--name", "batch", "--tree", "docs"]) == 0
    capsys.readouterr()
    assert main(["keys", "list", str(key_file)]) == 0
    assert capsys.readouterr().out == ("app\t*\trequests_per_minute=5\tjudge_tokens_per_minute=20000\n"
                                       "batch\tdocs\n")
    assert main(["keys", "add", str(key_file), "--name", "x", "--requests-per-minute", "0"]) == 2
    assert "at least 1 per minute" in capsys.readouterr().err
