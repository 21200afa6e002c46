"""Words and corpus statistics: the lexical evidence the embedded judge fuses with similarity.

`terms` is a small, dependency-free tokenizer (lower case, letters and digits, English stop
words dropped, a light suffix stripper so that "renew", "renews" and "renewing" meet).
`Lexicon` holds a corpus's document frequencies (counted over passages at build time and
stored with the tree's vectors) and scores a text against a query with BM25 weights.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
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


class _Terms(dict[str, str]):
    """Each word's index term, "" for a stop word: made on first sight and kept (`stem`'s
    values; a word is looked up with one C-level call instead of a stop-word test and a call
    of the LRU wrapper). Emptied when it holds `STEMS_CACHED` words: a bound, not an LRU,
    since a corpus's common words come straight back."""

    def __missing__(self, word: str) -> str:
        if len(self) >= STEMS_CACHED:
            self.clear()
        term = self[word] = "" if word in STOPWORDS else stem(word)
        return term


class _AsciiTerms(dict[bytes, str]):
    """`_Terms` for the words of ASCII text, found as bytes (the same words: see `_words`)."""

    def __missing__(self, word: bytes) -> str:
        if len(self) >= STEMS_CACHED:
            self.clear()
        term = self[word] = _TERM_OF[word.decode()]
        return term


_TERM_OF = _Terms()
_ASCII_TERM_OF = _AsciiTerms()
# ASCII bytes to what `_WORD` finds in lower-cased text: a letter lower-cased, a digit kept,
# anything else a space (so `split` yields the words)
_ASCII_WORDS = bytes(ord(chr(c).lower()) if chr(c).isascii() and chr(c).isalnum() else 32
                     for c in range(256))


def _term_stream(text: str) -> Iterator[str]:
    """The index terms of `text` with "" for each stop word. ASCII text (most text) is split
    by a byte table, two to three times faster than the pattern and the same words: in ASCII,
    `lower` changes only A-Z. Other text goes through `lower` and the pattern (lower-casing
    may turn a non-ASCII letter, the Kelvin sign, into an ASCII one)."""
    if text.isascii():
        return map(_ASCII_TERM_OF.__getitem__, text.encode().translate(_ASCII_WORDS).split())
    return map(_TERM_OF.__getitem__, _WORD.findall(text.lower()))


def terms(text: str) -> list[str]:
    """The index terms of `text`, in order (repeats kept)."""
    return list(filter(None, _term_stream(text)))


@functools.lru_cache(maxsize=TERM_COUNTS_CACHED)
def term_counts(text: str) -> tuple[dict[str, int], int]:
    """How often each term occurs in `text`, and how many terms it has (cached: the same
    candidate texts are scored query after query). Callers must not change the dict."""
    counts = Counter(filter(None, _term_stream(text)))
    return counts, sum(counts.values())


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

    def scores(self, query: str, texts: Sequence[str],
               index: TermIndex | None = None) -> list[float]:
        """`score` of every text, computed a query term at a time over all texts (the same
        operations in the same order as `score`, so the same floats). `index`, the
        `TermIndex` of these `texts` under this lexicon, reads each query term's postings
        instead of asking every text (for a list of texts that recurs, a page level)."""
        weights = self.query_weights(query)
        total = sum(weights.values())
        if not total or not texts:
            return [0.0] * len(texts)
        if index is not None:
            return index.scores(weights, total)
        counted = list(map(term_counts, texts))
        lengths = np.fromiter((length for _, length in counted), dtype=np.float64, count=len(texts))
        norm = _norms(lengths, self.mean_length)
        value = np.zeros(len(texts))
        dicts = [counts for counts, _ in counted]
        for term, weight in weights.items():  # summed in query-term order, as `score` sums
            tf = np.fromiter(map(dict.get, dicts, itertools.repeat(term), itertools.repeat(0)),
                             dtype=np.float64, count=len(texts))
            value += weight * tf * (K1 + 1) / (tf + norm)  # 0.0 where the term is absent
        return (value / (total * (K1 + 1))).tolist()

    def index(self, texts: Sequence[str]) -> TermIndex:
        """The `TermIndex` of `texts` under this lexicon (for `scores`)."""
        return TermIndex(texts, self.mean_length)

    def to_json(self) -> str:
        return json.dumps({"documents": self.documents, "mean_length": self.mean_length,
                           "frequencies": self.frequencies}, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes) -> Lexicon:
        value: Any = json.loads(data)
        return cls(int(value["documents"]), float(value["mean_length"]),
                   {str(k): int(v) for k, v in value["frequencies"].items()})


def _norms(lengths: np.ndarray, mean_length: float) -> np.ndarray:
    """BM25's length normalisation of texts of `lengths` terms (as `Lexicon.score` forms it)."""
    return np.asarray(K1 * (1 - B + B * lengths / max(mean_length, 1.0)), dtype=np.float64)


class TermIndex:
    """The postings of a fixed list of texts: for each term, the positions of the texts it
    occurs in and how often. `Lexicon.scores` with it computes, for a query term, only the
    texts that hold it; where a term is absent the old sum added 0.0, which changes nothing,
    so the floats are the same."""

    __slots__ = ("_norm", "_postings", "nbytes", "size")

    def __init__(self, texts: Sequence[str], mean_length: float) -> None:
        counted = list(map(term_counts, texts))
        lengths = np.fromiter((length for _, length in counted), dtype=np.float64, count=len(texts))
        self.size = len(texts)
        self._norm = _norms(lengths, mean_length)
        found: dict[str, tuple[list[int], list[int]]] = {}
        for position, (counts, _) in enumerate(counted):
            for term, tf in counts.items():
                places, tfs = found.setdefault(term, ([], []))
                places.append(position)
                tfs.append(tf)
        self._postings = {term: (np.asarray(places, dtype=np.int64), np.asarray(tfs, dtype=np.float64))
                          for term, (places, tfs) in found.items()}
        self.nbytes = self._norm.nbytes + sum(p.nbytes + t.nbytes + 100 for p, t in self._postings.values())

    def scores(self, weights: dict[str, float], total: float) -> list[float]:
        value = np.zeros(self.size)
        for term, weight in weights.items():  # in query-term order, as `Lexicon.scores` sums
            posting = self._postings.get(term)
            if posting is not None:
                places, tf = posting
                value[places] += weight * tf * (K1 + 1) / (tf + self._norm[places])
        return (value / (total * (K1 + 1))).tolist()
