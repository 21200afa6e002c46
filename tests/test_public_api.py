"""The public API is exactly `decisionrag.__all__`; changing it is a deliberate act."""

from __future__ import annotations

import subprocess
import sys

import decisionrag

EXPECTED = {
    # trees and building them
    "BuildReport", "DocumentSpec", "Node", "NodeKind", "PassageSpec", "Tree", "TreeWriter",
    "build_tree",
    # topic groups for flat corpora
    "ClusterReport", "add_documents", "cluster_documents", "rebalance",
    # navigation (issue 22: the assembled Navigator; walk_page replaces Result.to_html)
    "PRESET_NAMES", "ChoiceSettings", "Conversation", "HeadingSettings", "Hit", "Navigator",
    "NotepadSettings", "Preset", "Query", "QueryDeadline", "RecoverySettings", "Result",
    "Retriever", "StageSettings", "Turn", "get_preset", "walk_page",
    # judges and what a plugin implements and registers (issue 22: Backend, JudgeOptions,
    # register_backend, JudgeWrapper, Reads, VectorSpace public; test doubles not)
    "Backend", "BinaryRequest", "BinaryResult", "Candidate", "ChoiceRequest", "ChoiceResult",
    "Judge", "JudgeOptions", "JudgeWrapper", "Limits", "Reads", "Usage", "VectorSpace",
    "load_judge", "register_backend",
    # answers with citations
    "Answer", "AnswerEvent", "Citation", "aanswer", "answer", "astream_answer",
    "load_generator", "stream_answer",
    # the service's client (its result types are reached through it)
    "Client",
    # evaluation
    "EvalSettings", "evaluate", "load_dataset", "paired_bootstrap",
    # the exception tree
    "AnswerError", "DeadlineExceeded", "DecisionRAGError", "InputError", "JudgeConfigError",
    "JudgeError", "JudgeProtocolError", "JudgeRequestError", "JudgeUnavailable",
    "MissingDependency", "NavigationError", "ServerError", "TreeFormatError",
    "__version__",
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
