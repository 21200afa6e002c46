"""Sources → documents: which files a build reads (planning), and reading them.

Folders are walked recursively in name order (hidden entries and links to folders skipped);
see `decisionrag._build` for the rules. Nothing here writes a tree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import InputError
from .._tree import DocumentSpec
from ._common import ParsedDocument, Skip, title_from_filename
from ._docx import parse_docx
from ._html import parse_html
from ._jsonl import iter_jsonl
from ._markdown import parse_markdown
from ._metadata import file_metadata
from ._pdf import parse_pdf
from ._text import parse_text

FORMATS = ("auto", "jsonl", "markdown", "html", "text", "pdf", "docx")
_EXTENSIONS = {
    ".jsonl": "jsonl", ".md": "markdown", ".markdown": "markdown",
    ".html": "html", ".htm": "html", ".txt": "text", ".text": "text", "": "text",
    ".pdf": "pdf", ".docx": "docx",
}
_PARSERS: dict[str, Callable[[str, str], ParsedDocument]] = {
    "markdown": parse_markdown, "html": parse_html, "text": parse_text,
}
_BINARY_PARSERS: dict[str, Callable[[bytes, str], ParsedDocument]] = {
    "pdf": parse_pdf, "docx": parse_docx,
}

Progress = Callable[[int], None]
Skipped = list[tuple[str, str]]  # (file, reason)


@dataclass(frozen=True)
class _Source:
    path: Path
    format: str
    groups: tuple[str, ...]
    key: str  # the document key for single-document formats; JSONL keeps its doc_ids


def format_of(path: Path) -> str | None:
    """The format `auto` picks for a file, or None for an extension it does not read."""
    return _EXTENSIONS.get(path.suffix.lower())


def _walk(folder: Path) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        raise InputError(f"{folder}: cannot list folder ({exc.strerror})") from exc
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):  # linked folders could loop
            yield from _walk(Path(entry.path))
            continue
        try:
            is_file = entry.is_file()
        except OSError:  # a link to itself (ELOOP) and the like: read, and skipped as unreadable
            is_file = True
        if is_file:
            yield Path(entry.path)


def _benchmark_corpora(sources: Sequence[str | Path]) -> list[str | Path]:
    """A benchmark folder (corpus.jsonl beside queries.jsonl or qrels.tsv) stands for its
    corpus: its queries and judgments are not documents."""
    found: list[str | Path] = []
    for source in sources:
        folder = Path(source)
        if folder.is_dir() and (folder / "corpus.jsonl").is_file() and (
                (folder / "queries.jsonl").is_file() or (folder / "qrels.tsv").is_file()):
            found.append(folder / "corpus.jsonl")
        else:
            found.append(source)
    return found


def _plan(sources: Sequence[str | Path], fmt: str) -> tuple[list[_Source], int]:
    """The files to read, with their formats, groups and keys; and how many were ignored."""
    planned: list[_Source] = []
    ignored = 0
    sources = _benchmark_corpora(sources)
    folders = [Path(s) for s in sources if Path(s).is_dir()]
    for source in map(Path, sources):
        if source.is_file():
            planned.append(_single_file(source, fmt))
        elif source.is_dir():
            outer = (source.resolve().name,) if len(folders) > 1 else ()
            for file in _walk(source):
                file_format = format_of(file)
                if file_format is None or fmt not in ("auto", file_format):
                    ignored += 1
                    continue
                relative = file.relative_to(source)
                groups = outer + relative.parent.parts
                planned.append(_Source(file, file_format, groups, "/".join(outer + relative.parts)))
        else:
            raise InputError(f"{source}: no such file or folder")
    return planned, ignored


def _single_file(path: Path, fmt: str) -> _Source:
    file_format = fmt if fmt != "auto" else format_of(path)
    if file_format is None:
        raise InputError(f"{path}: cannot tell the format from the extension "
                         f"{path.suffix!r}; pass --format (one of {', '.join(FORMATS[1:])})")
    return _Source(path, file_format, (), path.name)


def shown_name(path: str | os.PathLike[str]) -> str:
    """A file name as it can be printed and stored: bytes that are not UTF-8 written as
    ``\\xe9`` (a name read from the file system keeps them as lone surrogates)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _name_problem(source: _Source) -> str | None:
    """Why the file's name cannot be stored (a document key, its groups and its `source`
    metadata are text), or None."""
    try:
        str(source.path).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = str(source.path)[exc.start]
        byte = ord(bad) - 0xDC00 if 0xDC80 <= ord(bad) <= 0xDCFF else None
        shown = f"byte 0x{byte:02x}" if byte is not None else f"character U+{ord(bad):04X}"
        return f"its name is not UTF-8 ({shown}); rename the file"
    return None


def _read_document(source: _Source) -> DocumentSpec | str:
    """The document of a single-document file, or the reason it is skipped."""
    problem = _name_problem(source)
    if problem is not None:
        return problem
    try:
        data = source.path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    fallback = title_from_filename(source.path.stem)
    try:
        if source.format in _BINARY_PARSERS:
            parsed = _BINARY_PARSERS[source.format](data, fallback)
        else:
            parsed = _PARSERS[source.format](data.decode("utf-8-sig"), fallback)
    except UnicodeDecodeError:
        return "undecodable (not UTF-8)"
    except RecursionError:
        return "unparseable (nested too deeply)"
    except Skip as exc:
        return str(exc)
    if not parsed.passages:
        return "empty"
    return DocumentSpec(title=parsed.title, passages=parsed.passages, key=source.key,
                        groups=source.groups, meta={**file_metadata(source.path), **parsed.meta})


def read_source(source: _Source) -> list[DocumentSpec] | str:
    """All documents of one planned source, or the reason it is skipped (no progress, no
    report: what a build engine's worker runs). A malformed JSONL file raises `InputError`."""
    if source.format != "jsonl":
        document = _read_document(source)
        return document if isinstance(document, str) else [document]
    problem = _name_problem(source)
    if problem is not None:
        return problem
    try:
        documents = list(iter_jsonl(source.path, source.groups))
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return documents or "empty"


def _documents(source: _Source, skipped: Skipped, advance: Progress) -> Iterator[DocumentSpec]:
    if source.format == "jsonl":
        yield from _jsonl_documents(source, skipped, advance)
        return
    document = _read_document(source)
    advance(source_size(source.path))
    if isinstance(document, str):
        skipped.append((shown_name(source.path), document))
    else:
        yield document


def _jsonl_documents(
    source: _Source, skipped: Skipped, advance: Progress
) -> Iterator[DocumentSpec]:
    problem = _name_problem(source)
    if problem is not None:
        skipped.append((shown_name(source.path), problem))
        return
    count = 0
    try:
        for document in iter_jsonl(source.path, source.groups, progress=advance):
            count += 1
            yield document
    except OSError as exc:
        skipped.append((shown_name(source.path), f"unreadable ({exc.strerror or exc})"))
        return
    if count == 0:
        skipped.append((shown_name(source.path), "empty"))


def source_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def plan_sources(sources: Sequence[str | Path], fmt: str = "auto") -> tuple[list[_Source], int]:
    """The files a build of `sources` reads, in order, and how many files were ignored."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    return _plan(sources, fmt)


def read_documents(
    sources: Sequence[str | Path], fmt: str = "auto", *,
    skipped: Skipped | None = None, advance: Progress | None = None,
) -> Iterator[DocumentSpec]:
    """The documents of `sources` in build order; files skipped (unreadable, empty, ...) are
    appended to `skipped` as (file, reason)."""
    plan, _ignored = plan_sources(sources, fmt)
    sink: Skipped = [] if skipped is None else skipped
    for source in plan:
        yield from _documents(source, sink, advance or (lambda _n: None))
