"""Under CI=true a missing dev dependency or missing shared data fails; elsewhere it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import find_shared_data, require_module


def test_a_missing_module_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_module("decisionrag_no_such_module")


def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="dev dependency"):
        require_module("decisionrag_no_such_module")


def test_a_present_module_is_returned_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("true", ""):
        monkeypatch.setenv("CI", value)
        assert require_module("json").dumps([1]) == "[1]"


def test_missing_shared_data_skips_locally_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    absent = tmp_path / "shared" / "data"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        find_shared_data(absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI puts it there"):
        find_shared_data(absent)
    assert find_shared_data(tmp_path) == tmp_path
