"""Building: sources → a tree file, clustered when asked; new documents into a tree.

`decisionrag._build` turns sources into documents and writes the tree; `decisionrag._cluster`
adds group levels. This module is where the two meet, so neither imports the other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._build import BuildReport, Reader
from .._build import build_tree as write_tree
from .._build import read_documents as _read_documents
from .._build._indexes import build_indexes, store_bm25
from .._build._vectors import embed_tree as _embed_tree
from .._build._vectors import store_vectors
from .._tree import DocumentSpec, TreeWriter, check_output
from .._tree._publish import publishing

OnSkip = Callable[[str, str], None]  # (file, reason)


def build_tree(
    sources: Sequence[str | Path], out: str | Path, *, format: str = "auto",
    cluster: int | str | None = None, cluster_model: str | None = None,
    cluster_options: Mapping[str, Any] | None = None, progress: bool = False,
    reader: Reader | None = None, force: bool = False, vectors: bool | str = "auto",
    vectors_model: str | None = None, vectors_precision: str | None = None,
    bm25: bool | str = "auto",
) -> BuildReport:
    """Build a tree file at `out` from files and folders (see `decisionrag._build`).

    `cluster` (a number of groups or ``"auto"``) adds topic groups above the documents before
    the file is committed; `cluster_options` go to `decisionrag.cluster_documents`
    (branching, seed, describer, cache, encode, ...). The clustering report is kept in
    `BuildReport.cluster`. `reader` replaces how planned sources become documents (a build
    engine, e.g. Ray); documents must come in plan order. `force`: replace a file at `out`
    that is not a tree (never a source, a folder or a device).

    `vectors`: store node vectors beside the tree (``TREE.vectors/``, see
    `decisionrag._build._vectors`): True, False, or ``"auto"`` (when the ``embedded`` extra
    is installed; otherwise `BuildReport.vectors_note` says why there are none). Their time
    is `BuildReport.vectors.seconds`, apart from `BuildReport.seconds`; above `ANN_FROM`
    passages an ANN index over them is stored too (`BuildReport.vectors.ann`).

    `bm25`: store the BM25 index with the tree (``TREE.bm25/``, built in one streaming pass)
    so that no query indexes: True, False or ``"auto"`` (when bm25s, the ``eval`` extra, is
    installed; otherwise `BuildReport.bm25_note`).

    The tree, its vectors and its BM25 index are published together (`editing`): a build
    interrupted at any point (an error, Ctrl-C, SIGTERM, even SIGKILL) leaves the tree that
    was there with its own vectors, never the new tree with old ones."""
    finish = None
    if cluster is not None:
        finish = _cluster_step(cluster, cluster_model, dict(cluster_options or {}))
    check_output(out, sources, force=force)  # before the lock beside it is taken
    with editing(out):
        report = write_tree(sources, out, format=format, progress=progress, reader=reader,
                            finish=finish, force=force)
        if vectors:
            store_vectors(report, required=vectors is True, model=vectors_model,
                          precision=vectors_precision, progress=progress)
        if bm25:
            store_bm25(report, required=bm25 is True)
    return report


def editing(tree: str | os.PathLike[str]) -> contextlib.AbstractContextManager[Any]:
    """One change of `tree` and of what is stored beside it, published together at the end
    of the block and by one writer at a time (`decisionrag._tree._publish`): a second
    writer waits, then works on what the first published; an interrupted change leaves
    nothing of itself. Every writer of the application layer runs inside one; a shell that
    chains writers (add, then refresh the vectors) wraps them in one."""
    return publishing(tree)


def embed_tree(tree: str | os.PathLike[str], **options: Any) -> Any:
    """`decisionrag._build._vectors.embed_tree`, published with the tree (`editing`)."""
    with editing(tree):
        return _embed_tree(tree, **options)


def refresh_vectors(tree: str | os.PathLike[str], *, progress: bool = False) -> list[Any]:
    """Bring what is stored beside `tree` in step with it (after `add`, `remove`, `sync`,
    `rebalance`): every vector set (only passages whose text is new are encoded) with its
    ANN index (updated in place), and the BM25 index (rebuilt). Returns their reports."""
    from .._build import BuildReport
    from .._tree._vectors import available_sets

    with editing(tree):
        reports: list[Any] = [embed_tree(tree, model=stored.model, precision=stored.precision,
                                         progress=progress) for stored in available_sets(tree)]
        built = BuildReport(path=Path(tree))
        store_bm25(built)
    reports.extend(r for r in (built.bm25,) if r is not None)
    return reports


def index_tree(tree: str | os.PathLike[str], *, ann: bool | None = None) -> list[Any]:
    """Rebuild the search indexes stored with `tree` from what it stores, embedding
    nothing (`decisionrag index`): its BM25 index and the ANN index of each vector set
    (`ann`: True always, False never — removing one —, None from `ANN_FROM` passages or
    where one exists). Returns their reports."""
    with editing(tree):
        return build_indexes(tree, ann=ann)


def _cluster_step(n_groups: int | str, model: str | None,
                  options: dict[str, Any]) -> Callable[[TreeWriter, bool], Any]:
    def step(writer: TreeWriter, progress: bool) -> Any:
        from .._cluster import cluster_documents  # lazily: scikit-learn and the encoder are heavy

        return cluster_documents(writer, n_groups, model=model, progress=progress, **options)

    return step


def read_documents(
    sources: Sequence[str | Path], format: str = "auto", *, on_skip: OnSkip | None = None
) -> Iterator[DocumentSpec]:
    """The documents `build_tree` would read from `sources`, in the same order; each skipped
    file (unreadable, undecodable, empty) is reported to `on_skip(file, reason)`."""
    skipped: list[tuple[str, str]] = []
    reported = 0
    for document in _read_documents(sources, format, skipped=skipped):
        reported = _report(skipped, reported, on_skip)
        yield document
    _report(skipped, reported, on_skip)


def _report(skipped: list[tuple[str, str]], reported: int, on_skip: OnSkip | None) -> int:
    if on_skip is not None:
        for file, reason in skipped[reported:]:
            on_skip(file, reason)
    return len(skipped)


def add_sources(
    tree: str | os.PathLike[str], sources: Sequence[str | Path], *, format: str = "auto",
    cache: str | os.PathLike[str] | None = None, progress: bool = False,
    on_skip: OnSkip | None = None,
) -> Any:
    """Add the documents of `sources` to an existing tree (`decisionrag.add_documents`:
    each to the nearest existing group; one already in the tree, by key or source file,
    replaces it in its place); returns its report. The file is replaced atomically."""
    from .._cluster import add_documents

    with editing(tree):
        return add_documents(tree, read_documents(sources, format, on_skip=on_skip), cache=cache,
                             progress=progress, replace=True)
