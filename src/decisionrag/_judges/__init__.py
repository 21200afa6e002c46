"""Decision models behind one contract."""

from ._base import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    Usage,
)
from ._registry import load_judge, parse_judge_id
from ._testing import ScriptedJudge, SimulatedJudge

__all__ = [
    "BinaryRequest",
    "BinaryResult",
    "Candidate",
    "ChoiceRequest",
    "ChoiceResult",
    "Judge",
    "Limits",
    "ScriptedJudge",
    "SimulatedJudge",
    "Usage",
    "load_judge",
    "parse_judge_id",
]
