"""LangChain decision models (``langchain_core.decisions.BaseDecisionModel``, langchain-core
>= 1.8) as decisionrag judges: ``load_judge(model)`` or `judge_from_langchain`.

A binary request becomes one ``Noul`` per candidate question over the shared context (ids
``q0``, ``q1``, ... in candidate order); a choice request one ``Choice`` whose criteria are
the option labels (the candidates are described in the context). Answers are checked like
any judge's; the model's own exceptions become `JudgeUnavailable` (``raise ... from``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .._errors import (
    JudgeConfigError,
    JudgeError,
    JudgeProtocolError,
    JudgeRequestError,
    JudgeUnavailable,
    missing_extra,
)
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
from ._options import JudgeOptions

try:
    from langchain_core.decisions import BaseDecisionModel, Choice, ClassifierResponse, Noul
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain-core", "langchain") from exc

CHOICE_ID = "choice"
_LIMIT_NAMES = ("max_questions", "max_options", "max_tokens")


class LangChainJudge(Judge):
    """Any `BaseDecisionModel` as a decisionrag judge (``load_judge(model)`` builds one).

    `limits` default to none (``max_questions`` splits a binary request into several model
    calls over the same state when set); `price_per_million_input` gives usage a cost.
    """

    def __init__(self, model: BaseDecisionModel, *, limits: Limits | None = None,
                 price_per_million_input: float | None = None, name: str | None = None) -> None:
        if not isinstance(model, BaseDecisionModel):
            raise TypeError(f"expected a langchain_core BaseDecisionModel, got {type(model).__name__}")
        self.model = model
        self.limits = limits or Limits()
        self.price_per_million_input = price_per_million_input
        self.name = name or f"langchain:{type(model).__name__}:{model.model}"

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        questions = list(request.questions)
        if not questions:
            return BinaryResult([], Usage())
        size = self.limits.max_questions or len(questions)
        values: list[float] = []
        usage = Usage()
        for start in range(0, len(questions), size):
            part = questions[start:start + size]
            asked = {f"q{i}": Noul(instructions=q) for i, q in enumerate(part)}
            response, used = await self._ask(request.context, asked)
            nouls = response.nouls
            _check_ids(response, asked, nouls, self.name)
            values.extend(nouls[qid].noul for qid in asked)
            usage = usage + used
        return BinaryResult(check_binary(values, len(questions), self.name), usage)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        options = list(request.options)
        if len(options) == 1:
            return ChoiceResult([1.0], Usage())
        if len(set(options)) != len(options) or len(options) > self.limits.max_options:
            raise JudgeRequestError(f"{self.name}: choice options must be distinct and at most "
                                    f"{self.limits.max_options}")
        asked = {CHOICE_ID: Choice(instructions=request.question, criteria=dict.fromkeys(options))}
        response, usage = await self._ask(request.context, asked)
        choices = response.choices
        _check_ids(response, asked, choices, self.name)
        probabilities = choices[CHOICE_ID].probabilities
        if set(probabilities) != set(options):
            raise JudgeProtocolError(f"{self.name}: choice probabilities are not over the options")
        values = [float(probabilities[o]) for o in options]
        return ChoiceResult(check_choice(values, len(options), self.name, tol=0.05), usage)

    async def _ask(self, state: str, questions: dict[str, Any]) -> tuple[ClassifierResponse, Usage]:
        try:
            response = await self.model.ainvoke({"state": state, "questions": questions})
        except JudgeError:
            raise
        except ValidationError as exc:
            raise JudgeProtocolError(f"{self.name}: the answer does not parse: {exc}") from exc
        except Exception as exc:  # a provider's own error: ours is the one the walk handles
            raise JudgeUnavailable(f"{self.name}: the decision model failed: {exc!r}") from exc
        if not isinstance(response, ClassifierResponse):
            raise JudgeProtocolError(f"{self.name}: returned {type(response).__name__}, "
                                     "not a ClassifierResponse")
        reported = response.usage
        tokens = reported["input_tokens"] if reported else (
            estimate_tokens(state) + sum(estimate_tokens(str(q.instructions)) for q in questions.values()))
        usage = Usage(requests=1, input_tokens=tokens,
                           output_tokens=reported["output_tokens"] if reported else 0,
                           cost_usd=self.cost(tokens))
        return response, usage


def _check_ids(response: ClassifierResponse, asked: Mapping[str, Any],
               typed: Mapping[str, Any], who: str) -> None:
    missing = [qid for qid in asked if qid not in typed]
    if missing:
        kinds = {qid: type(response.answers[qid]).__name__ for qid in missing if qid in response.answers}
        raise JudgeProtocolError(f"{who}: no answer of the asked type for {missing[:3]} "
                                 f"(got {kinds or 'nothing'})")


@dataclasses.dataclass(frozen=True)
class LangChainOptions(JudgeOptions):
    """What `judge_from_langchain` takes: ``limits`` whole, or any of ``max_questions`` /
    ``max_options`` / ``max_tokens`` (the rest left at `Limits`' defaults), not both."""

    limits: Limits | None = None
    name: str | None = None
    price_per_million_input: float | None = None
    max_questions: int | None = None
    max_options: int = Limits().max_options
    max_tokens: int | None = None

    def chosen_limits(self) -> Limits | None:
        given = {name: getattr(self, name) for name in _LIMIT_NAMES if name in self.given}
        if not given:
            return self.limits
        if "limits" in self.given:
            raise JudgeConfigError("judge_from_langchain: give limits= or "
                                   "max_questions=/max_options=/max_tokens=, not both")
        return Limits(**given)


def judge_from_langchain(model: BaseDecisionModel, **options: Any) -> LangChainJudge:
    """A decisionrag judge answered by `model`; options: ``limits``, ``name``,
    ``price_per_million_input``, or ``max_questions`` / ``max_options`` / ``max_tokens``
    (`LangChainOptions`; an unknown one is a `JudgeConfigError` naming the known ones)."""
    given = LangChainOptions.parse(options, "judge_from_langchain")
    return LangChainJudge(model, limits=given.chosen_limits(), name=given.name,
                          price_per_million_input=given.price_per_million_input)
