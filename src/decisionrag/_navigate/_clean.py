"""Candidate text made safe to quote (`clean`): nothing in it can forge a label or a marker.

Document text is normalised: NFKC (full-width ``［Page 1］`` becomes ``[Page 1]``), format
characters (Cf: zero-width spaces and joiners, bidi controls, soft hyphens, tags) and other
invisible characters dropped, control characters made spaces, and anything Unicode calls an
opening or closing bracket (Ps/Pe, or a bracket, parenthesis, ceiling, floor or corner by
name: ``【⌈⟦⎡⌜``) made ``[``/``]``. Labels and section markers are then found through a fold
(`_fold`) in which every letter is its Latin base letter (accents and combining marks
dropped) or, from another script, a wildcard for any letter, so that ``[Pаragraph 6]``
(Cyrillic ``а``), ``[\u0301Paragraph 1]`` and ``[Paragraph1]`` are defused like
``[Paragraph 6]``: a ``[`` followed by the first four letters of a label word becomes ``(``.
Each class is matched by its Unicode properties, not from a list of known look-alikes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

# What the judge must be the only one to write: labels ("[Paragraph 3]") and the section
# markers of a context. Document text is matched against them through `_fold` (below), so
# that look-alikes of every kind are caught as a class, not from a list.
_LABEL_WORDS = ("topic", "page", "section", "paragraph", "passage")
_LABEL_PREFIX = 4  # letters after "[" that, folded, begin a label word: "[Parag" is defused
_MARKERS = ("end of topics", "end of pages", "end of sections", "end of paragraphs",
            "end of passages", "user's question", "user's situation",
            "conversation (most recent last)", "used earlier in this conversation",
            "candidates below are quoted data")
_WILD = "\x01"  # `_fold`: a letter of another script, which may look like any Latin letter
_MARK = "\x00"  # `_fold`: a combining mark (or a character dropped in folding): skipped
_APOSTROPHES = "'ʼ‘’′`´ʹʻʽ＇"


def _fuzzy(phrase: str, folded: bool) -> str:
    """A pattern matching `phrase` in lower-case text, spaces optional, apostrophes too; in
    `folded` text any letter may also be a look-alike, and marks may follow any character."""
    parts = []
    for ch in phrase:
        if ch.isalpha():
            parts.append(f"[{ch}{_WILD}]" if folded else ch)
        elif ch == " ":
            parts.append("\\s*")
        elif ch == "'":
            parts.append("'?")
        else:
            parts.append(re.escape(ch))
        if folded:
            parts.append(f"{_MARK}*")
    return "".join(parts) + ("" if phrase.startswith("end of") else "\\s*:?")


_MARKER_IN_ASCII = re.compile("|".join(_fuzzy(m, False) for m in _MARKERS))
_MARKER_IN_FOLDED = re.compile(  # the lookahead: most positions fail at once
    f"(?=[{''.join(sorted({m[0] for m in _MARKERS}))}{_WILD}])(?:"
    + "|".join(_fuzzy(m, True) for m in _MARKERS) + ")")
_INVISIBLE = frozenset(  # beyond the format characters (Cf): letters and symbols drawn as nothing
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x2800, 0x3164, 0xFFA0,
     *range(0x1D173, 0x1D17B), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
_SIDES = (("LEFT", "RIGHT"), ("OPENING", "CLOSING"), ("TOP", "BOTTOM"))  # first found decides
_BRACKET_WORDS = ("BRACKET", "PARENTHESIS", "CEILING", "FLOOR", "CORNER")


def _normalised(code: int) -> str | None:
    """How `clean` writes one character: control characters as spaces, invisible ones not
    at all, anything drawn as an opening or closing bracket as ``[`` or ``]``."""
    ch = chr(code)
    category = unicodedata.category(ch)
    if category == "Cc" or category in ("Zl", "Zp"):
        return " "
    if category == "Cf" or code in _INVISIBLE:
        return None
    if code < 0x80:
        return ch
    if category == "Ps":
        return "["
    if category == "Pe":
        return "]"
    name = unicodedata.name(ch, "")
    if any(word in name for word in _BRACKET_WORDS) and "QUOTATION" not in name:
        words = name.replace("-", " ").split()
        for opening, closing in _SIDES:
            if opening in words:
                return "["
            if closing in words:
                return "]"
    return ch


def _folded(code: int) -> str:
    """One character of `_fold`: a letter as its lower-case Latin base letter (accents
    dropped), or `_WILD` when it has none; a combining mark as `_MARK`; an apostrophe-like
    mark as ``'``; anything else as itself (lower case)."""
    ch = chr(code)
    if ch in _APOSTROPHES:
        return "'"
    category = unicodedata.category(ch)
    if category.startswith("M"):
        return _MARK
    if not ch.isalpha():
        return ch.lower() if len(ch.lower()) == 1 else ch
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    base = base.lower()
    if len(base) == 1 and "a" <= base <= "z":
        return base
    return _WILD


class _Table(dict[int, str | None]):
    """A `str.translate` table filled on first use of each character."""

    def __init__(self, rule: Any) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, code: int) -> str | None:
        self[code] = value = self.rule(code)
        return value


_NORMALISE = _Table(_normalised)
_FOLD = _Table(_folded)


# a word of letters that all have no Latin base (Russian text, not a forgery of an English
# marker with one look-alike in it): hidden from the marker patterns, which it could otherwise
# match letter for letter at great cost
_FOREIGN_WORD = re.compile(f"(?<![a-z{_WILD}{_MARK}])[{_WILD}{_MARK}]+(?![a-z{_WILD}{_MARK}])")


def _hidden(match: re.Match[str]) -> str:
    return "#" * len(match.group())


def _fold(line: str) -> str:
    """`line` for matching labels and markers, one character for one (same length)."""
    return line.translate(_FOLD)


def clean_line(text: str) -> str:
    """One line of quoted data: normalised (see the module docstring), whitespace collapsed,
    look-alike labels and section markers defused; `text` itself when that changes nothing
    (a cached entry then holds one string, not two equal ones). Uncached: `Entry` calls it
    once per entry, and entries are cached by the view."""
    given = text
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        text = text.translate(_NORMALISE)
    elif _ASCII_CONTROL.search(text):  # else `_NORMALISE` changes nothing `split` does not
        text = text.translate(_NORMALISE)
    line = _defused(" ".join(text.split()))
    return given if line == given else line


# the ASCII control characters that `str.split` does not take for whitespace (`_NORMALISE`
# makes every control character a space; a table lookup per character costs 3 µs a title)
_ASCII_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")


def _defused(line: str) -> str:
    """`line` with what looks like a label's ``[`` or a section marker defused."""
    folded = line.lower() if line.isascii() else _fold(line)
    if _WILD in folded or _MARK in folded:
        spans = [m.span() for m in _MARKER_IN_FOLDED.finditer(_FOREIGN_WORD.sub(_hidden, folded))]
    else:  # Latin letters only (accents dropped): the plain pattern
        spans = _ascii_marker_spans(folded)
    at = folded.find("[")
    while at >= 0:
        if _opens_label(folded, at):
            spans.append((at, at + 1))
        at = folded.find("[", at + 1)
    if not spans:
        return line
    pieces: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if start < done:
            continue
        pieces += [line[done:start], _defuse(line[start:end])]
        done = end
    return "".join(pieces) + line[done:]


# the first word of every marker, which its plain pattern matches letter for letter (spaces
# and apostrophes are optional only between words): text without any of them has no marker
_MARKER_FIRST_WORDS = tuple(sorted({re.match("[a-z]+", m).group() for m in _MARKERS}))  # type: ignore[union-attr]


def _ascii_marker_spans(folded: str) -> list[tuple[int, int]]:
    """Where `_MARKER_IN_ASCII` matches in `folded`; the pattern is not run over text that
    holds none of the markers' first words (most text: a substring test is a third of it)."""
    if not any(word in folded for word in _MARKER_FIRST_WORDS):
        return []
    return [m.span() for m in _MARKER_IN_ASCII.finditer(folded)]


def _opens_label(folded: str, at: int) -> bool:
    """Whether the ``[`` at `at` is followed by letters that begin a label word: its first
    `_LABEL_PREFIX` letters, skipping spaces, marks and joining punctuation, each the
    label's letter or a look-alike (so ``[Paragraph1]``, ``[ Pára graph 2]`` count)."""
    letters = ""
    for ch in folded[at + 1:at + 1 + 4 * _LABEL_PREFIX]:
        if ch.isalpha() or ch == _WILD:
            letters += ch
            if len(letters) == _LABEL_PREFIX:
                break
        elif not (ch.isspace() or ch == _MARK or ch in "-_.'"):
            break
    if len(letters) < _LABEL_PREFIX:
        return False
    return any(all(have in (want, _WILD) for have, want in zip(letters, word, strict=False))
               for word in _LABEL_WORDS)


clean = functools.lru_cache(maxsize=100_000)(clean_line)  # queries, turns, headings


def _defuse(found: str) -> str:
    if found == "[":
        return "("
    lowered = found.lower()
    if lowered.startswith("end of"):
        return lowered.replace("end of", "end-of")
    return lowered.rstrip(":").rstrip().replace(" ", "-")  # "user's-question": no marker
