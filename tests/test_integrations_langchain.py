"""LangChain: the retriever passes LangChain's own standard suite over a shared-dataset tree;
decision models work in both directions."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import require_module

require_module("langchain_core.decisions")
require_module("langchain_tests")

from langchain_core.decisions import (
    BaseDecisionModel,
    Choice,
    ChoiceAnswer,
    ClassifierResponse,
    Noul,
    NoulAnswer,
    Score,
)
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import Field

from decisionrag import (
    BinaryRequest,
    Candidate,
    ChoiceRequest,
    JudgeConfigError,
    JudgeProtocolError,
    JudgeUnavailable,
    Limits,
    Navigator,
    Tree,
    load_judge,
)
from decisionrag._judges import ScriptedJudge
from decisionrag.integrations.langchain import (
    DecisionRAGDecisionModel,
    DecisionRAGRetriever,
    LangChainJudge,
    judge_from_langchain,
)

QUERY = "What did the Normans do in England?"


@pytest.fixture(scope="module")
def embedded() -> Any:
    require_module("sentence_transformers")
    return load_judge("embedded")


class TestStandardRetrieverSuite(RetrieversIntegrationTests):
    """LangChain's own retriever tests, unmodified, over the xquad-en tree and the embedded judge."""

    @pytest.fixture(autouse=True)
    def _over(self, xquad_tree: Path, embedded: Any) -> None:
        self.params = {"tree": str(xquad_tree), "judge": embedded}

    @property
    def retriever_constructor(self) -> type[DecisionRAGRetriever]:
        return DecisionRAGRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return self.params

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_documents_carry_id_doc_id_score_and_path(xquad_tree: Path) -> None:
    retriever = DecisionRAGRetriever(tree=str(xquad_tree), judge=ScriptedJudge(), k=3)
    docs = retriever.invoke("Normans Normandy Rollo")
    assert len(docs) == 3
    with Tree.open(xquad_tree) as tree:
        for doc in docs:
            node = tree.node(doc.metadata["id"])
            assert doc.id == node.key and doc.page_content == node.text
            assert doc.metadata["doc_id"] == tree.node(node.doc).key
            assert doc.metadata["path"] == [tree.node(node.doc).title]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and 0 <= scores[-1] <= scores[0] <= 1


class ThreadRecordingJudge(ScriptedJudge):
    threads: list[int]

    async def binary(self, request: BinaryRequest) -> Any:
        self.threads.append(threading.get_ident())
        return await super().binary(request)


async def test_async_path_is_native_and_equals_the_sync_one(xquad_tree: Path) -> None:
    judge = ThreadRecordingJudge()
    judge.threads = []
    retriever = DecisionRAGRetriever(tree=str(xquad_tree), judge=judge, k=5)
    sync_docs = retriever.invoke(QUERY)
    judge.threads.clear()
    async_docs = await retriever.ainvoke(QUERY)
    assert [d.id for d in async_docs] == [d.id for d in sync_docs]
    # native: the judge ran on this event loop's thread (LangChain's fallback would run the
    # sync method in an executor thread)
    assert judge.threads and set(judge.threads) == {threading.get_ident()}


def test_bad_k_and_unknown_arguments_are_clear_errors(xquad_tree: Path) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        DecisionRAGRetriever(tree=str(xquad_tree), k=0)
    retriever = DecisionRAGRetriever(tree=str(xquad_tree), judge=ScriptedJudge())
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retriever.invoke(QUERY, k="3")
    with pytest.raises(TypeError, match="unknown arguments"):
        retriever.invoke(QUERY, top_n=3)
    with pytest.raises(ValueError, match="tree="):
        DecisionRAGRetriever()


def test_importing_decisionrag_loads_no_framework() -> None:
    code = ("import sys, decisionrag, decisionrag.integrations; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain_core', 'langchain', 'llama_index', 'langsmith')); print(bad); "
            "assert not bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- decision models, both directions


class KeywordDecisionModel(BaseDecisionModel):
    """A fake provider in the shape langchain-core's own docs give (langchain-core 1.8 ships
    no fake decision model): P(yes) = share of the question's words in the state."""

    model: str = "keyword-fake"
    fail: bool = False
    wrong_type: bool = False
    seen: list[Any] = Field(default_factory=list)

    @property
    def _provider(self) -> str:
        return "fake"

    def _classify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        if self.fail:
            raise ConnectionError("provider down")
        self.seen.append((state, questions))
        text = str(state).lower()
        answers: dict[str, Any] = {}
        for qid, q in questions.items():
            if isinstance(q, Noul) and not self.wrong_type:
                words = [w for w in re.findall(r"\w+", str(q.instructions).lower()) if len(w) > 3]
                share = sum(w in text for w in words) / max(1, len(words))
                answers[qid] = NoulAnswer(type="noul", noul=share)
            else:
                labels = list(q.criteria) if isinstance(q, Choice) else ["a", "b"]
                weights = [1.0 + (label.lower() in text) for label in labels]
                total = sum(weights)
                probs = {label: w / total for label, w in zip(labels, weights, strict=True)}
                answers[qid] = ChoiceAnswer(type="choice", choice=max(probs, key=probs.__getitem__),
                                            probabilities=probs, confidence=0.5)
        return ClassifierResponse(model=self.model, answers=answers,
                                  usage={"input_tokens": len(text) // 4, "output_tokens": 0})


async def test_a_langchain_decision_model_is_a_judge() -> None:
    model = KeywordDecisionModel()
    judge = load_judge(model)
    assert isinstance(judge, LangChainJudge)
    request = BinaryRequest(context="The Normans conquered England in 1066.",
                            questions=("normans conquered england?", "volcanoes erupted?"))
    result = await judge.binary(request)
    assert result.probabilities == [1.0, 0.0]
    state, questions = model.seen[-1]
    assert state == request.context and list(questions) == ["q0", "q1"]
    assert questions["q0"].instructions == "normans conquered england?"
    assert result.usage.requests == 1 and result.usage.input_tokens == len(request.context) // 4

    choice = await judge.choice(ChoiceRequest(context="Paragraph 2 is about England",
                                              question="Which?", options=("Paragraph 1", "Paragraph 2")))
    assert choice.probabilities == pytest.approx([1 / 3, 2 / 3]) and choice.choice == 1


async def test_max_questions_splits_a_binary_request_over_the_same_state() -> None:
    model = KeywordDecisionModel()
    judge = judge_from_langchain(model, max_questions=2)
    questions = tuple(f"word{i} here" for i in range(5))
    result = await judge.binary(BinaryRequest(context="word3 is here", questions=questions))
    assert len(result.probabilities) == 5 and result.usage.requests == 3
    assert {state for state, _ in model.seen} == {"word3 is here"}
    assert [len(q) for _, q in model.seen] == [2, 2, 1]


def test_langchain_judge_options_are_typed_and_unknown_ones_name_the_known() -> None:
    model = KeywordDecisionModel()
    judge = judge_from_langchain(model, max_tokens="900", name="kw", price_per_million_input=1.0)
    assert judge.limits == Limits(max_tokens=900) and judge.name == "kw"
    assert judge.price_per_million_input == 1.0
    assert judge_from_langchain(model, limits=Limits(max_options=3)).limits == Limits(max_options=3)
    with pytest.raises(JudgeConfigError, match=r"unknown options \['max_question'\]; "
                                                r"known options: limits, name, .*max_questions"):
        judge_from_langchain(model, max_question=2)
    with pytest.raises(JudgeConfigError, match="unknown options"):
        load_judge(model, temperature=0.5)
    with pytest.raises(JudgeConfigError, match="not both"):
        judge_from_langchain(model, limits=Limits(), max_questions=2)
    with pytest.raises(JudgeConfigError, match="max_questions='two' is not a valid int"):
        judge_from_langchain(model, max_questions="two")


async def test_provider_failures_and_wrong_answers_become_judge_errors() -> None:
    with pytest.raises(JudgeUnavailable, match="provider down"):
        await load_judge(KeywordDecisionModel(fail=True)).binary(BinaryRequest("s", ("q?",)))
    with pytest.raises(JudgeProtocolError, match="asked type"):
        await load_judge(KeywordDecisionModel(wrong_type=True)).binary(BinaryRequest("s", ("q?",)))


def test_a_langchain_model_walks_a_tree(xquad_tree: Path) -> None:
    judge = load_judge(KeywordDecisionModel())
    with Tree.open(xquad_tree) as tree:
        result = Navigator(tree, judge, "auto").retrieve("Normans", k=3)
    assert len(result.hits) == 3 and result.usage.requests >= 2


def test_our_judge_is_a_langchain_decision_model() -> None:
    scripted = ScriptedJudge({"refund": 0.9, "urgent": 0.2},
                             choice_scores={"billing": 3.0, "technical": 1.0, "0": 1, "1": 2, "2": 1})
    model = DecisionRAGDecisionModel(judge=scripted)
    assert model.model == "scripted"
    response = model.invoke({
        "state": [HumanMessage("I was charged twice."), AIMessage("Sorry about that.")],
        "questions": {
            "refund": Noul(instructions="Does the user want a refund?"),
            "team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": None}),
            "urgent": Noul(instructions="Is it urgent?"),
            "level": Score(instructions="How upset?", criteria=["calm", "annoyed", "angry"]),
        },
    })
    assert list(response.answers) == ["refund", "team", "urgent", "level"]
    assert response.nouls["refund"].noul == 0.9 and response.nouls["urgent"].noul == 0.2
    team = response.choices["team"]
    assert team.choice == "billing"
    assert team.probabilities == pytest.approx({"billing": 0.75, "technical": 0.25})
    assert 0 < team.confidence < 1
    level = response.scores["level"]
    assert level.score == pytest.approx(1.0) and level.legend == {0: "calm", 1: "annoyed", 2: "angry"}
    binary = scripted.binary_calls[0]  # both nouls in one request, the state as its context
    assert binary.context == "human: I was charged twice.\nai: Sorry about that."
    assert [c.id for c in binary.candidates] == ["refund", "urgent"]
    assert response.usage is not None and response.usage["input_tokens"] > 0


async def test_round_trip_ours_to_theirs_to_ours_keeps_the_numbers() -> None:
    scripted = ScriptedJudge({"a": 0.8, "b": 0.1})
    back = judge_from_langchain(DecisionRAGDecisionModel(judge=scripted))
    request = BinaryRequest("ctx", ("about a?", "about b?"), query="ctx",
                            candidates=(Candidate("a", "A"), Candidate("b", "B")))
    direct = await scripted.binary(request)
    # through LangChain the candidates are the questions (ids q0, q1): script those
    scripted.scores = {"q0": 0.8, "q1": 0.1}
    wrapped = await back.binary(request)
    assert wrapped.probabilities == direct.probabilities == [0.8, 0.1]
    assert isinstance(await DecisionRAGDecisionModel(judge=scripted).ainvoke(
        {"state": "x", "questions": {"q": Noul(instructions="y")}}), ClassifierResponse)


def test_documents_are_langchain_documents(xquad_tree: Path) -> None:
    docs = DecisionRAGRetriever(tree=str(xquad_tree), judge="scripted", k=2).invoke(QUERY)
    assert all(isinstance(d, Document) for d in docs) and len(docs) == 2


def test_batch_and_abatch_share_one_navigator_safely(xquad_tree: Path) -> None:
    retriever = DecisionRAGRetriever(tree=str(xquad_tree), judge=ScriptedJudge(), k=3)
    queries = ["Normans England", "Kenya capital", "Faust author", "steam engine", "oxygen"] * 2
    one_by_one = [[d.id for d in retriever.invoke(q)] for q in queries]
    threaded = retriever.batch(queries, config={"max_concurrency": 5})  # LangChain's thread pool
    assert [[d.id for d in docs] for docs in threaded] == one_by_one
