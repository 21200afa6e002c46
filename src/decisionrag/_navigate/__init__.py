"""Navigation: walking a corpus tree with a judge (the paper's Algorithm 1, generalised)."""

from ._config import (
    PRESET_NAMES,
    PRESETS,
    ChoiceSettings,
    HeadingSettings,
    NotepadSettings,
    Preset,
    RecoverySettings,
    StageSettings,
    auto_preset,
    get_preset,
)
from ._conversation import Conversation
from ._navigator import Navigator
from ._result import Hit, Location, Result, Stage, StageTrace, Trace
from ._retriever import Retriever

__all__ = [
    "PRESETS",
    "PRESET_NAMES",
    "ChoiceSettings",
    "Conversation",
    "HeadingSettings",
    "Hit",
    "Location",
    "Navigator",
    "NotepadSettings",
    "Preset",
    "RecoverySettings",
    "Result",
    "Retriever",
    "Stage",
    "StageSettings",
    "StageTrace",
    "Trace",
    "auto_preset",
    "get_preset",
]
