"""Answer quality (paper §5.2): a chat model answers from a system's top-5 passages; exact
match and token F1.

Any OpenAI-compatible chat-completions endpoint works: ``OPENAI_BASE_URL`` (default the
OpenAI API) and, when the server needs one, ``OPENAI_API_KEY``. Exact match uses the SQuAD
answer normalisation (lowercase, no punctuation, no articles, single spaces) and the best
of the reference answers; not-answerable questions have the reference "not answerable".
Token F1 is SQuAD's: the harmonic mean of precision and recall of the normalised answer's
words against a reference's (as multisets), the best over the references.
"""

from __future__ import annotations

import asyncio
import os
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._chat import ChatClient
from .._errors import AnswerError, InputError
from .._http import ANSWER_ERRORS, RetryPolicy
from ._data import Dataset, EvalQuery

__all__ = ["AnswerClient", "AnswerError", "answer_quality", "exact_match", "normalize_answer",
           "parse_answer", "token_f1"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NOT_ANSWERABLE = "not answerable"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
_INSTRUCTION = (
    "Answer the question using only the numbered passages. Reply with 'Answer:' followed by "
    "the shortest answer: yes, no, a short phrase, or 'not answerable' when the passages do not "
    "contain the answer."
)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, references: Sequence[str]) -> float:
    predicted = normalize_answer(prediction)
    return 1.0 if any(predicted == normalize_answer(ref) for ref in references) else 0.0


def token_f1(prediction: str, references: Sequence[str]) -> float:
    """SQuAD token F1 against the best of `references` (two empty answers agree fully)."""
    return max((_f1(prediction, ref) for ref in references), default=0.0)


def _f1(prediction: str, reference: str) -> float:
    predicted = normalize_answer(prediction).split()
    wanted = normalize_answer(reference).split()
    if not predicted or not wanted:
        return float(predicted == wanted)
    same = sum((Counter(predicted) & Counter(wanted)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(wanted)
    return 2 * precision * recall / (precision + recall)


def references(query: EvalQuery) -> tuple[str, ...]:
    return (*query.answers, NOT_ANSWERABLE) if query.not_answerable else query.answers


def build_messages(query: EvalQuery, passages: Sequence[str]) -> list[dict[str, str]]:
    numbered = "\n\n".join(f"Passage {i}: {text}" for i, text in enumerate(passages, 1))
    turns = "".join(f"{t.role}: {t.text}\n" for t in query.history[-5:])
    situation = f"Situation: {query.context}\n" if query.context else ""
    user = f"{numbered}\n\n{turns}{situation}Question: {query.text}"
    return [{"role": "system", "content": _INSTRUCTION}, {"role": "user", "content": user}]


def parse_answer(reply: str) -> str:
    """The text after the last 'Answer:' (the whole reply when absent), first line only."""
    _, _, tail = reply.rpartition("Answer:")
    lines = (tail or reply).strip().splitlines()
    return lines[0].strip() if lines else ""


@dataclass
class AnswerClient:
    """The answer model: the shared OpenAI-compatible chat provider with `AnswerError`s."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    retries: int = 3
    concurrency: int = 8
    temperature: float = 0.0
    policy: RetryPolicy | None = None  # replaces timeout and retries when given

    def __post_init__(self) -> None:
        self.base_url = (
            self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self.api_key = self.api_key or os.environ.get("OPENAI_API_KEY")
        policy = self.policy or RetryPolicy(
            max_attempts=max(1, self.retries), timeout=self.timeout,
            deadline=max(self.timeout, 180.0) * max(1, self.retries))
        self.chat = ChatClient(self.base_url, self.model, api_key=self.api_key or "",
                               policy=policy, concurrency=self.concurrency,
                               who=f"answer model at {self.base_url}", errors=ANSWER_ERRORS)

    async def complete(self, messages: list[dict[str, str]]) -> str:
        reply = await self.chat.complete(messages, max_tokens=64, temperature=self.temperature)
        return reply.text

    async def aclose(self) -> None:
        await self.chat.aclose()


async def answer_quality(
    dataset: Dataset,
    rankings: Mapping[str, Sequence[str]],
    client: AnswerClient,
    *,
    top: int = 5,
    concurrency: int = 4,
) -> dict[str, Any]:
    """Exact match and token F1 of the answers generated from each query's top passages
    (``per_query`` holds exact match, ``per_query_f1`` token F1)."""
    corpus = dataset.corpus
    queries = [q for q in dataset.queries if references(q) and q.id in rankings]
    if not queries:
        raise InputError(f"{dataset.name}: no query has reference answers")
    slots = asyncio.Semaphore(concurrency)

    async def one(query: EvalQuery) -> tuple[str, str]:
        passages = [corpus[key].text for key in rankings[query.id][:top] if key in corpus]
        async with slots:
            reply = await client.complete(build_messages(query, passages))
        return query.id, parse_answer(reply)

    try:
        answers = dict(await asyncio.gather(*(one(q) for q in queries)))
    finally:
        await client.aclose()
    scores = {q.id: exact_match(answers[q.id], references(q)) for q in queries}
    f1 = {q.id: token_f1(answers[q.id], references(q)) for q in queries}
    return {
        "exact_match": sum(scores.values()) / len(scores),
        "token_f1": sum(f1.values()) / len(f1),
        "n": len(scores),
        "per_query": scores,
        "per_query_f1": f1,
        "answers": answers,
    }
