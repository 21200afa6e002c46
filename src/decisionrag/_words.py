"""Words and corpus statistics: the lexical evidence the embedded judge fuses with similarity.

`terms` is a small, dependency-free tokenizer (lower case, letters and digits, English stop
words dropped, a light suffix stripper so that "renew", "renews" and "renewing" meet).
`Lexicon` holds a corpus's document frequencies (counted over passages at build time and
stored with the tree's vectors) and scores a text against a query with BM25 weights.
`TermRows` holds each passage's term counts, counted at build time and stored beside the
lexicon, so that scoring a passage met for the first time counts nothing (`CountedText`).
"""

from __future__ import annotations

import array
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


@dataclass(frozen=True, slots=True)
class CountedText:
    """A text whose term counts are mostly stored: `prefix` (counted when scored; empty, or
    ending in a character that is no part of a word) followed by the text of row `row` of
    the lexicon's `TermRows`. Terms never span the join, so the counts of the whole text are
    the prefix's plus the row's: the same integers `term_counts` gives."""

    prefix: str
    row: int


class TermRows:
    """Per-row term counts (rows are node ids; a row with no text is empty): the terms of
    row r are `terms[offsets[r]:offsets[r + 1]]`, ids into `vocabulary` (the lexicon's
    terms in their stored order), with `counts` beside them and `lengths[r]` their sum."""

    __slots__ = ("_ids", "counts", "lengths", "offsets", "terms", "vocabulary")

    def __init__(self, vocabulary: Sequence[str], offsets: np.ndarray, terms: np.ndarray,
                 counts: np.ndarray, lengths: np.ndarray) -> None:
        self.vocabulary = vocabulary
        self.offsets, self.terms, self.counts, self.lengths = offsets, terms, counts, lengths
        self._ids: dict[str, int] | None = None

    @classmethod
    def count(cls, vocabulary: Sequence[str], rows: int, ids: Sequence[int],
              texts: Iterable[str]) -> TermRows:
        """The counts of `texts`, the texts of rows `ids` (ascending), each term an id into
        `vocabulary`; a term missing from it is refused (the vocabulary must cover the texts)."""
        if np.any(np.diff(np.asarray(ids, dtype=np.int64)) <= 0):
            raise ValueError("term rows are counted in ascending row order")
        index = {term: i for i, term in enumerate(vocabulary)}
        sizes = np.zeros(rows, dtype=np.int64)
        lengths = np.zeros(rows, dtype=np.int64)
        terms, counts = array.array("I"), array.array("I")  # 4 bytes a term, not a Python int
        for row, text in zip(ids, texts, strict=True):
            found = Counter(filter(None, _term_stream(text)))
            terms.extend(map(index.__getitem__, found))
            counts.extend(found.values())
            sizes[row], lengths[row] = len(found), sum(found.values())
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        tfs = np.frombuffer(counts, dtype=np.uint32) if counts else np.zeros(0, dtype=np.uint32)
        if not tfs.size or tfs.max() <= np.iinfo(np.uint16).max:
            tfs = tfs.astype(np.uint16)
        ids_of = np.frombuffer(terms, dtype=np.uint32) if terms else np.zeros(0, dtype=np.uint32)
        return cls(vocabulary, offsets, ids_of, tfs, lengths)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays as stored (widest first, so that each stays aligned)."""
        return {"offsets": self.offsets, "lengths": self.lengths, "terms": self.terms,
                "counts": self.counts}

    @classmethod
    def stored(cls, vocabulary: Sequence[str], arrays: dict[str, np.ndarray]) -> TermRows | None:
        """The rows of `arrays` (`arrays()` as read back), None when they do not fit together
        or `vocabulary` (a lexicon of another build)."""
        try:
            offsets, lengths = arrays["offsets"], arrays["lengths"]
            terms, counts = arrays["terms"], arrays["counts"]
        except KeyError:
            return None
        fits = (len(offsets) == len(lengths) + 1 and len(terms) == len(counts)
                and len(offsets) and int(offsets[0]) == 0 and int(offsets[-1]) == len(terms)
                and bool((np.diff(offsets) >= 0).all())
                and (not len(terms) or int(terms.max()) < len(vocabulary)))
        return cls(vocabulary, offsets, terms, counts, lengths) if fits else None

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def term_id(self, term: str) -> int:
        """The id of `term`, -1 when no row holds it (the lookup made on first use)."""
        ids = self._ids
        if ids is None:
            ids = self._ids = {t: i for i, t in enumerate(self.vocabulary)}
        return ids.get(term, -1)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner, term ids, counts) of every term of `rows`, owner the position in `rows`."""
        starts = np.asarray(self.offsets[rows], dtype=np.int64)
        sizes = np.asarray(self.offsets[rows + 1], dtype=np.int64) - starts
        owner = np.repeat(np.arange(len(rows)), sizes)
        places = np.arange(int(sizes.sum())) + np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)
        return owner, np.asarray(self.terms[places]), np.asarray(self.counts[places])


@dataclass(slots=True)
class Lexicon:
    """Document frequencies of terms over `documents` texts of mean length `mean_length`;
    `rows`, when stored, the term counts of the corpus's passages (`CountedText`)."""

    documents: int
    mean_length: float
    frequencies: dict[str, int] = field(default_factory=dict)
    rows: TermRows | None = field(default=None, compare=False, repr=False)

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

    def scores(self, query: str, texts: Sequence[str], index: TermIndex | None = None,
               stored: Sequence[CountedText | None] = ()) -> list[float]:
        """`score_array` as a list."""
        found: list[float] = self.score_array(query, texts, index, stored).tolist()
        return found

    def score_array(self, query: str, texts: Sequence[str], index: TermIndex | None = None,
                    stored: Sequence[CountedText | None] = ()) -> np.ndarray:
        """`score` of every text, computed a query term at a time over all texts (the same
        operations in the same order as `score`, so the same floats). `index`, the
        `TermIndex` of these `texts` under this lexicon, reads each query term's postings
        instead of asking every text (for a list of texts that recurs, a page level).
        `stored`, one per text, says where a text's counts are stored in `rows` (all of
        them, or the texts are counted)."""
        weights = self.query_weights(query)
        total = sum(weights.values())
        if not total or not texts:
            return np.zeros(len(texts))
        if index is not None:
            return index.scores(weights, total)
        if self.rows is not None and len(stored) == len(texts) and None not in stored:
            return self._stored_scores(weights, total, stored)  # type: ignore[arg-type]
        counted = list(map(term_counts, texts))
        lengths = np.fromiter((length for _, length in counted), dtype=np.float64, count=len(texts))
        norm = _norms(lengths, self.mean_length)
        value = np.zeros(len(texts))
        dicts = [counts for counts, _ in counted]
        for term, weight in weights.items():  # summed in query-term order, as `score` sums
            tf = np.fromiter(map(dict.get, dicts, itertools.repeat(term), itertools.repeat(0)),
                             dtype=np.float64, count=len(texts))
            value += weight * tf * (K1 + 1) / (tf + norm)  # 0.0 where the term is absent
        return np.asarray(value / (total * (K1 + 1)), dtype=np.float64)

    def _stored_scores(self, weights: dict[str, float], total: float,
                       stored: Sequence[CountedText]) -> np.ndarray:
        """`scores` of texts whose counts are stored: each term's count the prefix's plus the
        row's (integers, so the same `tf`), then the same sums in the same order."""
        rows = self.rows
        assert rows is not None
        places = np.fromiter((s.row for s in stored), dtype=np.int64, count=len(stored))
        prefixes = [term_counts(s.prefix) for s in stored]
        lengths = (np.asarray(rows.lengths[places], dtype=np.float64)
                   + np.fromiter((n for _, n in prefixes), dtype=np.float64, count=len(stored)))
        norm = _norms(lengths, self.mean_length)
        owner, ids, counts = rows.gather(places)
        dicts = [counts_of for counts_of, _ in prefixes]
        value = np.zeros(len(stored))
        for term, weight in weights.items():  # in query-term order, as `score` sums
            tf = np.fromiter(map(dict.get, dicts, itertools.repeat(term), itertools.repeat(0)),
                             dtype=np.float64, count=len(stored))
            term_id = rows.term_id(term)
            if term_id >= 0:
                hit = ids == term_id
                tf += np.bincount(owner[hit], weights=counts[hit], minlength=len(stored))
            value += weight * tf * (K1 + 1) / (tf + norm)  # 0.0 where the term is absent
        return np.asarray(value / (total * (K1 + 1)), dtype=np.float64)

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

    def scores(self, weights: dict[str, float], total: float) -> np.ndarray:
        value = np.zeros(self.size)
        for term, weight in weights.items():  # in query-term order, as `Lexicon.scores` sums
            posting = self._postings.get(term)
            if posting is not None:
                places, tf = posting
                value[places] += weight * tf * (K1 + 1) / (tf + self._norm[places])
        return np.asarray(value / (total * (K1 + 1)), dtype=np.float64)
