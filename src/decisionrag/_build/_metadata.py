"""Document and passage metadata: where it comes from and the shape it must have.

Metadata is a flat JSON object per node (stored in the node's ``meta`` column), values being
strings, numbers, booleans, null or lists of those. A hit's metadata is its document's
metadata overlaid with its passage's own (a passage's page number, url, or a JSONL line's
``metadata``). Sources:

- every file: ``source`` (the path as given to the build) and ``mtime`` (its modification time,
  ISO 8601 UTC, to the second);
- Markdown front matter: every ``key: value`` besides ``title`` (numbers, ``true``/``false``
  and ``[a, b]`` lists are typed; quoted values stay strings);
- JSONL: a line's ``metadata`` object belongs to its passage, a line's ``doc_metadata`` to its
  document. Keys whose value is the same on every passage of a document are kept once, on the
  document (so document-level filters see them), and read back on every hit unchanged;
- PDF document info and Word core properties (title, author, subject, keywords, created).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import InputError

Metadata = dict[str, Any]
_SCALARS = (str, int, float, bool, type(None))
_INTEGER = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def file_metadata(path: Path) -> Metadata:
    """``source`` and ``mtime`` of a file read by a build."""
    meta: Metadata = {"source": str(path)}
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return meta
    meta["mtime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    return meta


def check_metadata(value: Any, where: str) -> Metadata:
    """`value` as metadata, or an InputError naming `where` and the offending key."""
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: metadata must be a JSON object, got {type(value).__name__}")
    checked: Metadata = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"{where}: metadata keys must be non-empty strings, got {key!r}")
        if isinstance(item, list):
            if not all(isinstance(v, _SCALARS) for v in item):
                raise InputError(f"{where}: metadata {key!r}: a list may hold only strings, "
                                 "numbers, booleans and null")
        elif not isinstance(item, _SCALARS):
            raise InputError(f"{where}: metadata {key!r} must be a string, number, boolean, "
                             f"null or a list of those, not {type(item).__name__}")
        if isinstance(item, float) and not math.isfinite(item):
            raise InputError(f"{where}: metadata {key!r} must be a finite number")
        checked[key] = item
    return checked


def typed_value(raw: str) -> Any:
    """A front-matter value: quoted → string; number, true/false, [a, b] → typed; else text."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [typed_value(part) for part in inner.split(",")] if inner else []
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    if _INTEGER.match(raw):
        return int(raw)
    if _FLOAT.match(raw):
        return float(raw)
    return raw


def hoist_common(passage_metas: Sequence[Metadata | None]) -> tuple[Metadata, list[Metadata]]:
    """Split per-passage metadata into what every passage shares and what each keeps."""
    metas = [meta or {} for meta in passage_metas]
    if not metas or not metas[0]:
        return {}, metas
    common = {key: value for key, value in metas[0].items()
              if all(key in meta and meta[key] == value for meta in metas[1:])}
    if not common:
        return {}, metas
    rest = [{k: v for k, v in meta.items() if k not in common} for meta in metas]
    return common, rest

