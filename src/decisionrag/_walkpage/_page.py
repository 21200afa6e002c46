"""One self-contained HTML page of a walk: stages, candidates, ranking and answer.

The page needs no network: CSS and JavaScript are inline and the data travels as one JSON
block. The structure (stage summaries, ranking, answer) is written here as static HTML, so
it reads without JavaScript; the candidate rows of a stage are drawn by the script only when
the stage is opened, which keeps pages with thousands of candidates light.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._navigate import Hit, Result, StageTrace
from .._navigate._pages import page_reference
from .._tree import Node, NodeKind
from ._assets import SCRIPT, STYLE

# How to read the walk, for a first-time reader: on the walk page and in the server's console.
LEGEND = (
    '<details class="legend" open><summary>How to read the walk</summary><ul>'
    "<li>Each <b>stage</b> is one level of the tree. The decision model read the question beside "
    "every candidate of the level in one shared context and gave each a <b>P(yes)</b>: how likely "
    "the answer is under it. Open a stage to see its candidates, best first.</li>"
    '<li>A <b>bar</b> is that P(yes), from 0 (empty) to 1 (full). <span class="badge opened">opened'
    '</span> kept, and its children judged in the next stage; <span class="badge kept">kept</span> '
    'survived this stage; <span class="badge pruned">pruned</span> not kept; '
    '<span class="badge reopened">reopened</span> pruned, then brought back by recovery. The bar '
    "under a stage's name is its share kept (green), reopened (orange) and pruned (grey).</li>"
    "<li>A stage keeps a <b>budget</b> (its best few: a number, a share, at least one), not the "
    "candidates over a threshold. When every candidate looks unlikely the best of them are still "
    "kept, so a kept candidate can read 0.00. P(yes) compares candidates within a stage; the "
    "final order also follows the multiple-choice judgment (<i>choice</i>) of the best passages.</li>"
    "</ul></details>"
)
RECOVERY = "recovery"  # the stage name of recovery from pruning (#11)
LABEL_LIMIT = 240  # characters of a candidate's label kept in the page's data
_CITATION = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")


def render_html(result: Result, answer: Any = None, *, title: str | None = None) -> str:
    """The page for `result`; `answer` is an `Answer`, its `to_dict()`, or None."""
    answer_data = _answer_dict(answer)
    data = {**walk_data(result), "answer": answer_data}
    stages, hits = data["stages"], data["hits"]
    heading = title or f"decisionrag: {result.query.text}"
    body = "\n".join([
        _header(result),
        _answer_section(answer_data, len(result.hits)) if answer_data else "",
        _walk_section(stages, result),
        _ranking_section(hits),
    ])
    return _PAGE.format(
        title=_e(_shorten(heading, 120)), style=STYLE, body=body, data=_script_json(data), script=SCRIPT
    )


# -- the data ----------------------------------------------------------------------------


def walk_data(result: Result) -> dict[str, Any]:
    """What the walk view draws, as JSON: ``stages`` (`walk_stages`) and ``hits`` (the
    ranking, `hit_data`). The page embeds it; the server sends the stages with
    ``/v1/retrieve``'s ``walk: true`` and its console draws them with the same script."""
    return {"stages": walk_stages(result),
            "hits": [hit_data(rank, hit) for rank, hit in enumerate(result.hits, 1)]}


def walk_stages(result: Result) -> list[dict[str, Any]]:
    """Every stage of the walk as `stage_data` draws it, each candidate's branch and
    reopening worked out from the stages around it."""
    later = _reopened_later(result.trace.stages)
    return [stage_data(stage, places, later[i])
            for i, (stage, places) in enumerate(_with_places(result.trace.stages))]


def stage_data(stage: StageTrace, places: Mapping[int, str],
               reopened_later: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """One stage as the page shows it: counts and its candidates, best first, each
    ``[key, label, p_yes, status, via]``; status is opened, kept, reopened (by a recovery
    stage, or pruned here and reopened by a later one) or pruned. ``pruned`` counts as the
    trace does (candidates not kept here); ``reopened`` how many of them came back."""
    kept = dict(stage.kept)
    opened = set(stage.opened)
    pruned_here = set(stage.candidates) - set(kept)
    reopened = _reopened(stage) | (pruned_here & set(reopened_later))
    nodes = {node.key: node for node in stage.nodes}
    scores = stage.scores or kept
    keys = list(dict.fromkeys([*kept, *reopened, *stage.candidates, *scores]))
    rank = {key: i for i, key in enumerate(kept)}
    keys.sort(key=lambda k: (k not in rank, k not in reopened, rank.get(k, 0), -(scores.get(k) or 0.0)))
    rows = []
    for key in keys:
        node = nodes.get(key)
        status = _status(key, kept, opened, reopened)
        label = stage.titles.get(key) or (label_of(node) if node else key)
        via = _via(node, places) if node else ""
        score = scores.get(key)
        rows.append([key, _shorten(label, LABEL_LIMIT), None if score is None else round(score, 4),
                     status, via])
    return {
        "name": stage.name,
        "level": stage.level,
        "n_candidates": stage.n_candidates,
        "requests": stage.requests,
        "input_tokens": stage.input_tokens,
        "seconds": round(stage.seconds, 4),
        "local_seconds": round(stage.local_seconds, 4),
        "kept": len(stage.kept),
        "opened": len(opened),
        "reopened": len(reopened),
        "pruned": max(0, stage.pruned),
        "reopened_not_kept": len(reopened - set(kept)),
        "rows": rows,
    }


def hit_data(rank: int, hit: Hit) -> dict[str, Any]:
    metadata = hit.metadata or hit.node.meta or {}
    return {
        "rank": rank,
        "id": hit.key,
        "doc_id": hit.doc_key,
        "score": round(hit.score, 4),
        "binary": round(hit.binary, 4),
        "choice": None if hit.choice is None else round(hit.choice, 4),
        "path": list(hit.path),
        "text": hit.node.text,
        "metadata": {str(k): _plain(v) for k, v in dict(metadata).items()},
        "page": page_reference(metadata),
    }


def _via(node: Node, places: Mapping[int, str]) -> str:
    for above in (node.parent, node.doc):
        if above is not None and above in places:
            return places[above]
    return ""


def label_of(node: Node) -> str:
    if node.kind == NodeKind.PASSAGE:
        return node.text
    if node.kind == NodeKind.SECTION:
        return " > ".join(node.heading)
    return node.title or node.description or node.key


def _with_places(stages: list[StageTrace]) -> Iterable[tuple[StageTrace, dict[int, str]]]:
    """Each stage with the nodes opened before it (id → label): a candidate's parent there
    is the branch it was reached through."""
    places: dict[int, str] = {}
    for stage in stages:
        yield stage, dict(places)
        opened = set(stage.opened)
        for node in stage.nodes:
            if node.key in opened:
                places[node.id] = _shorten(stage.titles.get(node.key) or label_of(node), 90)


def _reopened(stage: StageTrace) -> set[str]:
    """Candidates that recovery from pruning brought back: every candidate of a
    ``recovery`` stage, and a stage's own `reopened` keys or (key, score) pairs if any."""
    items = getattr(stage, "reopened", None) or ()
    found = {item if isinstance(item, str) else str(item[0]) for item in items}
    return found | set(stage.candidates) if stage.name == RECOVERY else found


def _reopened_later(stages: list[StageTrace]) -> list[set[str]]:
    """For each stage, the keys that some later stage reopened."""
    later: list[set[str]] = []
    seen: set[str] = set()
    for stage in reversed(stages):
        later.append(set(seen))
        seen |= _reopened(stage)
    return later[::-1]


def _status(key: str, kept: Mapping[str, float], opened: set[str], reopened: set[str]) -> str:
    if key in reopened:
        return "reopened"
    if key in opened:
        return "opened"
    return "kept" if key in kept else "pruned"


def _answer_dict(answer: Any) -> dict[str, Any] | None:
    if answer is None:
        return None
    found = dict(answer) if isinstance(answer, Mapping) else dict(answer.to_dict())
    found.pop("retrieval", None)  # the page has the walk already
    return found


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# -- the static parts ----------------------------------------------------------------------


def _header(result: Result) -> str:
    query = result.query
    usage = result.usage
    turns = "".join(
        f'<li class="turn {_e(t.role)}"><b>{_e(t.role)}</b> {_e(t.text)}</li>' for t in query.history
    )
    parts = [
        "<header>",
        '<p class="brand">decisionrag · the walk</p>',
        f'<h1 id="question">{_e(query.text)}</h1>',
        f'<p class="context">{_e(query.context)}</p>' if query.context else "",
        f'<ol class="history">{turns}</ol>' if turns else "",
        '<p class="totals">'
        f'<span id="total-stages">{len(result.trace.stages)}</span> stages · '
        f'<span id="total-requests">{usage.requests}</span> requests · '
        f'<span id="total-tokens">{usage.input_tokens:,}</span> input tokens · '
        f'{result.seconds:.2f} s</p>',
        '<label class="sr-only" for="search">Search every candidate of the walk</label>'
        '<input id="search" class="walk-search" type="search" '
        'placeholder="Search every candidate (title, text or id)…" autocomplete="off">',
        "</header>",
    ]
    return "\n".join(p for p in parts if p)


def _answer_section(answer: Mapping[str, Any], n_hits: int) -> str:
    text = str(answer.get("text", ""))
    sources = answer.get("sources")
    given = set(range(1, (len(sources) if isinstance(sources, list) else n_hits) + 1))
    marks = _marks(answer, text)
    cited = {n for _, _, numbers in marks for n in numbers}
    invalid = sorted({int(n) for n in answer.get("invalid_citations", [])} | (cited - given))
    model = answer.get("model")
    warning = (
        f'<p class="warning" id="invalid-citations">Cited passages that were not given: '
        f'{", ".join(f"[{n}]" for n in invalid)}</p>' if invalid else ""
    )
    return "\n".join([
        '<section id="answer"><h2>Answer</h2>',
        f'<p class="answer-text">{_link_citations(text, marks, given)}</p>',
        warning,
        f'<p class="muted">by {_e(str(model))} from passages 1–{len(given)} of the ranking below</p>'
        if model else "",
        "</section>",
    ])


def _marks(answer: Mapping[str, Any], text: str) -> list[tuple[int, int, list[int]]]:
    """The answer's citation brackets: as the answer found them, else by a plain pattern."""
    given = answer.get("marks")
    if isinstance(given, list):
        return [(int(a), int(b), [int(n) for n in numbers]) for a, b, numbers in given]
    return [(m.start(), m.end(), [int(n) for n in re.split(r"\s*[,;]\s*", m.group(1))])
            for m in _CITATION.finditer(text)]


def _link_citations(text: str, marks: list[tuple[int, int, list[int]]], given: set[int]) -> str:
    out: list[str] = []
    last = 0
    for start, end, numbers in marks:
        out.append(_e(text[last:start]))
        links = []
        for number in numbers:
            if number in given:
                links.append(f'<a class="cite" href="#p-{number}" data-cite="{number}">{number}</a>')
            else:
                links.append(f'<span class="cite invalid" title="no passage {number} was given">'
                             f"{number}</span>")
        out.append("[" + ", ".join(links) + "]")
        last = end
    out.append(_e(text[last:]))
    return "".join(out)


def _walk_section(stages: list[dict[str, Any]], result: Result) -> str:
    items = [_stage_summary(i, stage) for i, stage in enumerate(stages)]
    return "\n".join([
        '<section id="walk"><h2>The walk</h2>',
        LEGEND,
        '<div class="walk-buttons"><button id="expand-all" class="expand-all" type="button">expand all'
        '</button><button id="collapse-all" class="collapse-all" type="button">collapse all</button></div>',
        '<ol class="tree">',
        *items,
        f'<li class="leaf">{len(result.hits)} passages ranked</li>',
        "</ol></section>",
    ])


def _stage_summary(index: int, stage: dict[str, Any]) -> str:
    n = max(1, stage["n_candidates"])
    outside = stage["reopened_not_kept"]
    shares = [(stage["kept"], "kept"), (outside, "reopened"), (max(0, stage["pruned"] - outside), "pruned")]
    bar = "".join(f'<i class="{cls}" style="width:{100 * count / n:.2f}%"></i>'
                  for count, cls in shares if count)
    reopened = f' · <b class="reopened">{stage["reopened"]} reopened</b>' if stage["reopened"] else ""
    return (
        f'<li><details class="stage" data-stage="{index}" data-name="{_e(stage["name"])}" '
        f'data-candidates="{stage["n_candidates"]}" data-kept="{stage["kept"]}" '
        f'data-pruned="{stage["pruned"]}" data-reopened="{stage["reopened"]}">'
        f'<summary><span class="stage-name">{_e(stage["name"])}</span> '
        f'<span class="counts">{stage["n_candidates"]:,} candidates · '
        f'<b class="kept">{stage["kept"]} kept</b> · {stage["pruned"]:,} pruned{reopened}</span> '
        f'<span class="cost">{stage["requests"]} req · {stage["input_tokens"]:,} tok · '
        f'{stage["seconds"]:.2f} s + {stage["local_seconds"]:.2f} s local</span>'
        f'<span class="share">{bar}</span><span class="matches"></span></summary>'
        '<div class="body"></div></details></li>'
    )


def _ranking_section(hits: list[dict[str, Any]]) -> str:
    items = []
    for hit in hits:
        bars = "".join(
            f'<span class="metric">{name} <span class="bar"><i style="width:{100 * value:.1f}%"></i>'
            f"</span> {value:.3f}</span>"
            for name, value in (("score", hit["score"]), ("P(yes)", hit["binary"]), ("choice", hit["choice"]))
            if value is not None
        )
        meta = "".join(f"<span class=\"meta\"><b>{_e(k)}</b> {_e(str(v))}</span>"
                       for k, v in hit["metadata"].items())
        items.append(
            f'<li class="hit" id="p-{hit["rank"]}" data-id="{_e(hit["id"])}">'
            f'<div class="hit-head"><span class="rank">[{hit["rank"]}]</span> '
            f'<span class="path">{" › ".join(_e(p) for p in hit["path"])}</span> '
            + (f'<span class="page">{_e(hit["page"])}</span> ' if hit["page"] else "")
            + f'<code>{_e(hit["id"])}</code></div>'
            f'<div class="metrics">{bars}</div>'
            f'<div class="metadata">{meta}</div>'
            f'<p class="text">{_e(hit["text"])}</p></li>'
        )
    return "\n".join(['<section id="ranking"><h2>Final ranking</h2>',
                      f'<ol class="hits">{"".join(items)}</ol>' if items else "<p>No passages found.</p>",
                      "</section>"])


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _script_json(data: Any) -> str:
    """JSON that cannot end its <script> element early."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="decisionrag">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main>
{body}
</main>
<script type="application/json" id="walk-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
