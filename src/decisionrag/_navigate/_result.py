"""What a retrieval returns: ranked hits, the trace of the walk, and what it cost."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._judges import Usage
from .._query import Query
from .._tree import Node
from ._pages import page_reference


@dataclass(frozen=True, slots=True)
class Location:
    """Another passage of the same text as a hit's (a duplicate collapsed into it): its id,
    its page's id and its path in the tree."""

    key: str
    doc_key: str
    path: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.key, "doc_id": self.doc_key, "path": list(self.path)}


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked passage. `score` ranks it (binary P(yes), times its page's when scores
    propagate); `binary` is its own P(yes); `choice` its multiple-choice probability when it
    was on the shortlist. `path` = titles from the top group down to its heading path.
    `metadata` is its document's metadata overlaid with the passage's own (source file, page
    numbers, url, front matter, JSONL ``metadata``); an empty dict when there is none.
    `also_at` lists the other passages of the same text, ranked below it and collapsed into
    it (`Preset.collapse_duplicates`), best first."""

    node: Node
    score: float
    binary: float
    choice: float | None
    path: tuple[str, ...]
    doc_key: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    also_at: tuple[Location, ...] = ()

    @property
    def key(self) -> str:
        return self.node.key

    @property
    def page_reference(self) -> str:
        """Where the passage is in its file, as people quote it (see `page_reference`)."""
        return page_reference(self.metadata)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.node.key,
            "doc_id": self.doc_key,
            "score": round(self.score, 6),
            "binary": round(self.binary, 6),
            "choice": None if self.choice is None else round(self.choice, 6),
            "path": list(self.path),
            "text": self.node.text,
            "metadata": dict(self.metadata),
            "also_at": [location.to_dict() for location in self.also_at],
        }


class Stage(str, enum.Enum):
    """The stages of a walk, in the order they run; a trace names its stages by these
    values (group levels numbered from 1: ``group 1``; a rescoring pass adds ``rescore``)."""

    GROUP = "group"
    PAGE = "page"
    RECOVERY = "recovery"
    HEADING = "heading"
    PASSAGE = "passage"
    CHOICE = "choice"

    def at(self, depth: int) -> str:
        """The trace name of this stage at group depth `depth` (from 0): ``group 1``."""
        return f"{self.value} {depth + 1}"

    @staticmethod
    def rescore(name: str) -> str:
        """The trace name of the rescoring pass after the stage named `name`."""
        return f"{name} rescore"


@dataclass(slots=True, init=False)
class StageTrace:
    """One sequential stage of the walk: what was judged, in how many requests, what survived.

    `kept` lists the surviving candidates with their scores, best first; `opened` the nodes
    whose children the next stage judges (empty for the passage and choice stages).
    `seconds` is the wait for the judge; `local_seconds` the work before the requests went
    out (reading the tree, rendering, splitting) since the previous stage's answers.
    `scores` holds every judged candidate's P(yes) (the choice stage: its probabilities) and
    `nodes` the candidates themselves, so that views can show what was pruned and why.
    """

    name: str
    level: int
    n_candidates: int
    candidates: list[str]
    requests: int
    input_tokens: int
    seconds: float
    kept: list[tuple[str, float]]
    opened: list[str]
    titles: dict[str, str]
    local_seconds: float
    _scores: dict[str, float] | Callable[[], dict[str, float]] = field(repr=False, compare=False)
    nodes: list[Node] = field(repr=False)
    filtered: int  # candidates the metadata filters removed before this stage judged
    contexts: int  # the shared contexts (requests before any retry) its candidates were judged in
    unjudged: int  # candidates whose request failed after its retries (a degraded stage)
    errors: list[str]  # why, one line per failed request
    notes: list[str]  # what was truncated, windowed or capped

    def __init__(self, name: str, level: int, n_candidates: int,
                 candidates: list[str] | None = None, requests: int = 0, input_tokens: int = 0,
                 seconds: float = 0.0, kept: list[tuple[str, float]] | None = None,
                 opened: list[str] | None = None, titles: dict[str, str] | None = None,
                 local_seconds: float = 0.0, scores: dict[str, float] | None = None,
                 nodes: list[Node] | None = None, filtered: int = 0, contexts: int = 0,
                 unjudged: int = 0, errors: list[str] | None = None,
                 notes: list[str] | None = None) -> None:
        # (written out: `scores` is a property, its dict made when first read)
        self.name, self.level, self.n_candidates = name, level, n_candidates
        self.candidates = [] if candidates is None else candidates
        self.requests, self.input_tokens, self.seconds = requests, input_tokens, seconds
        self.kept = [] if kept is None else kept
        self.opened = [] if opened is None else opened
        self.titles = {} if titles is None else titles
        self.local_seconds = local_seconds
        self._scores = {} if scores is None else scores
        self.nodes = [] if nodes is None else nodes
        self.filtered, self.contexts, self.unjudged = filtered, contexts, unjudged
        self.errors = [] if errors is None else errors
        self.notes = [] if notes is None else notes

    @property
    def scores(self) -> dict[str, float]:
        """Every judged candidate's P(yes) by key (see the class doc); a page level's made
        when first read (`scores_when_read`)."""
        scores = self._scores
        if not isinstance(scores, dict):
            scores = self._scores = scores()
        return scores

    @scores.setter
    def scores(self, scores: dict[str, float]) -> None:
        self._scores = scores

    def scores_when_read(self, make: Callable[[], dict[str, float]]) -> None:
        """Let `make()` make `scores` when they are first read: a caller that never reads
        them (an evaluation) does not pay for a dict of a page level's thousands of scores."""
        self._scores = make

    @property
    def pruned(self) -> int:
        return self.n_candidates - len(self.kept)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "n_candidates": self.n_candidates,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "seconds": round(self.seconds, 4),
            "local_seconds": round(self.local_seconds, 4),
            "kept": [[key, round(score, 6)] for key, score in self.kept],
            "pruned": self.pruned,
            "filtered": self.filtered,
            "opened": list(self.opened),
            **({"unjudged": self.unjudged, "errors": list(self.errors)} if self.unjudged else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


@dataclass(slots=True)
class Trace:
    """The stages of a walk; `filtered` counts, per stage name, the candidates that metadata
    filters removed before judging (also for a stage left with nothing to judge)."""

    stages: list[StageTrace] = field(default_factory=list)
    filtered: dict[str, int] = field(default_factory=dict)

    @property
    def sequential_stages(self) -> int:
        """Stages that sent requests (each waits for the one before): the latency floor's factor."""
        return sum(1 for stage in self.stages if stage.requests)

    def stage(self, name: str) -> StageTrace:
        """The first stage called `name` (KeyError if the walk had none)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    def to_list(self) -> list[dict[str, Any]]:
        return [stage.to_dict() for stage in self.stages]

    @property
    def degraded(self) -> dict[str, int]:
        """Stages with unjudged candidates and how many: empty when every request succeeded."""
        return {stage.name: stage.unjudged for stage in self.stages if stage.unjudged}


@dataclass(slots=True)
class Result:
    query: Query
    hits: list[Hit]
    trace: Trace
    usage: Usage
    seconds: float

    @property
    def ids(self) -> list[str]:
        return [hit.node.key for hit in self.hits]

    @property
    def degraded(self) -> dict[str, int]:
        """{stage: candidates not judged} where a request failed after its retries and the
        preset let the walk go on (``on_failure="degrade"``); empty for a complete walk."""
        return self.trace.degraded

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query.text,
            "results": [hit.to_dict() for hit in self.hits],
            "trace": self.trace.to_list(),
            "filtered": dict(self.trace.filtered),
            "usage": self.usage.to_dict(),
            "seconds": round(self.seconds, 4),
            **({"degraded": self.degraded} if self.degraded else {}),
        }
