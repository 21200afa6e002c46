"""``local:MODEL_PATH_OR_ID`` — any causal language model read out as a decision model.

No text is generated. For a binary request the judge reads the next-token logits of the
single-token answers " Yes" and " No" after each question and returns
P(yes) = softmax([logit_yes, logit_no])[0]; for a choice request it lists the options under
letter labels (A, B, …) and returns the softmax over the label tokens' logits.

Prompt template (plain text; base models follow it better than a chat template)::

    {context}                      <- shared context, encoded once per request
                                   <- blank line
    Question: {question}           <- binary: one segment per question
    Answer (Yes or No):            <- P(yes) is read at this last token

    {context}

    Question: {question}           <- choice: one segment
    A. {option 1}
    B. {option 2}
    Answer (one letter):           <- P(option) = softmax over the label tokens " A", " B", …

The segments are tokenized separately and concatenated (with the tokenizer's BOS, if it
uses one, in front of the context). The answer tokens are found from the tokenizer: the
token that " Yes" adds after the prompt's last line, else a single-token "Yes"; tokenizers
without a leading-space variant (WordPiece, SentencePiece) are handled the same way.

**Shared context, independent questions.** The context is encoded once and its key/value
cache kept; the questions of a request are then packed into one sequence after it, each
question restarting at the position right after the context, under a block attention mask:
a question token sees the context and the earlier tokens of its own question, never another
question. Every answer is therefore exactly what a separate forward pass over
context + question would give (up to float rounding), at the cost of one context encoding
plus the question tokens. Packed chunks hold at most ``max_batch_tokens`` question tokens;
every chunk but the last works on a copy of the context cache.

Limits: no question limit (chunks are formed internally), at most 26 options (letters),
``max_tokens`` = the model's maximum positions (context + one question must fit).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import string
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import JudgeConfigError, JudgeRequestError, missing_extra
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
)
from ._options import JudgeOptions

BINARY_SUFFIX = "Answer (Yes or No):"
CHOICE_SUFFIX = "Answer (one letter):"
CHOICE_LABELS = tuple(string.ascii_uppercase)
DEFAULT_MAX_BATCH_TOKENS = 2048


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise missing_extra("torch", "local") from exc
    return torch


@dataclass(frozen=True, slots=True)
class Readout:
    """Logits of the target tokens after each question, and the tokens that were read."""

    logits: Any  # torch.Tensor [questions, targets], float32 on CPU
    input_tokens: int


def answer_token(tokenizer: Any, prompt_end: str, word: str) -> int | None:
    """The single token `word` is written as right after `prompt_end`, or None."""
    base = tokenizer.encode(prompt_end, add_special_tokens=False)
    for variant in (" " + word, word):
        ids = tokenizer.encode(prompt_end + variant, add_special_tokens=False)
        if len(ids) == len(base) + 1 and ids[: len(base)] == base:
            return int(ids[-1])
    for variant in (" " + word, word):
        ids = tokenizer.encode(variant, add_special_tokens=False)
        if len(ids) == 1:
            return int(ids[0])
    return None


def _binary_tokens(tokenizer: Any) -> tuple[int, int]:
    yes = answer_token(tokenizer, BINARY_SUFFIX, "Yes")
    no = answer_token(tokenizer, BINARY_SUFFIX, "No")
    if yes is None or no is None or yes == no:
        raise JudgeConfigError("local judge: the tokenizer has no single-token 'Yes'/'No' answers")
    return yes, no


def _label_tokens(tokenizer: Any) -> list[int]:
    """Token ids of the labels A, B, … (stops at the first label without a distinct token)."""
    tokens: list[int] = []
    for label in CHOICE_LABELS:
        token = answer_token(tokenizer, CHOICE_SUFFIX, label)
        if token is None or token in tokens:
            break
        tokens.append(token)
    return tokens


def _block_mask(lengths: Sequence[int], context_length: int, dtype: Any, device: Any) -> Any:
    """Additive 4-D mask [1, 1, Q, C+Q]: each question sees the context and its own past."""
    torch = _torch()
    total = sum(lengths)
    segment = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(list(lengths)))
    rows = torch.arange(total)
    own = (segment[:, None] == segment[None, :]) & (rows[:, None] >= rows[None, :])
    allowed = torch.cat([torch.ones(total, context_length, dtype=torch.bool), own], dim=1)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def _chunks(lengths: Sequence[int], budget: int) -> list[range]:
    """Consecutive question index ranges holding at most `budget` tokens (at least one each)."""
    chunks: list[range] = []
    start, used = 0, 0
    for index, length in enumerate(lengths):
        if index > start and used + length > budget:
            chunks.append(range(start, index))
            start, used = index, 0
        used += length
    if start < len(lengths):
        chunks.append(range(start, len(lengths)))
    return chunks


class LocalJudge(Judge):
    """A causal LM from `transformers` answering yes/no and choice questions by its logits."""

    computes_here = True

    def __init__(self, model: Any, tokenizer: Any, *,
                 max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, name: str = "local") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.max_batch_tokens = max(1, int(max_batch_tokens))
        self.yes_token, self.no_token = _binary_tokens(tokenizer)
        self.label_tokens = _label_tokens(tokenizer)
        self.max_positions = _max_positions(model.config)
        self.sliding_window = _sliding_window(model.config)
        self.limits = Limits(max_questions=None, max_options=len(self.label_tokens),
                             max_tokens=self.max_positions)
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._keeps_logits = "logits_to_keep" in params
        self._lock = threading.Lock()
        self._bos = _bos_prefix(tokenizer)

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    # --- tokenization -------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        # verbose=False: the model's max positions are checked here, not by the tokenizer
        ids = self.tokenizer.encode(text, add_special_tokens=False, verbose=False)
        return [int(i) for i in ids]

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def context_ids(self, context: str) -> list[int]:
        return [*self._bos, *self.encode(context.rstrip() + "\n\n")]

    def binary_question_ids(self, question: str) -> list[int]:
        return self.encode(f"Question: {question.strip()}\n{BINARY_SUFFIX}")

    def choice_question_ids(self, question: str, options: Sequence[str]) -> list[int]:
        labelled = zip(CHOICE_LABELS, options, strict=False)
        lines = [f"{label}. {option}" for label, option in labelled]
        return self.encode("\n".join([f"Question: {question.strip()}", *lines, CHOICE_SUFFIX]))

    # --- the readout ----------------------------------------------------------------------

    def readout(self, context: list[int], questions: Sequence[list[int]],
                targets: Sequence[int]) -> Readout:
        """Target-token logits after each question, all questions sharing one context encoding."""
        self._check_lengths(context, questions)
        torch = _torch()
        with self._lock, torch.inference_mode():
            cache = self._encode_context(context)
            lengths = [len(q) for q in questions]
            parts = []
            if self.sliding_window is not None and len(context) + max(lengths) > self.sliding_window:
                # layers that see only a window of past tokens build their own masks: packed
                # questions under a custom block mask would not fit them, so each question
                # reads the shared context's cache alone
                for number, question in enumerate(questions):
                    last = number == len(questions) - 1
                    alone = cache if cache is None or last else copy.deepcopy(cache)
                    parts.append(self._read_alone(len(context), alone, question, targets))
                return Readout(torch.cat(parts, dim=0), len(context) + sum(lengths))
            chunks = _chunks(lengths, self.max_batch_tokens)
            for number, chunk in enumerate(chunks):
                # a forward pass appends to the cache: every chunk but the last gets a copy
                last = number == len(chunks) - 1
                chunk_cache = cache if cache is None or last else copy.deepcopy(cache)
                batch = [questions[i] for i in chunk]
                parts.append(self._read_chunk(len(context), chunk_cache, batch, targets))
        logits = torch.cat(parts, dim=0)
        return Readout(logits, len(context) + sum(lengths))

    def plain_readout(self, sequence: list[int], targets: Sequence[int]) -> Any:
        """Target-token logits after `sequence` from one ordinary forward pass (the reference)."""
        torch = _torch()
        with self._lock, torch.inference_mode():
            ids = torch.tensor([sequence], device=self.device)
            keep = {"logits_to_keep": 1} if self._keeps_logits else {}
            logits = self.model(input_ids=ids, use_cache=False, **keep).logits[0, -1]
        return logits[list(targets)].float().cpu()

    def _check_lengths(self, context: list[int], questions: Sequence[list[int]]) -> None:
        if any(not q for q in questions):
            raise JudgeRequestError("local judge: a question encodes to no tokens")
        longest = max((len(q) for q in questions), default=0)
        if self.max_positions is not None and len(context) + longest > self.max_positions:
            raise JudgeRequestError(
                f"local judge: context ({len(context)} tokens) + question ({longest} tokens) "
                f"exceed the model's {self.max_positions} positions"
            )

    def _new_cache(self) -> Any:
        try:
            from transformers import DynamicCache
        except ImportError as exc:
            raise missing_extra("transformers", "local") from exc
        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers < 4.56 takes no config
            return DynamicCache()

    def _encode_context(self, context: list[int]) -> Any:
        if not context:
            return None
        torch = _torch()
        cache = self._new_cache()
        ids = torch.tensor([context], device=self.device)
        kwargs = {self._cache_kwarg: cache}
        if self._keeps_logits:
            kwargs["logits_to_keep"] = 1
        self.model(input_ids=ids, use_cache=True, **kwargs)
        return cache

    def _read_chunk(self, offset: int, cache: Any, questions: list[list[int]],
                    targets: Sequence[int]) -> Any:
        torch = _torch()
        device, lengths = self.device, [len(q) for q in questions]
        ids = torch.tensor([[t for q in questions for t in q]], device=device)
        positions = torch.cat([torch.arange(offset, offset + n) for n in lengths])[None].to(device)
        mask = _block_mask(lengths, offset, self.model.dtype, device)
        last = torch.cumsum(torch.tensor(lengths), dim=0) - 1
        kwargs: dict[str, Any] = {self._cache_kwarg: cache} if cache is not None else {}
        if self._keeps_logits:
            kwargs["logits_to_keep"] = last.to(device)
        out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask,
                         use_cache=cache is not None, **kwargs)
        logits = out.logits[0] if self._keeps_logits else out.logits[0, last.to(device)]
        return logits[:, list(targets)].float().cpu()

    def _read_alone(self, offset: int, cache: Any, question: list[int],
                    targets: Sequence[int]) -> Any:
        """Target-token logits after one question read after the context's cache, with the
        model's own masks (an ordinary incremental forward pass)."""
        torch = _torch()
        ids = torch.tensor([question], device=self.device)
        positions = torch.arange(offset, offset + len(question))[None].to(self.device)
        kwargs: dict[str, Any] = {self._cache_kwarg: cache} if cache is not None else {}
        if self._keeps_logits:
            kwargs["logits_to_keep"] = 1
        out = self.model(input_ids=ids, position_ids=positions, use_cache=cache is not None,
                         **kwargs)
        return out.logits[0, -1:][:, list(targets)].float().cpu()

    # --- the contract -----------------------------------------------------------------------

    def _binary(self, request: BinaryRequest) -> BinaryResult:
        start = time.perf_counter()
        questions = [self.binary_question_ids(q) for q in request.questions]
        result = self.readout(self.context_ids(request.context), questions,
                              (self.yes_token, self.no_token))
        p_yes = _torch().softmax(result.logits, dim=-1)[:, 0].tolist()
        return BinaryResult(check_binary(p_yes, len(questions), self.name),
                            self._usage(result.input_tokens, start))

    def _choice(self, request: ChoiceRequest) -> ChoiceResult:
        if len(request.options) > self.limits.max_options:
            raise JudgeRequestError(
                f"local judge: {len(request.options)} options, at most {self.limits.max_options}"
            )
        if not request.options:
            raise JudgeRequestError("local judge: a choice needs at least one option")
        start = time.perf_counter()
        question = self.choice_question_ids(request.question, request.options)
        targets = self.label_tokens[: len(request.options)]
        result = self.readout(self.context_ids(request.context), [question], targets)
        probabilities = _torch().softmax(result.logits[0], dim=-1).tolist()
        return ChoiceResult(check_choice(probabilities, len(targets), self.name),
                            self._usage(result.input_tokens, start))

    def _usage(self, tokens: int, start: float) -> Usage:
        return Usage(requests=1, input_tokens=tokens, seconds=time.perf_counter() - start,
                     cost_usd=self.cost(tokens))

    async def binary(self, request: BinaryRequest) -> BinaryResult:
        if not request.questions:
            return BinaryResult([], Usage())
        import asyncio

        return await asyncio.to_thread(self._binary, request)

    async def choice(self, request: ChoiceRequest) -> ChoiceResult:
        import asyncio

        return await asyncio.to_thread(self._choice, request)


def _bos_prefix(tokenizer: Any) -> list[int]:
    """[BOS] when the tokenizer puts one in front of a text by itself, else []."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return []
    ids = tokenizer.encode("x", add_special_tokens=True)
    return [int(bos)] if ids and int(ids[0]) == int(bos) else []


def _sliding_window(config: Any) -> int | None:
    """The attention window of a model whose layers (some or all) see only the last N
    tokens (Gemma 3, Mistral), else None."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    window = getattr(text, "sliding_window", None)
    if not window or getattr(text, "use_sliding_window", True) is False:
        return None
    kinds = getattr(text, "layer_types", None)
    if kinds is not None and "sliding_attention" not in kinds:
        return None
    return int(window)


def _max_positions(config: Any) -> int | None:
    for attribute in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _resolve_device(device: str | None) -> str:
    if device:
        return device
    return "cuda" if _torch().cuda.is_available() else "cpu"


def _resolve_dtype(dtype: str | None, device: str) -> Any:
    torch = _torch()
    name = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise JudgeConfigError(f"local judge: unknown dtype {name!r} (e.g. float32, bfloat16)")
    return value


@dataclasses.dataclass(frozen=True)
class LocalOptions(JudgeOptions):
    """The ``local`` judge's options: `device` (default CUDA when available), `dtype`
    (bfloat16 on CUDA, float32 on CPU), the question tokens per packed chunk, the attention
    implementation (one that takes a custom 4-D mask: ``sdpa`` or ``eager``)."""

    device: str | None = None
    dtype: str | None = None
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    attn_implementation: str = "sdpa"
    trust_remote_code: bool = False
    price_per_million_input: float | None = None


def local_judge(model: str, **options: Any) -> LocalJudge:
    """Load ``local:MODEL_PATH_OR_ID``: a folder or hub id of a causal LM and its tokenizer,
    with `LocalOptions` (typed: ``trust_remote_code="false"`` is False)."""
    if not model:
        raise JudgeConfigError("local judge: name a model folder or id, e.g. local:/models/qwen3")
    given = LocalOptions.parse(options, f"local:{model}")
    try:
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise missing_extra("transformers", "local") from exc
    where = _resolve_device(given.device)
    torch_dtype = _resolve_dtype(given.dtype, where)
    dtype_kwarg = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=given.trust_remote_code)
        lm: Any = AutoModelForCausalLM.from_pretrained(
            model, attn_implementation=given.attn_implementation,
            trust_remote_code=given.trust_remote_code, **{dtype_kwarg: torch_dtype},
        )
    except (OSError, ValueError) as exc:
        raise JudgeConfigError(f"local judge: cannot load {model!r}: {exc}") from exc
    lm = lm.to(where)
    judge = LocalJudge(lm, tokenizer, max_batch_tokens=given.max_batch_tokens,
                       name=f"local:{model}")
    if given.price_per_million_input is not None:
        judge.price_per_million_input = given.price_per_million_input
    return judge
