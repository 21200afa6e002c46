"""Bounded tokens (issue #16): every request within the judge's declared limit, whatever the
size of a passage, a question or a conversation; the trace says what was cut."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._build import build_tree
from decisionrag._judges import load_judge
from decisionrag._judges._faults import FaultServer
from decisionrag._navigate import Navigator
from decisionrag._query import Query, Turn
from decisionrag._tree import Tree

LIMIT = 32_000  # the self-hosted System One default: SELF_HOSTED_LIMITS.max_tokens


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    (folder / "huge.txt").write_text("renew " + "word " * 4_000_000)  # one 20 MB passage
    (folder / "small.md").write_text("# Passports\n\nRenew a passport online.\n")
    return build_tree([folder], folder / "big.tree").path


def _walk(faults: FaultServer, tree_path: Path, query: Query | str) -> tuple[list[int], list[str]]:
    faults.reset()
    with Tree.open(tree_path) as tree:
        result = Navigator(tree, load_judge(faults.judge_id("ok")), "flat").retrieve(query, k=2)
    notes = [note for stage in result.trace.stages for note in stage.notes]
    assert result.usage.input_tokens < 4 * LIMIT  # a handful of requests, none oversized
    return [size // 4 + 1 for size in faults.request_sizes("ok")], notes


def test_a_20mb_passage_is_cut_to_its_head(faults: FaultServer, big_tree: Path) -> None:
    start = time.monotonic()
    tokens, notes = _walk(faults, big_tree, "how do I renew?")
    assert max(tokens) <= LIMIT
    assert any("cut to their first 16,000 tokens (the longest had 5,000,002" in n for n in notes)
    assert time.monotonic() - start < 10


def test_a_131kb_question_is_cut(faults: FaultServer, big_tree: Path) -> None:
    tokens, notes = _walk(faults, big_tree, "renew? " + "why " * 33_000)
    assert max(tokens) <= LIMIT and len(tokens) <= 6
    assert any(n.startswith("the question cut to its first 8,000 tokens") for n in notes)


def test_a_1mb_history_keeps_the_last_turns(faults: FaultServer, big_tree: Path) -> None:
    history = (Turn("user", "hello " * 200_000), Turn("agent", "hi"), Turn("user", "renew?"),
               Turn("agent", "which document?"))
    tokens, notes = _walk(faults, big_tree, Query("my passport", history=history))
    assert max(tokens) <= LIMIT
    assert any(n.startswith("the conversation cut to its last 4 turn(s)") for n in notes)


def test_max_input_tokens_shrinks_the_passage_stage_or_refuses(faults: FaultServer,
                                                                tmp_path: Path) -> None:
    from decisionrag._errors import NavigationError

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(6):
        (folder / f"{i}.md").write_text(f"# Topic {i}\n\n" + "\n\n".join(
            f"Passage {j} of topic {i}: " + "detail " * 40 for j in range(10)) + "\n")
    tree_path = build_tree([folder], tmp_path / "t.tree").path
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, load_judge(faults.judge_id("ok")), "flat")
        full = navigator.retrieve("renew topic 3", k=3)
        budget = full.usage.input_tokens // 2
        small = navigator.retrieve("renew topic 3", k=3, max_input_tokens=budget)
        assert small.usage.input_tokens <= budget < full.usage.input_tokens
        notes = [n for stage in small.trace.stages for n in stage.notes]
        assert any("passages left out of the passage stage" in n for n in notes)
        with pytest.raises(NavigationError, match=r"max_input_tokens=50: the page stage needs"):
            navigator.retrieve("renew topic 3", max_input_tokens=50)
