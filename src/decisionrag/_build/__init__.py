"""Builders: source documents → a tree file.

``build_tree(sources, out)`` reads files and folders and writes one tree (atomically: an error
or an interrupt leaves no file at `out`). Formats, picked by extension with ``format="auto"``:

====================  ===================================================================
``.jsonl``            the shared benchmark format (:mod:`._jsonl`): group → doc → section
``.md .markdown``     Markdown (:mod:`._markdown`)
``.html .htm``        HTML (:mod:`._html`)
``.txt .text``, none  plain text with headings recovered from layout (:mod:`._text`)
====================  ===================================================================

Folders are walked recursively in name order (hidden entries and links to folders skipped);
the relative folder path of a file becomes its document's group path and its relative file
path the document's key. When several folders are given, each folder's own name is the
outermost group. Inside folders only files of the chosen format (any known format with
``format="auto"``) are read; the others are ignored (counted in ``BuildReport.ignored``). A
file named explicitly is read in the chosen format whatever its extension; its key is its
file name. Unreadable, undecodable and empty documents are skipped and listed in
``BuildReport.skipped``; a malformed JSONL file is an error, not a skip. The progress bar
(``progress=True``, on stderr) counts bytes read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._tree import DocumentSpec, TreeWriter
from ._common import ParsedDocument, title_from_filename
from ._html import parse_html
from ._jsonl import iter_jsonl
from ._markdown import parse_markdown
from ._metadata import file_metadata
from ._text import parse_text

FORMATS = ("auto", "jsonl", "markdown", "html", "text")
_EXTENSIONS = {
    ".jsonl": "jsonl", ".md": "markdown", ".markdown": "markdown",
    ".html": "html", ".htm": "html", ".txt": "text", ".text": "text", "": "text",
}
_PARSERS: dict[str, Callable[[str, str], ParsedDocument]] = {
    "markdown": parse_markdown, "html": parse_html, "text": parse_text,
}

Progress = Callable[[int], None]


@dataclass
class BuildReport:
    """What a build wrote and what it skipped."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    ignored: int = 0
    seconds: float = 0.0
    cluster: Any = None  # the ClusterReport when the build clustered its documents

    def summary(self) -> str:
        counts = self.counts
        return (f"wrote {self.path}: {counts.get('document', 0):,} documents, "
                f"{counts.get('passage', 0):,} passages, {counts.get('section', 0):,} sections, "
                f"{counts.get('group', 0):,} groups in {self.seconds:.1f} s")

    def warning(self) -> str | None:
        """One line about skipped documents, or None when nothing was skipped."""
        if not self.skipped:
            return None
        reasons: dict[str, int] = {}
        for _file, reason in self.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        by_reason = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        examples = ", ".join(file for file, _reason in self.skipped[:3])
        more = ", …" if len(self.skipped) > 3 else ""
        return f"skipped {len(self.skipped)} documents ({by_reason}): {examples}{more}"


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
        elif entry.is_file():
            yield Path(entry.path)


def _plan(sources: Sequence[str | Path], fmt: str) -> tuple[list[_Source], int]:
    """The files to read, with their formats, groups and keys; and how many were ignored."""
    planned: list[_Source] = []
    ignored = 0
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


def _read_document(source: _Source) -> DocumentSpec | str:
    """The document of a single-document file, or the reason it is skipped."""
    try:
        data = source.path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "undecodable (not UTF-8)"
    try:
        parsed = _PARSERS[source.format](text, title_from_filename(source.path.stem))
    except RecursionError:
        return "unparseable (nested too deeply)"
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
    try:
        documents = list(iter_jsonl(source.path, source.groups))
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return documents or "empty"


Reader = Callable[[Sequence[_Source], BuildReport, Progress], Iterator[DocumentSpec]]


def _read_locally(plan: Sequence[_Source], report: BuildReport,
                  advance: Progress) -> Iterator[DocumentSpec]:
    for source in plan:
        yield from _documents(source, report, advance)


def _documents(source: _Source, report: BuildReport, advance: Progress) -> Iterator[DocumentSpec]:
    if source.format == "jsonl":
        yield from _jsonl_documents(source, report, advance)
        return
    document = _read_document(source)
    advance(_size(source.path))
    if isinstance(document, str):
        report.skipped.append((str(source.path), document))
    else:
        yield document


def _jsonl_documents(
    source: _Source, report: BuildReport, advance: Progress
) -> Iterator[DocumentSpec]:
    count = 0
    try:
        for document in iter_jsonl(source.path, source.groups, progress=advance):
            count += 1
            yield document
    except OSError as exc:
        report.skipped.append((str(source.path), f"unreadable ({exc.strerror or exc})"))
        return
    if count == 0:
        report.skipped.append((str(source.path), "empty"))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Progress]:
    if not enabled:
        yield lambda _n: None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="B", unit_scale=True, desc="build", leave=False) as bar:
        pending = 0

        def advance(n: int) -> None:
            nonlocal pending
            pending += n
            if pending >= 1 << 20:
                bar.update(pending)
                pending = 0

        yield advance
        bar.update(pending)


def _cluster(writer: TreeWriter, n_groups: int | str, model: str | None, progress: bool,
             options: Mapping[str, Any]) -> Any:
    from .._cluster import cluster_documents  # lazily: scikit-learn and the encoder are heavy

    return cluster_documents(writer, n_groups, model=model, progress=progress, **options)


def build_tree(
    sources: Sequence[str | Path], out: str | Path, *, format: str = "auto",
    cluster: int | str | None = None, cluster_model: str | None = None,
    cluster_options: Mapping[str, Any] | None = None, progress: bool = False,
    reader: Reader | None = None,
) -> BuildReport:
    """Build a tree file at `out` from files and folders; see the module docstring.

    `cluster` (a number of groups or ``"auto"``) adds topic groups above the documents;
    `cluster_options` go to `decisionrag._cluster.cluster_documents` (branching, seed,
    describer, cache, ...). The clustering report is kept in `BuildReport.cluster`.
    `reader` replaces how planned sources become documents (a build engine, e.g. Ray);
    documents must come in plan order."""
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if not sources:
        raise InputError("no sources given")
    if Path(out).is_dir():
        raise InputError(f"{out}: is a folder; name the tree file to write")
    started = time.perf_counter()
    plan, ignored = _plan(sources, format)
    report = BuildReport(path=Path(out), ignored=ignored)
    try:
        report.counts = _write(sources, plan, out, report, cluster, cluster_model,
                               dict(cluster_options or {}), progress, reader or _read_locally)
    except OSError as exc:  # the output side: folder not writable, disk full
        raise InputError(f"{out}: cannot write the tree ({exc.strerror or exc})") from exc
    report.seconds = time.perf_counter() - started
    return report


def _write(sources: Sequence[str | Path], plan: list[_Source], out: str | Path,
           report: BuildReport, cluster: int | str | None, cluster_model: str | None,
           cluster_options: dict[str, Any], progress: bool, reader: Reader) -> dict[str, int]:
    total = sum(_size(source.path) for source in plan)
    with TreeWriter(out) as writer, _progress_bar(total, progress) as advance:
        for document in reader(plan, report, advance):
            writer.add_document(document)
        if writer.counts["document"] == 0:
            raise InputError(_nothing_found(sources, report))
        if cluster is not None:
            report.cluster = _cluster(writer, cluster, cluster_model, progress, cluster_options)
    return dict(writer.counts)


def _nothing_found(sources: Sequence[str | Path], report: BuildReport) -> str:
    names = ", ".join(str(s) for s in sources)
    message = f"no documents found in {names}"
    warning = report.warning()
    if warning:
        message += f" ({warning})"
    elif report.ignored:
        message += f" ({report.ignored} files of other formats ignored; try --format)"
    return message


__all__ = ["FORMATS", "BuildReport", "Reader", "build_tree", "format_of", "read_source"]
