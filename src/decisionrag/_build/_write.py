"""Documents → a tree file: the build report, the local reader, and `build_tree`.

The file is written atomically by `TreeWriter`. A `finish` step (clustering, when the
application layer asks for it) runs on the writer before it commits; this package knows
nothing about clustering.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._progress import step
from .._tree import DocumentSpec, TreeWriter, check_output
from ._common import PART_PASSAGES, split_headingless
from ._sources import FORMATS, Progress, _documents, _plan, _Source, source_size

Finish = Callable[[TreeWriter, bool], Any]  # (writer, progress) -> report kept in BuildReport.cluster


@dataclass
class BuildReport:
    """What a build wrote and what it skipped."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    ignored: int = 0
    seconds: float = 0.0
    cluster: Any = None  # the ClusterReport when the build clustered its documents
    split: int = 0  # long documents without headings written as parts (see split_headingless)
    vectors: Any = None  # the VectorsReport when node vectors were stored with the tree
    vectors_note: str | None = None  # why no vectors were stored, when they were wanted
    bm25: Any = None  # the BM25Report when the BM25 index was stored with the tree
    bm25_note: str | None = None  # why no BM25 index was stored

    def summary(self) -> str:
        counts = self.counts
        return (f"wrote {self.path}: {counts.get('document', 0):,} documents, "
                f"{counts.get('passage', 0):,} passages, {counts.get('section', 0):,} sections, "
                f"{counts.get('group', 0):,} groups in {self.seconds:.1f} s"
                + (f"; {self.split:,} long documents without headings split into parts of "
                   f"{PART_PASSAGES} passages" if self.split else ""))

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


Reader = Callable[[Sequence[_Source], BuildReport, Progress], Iterator[DocumentSpec]]


def _read_locally(plan: Sequence[_Source], report: BuildReport,
                  advance: Progress) -> Iterator[DocumentSpec]:
    for source in plan:
        yield from _documents(source, report.skipped, advance)


@contextmanager
def _parsing(total: int, enabled: bool) -> Iterator[Progress]:
    """The parsing step, counting the bytes of the sources read."""
    with step("parsing", total, "B", enabled=enabled) as shown:
        yield shown.advance


def build_tree(
    sources: Sequence[str | Path], out: str | Path, *, format: str = "auto",
    progress: bool = False, reader: Reader | None = None, finish: Finish | None = None,
    force: bool = False,
) -> BuildReport:
    """Build a tree file at `out` from files and folders; see `decisionrag._build`.

    `finish(writer, progress)` runs after the documents are written and before the file is
    committed (the application layer clusters there); what it returns is kept in
    `BuildReport.cluster`. `reader` replaces how planned sources become documents (a build
    engine, e.g. Ray); documents must come in plan order. Clustering builds go through
    `decisionrag.build_tree` (the application layer).

    `out` may be a new path or an existing tree; anything else there (a user's file) is
    refused unless `force`, and a source of this build, a folder or a device always is."""
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if not sources:
        raise InputError("no sources given")
    check_output(out, sources, force=force)
    started = time.perf_counter()
    plan, ignored = _plan(sources, format)
    check_output(out, [source.path for source in plan], force=force)
    report = BuildReport(path=Path(out), ignored=ignored)
    try:
        report.counts = _write(sources, plan, out, report, progress, reader or _read_locally,
                               finish)
    except OSError as exc:  # the output side: folder not writable, disk full
        raise InputError(f"{out}: cannot write the tree ({exc.strerror or exc})") from exc
    report.seconds = time.perf_counter() - started
    return report


def _write(sources: Sequence[str | Path], plan: list[_Source], out: str | Path,
           report: BuildReport, progress: bool, reader: Reader,
           finish: Finish | None) -> dict[str, int]:
    total = sum(source_size(source.path) for source in plan)
    with TreeWriter(out) as writer:
        with _parsing(total, progress) as advance:
            for document in reader(plan, report, advance):
                parts = split_headingless(document.passages)
                if parts is not None:
                    document = replace(document, passages=parts)
                    report.split += 1
                writer.add_document(document)
        if writer.counts["document"] == 0:
            raise InputError(_nothing_found(sources, report))
        if finish is not None:
            report.cluster = finish(writer, progress)
        with step("writing", enabled=progress):  # indexes, counts, summaries, the rename
            writer.commit()
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


