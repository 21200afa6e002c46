"""The multiple-choice step: one choice over the binary top m, in reading order, reorders it.

The walk ends with it, and so does reranking given texts (`_rerank`): the shortlist is shown
in reading order (a prefix cache sees the same bytes for the same passages), the judge
answers with a distribution over it, and the shortlist is reordered by that distribution
(`order`) or only its most probable passage moved to rank one (`top1`).

It is skipped where it cannot change the order: a judge whose choice follows its binary
scores (`Reads.choice_follows_binary`, the embedded judge) over a shortlist ranked by P(yes)
from one shared context, with no other score mixed in. The trace says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._errors import JudgeRequestError
from .._tree import Node
from ._config import ChoiceSettings
from ._level import LevelEngine
from ._ranking import Scored, close_stage
from ._render import Entry, choice_request
from ._result import Stage

CHOICE_SKIPPED = ("choice skipped: {judge}'s choice follows its P(yes) from the one shared "
                  "context, so it cannot reorder")


async def choose(levels: LevelEngine, ranked: list[Scored], settings: ChoiceSettings, *,
                 entry_of: Callable[[Node], Entry], reading_key: Callable[[Node], Any],
                 one_context: bool, note: Callable[[str], None]) -> dict[str, float]:
    """Reorder `ranked` (best first) in place by one choice over its top m (`settings.top`,
    within the judge's options and the query's token budget); the choice probabilities by
    key. `one_context`: the binary scores of `ranked` came from one request, unmixed."""
    m = min(settings.top, len(ranked), levels.judge.limits.max_options, 255)
    m = within_budget(levels, [entry_of(s.node) for s in ranked[:m]], note)
    if settings.mode == "off" or m < 2:
        return {}
    shortlist = ranked[:m]
    if cannot_reorder(levels, shortlist, one_context):
        note(CHOICE_SKIPPED.format(judge=levels.judge.name))
        return {}
    in_reading_order = sorted(shortlist, key=lambda s: reading_key(s.node))
    entries = [entry_of(s.node) for s in in_reading_order]
    stage = levels.new_stage(Stage.CHOICE.value, [e.key for e in entries])
    stage.nodes = [s.node for s in in_reading_order]
    request = choice_request(levels.query_text, entries, levels.task, levels.statistics,
                             levels.search_text, rendered=levels.renders_context())
    try:
        result = await levels.send_choice(stage, request)
    except JudgeRequestError:
        if levels.judge.limits.max_options >= m:
            raise
        # the server refused this many options and the judge learned its limit: again, shorter
        note(f"{levels.judge.name} takes at most {levels.judge.limits.max_options} options a "
             f"choice: the shortlist cut from {m}")
        return await choose(levels, ranked, settings, entry_of=entry_of, reading_key=reading_key,
                            one_context=one_context, note=note)
    if result is None:  # degraded: the binary order stands
        close_stage(levels, stage, shortlist, [])
        return {}
    probabilities = {e.key: p for e, p in zip(entries, result.probabilities, strict=False)}
    stage.scores = probabilities
    if settings.mode == "order":
        ranked[:m] = sorted(shortlist, key=lambda s: -probabilities[s.node.key])
    else:
        best = max(shortlist, key=lambda s: probabilities[s.node.key])
        ranked.remove(best)
        ranked.insert(0, best)
    chosen = [Scored(s.node, s.binary, probabilities[s.node.key]) for s in ranked[:m]]
    close_stage(levels, stage, chosen, [])
    return probabilities


def cannot_reorder(levels: LevelEngine, shortlist: list[Scored], one_context: bool) -> bool:
    """Whether a choice over `shortlist` would give back its order: the judge's choice
    follows its binary scores, which all came from one request and were not mixed with
    anything (a page's score, recovery)."""
    return (levels.judge.reads.choice_follows_binary and one_context
            and all(s.score == s.binary for s in shortlist))


def within_budget(levels: LevelEngine, entries: list[Entry], note: Callable[[str], None]) -> int:
    """The largest shortlist (at most len(entries)) whose choice request fits the tokens left."""
    m = len(entries)
    left = levels.remaining_tokens()
    if left is None or m < 2:
        return m
    room = left - levels.judge.count_tokens(levels.query_text) - 60
    fits = 0
    for entry in entries:
        room -= (entry.tokens or 0) + 8
        if room < 0:
            break
        fits += 1
    if fits < m:
        note(f"max_input_tokens: the choice shortlist cut from {m} to {fits}")
    return fits
