"""Optional OCR of image-only PDF pages with Tesseract.

Enabled by the ``ocr`` extra (`pytesseract`, a maintained binding that runs the ``tesseract``
program) together with Tesseract itself (Debian: ``apt-get install tesseract-ocr``; its
English data comes with it, other languages are ``tesseract-ocr-LANG``). Then every page
without a text layer that shows an image (or that is an image over half the page with at most
a stamped number or header as text) is read: each image the page draws is OCRed where it is
placed (upscaled to 300 dpi when scanned coarser than 150 dpi), and each line Tesseract finds
becomes a text run at its position on the page, its height as the font size, so the layout
rules of `_pdf` (running heads, headings, paragraphs) apply to scans as to born-digital pages.
Passages from such pages carry ``ocr: true`` in their metadata.

``DECISIONRAG_OCR=0`` turns OCR off; ``DECISIONRAG_OCR_LANG`` names Tesseract's languages
(default ``eng``; ``eng+deu`` for several).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ._common import collapse_spaces
from ._pdf_layout import Run

OCR_ENV = "DECISIONRAG_OCR"
LANG_ENV = "DECISIONRAG_OCR_LANG"
TARGET_DPI = 300
MIN_DPI = 150  # images scanned coarser are upscaled to TARGET_DPI before OCR
MAX_UPSCALE = 4.0
HOW_TO_ENABLE = ("to read it with OCR: pip install 'decisionrag[ocr]' and install Tesseract, "
                 "e.g. apt-get install tesseract-ocr")


@dataclass(slots=True, frozen=True)
class Placement:
    """Where a page draws an image XObject: its name and its box in user space."""

    name: str
    x: float
    y: float
    width: float
    height: float


def unavailable() -> str | None:
    """None when image-only pages can be OCRed; else why not and how to enable it."""
    if os.environ.get(OCR_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return f"OCR is off ({OCR_ENV}=0)"
    return _engine_missing()


@functools.lru_cache(maxsize=1)
def _engine_missing() -> str | None:
    try:
        import pytesseract
    except ImportError:
        return HOW_TO_ENABLE
    try:
        pytesseract.get_tesseract_version()
    except Exception:  # not installed, not on PATH, or broken: one answer for all
        return "to read it with OCR: install Tesseract, e.g. apt-get install tesseract-ocr"
    return None


def placements_visitor(found: list[Placement]) -> Any:
    """A pypdf ``visitor_operand_before`` that records where each image XObject is drawn."""

    def visit(operator: bytes, operands: Sequence[Any], cm: Sequence[float], _tm: Any) -> None:
        if operator == b"Do" and operands:
            a, b, c, d, e, f = (float(v) for v in cm)
            xs, ys = (e, e + a, e + c, e + a + c), (f, f + b, f + d, f + b + d)
            found.append(Placement(str(operands[0]).lstrip("/"), min(xs), min(ys),
                                   max(xs) - min(xs), max(ys) - min(ys)))

    return visit


def read_page(page: Any, placements: Sequence[Placement], box: tuple[float, float]) -> list[Run]:
    """The text runs Tesseract reads on the images of one page (`box`: its width, height)."""
    import pytesseract

    lang = os.environ.get(LANG_ENV, "").strip() or "eng"
    where = {p.name: p for p in placements if p.width > 1 and p.height > 1}
    runs: list[Run] = []
    for image_file in page.images:
        placement = where.get(str(image_file.name).rsplit(".", 1)[0])
        if placement is None:  # drawn inside a form, or not found: take it as the whole page
            placement = Placement("", 0.0, 0.0, box[0], box[1])
        runs.extend(_image_runs(pytesseract, image_file.image, placement, lang))
    return runs


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Tesseract's OpenMP threads make a page 2.5x slower on a busy CPU (measured: 6.9 s vs
    2.8 s at load 15), and builds already read files one after another or in worker
    processes: the tesseract child gets one thread unless OMP_THREAD_LIMIT is set. Only for
    the call, so libraries in this process (torch) keep their threads."""
    if "OMP_THREAD_LIMIT" in os.environ:
        yield
        return
    os.environ["OMP_THREAD_LIMIT"] = "1"
    try:
        yield
    finally:
        os.environ.pop("OMP_THREAD_LIMIT", None)


def _image_runs(pytesseract: Any, image: Any, placement: Placement, lang: str) -> list[Run]:
    dpi = image.width / (placement.width / 72)
    if dpi < MIN_DPI:
        scale = min(MAX_UPSCALE, TARGET_DPI / max(dpi, 1.0))
        image = image.resize((round(image.width * scale), round(image.height * scale)))
    with _one_thread():
        data = pytesseract.image_to_data(image.convert("L"), lang=lang,
                                         output_type=pytesseract.Output.DICT)
    lines: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if int(data["level"][i]) == 5 and word.strip():
            lines.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]),
                             []).append(i)
    sx, sy = placement.width / image.width, placement.height / image.height
    runs = []
    for words in lines.values():  # Tesseract's reading order
        left = min(data["left"][i] for i in words)
        top = min(data["top"][i] for i in words)
        bottom = max(data["top"][i] + data["height"][i] for i in words)
        text = collapse_spaces(" ".join(data["text"][i] for i in words))
        runs.append(Run(placement.x + left * sx, placement.y + placement.height - bottom * sy,
                        (bottom - top) * sy, False, text))
    return runs
