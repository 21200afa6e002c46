"""decisionrag: retriever-free retrieval by navigating a corpus tree with a decision model.

>>> from decisionrag import Navigator, Tree, build_tree, load_judge
>>> build_tree(["docs/"], "docs.tree")
>>> navigator = Navigator(Tree.open("docs.tree"), load_judge("embedded"), preset="auto")
>>> for hit in navigator.retrieve("How do I rotate the API keys?").hits:
...     print(hit.score, " > ".join(hit.path), hit.node.text)
"""

from ._answer import (
    Answer,
    AnswerEvent,
    Citation,
    OpenAICompatibleGenerator,
    aanswer,
    answer,
    astream_answer,
    load_generator,
    stream_answer,
)
from ._app import Navigator, build_tree, evaluate
from ._build import BuildReport
from ._client import Client, RemoteAnswer, RemoteAnswerEvent, RemoteCitation, RemoteHit, RemoteResult
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
    Limits,
    ScriptedJudge,
    SimulatedJudge,
    Usage,
    load_judge,
)
from ._judges._cache import CachedJudge
from ._judges._embedded import EmbeddedJudge
from ._judges._local import LocalJudge
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
    StageTrace,
    Trace,
    get_preset,
)
from ._query import Query, Turn
from ._retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from ._tree import DocumentSpec, Node, NodeKind, PassageSpec, Tree, TreeWriter
from ._version import __version__

__all__ = [
    "PRESET_NAMES",
    "Answer",
    "AnswerError",
    "AnswerEvent",
    "BM25Retriever",
    "BinaryRequest",
    "BinaryResult",
    "BuildReport",
    "CachedJudge",
    "Candidate",
    "ChoiceRequest",
    "ChoiceResult",
    "ChoiceSettings",
    "Citation",
    "Client",
    "ClusterReport",
    "Conversation",
    "DeadlineExceeded",
    "DecisionRAGError",
    "DenseRetriever",
    "DocumentSpec",
    "EmbeddedJudge",
    "EvalSettings",
    "HeadingSettings",
    "Hit",
    "HybridRetriever",
    "InputError",
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeProtocolError",
    "JudgeRequestError",
    "JudgeUnavailable",
    "Limits",
    "LocalJudge",
    "MissingDependency",
    "NavigationError",
    "Navigator",
    "Node",
    "NodeKind",
    "NotepadSettings",
    "OpenAICompatibleGenerator",
    "PassageSpec",
    "Preset",
    "Query",
    "QueryDeadline",
    "RecoverySettings",
    "RemoteAnswer",
    "RemoteAnswerEvent",
    "RemoteCitation",
    "RemoteHit",
    "RemoteResult",
    "Result",
    "Retriever",
    "ScriptedJudge",
    "ServerError",
    "SimulatedJudge",
    "StageSettings",
    "StageTrace",
    "Trace",
    "Tree",
    "TreeFormatError",
    "TreeWriter",
    "Turn",
    "Usage",
    "__version__",
    "aanswer",
    "add_documents",
    "answer",
    "astream_answer",
    "build_tree",
    "cluster_documents",
    "evaluate",
    "get_preset",
    "load_dataset",
    "load_generator",
    "load_judge",
    "paired_bootstrap",
    "rebalance",
    "stream_answer",
]
