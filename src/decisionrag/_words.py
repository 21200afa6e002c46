"""Words and corpus statistics: the lexical evidence the embedded judge fuses with similarity.

`terms` is a small, dependency-free tokenizer (lower case, letters and digits, English stop
words dropped, a light suffix stripper so that "renew", "renews" and "renewing" meet).
`Lexicon` holds a corpus's document frequencies (counted over passages at build time and
stored with the tree's vectors) and scores a text against a query with BM25 weights.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves s t d ll m re ve y also may must
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "edly", "ed", "es", "ly", "s")
K1, B = 1.2, 0.75
TERM_COUNTS_CACHED = 65_536  # texts whose term counts are kept (candidate texts recur per query)
STEMS_CACHED = 262_144  # words whose stems are kept (a corpus's words recur: Zipf)


@functools.lru_cache(maxsize=STEMS_CACHED)
def stem(word: str) -> str:
    """Strip one common English suffix, keeping a stem of at least three letters."""
    if len(word) <= 4 or word.isdigit():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            return base + "y" if suffix in ("ies", "ied") else base
    return word


def terms(text: str) -> list[str]:
    """The index terms of `text`, in order (repeats kept)."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


@functools.lru_cache(maxsize=TERM_COUNTS_CACHED)
def term_counts(text: str) -> tuple[dict[str, int], int]:
    """How often each term occurs in `text`, and how many terms it has (cached: the same
    candidate texts are scored query after query). Callers must not change the dict."""
    counts = Counter(terms(text))
    return dict(counts), sum(counts.values())


@dataclass(slots=True)
class Lexicon:
    """Document frequencies of terms over `documents` texts of mean length `mean_length`."""

    documents: int
    mean_length: float
    frequencies: dict[str, int] = field(default_factory=dict)

    @classmethod
    def count(cls, texts: Iterable[str]) -> Lexicon:
        frequencies: Counter[str] = Counter()
        documents = total = 0
        for text in texts:
            words = terms(text)
            documents += 1
            total += len(words)
            frequencies.update(set(words))
        return cls(documents, total / max(documents, 1), dict(frequencies))

    def idf(self, term: str) -> float:
        """BM25's idf (always positive): log(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self.frequencies.get(term, 0)
        return math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))

    def query_weights(self, query: str) -> dict[str, float]:
        """Each distinct query term's idf."""
        return {term: self.idf(term) for term in dict.fromkeys(terms(query))}

    def score(self, weights: dict[str, float], text: str) -> float:
        """BM25 of `text` for a query given as `query_weights`, divided by the query's total
        idf: 0 when no query term occurs, towards 1 when all occur often."""
        total = sum(weights.values())
        if not total:
            return 0.0
        counts, length = term_counts(text)
        norm = K1 * (1 - B + B * length / max(self.mean_length, 1.0))
        value = 0.0
        for term, weight in weights.items():
            tf = counts.get(term, 0)
            if tf:
                value += weight * tf * (K1 + 1) / (tf + norm)
        return value / (total * (K1 + 1))

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """`score` of every text, computed a query term at a time over all texts (the same
        operations in the same order as `score`, so the same floats)."""
        weights = self.query_weights(query)
        total = sum(weights.values())
        if not total or not texts:
            return [0.0] * len(texts)
        counted = list(map(term_counts, texts))
        lengths = np.fromiter((length for _, length in counted), dtype=np.float64, count=len(texts))
        norm = K1 * (1 - B + B * lengths / max(self.mean_length, 1.0))
        value = np.zeros(len(texts))
        for term, weight in weights.items():  # summed in query-term order, as `score` sums
            tf = np.fromiter((counts.get(term, 0) for counts, _ in counted), dtype=np.float64,
                             count=len(texts))
            value += weight * tf * (K1 + 1) / (tf + norm)  # 0.0 where the term is absent
        return (value / (total * (K1 + 1))).tolist()

    def to_json(self) -> str:
        return json.dumps({"documents": self.documents, "mean_length": self.mean_length,
                           "frequencies": self.frequencies}, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes) -> Lexicon:
        value: Any = json.loads(data)
        return cls(int(value["documents"]), float(value["mean_length"]),
                   {str(k): int(v) for k, v in value["frequencies"].items()})
