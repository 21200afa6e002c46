"""One-sentence group descriptions: an OpenAI-compatible chat endpoint, or an offline
extractive fallback (distinctive terms and the most typical titles).

The chat describer uses the paper's prompt (App. B.5) with the group's titles, most typical
first (at most 300). Each answer is cached on disk as soon as it arrives, keyed by (model,
prompt, titles), so a rerun after a failure only asks for the groups still missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .._errors import InputError, JudgeProtocolError, JudgeRequestError, JudgeUnavailable
from .._sync import run_sync
from ._embedding import cache_dir

PAPER_PROMPT = (
    "Write one sentence (at most 30 words) describing what the pages in this group are about. "
    "Name the main kinds of subjects it covers, including the less typical ones, so that a "
    "reader can tell whether a given Wikipedia page would belong to this group."
)
MAX_TITLES = 300
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
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
    """Descriptions written by a model behind an OpenAI-compatible ``/chat/completions``."""

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
        self.api_key = api_key
        self.prompt = prompt
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.retries = max(1, retries)
        self.max_titles = max_titles
        self.max_tokens = max_tokens
        self.cache_folder = cache_dir(cache) / "descriptions" if use_cache else None
        self.requests = 0
        self.cache_hits = 0

    def describe(self, groups: Sequence[GroupSketch], progress: bool = False) -> list[str]:
        return run_sync(self.describe_async(groups, progress))

    async def describe_async(
        self, groups: Sequence[GroupSketch], progress: bool = False
    ) -> list[str]:
        import httpx
        from tqdm import tqdm

        results: list[str | None] = [self._cached(group) for group in groups]
        self.cache_hits += sum(r is not None for r in results)
        missing = [i for i, r in enumerate(results) if r is None]
        bar = tqdm(total=len(groups), initial=len(groups) - len(missing), desc="describing groups",
                   unit="group", disable=not progress)
        limit = asyncio.Semaphore(self.concurrency)
        async with httpx.AsyncClient(timeout=self.timeout, headers=self._headers()) as client:
            async def one(index: int) -> None:
                async with limit:
                    results[index] = await self._ask(client, groups[index])
                    bar.update(1)

            try:
                await _gather_all([one(i) for i in missing])
            finally:
                bar.close()
        return [r or "" for r in results]

    def _headers(self) -> dict[str, str]:
        key = self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def message(self, group: GroupSketch) -> str:
        titles = "\n".join(t for t in group.titles[: self.max_titles] if t)
        return f"{self.prompt}\n\nPage titles (most typical first):\n{titles}"

    def _cache_path(self, group: GroupSketch) -> Path | None:
        if self.cache_folder is None:
            return None
        digest = hashlib.sha256(json.dumps(
            [self.model, self.prompt, list(group.titles[: self.max_titles])]).encode()).hexdigest()
        return self.cache_folder / f"{digest[:32]}.json"

    def _cached(self, group: GroupSketch) -> str | None:
        path = self._cache_path(group)
        if path is None or not path.is_file():
            return None
        try:
            return str(json.loads(path.read_text(encoding="utf-8"))["description"])
        except (ValueError, KeyError, OSError):
            return None  # a damaged entry is simply asked again

    def _store(self, group: GroupSketch, description: str) -> None:
        path = self._cache_path(group)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.stem, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"description": description, "model": self.model, "group": group.key}, handle)
        os.replace(tmp, path)

    async def _ask(self, client: Any, group: GroupSketch) -> str:
        payload = {
            "model": self.model, "temperature": 0.0, "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": self.message(group)}],
        }
        answer = await self._post(client, payload, group.key)
        description = parse_answer(answer, self.url)
        self._store(group, description)
        return description

    async def _post(self, client: Any, payload: dict[str, Any], key: str) -> Any:
        import httpx

        problem = ""
        for attempt in range(self.retries):
            if attempt:
                await asyncio.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
            try:
                self.requests += 1
                response = await client.post(self.url, json=payload)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise JudgeRequestError(f"describer {self.url} refused group {key}: HTTP "
                                        f"{response.status_code}: {response.text[:300]}",
                                        status=response.status_code)
            try:
                return response.json()
            except ValueError as exc:
                raise JudgeProtocolError(f"describer {self.url}: answer is not JSON") from exc
        raise JudgeUnavailable(f"describer {self.url}: group {key} failed after {self.retries} "
                               f"tries ({problem}); rerun to resume, described groups are cached")


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


def parse_answer(answer: Any, url: str) -> str:
    """The one-sentence description inside a chat-completions answer."""
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise JudgeProtocolError(f"describer {url}: no choices[0].message.content") from exc
    text = " ".join(_THINK.sub("", str(content or "")).split()).strip().strip('"')
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
