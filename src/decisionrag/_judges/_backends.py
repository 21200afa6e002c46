"""Judge backends as self-describing records, and the one hook that registers them.

A `Backend` says everything about a backend: its name (the part of a judge id before the
colon), where its factory lives (imported only when a judge of it is loaded), the environment
variables it reads, an example id, its default per-request limits, a one-line summary, and its
typed options class (`decisionrag._judges._options`). ``decisionrag judges`` is generated from
these records.

Built-in backends and plugins register the same way, through `register_backend`. A third-party
package registers its backends with an entry point in the ``decisionrag.judges`` group whose
object is a `Backend` (or a function returning one or several)::

    [project.entry-points."decisionrag.judges"]
    mybackend = "my_package.judges:BACKEND"

Entry points are read once, the first time the registry is consulted.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .._errors import JudgeConfigError
from ._base import Judge, Limits

ENTRY_POINT_GROUP = "decisionrag.judges"
Factory = Callable[..., Judge]  # factory(model, **options) -> Judge


@dataclass(frozen=True)
class Backend:
    """One judge backend. `factory` is a callable or ``"module:function"`` (lazy import);
    `options` likewise names its `JudgeOptions` class (None: the factory's own keywords)."""

    name: str
    factory: Factory | str
    summary: str
    example: str
    env: tuple[str, ...] = ()
    limits: Limits | str | None = None  # defaults per request ("module:NAME"); None: the model's
    limits_note: str = ""
    options: type[Any] | str | None = None

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name or self.name != self.name.strip():
            raise JudgeConfigError(f"a judge backend needs a name without colons, not {self.name!r}")

    def load_factory(self) -> Factory:
        return _resolve(self.factory) if isinstance(self.factory, str) else self.factory

    def options_class(self) -> type[Any] | None:
        return _resolve(self.options) if isinstance(self.options, str) else self.options

    def create(self, model: str, options: dict[str, Any]) -> Judge:
        judge: Judge = self.load_factory()(model, **options)
        return judge

    def default_limits(self) -> Limits | None:
        return _resolve(self.limits) if isinstance(self.limits, str) else self.limits

    def limits_text(self) -> str:
        """The limits as `decisionrag judges` prints them."""
        limits = self.default_limits()
        if limits is None:
            text = "set by the model"
        else:
            parts = [_cap("questions", limits.max_questions), _cap("options", limits.max_options),
                     _cap("tokens", limits.max_tokens)]
            if limits.questions_per_call:
                parts.append(f"{limits.questions_per_call} questions per call")
            text = ", ".join(parts)
        return f"{text} {self.limits_note}".strip()


def _cap(what: str, limit: int | None) -> str:
    return f"{what}: any" if limit is None else f"{what} <= {limit}"


def _resolve(spec: str) -> Any:
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


# ---------------------------------------------------------------- the registry

_REGISTRY: dict[str, Backend] = {}
_plugins_loaded = False


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Make `backend` loadable as ``NAME:MODEL``; the hook built-ins and plugins share.
    Registering a taken name is an error unless `replace`."""
    if not isinstance(backend, Backend):
        raise JudgeConfigError(f"register_backend takes a Backend record, not {type(backend).__name__}")
    if backend.name in _REGISTRY and not replace and _REGISTRY[backend.name] != backend:
        raise JudgeConfigError(f"a judge backend named {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


def unregister_backend(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered_backends() -> dict[str, Backend]:
    """Every backend by name: the built-ins, then those of installed plugins."""
    _load_plugins()
    return dict(_REGISTRY)


def backend(name: str) -> Backend | None:
    if name not in _REGISTRY:
        _load_plugins()
    return _REGISTRY.get(name)


def load_plugins(*, reload: bool = False) -> list[str]:
    """Register the backends of the ``decisionrag.judges`` entry points (once, unless `reload`);
    the names registered. A plugin that fails to load is skipped with a warning."""
    global _plugins_loaded
    if _plugins_loaded and not reload:
        return []
    _plugins_loaded = True
    found: list[str] = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            records = _records(entry.load())
            for record in records:
                register_backend(record, replace=reload)
                found.append(record.name)
        except Exception as exc:  # a broken plugin must not break the built-in judges
            warnings.warn(f"judge plugin {entry.name!r} ({entry.value}) did not load: {exc}",
                          RuntimeWarning, stacklevel=2)
    return found


def _load_plugins() -> None:
    load_plugins()


def _records(obj: Any) -> Iterable[Backend]:
    if isinstance(obj, Backend):
        return [obj]
    if callable(obj):
        made = obj()
        return [made] if isinstance(made, Backend) else list(made)
    return list(obj)


# ---------------------------------------------------------------- the built-ins

_JEV = "decisionrag._judges._jev:JEV_LIMITS"
_SELF_HOSTED = "decisionrag._judges._jev:SELF_HOSTED_LIMITS"

BUILTIN_BACKENDS: tuple[Backend, ...] = (
    Backend("typesafe", "decisionrag._judges._jev:typesafe_judge",
            "Jev through the official typesafe-sdk ($0.042 / M input tokens)",
            "typesafe:jev-1.13", ("TYPESAFE_API_KEY", "TYPESAFE_BASE_URL"), _JEV,
            options="decisionrag._judges._jev:TypesafeOptions"),
    Backend("openrouter", "decisionrag._judges._jev:openrouter_judge",
            "Jev through OpenRouter's /api/v1/systemone", "openrouter:typesafe/jev-1.13",
            ("OPENROUTER_API_KEY",), _JEV, options="decisionrag._judges._options:HttpJudgeOptions"),
    Backend("jev-compatible", "decisionrag._judges._jev:jev_compatible_judge",
            "a self-hosted /v1/systemone server (llm2jev on vLLM/SGLang/transformers, "
            "laya[serve]); "
            "URL,URL,... for a fleet", "jev-compatible:http://127.0.0.1:8000",
            ("JEV_COMPATIBLE_API_KEY (optional)",), _SELF_HOSTED, "(all settable)",
            options="decisionrag._judges._jev:SelfHostedOptions"),
    Backend("ollama", "decisionrag._judges._selfhosted:ollama_judge",
            "a decision model served by Ollama >= 0.35 (POST /v1/systemone)", "ollama:MODEL",
            ("OLLAMA_HOST (default 127.0.0.1:11434)",),
            "decisionrag._judges._selfhosted:SMALL_WINDOW_LIMITS", "(set max_tokens= to num_ctx)",
            options="decisionrag._judges._options:HttpJudgeOptions"),
    Backend("llamacpp", "decisionrag._judges._selfhosted:llamacpp_judge",
            "llama.cpp's llama-server with a decision model (/v1/models output_modalities)",
            "llamacpp:http://127.0.0.1:8080", ("LLAMACPP_API_KEY (optional)",),
            "decisionrag._judges._selfhosted:SMALL_WINDOW_LIMITS",
            "(set max_tokens= to --ctx-size)",
            options="decisionrag._judges._selfhosted:LlamaCppOptions"),
    Backend("openai", "decisionrag._judges._openai:openai_judge",
            "OpenAI POST /v1/decisions (predicate and choice questions)", "openai:gpt-6-luna",
            ("OPENAI_API_KEY", "OPENAI_BASE_URL"), "decisionrag._judges._openai:OPENAI_LIMITS",
            "(assumed)",
            options="decisionrag._judges._options:HttpJudgeOptions"),
    Backend("local", "decisionrag._judges._local:local_judge",
            "an open-weight causal LM read out as a decision model (transformers)",
            "local:Qwen/Qwen3-1.7B", options="decisionrag._judges._local:LocalOptions"),
    Backend("embedded", "decisionrag._judges._embedded:embedded_judge",
            "offline default on the bundled all-MiniLM-L6-v2 (no key, no network)", "embedded",
            limits=Limits(), options="decisionrag._judges._embedded:EmbeddedOptions"),
    Backend("scripted", "decisionrag._judges._testing:scripted_judge",
            "test double with given answers", "scripted", limits=Limits()),
    Backend("simulated", "decisionrag._judges._testing:simulated_judge",
            "test double with a simulated request latency (concurrency=N, default 256)",
            "simulated:latency=0.2", limits="decisionrag._judges._testing:HOSTED_LIMITS",
            limits_note="(max_questions=N, max_tokens=N)",
            options="decisionrag._judges._testing:SimulatedOptions"),
)

for _builtin in BUILTIN_BACKENDS:
    register_backend(_builtin)
