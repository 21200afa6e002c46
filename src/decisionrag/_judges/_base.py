"""The judge contract: one small async interface every decision model implements.

A judge answers two kinds of requests over one shared context:

* ``binary``: one yes/no question per candidate; returns P(yes) per question, each
  normalised over yes/no only (they need not sum to one);
* ``choice``: one question whose options are candidates; returns a distribution over the
  options that sums to one.

Requests carry both the rendered text (what a language model reads) and the structured
pieces it was rendered from (the query and the candidates' texts), so that judges that do
not read text as a whole (the embedded judge, test doubles) need not parse it back.
Judges know nothing about trees: candidate ids are opaque strings. Requests may also carry
`statistics` about the corpus the candidates come from (the document frequencies judges that
weigh words use, `decisionrag._words.Lexicon`), and candidates their stored vectors.

What a judge reads besides the rendered text is declared once, in `Judge.reads` (`Reads`):
navigation attaches vectors and statistics by it, and `auto` chooses its candidates by it.
A judge that wraps another (a cache, a server's gate) derives from `JudgeWrapper`, which
forwards the declaration with the name, limits and price, so no wrapper can drop one.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .._errors import JudgeProtocolError
from .._sync import run_sync
from .._words import CountedText, Lexicon


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request to a judge may hold. ``None`` means no limit of that kind.

    `max_questions` bounds the candidates of one shared context (the navigator packs levels
    by it); `questions_per_call`, when set, only bounds the questions of one call to the
    server: the judge sends a larger binary request as several calls over the byte-identical
    context, which an engine's prefix cache serves after the first (self-hosted servers)."""

    max_questions: int | None = None
    max_options: int = 255
    max_tokens: int | None = None
    questions_per_call: int | None = None


@dataclass(slots=True)
class Usage:
    """What requests cost. Adds up with ``+``; ``cost_usd`` is None when no price is set."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float | None = None
    cached: int = 0
    estimated: bool = False  # input_tokens is an estimate (the judge did not count them)

    def __add__(self, other: Usage) -> Usage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            seconds=self.seconds + other.seconds,
            cost_usd=cost,
            cached=self.cached + other.cached,
            estimated=self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "seconds": round(self.seconds, 4),
            "cost_usd": self.cost_usd,
            "cached": self.cached,
            "estimated_tokens": self.estimated,
        }


@dataclass(frozen=True, slots=True)
class VectorSpace:
    """The embedding space of stored vectors: the model that made them and its precision."""

    model: str
    precision: str = "float32"


@dataclass(frozen=True, slots=True)
class Reads:
    """What a judge reads of a request, declared once on the judge (`Judge.reads`).

    `context`: the rendered shared context (a language model); False for a judge that scores
    candidates from their own texts, vectors and statistics only (navigation may then skip
    rendering it). `vectors`: the space of `Candidate.vectors` it reads (None: it reads no
    vectors, and navigation attaches none). `statistics`: the corpus's word statistics
    (`BinaryRequest.statistics`). `choice_follows_binary`: its choice distribution over a
    request's candidates is ordered as their P(yes) in one binary request (both monotone in one
    score), so a choice over a shortlist that one binary request ranked cannot reorder it."""

    context: bool = True
    vectors: VectorSpace | None = None
    statistics: bool = False
    choice_follows_binary: bool = False


class VectorRows(Protocol):
    """Unit rows of stored vectors, read when used: a numpy array, or a lazy handle on rows
    of a tree's stored vectors (`decisionrag._tree._vectors.StoredRows`)."""

    def __len__(self) -> int: ...

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray: ...

    def __getitem__(self, index: slice) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate as the judge sees it: an opaque id and the text rendered for it.

    `vectors`, when the judge reads vectors (`Reads.vectors`) and they are stored, holds
    unit rows in that space: row 0 the candidate as a whole (zero when it has none), further
    rows its parts (a page's passages; zero rows are not parts). `counted`, when the
    statistics the request carries store the text's term counts, says where (`CountedText`:
    a judge that weighs words then counts none of them)."""

    id: str
    text: str
    vectors: VectorRows | np.ndarray | None = field(default=None, compare=False, repr=False)
    counted: CountedText | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class BinaryRequest:
    """Parallel yes/no questions over one shared context; ``questions[i]`` is about
    ``candidates[i]`` (when candidates are given)."""

    context: str
    questions: tuple[str, ...]
    query: str = ""
    candidates: tuple[Candidate, ...] = ()
    statistics: Lexicon | None = field(default=None, compare=False, repr=False)
    search: str = ""  # what a similarity judge embeds (Query.search_text); query if empty

    def __post_init__(self) -> None:
        if self.candidates and len(self.candidates) != len(self.questions):
            raise ValueError("a binary request needs one question per candidate")


@dataclass(frozen=True, slots=True)
class ChoiceRequest:
    """One multiple-choice question over a shared context; ``options[i]`` is the label of
    ``candidates[i]`` (e.g. "Passage 3")."""

    context: str
    question: str
    options: tuple[str, ...]
    query: str = ""
    candidates: tuple[Candidate, ...] = ()
    statistics: Lexicon | None = field(default=None, compare=False, repr=False)
    search: str = ""  # what a similarity judge embeds (Query.search_text); query if empty

    def __post_init__(self) -> None:
        if self.candidates and len(self.candidates) != len(self.options):
            raise ValueError("a choice request needs one option per candidate")


@dataclass(slots=True)
class BinaryResult:
    probabilities: list[float]
    usage: Usage = field(default_factory=Usage)


@dataclass(slots=True)
class LevelAnswers:
    """A level's requests all answered together (`EmbeddedJudge.binary_level`): P(yes) of
    every question of every request, in order (request r's at `bounds[r]:bounds[r + 1]`),
    and their usage summed. A walk reads it as it reads their `BinaryResult`s, without one
    list and one usage per request; a level with a request that fails is answered request
    by request instead."""

    probabilities: np.ndarray  # float64
    bounds: np.ndarray
    usage: Usage


@dataclass(slots=True)
class ChoiceResult:
    probabilities: list[float]
    usage: Usage = field(default_factory=Usage)

    @property
    def choice(self) -> int:
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)


def cost_usd(input_tokens: float, price_per_million_input: float | None) -> float | None:
    """The price of `input_tokens` at `price_per_million_input` USD (None: price unknown).

    The one cost formula: judges, usage records and evaluation reports all use it."""
    if price_per_million_input is None:
        return None
    return input_tokens * float(price_per_million_input) / 1_000_000


def estimate_tokens(text: str) -> int:
    """A fast, conservative token estimate (about 4 characters a token for English)."""
    return len(text) // 4 + 1


def check_binary(probabilities: Sequence[float], expected: int, who: str) -> list[float]:
    """Validate P(yes) values: one per question, finite, in [0, 1]."""
    if len(probabilities) != expected:
        raise JudgeProtocolError(f"{who}: {len(probabilities)} answers for {expected} questions")
    values = [float(p) for p in probabilities]
    for index, p in enumerate(values):
        if not math.isfinite(p) or p < 0.0 or p > 1.0:
            raise JudgeProtocolError(f"{who}: answer {index} has P(yes)={p!r}, not a probability")
    return values


def check_choice(probabilities: Sequence[float], expected: int, who: str, tol: float = 1e-3) -> list[float]:
    """Validate a choice distribution: one value per option, finite, non-negative, sums to 1."""
    if len(probabilities) != expected:
        raise JudgeProtocolError(f"{who}: {len(probabilities)} probabilities for {expected} options")
    values = [float(p) for p in probabilities]
    if any(not math.isfinite(p) or p < 0.0 for p in values):
        raise JudgeProtocolError(f"{who}: choice probabilities {values[:5]}… are not probabilities")
    total = sum(values)
    if abs(total - 1.0) > tol:
        raise JudgeProtocolError(f"{who}: choice probabilities sum to {total:.6f}, not 1")
    return [p / total for p in values]


class Judge(ABC):
    """A decision model. Implement `binary` and `choice`; the sync wrappers come free.

    Subclasses set `name` (the id they were loaded by) and `limits`, and may set
    `price_per_million_input` (USD) so that usage carries a cost, and `reads` (what they
    read besides the rendered context: vectors, statistics; see `Reads`).
    """

    name: str = "judge"
    limits: Limits = Limits()
    price_per_million_input: float | None = None
    reads: Reads = Reads()
    batches: bool = False  # `binary_many` computes a level's requests together
    # answers are computed in this process (its threads want the interpreter while a walk
    # waits); False for a judge reached over the network, whose waits leave this one idle
    computes_here: bool = False

    @abstractmethod
    async def binary(self, request: BinaryRequest) -> BinaryResult:
        """P(yes) for every question of `request`, in order."""

    @abstractmethod
    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        """A distribution over the options of `request` that sums to one."""

    async def binary_many(self, requests: Sequence[BinaryRequest]
                          ) -> list[BinaryResult | BaseException]:
        """`binary` of every request (a result, or the error it ended in, per request, in
        order). A judge that computes several requests more cheaply at once overrides this
        and sets `batches` True: a walk then hands it a level's requests in one call."""
        return list(await asyncio.gather(*(self.binary(r) for r in requests),
                                         return_exceptions=True))

    def count_tokens(self, text: str) -> int:
        """Tokens `text` will cost in a request (an estimate unless the judge knows better)."""
        return estimate_tokens(text)

    def cost(self, input_tokens: int) -> float | None:
        return cost_usd(input_tokens, self.price_per_million_input)

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release connections; the judge may not be used afterwards."""

    def binary_sync(self, request: BinaryRequest) -> BinaryResult:
        return run_sync(self.binary(request))

    def choice_sync(self, request: ChoiceRequest) -> ChoiceResult:
        return run_sync(self.choice(request))

    async def __aenter__(self) -> Judge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class JudgeWrapper(Judge):
    """A judge around another (`inner`): its name, limits, price and `reads` are the inner
    judge's, by construction, and so are requests, token counts and closing until a subclass
    overrides `binary` / `choice` to add what it is for (a cache, a gate, a recorder)."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner

    # Read through to the inner judge; setting one on a wrapper is refused (it would split
    # what the wrapper declares from what its inner judge does).
    @property
    def name(self) -> str:
        return self.inner.name

    @name.setter
    def name(self, value: str) -> None:
        _refuse("name")

    @property
    def limits(self) -> Limits:
        return self.inner.limits

    @limits.setter
    def limits(self, value: Limits) -> None:
        _refuse("limits")

    @property
    def price_per_million_input(self) -> float | None:
        return self.inner.price_per_million_input

    @price_per_million_input.setter
    def price_per_million_input(self, value: float | None) -> None:
        _refuse("price_per_million_input")

    @property
    def reads(self) -> Reads:
        return self.inner.reads

    @reads.setter
    def reads(self, value: Reads) -> None:
        _refuse("reads")

    @property
    def computes_here(self) -> bool:
        return self.inner.computes_here

    @computes_here.setter
    def computes_here(self, value: bool) -> None:
        _refuse("computes_here")

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        return await self.inner.binary(request)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        return await self.inner.choice(request)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} around {self.inner!r}>"


def _refuse(field: str) -> None:
    raise AttributeError(f"a judge wrapper's {field} is its inner judge's; set it there")
