"""What metadata a tree's documents carry, key by key: the filters one can write over it.

Read from the summaries the tree writer stores per node (`_tree._summaries`): the root's
summary covers every document and its passages, so listing the keys reads one row, however
large the tree. The CLI (`decisionrag stats --metadata`), the server
(``GET /v1/trees/{name}/metadata``) and its console all show this one answer.
"""

from __future__ import annotations

import math
from typing import Any

from .._tree import Tree
from .._tree._summaries import MAX_VALUES


def metadata_keys(tree: Tree) -> dict[str, Any]:
    """``{documents, summarised, max_values, keys: [{key, documents, values, numbers, texts}]}``,
    keys sorted by name: how many documents have each key, its distinct values (None past
    `max_values`), the range of its numbers and of its strings. A tree written before
    summaries existed says ``summarised: false`` and lists no keys."""
    documents = int(tree.counts.get("document", 0))
    found = tree.metadata_summaries([tree.root.id])
    summary = None if found is None else found.get(tree.root.id)
    keys = []
    if summary is not None:
        for key in sorted(summary.keys):
            entry = summary.keys[key]
            _, values, _, _ = entry.to_json()  # the values sorted as the store sorts them
            keys.append({"key": key, "documents": entry.n, "values": values,
                         "numbers": _range(entry.num), "texts": _range(entry.text)})
    return {"documents": documents, "summarised": found is not None, "max_values": MAX_VALUES,
            "keys": keys}


def _range(bounds: tuple[Any, Any] | None) -> list[Any] | None:
    if bounds is None:
        return None
    if any(isinstance(end, float) and not math.isfinite(end) for end in bounds):
        return None  # not JSON
    return list(bounds)
