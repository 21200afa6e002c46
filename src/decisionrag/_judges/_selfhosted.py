"""Self-hosted decision servers: Ollama, llama.cpp's server, and any System One server.

All three speak the System One protocol (``POST {base}/v1/systemone``), so each id builds a
`JevJudge` with the self-hosted request shape (`SELF_HOSTED_LIMITS`):

* ``ollama:MODEL`` - Ollama >= 0.35 and one of its decision models; the base URL is
  ``base_url=``, else ``OLLAMA_HOST`` (``host:port`` or a URL), else http://127.0.0.1:11434;
* ``llamacpp:URL`` - llama.cpp's ``llama-server`` (default http://127.0.0.1:8080 when the URL
  is left out); it serves one model, named with ``model=`` when the server checks it;
* ``jev-compatible:URL`` - anything else (llm2jev on vLLM, SGLang or transformers).

Request shaping: the rendered context is the ``state``, sent first in every body and
byte-identical across the calls of one context; candidates keep reading order; a context
holds as many candidates as its token budget allows and is sent as several calls of at most
64 questions (``questions_per_call``), so vLLM's automatic prefix cache or SGLang's radix
cache compute the context once. Context windows differ by model: set ``max_tokens=`` to the
server's (Ollama's ``num_ctx``, llama.cpp's ``--ctx-size``) minus room for one question.

Discovery: `discover(url)` reads ``GET {url}/v1/models`` and returns the models, marking
those whose ``output_modalities`` include ``"decisions"`` (llama.cpp, Ollama); servers that
do not mark models (llm2jev) list every model as unmarked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .._errors import JudgeConfigError, JudgeProtocolError
from .._sync import run_sync
from ._http import HttpClient, RetryPolicy
from ._jev import SELF_HOSTED_LIMITS, SYSTEM_ONE_PATH, HttpTransport, JevJudge
from ._options import HttpJudgeOptions

OLLAMA_DEFAULT = "http://127.0.0.1:11434"
LLAMACPP_DEFAULT = "http://127.0.0.1:8080"
# Ollama's and llama.cpp's default context windows are small (a few thousand tokens) unless
# the server is started with a larger one: a budget that fits an 8k window by default
SMALL_WINDOW_LIMITS = SELF_HOSTED_LIMITS.__class__(
    max_questions=None, max_options=255, max_tokens=6_000, questions_per_call=64
)


def _root(url: str, who: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise JudgeConfigError(f"{who}: {url!r} is not an http(s) URL")
    return url.rstrip("/").removesuffix(SYSTEM_ONE_PATH).removesuffix("/v1")


@dataclass(frozen=True)
class LlamaCppOptions(HttpJudgeOptions):
    model: str = "default"


def _judge(who: str, root: str, model: str, given: HttpJudgeOptions, env_key: str) -> JevJudge:
    key = given.api_key or os.environ.get(env_key, "").strip()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = HttpClient(root, headers=headers, policy=given.policy(),
                        concurrency=given.concurrency, who=who)
    return JevJudge(model, HttpTransport(client), limits=given.limits(SMALL_WINDOW_LIMITS),
                    price_per_million_input=given.price(None), who=who)


def ollama_base(value: str | None = None) -> str:
    """The Ollama base URL: `value`, else ``OLLAMA_HOST``, else the default port on loopback."""
    raw = (value or os.environ.get("OLLAMA_HOST", "")).strip()
    if not raw:
        return OLLAMA_DEFAULT
    if not raw.startswith(("http://", "https://")):
        raw = "http://" + raw
    if raw.count(":") == 1:  # no port given
        raw += ":11434"
    return raw


def ollama_judge(model: str, **options: Any) -> JevJudge:
    """``ollama:MODEL`` - a decision model served by Ollama (>= 0.35)."""
    who = f"ollama:{model}"
    if not model:
        raise JudgeConfigError("ollama: name the model, e.g. ollama:MODEL (see `decisionrag judges "
                               "--discover http://127.0.0.1:11434`)")
    given = HttpJudgeOptions.parse(options, who)
    root = _root(ollama_base(given.base_url), who)
    return _judge(who, root, model, given, "OLLAMA_API_KEY")


def llamacpp_judge(url: str, **options: Any) -> JevJudge:
    """``llamacpp:URL`` - llama.cpp's server (``llama-server``) with a decision model."""
    who = f"llamacpp:{url}" if url else "llamacpp"
    root = _root(url or LLAMACPP_DEFAULT, who)
    given = LlamaCppOptions.parse(options, who)
    return _judge(who, root, given.model, given, "LLAMACPP_API_KEY")


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One entry of a server's ``/v1/models``."""

    id: str
    decisions: bool | None  # True/False when the server marks output modalities, else None
    owned_by: str = ""



def discover(url: str, *, timeout: float = 10.0, api_key: str | None = None) -> list[ServedModel]:
    """The models ``GET {url}/v1/models`` lists, marked by whether they serve decisions."""
    who = f"discover {url}"
    root = _root(url, who)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = HttpClient(root, headers=headers, who=who,
                        policy=RetryPolicy(max_attempts=2, timeout=timeout, deadline=2 * timeout))

    async def fetch() -> Any:
        try:
            payload, _ = await client.get_json("/v1/models")
            return payload
        finally:
            await client.aclose()

    return parse_models(run_sync(fetch()), who)


def judge_id_for(url: str, model: ServedModel) -> str:
    """The id to load a discovered model by: ``ollama:MODEL`` for Ollama, ``llamacpp:URL`` for
    llama.cpp, else ``jev-compatible:URL`` with the model as an option when it matters."""
    root = _root(url, url)
    if model.owned_by == "ollama" or root.endswith(":11434"):
        return f"ollama:{model.id}" if root == OLLAMA_DEFAULT else f"ollama:{model.id} -o base_url={root}"
    if model.owned_by == "llamacpp":
        return f"llamacpp:{root}"
    return f"jev-compatible:{root} -o model={model.id}"


def parse_models(payload: Any, who: str = "server") -> list[ServedModel]:
    """``{"data": [{"id", "output_modalities"?, "owned_by"?}, ...]}`` (OpenAI's shape; Ollama's
    ``{"models": [{"name"|"model", ...}]}`` is read too)."""
    if not isinstance(payload, dict):
        raise JudgeProtocolError(f"{who}: /v1/models did not answer a JSON object")
    items = payload.get("data", payload.get("models"))
    if not isinstance(items, list):
        raise JudgeProtocolError(f"{who}: /v1/models has no 'data' list")
    found: list[ServedModel] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("id") or item.get("name") or item.get("model")
        if not isinstance(name, str) or not name:
            continue
        modalities = item.get("output_modalities")
        if modalities is None and isinstance(item.get("architecture"), dict):
            modalities = item["architecture"].get("output_modalities")
        marked = None if not isinstance(modalities, list) else "decisions" in modalities
        found.append(ServedModel(name, marked, str(item.get("owned_by", ""))))
    return found
