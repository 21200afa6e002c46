"""Answer generators: a chat model behind any OpenAI-compatible endpoint (OpenAI, vLLM,
SGLang, llama.cpp's server, Ollama's ``/v1``), reached through the one HTTP layer.

Ids are ``openai-compatible:MODEL`` (``openai:MODEL`` is the same backend), parsed here and
nowhere else. The endpoint is ``base_url``, else ``OPENAI_BASE_URL``, else the OpenAI API;
the key ``api_key``, else ``OPENAI_API_KEY`` (none is sent when neither is set, as local
servers expect). With no id given, ``DECISIONRAG_GENERATOR`` names one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from .._chat import ChatClient
from .._errors import AnswerError, DecisionRAGError
from .._http import ANSWER_ERRORS, RetryPolicy
from .._judges._options import TypedOptions

GENERATOR_ENV = "DECISIONRAG_GENERATOR"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BACKENDS = ("openai-compatible", "openai")
_POLICY = RetryPolicy(max_attempts=4)


@dataclasses.dataclass(frozen=True)
class GeneratorOptions(TypedOptions):
    """An answer model's options (``load_generator(id, **options)``, ``--generator-option``):
    the sampling temperature, requests in flight, and the retry policy."""

    error: ClassVar[type[DecisionRAGError]] = AnswerError
    temperature: float = 0.0
    concurrency: int = 4
    max_attempts: int = _POLICY.max_attempts
    timeout: float = _POLICY.timeout
    deadline: float = _POLICY.deadline
    backoff_initial: float = _POLICY.backoff_initial
    backoff_max: float = _POLICY.backoff_max

    def policy(self) -> RetryPolicy:
        return dataclasses.replace(_POLICY, max_attempts=self.max_attempts, timeout=self.timeout,
                                   deadline=self.deadline, backoff_initial=self.backoff_initial,
                                   backoff_max=self.backoff_max)


def generator_options(options: Mapping[str, Any], flag: str = "--generator-option") -> dict[str, Any]:
    """`options` checked against `GeneratorOptions` and converted (``"0.2"`` -> 0.2), before
    anything is opened: `AnswerError` naming `flag`, the key and the known options."""
    known = GeneratorOptions.names()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise AnswerError(f"{flag} {unknown[0]}=...: the answer model has no option "
                          f"{unknown[0]!r}; its options: {', '.join(known)}")
    try:
        return GeneratorOptions.typed(options, "answer model")
    except AnswerError as exc:
        raise AnswerError(f"{flag}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Generation:
    """A finished generation, or (in a stream) one piece of it: `text`, and the token counts
    the server reported (None when it did not)."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float = 0.0


class Generator(Protocol):
    """What `answer()` needs from a chat model."""

    name: str

    async def generate(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> Generation: ...

    def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int
    ) -> AsyncIterator[Generation]: ...

    async def aclose(self) -> None: ...


class OpenAICompatibleGenerator:
    """A chat model at ``{base_url}/chat/completions``; streams over server-sent events."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, concurrency: int = 4,
                 policy: RetryPolicy | None = None) -> None:
        if not model:
            raise AnswerError("openai-compatible: name the model, e.g. openai-compatible:gpt-4o-mini")
        url = base_url or os.environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL
        self.name = f"openai-compatible:{model}"
        self.temperature = temperature
        self.chat = ChatClient(url, model, api_key=api_key, policy=policy or RetryPolicy(max_attempts=4),
                               concurrency=concurrency, who=f"answer model {model} at {url.rstrip('/')}",
                               errors=ANSWER_ERRORS)

    @property
    def base_url(self) -> str:
        return self.chat.base_url

    async def generate(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> Generation:
        reply = await self.chat.complete(messages, max_tokens=max_tokens, temperature=self.temperature)
        return Generation(reply.text, reply.input_tokens, reply.output_tokens, reply.seconds)

    async def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int
    ) -> AsyncIterator[Generation]:
        async for piece in self.chat.stream(messages, max_tokens=max_tokens, temperature=self.temperature):
            yield Generation(piece.text, piece.input_tokens, piece.output_tokens)

    async def aclose(self) -> None:
        await self.chat.aclose()


def generator_model(spec: str | None = None) -> str:
    """The model named by `spec` (``openai-compatible:MODEL``), else by
    ``$DECISIONRAG_GENERATOR``; a clear error naming both when neither is set."""
    chosen = (spec or os.environ.get(GENERATOR_ENV, "")).strip()
    if not chosen:
        raise AnswerError(
            "no answer model configured: pass --generator openai-compatible:MODEL (Python: "
            f"generator='openai-compatible:MODEL') or set {GENERATOR_ENV}=openai-compatible:MODEL; "
            f"the endpoint is --base-url or {BASE_URL_ENV} (default the OpenAI API), "
            "the key OPENAI_API_KEY"
        )
    backend, _, model = chosen.partition(":")
    if backend not in BACKENDS:
        raise AnswerError(f"unknown generator {chosen!r}: use openai-compatible:MODEL "
                          "(any OpenAI-compatible chat endpoint)")
    if not model.strip():
        raise AnswerError(f"{chosen!r}: name the model, e.g. openai-compatible:gpt-4o-mini")
    return model.strip()


def load_generator(spec: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                   **options: Any) -> OpenAICompatibleGenerator:
    """The generator `spec` names (``openai-compatible:MODEL``), else ``$DECISIONRAG_GENERATOR``.
    Options (`GeneratorOptions`, typed): temperature, concurrency, and the retry policy's
    max_attempts, timeout, deadline, backoff_initial, backoff_max; others are refused."""
    model = generator_model(spec)
    given = GeneratorOptions.parse(options, spec or model)
    return OpenAICompatibleGenerator(model, base_url=base_url, api_key=api_key, policy=given.policy(),
                                     temperature=given.temperature, concurrency=given.concurrency)
