"""Datasets as people have them: the shared format, BEIR folders, and a tree with one's own labels.

`open_dataset` picks the reader from what it is given:

* a folder with ``qrels.tsv``: the shared format (:mod:`._data`);
* a folder with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``: BEIR;
* a ``.tree`` file with ``queries=`` and ``qrels=``: the user's labels over an existing tree.

BEIR. Every corpus document (``_id``, ``title``, ``text``) is one page. With
``passages="whole"`` (the default) the page is one passage whose key is the BEIR ``_id``, so
the labels, our runs and any BEIR run speak the same ids and passage metrics are BEIR's own
(nDCG@10 on documents). With ``passages="split"`` the text is cut into paragraphs (blank
lines, then windows of whole sentences of at most ``SPLIT_WORDS`` words), keyed
``<_id>#<n>``, which gives navigation pages to open; BEIR's labels are about documents, so
they become page labels (``qrels_docs``) and only page metrics are scored. Only queries
that the split's qrels label are evaluated (BEIR's queries.jsonl holds every split's). The
converted corpus is written once to the cache (``beir/``), keyed by the corpus digest.

Own labels over a tree. Queries: JSONL in the shared format (``id``, ``text``, …) or BEIR's
(``_id``, ``text``). Qrels: a BEIR TSV with its header, or TREC qrels (``qid 0 docid rel``).
A labelled id that is a passage key of the tree is a passage label; a document key is a
page label; any other id is counted in a warning.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._files import atomic_path, cache_root
from ._data import (
    CorpusPassage,
    Dataset,
    EvalQuery,
    _json_lines,
    _qrels_row,
    _slug,
    file_digest,
    load_dataset,
    read_qrels,
    read_queries,
)

PASSAGE_MODES = ("whole", "split")
SPLIT_WORDS = 200
_CONVERTER_VERSION = "1"
_DOC_PREFIX = "doc:"  # whole mode: the page's key, distinct from its one passage's key
_BLANK_LINES = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def open_dataset(
    path: str | os.PathLike[str],
    *,
    queries: str | os.PathLike[str] | None = None,
    qrels: str | os.PathLike[str] | None = None,
    split: str = "test",
    passages: str = "whole",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Dataset:
    """The dataset at `path`, whatever its form; `queries`/`qrels` replace a folder's own."""
    source = Path(path).expanduser()
    if source.is_file():
        if queries is None or qrels is None:
            raise InputError(f"{source}: evaluating a tree needs --queries and --qrels")
        return load_tree_dataset(source, queries, qrels)
    if not source.is_dir():
        raise InputError(f"{source}: no such dataset folder or tree file")
    if is_beir(source, split):
        dataset = load_beir(source, split=split, passages=passages, cache_dir=cache_dir)
    else:
        dataset = load_dataset(source)
    if queries is not None or qrels is not None:
        dataset = _relabel(dataset, queries, qrels)
    return dataset


def is_beir(folder: Path, split: str = "test") -> bool:
    return (
        not (folder / "qrels.tsv").is_file()
        and (folder / "corpus.jsonl").is_file()
        and (folder / "qrels").is_dir()
    )


# -- BEIR --------------------------------------------------------------------------------------


def load_beir(
    folder: str | os.PathLike[str],
    *,
    split: str = "test",
    passages: str = "whole",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Dataset:
    """A BEIR folder as a Dataset (see the module docstring for pages and passages)."""
    root = Path(folder).expanduser()
    if passages not in PASSAGE_MODES:
        raise InputError(f"passages {passages!r}: choose from {', '.join(PASSAGE_MODES)}")
    qrels_file = root / "qrels" / f"{split}.tsv"
    for required in (root / "corpus.jsonl", root / "queries.jsonl", qrels_file):
        if not required.is_file():
            found = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
            raise InputError(f"{root}: missing {required.relative_to(root)} (splits here: {found})")
    queries = read_beir_queries(root / "queries.jsonl")
    warnings: list[str] = []
    labels = read_qrels(qrels_file, {q.id for q in queries}, warnings)
    labelled = [q for q in queries if q.id in labels]
    if not labelled:
        raise InputError(f"{qrels_file}: no row labels a query of {root / 'queries.jsonl'}")
    corpus_file = _converted_corpus(root, passages, cache_dir)
    if passages == "whole":
        return Dataset(root, labelled, labels, None, warnings, corpus_file)
    return Dataset(root, labelled, {}, labels, warnings, corpus_file)


def read_beir_queries(path: Path) -> list[EvalQuery]:
    """BEIR queries.jsonl: ``_id`` and ``text`` (other fields, such as metadata, ignored)."""
    queries: list[EvalQuery] = []
    seen: dict[str, int] = {}
    for number, record in _json_lines(path):
        where = f"{path}:{number}"
        query_id, text = record.get("_id"), record.get("text")
        if not isinstance(query_id, str) or not query_id:
            raise InputError(f"{where}: field '_id' must be a non-empty string, got {query_id!r}")
        if not isinstance(text, str):
            raise InputError(f"{where}: field 'text' must be a string, got {text!r}")
        if query_id in seen:
            raise InputError(f"{where}: duplicate query id {query_id!r} (first on line {seen[query_id]})")
        seen[query_id] = number
        queries.append(EvalQuery(id=query_id, text=text))
    if not queries:
        raise InputError(f"{path}: no queries")
    return queries


def beir_records(path: Path, passages: str = "whole") -> Iterator[dict[str, Any]]:
    """Shared-format corpus records of a BEIR corpus.jsonl, one page per document."""
    seen: dict[str, int] = {}
    for number, record in _json_lines(path):
        where = f"{path}:{number}"
        doc_id = record.get("_id")
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise InputError(f"{where}: field '_id' must be a non-empty string, got {doc_id!r}")
        if doc_id in seen:
            raise InputError(f"{where}: duplicate document id {doc_id!r} (first on line {seen[doc_id]})")
        seen[doc_id] = number
        title, text = record.get("title") or "", record.get("text")
        if not isinstance(title, str) or not isinstance(text, str):
            raise InputError(f"{where}: fields 'title' and 'text' must be strings")
        if passages == "whole":
            pieces = [(doc_id, text)]
            page = _DOC_PREFIX + doc_id
        else:
            pieces = [(f"{doc_id}#{n}", piece) for n, piece in enumerate(split_text(text), 1)]
            page = doc_id
        for passage_id, piece in pieces:
            yield {"id": passage_id, "doc_id": page, "doc_title": title, "section": [], "text": piece}


def split_text(text: str, max_words: int = SPLIT_WORDS) -> list[str]:
    """Paragraphs (blank lines), long ones cut into windows of whole sentences."""
    pieces: list[str] = []
    for paragraph in _BLANK_LINES.split(text.strip()):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        window: list[str] = []
        for sentence in _SENTENCE_END.split(paragraph):
            if window and len(" ".join([*window, sentence]).split()) > max_words:
                pieces.append(" ".join(window))
                window = []
            window.append(sentence)
        pieces.append(" ".join(window))
    return pieces or [text]


def _converted_corpus(root: Path, passages: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    source = root / "corpus.jsonl"
    key = f"{file_digest(source)[:16]}-{passages}-v{_CONVERTER_VERSION}"
    base = Path(cache_dir).expanduser() if cache_dir else cache_root()
    target = base / "beir" / f"{_slug(root.name)}-{key}" / "corpus.jsonl"
    if target.is_file():
        return target
    with atomic_path(target) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for record in beir_records(source, passages):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return target


# -- the user's labels over a tree --------------------------------------------------------------


@dataclass
class TreeDataset(Dataset):
    """Queries and labels over an existing tree: the tree is the corpus."""

    tree_file: Path = Path()

    @property
    def name(self) -> str:
        return self.tree_file.stem

    @cached_property
    def corpus(self) -> dict[str, CorpusPassage]:
        return tree_corpus(self.tree_file)

    def tree_path(self, cache_dir: str | os.PathLike[str] | None = None) -> Path:
        return self.tree_file

    def digest(self) -> str:
        return file_digest(self.tree_file)


def tree_corpus(tree_file: Path) -> dict[str, CorpusPassage]:
    from .._tree import Tree

    with Tree.open(tree_file) as tree:
        docs = {doc.id: doc.key for doc in tree.documents()}
        return {
            node.key: CorpusPassage(node.key, docs.get(node.doc or -1, ""), node.text)
            for node in tree.iter_passages()
        }


def load_tree_dataset(
    tree_file: Path, queries: str | os.PathLike[str], qrels: str | os.PathLike[str]
) -> TreeDataset:
    corpus = tree_corpus(tree_file)
    documents = {p.doc_id for p in corpus.values()}
    query_list = read_any_queries(Path(queries).expanduser())
    warnings: list[str] = []
    labels = read_any_qrels(Path(qrels).expanduser(), {q.id for q in query_list}, warnings)
    passage_labels, page_labels = _split_labels(labels, set(corpus), documents, Path(qrels), warnings)
    dataset = TreeDataset(
        tree_file.parent,
        query_list,
        passage_labels,
        page_labels or None,
        warnings,
        tree_file=tree_file,
    )
    dataset.__dict__["corpus"] = corpus  # already read: keep it
    return dataset


def _split_labels(
    labels: dict[str, dict[str, int]],
    passages: set[str],
    documents: set[str],
    source: Path,
    warnings: list[str],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    passage_labels: dict[str, dict[str, int]] = {}
    page_labels: dict[str, dict[str, int]] = {}
    unknown: list[str] = []
    for query, items in labels.items():
        for item, grade in items.items():
            if item in passages:
                passage_labels.setdefault(query, {})[item] = grade
            elif item in documents:
                page_labels.setdefault(query, {})[item] = grade
            else:
                unknown.append(item)
    if unknown:
        warnings.append(
            f"{source.name}: {len(unknown)} labelled ids are neither passages nor documents of "
            f"the tree (e.g. {', '.join(repr(u) for u in unknown[:3])}); they were skipped"
        )
    return passage_labels, page_labels


def read_any_queries(path: Path) -> list[EvalQuery]:
    """Queries in the shared format (``id``) or BEIR's (``_id``)."""
    if not path.is_file():
        raise InputError(f"{path}: no such queries file")
    first = next(_json_lines(path), None)
    if first is not None and "_id" in first[1] and "id" not in first[1]:
        return read_beir_queries(path)
    return read_queries(path)


def read_any_qrels(
    path: Path, known_queries: set[str], warnings: list[str]
) -> dict[str, dict[str, int]]:
    """A BEIR qrels TSV (with its header) or a TREC qrels file (``qid iter docid rel``)."""
    if not path.is_file():
        raise InputError(f"{path}: no such qrels file")
    with path.open(encoding="utf-8") as handle:
        first = next((line for line in handle if line.strip()), "")
    if first.split("\t")[0].strip() == "query-id":
        return read_qrels(path, known_queries, warnings)
    return read_trec_qrels(path, known_queries, warnings)


def read_trec_qrels(
    path: Path, known_queries: set[str], warnings: list[str]
) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    unknown = 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            parts = line.split()
            if len(parts) != 4:
                raise InputError(
                    f"{where}: expected TREC qrels 'qid iter docid rel' (4 columns) or a "
                    f"'query-id<TAB>corpus-id<TAB>score' header, got {len(parts)} columns"
                )
            query, item, grade = _qrels_row("\t".join((parts[0], parts[2], parts[3])), where)
            if query not in known_queries:
                unknown += 1
                continue
            qrels.setdefault(query, {})[item] = grade
    if unknown:
        warnings.append(f"{path.name}: {unknown} rows for query ids not in the queries were skipped")
    return qrels


def _relabel(
    dataset: Dataset, queries: str | os.PathLike[str] | None, qrels: str | os.PathLike[str] | None
) -> Dataset:
    """A folder's corpus with other queries and/or labels (ids must be its passages or pages)."""
    query_list = read_any_queries(Path(queries).expanduser()) if queries else dataset.queries
    if qrels is None:
        known = {q.id for q in query_list}
        kept = {q: v for q, v in dataset.qrels.items() if q in known}
        return replace(dataset, queries=query_list, qrels=kept)
    warnings = list(dataset.warnings)
    labels = read_any_qrels(Path(qrels).expanduser(), {q.id for q in query_list}, warnings)
    corpus = dataset.corpus
    documents = {p.doc_id for p in corpus.values()}
    passage_labels, page_labels = _split_labels(labels, set(corpus), documents, Path(qrels), warnings)
    return replace(
        dataset,
        queries=query_list,
        qrels=passage_labels,
        qrels_docs=page_labels or None,
        warnings=warnings,
    )
