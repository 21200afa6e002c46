"""Count the passages of PDF trees that are navigation furniture, not content.

    python benchmarks/pdf_audit.py TREE PDF_FOLDER     # a tree built from PDFs in the folder

Independent of the builder's own heuristics, from each PDF's plain page text (pypdf) and its
page labels:

* ``running_head``: the passage contains a page's running head or foot — the first or last
  text line of a page when it begins or ends with that page's printed label and has up to 9
  other words, not ending a sentence ("Chapter 4: Function reference 9");
* ``page_number``: the passage is only a page number or label ("9", "xii", "T-1");
* ``index_or_contents``: a table-of-contents or index entry — a dot leader ending in page
  numbers ("anova . . . . . 58, 60"), a lone capital letter (an index's group heads), or a
  passage under a section titled like an index or the contents.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

_LEADER = re.compile(r"(?:\.\s?){3,}\s*[\divxlcT][\divxlc\-,\s]*$", re.IGNORECASE)
_NUMBER = re.compile(r"^[-–]?\s*(\d{1,4}|[ivxlcdm]{1,7}|T-\d+)\s*[-–]?$", re.IGNORECASE)
_LISTING = re.compile(r"\b(index|table of contents|contents)\b", re.IGNORECASE)


def _reader(path: Path) -> Any:
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    return pypdf.PdfReader(str(path))


def page_texts(path: Path) -> list[str]:
    """pypdf's plain text of each page of the PDF at `path`."""
    return [page.extract_text() or "" for page in _reader(path).pages]


def running_lines(path: Path) -> set[str]:
    """The running heads and feet of a PDF: edge lines that carry the page's label."""
    reader = _reader(path)
    labels = reader.page_labels
    found: set[str] = set()
    for number, page in enumerate(reader.pages):
        lines = [" ".join(line.split()) for line in (page.extract_text() or "").splitlines()]
        lines = [line for line in lines if line]
        label = labels[number]
        for line in lines[:1] + lines[-1:]:
            if line != label and len(line.split()) <= 10 and not line.endswith(".") and (
                    line.endswith(" " + label) or line.startswith(label + " ")):
                found.add(line)
    return found


def classify(text: str, heading: tuple[str, ...], heads: set[str]) -> str | None:
    flat = " ".join(text.split())
    if _NUMBER.match(flat):
        return "page_number"
    if any(head in flat for head in heads):
        return "running_head"
    letter = len(flat) == 1 and flat.isupper()  # an index's group heading ("}" is code)
    if _LEADER.search(flat) or letter or \
            any(_LISTING.search(part) for part in heading[:1]):
        return "index_or_contents"
    return None


def audit_tree(tree_file: Path, folder: Path) -> dict[str, dict[str, int]]:
    """Per PDF document of the tree: its passages and how many are furniture, by kind."""
    from decisionrag._tree import Tree

    counts: dict[str, dict[str, int]] = {}
    with Tree.open(tree_file) as tree:
        for doc in tree.documents():
            source = folder / doc.key
            if source.suffix.lower() != ".pdf" or not source.is_file():
                continue
            heads = running_lines(source)
            row = counts.setdefault(doc.key, {"passages": 0, "running_head": 0,
                                              "page_number": 0, "index_or_contents": 0})
            for node in tree.passages_of(doc):
                row["passages"] += 1
                kind = classify(node.text, tuple(node.heading or ()), heads)
                if kind:
                    row[kind] += 1
    total = {key: sum(row[key] for row in counts.values())
             for key in ("passages", "running_head", "page_number", "index_or_contents")}
    counts["all"] = total
    return counts


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    for name, row in audit_tree(Path(sys.argv[1]), Path(sys.argv[2])).items():
        print(name, row)


if __name__ == "__main__":
    main()
