"""Jev and every other TypeSafe "System One" server: ``POST {base}/v1/systemone``.

Request: ``{"model", "state", "questions": {id: question}}``; a binary request asks one
``{"type": "noul", "instructions": QUESTION}`` per candidate under the ids ``q0, q1, ...``;
a choice request asks one ``{"type": "choice", "instructions": QUESTION, "criteria":
{OPTION_LABEL: null, ...}}`` (the candidates are already described in the state).
Response: ``{"model", "answers": {id: {"type": "noul", "noul": P} | {"type": "choice",
"choice", "probabilities": {label: p}, "confidence"}}, "usage": {input_tokens,
output_tokens}}`` (jevcompat SPEC 0.1).

Backends: ``typesafe:MODEL`` through the official ``typesafe-sdk`` (``TYPESAFE_API_KEY``,
``TYPESAFE_BASE_URL``), ``openrouter:typesafe/jev-1.13`` (``OPENROUTER_API_KEY``) and
``jev-compatible:http://HOST:PORT`` for self-hosted servers (``llm2jev``, ``laya[serve]``),
which take an optional key (``api_key=`` or ``JEV_COMPATIBLE_API_KEY``) and get uncompressed
bodies.

Every answer is checked before it becomes a probability. A broken answer is a
`JudgeProtocolError`, never a guess. Documented repairs, none of which can change a
probability:

* unknown top-level or answer fields are ignored (``x_`` prefixed or not), and so are the
  Content-Type header, the ``model`` field and the choice ``confidence`` formula;
* a missing ``usage`` is estimated from the request's characters; float token counts are
  rounded (the SDK path instead rejects both, as the SDK itself does);
* a choice distribution that sums to within 0.05 of one (the spec's tolerance) is
  renormalised.

Strict JSON is required: an XSSI guard (``)]}'``) or NaN anywhere in the body is an error,
since the spec requires 200 bodies to be JSON and JSON has no NaN. Faults that only a
comparison of several responses reveals (an answer that depends on the question id, order or
count) cannot be seen in one answer: run ``jevcompat test URL`` against a self-hosted server
before relying on it.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .._errors import (
    JudgeConfigError,
    JudgeProtocolError,
    JudgeRequestError,
    JudgeUnavailable,
    missing_extra,
)
from ._base import (
    BinaryRequest,
    BinaryResult,
    ChoiceRequest,
    ChoiceResult,
    Judge,
    Limits,
    Usage,
    check_binary,
    check_choice,
    estimate_tokens,
)
from ._fleet import FLEET_OPTIONS, FleetTransport, split_urls
from ._http import (
    HttpClient,
    PerLoop,
    Retryable,
    RetryPolicy,
    make_usage,
    parse_json,
    parse_retry_after,
    with_retries,
)
from ._options import HttpJudgeOptions
from ._pacing import Pacer

# how servers word a refused option count: `transformers serve` ("reads at most 26 options for a
# choice question"), a pydantic-validated server ("should have at most 64 items")
_OPTION_LIMIT = re.compile(r"at most (\d+) (?:options|items)")

SYSTEM_ONE_PATH = "/v1/systemone"
JEV_PRICE_PER_MILLION_INPUT = 0.042  # USD, Jev's public price; output is free
JEV_LIMITS = Limits(max_questions=None, max_options=255, max_tokens=64_000)
# llm2jev, Ollama and llama.cpp take up to 64 questions a call; one context may hold more
# candidates, sent as several calls over the same state (prefix-cache friendly)
SELF_HOSTED_LIMITS = Limits(max_questions=None, max_options=255, max_tokens=32_000,
                            questions_per_call=64)
OPENROUTER_BASE_URL = "https://openrouter.ai/api"
CHOICE_TOLERANCE = 0.05  # jevcompat SPEC §5: a distribution sums to 1 ± 0.05
ARGMAX_SLACK = 0.005
CHOICE_ID = "choice"


class _Transport(Protocol):
    async def post(self, body: dict[str, Any]) -> tuple[Any, float]: ...

    async def aclose(self) -> None: ...


class JevJudge(Judge):
    """A judge speaking the System One protocol through some transport."""

    def __init__(
        self,
        model: str,
        transport: _Transport,
        *,
        limits: Limits,
        price_per_million_input: float | None,
        who: str,
        pacer: Pacer | None = None,
    ) -> None:
        self.model = model
        self.limits = limits
        self.price_per_million_input = price_per_million_input
        self.name = who
        self._transport = transport
        self.pacer = pacer

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        questions = list(request.questions)
        if not questions:
            return BinaryResult([], Usage())
        cap = min(filter(None, (self.limits.max_questions, self.limits.questions_per_call,
                                len(questions))))
        parts: list[tuple[list[float], Usage]] = []
        rest = questions
        while rest:
            size, paced = self.pacer.size(request.context, rest, cap) if self.pacer else (cap, False)
            if paced:  # a slow server: one call at a time, each sized to be answered in time
                parts.append(await self._binary_part(request.context, rest[:size]))
                rest = rest[size:]
                continue
            chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
            # more questions than one request takes: parallel requests over the same state, which
            # the protocol promises gives the same answers (questions do not see each other)
            parts.extend(await asyncio.gather(*(self._binary_part(request.context, c) for c in chunks)))
            break
        probabilities = [p for part, _ in parts for p in part]
        usage = sum((u for _, u in parts), Usage())
        return BinaryResult(probabilities, usage)

    async def _binary_part(
        self, context: str, questions: Sequence[str]
    ) -> tuple[list[float], Usage]:
        asked = {f"q{i}": {"type": "noul", "instructions": q} for i, q in enumerate(questions)}
        payload, usage = await self._ask(context, asked)
        if self.pacer is not None:
            self.pacer.observe(context, questions, usage.seconds)
        answers = read_answers(payload, asked, self.name)
        values = [noul_value(answers[qid], qid, self.name) for qid in asked]
        return check_binary(values, len(questions), self.name), usage

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        options = list(request.options)
        _check_options(options, self.limits, self.name)
        if len(options) == 1:
            return ChoiceResult([1.0], Usage())
        criteria: dict[str, None] = dict.fromkeys(options)
        asked = {CHOICE_ID: {"type": "choice", "instructions": request.question,
                             "criteria": criteria}}
        try:
            payload, usage = await self._ask(request.context, asked)
        except JudgeRequestError as exc:
            self._learn_option_limit(exc, len(options))
            raise
        answer = read_answers(payload, asked, self.name)[CHOICE_ID]
        return ChoiceResult(choice_values(answer, options, self.name), usage)

    async def _ask(self, state: str, questions: dict[str, Any]) -> tuple[Any, Usage]:
        body = {"model": self.model, "state": state, "questions": questions}
        estimate = estimate_tokens(state) + sum(estimate_tokens(str(q)) for q in questions.values())
        try:
            payload, seconds = await self._transport.post(body)
        except JudgeUnavailable as exc:  # name what was slow, and what to change
            raise type(exc)(f"{exc} [the call: {len(questions)} question(s), about {estimate:,} "
                            f"tokens of context and questions{self._slow_hint()}]") from exc
        reported = payload.get("usage") if isinstance(payload, dict) else None
        usage = make_usage(reported, estimate, seconds, self.price_per_million_input, self.name)
        return payload, usage

    def _learn_option_limit(self, refusal: JudgeRequestError, sent: int) -> None:
        """A server that reads fewer options than it was sent and says how many (`transformers
        serve`: "reads at most 26 options for a choice question") sets `limits.max_options`, so
        the choice step can ask again with a shortlist it takes, and later queries start there."""
        found = _OPTION_LIMIT.search(str(refusal))
        if found and 2 <= int(found.group(1)) < sent:
            self.limits = replace(self.limits, max_options=int(found.group(1)))

    def _slow_hint(self) -> str:
        paced = (f"calls paced to {self.pacer.seconds:g} s each" if self.pacer is not None
                 else "a slow server (a CPU): pace the calls with --judge-option "
                 "seconds_per_call=SECONDS")
        return (f"; {paced}; more time per attempt with timeout=SECONDS, one call at a time "
                "with concurrency=1, a longer --deadline")

    async def aclose(self) -> None:
        await self._transport.aclose()


# ---------------------------------------------------------------- answer checks


def read_answers(payload: Any, asked: dict[str, Any], who: str) -> dict[str, dict[str, Any]]:
    """The answers, one per asked id and of the asked type, or `JudgeProtocolError`."""
    answers = payload.get("answers") if isinstance(payload, dict) else None
    if not isinstance(answers, dict):
        raise JudgeProtocolError(f"{who}: the response has no 'answers' object")
    missing = [qid for qid in asked if qid not in answers]
    if missing:
        raise JudgeProtocolError(
            f"{who}: no answer for {len(missing)} of {len(asked)} questions "
            f"(e.g. {missing[:3]}); the server did not answer the whole request"
        )
    extra = [qid for qid in answers if qid not in asked]
    if extra:
        raise JudgeProtocolError(f"{who}: answers for questions that were not asked: {extra[:3]}")
    for qid, question in asked.items():
        answer = answers[qid]
        kind = answer.get("type") if isinstance(answer, dict) else None
        if kind != question["type"]:
            raise JudgeProtocolError(
                f"{who}: answer {qid!r} has type {kind!r}, "
                f"the question has type {question['type']!r}"
            )
    return answers


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def noul_value(answer: dict[str, Any], qid: str, who: str) -> float:
    value = _number(answer.get("noul"))
    if value is None:
        raise JudgeProtocolError(f"{who}: answer {qid!r} has noul={answer.get('noul')!r}")
    return value


def choice_values(answer: dict[str, Any], options: list[str], who: str) -> list[float]:
    """The probabilities of `options`, in order, after checking every choice field."""
    probabilities = answer.get("probabilities")
    if not isinstance(probabilities, dict):
        raise JudgeProtocolError(f"{who}: the choice answer has no 'probabilities' object")
    if set(probabilities) != set(options):
        missing = [o for o in options if o not in probabilities][:3]
        unknown = [k for k in probabilities if k not in options][:3]
        raise JudgeProtocolError(
            f"{who}: choice probability keys are not the option names "
            f"(missing {missing}, unexpected {unknown})"
        )
    raw = [_number(probabilities[o]) for o in options]
    if any(v is None for v in raw):
        raise JudgeProtocolError(f"{who}: a choice probability is not a number")
    values = [float(v) for v in raw if v is not None]
    if any(not math.isfinite(v) or v > 1.0 for v in values):
        raise JudgeProtocolError(f"{who}: choice probabilities {values[:5]}… are not probabilities")
    normalised = check_choice(values, len(options), who, tol=CHOICE_TOLERANCE)
    _check_pick(answer, options, values, who)
    _check_confidence(answer, who)
    return normalised


def _check_pick(answer: dict[str, Any], options: list[str], values: list[float], who: str) -> None:
    pick = answer.get("choice")
    if pick not in options:
        raise JudgeProtocolError(f"{who}: the choice {pick!r} is not one of the options")
    if max(values) - values[options.index(pick)] > ARGMAX_SLACK:
        raise JudgeProtocolError(
            f"{who}: the answer picks {pick!r} but gives another option a higher probability"
        )


def _check_confidence(answer: dict[str, Any], who: str) -> None:
    confidence = _number(answer.get("confidence"))
    if confidence is None or not 0.0 <= confidence <= 1.0:
        raise JudgeProtocolError(
            f"{who}: the choice answer's confidence is {answer.get('confidence')!r}, not in [0, 1]"
        )


def _check_options(options: list[str], limits: Limits, who: str) -> None:
    if not options:
        raise JudgeRequestError(f"{who}: a choice request needs at least one option")
    if len(options) > limits.max_options:
        raise JudgeRequestError(
            f"{who}: {len(options)} options; this judge takes at most {limits.max_options} "
            "per choice (set max_options= if the server allows more)"
        )
    if len(set(options)) != len(options):
        raise JudgeRequestError(f"{who}: choice option labels must be distinct")


# ---------------------------------------------------------------- transports


class HttpTransport:
    """System One over our own httpx client (OpenRouter, self-hosted servers)."""

    def __init__(self, client: HttpClient, path: str = SYSTEM_ONE_PATH) -> None:
        self.client = client
        self.path = path

    async def post(self, body: dict[str, Any]) -> tuple[Any, float]:
        return await self.client.post_json(self.path, body)

    async def aclose(self) -> None:
        await self.client.aclose()


class SdkTransport:
    """System One through the official ``typesafe-sdk`` (its retries off: ours apply).

    The SDK sends the request (auth, headers, compression) and parses the answer with its own
    models; its answer is then read again from the raw body by the same checks as every other
    path, so that the numbers and the failures are the same as over plain HTTP.
    """

    def __init__(self, options: dict[str, Any], policy: RetryPolicy, concurrency: int,
                 who: str) -> None:
        self.options = options
        self.policy = policy
        self.who = who
        self._state: PerLoop[tuple[Any, asyncio.Semaphore]] = PerLoop(
            lambda: (self._new_client(), asyncio.Semaphore(concurrency))
        )

    def _new_client(self) -> Any:
        sdk = _import_sdk()
        try:
            return sdk.AsyncTypeSafeClient(retry=sdk.RetryPolicy(max_retries=0),
                                           timeout=self.policy.timeout, **self.options)
        except sdk.TypeSafeError as exc:
            raise JudgeConfigError(f"{self.who}: {exc}") from exc

    async def post(self, body: dict[str, Any]) -> tuple[Any, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = await with_retries(lambda timeout: self._attempt(body, timeout),
                                      self.policy, self.who)
        raw = response.raw_http_response.content
        return parse_json(raw, self.who), loop.time() - start

    async def _attempt(self, body: dict[str, Any], timeout: float) -> Any:
        sdk = _import_sdk()
        client, slots = self._state.get()
        async with slots:
            try:
                return await client.system_one(body["state"], body["questions"],
                                               model=body["model"], timeout=timeout)
            except sdk.TypeSafeError as exc:
                raise _translate_sdk_error(sdk, exc, self.who) from exc

    async def aclose(self) -> None:
        state = self._state.current()
        self._state.forget()
        if state is not None:
            await state[0].aclose()


def _import_sdk() -> Any:
    try:
        import typesafe_sdk
    except ImportError as exc:
        raise missing_extra("typesafe-sdk", "typesafe") from exc
    return typesafe_sdk


def _translate_sdk_error(sdk: Any, exc: Exception, who: str) -> Exception:
    """The SDK's exceptions in our tree (the caller raises it ``from exc``)."""
    if isinstance(exc, sdk.TypeSafeAPIResponseValidationError):
        if isinstance(exc.body, str):  # the SDK keeps a body it could not decode as text
            return JudgeProtocolError(
                f"{who}: the response body is not JSON; it starts {exc.body[:40]!r}"
            )
        return JudgeProtocolError(f"{who}: the answer does not parse: {exc}")
    if isinstance(exc, sdk.TypeSafeAPIError):
        status = int(exc.status)
        if status in (408, 425, 429) or status >= 500:
            return Retryable(f"{who}: {exc}", parse_retry_after(dict(exc.headers)))
        return JudgeRequestError(f"{who}: {exc}", status=status)
    if isinstance(exc, sdk.TypeSafeAPIConnectionError):
        return Retryable(f"{who}: {exc}")
    return JudgeConfigError(f"{who}: {exc}")


# ---------------------------------------------------------------- factories


@dataclass(frozen=True)
class TypesafeOptions(HttpJudgeOptions):
    compression: Any = None  # the SDK's request compression (false turns it off)


@dataclass(frozen=True)
class SelfHostedOptions(HttpJudgeOptions):
    model: str = "jev-latest"
    # a slow server (a CPU): the most one call should take; calls are sized from its measured
    # speed (None: no pacing): see decisionrag._judges._pacing
    seconds_per_call: float | None = None
    balance: float | None = None  # fleet: see decisionrag._judges._fleet
    cooldown: float | None = None
    max_cooldown: float | None = None


def _required_key(given: str | None, env: str, who: str) -> str:
    key = given or os.environ.get(env, "").strip()
    if not key:
        raise JudgeConfigError(f"{who}: no API key: set the environment variable {env} "
                               "(or pass api_key=...)")
    return str(key)


def _jev_price(model: str) -> float | None:
    return JEV_PRICE_PER_MILLION_INPUT if "jev" in model.lower() else None


def typesafe_judge(model: str, **options: Any) -> JevJudge:
    """Jev through the official SDK: ``typesafe:jev-1.13`` (``TYPESAFE_API_KEY``)."""
    who = f"typesafe:{model}" if model else "typesafe"
    model = model or os.environ.get("TYPESAFE_DEFAULT_MODEL", "").strip() or "jev-latest"
    given = TypesafeOptions.parse(options, who)
    key = _required_key(given.api_key, "TYPESAFE_API_KEY", who)
    sdk_options: dict[str, Any] = {"api_key": key, "model": model}
    base_url = given.base_url or os.environ.get("TYPESAFE_BASE_URL", "").strip()
    if base_url:
        sdk_options["base_url"] = base_url
    if "compression" in given.given:
        sdk_options["compression"] = _compression(given.compression)
    _import_sdk()
    transport = SdkTransport(sdk_options, given.policy(), given.concurrency, who)
    return JevJudge(model, transport, limits=given.limits(JEV_LIMITS),
                    price_per_million_input=given.price(_jev_price(model)), who=who)


def _compression(value: Any) -> Any:
    return False if value in (False, "false", "off", "none", "0", 0) else value


def openrouter_judge(model: str, **options: Any) -> JevJudge:
    """Jev on OpenRouter: ``openrouter:typesafe/jev-1.13`` (``OPENROUTER_API_KEY``)."""
    who = f"openrouter:{model}"
    if not model:
        raise JudgeConfigError("openrouter: name the model, e.g. openrouter:typesafe/jev-1.13")
    given = HttpJudgeOptions.parse(options, who)
    key = _required_key(given.api_key, "OPENROUTER_API_KEY", who)
    base_url = system_one_root(given.base_url
                               or os.environ.get("OPENROUTER_BASE_URL", "").strip()
                               or OPENROUTER_BASE_URL)
    headers = {"Authorization": f"Bearer {key}", "X-Title": "decisionrag"}
    client = HttpClient(base_url, headers=headers, policy=given.policy(),
                        concurrency=given.concurrency, who=who)
    return JevJudge(model, HttpTransport(client), limits=given.limits(JEV_LIMITS),
                    price_per_million_input=given.price(_jev_price(model)), who=who)


def system_one_root(url: str) -> str:
    """The root that ``/v1/systemone`` is appended to: ``http://h:8000``, ``http://h:8000/v1``
    and ``http://h:8000/v1/systemone`` all name the same server (no ``/v1/v1``)."""
    root = url.strip().rstrip("/").removesuffix(SYSTEM_ONE_PATH)
    return root.removesuffix("/v1").rstrip("/")


def jev_compatible_judge(url: str, **options: Any) -> JevJudge:
    """A self-hosted System One server: ``jev-compatible:http://127.0.0.1:8000``."""
    who = f"jev-compatible:{url}"
    if not url.startswith(("http://", "https://")):
        raise JudgeConfigError(f"{who}: give the server's root URL, e.g. "
                               "jev-compatible:http://127.0.0.1:8000")
    fleet = [system_one_root(u) for u in split_urls(url)] if "," in url else []
    root = system_one_root(url)
    given = SelfHostedOptions.parse(options, who)
    model = given.model
    policy, concurrency = given.policy(), given.concurrency
    limits, price = given.limits(SELF_HOSTED_LIMITS), given.price(None)
    key = given.api_key or os.environ.get("JEV_COMPATIBLE_API_KEY", "").strip()
    fleet_options = {name: float(getattr(given, name)) for name in FLEET_OPTIONS
                     if name in given.given}
    # no Authorization header without a key: some servers refuse one when auth is off
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport: _Transport
    if fleet:
        transport = FleetTransport(fleet, path=SYSTEM_ONE_PATH, headers=headers, policy=policy,
                                   concurrency=concurrency, who=who, **fleet_options)
    else:
        client = HttpClient(root, headers=headers, policy=policy, concurrency=concurrency, who=who)
        transport = HttpTransport(client)
    pacer = Pacer(given.seconds_per_call) if given.seconds_per_call else None
    return JevJudge(model, transport, limits=limits, price_per_million_input=price, who=who,
                    pacer=pacer)
