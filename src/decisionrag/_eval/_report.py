"""The evaluation report as a self-contained HTML page (inline SVG, no scripts, no network)
and the same tables as Markdown, both made from the JSON report of `evaluate`.

Sections: metrics with paired intervals against the baseline (the first system), Recall@k
curves, per-query wins and losses against the baseline, latency, tokens and cost per query,
pruning recall per navigation stage, and how each imported run met the dataset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from .._files import check_output_folder, write_output
from . import _svg

Report = Mapping[str, Any]


def write_report(report: Report, folder: str | os.PathLike[str], *,
                 rules: Mapping[str, Mapping[str, Any]] | None = None) -> list[Path]:
    """``index.html`` and ``report.md`` in `folder` (created); returns both paths. Each is
    written under the one output rule (`decisionrag._files.check_output`), with `rules`
    (file name -> inputs, force, ...) when given."""
    from ._outputs import REPORT_FILES

    target = check_output_folder(folder, flag="--report")
    pages = {"index.html": render_html(report), "report.md": render_markdown(report)}
    return [write_output(target / name, page,
                         **((rules or {}).get(name) or {"kind": REPORT_FILES[name]}))
            for name, page in pages.items()]


# -- the numbers behind every section ------------------------------------------------------------


def _systems(report: Report) -> list[str]:
    return list(report.get("systems", {}))


def _head(report: Report) -> str:
    prefix = report.get("prefix")
    if prefix is None:
        from ._data import dataset_prefix

        prefix = dataset_prefix(str(report.get("dataset", "")))
    return f"{prefix}_" if prefix else ""


def metric_names(report: Report) -> list[str]:
    """Metric keys (without the dataset prefix) in the order of the first system's means."""
    head = _head(report)
    seen: list[str] = []
    for values in report.get("systems", {}).values():
        for key in values:
            if key.startswith(head) and ("@" in key or key.endswith(("exact_match", "token_f1"))):
                name = key[len(head):]
                if name not in seen:
                    seen.append(name)
    return seen


def metrics_table(report: Report) -> list[list[str]]:
    """Header + one row per metric: ``value (diff [low, high])`` in %, diff against the baseline."""
    systems, head = _systems(report), _head(report)
    rows = [["metric", *systems]]
    for metric in metric_names(report):
        row = [metric]
        for name in systems:
            value = report["systems"][name].get(head + metric)
            cell = "–" if value is None else f"{100 * value:.1f}"
            interval = report.get("intervals", {}).get(name, {}).get(head + metric)
            if interval and value is not None:
                cell += f" ({100 * interval[0]:+.1f} [{100 * interval[1]:+.1f}, {100 * interval[2]:+.1f}])"
            row.append(cell)
        rows.append(row)
    return rows


def win_loss_metrics(report: Report) -> list[str]:
    settings = report.get("settings", {})
    depth = settings.get("depth", 10)
    ks, recall_ks = settings.get("ks") or [1], settings.get("recall_ks") or [depth]
    wanted = [f"hit@{ks[0]}", f"mrr@{depth}", f"ndcg@{depth}", f"recall@{recall_ks[-1]}", f"page_hit@{ks[0]}"]
    available = set(metric_names(report))
    return [m for m in wanted if m in available]


def wins_and_losses(report: Report, system: str, metric: str) -> tuple[int, int, int, list[float]]:
    """(better, same, worse, per-query differences) of `system` against the baseline."""
    per_query = report.get("per_query", {})
    base = per_query.get(report.get("baseline"), {}).get(metric, {})
    mine = per_query.get(system, {}).get(metric, {})
    diffs = [mine[q] - base[q] for q in sorted(set(mine) & set(base))]
    better = sum(d > 1e-12 for d in diffs)
    worse = sum(d < -1e-12 for d in diffs)
    return better, len(diffs) - better - worse, worse, diffs


def win_loss_table(report: Report) -> list[list[str]]:
    metrics = win_loss_metrics(report)
    rows = [["system", *(f"{m} better / same / worse" for m in metrics)]]
    for name in _systems(report)[1:]:
        cells = []
        for metric in metrics:
            better, same, worse, _ = wins_and_losses(report, name, metric)
            cells.append(f"{better} / {same} / {worse}")
        rows.append([name, *cells])
    return rows


def _measured(report: Report) -> dict[str, dict[str, dict[str, float]]]:
    return dict(report.get("per_query_cost", {}))


def latency_table(report: Report) -> list[list[str]]:
    rows = [["system", "queries", "p50 s", "p90 s", "p99 s", "max s"]]
    for name, cost in _measured(report).items():
        seconds = np.array(list(cost.get("seconds", {}).values()) or [0.0])
        p50, p90, p99 = np.percentile(seconds, [50, 90, 99])
        rows.append([name, str(len(cost.get("seconds", {}))), f"{p50:.4f}", f"{p90:.4f}", f"{p99:.4f}",
                     f"{seconds.max():.4f}"])
    return rows


def cost_table(report: Report) -> list[list[str]]:
    price = report.get("settings", {}).get("price_per_million") or 0.0  # None: judges' own
    rows = [["system", "tokens/q (mean)", "p50", "p90", "requests/q", "¢/q"]]
    for name, cost in _measured(report).items():
        tokens = np.array(list(cost.get("tokens", {}).values()) or [0.0])
        summary = report["systems"].get(name, {})
        rows.append([
            name,
            f"{tokens.mean():.0f}",
            f"{np.percentile(tokens, 50):.0f}",
            f"{np.percentile(tokens, 90):.0f}",
            f"{summary.get('requests_per_query', 0.0):.2f}",
            f"{summary.get('cents_per_query', tokens.mean() * price / 1e4):.4f}",
        ])
    return rows


def pruning_table(report: Report) -> list[list[str]]:
    rows = [["system", "stage", "gold page kept", "queries"]]
    for name, stages in report.get("pruning", {}).items():
        for stage, values in sorted(stages.items(), key=lambda item: _stage_order(item[0])):
            rows.append([name, stage, f"{100 * values['survived']:.1f} %", str(values["queries"])])
    return rows


def _stage_order(stage: str) -> tuple[int, str]:
    """``"2:heading"`` -> (2, "heading"): stages in walk order, not first-seen order."""
    index, _, name = stage.partition(":")
    return (int(index), name) if index.isdigit() else (1 << 30, stage)


def runs_in_table(report: Report) -> list[list[str]]:
    rows = [["run", "file", "format", "queries in file", "missing (empty)", "not in dataset",
             "unknown ids", "cut to"]]
    for name, info in report.get("runs_in", {}).items():
        rows.append([
            name, Path(info["file"]).name, info["format"], str(info["queries_in_run"]),
            f"{info['missing_queries']} of {info['queries_scored']}", str(info["extra_queries"]),
            f"{info['unknown_ids']} of {info['retrieved']}", str(info["cut_to"]),
        ])
    return rows


def _title(report: Report) -> str:
    return f"{report.get('dataset', 'dataset')}: {report.get('n_queries', 0)} queries"


def _settings_line(report: Report) -> str:
    s = report.get("settings", {})
    parts = [f"baseline **{report.get('baseline')}**", f"depth {s.get('depth')}"]
    for key in ("judge", "preset"):
        if s.get(key):
            parts.append(f"{key} {s[key]}")
    if s.get("dedup_text"):
        parts.append("identical passages grouped" + (" (case-folded)" if s.get("dedup_lowercase") else ""))
    parts.append(f"{s.get('resamples')} bootstrap resamples, seed {s.get('seed')}")
    if s.get("price_per_million") is not None:
        parts.append(f"cost = input tokens at ${s['price_per_million']} per million")
    return "; ".join(parts)


# -- Markdown ------------------------------------------------------------------------------------


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    if len(rows) < 2:
        return "_none_"
    cells = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in cells[0]) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in cells[1:])
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    parts = [
        f"# {_title(report)}",
        "",
        _settings_line(report) + ".",
        "",
        "## Metrics (%), difference to the baseline [95 % paired bootstrap interval]",
        "",
        markdown_table(metrics_table(report)),
        "",
        "Queries each metric averages over: "
        + ", ".join(f"{m} {n}" for m, n in report.get("metric_queries", {}).items())
        + ".",
        "",
        "## Per query against the baseline",
        "",
        markdown_table(win_loss_table(report)),
        "",
        "## Latency per query",
        "",
        markdown_table(latency_table(report)),
        "",
        "## Tokens and cost per query",
        "",
        markdown_table(cost_table(report)),
        "",
        "## Pruning recall per stage (share of queries whose gold page the stage kept)",
        "",
        markdown_table(pruning_table(report)),
    ]
    if report.get("dense_search"):
        parts += ["", "## Dense search", "", dense_search_line(report["dense_search"])]
    if report.get("runs_in"):
        parts += ["", "## Imported runs", "", markdown_table(runs_in_table(report))]
    if report.get("warnings"):
        parts += ["", *(f"- {w}" for w in report["warnings"])]
    return "\n".join(parts) + "\n"


def dense_search_line(info: dict[str, Any]) -> str:
    """How `dense` (and `hybrid`'s dense half) searched, and what the approximation lost."""
    if info.get("search") != "ann":
        return f"Exact inner-product search over {info.get('passages', 0):,} passages."
    return (f"Approximate search (ANN index {info.get('index')}, nprobe {info.get('nprobe')}) "
            f"over {info.get('passages', 0):,} passages: recall@100 against exact search "
            f"{100 * float(info.get('recall@100') or 0):.1f} % over the first "
            f"{info.get('queries')} queries.")


# -- HTML ----------------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 8px;
text-align:right;font-variant-numeric:tabular-nums}th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}h2{margin-top:1.6em;border-bottom:1px solid #ddd}figure{margin:.5em 0}
.note{color:#555;font-size:90%}
"""


def html_table(rows: Sequence[Sequence[str]]) -> str:
    if len(rows) < 2:
        return '<p class="note">none</p>'
    head = "".join(f"<th>{escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption class=\"note\">{escape(caption)}</figcaption></figure>"


def _recall_section(report: Report) -> list[str]:
    curves = report.get("recall_curve", {})
    if not curves:
        return []
    depth = max(len(c) for c in curves.values())
    chart = _svg.line_chart(curves, list(range(1, depth + 1)), "Recall@k", "k (passages)", "Recall@k")
    return ["<h2>Recall@k</h2>", _figure(chart, "Mean Recall@k over the queries with a relevant passage.")]


def _win_loss_section(report: Report) -> list[str]:
    systems = _systems(report)
    if len(systems) < 2:
        return []
    parts = ["<h2>Per query against the baseline</h2>", html_table(win_loss_table(report))]
    metrics = win_loss_metrics(report)
    metric = next((m for m in metrics if m.startswith("ndcg")), metrics[0] if metrics else None)
    if metric is None:
        return parts
    for name in systems[1:]:
        _, _, _, diffs = wins_and_losses(report, name, metric)
        chart = _svg.difference_bars(diffs, f"{name} minus {report.get('baseline')}: {metric}", metric)
        parts.append(_figure(chart, f"{metric} of {name} minus {report.get('baseline')}, per query."))
    return parts


def _latency_section(report: Report) -> list[str]:
    measured = _measured(report)
    parts = ["<h2>Latency per query</h2>"]
    if not measured:
        return [*parts, '<p class="note">no system was timed (runs read from files only)</p>']
    samples = {name: list(cost.get("seconds", {}).values()) for name, cost in measured.items()}
    parts.append(_figure(_svg.box_chart(samples, "Latency per query", "seconds per query (log scale)"),
                         "Box: 25th to 75th percentile, bar: median, line: minimum to 90th percentile, "
                         "dot: maximum. Runs read from files have no timings."))
    parts.append(html_table(latency_table(report)))
    return parts


def _cost_section(report: Report) -> list[str]:
    measured = _measured(report)
    if not measured:
        return []
    names = list(measured)
    means = [float(np.mean(list(measured[n].get("tokens", {}).values()) or [0.0])) for n in names]
    parts = ["<h2>Tokens and cost per query</h2>"]
    if max(means) > 0:
        chart = _svg.bar_chart(names, {"tokens/query": means}, "Input tokens per query", "tokens", ".0f")
        parts.append(_figure(chart, "Mean input tokens per query."))
    else:
        parts.append('<p class="note">no system sent tokens to a model</p>')
    return [*parts, html_table(cost_table(report))]


def _pruning_section(report: Report) -> list[str]:
    pruning = report.get("pruning", {})
    parts = ["<h2>Pruning recall per stage</h2>"]
    if not pruning:
        return [*parts, '<p class="note">no navigation system in this evaluation</p>']
    stages: list[str] = []
    for values in pruning.values():
        stages.extend(s for s in values if s not in stages)
    stages.sort(key=_stage_order)
    series = {name: [values.get(s, {}).get("survived") for s in stages] for name, values in pruning.items()}
    chart = _svg.bar_chart(stages, series, "Gold page kept, per stage", "share of queries")
    parts.append(_figure(chart, "Share of queries (with a gold page) whose gold page each stage kept."))
    parts.append(html_table(pruning_table(report)))
    return parts


def render_html(report: Report) -> str:
    title = _title(report)
    body = [
        f"<h1>{escape(title)}</h1>",
        f"<p>{escape(_settings_line(report).replace('**', ''))}.</p>",
        "<h2>Metrics</h2>",
        '<p class="note">In %; in brackets the difference to the baseline and its 95 % paired '
        "bootstrap interval.</p>",
        html_table(metrics_table(report)),
        *_recall_section(report),
        *_win_loss_section(report),
        *_latency_section(report),
        *_cost_section(report),
        *_pruning_section(report),
    ]
    if report.get("runs_in"):
        body += ["<h2>Imported runs</h2>", html_table(runs_in_table(report))]
    if report.get("warnings"):
        body += ["<ul>", *(f"<li>{escape(w)}</li>" for w in report["warnings"]), "</ul>"]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="generator" content="decisionrag">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
