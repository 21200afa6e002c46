"""decisionrag judges as LangChain decision models (``langchain_core.decisions``).

`langchain_core.decisions` (langchain-core >= 1.8) asks typed questions about a state:
``Noul`` (P(yes)), ``Choice`` (a distribution over labels), ``Score`` (an ordered rubric)
and ``Box`` (a location in an image). `DecisionRAGDecisionModel` answers all ``Noul``
questions of a request with one binary request (the state as the shared context), each
``Choice`` with a choice request, and each ``Score`` as a choice over its levels (expected
level = the score; confidence = 1 - H(p)/log K, as llm2jev defines it). ``Box`` needs an
image model: refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.decisions import (
    BaseDecisionModel,
    Choice,
    ChoiceAnswer,
    ClassifierResponse,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
)
from langchain_core.messages import BaseMessage, UsageMetadata
from pydantic import ConfigDict, PrivateAttr

from .._judges import BinaryRequest, Candidate, ChoiceRequest, Judge
from .._judges import Usage as JudgeUsage
from .._sync import run_sync


class DecisionRAGDecisionModel(BaseDecisionModel):
    """A decisionrag judge (an instance or a judge id) as a LangChain decision model.

    >>> model = DecisionRAGDecisionModel(judge="embedded")
    >>> model.invoke({"state": "I was charged twice.",
    ...               "questions": {"refund": Noul(instructions="Is this about a refund?")}})
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    judge: Any = "embedded"
    model: str = ""

    _judge: Judge | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        from .._judges import load_judge

        self._judge = self.judge if isinstance(self.judge, Judge) else load_judge(self.judge)
        if not self.model:
            self.model = self._judge.name

    @property
    def _provider(self) -> str:
        return "decisionrag"

    @property
    def wrapped(self) -> Judge:
        assert self._judge is not None
        return self._judge

    def _classify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        return run_sync(self._aclassify(state, questions))

    async def _aclassify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        if not questions:
            raise ValueError("a decision request needs at least one question")
        context = render_state(state)
        answers: dict[str, Any] = {}
        usage = JudgeUsage()
        nouls = {qid: q for qid, q in questions.items() if isinstance(q, Noul)}
        if nouls:
            result = await self.wrapped.binary(_noul_request(context, nouls))
            usage = usage + result.usage
            for qid, p in zip(nouls, result.probabilities, strict=True):
                answers[qid] = NoulAnswer(type="noul", noul=p)
        for qid, question in questions.items():
            if isinstance(question, Noul):
                continue
            if isinstance(question, Choice):
                answers[qid], used = await self._choice(context, question)
            elif isinstance(question, Score):
                answers[qid], used = await self._score(context, question)
            else:
                raise ValueError(f"{self.model}: question {qid!r} of type "
                                 f"{getattr(question, 'type', '?')!r} is not supported "
                                 "(noul, choice and score are)")
            usage = usage + used
        ordered = {qid: answers[qid] for qid in questions}
        return ClassifierResponse(model=self.model, answers=ordered,
                                  usage=UsageMetadata(input_tokens=usage.input_tokens,
                                                      output_tokens=usage.output_tokens,
                                                      total_tokens=usage.input_tokens + usage.output_tokens))

    async def _choice(self, context: str, question: Choice) -> tuple[ChoiceAnswer, JudgeUsage]:
        labels = list(question.criteria)
        texts = [_content(question.criteria[label]) or label for label in labels]
        result = await self.wrapped.choice(_choice_request(context, question.instructions, labels, texts))
        probabilities = dict(zip(labels, result.probabilities, strict=True))
        return ChoiceAnswer(type="choice", choice=labels[result.choice], probabilities=probabilities,
                            confidence=confidence(result.probabilities)), result.usage

    async def _score(self, context: str, question: Score) -> tuple[ScoreAnswer, JudgeUsage]:
        levels = [str(i) for i in range(len(question.criteria))]
        texts = [f"{i}: {_content(level)}" for i, level in enumerate(question.criteria)]
        result = await self.wrapped.choice(_choice_request(context, question.instructions, levels, texts))
        p = result.probabilities
        return ScoreAnswer(type="score", score=sum(i * v for i, v in enumerate(p)),
                           legend=dict(enumerate(question.criteria)),
                           probabilities=dict(enumerate(p)), confidence=confidence(p)), result.usage


def _noul_request(context: str, nouls: Mapping[str, Noul]) -> BinaryRequest:
    texts = [_content(q.instructions) for q in nouls.values()]
    candidates = tuple(Candidate(id=qid, text=text) for qid, text in zip(nouls, texts, strict=True))
    return BinaryRequest(context=context, questions=tuple(texts), query=context, candidates=candidates)


def _choice_request(context: str, instructions: Any, labels: Sequence[str],
                    texts: Sequence[str]) -> ChoiceRequest:
    options = "\n".join(f"{label}: {text}" if text != label else label
                        for label, text in zip(labels, texts, strict=True))
    candidates = tuple(Candidate(id=label, text=text) for label, text in zip(labels, texts, strict=True))
    return ChoiceRequest(context=f"{context}\n\nOptions:\n{options}", question=_content(instructions),
                         options=tuple(labels), query=context, candidates=candidates)


def confidence(probabilities: Sequence[float]) -> float:
    """1 - H(p)/log K: 1 for a certain answer, 0 for a uniform one."""
    if len(probabilities) < 2:
        return 1.0
    entropy = -sum(p * math.log(p) for p in probabilities if p > 0)
    return min(1.0, max(0.0, 1.0 - entropy / math.log(len(probabilities))))


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_state(state: Any) -> str:
    """A state as the text a decisionrag judge reads: strings as they are, messages as
    ``role: text`` lines, anything else as JSON."""
    if isinstance(state, str):
        return state
    if isinstance(state, BaseMessage):
        return f"{state.type}: {state.text}"
    if isinstance(state, Sequence) and all(isinstance(m, BaseMessage) for m in state):
        return "\n".join(render_state(m) for m in state)
    return json.dumps(state, ensure_ascii=False, default=_message_json)


def _message_json(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return {"role": value.type, "content": value.text}
    raise TypeError(f"cannot put a {type(value).__name__} in a decision state")
