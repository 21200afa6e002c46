"""`make demo` answers its own question: the top passage it prints is the one that answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from decisionrag import demo

pytestmark = pytest.mark.slow  # builds vectors for the 2,481 passages of Python's help topics


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    demo.ensure_tree(folder)
    return folder


def test_the_demo_prints_the_passage_that_answers_its_question(
    demo_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--out", str(demo_folder)]) == 0  # the default question, embedded judge
    out = capsys.readouterr().out
    assert f"Question: {demo.DEFAULT_QUESTION}" in out
    first = re.search(r"^ 1\. .*\[(?P<key>[^\]]+)\]\n(?P<text>.*)$", out, re.MULTILINE)
    assert first is not None, out
    assert first["key"].startswith("break.txt#")  # the break statement's page
    assert "terminates the nearest enclosing loop" in first["text"]
