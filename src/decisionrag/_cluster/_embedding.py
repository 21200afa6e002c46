"""What a document looks like to the clusterer, and its embedding (cached on disk).

A document is represented by its title and the first sentence of its first passage, as in
the paper (App. A.4). Embeddings are cached under ``CACHE/embeddings``
(`decisionrag._embed.cached_embeddings`,
one ``.npy`` file per (model, texts) key), so rebuilding the same corpus never embeds it twice.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

import numpy as np

from .._embed import (
    DEFAULT_MODEL,
    cached_embeddings,
    load_encoder,
    precision_tag,
    resolve_precision,
)
from .._files import ContentCache
from .._progress import Step

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_MAX_SENTENCE_CHARS = 300
# A title and a first sentence rarely exceed 64 word pieces; capping the sequence keeps
# embedding a large corpus within minutes on a CPU (attention cost grows with length).
MAX_TOKENS = 64

EncodeFn = Callable[[Sequence[str]], np.ndarray]


def first_sentence(text: str) -> str:
    """The first sentence of `text` (at most 300 characters, cut at a word)."""
    text = " ".join(text.split())
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(sentence) > _MAX_SENTENCE_CHARS:
        sentence = sentence[:_MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " …"
    return sentence


def document_text(title: str, description: str, first_passage: str) -> str:
    """The text embedded for a document: its title (or description) and first sentence."""
    head = (title or description).strip()
    sentence = first_sentence(first_passage)
    if not head:
        return sentence
    if not sentence or sentence.startswith(head):
        return sentence or head
    return f"{head}. {sentence}" if not head.endswith((".", "!", "?")) else f"{head} {sentence}"


def embed_texts(
    texts: Sequence[str], model: str | None = None, *, encode: EncodeFn | None = None,
    cache: str | os.PathLike[str] | None = None, use_cache: bool = True,
    progress: bool | Step = False, max_tokens: int = MAX_TOKENS,
) -> np.ndarray:
    """L2-normalised float32 embeddings of `texts`, from the cache when the same model has
    embedded the same texts before. `encode` replaces the sentence-transformers encoder
    (tests, custom models); its results are cached under the name given by `model`. Texts
    longer than `max_tokens` word pieces are truncated by the encoder."""
    name = model or DEFAULT_MODEL
    if encode is None:  # bfloat16 and float32 vectors are filed apart
        name = f"{name}{precision_tag(resolve_precision())}|{max_tokens}"
    folder = ContentCache("embeddings", cache).folder
    return cached_embeddings(name, texts,
                             lambda: _encode(texts, model, encode, progress, max_tokens),
                             folder=folder, use_cache=use_cache)


def _encode(
    texts: Sequence[str], model: str | None, encode: EncodeFn | None, progress: bool | Step,
    max_tokens: int,
) -> np.ndarray:
    if encode is not None:
        vectors = np.asarray(encode(texts), dtype=np.float32)
    else:
        encoder = load_encoder(model)
        shared_limit = encoder.model.max_seq_length  # the encoder is shared: restore its limit
        encoder.model.max_seq_length = min(shared_limit or max_tokens, max_tokens)
        try:
            vectors = encoder.encode(texts, batch_size=64, progress=progress)
        finally:
            encoder.model.max_seq_length = shared_limit
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
