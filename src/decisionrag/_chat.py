"""The OpenAI-compatible chat provider: ``POST {base}/chat/completions`` through `decisionrag._http`.

Shared by every chat user (the group describer, the answer model), so retries, deadlines,
concurrency and error translation are those of the one HTTP layer. The caller chooses the
exception family (`JUDGE_ERRORS` for the describer, `ANSWER_ERRORS` for answers).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from ._http import (
    DEFAULT_CONCURRENCY,
    JUDGE_ERRORS,
    ErrorFamily,
    HttpClient,
    RetryPolicy,
    dump_json,
    parse_json,
    server_message,
)

COMPLETIONS_PATH = "/chat/completions"


@dataclass(frozen=True, slots=True)
class ChatReply:
    """The first choice's text and what the server reported about the call."""

    text: str
    input_tokens: int | None
    output_tokens: int | None
    seconds: float


def chat_base_url(url: str) -> str:
    """``http://host/v1`` or ``http://host/v1/chat/completions`` -> ``http://host/v1``."""
    url = url.strip().rstrip("/")
    return url[: -len(COMPLETIONS_PATH)] if url.endswith(COMPLETIONS_PATH) else url


def bearer(api_key: str | None, env: str = "OPENAI_API_KEY") -> dict[str, str]:
    """An ``Authorization`` header from `api_key` or the environment; none when neither is set."""
    key = api_key if api_key is not None else os.environ.get(env, "").strip()
    return {"Authorization": f"Bearer {key}"} if key else {}


class ChatClient:
    """One model behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None,
        policy: RetryPolicy | None = None, concurrency: int = DEFAULT_CONCURRENCY,
        who: str | None = None, errors: ErrorFamily = JUDGE_ERRORS,
    ) -> None:
        self.base_url = chat_base_url(base_url)
        self.model = model
        self.who = who or f"chat model {model} at {self.base_url}"
        self.errors = errors
        self.http = HttpClient(self.base_url, headers=bearer(api_key), policy=policy,
                               concurrency=concurrency, who=self.who, errors=errors)

    @property
    def attempts(self) -> int:
        """Requests sent so far, retries included."""
        return self.http.attempts

    async def complete(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None,
        temperature: float = 0.0, **extra: Any,
    ) -> ChatReply:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages),
                                "temperature": temperature, **extra}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        payload, seconds = await self.http.post_json(COMPLETIONS_PATH, body)
        usage = payload.get("usage") if isinstance(payload, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return ChatReply(self._content(payload), _count(usage.get("prompt_tokens")),
                         _count(usage.get("completion_tokens")), seconds)

    async def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None,
        temperature: float = 0.0, **extra: Any,
    ) -> AsyncIterator[ChatReply]:
        """The reply as it is written: server-sent ``data:`` chunks, each a `ChatReply` with
        the new text; the server's token counts ride on the chunk that reports them
        (``stream_options.include_usage``). A stream that stops before ``[DONE]`` or a
        finish reason, or that reports an error, is the family's `unavailable` error."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages),
                                "temperature": temperature, "stream": True,
                                "stream_options": {"include_usage": True}, **extra}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        start = time.perf_counter()
        finished = False
        async for line in self.http.post_lines(COMPLETIONS_PATH, body):
            if not line.startswith("data:"):
                continue  # blank separators, ": keep-alive" comments, event: and id: fields
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return
            chunk = parse_json(data.encode("utf-8"), self.who, self.errors)
            piece, done = self._piece(chunk, time.perf_counter() - start)
            finished = finished or done
            if piece.text or piece.input_tokens is not None or piece.output_tokens is not None:
                yield piece
        if not finished:
            raise self.errors.unavailable(f"{self.who}: the stream ended before the reply was finished")

    def _piece(self, chunk: Any, seconds: float) -> tuple[ChatReply, bool]:
        if not isinstance(chunk, dict):
            raise self.errors.protocol(f"{self.who}: a stream chunk is not an object: {str(chunk)[:200]}")
        if "error" in chunk:
            detail = server_message(dump_json(chunk))
            raise self.errors.unavailable(f"{self.who}: the server failed mid-stream: {detail}")
        usage = chunk["usage"] if isinstance(chunk.get("usage"), dict) else {}
        choices = chunk.get("choices") or []
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        delta = first["delta"] if isinstance(first.get("delta"), dict) else {}
        text = self._text(delta.get("content"), "a stream chunk's choices[0].delta.content")
        return (ChatReply(text, _count(usage.get("prompt_tokens")),
                          _count(usage.get("completion_tokens")), seconds),
                first.get("finish_reason") is not None)

    def _content(self, payload: Any) -> str:
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise self.errors.protocol(
                f"{self.who}: no choices[0].message.content in {str(payload)[:200]}"
            ) from exc
        return self._text(content, "choices[0].message.content")

    def _text(self, content: Any, where: str) -> str:
        """The text of a message's `content`: a string, null (nothing), or a list of
        ``{"type": "text", "text": ...}`` parts; anything else is the family's protocol error
        (never its Python repr shown as an answer)."""
        if content is None or isinstance(content, str):
            return content or ""
        if isinstance(content, list) and all(
                isinstance(part, dict) and part.get("type") == "text"
                and isinstance(part.get("text"), str) for part in content):
            return "".join(part["text"] for part in content)
        shown = json.dumps(content, ensure_ascii=False, default=str)[:120]
        raise self.errors.protocol(f"{self.who}: {where} is {_kind(content)}, not text: {shown}")

    async def aclose(self) -> None:
        await self.http.aclose()


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
