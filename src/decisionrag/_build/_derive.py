"""Titles and descriptions for documents that come without them, recovered from the text.

Some corpora give pages no title and no headings (MTRAG's IBM Cloud passages, plain-text
dumps). The decision model still needs a short description of each document, so we recover
one from the layout of the text, the way the paper does for MTRAG (Appendix A):

- a *heading line* is a short line (1-12 words, at most 80 characters) set off by blank lines
  (or the start of the text) that does not end like a sentence (``. , ; : ! ?``), starts with a
  capital letter or a digit, and contains no code or markup characters (``{ } [ ] = < > | ; ```);
- :func:`derive_title` returns the first heading line of the first passages that have one
  (skipping figure/table captions and widget labels such as "Zoom"); failing that, the first
  words of the text, cut at 12 words;
- :func:`derive_description` adds the other recovered headings: ``title — h1; h2; …``.

The same heading test serves the plain-text builder (:mod:`._text`).
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_HEADING_WORDS = 12
MAX_HEADING_CHARS = 80
TITLE_WORDS = 12
_SENTENCE_END = (".", ",", ";", ":", "!", "?")
_CODE_CHARS = frozenset("{}[]=<>|;`")
_SCAN_PASSAGES = 3
# layout lines that look like headings but name nothing: image widgets, captions
_NOT_TITLES = frozenset({"zoom", "show more", "note", "tip", "important", "example"})
_CAPTION_WORDS = ("figure", "table", "example", "listing")


def looks_like_heading(line: str) -> bool:
    """Whether one line, on its own, reads like a heading rather than a sentence or code."""
    text = line.strip()
    if not text or len(text) > MAX_HEADING_CHARS or len(text.split()) > MAX_HEADING_WORDS:
        return False
    if text.endswith(_SENTENCE_END) or not text[0].isalnum():
        return False
    if text[0].isalpha() and not text[0].isupper():
        return False
    if not any(ch.isalpha() for ch in text):
        return False
    return not any(ch in _CODE_CHARS for ch in text)


def recovered_headings(text: str) -> list[str]:
    """Heading lines of `text`: short lines with a blank line (or the start) before them and
    a blank line after them, followed by more text."""
    lines = text.split("\n")
    blank = [not line.strip() for line in lines]
    last_text = max((i for i, is_blank in enumerate(blank) if not is_blank), default=-1)
    found: list[str] = []
    for index, line in enumerate(lines[:-1]):
        set_off = (index == 0 or blank[index - 1]) and blank[index + 1]
        if set_off and index < last_text and looks_like_heading(line):
            found.append(" ".join(line.split()))
    return found


def _names_content(heading: str) -> bool:
    words = heading.lower().split()
    if heading.lower() in _NOT_TITLES:
        return False
    is_caption = len(words) > 1 and words[0] in _CAPTION_WORDS and words[1][:1].isdigit()
    return not is_caption


def first_words(text: str, n_words: int = TITLE_WORDS) -> str:
    """The first `n_words` words of `text`, with an ellipsis when cut."""
    words = text.split()
    if len(words) <= n_words:
        return " ".join(words)
    return " ".join(words[:n_words]) + " …"


def derive_title(texts: Sequence[str]) -> str:
    """A short title for a document without one, from its passages in reading order."""
    for text in texts[:_SCAN_PASSAGES]:
        headings = [h for h in recovered_headings(text) if _names_content(h)]
        if headings:
            return headings[0]
    for text in texts:
        if text.strip():
            return first_words(text)
    return ""


def derive_description(title: str, texts: Sequence[str], max_headings: int = 8) -> str:
    """`title`, then the other distinct headings recovered from the passages."""
    headings: list[str] = []
    for text in texts:
        for heading in recovered_headings(text):
            if heading != title and heading not in headings and _names_content(heading):
                headings.append(heading)
    if not headings:
        return title
    return f"{title} — {'; '.join(headings[:max_headings])}"
