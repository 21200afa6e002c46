"""The compact question form: the paper's sentence once per context, a label per candidate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decisionrag import NavigationError, Navigator, Tree, build_tree, get_preset
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate._render import Entry, binary_request, compact_instruction


def _entries(n: int) -> list[Entry]:
    return [Entry(f"k{i}", f"Title {i}") for i in range(n)]


def test_paper_wording_is_the_default_and_compact_moves_it_into_the_context() -> None:
    paper = binary_request("User's question: q", _entries(3), "document", "qa")
    assert paper.questions[1] == "Is the information needed to answer the user's question on Page 2?"
    compact = binary_request("User's question: q", _entries(3), "document", "qa", form="compact")
    assert compact.questions == ("Page 1?", "Page 2?", "Page 3?")
    assert compact.context == paper.context + "\n" + compact_instruction("document", "qa")
    assert compact_instruction("document", "qa") == (
        'Each question names one page, e.g. "Page 1?", and asks: '
        "is the information needed to answer the user's question on that page?")
    assert compact_instruction("passage", "conversation").endswith(
        "should the agent's next reply be based on that passage?")
    assert compact_instruction("group", "qa").endswith("likely in that topic?")


@pytest.fixture(scope="module")
def tree_path(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    path = tmp_path_factory.mktemp("qf") / "xquad.tree"
    build_tree([shared_data / "xquad-en" / "corpus.jsonl"], path)
    return path


def test_a_compact_walk_ranks_the_same_for_a_judge_blind_to_wording_and_costs_less(tree_path: Path) -> None:
    with Tree.open(tree_path) as tree:
        paper_judge, compact_judge = ScriptedJudge(), ScriptedJudge()
        preset = get_preset("auto", tree, paper_judge)
        paper = Navigator(tree, paper_judge, preset).retrieve("Normans conquered England", k=5)
        compact = Navigator(tree, compact_judge, preset.with_overrides(questions="compact")).retrieve(
            "Normans conquered England", k=5)
    assert paper.ids == compact.ids
    asked = sum(len(r.questions) for r in compact_judge.binary_calls)
    # about 14 tokens a question fewer, less the instruction said once per request
    assert paper.usage.input_tokens - compact.usage.input_tokens > 8 * asked
    for request in compact_judge.binary_calls:
        assert all(q.endswith("?") and len(q.split()) == 2 for q in request.questions)
        assert "Each question names one" in request.context
    assert all(len(q.split()) > 5 for r in paper_judge.binary_calls for q in r.questions)


def test_unknown_form_is_refused(tree_path: Path) -> None:
    with Tree.open(tree_path) as tree, pytest.raises(NavigationError, match="question form"):
        get_preset("auto", tree).with_overrides(questions="terse")  # type: ignore[arg-type]


def test_cli_ask_takes_the_compact_form(tree_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "decisionrag", "ask", str(tree_path), "Normans",
                           "--judge", "scripted", "--questions", "compact", "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["results"]) > 0
