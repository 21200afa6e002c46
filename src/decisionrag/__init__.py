"""decisionrag: retriever-free retrieval by navigating a corpus tree with a decision model.

>>> from decisionrag import Navigator, build_tree
>>> build_tree(["docs/"], "docs.tree")
>>> navigator = Navigator("docs.tree")        # the offline embedded judge, the auto preset
>>> for hit in navigator.retrieve("How do I rotate the API keys?").hits:
...     print(hit.score, " > ".join(hit.path), hit.node.text)

The public API is `__all__` below (pinned by a test); every module whose name starts with
an underscore is private.
"""

from ._answer import (
    Answer,
    AnswerEvent,
    Citation,
    aanswer,
    answer,
    astream_answer,
    load_generator,
    stream_answer,
)
from ._app import Navigator, build_tree, evaluate
from ._build import BuildReport
from ._client import Client
from ._cluster import ClusterReport, add_documents, cluster_documents, rebalance
from ._deadline import QueryDeadline
from ._errors import (
    AnswerError,
    DeadlineExceeded,
    DecisionRAGError,
    InputError,
    JudgeConfigError,
    JudgeError,
    JudgeProtocolError,
    JudgeRequestError,
    JudgeUnavailable,
    MissingDependency,
    NavigationError,
    ServerError,
    TreeFormatError,
)
from ._eval import EvalSettings, load_dataset, paired_bootstrap
from ._judges import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    JudgeWrapper,
    Limits,
    Reads,
    Usage,
    VectorSpace,
    load_judge,
)
from ._judges._backends import Backend, register_backend
from ._judges._options import JudgeOptions
from ._navigate import (
    PRESET_NAMES,
    ChoiceSettings,
    Conversation,
    HeadingSettings,
    Hit,
    NotepadSettings,
    Preset,
    RecoverySettings,
    Result,
    Retriever,
    StageSettings,
    get_preset,
)
from ._query import Query, Turn
from ._tree import DocumentSpec, Node, NodeKind, PassageSpec, Tree, TreeWriter
from ._version import __version__
from ._walkpage import walk_page

__all__ = [  # noqa: RUF022 - grouped by what a user does, not sorted
    # trees and building them
    "BuildReport", "DocumentSpec", "Node", "NodeKind", "PassageSpec", "Tree", "TreeWriter",
    "build_tree",
    # topic groups for flat corpora
    "ClusterReport", "add_documents", "cluster_documents", "rebalance",
    # navigation
    "PRESET_NAMES", "ChoiceSettings", "Conversation", "HeadingSettings", "Hit", "Navigator",
    "NotepadSettings", "Preset", "Query", "QueryDeadline", "RecoverySettings", "Result",
    "Retriever", "StageSettings", "Turn", "get_preset", "walk_page",
    # judges, and what a judge plugin implements and registers
    "Backend", "BinaryRequest", "BinaryResult", "Candidate", "ChoiceRequest", "ChoiceResult",
    "Judge", "JudgeOptions", "JudgeWrapper", "Limits", "Reads", "Usage", "VectorSpace",
    "load_judge", "register_backend",
    # answers with citations
    "Answer", "AnswerEvent", "Citation", "aanswer", "answer", "astream_answer",
    "load_generator", "stream_answer",
    # the service's client
    "Client",
    # evaluation
    "EvalSettings", "evaluate", "load_dataset", "paired_bootstrap",
    # the exception tree
    "AnswerError", "DeadlineExceeded", "DecisionRAGError", "InputError", "JudgeConfigError",
    "JudgeError", "JudgeProtocolError", "JudgeRequestError", "JudgeUnavailable",
    "MissingDependency", "NavigationError", "ServerError", "TreeFormatError",
    "__version__",
]
