"""The PDF builder on PDFs as people have them: running heads that change by chapter, roman
front matter with page labels, a table of contents and an index, a title page, a table with
a header, scanned pages (OCR), and Debian's R manuals (r-doc-pdf)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from conftest import require_module
from decisionrag._build import build_tree
from decisionrag._build._common import Skip
from decisionrag._build._pdf import parse_pdf
from decisionrag._tree import NodeKind, Tree
from decisionrag._walkpage import walk_page

fpdf = require_module("fpdf")
from fpdf import FPDF
from fpdf.enums import XPos, YPos

NEXT = {"new_x": XPos.LMARGIN, "new_y": YPos.NEXT}
CI = os.environ.get("CI") == "true"  # CI installs what these tests need: missing = failure
R_MANUALS = Path("/usr/share/R/doc/manual")  # Debian's r-doc-pdf
FRONT_PAGES = 3  # title page, contents, preface: labelled i–iii
CHAPTERS = (("Invoices", 3), ("Plans", 2), ("Refunds", 1))  # (title, pages)
_WORDS = ("invoice", "ledger", "account", "balance", "credit", "statement", "payment", "period",
          "customer", "renewal", "contract", "receipt", "currency", "deposit", "transfer")


def _roman(n: int) -> str:
    return ("i", "ii", "iii", "iv", "v")[n - 1]


class _Handbook(FPDF):
    """Front matter numbered i–iii, then chapters from 1 with a running head "Chapter N:
    Title" and the printed page number on every page but a chapter's first (Texinfo's way)."""

    chapter = ""
    first_of_chapter = False

    def label(self) -> str:
        page = self.page_no()
        return _roman(page) if page <= FRONT_PAGES else str(page - FRONT_PAGES)

    def header(self) -> None:
        self.set_font("helvetica", "", 9)
        if self.chapter and not self.first_of_chapter:
            self.cell(150, 6, self.chapter)
            self.cell(0, 6, self.label(), align="R", **NEXT)
        elif self.chapter:
            self.cell(0, 6, self.label(), align="R", **NEXT)
        self.first_of_chapter = False

    def footer(self) -> None:
        if 1 < self.page_no() <= FRONT_PAGES:
            self.set_y(-15)
            self.set_font("helvetica", "", 9)
            self.cell(0, 6, self.label(), align="C")


def _para(pdf: FPDF, text: str) -> None:
    pdf.set_font("helvetica", "", 11)
    pdf.multi_cell(0, 6, text, **NEXT)
    pdf.ln(4)


def _heading(pdf: FPDF, text: str, size: int = 16, level: int | None = 0) -> None:
    if level is not None:
        pdf.start_section(text, level=level)
    pdf.set_font("helvetica", "B", size)
    pdf.cell(0, 10, text, **NEXT)


def _filler(seed: int, sentences: int = 6) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choices(_WORDS, k=11)).capitalize() + "." for _ in range(sentences))


def handbook_pdf() -> FPDF:
    pdf = _Handbook()
    pdf.set_auto_page_break(True, margin=20)
    pdf.add_page()  # i: the title page
    pdf.set_page_label("r")
    pdf.set_font("helvetica", "B", 24)
    pdf.cell(0, 14, "Billing Handbook", **NEXT)
    pdf.set_font("helvetica", "", 14)
    pdf.cell(0, 10, "A guide for the accounts team", **NEXT)
    pdf.ln(60)
    for author in ("Ada Lovelace", "Grace Hopper", "Alan Turing"):
        pdf.cell(0, 8, author, **NEXT)
    pdf.set_font("helvetica", "", 11)
    pdf.cell(0, 8, "Version 2.1", **NEXT)
    pdf.add_page()  # ii: the contents
    _heading(pdf, "Contents", level=None)
    pdf.set_font("helvetica", "", 11)
    for entry, page in (("Preface", "iii"), ("1 Invoices", "1"), ("1.1 Due dates", "2"),
                        ("2 Plans", "4"), ("3 Refunds", "6"), ("Index", "7")):
        pdf.cell(0, 7, f"{entry} {'. ' * 30} {page}", **NEXT)
    pdf.add_page()  # iii
    _heading(pdf, "Preface")
    _para(pdf, "This handbook explains how the accounts team bills its customers.")
    start = pdf.page_no() + 1
    for number, (title, pages) in enumerate(CHAPTERS, 1):
        pdf.chapter, pdf.first_of_chapter = f"Chapter {number}: {title}", True
        pdf.add_page()
        if number == 1:
            pdf.set_page_label("D", label_start=1)
        _heading(pdf, f"{number} {title}")
        if number == 2:
            _para(pdf, "Three plans are offered.")
            pdf.set_font("helvetica", "", 10)
            with pdf.table(col_widths=(40, 40, 60)) as table:
                for cells in (("Plan", "Price", "Seats"), ("Basic", "10 EUR", "1"),
                              ("Team", "50 EUR", "10")):
                    row = table.row()
                    for cell in cells:
                        row.cell(cell)
            pdf.ln(4)
        for page in range(pages):
            if page:
                pdf.add_page()
            if number == 1 and page == 1:
                _heading(pdf, "1.1 Due dates", 13, 1)
                _para(pdf, "An invoice is due thirty days after the day it is issued.")
            for paragraph in range(3 if number == 3 else 4):
                _para(pdf, _filler(number * 100 + page * 10 + paragraph))
    assert pdf.page_no() == start + sum(p for _t, p in CHAPTERS) - 1
    pdf.chapter, pdf.first_of_chapter = "Index", True
    pdf.add_page()
    _heading(pdf, "Index")
    for letter, entries in (("A", ("accounts, 1, 4", "annual plan . . . . . . . . 5")),
                            ("B", ("balance . . . . . . . . . 2", "billing cycle, 2-3")),
                            ("D", ("due dates . . . . . . . . 2", "deposits, 6")),
                            ("P", ("plans, 4, 5", "preface . . . . . . . . . iii"))):
        pdf.set_font("helvetica", "B", 12)
        pdf.cell(0, 8, letter, **NEXT)
        pdf.set_font("helvetica", "", 10)
        for entry in entries:
            pdf.cell(0, 6, entry, **NEXT)
    return pdf


@pytest.fixture(scope="module")
def handbook() -> bytes:
    return bytes(handbook_pdf().output())


def test_running_heads_contents_and_index_are_not_passages(handbook: bytes) -> None:
    document = parse_pdf(handbook, "fallback")
    texts = [p.text for p in document.passages]
    assert not [t for t in texts if "Chapter" in t or re.fullmatch(r"[\divx]+", t)]
    assert not [t for t in texts if re.search(r"(\. ){3}|, \d", t) or _index_letter(t)]
    assert not [p for p in document.passages if p.meta["page"] in (2, 10)]  # contents, index
    sections = list(dict.fromkeys(p.section for p in document.passages))
    assert sections == [(), ("Preface",), ("1 Invoices",), ("1 Invoices", "1.1 Due dates"),
                        ("2 Plans",), ("3 Refunds",)]
    # every body paragraph is there, once: four a page, three on the one-page chapter
    body = [t for t in texts if t.endswith(".") and len(t.split()) > 50]
    assert len(body) == len(set(body)) == 3 * 4 + 2 * 4 + 3


def test_title_page_is_one_passage_and_hits_carry_printed_labels(handbook: bytes) -> None:
    document = parse_pdf(handbook, "fallback")
    cover = document.passages[0]
    assert cover.text == ("Billing Handbook\nA guide for the accounts team\nAda Lovelace\n"
                          "Grace Hopper\nAlan Turing\nVersion 2.1")
    assert cover.section == () and cover.meta == {"page": 1, "page_label": "i"}
    preface = document.passages[1]
    assert preface.meta == {"page": 3, "page_label": "iii"}
    due = next(p for p in document.passages if p.text.startswith("An invoice is due"))
    assert due.meta == {"page": 5, "page_label": "2"}
    labels = {(p.meta["page"], p.meta["page_label"]) for p in document.passages}
    assert labels == {(1, "i"), (3, "iii"), (4, "1"), (5, "2"), (6, "3"), (7, "4"), (8, "5"),
                      (9, "6")}


def test_table_rows_carry_their_header_cells(handbook: bytes) -> None:
    document = parse_pdf(handbook, "fallback")
    rows = [p.text for p in document.passages if p.section == ("2 Plans",)][:3]
    assert rows == ["Three plans are offered.", "Plan: Basic; Price: 10 EUR; Seats: 1",
                    "Plan: Team; Price: 50 EUR; Seats: 10"]


def test_page_labels_filter_and_show_at_every_door(tmp_path: Path, handbook: bytes,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """page_label is metadata: the CLI, the Python API and the server filter on it and return
    it alike; `ask`, the walk page and the hit itself show the printed page beside the PDF's."""
    import httpx

    from _serve_helpers import live_server, settings
    from decisionrag import Navigator, Tree, load_judge
    from decisionrag._cli import main

    source = tmp_path / "handbook.pdf"
    source.write_bytes(handbook)
    tree_file = tmp_path / "t.tree"
    build_tree([source], tree_file)
    question, only = "When is an invoice due?", {"page_label": "2"}
    assert main(["ask", str(tree_file), question, "--judge", "scripted", "--top", "3", "--json",
                 "--filter", "page_label=2"]) == 0
    cli = json.loads(capsys.readouterr().out)["results"]
    with Tree.open(tree_file) as tree:
        result = Navigator(tree, load_judge("scripted")).retrieve(question, k=3, filters=only)
    with live_server(settings({"handbook": tree_file})) as url:
        served = httpx.post(f"{url}/v1/retrieve", json={"query": question, "k": 3,
                                                        "filters": only}, timeout=30).json()
    assert cli and [h["id"] for h in cli] == [h.key for h in result.hits] == \
        [h["id"] for h in served["results"]]
    for hits in (cli, served["results"], [h.to_dict() for h in result.hits]):
        assert {(h["metadata"]["page"], h["metadata"]["page_label"]) for h in hits} == {(5, "2")}
    assert result.hits[0].page_reference == "p. 2 (PDF page 5)"
    assert '<span class="page">p. 2 (PDF page 5)</span>' in walk_page(result)
    assert main(["ask", str(tree_file), question, "--judge", "scripted", "--top", "3",
                 "--filter", "page_label=2"]) == 0
    assert "p. 2 (PDF page 5)" in capsys.readouterr().out


def test_page_reference_wording() -> None:
    from decisionrag._navigate._pages import page_reference

    assert page_reference({}) == ""
    assert page_reference({"page": 4}) == "p. 4"
    assert page_reference({"page": 4, "page_label": "4"}) == "p. 4"
    assert page_reference({"page": 3, "page_label": "iii"}) == "p. iii (PDF page 3)"
    assert page_reference({"page": 5, "pages": [5, 6], "page_label": "2",
                           "page_labels": ["2", "3"]}) == "pp. 2–3 (PDF pages 5–6)"
    assert page_reference({"page": 5, "pages": [5, 6]}) == "pp. 5–6"


# -- scanned pages -------------------------------------------------------------------------------

SCANNED = ("Scanned receipts are kept for seven years.", "The archive room is on the second floor.")


def _scan(tmp_path: Path, lines: tuple[str, ...], name: str) -> Path:
    """A page of text rendered as a 150 dpi greyscale image, as a scanner would."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1240, 1754), 255)  # A4 at 150 dpi
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=40)
    draw.text((120, 120), "Archive Policy", font=ImageFont.load_default(size=64), fill=0)
    for number, line in enumerate(lines):
        draw.text((120, 300 + 160 * number), line, font=font, fill=0)
    path = tmp_path / name
    image.save(path)
    return path


def _ocr_ready() -> bool:
    from decisionrag._build import _pdf_ocr

    _pdf_ocr._engine_missing.cache_clear()
    ready = _pdf_ocr.unavailable() is None
    if not ready and CI:
        pytest.fail(f"OCR not available under CI=true: {_pdf_ocr.unavailable()} "
                    "(.ci/run installs tesseract-ocr; pytesseract is in the dev extra)")
    return ready


def _scanned_pdf(tmp_path: Path, with_text_page: bool) -> bytes:
    pdf = FPDF()
    if with_text_page:
        pdf.add_page()
        _heading(pdf, "Records", level=0)
        _para(pdf, "Paper records are described on the next page.")
    pdf.add_page()
    pdf.image(str(_scan(tmp_path, SCANNED, "scan.png")), x=0, y=0, w=210, h=297)
    return bytes(pdf.output())


@pytest.mark.slow
def test_scanned_pages_are_read_by_ocr_with_their_page_numbers(tmp_path: Path) -> None:
    if not _ocr_ready():
        pytest.skip("OCR not available (pip install 'decisionrag[ocr]'; apt-get install tesseract-ocr)")
    document = parse_pdf(_scanned_pdf(tmp_path, with_text_page=True), "fallback")
    first, *scanned = document.passages
    assert first.meta == {"page": 1} and first.section == ("Records",)
    assert [p.meta for p in scanned] == [{"page": 2, "ocr": True}] * len(scanned)
    read = " ".join(p.text for p in scanned)
    for line in SCANNED:
        assert line in read
    only_scans = parse_pdf(_scanned_pdf(tmp_path, with_text_page=False), "fallback")
    assert only_scans.title == "Archive Policy"  # the largest line, as on a text page
    assert " ".join(p.text for p in only_scans.passages) == " ".join(SCANNED)


def test_without_ocr_the_skip_says_how_to_enable_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from decisionrag._build import _pdf_ocr

    monkeypatch.setenv("DECISIONRAG_OCR", "0")
    with pytest.raises(Skip, match=r"^no text layer \(image-only or scanned PDF; OCR is off "
                                   r"\(DECISIONRAG_OCR=0\)\)$"):
        parse_pdf(_scanned_pdf(tmp_path, with_text_page=False), "x")
    mixed = parse_pdf(_scanned_pdf(tmp_path, with_text_page=True), "x")
    assert mixed.meta["pages_not_read"] == [2]
    monkeypatch.delenv("DECISIONRAG_OCR")
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract program on the PATH
    _pdf_ocr._engine_missing.cache_clear()
    try:
        with pytest.raises(Skip, match=r"^no text layer \(image-only or scanned PDF; to read it "
                                       r"with OCR: .*install Tesseract, e\.g\. apt-get install "
                                       r"tesseract-ocr\)$"):
            parse_pdf(_scanned_pdf(tmp_path, with_text_page=False), "x")
    finally:
        _pdf_ocr._engine_missing.cache_clear()


# -- Debian's R manuals ---------------------------------------------------------------------------


def _r_manual(name: str) -> Path:
    path = R_MANUALS / name
    if not path.is_file():
        if CI:
            pytest.fail(f"{path} missing under CI=true (.ci/run installs r-doc-pdf)")
        pytest.skip(f"{path} not found (Debian package r-doc-pdf)")
    return path


_LEADER = re.compile(r"(?:(?:\. ){3,}|\.{4,})\s*(?:\d+|[ivxlc]+)(?=,|\s|$)")  # contents, index


def _index_letter(text: str) -> bool:
    return len(text) == 1 and text.isupper()  # an index's group heading (code has "}" lines)


def _running_heads(path: Path) -> set[str]:
    """Edge lines of pypdf's plain page text that carry the page's label: the manual's
    running heads, read independently of the builder."""
    import pypdf

    reader = pypdf.PdfReader(str(path))
    heads = set()
    for page, label in zip(reader.pages, reader.page_labels, strict=True):
        lines = [" ".join(line.split()) for line in page.extract_text().splitlines() if line.strip()]
        heads |= {line for line in lines[:1] + lines[-1:]
                  if line != label and len(line.split()) <= 10 and not line.endswith(".")
                  and (line.endswith(" " + label) or line.startswith(label + " "))}
    return heads


def test_r_data_manual_from_debian(tmp_path: Path) -> None:
    path = _r_manual("R-data.pdf")
    heads = _running_heads(path)
    assert "Chapter 4: Relational databases 18" in heads and len(heads) >= 20
    build_tree([path], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        doc = tree.node("R-data.pdf")
        assert doc.title == "R Data Import/Export" and doc.meta["page_count"] == 41
        passages = [n for n in tree.subtree(doc.id) if n.kind == NodeKind.PASSAGE]
    texts = [p.text for p in passages]
    assert not [t for t in texts if any(head in t for head in heads)]  # running heads
    assert not [t for t in texts if re.fullmatch(r"[\divxlc]+|T-\d", t)]  # page numbers
    assert not [t for t in texts if _LEADER.search(t) or _index_letter(t)]  # index
    assert not [p for p in passages if p.meta["page"] in (3, 4, 38, 39, 40, 41)]  # contents, index
    assert texts[0] == "R Data Import/Export\nVersion 4.2.2 Patched (2022-11-10)\nR Core Team"
    assert passages[0].meta == {"page": 1, "page_label": "T-1"}
    author = next(p for p in passages if "The principal author of this manual" in p.text)
    assert author.meta == {"page": 5, "page_label": "1"}
    assert author.heading == ("Acknowledgements",)
    fill = next(p for p in passages if "To read such files set fill = TRUE" in p.text)
    assert fill.meta == {"page": 13, "page_label": "9"}
    assert fill.heading == ("2 Spreadsheet-like data", "Variations on read.table")


@pytest.mark.slow
def test_every_r_manual_from_debian_is_free_of_furniture(tmp_path: Path) -> None:
    names = ("R-FAQ.pdf", "R-admin.pdf", "R-intro.pdf", "R-ints.pdf", "R-lang.pdf")
    paths = [_r_manual(name) for name in names]
    for path in paths:
        document = parse_pdf(path.read_bytes(), path.stem)
        heads = _running_heads(path)
        texts = [p.text for p in document.passages]
        assert not [t for t in texts if any(head in t for head in heads)], path.name
        assert not [t for t in texts if re.fullmatch(r"[\divxlc]+|T-\d", t)], path.name
        assert not [t for t in texts if _LEADER.search(t) or _index_letter(t)], \
            path.name
        assert "\n" in texts[0] and document.passages[0].meta["page"] == 1, path.name
    intro = parse_pdf(_r_manual("R-intro.pdf").read_bytes(), "x")
    assert intro.passages[0].text.endswith("W. N. Venables, D. M. Smith\nand the R Core Team")
