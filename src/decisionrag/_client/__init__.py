"""`decisionrag.Client`: the Python client of `decisionrag serve` (see `_client`)."""

from ._client import Client
from ._results import (
    RemoteAnswer,
    RemoteAnswerEvent,
    RemoteCitation,
    RemoteGenerationUsage,
    RemoteHit,
    RemoteResult,
)

__all__ = ["Client", "RemoteAnswer", "RemoteAnswerEvent", "RemoteCitation", "RemoteGenerationUsage",
           "RemoteHit", "RemoteResult"]
