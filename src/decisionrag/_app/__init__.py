"""The application layer: the use-cases every shell shares (CLI, server, integrations, demo).

Shells parse their input, call one of these, and print or serialise the result; they hold no
logic of their own. Everything here is composed from the engines below (build, cluster,
navigate, eval) and the judges; nothing below imports this package.

Asking
    `open_navigator(tree, judge, preset, ...)` -> a long-lived `Navigator` (tree opened,
    judge loaded, preset chosen, hybrid retriever attached); `aask` / `ask` retrieve;
    `close_navigator` / `aclose_navigator` release; `ask_once` is `ask`.
    `load_retriever(tree, "bm25" | "dense")` builds a flat retriever.
Answering
    `answer_once(tree_path, query, generator=..., stream=..., on_event=...)`: open, walk,
    answer with citations, release (the engine is `decisionrag._answer`).
Reranking
    `rerank_texts(judge, query, texts)`: any texts (another retriever's results) judged in
    one shared context, then reordered by one multiple choice, as the walk's last stages.
Showing
    `format_hits(result)`, `format_trace(result)`, `print_result`: plain-text views.
    `metadata_keys(tree)`: the metadata keys of a tree's documents, their values and ranges.
Building
    `build_tree(sources, out, cluster=...)` (build plus clustering, atomic);
    `read_documents(sources, format, on_skip=...)`; `add_sources(tree, sources, ...)`
    (a document already in the tree, by key or source file, is replaced in place).
Editing
    `remove_documents(tree, keys)`; `sync_sources(tree, sources, dry_run=...)` (added,
    changed by content hash, removed; one atomic write). Every writer runs in `editing(tree)`:
    one writer at a time (a lock beside the tree), the tree and its vectors and indexes
    published together or not at all; a shell chaining writers wraps them in one.
"""

from ._answer import answer_once
from ._ask import (
    HYBRID_KINDS,
    aask,
    aclose_navigator,
    ask,
    ask_once,
    close_navigator,
    load_retriever,
    open_navigator,
)
from ._build import add_sources, build_tree, editing, read_documents
from ._display import degraded_warning, format_hits, format_trace, print_result, shorten
from ._edit import SyncReport, remove_documents, sync_sources
from ._metadata import metadata_keys
from ._rerank import rerank_texts

__all__ = [
    "HYBRID_KINDS",
    "SyncReport",
    "aask",
    "aclose_navigator",
    "add_sources",
    "answer_once",
    "ask",
    "ask_once",
    "build_tree",
    "close_navigator",
    "degraded_warning",
    "editing",
    "format_hits",
    "format_trace",
    "load_retriever",
    "metadata_keys",
    "open_navigator",
    "print_result",
    "read_documents",
    "remove_documents",
    "rerank_texts",
    "shorten",
    "sync_sources",
]
