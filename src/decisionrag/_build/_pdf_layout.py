"""PDF page layout: text runs into lines, and the lines that are page furniture, not content.

What `_pdf` reads as the document's text is what is left after this module has taken out

* **running heads and feet** (`running_lines`): lines in the top or bottom band of a page
  (``MARGIN`` of its height) that sit in a *running slot* — a height at which, on a good share
  of the pages, there is a line that carries the page's printed number as its first or last
  word, is only a page number, or repeats on other pages with its digits masked. In such a
  slot a line goes when it has any of those marks, so heads that change by chapter
  ("Chapter 4: Function reference 9", "Chapter 5: Plans") go too, while a chapter title
  printed once at that height stays. A line repeated on half the pages at one height goes
  anywhere in the bands, as does a line there that is only a page number. The printed numbers
  are the PDF's page labels, else inferred: the most common offset between the physical page
  and a number at the edge of a band line.
* **contents and index pages** (`listing_pages`): pages whose lines are mostly entries — a
  title and a dot leader ending in page numbers (``anova . . . 58, 60``), a term followed by
  a comma list of page numbers (``anova, 58, 60``) — and the index's group letters (``A``,
  ``%``). On those pages everything but prose (a line of 10+ words ending a sentence) goes:
  the outline or the headings already hold the structure, and index entries would compete
  with the pages they point to. Elsewhere a lone entry with a dot leader goes.
* **table rows** (`table_rows`): consecutive lines with several cells (gaps wider than the
  text could fill) are a table; its first row is a header when it is bold and the next row is
  not, or when it has no number and the rows below have numbers in a column. Each row below a
  header becomes ``Column: value; Column: value`` (cells matched to columns by position), so a
  row reads alone; the header row itself is not a passage. A header repeated after a page
  break is recognised and dropped.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ._common import collapse_spaces

MARGIN = 0.12  # share of the page height at the top and bottom where running lines live
RUNNING_SHARE = 0.25  # share of the pages with running evidence that makes a height a slot
MAX_RUNNING_WORDS = 16
LISTING_SHARE = 0.6  # share of a page's lines that are entries on a contents or index page
MIN_LISTING_ENTRIES = 4
_PAGE_NUMBER = re.compile(r"^(page\s*)?[-–—]?\s*(\d{1,4}|[ivxlc]{1,7})\s*[-–—]?(\s*(of|/)\s*\d{1,4})?$",
                          re.IGNORECASE)
_REFS = r"[\divxlc]+(?:\s*[-–]\s*[\divxlc]+)?(?:\s*,\s*[\divxlc]+(?:\s*[-–]\s*[\divxlc]+)?)*"
_LEADER_ENTRY = re.compile(r"\S.*?(?:\s?\.){2,}\s*" + _REFS + r"$", re.IGNORECASE)
_COMMA_ENTRY = re.compile(r"^[^\d\s].*?,\s*\d{1,4}(?:\s*[-–]\s*\d{1,4})?(?:\s*,\s*\d{1,4}"
                          r"(?:\s*[-–]\s*\d{1,4})?)*$")
_DOT_LEADER = re.compile(r"(?:\.\s*){4,}[\divxlc]+$", re.IGNORECASE)
_ROMAN = re.compile(r"\b[ivxlc]{1,7}\b", re.IGNORECASE)
_NUMERIC = re.compile(r"^[\s$€£¥%+\-–.,\d]*\d[\s$€£¥%+\-–.,\d]*(?:[A-Za-z]{1,4})?$")
_EDGE_PUNCTUATION = "-–—|·•()[]"


@dataclass(slots=True)
class Run:
    x: float
    y: float
    size: float
    bold: bool
    text: str


@dataclass(slots=True, frozen=True)
class Cell:
    x: float
    text: str
    bold: bool


@dataclass(slots=True)
class Line:
    page: int  # 0-based
    x: float
    y: float
    size: float
    bold: bool
    text: str
    cells: tuple[Cell, ...] = ()  # more than one: a table row

    @property
    def n_cells(self) -> int:
        return max(1, len(self.cells))

    @property
    def key(self) -> tuple[str, int]:
        return masked(self.text), round(self.y)


def masked(text: str) -> str:
    """`text` lowercased with its numbers (arabic and roman) as ``#``: equal for the running
    head of every page of a chapter."""
    return _ROMAN.sub("#", re.sub(r"\d+", "#", text.lower()))


def lines_of(pages: Sequence[Sequence[Run]]) -> list[Line]:
    """Runs grouped into lines: consecutive runs whose baselines are within half a font size."""
    lines: list[Line] = []
    for number, runs in enumerate(pages):
        current: list[Run] = []
        for run in runs:
            if current and abs(run.y - current[0].y) > 0.5 * max(run.size, current[0].size):
                lines.append(_line(number, current))
                current = []
            current.append(run)
        if current:
            lines.append(_line(number, current))
    return [line for line in lines if line.text]


def _line(page: int, runs: list[Run]) -> Line:
    groups: list[list[Run]] = [[runs[0]]]
    for before, run in itertools.pairwise(runs):
        reach = before.x + 0.6 * before.size * len(before.text) + before.size
        if run.x > reach or run.x < before.x - before.size:  # a gap, or back to the left
            groups.append([run])
        else:
            groups[-1].append(run)
    cells = tuple(Cell(group[0].x, text, all(r.bold for r in group))
                  for group in groups if (text := _printable("".join(r.text for r in group))))
    size = max(runs, key=lambda r: len(r.text.strip())).size
    bold = all(run.bold for run in runs)
    text = " | ".join(cell.text for cell in cells)
    return Line(page, runs[0].x, runs[0].y, size, bold, text, cells if len(cells) > 1 else ())


def _printable(text: str) -> str:
    """`text` on one line without control characters (a backspace glyph in a code listing)."""
    return collapse_spaces("".join(ch if ch.isprintable() else " " for ch in text))


# -- running heads and feet ---------------------------------------------------------------------


def printed_numbers(lines: Sequence[Line], heights: Sequence[float],
                    labels: Sequence[str] | None) -> list[str | None]:
    """The number printed on each page: its page label, else physical + the usual offset."""
    if labels is not None:
        return list(labels)
    per_page: set[tuple[int, int]] = set()  # (page, offset): each page counts once
    for line in lines:
        if _in_band(line, heights):
            per_page.update((line.page, int(word) - (line.page + 1))
                            for word in _edge_words(line.text) if word.isdigit())
    offsets = Counter(offset for _page, offset in per_page)
    if not offsets:
        return [None] * len(heights)
    offset, count = offsets.most_common(1)[0]
    if count < max(2, RUNNING_SHARE * len(heights)):
        return [None] * len(heights)
    return [str(page + 1 + offset) if page + 1 + offset > 0 else None
            for page in range(len(heights))]


def _edge_words(text: str) -> list[str]:
    words = text.replace("|", " ").split()
    if not words:
        return []
    edges = [words[0].strip(_EDGE_PUNCTUATION), words[-1].strip(_EDGE_PUNCTUATION)]
    return [word for word in dict.fromkeys(edges) if word]


def _in_band(line: Line, heights: Sequence[float]) -> bool:
    height = heights[line.page]
    return line.y > height * (1 - MARGIN) or line.y < height * MARGIN


def running_lines(lines: Sequence[Line], heights: Sequence[float],
                  labels: Sequence[str] | None) -> set[int]:
    """Indexes (into `lines`) of running heads, feet and page numbers (see the module doc)."""
    n_pages = len(heights)
    if n_pages < 3:
        return set()
    printed = printed_numbers(lines, heights, labels)
    band = [i for i, line in enumerate(lines) if _in_band(line, heights)]
    slot_of = {i: (round(lines[i].y / 2), lines[i].page) for i in band}
    pages_with_key: dict[tuple[str, int], set[int]] = defaultdict(set)
    pages_in_slot_key: dict[tuple[int, str], set[int]] = defaultdict(set)
    for i in band:
        line = lines[i]
        pages_with_key[line.key].add(line.page)
        pages_in_slot_key[(slot_of[i][0], masked(line.text))].add(line.page)

    def numbered(i: int) -> bool:
        line = lines[i]
        if _PAGE_NUMBER.match(line.text):
            return True
        label = printed[line.page]
        return label is not None and len(line.text.split()) <= MAX_RUNNING_WORDS and \
            label.lower() in (word.lower() for word in _edge_words(line.text))

    def repeated(i: int) -> bool:
        return len(lines[i].text.split()) <= MAX_RUNNING_WORDS and \
            len(pages_in_slot_key[(slot_of[i][0], masked(lines[i].text))]) >= 2

    evidence = {i for i in band if numbered(i) or repeated(i)}
    slot_pages: dict[int, set[int]] = defaultdict(set)
    for i in evidence:
        slot_pages[slot_of[i][0]].add(lines[i].page)
    slots = {slot for slot, pages in slot_pages.items()
             if len(pages) >= max(3, RUNNING_SHARE * n_pages)}
    dropped = {i for i in evidence if slot_of[i][0] in slots}
    dropped |= {i for i in band if _PAGE_NUMBER.match(lines[i].text)
                or len(pages_with_key[lines[i].key]) >= max(2, n_pages / 2)}
    return dropped


# -- contents and index pages -------------------------------------------------------------------


def is_entry(text: str) -> bool:
    """A contents or index entry: a title with a dot leader and page numbers, or a term with
    a comma list of page numbers."""
    return bool(_LEADER_ENTRY.match(text) or _COMMA_ENTRY.match(text))


def _is_group_letter(text: str) -> bool:
    return len(text) == 1 or (len(text) <= 2 and not any(ch.isalnum() for ch in text))


def listing_pages(lines: Sequence[Line], skip: set[int]) -> set[int]:
    """The (0-based) pages that are a table of contents or an index."""
    per_page: dict[int, list[str]] = defaultdict(list)
    for i, line in enumerate(lines):
        if i not in skip:
            per_page[line.page].append(line.text)
    found: set[int] = set()
    for page in sorted(per_page):
        texts = per_page[page]
        entries = sum(1 for text in texts if is_entry(text))
        letters = sum(1 for text in texts if _is_group_letter(text))
        enough = MIN_LISTING_ENTRIES if page - 1 not in found else 1  # or the listing goes on
        if entries >= enough and entries + letters >= LISTING_SHARE * len(texts):
            found.add(page)
    return found


def is_prose(text: str) -> bool:
    return len(text.split()) >= 10 and text.rstrip().endswith((".", "!", "?"))


def furniture(lines: Sequence[Line], heights: Sequence[float],
              labels: Sequence[str] | None) -> set[int]:
    """Indexes of every line that is not content: running lines, the entries and titles of
    contents and index pages, and stray contents entries with dot leaders."""
    dropped = running_lines(lines, heights, labels)
    listings = listing_pages(lines, dropped)
    for i, line in enumerate(lines):
        if (line.page in listings and not is_prose(line.text)) or _DOT_LEADER.search(line.text):
            dropped.add(i)
    return dropped


# -- tables -------------------------------------------------------------------------------------


def table_rows(rows: Sequence[Line]) -> list[str | None]:
    """The text of each row of one table (consecutive lines with several cells): ``Column:
    value; …`` under a header, else the cells joined with `` | ``; None for a header row,
    which is not a passage of its own."""
    if not rows:
        return []
    header = rows[0] if _is_header(rows) else None
    texts: list[str | None] = []
    for row in rows:
        if header is not None and _same_cells(row, header):
            texts.append(None)  # the header, or the header repeated after a page break
        elif header is not None:
            texts.append(_labelled(row, header))
        else:
            texts.append(row.text)
    return texts


def _is_header(rows: Sequence[Line]) -> bool:
    if len(rows) < 2:
        return False
    first, body = rows[0], rows[1:]
    if all(cell.bold for cell in first.cells) and not all(cell.bold for cell in body[0].cells):
        return True
    if any(_NUMERIC.match(cell.text) for cell in first.cells):
        return False
    columns = [cell.x for cell in first.cells]
    for column in range(len(columns)):
        values = [cells.get(column) for cells in (_by_column(row, columns) for row in body)]
        if values and all(v is not None and _NUMERIC.match(v) for v in values):
            return True
    return False


def _same_cells(row: Line, header: Line) -> bool:
    return [c.text for c in row.cells] == [c.text for c in header.cells]


def _by_column(row: Line, columns: list[float]) -> dict[int, str]:
    """The row's cells by the header column each falls under (the last starting left of it)."""
    found: dict[int, list[str]] = {}
    tolerance = row.size
    for cell in row.cells or (Cell(row.x, row.text, row.bold),):
        starts = [j for j, x in enumerate(columns) if x <= cell.x + tolerance]
        column = starts[-1] if starts else 0
        found.setdefault(column, []).append(cell.text)
    return {column: " ".join(parts) for column, parts in found.items()}


def _labelled(row: Line, header: Line) -> str:
    columns = [cell.x for cell in header.cells]
    cells = _by_column(row, columns)
    return "; ".join(f"{header.cells[j].text}: {value}" for j, value in sorted(cells.items()))
