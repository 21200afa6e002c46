"""Conversations: the six-turn query, the notepad, and how the notepad steers the walk."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from _navigate_helpers import asked, pets_tree
from decisionrag._judges import Candidate, ScriptedJudge
from decisionrag._judges._base import BinaryRequest
from decisionrag._judges._embedded import EmbeddedJudge, searched_text
from decisionrag._navigate import PRESETS, Conversation, Navigator, StageSettings
from decisionrag._query import Query, Turn
from decisionrag._tree import Tree

# what each user turn is about: the group, page and passage a perfect judge would pick
TOPICS = {
    "cats": {"g:Cats": 0.9, "c1": 0.9, "c1-p1": 0.9},
    "dogs": {"g:Dogs": 0.9, "d2": 0.9, "d2-p0": 0.9},
    "vets": {"g:Cats": 0.9, "c2": 0.9, "c2-p1": 0.9},
}


def by_last_turn(query: str, candidate: Candidate) -> float:
    """Scores by the current user turn (the last line of the rendered conversation)."""
    last = query.splitlines()[-1].removeprefix("User: ")
    return TOPICS[last].get(candidate.id, 0.05)


@pytest.fixture
def chat(tmp_path: Path) -> tuple[Conversation, ScriptedJudge]:
    tree: Tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge(by_last_turn)
    return Conversation(Navigator(tree, judge, "md2d"), k=5), judge


def test_notepad_over_three_turns(chat: tuple[Conversation, ScriptedJudge]) -> None:
    conversation, _ = chat
    first = conversation.ask("cats")
    assert first.ids[0] == "c1-p1" and conversation.notepad == ["c1"]
    conversation.reply("Cats eat fish.")
    second = conversation.ask("dogs")
    assert second.ids[0] == "d2-p0" and conversation.notepad == ["d2", "c1"]
    conversation.reply("Dogs eat kibble.")
    third = conversation.ask("vets")
    assert third.ids[0] == "c2-p1" and conversation.notepad == ["c2", "d2", "c1"]
    conversation.ask("cats")
    assert conversation.notepad == ["c1", "c2", "d2"]  # moved to the front, not repeated


def test_notepad_steers_groups_pages_and_passages(chat: tuple[Conversation, ScriptedJudge]) -> None:
    conversation, judge = chat
    conversation.ask("cats")
    judge.calls.clear()
    second = conversation.ask("dogs")
    group = second.trace.stage("group 1")
    assert group.kept == [("g:Dogs", 0.9), ("g:Cats", 0.05)]  # the notepad page's center stays
    assert group.opened == ["g:Cats", "g:Dogs"]
    page_request = judge.binary_calls[1]
    assert [c.id for c in page_request.candidates] == ["c1", "c2", "d1", "d2"]
    assert "Used earlier in this conversation, most recent first: Page 1." in page_request.context
    # passages of d2 (kept) and of c1 (the notepad) are scored together, in reading order
    assert {"c1-p0", "c1-p1", "c1-p2", "d2-p0"} <= set(asked(judge)[2])
    assert asked(judge)[2] == sorted(asked(judge)[2], key=lambda k: ("cdf".index(k[0]), k))


def test_two_most_recent_notepad_pages_join_the_passage_stage(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge({"g:Fish": 0.95, "f1": 0.9})
    navigator = Navigator(tree, judge, replace(PRESETS["md2d"], documents=StageSettings(top_k=1)))
    navigator.retrieve(
        "fish?", history=[{"role": "user", "text": "hi"}], notepad=["d1", "c2", "c1"]
    )
    passages = asked(judge)[-1]
    assert {"d1-p0", "d1-p1", "c2-p0", "c2-p1", "f1-p0"} == set(
        passages
    )  # not c1: third most recent


def test_conversation_queries_hold_the_last_six_turns(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge()
    history = [{"role": "user" if i % 2 == 0 else "agent", "text": f"turn {i}"} for i in range(8)]
    Navigator(tree, judge, "md2d").retrieve("turn 8", history=history)
    query = judge.calls[0].query
    assert query.splitlines() == [
        "Conversation (most recent last):",
        "Agent: turn 3",
        "User: turn 4",
        "Agent: turn 5",
        "User: turn 6",
        "Agent: turn 7",
        "User: turn 8",
    ]
    assert judge.calls[0].questions[0] == (
        "Is the page with the information the agent needs for its next reply likely in Topic 1?"
    )
    assert (
        judge.binary_calls[-1].questions[0]
        == "Should the agent's next reply be based on Passage 1?"
    )


def test_stale_notepad_keys_are_ignored(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    result = Navigator(tree, ScriptedJudge(), PRESETS["md2d"]).retrieve(
        "q", notepad=["gone", "c1-p0"]
    )
    assert result.hits  # a removed page or a passage key in the notepad is simply skipped


class RecordingRetriever:
    """A flat retriever that records what it was asked and returns fixed passages."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def retrieve(self, text: str, k: int) -> list[tuple[str, float]]:
        self.asked.append(text)
        return [("f1-p0", 1.0)][:k]


def test_similarity_search_uses_the_current_turn_as_flat_retrievers_do(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge()
    retriever = RecordingRetriever()
    preset = replace(PRESETS["md2d"], hybrid_k=3)
    history = [{"role": "user", "text": "my cat is ill"}, {"role": "agent", "text": "what signs?"}]
    Navigator(tree, judge, preset, retriever=retriever).retrieve("it sneezes", history=history)
    assert retriever.asked == ["it sneezes"]
    assert judge.calls and all(call.search == "it sneezes" for call in judge.calls)
    assert "User: my cat is ill" in judge.calls[0].query  # the rendered query keeps the turns


def test_a_question_with_a_situation_searches_with_both(tmp_path: Path) -> None:
    tree = pets_tree(tmp_path / "pets.tree")
    judge = ScriptedJudge()
    Navigator(tree, judge, "auto").retrieve(Query("Can I get it?", context="I have a dog."))
    assert {call.search for call in judge.calls} == {"I have a dog. Can I get it?"}
    assert judge.calls[0].query.startswith("User's situation: I have a dog.")


class WordEncoder:
    """A toy encoder: one dimension per known word, so tests can see what was embedded."""

    WORDS = ("cat", "dog", "fish", "sneezes")
    name, dim, precision = "words", 4, "float32"

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        rows = np.array([[float(w in t.lower()) for w in self.WORDS] for t in texts]) + 1e-3
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_the_embedded_judge_embeds_the_search_text_not_the_rendered_query() -> None:
    encoder = WordEncoder()
    judge = EmbeddedJudge(encoder)
    candidates = (Candidate("a", "a dog"), Candidate("b", "a fish"))
    request = BinaryRequest("ctx", ("a?", "b?"), "Conversation:\nUser: my dog\nUser: fish?",
                            candidates, search="fish?")
    result = asyncio.run(judge.binary(request))
    assert "fish?" in encoder.encoded and request.query not in encoder.encoded
    assert result.probabilities[1] > result.probabilities[0]
    assert searched_text(replace(request, search="")) == request.query


def test_search_text_keeps_the_situation_and_drops_earlier_turns() -> None:
    turns = (Turn("user", "my cat is ill"), Turn("agent", "what signs?"))
    assert Query("it sneezes", context="I live in Leeds.", history=turns).search_text == (
        "I live in Leeds. it sneezes")
    assert Query("it sneezes", history=turns).search_text == "it sneezes"
    assert Query("  Can I?  ").search_text == "Can I?"


@pytest.mark.parametrize(("groups", "route_groups", "pages"), [
    (StageSettings(top_k=1), True, ["c1", "d1", "d2"]),  # Cats pruned: its notepad page joins
    (StageSettings(top_k=None, share=1.0), True, None),  # every group kept: every page, once
    (StageSettings(top_k=1), False, None),  # no routing: every page, once
])
def test_the_notepad_page_joins_the_page_level_once(
        tmp_path: Path, groups: StageSettings, route_groups: bool, pages: list[str] | None) -> None:
    """The notepad's page is judged at the page level whether its group was kept, pruned or
    never routed, and never twice (when every page is there it is already among them)."""
    tree = pets_tree(tmp_path / "pets.tree")
    settings = replace(PRESETS["md2d"], groups=(groups,), route_groups=route_groups,
                       notepad=replace(PRESETS["md2d"].notepad, keep_group=False))
    judge = ScriptedJudge({"g:Dogs": 0.9, "d2": 0.9})
    navigator = Navigator(tree, judge, settings)
    navigator.retrieve("dogs?", history=[{"role": "user", "text": "cats?"}], notepad=["c1"])
    [page_request] = [r for r in judge.binary_calls if r.candidates[0].id in {"c1", "d1"}]
    every = [page.key for page in navigator.view.all_documents()]
    assert len(every) > 3 and every[0] == "c1"
    assert [c.id for c in page_request.candidates] == (pages or every)
