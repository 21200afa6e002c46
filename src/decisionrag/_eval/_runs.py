"""Runs in and out: any retriever's ranking read from a TREC run or JSONL file, ours written back.

Formats read (chosen by content: a first non-blank character ``{`` means JSONL):

* TREC run: ``qid Q0 docid rank score tag``, whitespace-separated, one retrieved id a line.
* JSONL: one query a line, ``{"query_id": str, "results": [{"id": str, "score": number}, ...]}``.

Order within a query: score descending; equal scores keep the order the file gives them (the
rank column of a TREC run, then line order; list order in JSONL) — the retriever's own order.
trec_eval instead breaks ties by docid, descending; ``tie_break="docid"`` reproduces that.

Alignment to a dataset: a query of the dataset that the run lacks is an empty ranking (it
scores zero, as ``trec_eval -c`` counts it), a query of the run the dataset lacks is ignored,
ids that are not passages of the corpus stay in the ranking as non-relevant; every one of
these is counted in `RunAlignment`. Rankings are cut at the evaluation depth, the number of
passages asked of every built-in system, so all systems are scored on equally long lists.

Writing: every system's run as TREC, tagged with its name. The score column is the system's
own score where its scores strictly decrease down the ranking; for a query where they do not
(navigation's final multiple-choice reorder, tied BM25 scores) it is ``N - rank + 1``, so that
trec_eval, which reorders by score, reads exactly the order we scored.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._files import OutputKind, write_output

TIE_BREAKS = ("file", "docid")
Scored = list[tuple[str, float]]  # (id, score) in ranked order


@dataclass
class ExternalRun:
    """A run read from a file: query id -> ranked (id, score) pairs."""

    name: str
    path: Path
    format: str
    rankings: dict[str, Scored]

    def ids(self) -> dict[str, list[str]]:
        return {query: [item for item, _ in ranked] for query, ranked in self.rankings.items()}


@dataclass
class RunAlignment:
    """How a run met the dataset: what was missing, extra, unknown or cut."""

    name: str
    file: str
    format: str
    queries_in_run: int
    queries_scored: int
    missing_queries: list[str] = field(default_factory=list)  # counted as empty rankings
    extra_queries: int = 0  # in the run, not in the dataset: ignored
    unknown_ids: int = 0  # retrieved ids that are no passage of the corpus
    retrieved: int = 0  # ids kept after the cut
    cut_to: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "format": self.format,
            "queries_in_run": self.queries_in_run,
            "queries_scored": self.queries_scored,
            "missing_queries": len(self.missing_queries),
            "missing_examples": self.missing_queries[:5],
            "extra_queries": self.extra_queries,
            "unknown_ids": self.unknown_ids,
            "retrieved": self.retrieved,
            "cut_to": self.cut_to,
        }

    def warnings(self) -> list[str]:
        notes = []
        if self.missing_queries:
            notes.append(
                f"run {self.name!r}: {len(self.missing_queries)} of {self.queries_scored} "
                f"queries are missing from {self.file} and count as empty rankings"
            )
        if self.extra_queries:
            notes.append(
                f"run {self.name!r}: {self.extra_queries} queries of {self.file} are not in the "
                "dataset and were ignored"
            )
        if self.unknown_ids:
            notes.append(
                f"run {self.name!r}: {self.unknown_ids} of {self.retrieved} retrieved ids are not "
                "passages of the corpus (scored as non-relevant)"
            )
        return notes


# -- reading ---------------------------------------------------------------------------------


def parse_run_spec(spec: str) -> tuple[str, Path]:
    """``NAME=FILE`` -> (name, path); the name is the system's column in every table."""
    name, sep, file = spec.partition("=")
    if not sep or not name.strip() or not file.strip():
        raise InputError(f"--run {spec!r}: expected NAME=FILE")
    return name.strip(), Path(file.strip()).expanduser()


def read_run(path: str | os.PathLike[str], name: str = "", tie_break: str = "file") -> ExternalRun:
    """Read a TREC or JSONL run; InputError names the file and line of anything malformed."""
    if tie_break not in TIE_BREAKS:
        raise InputError(f"tie break {tie_break!r}: choose from {', '.join(TIE_BREAKS)}")
    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"{file}: no such run file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    lines = text.splitlines()
    first = next((line.lstrip() for line in lines if line.strip()), "")
    if not first:
        raise InputError(f"{file}: the run is empty")
    fmt = "jsonl" if first.startswith("{") else "trec"
    raw = _read_jsonl(file, lines) if fmt == "jsonl" else _read_trec(file, lines)
    rankings = {query: _order(items, tie_break) for query, items in raw.items()}
    return ExternalRun(name or file.stem, file, fmt, rankings)


# (id, score, position in the file's order) per query
_Raw = dict[str, list[tuple[str, float, float]]]


def _order(items: list[tuple[str, float, float]], tie_break: str) -> Scored:
    if tie_break == "docid":  # trec_eval: score descending, then docid descending
        ordered = sorted(items, key=lambda x: (x[1], x[0]), reverse=True)
    else:
        ordered = sorted(items, key=lambda x: (-x[1], x[2]))
    return [(item, score) for item, score, _ in ordered]


def _number(text: Any, where: str, what: str) -> float:
    if isinstance(text, bool):
        raise InputError(f"{where}: {what} must be a number, got {text!r}")
    try:
        value = float(text)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {what} {text!r} is not a number") from exc
    if not math.isfinite(value):
        raise InputError(f"{where}: {what} must be finite, got {text!r}")
    return value


def _read_trec(file: Path, lines: Sequence[str]) -> _Raw:
    raw: _Raw = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        parts = line.split()
        if len(parts) != 6:
            raise InputError(
                f"{where}: expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}"
            )
        query, _, item, rank_text, score_text, _tag = parts
        rank = _number(rank_text, where, "rank")
        if rank != int(rank):
            raise InputError(f"{where}: rank {rank_text!r} is not an integer")
        score = _number(score_text, where, "score")
        seen = first_line.setdefault((query, item), number)
        if seen != number:
            raise InputError(f"{where}: {item!r} is retrieved twice for query {query!r} (line {seen})")
        raw.setdefault(query, []).append((item, score, rank + number * 1e-9))
    return raw


def _read_jsonl(file: Path, lines: Sequence[str]) -> _Raw:
    raw: _Raw = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected an object {{query_id, results}}")
        query = record.get("query_id")
        if not isinstance(query, str) or not query:
            raise InputError(f"{where}: field 'query_id' must be a non-empty string, got {query!r}")
        if query in first_line:
            raise InputError(f"{where}: query {query!r} appears twice (line {first_line[query]})")
        first_line[query] = number
        results = record.get("results")
        if not isinstance(results, list):
            raise InputError(f"{where}: field 'results' must be a list of {{id, score}}")
        raw[query] = _json_results(results, where)
    return raw


def _json_results(results: list[Any], where: str) -> list[tuple[str, float, float]]:
    items: list[tuple[str, float, float]] = []
    seen: set[str] = set()
    for index, result in enumerate(results):
        at = f"{where}: results[{index}]"
        if not isinstance(result, dict):
            raise InputError(f"{at} must be an object {{id, score}}")
        item = result.get("id")
        if not isinstance(item, str) or not item:
            raise InputError(f"{at}: field 'id' must be a non-empty string, got {item!r}")
        if item in seen:
            raise InputError(f"{at}: {item!r} is listed twice")
        seen.add(item)
        if "score" not in result:
            raise InputError(f"{at}: field 'score' is missing")
        items.append((item, _number(result["score"], at, "field 'score'"), float(index)))
    return items


# -- alignment -------------------------------------------------------------------------------


def align(
    run: ExternalRun, query_ids: Sequence[str], passages: Iterable[str] | set[str], depth: int
) -> tuple[dict[str, Scored], RunAlignment]:
    """The run's rankings for exactly the dataset's queries, cut at `depth`, with the counts."""
    known = passages if isinstance(passages, set) else set(passages)
    wanted = set(query_ids)
    rankings: dict[str, Scored] = {}
    missing: list[str] = []
    unknown = retrieved = 0
    for query in query_ids:
        ranked = run.rankings.get(query)
        if ranked is None:
            missing.append(query)
            ranked = []
        ranked = ranked[:depth]
        rankings[query] = ranked
        retrieved += len(ranked)
        unknown += sum(1 for item, _ in ranked if item not in known)
    alignment = RunAlignment(
        name=run.name,
        file=str(run.path),
        format=run.format,
        queries_in_run=len(run.rankings),
        queries_scored=len(query_ids),
        missing_queries=missing,
        extra_queries=sum(1 for q in run.rankings if q not in wanted),
        unknown_ids=unknown,
        retrieved=retrieved,
        cut_to=depth,
    )
    return rankings, alignment


# -- writing ---------------------------------------------------------------------------------


def trec_lines(
    rankings: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float] | None],
    tag: str,
) -> Iterable[str]:
    """TREC run lines for every query (in the mapping's order), ranks from 1."""
    safe_tag = "".join(c if not c.isspace() else "_" for c in tag) or "run"
    for query, ranking in rankings.items():
        if not ranking:
            continue
        _check_id(query, "query id")
        values = _export_scores(ranking, scores.get(query))
        for rank, (item, score) in enumerate(zip(ranking, values, strict=True), 1):
            _check_id(item, "id")
            yield f"{query} Q0 {item} {rank} {score:.6f} {safe_tag}"


def _check_id(value: str, what: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise InputError(f"cannot write {what} {value!r} to a TREC run: it holds whitespace")


def _export_scores(ranking: Sequence[str], scores: Sequence[float] | None) -> list[float]:
    if scores is not None and len(scores) == len(ranking):
        rounded = [round(float(s), 6) for s in scores]
        if all(a > b for a, b in itertools.pairwise(rounded)):
            return rounded
    n = len(ranking)
    return [float(n - rank) for rank in range(n)]


def write_trec(
    path: str | os.PathLike[str],
    rankings: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float] | None],
    tag: str,
    **rule: Any,
) -> Path:
    """Write one system's run as a TREC file, atomically, under the one output rule
    (`decisionrag._files.check_output`; `rule`: its inputs, force, ...): a TREC run there
    is replaced, any other file only with ``force=True``."""
    text = "".join(line + "\n" for line in trec_lines(rankings, scores, tag))
    return write_output(Path(path), text, **{"kind": TREC_RUN, **rule})


def _is_trec_run(path: Path) -> bool:
    """A TREC run: every line of its first 64 KB is ``qid Q0 docid rank score tag``."""
    try:
        with path.open("rb") as handle:
            head = handle.read(65_536)
    except OSError:
        return False
    lines = head.decode("utf-8", "replace").splitlines()
    if len(head) == 65_536:
        lines = lines[:-1]  # perhaps cut
    return all(len(parts := line.split()) == 6 and parts[1] == "Q0"
               for line in lines if line.strip())


TREC_RUN = OutputKind("a TREC run", _is_trec_run)


def run_file_name(name: str) -> str:
    """A file name for a system's run: ``decisionrag+dense`` -> ``decisionrag+dense.trec``."""
    safe = "".join(c if c.isalnum() or c in "+-_.=" else "_" for c in name).strip(".")
    return f"{safe or 'run'}.trec"
