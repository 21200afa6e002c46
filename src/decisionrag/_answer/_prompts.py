"""The answer prompts: the paper's task instructions (appendix C.1) with numbered passages
and a request for bracketed citations.

A prompt is two messages. The system message is the task's instruction; the user message
lists the passages in rank order as ``[n] page › section`` headers with their text below,
then the query: the user's situation and question (QA), or the last turns of the
conversation (the agent's next reply). Passage text is quoted data: a line in it that looks
like one of our passage headers is defused, so a document cannot add a passage of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._errors import InputError
from .._query import Query

TaskName = Literal["qa", "short", "conversation"]
TASKS: tuple[str, ...] = ("auto", "qa", "short", "conversation")
CONVERSATION_TURNS = 6  # the paper gives MTRAG's generator the last six turns

_CITE = (
    " Cite the passages you use by their numbers in square brackets, e.g. [1] or [2][3], "
    "and cite only numbers that appear above."
)


@dataclass(frozen=True, slots=True)
class Task:
    """One answer task: its instruction, how much it may write, whether the reply ends in
    an ``Answer:`` line (the short-answer tasks) or is a whole reply (conversations)."""

    name: TaskName
    instruction: str
    max_tokens: int
    answer_line: bool


TASK_PRESETS: dict[str, Task] = {
    "qa": Task(
        "qa",
        "Answer the user's question using only the numbered passages. Reply with 'Answer:' "
        "followed by the shortest answer: yes, no, a short phrase, or 'not answerable' when the "
        "passages do not contain the answer; when the answer holds only under conditions the "
        "passages state, add them after the answer." + _CITE,
        max_tokens=256,
        answer_line=True,
    ),
    "short": Task(
        "short",
        "Answer the question using only the numbered passages. Reply with 'Answer:' followed by "
        "a phrase of at most five words, or 'not answerable' when the passages do not contain "
        "the answer." + _CITE,
        max_tokens=128,
        answer_line=True,
    ),
    "conversation": Task(
        "conversation",
        "You are the agent in the conversation below. Write the agent's next reply to the user, "
        "using only the numbered passages. When the passages do not contain the answer, say so "
        "plainly instead of guessing." + _CITE,
        max_tokens=512,
        answer_line=False,
    ),
}

_HEADER_LIKE = re.compile(r"^(\s*)\[(\d+)\]", re.MULTILINE)


def get_task(name: str | Task, query: Query) -> Task:
    """The task preset called `name`; ``auto``: a conversation when the query has earlier
    turns, else QA."""
    if isinstance(name, Task):
        return name
    if name == "auto":
        return TASK_PRESETS["conversation" if query.is_conversational else "qa"]
    try:
        return TASK_PRESETS[name]
    except KeyError:
        raise InputError(f"unknown answer task {name!r}: use one of {', '.join(TASKS)}") from None


@dataclass(frozen=True, slots=True)
class Source:
    """One passage as the generator sees it: its number, where it sits, and its text."""

    number: int
    path: tuple[str, ...]
    text: str


def build_messages(query: Query, sources: Sequence[Source], task: Task) -> list[dict[str, str]]:
    blocks = [_source_block(source) for source in sources]
    passages = "\n\n".join(blocks) if blocks else "(no passages were found)"
    return [
        {"role": "system", "content": task.instruction},
        {"role": "user", "content": f"Passages:\n\n{passages}\n\n{_query_block(query, task)}"},
    ]


def _source_block(source: Source) -> str:
    where = " › ".join(part for part in source.path if part)
    text = _HEADER_LIKE.sub(r"\1(\2)", source.text.strip())
    return f"[{source.number}] {where}\n{text}" if where else f"[{source.number}]\n{text}"


def _query_block(query: Query, task: Task) -> str:
    if task.name == "conversation":
        turns = query.last_turns(CONVERSATION_TURNS)
        lines = "\n".join(f"{_speaker(t.role)}: {' '.join(t.text.split())}" for t in turns)
        situation = f"The user's situation: {query.context}\n" if query.context else ""
        return f"{situation}Conversation:\n{lines}\nAgent:"
    situation = f"The user's situation: {query.context}\n" if query.context else ""
    earlier = "".join(f"{_speaker(t.role)}: {t.text}\n" for t in query.history[-(CONVERSATION_TURNS - 1):])
    return f"{earlier}{situation}Question: {query.text}"


def _speaker(role: str) -> str:
    return "Agent" if role == "agent" else "User"
