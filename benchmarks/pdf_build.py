"""PDF build benchmark: pages per second and peak RSS building a generated PDF corpus.

    python benchmarks/pdf_build.py                       # 1,000 pages in 50 files of 20
    python benchmarks/pdf_build.py --pages 200 --pages-per-file 10

The corpus is made first with fpdf2 (not timed): each file has an outline (one chapter per
page, a subsection on every other page), a running header and a page-number footer, four
paragraphs of about 90 words a page and a three-row table on every fifth page. The build
(`decisionrag._build.build_tree`, the code path of `decisionrag build`) then runs in a fresh
child process, which reports its wall and CPU time, the tree's counts and its own peak RSS
(VmHWM; getrusage off Linux).
"""

from __future__ import annotations

import argparse
import json
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


def make_corpus(folder: Path, pages: int, per_file: int, seed: int) -> int:
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
    files = 0
    for start in range(0, pages, per_file):
        pdf = Report()
        pdf.set_title(f"Report {files}")
        for page in range(min(per_file, pages - start)):
            pdf.add_page()
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
    from decisionrag._build import build_tree

    start, start_cpu = time.perf_counter(), time.process_time()
    report = build_tree([folder], out)
    print(json.dumps({
        "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - start_cpu,
        "counts": report.counts, "skipped": len(report.skipped), "peak_rss_mb": peak_rss_mb(),
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--pages-per-file", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        build_child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        started = time.perf_counter()
        files = make_corpus(folder, args.pages, args.pages_per_file, args.seed)
        made = time.perf_counter() - started
        size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        done = subprocess.run([sys.executable, __file__, "--child", str(folder),
                               str(Path(tmp) / "t.tree")], capture_output=True, text=True,
                              check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
    counts = result["counts"]
    print(f"corpus: {files} files, {args.pages} pages, {size_mb:.1f} MB (made in {made:.1f} s)")
    print("| pages | files | documents | sections | passages | skipped | build s | CPU s "
          "| pages/s (wall) | pages/s (CPU) | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.pages:,} | {files} | {counts['document']} | {counts['section']:,} "
          f"| {counts['passage']:,} | {result['skipped']} | {result['seconds']:.1f} "
          f"| {result['cpu_seconds']:.1f} | {args.pages / result['seconds']:.1f} "
          f"| {args.pages / result['cpu_seconds']:.1f} | {result['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
