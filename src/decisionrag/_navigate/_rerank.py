"""Reranking given texts (another retriever's results) with a judge, in one shared context.

The texts are candidates of one passage-level context in the order given (stable, so a
prefix cache sees the same bytes for the same inputs): one P(yes) per text from binary
questions over that context (split into several requests only when the judge's limits
demand it), then one multiple-choice question over the best `choice_top` reorders them, as
the walk's final stage does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._judges import Judge, Usage
from .._query import Query
from ._render import PREAMBLE, Entry, binary_request, choice_request, pack, render_query

LIST_TOKENS = 12


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
) -> tuple[list[Reranked], Usage]:
    """`texts` best first (all of them), and what the judge's requests cost. `titles`
    (optional, one per text) are printed as header lines above their texts."""
    if titles is not None and len(titles) != len(texts):
        raise ValueError("rerank_texts: one title per text")
    if not texts:
        return [], Usage()
    asked = Query.of(query)
    query_text, search = render_query(asked, "qa"), asked.search_text
    entries = [Entry(f"c{i}", text, (titles[i],) if titles and titles[i] else (), None, True)
               for i, text in enumerate(texts)]
    chunks = pack(entries, judge.count_tokens,
                  overhead=judge.count_tokens(PREAMBLE + query_text) + LIST_TOKENS,
                  max_candidates=judge.limits.max_questions, max_tokens=judge.limits.max_tokens,
                  keep_siblings=False)
    usage = Usage()
    binary: list[float] = []
    for chunk in chunks:
        result = await judge.binary(binary_request(query_text, chunk, "passage", "qa",
                                                   search=search))
        binary.extend(result.probabilities)
        usage = usage + result.usage
    order = sorted(range(len(texts)), key=lambda i: -binary[i])
    choice: dict[int, float] = {}
    m = min(choice_top, len(texts), judge.limits.max_options)
    if m >= 2:
        shortlist = sorted(order[:m])  # in the given order
        shortlisted = [entries[i] for i in shortlist]
        chosen = await judge.choice(choice_request(query_text, shortlisted, "qa", search=search))
        usage = usage + chosen.usage
        choice = dict(zip(shortlist, chosen.probabilities, strict=True))
        order[:m] = sorted(order[:m], key=lambda i: -choice[i])
    return [Reranked(i, binary[i], choice.get(i)) for i in order], usage
