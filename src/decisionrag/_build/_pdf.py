"""PDF, read with pypdf (BSD-licensed, pure Python, maintained; it reads outlines, page labels,
document info, page text with font sizes and positions, and RC4/AES-encrypted files).

What becomes what (the heuristics, in order):

1. **Text runs.** Each page's text operators give runs with a position, an effective font size
   (the font size scaled by the text and graphics matrices) and a font name (``Bold``/``Black``/
   ``Heavy``/``Semibold`` in it = bold). Runs are kept in content-stream order, which is reading
   order for the producers we know (LaTeX, Texinfo, Word, fpdf2, reportlab), columns included.
   A page without text that shows images is read by OCR when it is available
   (:mod:`._pdf_ocr`).
2. **Lines** (:mod:`._pdf_layout`). Consecutive runs whose baselines are within half a font
   size are one line. A gap between two runs wider than a generous estimate of the first
   run's width (0.6 em a character, plus 1 em) is a cell boundary: such a line is a **table
   row**. Consecutive rows are a table; under a header row each row becomes ``Column: value;
   …`` and is a passage of its own.
3. **Furniture** (:mod:`._pdf_layout`): running heads and feet — also those that change by
   chapter — and page numbers are dropped, as are the entries of table-of-contents and index
   pages and stray dot-leader entries: the outline or the headings already give that
   structure, and an index entry would compete with the page it points to.
4. **Sections.** From the outline (bookmarks) when the file has one: an entry opens at its
   printed heading when the heading is found on the entry's page (else at its destination's
   height), nested entries below their parents; the heading line is not a passage. Without
   an outline, from layout: a line of at most 12 words and 120 characters, not ending in
   ``.``/``,``/``;``, set in a font at least 15% larger than the body font (the size most
   characters are set in), or in bold at the body size and standing alone, is a heading;
   larger sizes are higher levels.
5. **Title page.** The leading lines of the first page with text, up to the first outline
   entry or heading, are one passage (lines kept apart by newlines) when they are 2-15 short
   lines of at most 100 words and more pages follow: title, subtitle, authors and version
   stay together, so "who wrote this?" finds them.
6. **Passages** are paragraphs: lines join while the next line sits at most 1.3 times the
   file's usual line spacing below the last (the most common baseline-to-baseline distance;
   1.5 font sizes when there is none). A larger gap, a jump upwards (a new column), a bullet
   or a heading starts a new one. A paragraph that runs off the bottom of a page without final
   punctuation continues with a first line starting in lower case on the next page. Each
   passage's metadata holds ``page`` (1-based, physical) and, when the file has page labels
   (``/PageLabels``: roman front matter, offsets, prefixes), ``page_label``, the label printed
   on that page; a passage over several pages also has ``pages`` (and ``page_labels``).
7. **Title**: the document info title, else the largest line on the first page when it is
   short, else the file name. Document info (author, subject, keywords, creation date) and the
   page count are the document's metadata; ``pages_not_read`` lists image-only pages left
   unread when OCR is not available.

Files that cannot be read are skipped with a reason (:class:`._common.Skip`): encrypted with a
password, no text layer (scanned or image-only, with how to enable OCR when it is not
available), or not a readable PDF.
"""

from __future__ import annotations

import io
import itertools
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._tree import PassageSpec
from . import _pdf_ocr
from ._common import ParsedDocument, SectionStack, Skip, collapse_spaces
from ._pdf_layout import Line, Run, furniture, lines_of, table_rows

HEADING_SIZE_RATIO = 1.15
MAX_HEADING_WORDS = 12
MAX_HEADING_CHARS = 120
PARAGRAPH_GAP = 1.3  # times the usual line spacing that still continues a paragraph
TITLE_PAGE_LINES = 15
TITLE_PAGE_WORDS = 100
SCAN_COVER = 0.5  # share of the page an image covers on a scanned page
SCAN_MAX_CHARS = 200  # text a scanned page may carry besides its image (stamped numbers)
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_BULLET = re.compile(r"^([•◦▪‣∙·\-–*]|\d{1,3}[.)]|[a-z][.)])\s")
_SECTION_NUMBER = re.compile(r"^(?:appendix\s+)?(?:[A-Z]|\d+)(?:\.\d+)*\.?\s+", re.IGNORECASE)
_END_PUNCTUATION = (".", "!", "?", ":", ";", "\"", "”", ")")


@dataclass(slots=True)
class _Mark:
    page: int
    top: float
    level: int
    title: str


@dataclass
class _Paragraph:
    lines: list[Line] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    joiner: str = " "

    def add(self, line: Line, text: str) -> None:
        self.lines.append(line)
        self.texts.append(text)

    @property
    def text(self) -> str:
        if self.joiner == "\n":
            return "\n".join(collapse_spaces(text) for text in self.texts)
        return collapse_spaces(" ".join(self.texts))

    @property
    def pages(self) -> list[int]:
        return sorted({line.page + 1 for line in self.lines})


@dataclass(slots=True)
class _Pages:
    """What the passages need to know about the pages: printed labels and OCRed pages."""

    labels: list[str] | None
    ocr: set[int] = field(default_factory=set)  # 0-based


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
        read = [_page_runs(page) for page in reader.pages]
        marks = _outline_marks(reader)
        info = _info(reader)
        labels = _page_labels(reader)
        boxes = [_page_box(page) for page in reader.pages]
    except Skip:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file: one reason for all
        raise Skip(f"unreadable PDF ({type(exc).__name__}: {_short(exc)})") from exc
    pages = [runs for runs, _placements in read]
    known = _Pages(labels)
    unread = _read_images(reader, read, boxes, pages, known)
    heights = [height for _width, height in boxes]
    lines = lines_of(pages)
    dropped = furniture(lines, heights, labels)
    lines = [line for index, line in enumerate(lines) if index not in dropped]
    title = info.pop("title", "") or _first_page_title(lines) or fallback_title
    meta: dict[str, Any] = {**info, "page_count": len(pages)}
    if unread:
        meta["pages_not_read"] = unread
    document = ParsedDocument(title=title, meta=meta)
    document.passages = list(_passages(lines, marks, title, known))
    return document


def _read_images(reader: Any, read: list[tuple[list[Run], list[_pdf_ocr.Placement]]],
                 boxes: list[tuple[float, float]], pages: list[list[Run]],
                 known: _Pages) -> list[int]:
    """OCR the scanned pages, in place; the (1-based) pages left unread. Raises Skip when no
    page has text."""
    blank = [n for n, (runs, placements) in enumerate(read)
             if _scanned(runs, placements, boxes[n])]
    if not blank:
        if not any(pages):
            raise Skip("no text layer (an empty PDF, or one that draws its text as shapes)")
        return []
    reason = _pdf_ocr.unavailable()
    if reason is None:
        for number in blank:
            try:
                found = _pdf_ocr.read_page(reader.pages[number], read[number][1], boxes[number])
            except Exception as exc:  # a broken image or a failing tesseract: this page only
                reason = f"OCR failed: {type(exc).__name__}: {_short(exc)}"
                continue
            if found:
                pages[number] = pages[number] + found  # a stamped page number stays too
                known.ocr.add(number)
    if not any(pages):
        if reason is None:
            raise Skip("no text layer, and OCR found no text (image-only or scanned PDF)")
        raise Skip(f"no text layer (image-only or scanned PDF; {reason})")
    return [number + 1 for number in blank if number not in known.ocr]


def _scanned(runs: list[Run], placements: list[_pdf_ocr.Placement],
             box: tuple[float, float]) -> bool:
    """A page to OCR: no text but an image, or an image over half the page and hardly any
    text (a page number or a header stamped on a scan)."""
    if not placements:
        return False
    if not runs:
        return True
    area = box[0] * box[1]
    covered = max(p.width * p.height for p in placements)
    return covered >= SCAN_COVER * area and sum(len(r.text) for r in runs) < SCAN_MAX_CHARS


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


def _page_labels(reader: Any) -> list[str] | None:
    """The printed label of every page from the file's /PageLabels; None without them."""
    try:
        if "/PageLabels" not in reader.trailer["/Root"]:
            return None
        labels = [str(label) for label in reader.page_labels]
    except Exception:  # a damaged number tree: no labels rather than wrong ones
        return None
    return labels if len(labels) == len(reader.pages) else None


def _page_box(page: Any) -> tuple[float, float]:
    try:
        return float(page.mediabox.width), float(page.mediabox.height)
    except Exception:  # a page without a usable media box: assume A4
        return 595.0, 842.0


def _page_runs(page: Any) -> tuple[list[Run], list[_pdf_ocr.Placement]]:
    runs: list[Run] = []
    placements: list[_pdf_ocr.Placement] = []

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
        runs.append(Run(e, f, float(size) * scale, bool(_BOLD.search(name)), text))

    page.extract_text(visitor_text=visit,
                      visitor_operand_before=_pdf_ocr.placements_visitor(placements))
    return runs, placements


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


def resolve_marks(marks: list[_Mark], lines: Sequence[Line]) -> list[_Mark]:
    """Marks moved to their printed heading: the first line at or below the destination on the
    entry's page that reads as the entry's title (numbered or not). Producers often point
    every destination at the top of the page (Texinfo does), which would open a section
    above the text that belongs to the one before."""
    by_page: dict[int, list[Line]] = {}
    for line in lines:
        by_page.setdefault(line.page, []).append(line)
    resolved = []
    for mark in marks:
        title = _norm(mark.title)
        heading = next((line for line in by_page.get(mark.page, ())
                        if line.y <= mark.top + 3 and _reads_as(line.text, title)), None)
        resolved.append(replace(mark, top=heading.y + 0.5) if heading else mark)
    resolved.sort(key=lambda m: (m.page, -m.top))
    return resolved


def _reads_as(text: str, title: str) -> bool:
    whole, bare = _norm(text), _norm(_SECTION_NUMBER.sub("", text, count=1))
    if not title or not whole:
        return False
    return title in (whole, bare) or whole.endswith(title) or (
        len(bare) >= 8 and title.startswith(bare))


def _body_size(lines: Sequence[Line]) -> float:
    sizes: Counter[float] = Counter()
    for line in lines:
        sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _looks_like_heading(line: Line) -> bool:
    text = line.text
    return (line.n_cells == 1 and len(text) <= MAX_HEADING_CHARS
            and len(text.split()) <= MAX_HEADING_WORDS and not text.endswith((".", ",", ";"))
            and any(ch.isalpha() for ch in text))


def _first_page_title(lines: Sequence[Line]) -> str:
    first = [line for line in lines if line.page == lines[0].page] if lines else []
    if not first:
        return ""
    biggest = max(first, key=lambda line: line.size)
    if biggest.size >= _body_size(lines) * HEADING_SIZE_RATIO and _looks_like_heading(biggest):
        return biggest.text
    return ""


def _layout_levels(lines: Sequence[Line]) -> dict[float, int]:
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

    def __init__(self, lines: Sequence[Line], marks: list[_Mark], title: str) -> None:
        self.marks = resolve_marks(marks, lines)
        self.next_mark = 0
        self.stack = SectionStack()
        self.title = title
        self.levels = {} if marks else _layout_levels(lines)
        self.body = _body_size(lines)
        self.pending: list[str] = []

    def heading_of(self, line: Line, alone: bool) -> bool:
        """Advance to `line`; True when the line is a heading (and so not a passage)."""
        if line.page == 0 and line.text == self.title and not self.stack.path:
            return True  # the title line of the first page
        if not self.marks:
            level = self._layout_level(line, alone)
            if level is not None:
                self.stack.enter(level, line.text)
            return level is not None
        while self.reached_mark(line):
            mark = self.marks[self.next_mark]
            self.stack.enter(mark.level, mark.title)
            self.pending.append(_norm(mark.title))
            self.next_mark += 1
        return self._consume_title(_norm(line.text))

    def reached_mark(self, line: Line) -> bool:
        """Whether the next outline entry opens at or above `line`."""
        return self.next_mark < len(self.marks) and self._reached(self.marks[self.next_mark], line)

    def is_heading(self, line: Line) -> bool:
        """Whether `line` reads as a heading by layout (standing alone)."""
        return self._layout_level(line, True) is not None

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
    def _reached(mark: _Mark, line: Line) -> bool:
        if mark.page != line.page:
            return mark.page < line.page
        return mark.top >= line.y - 3

    def _layout_level(self, line: Line, alone: bool) -> int | None:
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


def _line_spacing(lines: Sequence[Line]) -> float | None:
    """The most common distance between the baselines of consecutive lines of one size."""
    drops: Counter[float] = Counter()
    for before, line in itertools.pairwise(lines):
        drop = before.y - line.y
        if before.page == line.page and abs(before.size - line.size) < 0.5 and \
                0.9 * line.size < drop < 2.5 * line.size:
            drops[round(drop * 2) / 2] += 1
    return drops.most_common(1)[0][0] if drops else None


def _title_block(lines: Sequence[Line], sections: _Sections) -> int:
    """How many leading lines are the title page's one passage (heuristic 5); 0 for none."""
    if not lines or all(line.page == lines[0].page for line in lines):
        return 0  # a one-page document: its lines are its content
    count = 0
    for index, line in enumerate(lines):
        if line.page != lines[0].page or sections.reached_mark(line) or line.n_cells > 1 \
                or len(line.text.split()) > MAX_HEADING_WORDS \
                or (not sections.marks and index > 0 and sections.is_heading(line)):
            break
        count += 1
    words = sum(len(line.text.split()) for line in lines[:count])
    return count if 2 <= count <= TITLE_PAGE_LINES and words <= TITLE_PAGE_WORDS else 0


def _table_texts(lines: Sequence[Line]) -> dict[int, str | None]:
    """The passage text of each table row (None: a header row, not a passage)."""
    texts: dict[int, str | None] = {}
    start = 0
    while start < len(lines):
        if lines[start].n_cells == 1:
            start += 1
            continue
        end = start
        while end < len(lines) and lines[end].n_cells > 1 and lines[end].page - lines[start].page <= 1:
            end += 1
        texts.update(zip(range(start, end), table_rows(lines[start:end]), strict=True))
        start = end
    return texts


def _passages(lines: Sequence[Line], marks: list[_Mark], title: str,
              pages: _Pages) -> Iterator[PassageSpec]:
    sections = _Sections(lines, marks, title)
    spacing = _line_spacing(lines)
    tables = _table_texts(lines)

    def starts_new(previous: Line | None, line: Line) -> bool:
        return _starts_new(previous, line, spacing)

    block = _title_block(lines, sections)
    if block:
        cover = _Paragraph(joiner="\n")
        for line in lines[:block]:
            cover.add(line, line.text)
        yield from _emit(cover, (), pages)
    paragraph = _Paragraph()
    path: tuple[str, ...] = ()
    for index in range(block, len(lines)):
        line = lines[index]
        previous = paragraph.lines[-1] if paragraph.lines else None
        following = lines[index + 1] if index + 1 < len(lines) else None
        alone = starts_new(previous, line) and (following is None or starts_new(line, following))
        if sections.heading_of(line, alone):
            yield from _emit(paragraph, path, pages)
            paragraph, path = _Paragraph(), sections.stack.path
            continue
        text = tables.get(index, line.text)
        if text is None:  # a table's header row: its cells are in every row below
            continue
        if line.n_cells > 1 or previous is None or starts_new(previous, line) or \
                previous.n_cells > 1:
            yield from _emit(paragraph, path, pages)
            paragraph, path = _Paragraph(), sections.stack.path
        paragraph.add(line, text)
    yield from _emit(paragraph, path, pages)


def _starts_new(previous: Line | None, line: Line, spacing: float | None) -> bool:
    """Whether `line` begins a paragraph after `previous` (heuristic 6)."""
    if previous is None or _BULLET.match(line.text):
        return True
    if line.page != previous.page:
        continues = (not previous.text.endswith(_END_PUNCTUATION) and line.text[:1].islower()
                     and abs(previous.size - line.size) < 0.5)  # not a footnote into the body
        return not continues
    drop = previous.y - line.y
    if spacing is None:
        return drop <= 0 or drop > 1.5 * max(previous.size, line.size)
    return drop <= 0 or drop > PARAGRAPH_GAP * spacing


def _emit(paragraph: _Paragraph, path: tuple[str, ...], known: _Pages) -> Iterator[PassageSpec]:
    text = paragraph.text
    if not text:
        return
    pages = paragraph.pages
    meta: dict[str, Any] = {"page": pages[0]}
    labels = known.labels
    if labels is not None:
        meta["page_label"] = labels[pages[0] - 1]
    if len(pages) > 1:
        meta["pages"] = pages
        if labels is not None:
            meta["page_labels"] = [labels[page - 1] for page in pages]
    if any(page - 1 in known.ocr for page in pages):
        meta["ocr"] = True
    yield PassageSpec(text, path, meta=meta)
