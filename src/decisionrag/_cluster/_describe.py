"""One-sentence group descriptions: an OpenAI-compatible chat endpoint, or an offline
extractive fallback (distinctive terms and the most typical titles).

The chat describer uses the paper's prompt (App. B.5) with the group's titles, most typical
first (at most 300). Each answer is cached on disk as soon as it arrives, keyed by (model,
prompt, titles), so a rerun after a failure only asks for the groups still missing.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._chat import ChatClient
from .._errors import InputError, JudgeProtocolError, JudgeUnavailable
from .._files import ContentCache, content_key
from .._http import RetryPolicy
from .._progress import Step
from .._sync import run_sync

PAPER_PROMPT = (
    "Write one sentence (at most 30 words) describing what the pages in this group are about. "
    "Name the main kinds of subjects it covers, including the less typical ones, so that a "
    "reader can tell whether a given Wikipedia page would belong to this group."
)
MAX_TITLES = 300
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class GroupSketch:
    """What a describer sees of a group: its titles (most typical first) and the terms
    that set it apart from its sibling groups."""

    key: str
    titles: tuple[str, ...]
    terms: tuple[str, ...]
    size: int


class Describer(Protocol):
    name: str

    def describe(self, groups: Sequence[GroupSketch], progress: bool = False) -> list[str]:
        """One description per group, in order."""
        ...


class ExtractiveDescriber:
    """Offline: "Topics: a, b, c — typical pages: X; Y; Z" from terms and typical titles."""

    name = "extractive"

    def __init__(self, n_terms: int = 10, n_titles: int = 8) -> None:
        self.n_terms = n_terms
        self.n_titles = n_titles

    def describe(self, groups: Sequence[GroupSketch], progress: bool = False) -> list[str]:
        return [self.describe_one(group) for group in groups]

    def describe_one(self, group: GroupSketch) -> str:
        titles = [t for t in group.titles if t][: self.n_titles]
        parts = []
        if group.terms:
            parts.append("Topics: " + ", ".join(group.terms[: self.n_terms]))
        if titles:
            more = " …" if group.size > len(titles) else ""
            parts.append("typical pages: " + "; ".join(titles) + more)
        return " — ".join(parts) or f"{group.size} pages"


class ChatDescriber:
    """Descriptions written by a model behind an OpenAI-compatible ``/chat/completions``
    (the shared chat provider, `decisionrag._chat`)."""

    def __init__(
        self, url: str, model: str, *, api_key: str | None = None, prompt: str = PAPER_PROMPT,
        concurrency: int = 8, timeout: float = 120.0, retries: int = 3,
        max_titles: int = MAX_TITLES, cache: str | os.PathLike[str] | None = None,
        use_cache: bool = True, max_tokens: int = 200,
    ) -> None:
        if not model:
            raise InputError("a describe URL needs a model name too (--describe-model)")
        self.url = chat_url(url)
        self.model = model
        self.name = f"chat:{model}"
        self.prompt = prompt
        self.max_titles = max_titles
        self.max_tokens = max_tokens
        policy = RetryPolicy(max_attempts=max(1, retries), timeout=timeout,
                             deadline=max(timeout, 180.0) * max(1, retries))
        self.chat = ChatClient(self.url, model, api_key=api_key, policy=policy,
                               concurrency=max(1, concurrency), who=f"describer {self.url}")
        self.cache = ContentCache("descriptions", cache) if use_cache else None
        self.cache_hits = 0

    @property
    def requests(self) -> int:
        """Requests sent to the endpoint, retries included."""
        return self.chat.attempts

    def describe(self, groups: Sequence[GroupSketch], progress: bool = False) -> list[str]:
        return run_sync(self.describe_async(groups, progress))

    async def describe_async(
        self, groups: Sequence[GroupSketch], progress: bool = False
    ) -> list[str]:
        results: list[str | None] = [self._cached(group) for group in groups]
        self.cache_hits += sum(r is not None for r in results)
        missing = [i for i, r in enumerate(results) if r is None]
        bar = Step("describing groups", len(groups), "groups", enabled=progress).__enter__()
        bar.advance(len(groups) - len(missing))

        async def one(index: int) -> None:
            results[index] = await self._ask(groups[index])
            bar.advance(1)

        try:
            await _gather_all([one(i) for i in missing])
        finally:
            bar.close()
            await self.chat.aclose()
        return [r or "" for r in results]

    def message(self, group: GroupSketch) -> str:
        titles = "\n".join(t for t in group.titles[: self.max_titles] if t)
        return f"{self.prompt}\n\nPage titles (most typical first):\n{titles}"

    def _key(self, group: GroupSketch) -> str:
        return content_key(self.model, self.prompt, group.titles[: self.max_titles])

    def _cached(self, group: GroupSketch) -> str | None:
        entry = None if self.cache is None else self.cache.read_json(self._key(group))
        if not isinstance(entry, dict) or not isinstance(entry.get("description"), str):
            return None  # absent or damaged: asked again
        return str(entry["description"])

    def _store(self, group: GroupSketch, description: str) -> None:
        if self.cache is not None:
            self.cache.write_json(self._key(group), {"description": description,
                                                     "model": self.model, "group": group.key})

    async def _ask(self, group: GroupSketch) -> str:
        messages = [{"role": "user", "content": self.message(group)}]
        try:
            reply = await self.chat.complete(messages, max_tokens=self.max_tokens)
        except JudgeUnavailable as exc:
            raise JudgeUnavailable(f"{exc} (group {group.key}); rerun to resume, described "
                                   "groups are cached") from exc
        description = clean_description(reply.text, self.url)
        self._store(group, description)
        return description


async def _gather_all(tasks: Sequence[Any]) -> None:
    """Run all tasks; on the first failure let the others finish (their answers are cached),
    then raise that failure."""
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def chat_url(url: str) -> str:
    """``http://host/v1`` or a full ``…/chat/completions`` URL -> the completions URL."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InputError(f"describe URL {url!r} must start with http:// or https://")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def clean_description(content: str, url: str) -> str:
    """The one-sentence description in a chat answer, without <think> blocks or quotes."""
    text = " ".join(_THINK.sub("", content).split()).strip().strip('"')
    if not text:
        raise JudgeProtocolError(f"describer {url}: empty description")
    return text


def make_describer(
    url: str | None = None, model: str | None = None, *, api_key: str | None = None,
    prompt: str | None = None, concurrency: int = 8, cache: str | os.PathLike[str] | None = None,
) -> Describer:
    """The chat describer when a model is named (URL: `url` or $OPENAI_BASE_URL) or a URL is
    given; otherwise the offline extractive describer."""
    if not url and not model:
        return ExtractiveDescriber()
    url = url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise InputError("--describe-model needs an endpoint: --describe-url or OPENAI_BASE_URL")
    return ChatDescriber(url, model or "", api_key=api_key, prompt=prompt or PAPER_PROMPT,
                         concurrency=concurrency, cache=cache)
