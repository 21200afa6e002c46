"""decisionrag: retriever-free retrieval by navigating a corpus tree with a decision model."""

from ._errors import (
    DecisionRAGError,
    InputError,
    JudgeConfigError,
    JudgeError,
    JudgeProtocolError,
    JudgeRequestError,
    JudgeUnavailable,
    MissingDependency,
    NavigationError,
    TreeFormatError,
)
from ._judges import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    ScriptedJudge,
    SimulatedJudge,
    Usage,
    load_judge,
)
from ._tree import DocumentSpec, Node, NodeKind, PassageSpec, Tree, TreeWriter

__version__ = "0.1.0"

__all__ = [
    "BinaryRequest",
    "BinaryResult",
    "Candidate",
    "ChoiceRequest",
    "ChoiceResult",
    "DecisionRAGError",
    "DocumentSpec",
    "InputError",
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeProtocolError",
    "JudgeRequestError",
    "JudgeUnavailable",
    "Limits",
    "MissingDependency",
    "NavigationError",
    "Node",
    "NodeKind",
    "PassageSpec",
    "ScriptedJudge",
    "SimulatedJudge",
    "Tree",
    "TreeFormatError",
    "TreeWriter",
    "Usage",
    "__version__",
    "load_judge",
]
