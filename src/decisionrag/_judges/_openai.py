"""OpenAI Decisions: ``POST {OPENAI_BASE_URL}/decisions`` (default base
``https://api.openai.com/v1``, key ``OPENAI_API_KEY``).

The wire shape follows the openai-python types ``decision_create_params.py`` and
``decision.py`` (public beta):

* request ``{"model", "input": CONTEXT, "questions": [...]}``, each question either
  ``{"type": "predicate", "name", "instructions"}`` or ``{"type": "choice", "name",
  "instructions", "choices": [{"value": LABEL}, ...]}``;
* response ``{"model", "answers": [...], "usage": {"input_tokens", "output_tokens", ...}}``
  with the answers in the order of the questions: ``{"type": "predicate", "name",
  "probability"}``, ``{"type": "choice", "name", "choice", "confidence", "probabilities":
  [{"value", "probability"}, ...]}``, or ``{"type": "refusal", "name"}`` when the model
  declines a question.

A refusal is a `JudgeRequestError` naming the question (nothing is made up for it); answers
out of order, of the wrong type, missing or out of range are `JudgeProtocolError`. The limits
(255 options per choice, 64k input tokens; no documented question cap) and the price
($0.10 per million input tokens) are the published beta figures, settable with options.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import JudgeConfigError, JudgeProtocolError, JudgeRequestError
from ._base import (
    BinaryRequest,
    BinaryResult,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    Usage,
    check_binary,
    check_choice,
    estimate_tokens,
)
from ._http import HttpClient, make_usage
from ._options import HttpJudgeOptions

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_PRICE_PER_MILLION_INPUT = 0.10
OPENAI_LIMITS = Limits(max_questions=None, max_options=255, max_tokens=64_000)
CHOICE_TOLERANCE = 0.05


class OpenAIDecisionsJudge(Judge):
    """A judge on OpenAI's Decisions API (or any server of that shape)."""

    def __init__(self, model: str, client: HttpClient, *, limits: Limits,
                 price_per_million_input: float | None) -> None:
        self.model = model
        self.client = client
        self.limits = limits
        self.price_per_million_input = price_per_million_input
        self.name = f"openai:{model}"

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        if not request.questions:
            return BinaryResult([], Usage())
        questions = [{"type": "predicate", "name": f"q{i}", "instructions": q}
                     for i, q in enumerate(request.questions)]
        answers, usage = await self._decide(request.context, questions)
        values = [_probability(a.get("probability"), q["name"], self.name)
                  for a, q in zip(answers, questions, strict=True)]
        return BinaryResult(check_binary(values, len(questions), self.name), usage)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        options = list(request.options)
        if not options or len(set(options)) != len(options):
            raise JudgeRequestError(f"{self.name}: a choice needs distinct options")
        if len(options) > self.limits.max_options:
            raise JudgeRequestError(f"{self.name}: {len(options)} options; at most "
                                    f"{self.limits.max_options} per choice")
        if len(options) == 1:
            return ChoiceResult([1.0], Usage())
        question = {"type": "choice", "name": "choice", "instructions": request.question,
                    "choices": [{"value": label} for label in options]}
        answers, usage = await self._decide(request.context, [question])
        return ChoiceResult(self._choice_values(answers[0], options), usage)

    async def _decide(self, context: str, questions: list[dict[str, Any]]
                      ) -> tuple[list[dict[str, Any]], Usage]:
        body = {"model": self.model, "input": context, "questions": questions}
        payload, seconds = await self.client.post_json("/decisions", body)
        answers = _answers(payload, questions, self.name)
        estimate = estimate_tokens(context) + sum(estimate_tokens(str(q)) for q in questions)
        usage = make_usage(payload.get("usage"), estimate, seconds,
                           self.price_per_million_input, self.name)
        return answers, usage

    def _choice_values(self, answer: dict[str, Any], options: list[str]) -> list[float]:
        entries = answer.get("probabilities")
        if not isinstance(entries, list):
            raise JudgeProtocolError(f"{self.name}: the choice answer has no probabilities list")
        found: dict[str, float] = {}
        for entry in entries:
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(value, str) or value not in options or value in found:
                raise JudgeProtocolError(f"{self.name}: unexpected choice value {value!r}")
            found[value] = _probability(entry.get("probability"), value, self.name)
        if len(found) != len(options):
            missing = [o for o in options if o not in found][:3]
            raise JudgeProtocolError(f"{self.name}: no probability for options {missing}")
        values = [found[o] for o in options]
        return check_choice(values, len(options), self.name, tol=CHOICE_TOLERANCE)

    async def aclose(self) -> None:
        await self.client.aclose()


def _answers(payload: Any, questions: list[dict[str, Any]], who: str) -> list[dict[str, Any]]:
    answers = payload.get("answers") if isinstance(payload, dict) else None
    if not isinstance(answers, list) or len(answers) != len(questions):
        count = len(answers) if isinstance(answers, list) else "no"
        raise JudgeProtocolError(f"{who}: {count} answers for {len(questions)} questions")
    for answer, question in zip(answers, questions, strict=True):
        _check_answer(answer, question, who)
    return answers


def _check_answer(answer: Any, question: dict[str, Any], who: str) -> None:
    if not isinstance(answer, dict):
        raise JudgeProtocolError(f"{who}: answer to {question['name']!r} is not an object")
    name = answer.get("name")
    if name is not None and name != question["name"]:
        raise JudgeProtocolError(f"{who}: answer {name!r} came where {question['name']!r} was due")
    if answer.get("type") == "refusal":
        raise JudgeRequestError(f"{who}: the model refused to answer question {question['name']!r}")
    if answer.get("type") != question["type"]:
        raise JudgeProtocolError(f"{who}: answer to {question['name']!r} has type "
                                 f"{answer.get('type')!r}, not {question['type']!r}")


def _probability(value: Any, where: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeProtocolError(f"{who}: {where!r} has probability {value!r}")
    return float(value)


def openai_judge(model: str, **options: Any) -> OpenAIDecisionsJudge:
    """``openai:gpt-6-luna``; options: api_key, base_url, concurrency, timeout, deadline, ..."""
    if not model:
        raise JudgeConfigError("openai: name the model, e.g. openai:gpt-6-luna")
    who = f"openai:{model}"
    given = HttpJudgeOptions.parse(options, who)
    key = given.api_key or os.environ.get("OPENAI_API_KEY", "").strip()
    if not key:
        raise JudgeConfigError(f"{who}: no API key: set the environment variable OPENAI_API_KEY "
                               "(or pass api_key=...)")
    base_url = given.base_url or os.environ.get("OPENAI_BASE_URL", "").strip() or OPENAI_BASE_URL
    client = HttpClient(base_url, headers={"Authorization": f"Bearer {key}"},
                        policy=given.policy(), concurrency=given.concurrency, who=who)
    return OpenAIDecisionsJudge(model, client, limits=given.limits(OPENAI_LIMITS),
                                price_per_million_input=given.price(OPENAI_PRICE_PER_MILLION_INPUT))
