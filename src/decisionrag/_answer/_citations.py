"""Bracketed citations in generated text: ``[2]``, ``[1, 3]``, ``[2][4]``, ``[1-3]``,
``[Passage 2]``. Pure functions. Any integer in a citation's place is read, so that one naming
no passage (``[0]``, ``[-1]``, ``[12345]``) is flagged rather than passed over as text."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"[-−]?\d+"
_BRACKET = re.compile(
    rf"\[\s*(?:passages?\s*)?({_NUMBER}(?:\s*(?:[,;–-]|and)\s*(?:passages?\s*)?{_NUMBER})*)\s*\]",
    re.IGNORECASE,
)
# a run of brackets with the spaces before it, and whether punctuation follows
_BRACKETS = re.compile(rf"(?:\s*{_BRACKET.pattern})+(?P<punct>\s*[.,;:!?)\]])?", re.IGNORECASE)
_PART = re.compile(rf"({_NUMBER})(?:\s*[–-]\s*({_NUMBER}))?")
RANGE_LIMIT = 50  # a "[1-999]" is read as its two ends, not as 999 citations
_LARGEST = 10**18  # a longer number is read as this (it names no passage either way)


@dataclass(frozen=True, slots=True)
class Mark:
    """One bracket in the text: where it is and the passage numbers it names."""

    start: int
    end: int
    numbers: tuple[int, ...]


def find_citations(text: str) -> list[Mark]:
    marks = []
    for match in _BRACKET.finditer(text):
        numbers: list[int] = []
        for part in _PART.finditer(match.group(1)):
            first = _integer(part.group(1))
            last = _integer(part.group(2)) if part.group(2) else first
            if first <= last and last - first < RANGE_LIMIT:
                numbers.extend(range(first, last + 1))
            else:
                numbers.extend((first, last))
        marks.append(Mark(match.start(), match.end(), tuple(dict.fromkeys(numbers))))
    return marks


def _integer(text: str) -> int:
    sign = -1 if text[0] in "-−" else 1
    digits = text.lstrip("-−")
    return sign * (int(digits) if len(digits) <= 18 else _LARGEST)


def cited_numbers(text: str) -> list[int]:
    """Every passage number the text cites, in order of first citation."""
    return list(dict.fromkeys(n for mark in find_citations(text) for n in mark.numbers))


def strip_citations(text: str) -> str:
    """The text without its citation brackets (for exact match and token F1); a bracket
    before punctuation goes with the space before it: "24 hours [1]." -> "24 hours."."""
    def replace(match: re.Match[str]) -> str:
        punct = match.group("punct")
        return punct.strip() if punct else " "

    return " ".join(_BRACKETS.sub(replace, text).split())
