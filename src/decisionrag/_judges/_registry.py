"""Judge ids: ``backend:model`` strings, parsed here and nowhere else."""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

from .._errors import JudgeConfigError
from ._base import Judge, Limits

# backend name -> (module, factory function); modules are imported only when used
_BACKENDS: dict[str, tuple[str, str]] = {
    "typesafe": ("decisionrag._judges._jev", "typesafe_judge"),
    "openrouter": ("decisionrag._judges._jev", "openrouter_judge"),
    "jev-compatible": ("decisionrag._judges._jev", "jev_compatible_judge"),
    "ollama": ("decisionrag._judges._selfhosted", "ollama_judge"),
    "llamacpp": ("decisionrag._judges._selfhosted", "llamacpp_judge"),
    "openai": ("decisionrag._judges._openai", "openai_judge"),
    "local": ("decisionrag._judges._local", "local_judge"),
    "embedded": ("decisionrag._judges._embedded", "embedded_judge"),
    "scripted": ("decisionrag._judges._registry", "_scripted_judge"),
    "simulated": ("decisionrag._judges._registry", "_simulated_judge"),
}

BACKENDS = tuple(_BACKENDS)


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What `decisionrag judges` shows about a backend."""

    backend: str
    example: str
    env: str
    limits: str
    summary: str


BACKEND_INFO: tuple[BackendInfo, ...] = (
    BackendInfo("typesafe", "typesafe:jev-1.13", "TYPESAFE_API_KEY, TYPESAFE_BASE_URL",
                "questions: any, options <= 255, tokens <= 64000",
                "Jev through the official typesafe-sdk ($0.042 / M input tokens)"),
    BackendInfo("openrouter", "openrouter:typesafe/jev-1.13", "OPENROUTER_API_KEY",
                "questions: any, options <= 255, tokens <= 64000",
                "Jev through OpenRouter's /api/v1/systemone"),
    BackendInfo("openai", "openai:gpt-6-luna", "OPENAI_API_KEY, OPENAI_BASE_URL",
                "questions: any, options <= 255, tokens <= 64000 (assumed)",
                "OpenAI POST /v1/decisions (predicate and choice questions)"),
    BackendInfo("jev-compatible", "jev-compatible:http://127.0.0.1:8000",
                "JEV_COMPATIBLE_API_KEY (optional)",
                "tokens <= 32000 per context, 64 questions per call, options <= 255 (all settable)",
                "a self-hosted /v1/systemone server (llm2jev on vLLM/SGLang/transformers, laya[serve])"),
    BackendInfo("ollama", "ollama:MODEL", "OLLAMA_HOST (default 127.0.0.1:11434)",
                "tokens <= 6000 per context (set max_tokens= to num_ctx), 64 questions per call",
                "a decision model served by Ollama >= 0.35 (POST /v1/systemone)"),
    BackendInfo("llamacpp", "llamacpp:http://127.0.0.1:8080", "LLAMACPP_API_KEY (optional)",
                "tokens <= 6000 per context (set max_tokens= to --ctx-size), 64 questions per call",
                "llama.cpp's llama-server with a decision model (/v1/models output_modalities)"),
    BackendInfo("local", "local:Qwen/Qwen3-1.7B", "-", "set by the model",
                "an open-weight causal LM read out as a decision model (transformers)"),
    BackendInfo("embedded", "embedded", "-", "none",
                "offline default on the bundled all-MiniLM-L6-v2 (no key, no network)"),
    BackendInfo("scripted", "scripted", "-", "none", "test double with given answers"),
    BackendInfo("simulated", "simulated:latency=0.2", "-",
                "questions: any, options <= 255, tokens <= 64000 (max_questions=N, max_tokens=N)",
                "test double with a simulated request latency (concurrency=N, default 256)"),
)


@dataclass(frozen=True, slots=True)
class JudgeId:
    backend: str
    model: str


def parse_judge_id(judge_id: str) -> JudgeId:
    """Split ``backend:model``; the model part may itself contain colons (URLs)."""
    backend, _, model = judge_id.strip().partition(":")
    if backend not in _BACKENDS:
        known = ", ".join(BACKENDS)
        raise JudgeConfigError(f"unknown judge {judge_id!r}: the backend must be one of {known}")
    return JudgeId(backend, model)


def parse_options(text: str) -> dict[str, str]:
    """``latency=0.2,concurrency=8`` -> {"latency": "0.2", "concurrency": "8"}."""
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise JudgeConfigError(f"judge option {part!r} is not of the form name=value")
        options[key.strip()] = value.strip()
    return options


def load_judge(judge_id: str | Any = "embedded", **options: Any) -> Judge:
    """A judge from its id, e.g. ``typesafe:jev-1.13``, ``jev-compatible:http://127.0.0.1:8000``,
    ``local:/models/qwen3-1.7b``, ``embedded``, ``scripted``, ``simulated:latency=0.2``.

    Keyword options go to the backend (e.g. ``concurrency=8``,
    ``price_per_million_input=0.042``, the embedded judge's ``cache_dir``), except
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

        try:
            return judge_from_langchain(model, **options)
        except TypeError as exc:
            raise JudgeConfigError(str(exc)) from exc
    raise JudgeConfigError(
        f"load_judge takes a judge id, a Judge or a LangChain BaseDecisionModel, "
        f"not {type(model).__name__}"
    )


def _judge_by_id(judge_id: str, options: dict[str, Any]) -> Judge:
    parsed = parse_judge_id(judge_id)
    module_name, factory_name = _BACKENDS[parsed.backend]
    factory = getattr(importlib.import_module(module_name), factory_name)
    judge: Judge = factory(parsed.model, **options)
    judge.name = judge_id
    return judge


def _scripted_judge(model: str, **options: Any) -> Judge:
    from ._testing import ScriptedJudge

    return ScriptedJudge(**options)


def _simulated_judge(model: str, **options: Any) -> Judge:
    from ._testing import HOSTED_LIMITS, SimulatedJudge

    settings: dict[str, str] = parse_options(model)
    latency = _latency(settings.pop("latency", "0.2"))
    if "concurrency" in settings:
        options.setdefault("concurrency", _positive_int(settings.pop("concurrency"), "concurrency"))
    if "max_questions" in settings or "max_tokens" in settings:
        questions, tokens = settings.pop("max_questions", None), settings.pop("max_tokens", None)
        options.setdefault("limits", Limits(
            max_questions=_positive_int(questions, "max_questions") if questions else None,
            max_tokens=_positive_int(tokens, "max_tokens") if tokens else HOSTED_LIMITS.max_tokens,
        ))
    if settings:
        raise JudgeConfigError(f"simulated judge: unknown options {sorted(settings)}")
    return SimulatedJudge(latency, **options)


def _latency(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < math.inf:
        raise JudgeConfigError(f"simulated judge: latency={text!r} is not a number of seconds")
    return value


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise JudgeConfigError(f"simulated judge: {name}={text!r} is not a positive integer")
    return value
