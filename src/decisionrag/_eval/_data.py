"""Datasets in the shared benchmark format: corpus.jsonl, queries.jsonl, qrels.tsv, qrels_docs.tsv.

Any folder in that format loads; every malformed line is reported with its file and line
number. The corpus tree is built once per corpus content and reused from a cache folder,
keyed by a digest of corpus.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._files import cache_root
from .._query import Query, Turn

CONVERSATION_SEP = "<::>"
_KNOWN_PREFIXES = {
    "conditionalqa": "cqa",
    "mtrag": "mtrag",
    "xquad": "xquad",
    "multidoc2dial": "md2d",
}


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One labelled query of a dataset, as written in queries.jsonl."""

    id: str
    text: str
    context: str = ""
    history: tuple[Turn, ...] = ()
    rewrite: str = ""
    answers: tuple[str, ...] = ()
    not_answerable: bool = False

    @property
    def conversation(self) -> str:
        """The conversation id: the query id before ``<::>`` (the id itself when absent)."""
        return self.id.split(CONVERSATION_SEP, 1)[0]

    def to_query(self) -> Query:
        """What navigation is asked: situation + question, or the turn with its history."""
        return Query(text=self.text, context=self.context, history=self.history, id=self.id)

    def flat_text(self) -> str:
        """What a flat retriever is asked: scenario + question (ConditionalQA) or the last turn."""
        return self.to_query().search_text


@dataclass(frozen=True, slots=True)
class CorpusPassage:
    id: str
    doc_id: str
    text: str


@dataclass
class Dataset:
    """A loaded benchmark: queries in file order, passage- and page-level relevance."""

    path: Path
    queries: list[EvalQuery]
    qrels: dict[str, dict[str, int]]
    qrels_docs: dict[str, dict[str, int]] | None = None
    warnings: list[str] = field(default_factory=list)
    corpus_file: Path | None = None  # a corpus.jsonl elsewhere (a converted BEIR corpus)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def prefix(self) -> str:
        return dataset_prefix(self.name)

    @property
    def corpus_path(self) -> Path:
        return self.corpus_file or self.path / "corpus.jsonl"

    @cached_property
    def corpus(self) -> dict[str, CorpusPassage]:
        """Passage id -> passage (doc id and text), read once from corpus.jsonl."""
        return {p.id: p for p in read_corpus(self.corpus_path)}

    def limit(self, n: int | None) -> Dataset:
        """The first `n` queries (whole conversations stay whole only if `n` falls between them)."""
        if n is None or n >= len(self.queries):
            return self
        kept = self.queries[:n]
        ids = {q.id for q in kept}
        docs = {k: v for k, v in self.qrels_docs.items() if k in ids} if self.qrels_docs else None
        return replace(
            self,
            queries=kept,
            qrels={k: v for k, v in self.qrels.items() if k in ids},
            qrels_docs=docs,
            warnings=list(self.warnings),
        )

    def gold_docs(self, query_id: str) -> set[str]:
        """Gold pages: from qrels_docs.tsv when present, else the gold passages' documents."""
        if self.qrels_docs is not None and query_id in self.qrels_docs:
            return {d for d, s in self.qrels_docs[query_id].items() if s > 0}
        corpus = self.corpus
        return {
            corpus[p].doc_id
            for p, s in self.qrels.get(query_id, {}).items()
            if s > 0 and p in corpus
        }

    def digest(self) -> str:
        """The corpus file's digest, salted with the builder's version so that a tree built
        by an older decisionrag (other titles, other splitting) is not reused."""
        from .._tree import SCHEMA_VERSION
        from .._version import __version__

        return hashlib.sha256(
            f"{file_digest(self.corpus_path)}:{__version__}:{SCHEMA_VERSION}".encode()
        ).hexdigest()

    def tree_path(self, cache_dir: str | os.PathLike[str] | None = None) -> Path:
        root = Path(cache_dir).expanduser() if cache_dir else cache_root() / "trees"
        return root / f"{_slug(self.name)}-{self.digest()[:16]}.tree"


def dataset_prefix(name: str) -> str:
    """A short metric-key prefix: ``conditionalqa-dev`` -> ``cqa``; unknown names are slugged."""
    lowered = name.lower()
    for known, prefix in _KNOWN_PREFIXES.items():
        if lowered.startswith(known):
            return prefix
    return _slug(lowered).replace("-", "_") or "data"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- reading -------------------------------------------------------------------------------


def load_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Load a dataset folder; raises InputError naming the file and line of any bad input."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise InputError(f"{folder}: no such dataset folder")
    for required in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        if not (folder / required).is_file():
            raise InputError(f"{folder}: missing {required} (see the shared data format)")
    queries = read_queries(folder / "queries.jsonl")
    known = {q.id for q in queries}
    warnings: list[str] = []
    qrels = read_qrels(folder / "qrels.tsv", known, warnings)
    docs_file = folder / "qrels_docs.tsv"
    qrels_docs = read_qrels(docs_file, known, warnings) if docs_file.is_file() else None
    return Dataset(folder, queries, qrels, qrels_docs, warnings)


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise InputError(f"{path}:{number}: expected a JSON object")
            yield number, record


def _string(record: dict[str, Any], name: str, where: str, required: bool = True) -> str:
    value = record.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip() and name == "id"):
        raise InputError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")
    return value


def _history(value: Any, where: str) -> tuple[Turn, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(f"{where}: field 'history' must be a list of turns")
    turns = []
    for index, turn in enumerate(value):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("text"), str)
            or turn.get("role") not in ("user", "agent")
        ):
            raise InputError(
                f"{where}: history[{index}] must be {{'role': 'user'|'agent', 'text': str}}"
            )
        turns.append(Turn(turn["role"], turn["text"]))
    return tuple(turns)


def _answers(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InputError(f"{where}: field 'answers' must be a list of strings")
    return tuple(value)


def read_queries(path: Path) -> list[EvalQuery]:
    queries: list[EvalQuery] = []
    seen: dict[str, int] = {}
    for number, record in _json_lines(path):
        where = f"{path}:{number}"
        query_id = _string(record, "id", where)
        if query_id in seen:
            raise InputError(
                f"{where}: duplicate query id {query_id!r} (first on line {seen[query_id]})"
            )
        seen[query_id] = number
        queries.append(
            EvalQuery(
                id=query_id,
                text=_string(record, "text", where),
                context=_string(record, "context", where, required=False),
                history=_history(record.get("history"), where),
                rewrite=_string(record, "rewrite", where, required=False),
                answers=_answers(record.get("answers"), where),
                not_answerable=bool(record.get("not_answerable", False)),
            )
        )
    if not queries:
        raise InputError(f"{path}: no queries")
    return queries


def read_qrels(
    path: Path, known_queries: set[str], warnings: list[str]
) -> dict[str, dict[str, int]]:
    """BEIR-style TSV with a header; rows of query ids not in queries.jsonl are skipped."""
    qrels: dict[str, dict[str, int]] = {}
    unknown = 0
    with path.open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        if len(header) != 3 or header[0] != "query-id":
            raise InputError(
                f"{path}:1: expected the header 'query-id<TAB>corpus-id<TAB>score', "
                f"got {'<TAB>'.join(header)!r}"
            )
        for number, line in enumerate(handle, 2):
            if not line.strip():
                continue
            query_id, item, score = _qrels_row(line, f"{path}:{number}")
            if query_id not in known_queries:
                unknown += 1
                continue
            qrels.setdefault(query_id, {})[item] = score
    if unknown:
        warnings.append(
            f"{path.name}: {unknown} rows for query ids not in queries.jsonl were skipped"
        )
    return qrels


def _qrels_row(line: str, where: str) -> tuple[str, str, int]:
    parts = line.rstrip("\r\n").split("\t")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise InputError(f"{where}: expected 3 tab-separated columns, got {len(parts)}")
    try:
        score = int(float(parts[2]))
    except ValueError as exc:
        raise InputError(f"{where}: score {parts[2]!r} is not a number") from exc
    return parts[0], parts[1], score


def read_corpus(path: Path) -> Iterator[CorpusPassage]:
    """Passages of corpus.jsonl (id, doc_id, text), checked field by field."""
    for number, record in _json_lines(path):
        where = f"{path}:{number}"
        yield CorpusPassage(
            _string(record, "id", where),
            _string(record, "doc_id", where),
            _string(record, "text", where),
        )
