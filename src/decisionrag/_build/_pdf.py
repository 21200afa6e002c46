"""PDF, read with pypdf (BSD-licensed, pure Python, maintained; it reads outlines, document
info, page text with font sizes and positions, and RC4/AES-encrypted files).

What becomes what (the heuristics, in order):

1. **Text runs.** Each page's text operators give runs with a position, an effective font size
   (the font size scaled by the text and graphics matrices) and a font name (``Bold``/``Black``/
   ``Heavy``/``Semibold`` in it = bold). Runs are kept in content-stream order, which is reading
   order for the producers we know (LaTeX, Word, fpdf2, reportlab), columns included.
2. **Lines.** Consecutive runs whose baselines are within half a font size are one line. A gap
   between two runs wider than a generous estimate of the first run's width (0.6 em a
   character, plus 1 em) is a cell boundary: such a line is a **table row**, its cells joined
   with `` | ``, and a passage of its own.
3. **Running headers and footers.** In a file of 3+ pages, a line in the top or bottom 12% of
   the page whose text (digits masked) recurs at the same height on at least half of the pages
   is dropped, as is a line there that is only a page number (``3``, ``iv``, ``- 3 -``,
   ``Page 3 of 9``).
   Table-of-contents entries (a title, a dot leader of 4+ dots, a page number) are dropped too:
   the outline or the headings already give that structure.
4. **Sections.** From the outline (bookmarks) when the file has one: an entry opens at its
   destination (page, and height when it gives one), nested entries below their parents; the
   heading line that repeats the entry's title is not a passage. Without an outline, from
   layout: a line of at most 12 words and 120 characters, not ending in ``.``/``,``/``;``, set
   in a font at least 15% larger than the body font (the size most characters are set in), or
   in bold at the body size and standing alone, is a heading; larger sizes are higher levels.
5. **Passages** are paragraphs: lines join while the next line sits at most 1.3 times the
   file's usual line spacing below the last (the most common baseline-to-baseline distance;
   1.5 font sizes when there is none). A larger gap, a jump upwards (a new column), a bullet
   or a heading starts a new one. A paragraph that runs off the bottom of a page without final punctuation
   continues with a first line starting in lower case on the next page. Each passage's
   metadata holds ``page`` (1-based, physical) and, when it spans pages, ``pages``.
6. **Title**: the document info title, else the largest line on the first page when it is
   short, else the file name. Document info (author, subject, keywords, creation date) and the
   page count are the document's metadata.

Files that cannot be read are skipped with a reason (:class:`._common.Skip`): encrypted with a
password, no text layer (scanned or image-only: run OCR first), or not a readable PDF.
"""

from __future__ import annotations

import io
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._tree import PassageSpec
from ._common import ParsedDocument, SectionStack, Skip, collapse_spaces

HEADING_SIZE_RATIO = 1.15
MAX_HEADING_WORDS = 12
MAX_HEADING_CHARS = 120
PARAGRAPH_GAP = 1.3  # times the usual line spacing that still continues a paragraph
MARGIN = 0.12  # share of the page height at the top and bottom where running lines live
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_BULLET = re.compile(r"^([•◦▪‣∙·\-–*]|\d{1,3}[.)]|[a-z][.)])\s")
_PAGE_NUMBER = re.compile(r"^(page\s*)?[-–—]?\s*(\d{1,4}|[ivxlc]{1,7})\s*[-–—]?(\s*(of|/)\s*\d{1,4})?$",
                          re.IGNORECASE)
_DOT_LEADER = re.compile(r"(?:\.\s*){4,}[\divxlc]+$", re.IGNORECASE)
_END_PUNCTUATION = (".", "!", "?", ":", ";", "\"", "”", ")")


@dataclass(slots=True)
class _Run:
    x: float
    y: float
    size: float
    bold: bool
    text: str


@dataclass(slots=True)
class _Line:
    page: int  # 0-based
    x: float
    y: float
    size: float
    bold: bool
    text: str
    cells: int = 1  # > 1: a table row

    @property
    def key(self) -> tuple[str, int]:
        return re.sub(r"\d+", "#", self.text.lower()), round(self.y)


@dataclass(slots=True)
class _Mark:
    page: int
    top: float
    level: int
    title: str


@dataclass
class _Paragraph:
    lines: list[_Line] = field(default_factory=list)

    @property
    def text(self) -> str:
        return collapse_spaces(" ".join(line.text for line in self.lines))

    @property
    def pages(self) -> list[int]:
        return sorted({line.page + 1 for line in self.lines})


def _pypdf() -> Any:
    try:
        import pypdf
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        from .._errors import InputError

        raise InputError("reading PDF files needs pypdf: pip install 'decisionrag[pdf]'") from exc
    return pypdf


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    """Parse one PDF file into its title, sections, passages (with pages) and metadata."""
    pypdf = _pypdf()
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a repaired xref is not the user's news
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        _decrypt(reader)
        pages = [_page_runs(page) for page in reader.pages]
        marks = _outline_marks(reader)
        info = _info(reader)
    except Skip:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file: one reason for all
        raise Skip(f"unreadable PDF ({type(exc).__name__}: {_short(exc)})") from exc
    if not any(pages):
        raise Skip("no text layer (image-only or scanned PDF; run OCR first)")
    heights = [_page_height(page) for page in reader.pages]
    lines = _drop_running_lines(_lines(pages), heights)
    title = info.pop("title", "") or _first_page_title(lines) or fallback_title
    document = ParsedDocument(title=title, meta={**info, "page_count": len(pages)})
    document.passages = list(_passages(lines, marks, title))
    return document


def _short(exc: Exception) -> str:
    text = collapse_spaces(str(exc)) or "damaged file"
    return text if len(text) <= 100 else text[:99] + "…"


def _decrypt(reader: Any) -> None:
    if not reader.is_encrypted:
        return
    try:
        ok = reader.decrypt("")  # files with only an owner password open with an empty one
    except Exception as exc:  # unsupported algorithm, missing cryptography package
        raise Skip(f"encrypted PDF ({_short(exc)})") from exc
    if not ok:
        raise Skip("encrypted PDF (needs a password)")


def _info(reader: Any) -> dict[str, Any]:
    info = reader.metadata or {}
    meta: dict[str, Any] = {}
    for name, key in (("/Title", "title"), ("/Author", "author"), ("/Subject", "subject"),
                      ("/Keywords", "keywords")):
        value = info.get(name)
        if isinstance(value, str) and value.strip():
            meta[key] = collapse_spaces(value)
    created = info.get("/CreationDate")
    if isinstance(created, str):
        match = re.match(r"D:(\d{4})(\d{2})?(\d{2})?", created)
        if match:
            meta["created"] = "-".join(part for part in match.groups() if part)
    return meta


def _page_height(page: Any) -> float:
    try:
        return float(page.mediabox.height)
    except Exception:  # a page without a usable media box: assume A4
        return 842.0


def _page_runs(page: Any) -> list[_Run]:
    runs: list[_Run] = []

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        if not text.strip():
            return
        # position and scale in user space: the text matrix times the graphics matrix
        a, b, c, d, e, f = (tm[0] * cm[0] + tm[1] * cm[2], tm[0] * cm[1] + tm[1] * cm[3],
                            tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3],
                            tm[4] * cm[0] + tm[5] * cm[2] + cm[4],
                            tm[4] * cm[1] + tm[5] * cm[3] + cm[5])
        scale = math.hypot(c, d) or math.hypot(a, b) or 1.0
        name = str(font.get("/BaseFont", "")) if font else ""
        runs.append(_Run(e, f, float(size) * scale, bool(_BOLD.search(name)), text))

    page.extract_text(visitor_text=visit)
    return runs


def _lines(pages: list[list[_Run]]) -> list[_Line]:
    lines: list[_Line] = []
    for number, runs in enumerate(pages):
        current: list[_Run] = []
        for run in runs:
            if current and abs(run.y - current[0].y) > 0.5 * max(run.size, current[0].size):
                lines.append(_line(number, current))
                current = []
            current.append(run)
        if current:
            lines.append(_line(number, current))
    return [line for line in lines if line.text]


def _line(page: int, runs: list[_Run]) -> _Line:
    cells: list[list[str]] = [[runs[0].text]]
    for before, run in zip(runs, runs[1:], strict=False):
        reach = before.x + 0.6 * before.size * len(before.text) + before.size
        if run.x > reach or run.x < before.x - before.size:  # a gap, or back to the left
            cells.append([run.text])
        else:
            cells[-1].append(run.text)
    texts = [collapse_spaces("".join(parts)) for parts in cells]
    texts = [text for text in texts if text]
    size = max(runs, key=lambda r: len(r.text.strip())).size
    bold = all(run.bold for run in runs)
    return _Line(page, runs[0].x, runs[0].y, size, bold, " | ".join(texts), cells=len(texts))


def _drop_running_lines(lines: list[_Line], heights: list[float]) -> list[_Line]:
    """The lines without running headers, footers and page numbers (heuristic 3)."""
    n_pages = len(heights)

    def in_margin(line: _Line) -> bool:
        height = heights[line.page]
        return line.y > height * (1 - MARGIN) or line.y < height * MARGIN

    if n_pages < 3:
        return [line for line in lines if not _DOT_LEADER.search(line.text)]
    pages_with: dict[tuple[str, int], set[int]] = {}
    for line in lines:
        if in_margin(line):
            pages_with.setdefault(line.key, set()).add(line.page)
    running = {key for key, pages in pages_with.items() if len(pages) >= max(2, n_pages / 2)}
    return [line for line in lines if not (in_margin(line) and (
        line.key in running or _PAGE_NUMBER.match(line.text))) and not _DOT_LEADER.search(line.text)]


def _outline_marks(reader: Any) -> list[_Mark]:
    marks: list[_Mark] = []

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # an entry pointing nowhere: not a section
                continue
            title = collapse_spaces(str(item.title or ""))
            if page is None or page < 0 or not title:
                continue
            top = item.get("/Top")
            marks.append(_Mark(page, float(top) if top is not None else math.inf, level, title))

    try:
        walk(reader.outline, 1)
    except Exception:  # a damaged outline: fall back to layout
        return []
    marks.sort(key=lambda m: (m.page, -m.top))
    return marks


def _body_size(lines: list[_Line]) -> float:
    sizes: Counter[float] = Counter()
    for line in lines:
        sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _looks_like_heading(line: _Line) -> bool:
    text = line.text
    return (line.cells == 1 and len(text) <= MAX_HEADING_CHARS
            and len(text.split()) <= MAX_HEADING_WORDS and not text.endswith((".", ",", ";"))
            and any(ch.isalpha() for ch in text))


def _first_page_title(lines: list[_Line]) -> str:
    first = [line for line in lines if line.page == 0]
    if not first:
        return ""
    biggest = max(first, key=lambda line: line.size)
    if biggest.size >= _body_size(lines) * HEADING_SIZE_RATIO and _looks_like_heading(biggest):
        return biggest.text
    return ""


def _layout_levels(lines: list[_Line]) -> dict[float, int]:
    """Heading font sizes (larger than the body) → levels 1, 2, …; the body size in bold
    gets the next level."""
    body = _body_size(lines)
    sizes = sorted({round(line.size, 1) for line in lines
                    if line.size >= body * HEADING_SIZE_RATIO and _looks_like_heading(line)},
                   reverse=True)
    levels = {size: index + 1 for index, size in enumerate(sizes)}
    levels[-1.0] = len(sizes) + 1  # bold at body size
    return levels


class _Sections:
    """Which section is open at each line: from outline marks, or from heading lines."""

    def __init__(self, lines: list[_Line], marks: list[_Mark], title: str) -> None:
        self.marks = marks
        self.next_mark = 0
        self.stack = SectionStack()
        self.title = title
        self.levels = {} if marks else _layout_levels(lines)
        self.body = _body_size(lines)
        self.pending: list[str] = []

    def heading_of(self, line: _Line, alone: bool) -> bool:
        """Advance to `line`; True when the line is a heading (and so not a passage)."""
        if line.page == 0 and line.text == self.title and not self.stack.path:
            return True  # the title line of the first page
        if not self.marks:
            level = self._layout_level(line, alone)
            if level is not None:
                self.stack.enter(level, line.text)
            return level is not None
        while self.next_mark < len(self.marks) and self._reached(self.marks[self.next_mark], line):
            mark = self.marks[self.next_mark]
            self.stack.enter(mark.level, mark.title)
            self.pending.append(_norm(mark.title))
            self.next_mark += 1
        return self._consume_title(_norm(line.text))

    def _consume_title(self, text: str) -> bool:
        """Whether `text` is (a line of) the printed heading of an entry just opened."""
        for index, title in enumerate(self.pending):
            if text and (title.startswith(text) or title.endswith(text) or text.endswith(title)):
                rest = title[len(text):] if title.startswith(text) else ""
                if rest:
                    self.pending[index] = rest  # a heading wrapped over several lines
                else:
                    del self.pending[index]
                return True
        self.pending.clear()  # the body has begun: headings come right after their marks
        return False

    @staticmethod
    def _reached(mark: _Mark, line: _Line) -> bool:
        if mark.page != line.page:
            return mark.page < line.page
        return mark.top >= line.y - 3

    def _layout_level(self, line: _Line, alone: bool) -> int | None:
        if not _looks_like_heading(line):
            return None
        size = round(line.size, 1)
        if size in self.levels:
            return self.levels[size]
        if line.bold and alone and abs(line.size - self.body) < 0.5:
            return self.levels[-1.0]
        return None


def _norm(text: str) -> str:
    return re.sub(r"\W+", "", text.lower())


def _line_spacing(lines: list[_Line]) -> float | None:
    """The most common distance between the baselines of consecutive lines of one size."""
    drops: Counter[float] = Counter()
    for before, line in zip(lines, lines[1:], strict=False):
        drop = before.y - line.y
        if before.page == line.page and abs(before.size - line.size) < 0.5 and \
                0.9 * line.size < drop < 2.5 * line.size:
            drops[round(drop * 2) / 2] += 1
    return drops.most_common(1)[0][0] if drops else None


def _passages(lines: list[_Line], marks: list[_Mark], title: str) -> Iterator[PassageSpec]:
    sections = _Sections(lines, marks, title)
    spacing = _line_spacing(lines)

    def starts_new(previous: _Line | None, line: _Line) -> bool:
        return _starts_new(previous, line, spacing)

    paragraph = _Paragraph()
    path: tuple[str, ...] = ()
    for index, line in enumerate(lines):
        previous = paragraph.lines[-1] if paragraph.lines else None
        following = lines[index + 1] if index + 1 < len(lines) else None
        alone = starts_new(previous, line) and (following is None or starts_new(line, following))
        if sections.heading_of(line, alone):
            yield from _emit(paragraph, path)
            paragraph, path = _Paragraph(), sections.stack.path
            continue
        if line.cells > 1 or previous is None or starts_new(previous, line) or \
                previous.cells > 1:
            yield from _emit(paragraph, path)
            paragraph, path = _Paragraph(), sections.stack.path
        paragraph.lines.append(line)
    yield from _emit(paragraph, path)


def _starts_new(previous: _Line | None, line: _Line, spacing: float | None) -> bool:
    """Whether `line` begins a paragraph after `previous` (heuristic 5)."""
    if previous is None or _BULLET.match(line.text):
        return True
    if line.page != previous.page:
        continues = (not previous.text.endswith(_END_PUNCTUATION) and line.text[:1].islower())
        return not continues
    drop = previous.y - line.y
    if spacing is None:
        return drop <= 0 or drop > 1.5 * max(previous.size, line.size)
    return drop <= 0 or drop > PARAGRAPH_GAP * spacing


def _emit(paragraph: _Paragraph, path: tuple[str, ...]) -> Iterator[PassageSpec]:
    text = paragraph.text
    if not text:
        return
    pages = paragraph.pages
    meta: dict[str, Any] = {"page": pages[0]}
    if len(pages) > 1:
        meta["pages"] = pages
    yield PassageSpec(text, path, meta=meta)
