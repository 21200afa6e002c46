"""A synthetic corpus with Natural-Questions-like shape, for scale benchmarks.

``synthetic_documents()`` yields 108,626 documents holding 2,680,000 passages by default
(the DAPR Natural Questions corpus: 108,626 Wikipedia pages, 2.68 M paragraphs):

- passages per document: log-normal (sigma 1.0) around the mean, at least 1, rescaled so the
  total is exactly `n_passages`;
- titles: 2-6 capitalised words; passages: 40-120 words, cut as windows out of a long
  random text over a 6,000-word vocabulary of pronounceable pseudo-words (Zipf-like use);
- about a third of the documents have sections: 2-6 headings (2-4 words), a few with a
  second level, each holding a contiguous run of the passages.

Deterministic for a given seed. Generating is cheap next to writing (one string slice per
passage).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from decisionrag import DocumentSpec, PassageSpec

NQ_DOCUMENTS = 108_626
NQ_PASSAGES = 2_680_000
_VOCABULARY = 6_000
_TEXT_WORDS = 2_000_000
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["an", "er", "in", "on", "st"]


def _vocabulary(rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < _VOCABULARY:
        n = int(rng.integers(1, 5))
        words.add("".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n)))
    return sorted(words)


def _passage_counts(rng: np.random.Generator, n_docs: int, n_passages: int) -> np.ndarray:
    raw = rng.lognormal(mean=0.0, sigma=1.0, size=n_docs)
    counts = np.maximum(1, np.floor(raw / raw.sum() * n_passages)).astype(np.int64)
    shortfall = n_passages - int(counts.sum())
    order = np.argsort(-raw)
    step = 1 if shortfall > 0 else -1
    index = 0
    while shortfall != 0:  # spread the rounding error over the largest documents
        doc = order[index % n_docs]
        if counts[doc] + step >= 1:
            counts[doc] += step
            shortfall -= step
        index += 1
    return counts


class _TextPool:
    """A long random text; a passage is a window of it, so making one is a single slice."""

    def __init__(self, rng: np.random.Generator, vocabulary: list[str]) -> None:
        ranks = np.arange(1, len(vocabulary) + 1)
        weights = 1.0 / ranks
        ids = rng.choice(len(vocabulary), size=_TEXT_WORDS, p=weights / weights.sum())
        words = [vocabulary[i] for i in ids]
        self.text = " ".join(words)
        lengths = np.fromiter((len(w) + 1 for w in words), dtype=np.int64, count=len(words))
        self.starts = np.concatenate(([0], np.cumsum(lengths)))

    def passages(self, rng: np.random.Generator, n: int) -> list[str]:
        sizes = rng.integers(40, 121, n)
        firsts = rng.integers(0, _TEXT_WORDS - 121, n)
        starts = self.starts[firsts]
        ends = self.starts[firsts + sizes] - 1
        bounds = zip(starts.tolist(), ends.tolist(), strict=True)
        return [self.text[s:e].capitalize() + "." for s, e in bounds]


def _title(rng: np.random.Generator, vocabulary: list[str], lo: int, hi: int) -> str:
    n = int(rng.integers(lo, hi + 1))
    return " ".join(vocabulary[i].capitalize() for i in rng.integers(0, len(vocabulary), n))


def _sections(rng: np.random.Generator, vocabulary: list[str], n: int) -> list[tuple[str, ...]]:
    if n < 4 or rng.random() > 0.35:
        return [()] * n
    n_heads = int(min(rng.integers(2, 7), n // 2))
    cuts = np.sort(rng.choice(np.arange(1, n), n_heads - 1, replace=False)).tolist()
    bounds = [0, *cuts, n]
    paths: list[tuple[str, ...]] = []
    for head in range(n_heads):
        top = _title(rng, vocabulary, 2, 4)
        size = bounds[head + 1] - bounds[head]
        sub = _title(rng, vocabulary, 2, 3) if size >= 4 and rng.random() < 0.3 else None
        for i in range(size):
            paths.append((top, sub) if sub and i >= size // 2 else (top,))
    return paths


def synthetic_documents(
    n_docs: int = NQ_DOCUMENTS, n_passages: int = NQ_PASSAGES, seed: int = 0
) -> Iterator[DocumentSpec]:
    """`n_docs` random but realistically shaped documents holding `n_passages` passages."""
    if n_passages < n_docs:
        raise ValueError("need at least one passage per document")
    rng = np.random.default_rng(seed)
    vocabulary = _vocabulary(rng)
    pool = _TextPool(rng, vocabulary)
    for index, n in enumerate(_passage_counts(rng, n_docs, n_passages).tolist()):
        texts = pool.passages(rng, n)
        paths = _sections(rng, vocabulary, n)
        yield DocumentSpec(
            title=_title(rng, vocabulary, 2, 6), key=f"doc{index}",
            passages=[PassageSpec(text, path) for text, path in zip(texts, paths, strict=True)],
        )
