"""The shared benchmark format: one JSON object per line, one line per passage.

Fields (see ``shared/data/README.md``): ``id``, ``doc_id`` and ``text`` are required;
``doc_title`` (may be empty), ``section`` (heading path, outermost first), ``group`` and
``url`` are optional, and so are ``metadata`` (an object: the passage's metadata) and
``doc_metadata`` (an object: its document's; lines of one document may repeat it or give it
once — their keys are merged, and a key given two different values is an error). Keys of
``metadata`` that every passage of a document shares are stored once, on the document (see
:mod:`._metadata`). The tree is ``group`` → document → ``section`` path → passage; passage
ids are the passages' node keys, ``doc_id`` the document's; ``url`` goes into the passage's
metadata and the document's first one into the document's.

Documents come in order of first appearance. A document whose passages are not contiguous
(its ``doc_id`` reappears after another document's lines) is regrouped correctly when the
file is at most ``REGROUP_LIMIT_BYTES`` (its passages are buffered per document); a larger
file is streamed one document at a time, so there a reappearing ``doc_id`` is an InputError
naming both lines (sort the file by document first).

A document with an empty ``doc_title`` gets a title and description derived from its text
(:mod:`._derive`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._tree import DocumentSpec, PassageSpec
from ._derive import derive_description, derive_title
from ._metadata import check_metadata, hoist_common

REGROUP_LIMIT_BYTES = 256 * 1024 * 1024
_REQUIRED = ("id", "doc_id", "text")
_OPTIONAL_STRINGS = ("doc_title", "group", "url")

Record = dict[str, Any]
Progress = Callable[[int], None]


def _check(record: Any, where: str) -> Record:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name in _REQUIRED:
        if name not in record:
            raise InputError(f"{where}: missing required field {name!r}")
        if not isinstance(record[name], str):
            raise InputError(f"{where}: field {name!r} must be a string")
    for name in _OPTIONAL_STRINGS:
        if record.get(name) is not None and not isinstance(record[name], str):
            raise InputError(f"{where}: field {name!r} must be a string")
    section = record.get("section")
    if section is not None and (
        not isinstance(section, list) or not all(isinstance(h, str) for h in section)
    ):
        raise InputError(f"{where}: field 'section' must be a list of strings")
    for name in ("metadata", "doc_metadata"):
        if record.get(name) is not None:
            record[name] = check_metadata(record[name], f"{where}, field {name!r}")
    return record


class _Consistency:
    """Passage ids seen so far and each document's title, with the lines that gave them: a
    second passage with one id, or a document given two titles, is an error naming both."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids: dict[str, int] = {}
        self.titles: dict[str, tuple[str, int]] = {}

    def check(self, record: Record, line_no: int) -> None:
        where = f"{self.path}, line {line_no}"
        first = self.ids.setdefault(record["id"], line_no)
        if first != line_no:
            raise InputError(f"{where}: passage id {record['id']!r} is already used at line "
                             f"{first} (duplicate node ids: {record['id']!r} ×2); passage ids "
                             "must be unique")
        title = (record.get("doc_title") or "").strip()
        if title:
            known = self.titles.setdefault(record["doc_id"], (title, line_no))
            if known[0] != title:
                raise InputError(
                    f"{where}: doc_id {record['doc_id']!r} has doc_title {title!r}, but line "
                    f"{known[1]} gave it {known[0]!r}; one document has one title")


def read_records(path: Path, progress: Progress | None = None) -> Iterator[tuple[int, Record]]:
    """(line number, checked record) for every non-blank line of a JSONL file."""
    consistency = _Consistency(path)
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if progress is not None:
                progress(len(raw))
            if line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
            if not raw.strip():
                continue
            where = f"{path}, line {line_no}"
            try:
                record = json.loads(raw)
            except UnicodeDecodeError as exc:
                raise InputError(f"{where}: not UTF-8 ({exc.reason})") from exc
            except json.JSONDecodeError as exc:
                message = f"{where}: malformed JSON ({exc.msg}, column {exc.colno})"
                raise InputError(message) from exc
            except RecursionError as exc:
                raise InputError(f"{where}: JSON nested too deeply") from exc
            checked = _check(record, where)
            consistency.check(checked, line_no)
            yield line_no, checked


def _contiguous(records: Iterable[tuple[int, Record]], path: Path) -> Iterator[list[Record]]:
    finished: dict[str, int] = {}  # doc_id → the line its run ended after
    current: list[Record] = []
    last_line = 0
    for line_no, record in records:
        if current and record["doc_id"] != current[0]["doc_id"]:
            finished[current[0]["doc_id"]] = last_line
            yield current
            current = []
        if not current and record["doc_id"] in finished:
            raise InputError(
                f"{path}, line {line_no}: doc_id {record['doc_id']!r} reappears after other "
                f"documents (its passages ended at line {finished[record['doc_id']]}); files over "
                f"{REGROUP_LIMIT_BYTES >> 20} MB must keep each document's passages together")
        current.append(record)
        last_line = line_no
    if current:
        yield current


def _regrouped(records: Iterable[tuple[int, Record]]) -> Iterator[list[Record]]:
    by_doc: dict[str, list[Record]] = {}
    for _line_no, record in records:
        by_doc.setdefault(record["doc_id"], []).append(record)
    yield from by_doc.values()


def _passage_meta(record: Record, rest: dict[str, Any]) -> dict[str, Any] | None:
    meta = dict(rest)
    if record.get("url"):
        meta["url"] = record["url"]
    return meta or None


def _doc_metadata(records: list[Record], source: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for record in records:
        for key, value in (record.get("doc_metadata") or {}).items():
            if key in merged and merged[key] != value:
                raise InputError(
                    f"{source}: document {record['doc_id']!r}: doc_metadata {key!r} is given "
                    f"two values ({merged[key]!r} and {value!r})")
            merged[key] = value
    return merged


def _document(records: list[Record], groups: tuple[str, ...], source: str) -> DocumentSpec:
    first = records[0]
    common, rests = hoist_common([r.get("metadata") for r in records])
    passages = [
        PassageSpec(r["text"], tuple(r.get("section") or ()), r["id"], _passage_meta(r, rest))
        for r, rest in zip(records, rests, strict=True)
    ]
    title = (first.get("doc_title") or "").strip()
    description = None
    if not title:
        texts = [r["text"] for r in records]
        title = derive_title(texts)
        description = derive_description(title, texts)
    url = next((r["url"] for r in records if r.get("url")), None)
    meta: dict[str, Any] = {"source": source}
    if url:
        meta["url"] = url
    meta.update(common)
    meta.update(_doc_metadata(records, source))
    group = first.get("group")
    return DocumentSpec(title=title, passages=passages, key=first["doc_id"],
                        description=description, groups=groups + ((group,) if group else ()),
                        meta=meta)


def iter_jsonl(path: Path, groups: tuple[str, ...] = (), source: str | None = None,
               progress: Progress | None = None) -> Iterator[DocumentSpec]:
    """The documents of a benchmark-format JSONL file, in order of first appearance."""
    records = read_records(path, progress)
    if path.stat().st_size <= REGROUP_LIMIT_BYTES:
        runs = _regrouped(records)
    else:
        runs = _contiguous(records, path)
    for run in runs:
        yield _document(run, groups, source or str(path))
