"""Reranking given texts (another retriever's results) on the walk's own last stages.

The texts are candidates of one passage-level context in the order given (which is their
reading order: a prefix cache sees the same bytes for the same inputs), judged by the same
level engine as a walk's passage stage — one P(yes) per text, the search text embedded,
the corpus's word statistics carried when given — then reordered by the same choice step
over the best `choice_top`. Nothing is collapsed or dropped: every text comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._judges import Judge, Usage
from .._query import Query
from .._tree import Node, NodeKind
from .._words import Lexicon
from ._choice import choose
from ._config import ONE_REQUEST, ChoiceSettings
from ._level import LevelEngine
from ._ranking import Ranking, close_stage
from ._render import Entry, render_query
from ._result import Stage, Trace


@dataclass(frozen=True, slots=True)
class Reranked:
    """One input text after reranking: its position in the input, P(yes), choice odds."""

    index: int
    binary: float
    choice: float | None


async def rerank_texts(
    judge: Judge,
    query: str | Query,
    texts: Sequence[str],
    *,
    titles: Sequence[str] | None = None,
    choice_top: int = 20,
    statistics: Lexicon | None = None,
) -> tuple[list[Reranked], Usage, Trace]:
    """`texts` best first (all of them), what the judge's requests cost, and the trace of
    the two stages. `titles` (optional, one per text) are the header lines above their texts
    (as a page title and headings are above a passage); `statistics` the word statistics of
    the corpus the texts come from (a tree's, when known)."""
    if titles is not None and len(titles) != len(texts):
        raise ValueError("rerank_texts: one title per text")
    if not texts:
        return [], Usage(), Trace()
    asked = Query.of(query)
    nodes = [_text_node(i, text) for i, text in enumerate(texts)]
    entries = [Entry(node.key, node.text, (titles[i],) if titles and titles[i] else (), None, True)
               for i, node in enumerate(nodes)]
    levels = LevelEngine(judge, render_query(asked, "qa"), "qa", statistics=statistics,
                         search_text=asked.search_text)
    stage = levels.new_stage(Stage.PASSAGE.value, [node.key for node in nodes])
    values = await levels.judge_entries(stage, "passage", entries, ONE_REQUEST, ())
    ranked = Ranking.of(nodes, values).top()
    stage.scores, stage.nodes = {n.key: v for n, v in zip(nodes, values, strict=True)}, nodes
    close_stage(levels, stage, ranked, opened=[])
    choice = await choose(levels, ranked, ChoiceSettings(top=choice_top),
                          entry_of=lambda node: entries[node.id], reading_key=_position,
                          one_context=stage.contexts == 1, note=stage.notes.append)
    return ([Reranked(s.node.id, s.binary, choice.get(s.node.key)) for s in ranked],
            levels.usage, levels.trace)


def _text_node(index: int, text: str) -> Node:
    """Text `index` as a passage node of its own (its id its position, its key ``c{index}``)."""
    return Node(id=index, key=f"c{index}", parent=None, kind=NodeKind.PASSAGE, pos=index,
                doc=None, end=index, n_passages=1, title="", description="", heading=(), text=text)


def _position(node: Node) -> int:
    return node.id
