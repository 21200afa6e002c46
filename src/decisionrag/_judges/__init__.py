"""Decision models behind one contract."""

from ._base import (
    BinaryRequest,
    BinaryResult,
    Candidate,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    JudgeWrapper,
    LevelAnswers,
    Limits,
    Reads,
    Usage,
    VectorSpace,
)
from ._registry import judge_options, load_judge, parse_judge_id
from ._testing import ScriptedJudge, SimulatedJudge

__all__ = [
    "BinaryRequest",
    "BinaryResult",
    "Candidate",
    "ChoiceRequest",
    "ChoiceResult",
    "Judge",
    "JudgeWrapper",
    "LevelAnswers",
    "Limits",
    "Reads",
    "ScriptedJudge",
    "SimulatedJudge",
    "Usage",
    "VectorSpace",
    "judge_options",
    "load_judge",
    "parse_judge_id",
]
