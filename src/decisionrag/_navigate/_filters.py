"""Metadata filters: parsed once, checked exactly on a passage and conservatively on a subtree.

A filter is a JSON-like mapping::

    {"product": "billing",                     # equality (a list value: "contains")
     "year": {"gte": 2023, "lt": 2026},        # gt, gte, lt, lte: numbers, or strings (ISO dates)
     "lang": {"in": ["en", "de"]},             # in, and ne; exists: true / false
     "or": [{"tier": "gold"}, {"beta": True}], # and / or: lists of filters; not: one filter
    }

Several keys in one mapping must all hold. Operators may be written with a leading ``$``.
Filters nest at most `MAX_DEPTH` levels (and / or / not / a key's conditions), and numbers
must be finite: anything else is an `InputError` naming it, wherever the filter came from
(the command line, a request body, an MCP call).

`matches(meta)` decides a passage exactly, on its document's metadata overlaid with its own.
`may_match(summary)` decides a root, group or document from the summary of the documents
below it (:mod:`.._tree._summaries`): False only when no document below can match, so a
filtered-out branch is never judged and nothing that could match is lost.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import InputError
from .._tree._summaries import KeySummary, Summary

Meta = Mapping[str, Any]
_RANGES: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le,
}
_OPERATORS = frozenset({"eq", "ne", "in", "exists", *_RANGES})
MAX_DEPTH = 32  # levels of and / or / not; a real filter needs a handful


class Filter:
    def matches(self, meta: Meta) -> bool:
        raise NotImplementedError

    def may_match(self, summary: Summary) -> bool:
        raise NotImplementedError


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _same(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


@dataclass(frozen=True)
class Eq(Filter):
    key: str
    value: Any

    def matches(self, meta: Meta) -> bool:
        return self.key in meta and any(_same(v, self.value) for v in _items(meta[self.key]))

    def may_match(self, summary: Summary) -> bool:
        entry = summary.keys.get(self.key)
        if entry is None or entry.n == 0:
            return False
        if entry.values is not None:
            return any(_same(v, self.value) for v in entry.values)
        return _in_range(entry, self.value, self.value, True, True)


@dataclass(frozen=True)
class Ne(Filter):
    key: str
    value: Any

    def matches(self, meta: Meta) -> bool:
        return not Eq(self.key, self.value).matches(meta)

    def may_match(self, summary: Summary) -> bool:
        entry = summary.keys.get(self.key)
        if entry is None or entry.n < summary.documents or entry.values is None:
            return True
        return any(not _same(v, self.value) for v in entry.values)


@dataclass(frozen=True)
class Range(Filter):
    key: str
    op: str
    bound: Any

    def matches(self, meta: Meta) -> bool:
        test = _RANGES[self.op]
        return self.key in meta and any(_comparable(v, self.bound) and test(v, self.bound)
                                        for v in _items(meta[self.key]))

    def may_match(self, summary: Summary) -> bool:
        entry = summary.keys.get(self.key)
        if entry is None or entry.n == 0:
            return False
        if entry.values is not None:
            test = _RANGES[self.op]
            return any(_comparable(v, self.bound) and test(v, self.bound) for v in entry.values)
        if self.op in ("gt", "gte"):
            return _in_range(entry, self.bound, None, self.op == "gte", True)
        return _in_range(entry, None, self.bound, True, self.op == "lte")


@dataclass(frozen=True)
class Exists(Filter):
    key: str
    present: bool

    def matches(self, meta: Meta) -> bool:
        return (self.key in meta) == self.present

    def may_match(self, summary: Summary) -> bool:
        entry = summary.keys.get(self.key)
        having = entry.n if entry is not None else 0
        return having > 0 if self.present else having < summary.documents


@dataclass(frozen=True)
class All(Filter):
    parts: tuple[Filter, ...]

    def matches(self, meta: Meta) -> bool:
        return all(part.matches(meta) for part in self.parts)

    def may_match(self, summary: Summary) -> bool:
        return all(part.may_match(summary) for part in self.parts)


@dataclass(frozen=True)
class Any_(Filter):
    parts: tuple[Filter, ...]

    def matches(self, meta: Meta) -> bool:
        return any(part.matches(meta) for part in self.parts)

    def may_match(self, summary: Summary) -> bool:
        return any(part.may_match(summary) for part in self.parts)


@dataclass(frozen=True)
class Not(Filter):
    part: Filter

    def matches(self, meta: Meta) -> bool:
        return not self.part.matches(meta)

    def may_match(self, summary: Summary) -> bool:
        return _negated(self.part).may_match(summary)


@dataclass(frozen=True)
class _Other(Filter):
    """Some document below has `key` with a value a range on `bound` cannot compare (the
    summary side of a negated range only)."""

    key: str
    bound: Any

    def matches(self, meta: Meta) -> bool:  # pragma: no cover - never built for passages
        raise NotImplementedError

    def may_match(self, summary: Summary) -> bool:
        entry = summary.keys.get(self.key)
        if entry is None or entry.n == 0:
            return False
        if entry.values is None:
            return True
        return any(not _comparable(v, self.bound) for v in entry.values)


_COMPLEMENT = {"gt": "lte", "gte": "lt", "lt": "gte", "lte": "gt"}


def _negated(part: Filter) -> Filter:
    """A filter whose `may_match` over-approximates ``not part`` on a summary (De Morgan)."""
    if isinstance(part, Eq):
        return Ne(part.key, part.value)
    if isinstance(part, Ne):
        return Eq(part.key, part.value)
    if isinstance(part, Exists):
        return Exists(part.key, not part.present)
    if isinstance(part, Range):  # holds too where the key is missing or not comparable
        return Any_((Range(part.key, _COMPLEMENT[part.op], part.bound), Exists(part.key, False),
                     _Other(part.key, part.bound)))
    if isinstance(part, All):
        return Any_(tuple(_negated(p) for p in part.parts))
    if isinstance(part, Any_):
        return All(tuple(_negated(p) for p in part.parts))
    if isinstance(part, Not):
        return part.part
    return _Anything()


@dataclass(frozen=True)
class _Anything(Filter):
    def matches(self, meta: Meta) -> bool:  # pragma: no cover - never built for passages
        return True

    def may_match(self, summary: Summary) -> bool:
        return True


def _comparable(value: Any, bound: Any) -> bool:
    if isinstance(value, bool) or isinstance(bound, bool):
        return False
    numbers = (int, float)
    return (isinstance(value, numbers) and isinstance(bound, numbers)) or (
        isinstance(value, str) and isinstance(bound, str))


def _in_range(entry: KeySummary, low: Any, high: Any, low_closed: bool, high_closed: bool) -> bool:
    """Whether [entry's range] can hold a value within (low, high) of the bounds' type."""
    probe = low if low is not None else high
    if isinstance(probe, bool) or probe is None:
        return True  # booleans and nulls are only known by value: cannot rule out
    span = entry.num if isinstance(probe, (int, float)) else entry.text
    if span is None:
        return False
    lo, hi = span
    if low is not None and (hi < low or (hi == low and not low_closed)):
        return False
    return not (high is not None and (lo > high or (lo == high and not high_closed)))


def parse_filters(spec: Mapping[str, Any] | Filter | None, _depth: int = 0) -> Filter | None:
    """A Filter from the mapping form (see the module docstring); InputError naming the part
    that is wrong."""
    if spec is None or isinstance(spec, Filter):
        return spec
    if _depth >= MAX_DEPTH:
        raise InputError(f"filter: nested more than {MAX_DEPTH} levels deep (and / or / not); "
                         "write it flatter")
    if not isinstance(spec, Mapping):
        raise InputError(f"filters must be a mapping of metadata keys to conditions, not "
                         f"{type(spec).__name__}")
    parts = [_parse_entry(key, value, _depth + 1) for key, value in spec.items()]
    return parts[0] if len(parts) == 1 else All(tuple(parts))


def _parse_entry(key: str, value: Any, depth: int) -> Filter:
    name = key.removeprefix("$")
    if name in ("and", "or"):
        if not isinstance(value, list) or not value:
            raise InputError(f"filter {key!r}: expected a non-empty list of filters")
        parts = tuple(_required(parse_filters(item, depth)) for item in value)
        return All(parts) if name == "and" else Any_(parts)
    if name == "not":
        return Not(_required(parse_filters(value, depth)))
    if isinstance(value, Mapping):
        conditions = [_condition(key, op, arg) for op, arg in value.items()]
        if not conditions:
            raise InputError(f"filter {key!r}: no condition given")
        return conditions[0] if len(conditions) == 1 else All(tuple(conditions))
    if isinstance(value, list):
        return _condition(key, "in", value)
    return Eq(key, _scalar(key, value))


def _required(found: Filter | None) -> Filter:
    if found is None:
        raise InputError("filter: an empty condition")
    return found


def _condition(key: str, op: str, arg: Any) -> Filter:
    name = op.removeprefix("$")
    if name not in _OPERATORS:
        raise InputError(f"filter {key!r}: unknown operator {op!r}; use one of "
                         f"{', '.join(sorted(_OPERATORS))}")
    if name == "eq":
        return Eq(key, _scalar(key, arg))
    if name == "ne":
        return Ne(key, _scalar(key, arg))
    if name == "in":
        if not isinstance(arg, list) or not arg:
            raise InputError(f"filter {key!r}: 'in' takes a non-empty list")
        return Any_(tuple(Eq(key, _scalar(key, item)) for item in arg))
    if name == "exists":
        if not isinstance(arg, bool):
            raise InputError(f"filter {key!r}: 'exists' takes true or false")
        return Exists(key, arg)
    if isinstance(arg, bool) or not isinstance(arg, (int, float, str)):
        raise InputError(f"filter {key!r}: {op!r} takes a number or a string")
    return Range(key, name, _finite(key, arg))


def _scalar(key: str, value: Any) -> Any:
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        raise InputError(f"filter {key!r}: expected a string, number, boolean or null, "
                         f"got {type(value).__name__}")
    return _finite(key, value)


def _finite(key: str, value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"filter {key!r}: {value!r} is not a number a metadata value can "
                         "equal or be compared with (NaN and infinities are refused)")
    return value

