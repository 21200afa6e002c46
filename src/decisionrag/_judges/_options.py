"""Typed judge options: one dataclass per backend, parsed from keyword options or ``-o``
strings, unknown keys rejected with the list of known ones.

Options arrive as Python values (``load_judge(id, concurrency=4)``) or as strings (``decisionrag
ask --judge-option concurrency=4``, ``simulated:latency=0.2``); `JudgeOptions.parse` converts each
to its field's type (``""``/``none`` is None where None is allowed) and remembers which were
given, so a backend can tell "not given" from an explicit None (`given`). `TypedOptions` is the
machinery without the judge: the answer generator's options use it too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from .._errors import DecisionRAGError, InputError, JudgeConfigError
from .._http import RetryPolicy
from ._base import Limits

OptionsT = TypeVar("OptionsT", bound="TypedOptions")
_NONE = ("", "none", "None", "null")
_POLICY = RetryPolicy()


def parse_assignments(items: Sequence[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of a repeatable flag (``--judge-option``) as a mapping of
    strings, typed later by the options class they are for; `InputError` naming the flag for
    an item without ``=`` or a key given twice."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} model=NAME")
        if key in found:
            raise InputError(f"{flag}: {key} is given twice ({key}={found[key]!r} and {item!r})")
        found[key] = value.strip()
    return found


@dataclasses.dataclass(frozen=True)
class TypedOptions:
    """Options as a frozen dataclass: keys checked, values converted to the fields' types,
    failures raised as `error` (a `DecisionRAGError` subclass)."""

    error: ClassVar[type[DecisionRAGError]] = JudgeConfigError
    given: frozenset[str] = dataclasses.field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "given"]

    @classmethod
    def parse(cls: type[OptionsT], options: Mapping[str, Any], who: str) -> OptionsT:
        """The options of `who` from `options`; `JudgeConfigError` naming any unknown key or
        value of the wrong type."""
        known = cls.names()
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise cls.error(f"{who}: unknown options {unknown}; known options: "
                            f"{', '.join(known) or 'none'}")
        hints = typing.get_type_hints(cls)
        values = {name: _convert(value, hints[name], name, who, cls.error)
                  for name, value in options.items()}
        return cls(given=frozenset(options), **values)

    @classmethod
    def typed(cls, options: Mapping[str, Any], who: str) -> dict[str, Any]:
        """`options` checked and converted, as keyword values (only those given)."""
        parsed = cls.parse(options, who)
        return {name: getattr(parsed, name) for name in options}

    def chosen(self, name: str, default: Any) -> Any:
        """The option's value when it was given, else `default`."""
        return getattr(self, name) if name in self.given else default


@dataclasses.dataclass(frozen=True)
class JudgeOptions(TypedOptions):
    """Base class of a backend's options (no options of its own)."""


@dataclasses.dataclass(frozen=True)
class RetryOptions(JudgeOptions):
    """The retry policy of an HTTP backend (see `decisionrag._http.RetryPolicy`)."""

    max_attempts: int = _POLICY.max_attempts
    backoff_initial: float = _POLICY.backoff_initial
    backoff_max: float = _POLICY.backoff_max
    jitter: float = _POLICY.jitter
    retry_after_cap: float = _POLICY.retry_after_cap
    timeout: float = _POLICY.timeout
    deadline: float = _POLICY.deadline

    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, self.backoff_initial, self.backoff_max, self.jitter,
                           self.retry_after_cap, self.timeout, self.deadline)


@dataclasses.dataclass(frozen=True)
class HttpJudgeOptions(RetryOptions):
    """What every HTTP judge takes: key, URL, concurrency, limits, price, retries."""

    api_key: str | None = None
    base_url: str | None = None
    concurrency: int = 8
    max_questions: int | None = None
    max_options: int = 255
    max_tokens: int | None = 64_000
    questions_per_call: int | None = None
    price_per_million_input: float | None = None

    def limits(self, defaults: Limits) -> Limits:
        """The per-request limits: the backend's `defaults`, with any limit given replacing it."""
        return Limits(max_questions=self.chosen("max_questions", defaults.max_questions),
                      max_options=self.chosen("max_options", defaults.max_options),
                      max_tokens=self.chosen("max_tokens", defaults.max_tokens),
                      questions_per_call=self.chosen("questions_per_call",
                                                     defaults.questions_per_call))

    def price(self, default: float | None) -> float | None:
        return self.chosen("price_per_million_input", default)


def _convert(value: Any, kind: Any, name: str, who: str,
             error: type[DecisionRAGError] = JudgeConfigError) -> Any:
    allowed = _members(kind)
    if value is None or (isinstance(value, str) and value.strip() in _NONE and type(None) in allowed):
        if type(None) in allowed or Any in allowed:
            return None
        raise error(f"{who}: option {name} needs a value")
    if Any in allowed or any(_is_instance(value, t) for t in allowed):
        return value
    for target in allowed:
        converted = _cast(value, target)
        if converted is not _FAIL:
            return converted
    expected = " or ".join(getattr(t, "__name__", str(t)) for t in allowed if t is not type(None))
    raise error(f"{who}: option {name}={value!r} is not a valid {expected}")


_FAIL = object()


def _members(kind: Any) -> tuple[Any, ...]:
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return typing.get_args(kind)
    return (kind,)


def _is_instance(value: Any, target: Any) -> bool:
    if target is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if target is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(target, type) and isinstance(value, target)


def _cast(value: Any, target: Any) -> Any:
    if target is bool:
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        return _FAIL
    if target in (int, float, str):
        try:
            return target(value)
        except (TypeError, ValueError):
            return _FAIL
    return _FAIL
