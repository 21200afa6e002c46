"""Judge ids: ``backend:model`` strings, parsed here and nowhere else; the backend named is
looked up among the registered records (`decisionrag._judges._backends`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import JudgeConfigError
from ._backends import Backend, registered_backends
from ._backends import backend as find_backend
from ._base import Judge


def __getattr__(name: str) -> Any:
    """``BACKENDS`` (the registered names) and ``BACKEND_INFO`` (what `decisionrag judges`
    shows), generated from the backend records each time, plugins included."""
    if name == "BACKENDS":
        return tuple(registered_backends())
    if name == "BACKEND_INFO":
        return tuple(backend_info(record) for record in registered_backends().values())
    raise AttributeError(name)


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What `decisionrag judges` shows about a backend (generated from its record)."""

    backend: str
    example: str
    env: str
    limits: str
    summary: str


def backend_info(record: Backend) -> BackendInfo:
    return BackendInfo(record.name, record.example, ", ".join(record.env) or "-",
                       record.limits_text(), record.summary)


@dataclass(frozen=True, slots=True)
class JudgeId:
    backend: str
    model: str


def parse_judge_id(judge_id: str) -> JudgeId:
    """Split ``backend:model``; the model part may itself contain colons (URLs)."""
    backend, _, model = judge_id.strip().partition(":")
    if find_backend(backend) is None:
        known = ", ".join(registered_backends())
        raise JudgeConfigError(f"unknown judge {judge_id!r}: the backend must be one of {known}")
    return JudgeId(backend, model)


def parse_options(text: str) -> dict[str, str]:
    """``latency=0.2,concurrency=8`` -> {"latency": "0.2", "concurrency": "8"}."""
    from ._testing import parse_id_options

    return parse_id_options(text)


def judge_options(judge_id: str, options: Mapping[str, Any], flag: str = "--judge-option"
                  ) -> dict[str, Any]:
    """`options` for the judge `judge_id` names, checked against its backend's typed options
    and converted (``"4"`` -> 4, ``"false"`` -> False) as `load_judge` would, before anything
    is loaded: `JudgeConfigError` naming `flag`, the key and the known options. A backend
    without an options class gets the values as given (its factory checks them when loading).
    ``judgment_cache`` is every judge's (a folder: see `load_judge`)."""
    parsed = parse_judge_id(judge_id)
    record = find_backend(parsed.backend)
    assert record is not None  # parse_judge_id checked it
    given = dict(options)
    cache = {"judgment_cache": given.pop("judgment_cache")} if "judgment_cache" in given else {}
    kind = record.options_class()
    if kind is None or not given:
        return {**given, **cache}
    known = kind.names()
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise JudgeConfigError(
            f"{flag} {unknown[0]}=...: the {parsed.backend} judge has no option {unknown[0]!r}; "
            f"its options: {', '.join([*known, 'judgment_cache'])}")
    try:
        return {**kind.typed(given, judge_id), **cache}
    except JudgeConfigError as exc:
        raise JudgeConfigError(f"{flag}: {exc}") from exc


def load_judge(judge_id: str | Any = "embedded", **options: Any) -> Judge:
    """A judge from its id, e.g. ``typesafe:jev-1.13``, ``jev-compatible:http://127.0.0.1:8000``,
    ``local:/models/qwen3-1.7b``, ``embedded``, ``scripted``, ``simulated:latency=0.2``.

    Keyword options go to the backend (e.g. ``concurrency=8``,
    ``price_per_million_input=0.042``, the embedded judge's ``precision``), except
    ``judgment_cache=PATH``, which wraps the judge in an on-disk judgment cache (see
    `CachedJudge`); an empty or None path means no cache.

    `judge_id` may also be a model object: a `Judge` (returned as it is, or cached), or a
    LangChain ``BaseDecisionModel`` (wrapped; needs the ``langchain`` extra).
    """
    judgment_cache = options.pop("judgment_cache", None)
    if not isinstance(judge_id, str):
        judge = _judge_of(judge_id, options)
    else:
        judge = _judge_by_id(judge_id, options)
    if judgment_cache:
        from ._cache import CachedJudge

        return CachedJudge(judge, judgment_cache)
    return judge


def _judge_of(model: Any, options: dict[str, Any]) -> Judge:
    """A judge from an object: ours as it is, a LangChain decision model wrapped."""
    if isinstance(model, Judge):
        if options:
            raise JudgeConfigError(f"options {sorted(options)} cannot apply to a judge object")
        return model
    if any(cls.__name__ == "BaseDecisionModel" and cls.__module__.startswith("langchain_core")
           for cls in type(model).__mro__):
        from ._langchain import judge_from_langchain

        return judge_from_langchain(model, **options)  # JudgeConfigError on a bad option
    raise JudgeConfigError(
        f"load_judge takes a judge id, a Judge or a LangChain BaseDecisionModel, "
        f"not {type(model).__name__}"
    )


def _judge_by_id(judge_id: str, options: dict[str, Any]) -> Judge:
    parsed = parse_judge_id(judge_id)
    record = find_backend(parsed.backend)
    assert record is not None  # parse_judge_id checked it
    judge = record.create(parsed.model, options)
    judge.name = judge_id
    return judge
