"""PDF build benchmark: pages per second and peak RSS building a generated PDF corpus.

    python benchmarks/pdf_build.py                       # 1,000 pages in 50 files of 20
    python benchmarks/pdf_build.py --pages 200 --pages-per-file 10
    python benchmarks/pdf_build.py --pages 100 --scanned 0.2 --ocr on    # a fifth scanned
    python benchmarks/pdf_build.py --pages 100 --scanned 0.2 --ocr off   # …left unread

The corpus is made first with fpdf2 (not timed): each file has an outline (one chapter per
page, a subsection on every other page), a running header and a page-number footer, four
paragraphs of about 90 words a page and a three-row table on every fifth page. With
``--scanned S`` that share of the pages (spread evenly) is instead an A4 greyscale image at
150 dpi of the same kind of text, drawn with Pillow, as a scanner makes it. The build
(`decisionrag._build.build_tree`, the code path of `decisionrag build`) then runs in a fresh
child process (``DECISIONRAG_OCR`` set from ``--ocr``), which reports its wall and CPU time,
the tree's counts, the passages read by OCR and its own peak RSS (VmHWM; getrusage off Linux;
the tesseract program runs as a process of its own, not included; its CPU time is).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rss import peak_rss_mb

_WORDS = ["invoice", "refund", "account", "billing", "plan", "seat", "price", "tax", "report",
          "quarter", "customer", "contract", "renewal", "payment", "method", "card", "bank",
          "transfer", "credit", "balance", "statement", "period", "usage", "limit", "support",
          "ticket", "region", "currency", "discount"]


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
    return " ".join(words).capitalize() + "."


def _scan(rng: random.Random, number: int, folder: Path) -> Path:
    """A scanned page: a heading and four paragraphs of text as a 150 dpi greyscale image."""
    import textwrap

    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1240, 1754), 255)
    draw = ImageDraw.Draw(image)
    draw.text((120, 110), f"Scanned notes {number}", font=ImageFont.load_default(size=44), fill=0)
    font, y = ImageFont.load_default(size=26), 200
    for _paragraph in range(4):
        for line in textwrap.wrap(" ".join(_sentence(rng) for _ in range(5)), 68):
            draw.text((120, y), line, font=font, fill=0)
            y += 36
        y += 30
    path = folder / f"scan-{number}.png"
    image.save(path)
    return path


def make_corpus(folder: Path, pages: int, per_file: int, seed: int, scanned: float = 0.0) -> int:
    from fpdf import FPDF
    from fpdf.enums import XPos, YPos

    nxt = {"new_x": XPos.LMARGIN, "new_y": YPos.NEXT}

    class Report(FPDF):
        def header(self) -> None:
            self.set_font("helvetica", "I", 8)
            self.cell(0, 6, "ACME quarterly report", **nxt)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("helvetica", "", 8)
            self.cell(0, 6, f"Page {self.page_no()}", align="C")

    rng = random.Random(seed)
    every = round(1 / scanned) if scanned > 0 else 0
    images = folder.parent / "scans"
    images.mkdir(exist_ok=True)
    files = 0
    for start in range(0, pages, per_file):
        pdf = Report()
        pdf.set_title(f"Report {files}")
        for page in range(min(per_file, pages - start)):
            pdf.add_page()
            if every and (start + page) % every == every - 1:
                pdf.image(str(_scan(rng, start + page, images)), x=0, y=0, w=210, h=297)
                continue
            pdf.start_section(f"Chapter {page + 1}", level=0)
            pdf.set_font("helvetica", "B", 16)
            pdf.cell(0, 10, f"Chapter {page + 1}", **nxt)
            for paragraph in range(4):
                if paragraph == 2 and page % 2 == 0:
                    pdf.start_section(f"Details {page + 1}", level=1)
                    pdf.set_font("helvetica", "B", 13)
                    pdf.cell(0, 8, f"Details {page + 1}", **nxt)
                pdf.set_font("helvetica", "", 11)
                text = " ".join(_sentence(rng) for _ in range(7))
                pdf.multi_cell(0, 6, text, **nxt)
                pdf.ln(3)
            if page % 5 == 0:
                pdf.set_font("helvetica", "", 10)
                with pdf.table(col_widths=(40, 40, 40)) as table:
                    for cells in (("Region", "Plan", "Revenue"), ("EU", "Team", "1200"),
                                  ("US", "Basic", "800")):
                        row = table.row()
                        for cell in cells:
                            row.cell(cell)
        pdf.output(str(folder / f"report-{files:04d}.pdf"))
        files += 1
    return files


def build_child(folder: str, out: str) -> None:
    import resource

    from decisionrag._build import build_tree
    from decisionrag._tree import Tree

    start, start_cpu = time.perf_counter(), time.process_time()
    report = build_tree([folder], out)
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the tesseract runs
    with Tree.open(out) as tree:
        ocr = sum(1 for node in tree.iter_passages() if (node.meta or {}).get("ocr"))
        unread = sum(len(doc.meta.get("pages_not_read", [])) for doc in tree.documents())
    print(json.dumps({
        "seconds": seconds, "cpu_seconds": cpu + children.ru_utime + children.ru_stime,
        "counts": report.counts, "skipped": len(report.skipped), "peak_rss_mb": peak_rss_mb(),
        "ocr_passages": ocr, "pages_not_read": unread,
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--pages-per-file", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scanned", type=float, default=0.0,
                        help="share of the pages made as scanned images (default 0)")
    parser.add_argument("--ocr", choices=("on", "off"), default="on",
                        help="OCR image-only pages when the ocr extra and tesseract are there")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        build_child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        started = time.perf_counter()
        files = make_corpus(folder, args.pages, args.pages_per_file, args.seed, args.scanned)
        made = time.perf_counter() - started
        size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        env = {**os.environ, "DECISIONRAG_OCR": "1" if args.ocr == "on" else "0"}
        done = subprocess.run([sys.executable, __file__, "--child", str(folder),
                               str(Path(tmp) / "t.tree")], capture_output=True, text=True,
                              check=True, env=env)
        result = json.loads(done.stdout.strip().splitlines()[-1])
    counts = result["counts"]
    print(f"corpus: {files} files, {args.pages} pages ({args.scanned:.0%} scanned), "
          f"{size_mb:.1f} MB (made in {made:.1f} s); OCR {args.ocr}; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| pages | scanned | OCR | documents | sections | passages | OCR passages | pages not read "
          "| build s | CPU s | pages/s (wall) | pages/s (CPU) | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.pages:,} | {args.scanned:.0%} | {args.ocr} | {counts['document']} "
          f"| {counts['section']:,} | {counts['passage']:,} | {result['ocr_passages']:,} "
          f"| {result['pages_not_read']} | {result['seconds']:.1f} | {result['cpu_seconds']:.1f} "
          f"| {args.pages / result['seconds']:.1f} | {args.pages / result['cpu_seconds']:.1f} "
          f"| {result['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
