"""PDF and Word builders on files made in the test, and on a real PDF shipped by Debian."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from conftest import require_module
from decisionrag._build import build_tree
from decisionrag._build._common import Skip
from decisionrag._build._pdf import parse_pdf
from decisionrag._tree import NodeKind, Tree

fpdf = require_module("fpdf")
from fpdf import FPDF
from fpdf.enums import XPos, YPos

# A PDF from the Debian package shared-mime-info (the freedesktop.org specification, pdfTeX).
DEBIAN_PDF = Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")
NEXT = {"new_x": XPos.LMARGIN, "new_y": YPos.NEXT}


class _Manual(FPDF):
    def header(self) -> None:
        self.set_font("helvetica", "I", 8)
        self.cell(0, 6, "ACME Billing Manual", **NEXT)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("helvetica", "", 8)
        self.cell(0, 6, f"Page {self.page_no()}", align="C")


def _para(pdf: FPDF, text: str) -> None:
    pdf.set_font("helvetica", "", 11)
    pdf.multi_cell(0, 6, text, **NEXT)
    pdf.ln(4)


def _heading(pdf: FPDF, text: str, size: int, level: int | None = None) -> None:
    if level is not None:
        pdf.start_section(text, level=level)
    pdf.set_font("helvetica", "B", size)
    pdf.cell(0, 10, text, **NEXT)


def manual_pdf() -> FPDF:
    """4 pages: an outline, a running header and footer, a table, a paragraph over a page break."""
    pdf = _Manual()
    pdf.set_title("Billing Manual")
    pdf.set_author("ACME Docs")
    pdf.add_page()
    _heading(pdf, "Invoices", 16, 0)
    _para(pdf, "Invoices are issued on the first day of every month. " * 3)
    _heading(pdf, "Due dates", 13, 1)
    _para(pdf, "An invoice is due thirty days after it is issued.")
    pdf.add_page()
    _heading(pdf, "Plans", 16, 0)
    _para(pdf, "Three plans are offered.")
    pdf.set_font("helvetica", "", 10)
    with pdf.table(col_widths=(40, 40, 60)) as table:
        for cells in (("Plan", "Price", "Seats"), ("Basic", "10 EUR", "1"), ("Team", "50 EUR", "10")):
            row = table.row()
            for cell in cells:
                row.cell(cell)
    pdf.ln(4)
    _para(pdf, "Refunds are paid within a week. " * 200)
    pdf.add_page()
    _heading(pdf, "Contact", 16, 0)
    _para(pdf, "Write to billing@example.com.")
    return pdf


def guide_pdf() -> FPDF:
    """No outline: headings only by font size and weight; two text columns."""
    pdf = FPDF()
    pdf.add_page()
    _heading(pdf, "Field Guide", 20)
    _heading(pdf, "Birds", 15)
    _para(pdf, "Birds have feathers and lay eggs.")
    _heading(pdf, "Owls", 11)
    _para(pdf, "Owls hunt at night.")
    _heading(pdf, "Trees", 15)
    pdf.set_font("helvetica", "", 11)
    with pdf.text_columns(ncols=2, gutter=10) as columns:
        columns.write("Oaks grow slowly and live for centuries. " * 12)
        columns.ln()
        columns.ln()
        columns.write("Birches have white bark that peels in strips. " * 12)
    return pdf


def _bytes(pdf: FPDF) -> bytes:
    return bytes(pdf.output())


def test_outline_sections_pages_table_and_running_lines() -> None:
    document = parse_pdf(_bytes(manual_pdf()), "fallback")
    assert document.title == "Billing Manual"
    assert document.meta["author"] == "ACME Docs" and document.meta["page_count"] == 4
    got = [(p.section, p.meta, p.text[:33]) for p in document.passages]
    assert got == [
        (("Invoices",), {"page": 1}, "Invoices are issued on the first "),
        (("Invoices", "Due dates"), {"page": 1}, "An invoice is due thirty days aft"),
        (("Plans",), {"page": 2}, "Three plans are offered."),
        (("Plans",), {"page": 2}, "Plan: Basic; Price: 10 EUR; Seats"),
        (("Plans",), {"page": 2}, "Plan: Team; Price: 50 EUR; Seats:"),
        (("Plans",), {"page": 2, "pages": [2, 3]}, "Refunds are paid within a week. R"),
        (("Contact",), {"page": 4}, "Write to billing@example.com."),
    ]
    assert document.passages[3].text == "Plan: Basic; Price: 10 EUR; Seats: 1"  # the header's cells
    refunds = document.passages[5].text
    assert refunds == ("Refunds are paid within a week. " * 200).strip()  # one paragraph
    texts = " ".join(p.text for p in document.passages)
    assert "ACME Billing Manual" not in texts and "Page 2" not in texts  # header, footer


def test_layout_headings_and_two_columns() -> None:
    document = parse_pdf(_bytes(guide_pdf()), "fallback")
    assert document.title == "Field Guide"
    got = [(p.section, p.text.split(".")[0]) for p in document.passages]
    assert got == [(("Birds",), "Birds have feathers and lay eggs"),
                   (("Birds", "Owls"), "Owls hunt at night"),
                   (("Trees",), "Oaks grow slowly and live for centuries"),
                   (("Trees",), "Birches have white bark that peels in strips")]
    assert document.passages[2].text == ("Oaks grow slowly and live for centuries. " * 12).strip()


def _encrypted(user_password: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", "", 12)
    pdf.cell(0, 10, "Secret salaries are listed here.")
    pdf.set_encryption(owner_password="owner", user_password=user_password)
    return _bytes(pdf)


def _image_only(tmp_path: Path) -> bytes:
    from PIL import Image

    picture = tmp_path / "scan.png"
    Image.new("RGB", (200, 100), "white").save(picture)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(str(picture), x=10, y=10, w=100)
    return _bytes(pdf)


def test_unreadable_pdfs_are_skipped_with_a_reason(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_pdf(_encrypted(""), "x").passages[0].text == "Secret salaries are listed here."
    with pytest.raises(Skip, match=r"^encrypted PDF \(needs a password\)$"):
        parse_pdf(_encrypted("letmein"), "x")
    monkeypatch.setenv("DECISIONRAG_OCR", "0")  # with OCR: tests/test_build_pdf_layout.py
    with pytest.raises(Skip, match=r"^no text layer \(image-only or scanned PDF; OCR is off"):
        parse_pdf(_image_only(tmp_path), "x")
    with pytest.raises(Skip, match=r"^unreadable PDF \("):
        parse_pdf(b"%PDF-1.7\nthis is not a PDF body", "x")


def test_build_counts_skipped_pdfs_and_keeps_pages_on_hits(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from decisionrag._cli import main

    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "manual.pdf").write_bytes(_bytes(manual_pdf()))
    (folder / "locked.pdf").write_bytes(_encrypted("letmein"))
    (folder / "scan.pdf").write_bytes(_image_only(tmp_path))
    (folder / "broken.pdf").write_bytes(_bytes(manual_pdf())[:400])
    assert main(["build", str(folder), "-o", str(tmp_path / "t.tree"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"skipped {folder / 'locked.pdf'}: encrypted PDF (needs a password)" in err
    assert f"skipped {folder / 'scan.pdf'}: no text layer" in err
    assert f"skipped {folder / 'broken.pdf'}: unreadable PDF (" in err
    assert "skipped 3 documents" in err
    with Tree.open(tmp_path / "t.tree") as tree:
        assert tree.counts["document"] == 1
        manual = tree.node("manual.pdf")
        assert manual.title == "Billing Manual" and manual.meta["page_count"] == 4
        sections = [n.heading for n in tree.subtree(manual.id) if n.kind == NodeKind.SECTION]
        assert sections == [("Invoices",), ("Invoices", "Due dates"), ("Plans",), ("Contact",)]
    assert main(["ask", str(tmp_path / "t.tree"), "Refunds paid within a week", "--judge",
                 "scripted", "--top", "1", "--json"]) == 0
    import json

    hit = json.loads(capsys.readouterr().out)["results"][0]
    assert hit["metadata"]["pages"] == [2, 3] and hit["metadata"]["author"] == "ACME Docs"
    assert hit["path"] == ["Billing Manual", "Plans"]


@pytest.mark.skipif(not DEBIAN_PDF.is_file() and os.environ.get("CI") != "true",  # CI installs it
                    reason=f"{DEBIAN_PDF} not found (Debian package shared-mime-info)")
def test_a_real_pdf_from_debian(tmp_path: Path) -> None:
    build_tree([DEBIAN_PDF], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        doc = tree.node(DEBIAN_PDF.name)
        assert doc.title == "Shared MIME-info Database"
        assert doc.meta["page_count"] == 17 and doc.meta["created"] == "2022-04-29"
        nodes = tree.subtree(doc.id)
        sections = [n.heading for n in nodes if n.kind == NodeKind.SECTION]
        assert sections[:6] == [
            ("1. Introduction",), ("1. Introduction", "1.1. Version"),
            ("1. Introduction", "1.2. What is this spec?"),
            ("1. Introduction", "1.3. Language used in this specification"),
            ("2. Unified system",), ("2. Unified system", "2.1. Directory layout")]
        assert sections[-2:] == [("3. Contributors",), ("3. Contributors", "References")]
        passages = [n for n in nodes if n.kind == NodeKind.PASSAGE]
        by_start = {p.text[:40]: p for p in passages}
        keywords = by_start['The key words "MUST", "MUST NOT", "REQUI']
        assert keywords.heading == ("1. Introduction", "1.3. Language used in this specification")
        assert keywords.meta == {"page": 2, "page_label": "2"}
        spanning = by_start["For example, when using the default path"]
        assert spanning.heading == ("2. Unified system", "2.1. Directory layout")
        assert spanning.meta == {"page": 2, "page_label": "2", "pages": [2, 3],
                                 "page_labels": ["2", "3"]}
        texts = [p.text for p in passages]
        assert texts[0] == ("Shared MIME-info Database\nX Desktop Group (http://www.freedesktop.org)"
                            "\nThomas Leonard\ntal197 at users.sf.net")  # the title block, whole
        assert "Shared MIME-info Database" not in texts  # the running header of pages 2-17
        assert not [t for t in texts if t.isdigit()]  # page numbers


def test_word_documents(tmp_path: Path) -> None:
    docx = require_module("docx")
    from decisionrag._build._docx import parse_docx

    document = docx.Document()
    document.core_properties.author = "Ops team"
    document.core_properties.keywords = "runbook"
    document.add_paragraph("Runbook", style="Title")
    document.add_paragraph("Read this first.")
    document.add_heading("Backups", level=1)
    document.add_paragraph("Backups run nightly.")
    document.add_paragraph("Check the log", style="List Bullet")
    document.add_paragraph("Rotate the disks", style="List Number")
    document.add_heading("Restore", level=2)
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).text, table.cell(0, 1).text, table.cell(0, 2).text = "Step", "Who", "When"
    merged = table.cell(1, 0).merge(table.cell(1, 1))
    merged.text = "Restore from tape"
    table.cell(1, 2).text = "Monthly"
    document.add_heading("Contacts", level=1)
    document.add_paragraph("Call the on-call engineer.")
    buffer = io.BytesIO()
    document.save(buffer)
    parsed = parse_docx(buffer.getvalue(), "fallback")
    assert parsed.title == "Runbook"
    assert parsed.meta["author"] == "Ops team" and parsed.meta["keywords"] == "runbook"
    assert [(p.section, p.text) for p in parsed.passages] == [
        ((), "Read this first."),
        (("Backups",), "Backups run nightly."),
        (("Backups",), "Check the log"),
        (("Backups",), "Rotate the disks"),
        (("Backups", "Restore"), "Step | Who | When"),
        (("Backups", "Restore"), "Restore from tape | Monthly"),
        (("Contacts",), "Call the on-call engineer."),
    ]
    with pytest.raises(Skip, match=r"^unreadable Word file \("):
        parse_docx(b"PK not a zip", "x")
    path = tmp_path / "runbook.docx"
    path.write_bytes(buffer.getvalue())
    build_tree([path], tmp_path / "t.tree")
    with Tree.open(tmp_path / "t.tree") as tree:
        assert tree.node("runbook.docx").title == "Runbook"


def test_table_of_contents_entries_are_not_passages() -> None:
    pdf = FPDF()
    pdf.add_page()
    _heading(pdf, "Contents", 16)
    _para(pdf, "Introduction . . . . . . . . . . . . 3")
    _para(pdf, "Installing .................. 12")
    _heading(pdf, "Introduction", 16)
    _para(pdf, "Dots like these... are fine in text. And so is 3.")
    document = parse_pdf(_bytes(pdf), "x")
    assert [(p.section, p.text) for p in document.passages] == [
        (("Introduction",), "Dots like these... are fine in text. And so is 3.")]
