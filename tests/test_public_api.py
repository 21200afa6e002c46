"""The public API is exactly `decisionrag.__all__`; changing it is a deliberate act."""

from __future__ import annotations

import subprocess
import sys

import decisionrag

EXPECTED = {
    "PRESET_NAMES", "BinaryRequest", "BinaryResult", "BuildReport", "CachedJudge", "Candidate",
    "ChoiceRequest", "ChoiceResult", "ChoiceSettings", "Conversation", "DecisionRAGError",
    "DocumentSpec", "EmbeddedJudge", "HeadingSettings", "Hit", "InputError", "Judge",
    "JudgeConfigError", "JudgeError", "JudgeProtocolError", "JudgeRequestError", "JudgeUnavailable",
    "Limits", "LocalJudge", "MissingDependency", "NavigationError", "Navigator", "Node", "NodeKind",
    "NotepadSettings", "PassageSpec", "Preset", "Query", "Result", "Retriever", "ScriptedJudge",
    "SimulatedJudge", "StageSettings", "StageTrace", "Trace", "Tree", "TreeFormatError", "TreeWriter",
    "Turn", "Usage", "__version__", "build_tree", "get_preset", "load_judge",
    "BM25Retriever", "DenseRetriever", "ClusterReport", "EvalSettings", "add_documents",
    "cluster_documents", "evaluate", "load_dataset", "paired_bootstrap", "rebalance",
    # answers with citations (#15)
    "Answer", "AnswerError", "AnswerEvent", "Citation", "OpenAICompatibleGenerator", "aanswer", "answer",
    "astream_answer", "load_generator", "stream_answer",
    "DeadlineExceeded", "QueryDeadline",  # issue 16: bounded time
    "Client", "ServerError",
    "RemoteAnswer", "RemoteAnswerEvent", "RemoteCitation", "RemoteHit", "RemoteResult",  # Client.answer
    "HybridRetriever", "RecoverySettings",  # issue 11: the fair baseline, recovery from pruning
}


def test_all_is_pinned() -> None:
    assert set(decisionrag.__all__) == EXPECTED
    assert len(decisionrag.__all__) == len(set(decisionrag.__all__))


def test_every_name_exists() -> None:
    for name in decisionrag.__all__:
        assert hasattr(decisionrag, name), name


def test_exception_tree() -> None:
    assert issubclass(decisionrag.InputError, decisionrag.DecisionRAGError)
    assert issubclass(decisionrag.TreeFormatError, decisionrag.InputError)
    for error in (decisionrag.JudgeConfigError, decisionrag.JudgeRequestError,
                  decisionrag.JudgeUnavailable, decisionrag.JudgeProtocolError):
        assert issubclass(error, decisionrag.JudgeError)
    assert issubclass(decisionrag.MissingDependency, ImportError)
    assert issubclass(decisionrag.AnswerError, decisionrag.DecisionRAGError)
    assert issubclass(decisionrag.DeadlineExceeded, decisionrag.JudgeUnavailable)
    assert issubclass(decisionrag.ServerError, decisionrag.DecisionRAGError)


def test_import_is_light() -> None:
    """Importing the package must not pull torch, transformers or sentence-transformers."""
    code = ("import sys, decisionrag; heavy = [m for m in ('torch', 'transformers', "
            "'sentence_transformers', 'sklearn', 'fastapi', 'uvicorn', 'mcp') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
