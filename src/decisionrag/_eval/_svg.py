"""Small inline SVG charts for the evaluation report: no scripts, no fonts, no network.

The elements are meant to sit inside an HTML page (HTML5 needs no SVG namespace there).

Each function returns one ``<svg>`` element as text; colours come from one fixed palette so
a system keeps its colour in every chart of a report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 16, 40


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _frame(body: list[str], title: str, height: int = HEIGHT) -> str:
    head = (
        f'<svg viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">'
    )
    return "\n".join([head, f"<title>{escape(title)}</title>", *body, "</svg>"])


def _text(x: float, y: float, text: str, anchor: str = "middle", **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _legend(names: Sequence[str], x: float, y: float) -> list[str]:
    items = []
    for i, name in enumerate(names):
        top = y + 16 * i
        items.append(f'<rect x="{x:.1f}" y="{top - 9:.1f}" width="10" height="10" fill="{colour(i)}"/>')
        items.append(_text(x + 14, top, name, anchor="start"))
    return items


def _axes(x_label: str, y_label: str, height: int = HEIGHT) -> list[str]:
    bottom = height - BOTTOM
    return [
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#444"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#444"/>',
        _text((LEFT + WIDTH - RIGHT) / 2, height - 6, x_label),
        _text(14, (TOP + bottom) / 2, y_label, transform=f"rotate(-90 14 {(TOP + bottom) / 2:.1f})"),
    ]


def _y_ticks(low: float, high: float, scale: float, fmt: str, height: int = HEIGHT) -> list[str]:
    bottom = height - BOTTOM
    items = []
    for i in range(5):
        value = low + (high - low) * i / 4
        y = bottom - (value - low) * scale
        items.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        items.append(_text(LEFT - 6, y + 4, format(value, fmt), anchor="end"))
    return items


def line_chart(
    series: Mapping[str, Sequence[float]], xs: Sequence[int], title: str, x_label: str, y_label: str
) -> str:
    """One line per series over the shared x values (e.g. Recall@k for k = 1..10)."""
    top_value = max([v for values in series.values() for v in values] + [0.0]) or 1.0
    high = min(1.0, math.ceil(top_value * 10) / 10) if top_value <= 1 else top_value
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(xs) - 1, 1)
    scale = plot_h / high
    body = [*_y_ticks(0.0, high, scale, ".2f"), *_axes(x_label, y_label)]
    for i, x in enumerate(xs):
        body.append(_text(LEFT + i * step, HEIGHT - BOTTOM + 14, str(x)))
    for index, (name, values) in enumerate(series.items()):
        points = " ".join(
            f"{LEFT + i * step:.1f},{HEIGHT - BOTTOM - v * scale:.1f}" for i, v in enumerate(values)
        )
        body.append(f'<polyline points="{points}" fill="none" stroke="{colour(index)}" stroke-width="2">'
                    f"<title>{escape(name)}</title></polyline>")
        for i, v in enumerate(values):
            body.append(
                f'<circle cx="{LEFT + i * step:.1f}" cy="{HEIGHT - BOTTOM - v * scale:.1f}" r="2.5" '
                f'fill="{colour(index)}"><title>{escape(name)} @{xs[i]}: {v:.3f}</title></circle>'
            )
    body.extend(_legend(list(series), WIDTH - RIGHT + 12, TOP + 10))
    return _frame(body, title)


def bar_chart(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    title: str,
    y_label: str,
    fmt: str = ".2f",
    colours: Mapping[str, str] | None = None,
) -> str:
    """Grouped bars: one group per label, one bar per series (None: no bar)."""
    values = [v for vs in series.values() for v in vs if v is not None]
    high = max([*values, 0.0]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    scale = plot_h / high
    body = [*_y_ticks(0.0, high, scale, fmt), *_axes("", y_label)]
    group_w = plot_w / max(len(groups), 1)
    bar_w = group_w * 0.8 / max(len(series), 1)
    names = list(series)
    for g, group in enumerate(groups):
        body.append(_text(LEFT + g * group_w + group_w / 2, HEIGHT - BOTTOM + 14, _short(group, group_w)))
        for s, name in enumerate(names):
            value = series[name][g]
            if value is None:
                continue
            x = LEFT + g * group_w + group_w * 0.1 + s * bar_w
            h = value * scale
            fill = (colours or {}).get(name, colour(s))
            body.append(
                f'<rect x="{x:.1f}" y="{HEIGHT - BOTTOM - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{fill}"><title>{escape(name)} · {escape(group)}: {format(value, fmt)}</title></rect>'
            )
    legend_names = names if len(names) > 1 or colours is None else []
    body.extend(_legend(legend_names, WIDTH - RIGHT + 12, TOP + 10))
    return _frame(body, title)


def _short(label: str, width: float) -> str:
    room = max(int(width / 6.5), 4)
    return label if len(label) <= room else label[: room - 1] + "…"


def difference_bars(differences: Sequence[float], title: str, y_label: str) -> str:
    """Per-query differences (system minus baseline), sorted, wins above zero, losses below."""
    ordered = sorted(differences, reverse=True)
    bound = max([abs(d) for d in ordered] + [1e-9])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    middle = TOP + plot_h / 2
    scale = plot_h / 2 / bound
    bar_w = plot_w / max(len(ordered), 1)
    body = [
        f'<line x1="{LEFT}" y1="{middle:.1f}" x2="{WIDTH - RIGHT}" y2="{middle:.1f}" stroke="#444"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#444"/>',
        _text(LEFT - 6, TOP + 8, f"+{bound:.2f}", anchor="end"),
        _text(LEFT - 6, middle + 4, "0", anchor="end"),
        _text(LEFT - 6, HEIGHT - BOTTOM, f"-{bound:.2f}", anchor="end"),
        _text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 6, f"{len(ordered)} queries, sorted by difference"),
        _text(14, middle, y_label, transform=f"rotate(-90 14 {middle:.1f})"),
    ]
    for i, d in enumerate(ordered):
        if d == 0:
            continue
        h = abs(d) * scale
        y = middle - h if d > 0 else middle
        fill = "#2ca02c" if d > 0 else "#d62728"
        body.append(f'<rect x="{LEFT + i * bar_w:.2f}" y="{y:.1f}" width="{max(bar_w, 0.6):.2f}" '
                    f'height="{h:.1f}" fill="{fill}"/>')
    wins, losses = sum(d > 0 for d in ordered), sum(d < 0 for d in ordered)
    body.append(_text(WIDTH - RIGHT + 12, TOP + 12, f"better: {wins}", anchor="start", fill="#2ca02c"))
    body.append(_text(WIDTH - RIGHT + 12, TOP + 28, f"same: {len(ordered) - wins - losses}", anchor="start"))
    body.append(_text(WIDTH - RIGHT + 12, TOP + 44, f"worse: {losses}", anchor="start", fill="#d62728"))
    return _frame(body, title)


def box_chart(samples: Mapping[str, Sequence[float]], title: str, x_label: str) -> str:
    """Horizontal box plots on a log axis (min, p25, median, p75, p90 whisker, max dot)."""
    rows = {name: sorted(v for v in values if v > 0) for name, values in samples.items()}
    rows = {name: values for name, values in rows.items() if values}
    height = TOP + BOTTOM + 34 * max(len(rows), 1)
    if not rows:
        return _frame([_text(WIDTH / 2, height / 2, "no timings")], title, height)
    low = math.floor(math.log10(min(v[0] for v in rows.values())))
    high = math.ceil(math.log10(max(v[-1] for v in rows.values())))
    high = max(high, low + 1)
    plot_w = WIDTH - LEFT - RIGHT - 40

    def x_of(value: float) -> float:
        return LEFT + 40 + (math.log10(value) - low) / (high - low) * plot_w

    bottom = height - BOTTOM
    body = [
        f'<line x1="{LEFT + 40}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#444"/>',
        _text((LEFT + WIDTH - RIGHT) / 2, height - 6, x_label),
    ]
    for exponent in range(low, high + 1):
        x = x_of(10.0**exponent)
        body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>')
        body.append(_text(x, bottom + 14, _seconds_label(10.0**exponent)))
    names = list(samples)
    for row, (name, values) in enumerate(rows.items()):
        y = TOP + 17 + 34 * row
        q = {p: _quantile(values, p) for p in (0.25, 0.5, 0.75, 0.9)}
        c = colour(names.index(name))
        body.append(_text(LEFT + 36, y + 4, _short(name, LEFT + 36), anchor="end"))
        body.append(
            f'<line x1="{x_of(values[0]):.1f}" y1="{y}" x2="{x_of(q[0.9]):.1f}" y2="{y}" stroke="{c}"/>'
        )
        body.append(
            f'<rect x="{x_of(q[0.25]):.1f}" y="{y - 9}" width="{max(x_of(q[0.75]) - x_of(q[0.25]), 1):.1f}" '
            f'height="18" fill="{c}" fill-opacity="0.35" stroke="{c}"><title>{escape(name)}: p25 '
            f"{q[0.25]:.4f} s, median {q[0.5]:.4f} s, p75 {q[0.75]:.4f} s, p90 {q[0.9]:.4f} s</title></rect>"
        )
        body.append(f'<line x1="{x_of(q[0.5]):.1f}" y1="{y - 9}" x2="{x_of(q[0.5]):.1f}" y2="{y + 9}" '
                    f'stroke="{c}" stroke-width="2"/>')
        body.append(f'<circle cx="{x_of(values[-1]):.1f}" cy="{y}" r="2.5" fill="{c}">'
                    f"<title>max {values[-1]:.4f} s</title></circle>")
    return _frame(body, title, height)


def _quantile(values: Sequence[float], p: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default)."""
    position = (len(values) - 1) * p
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def _seconds_label(value: float) -> str:
    if value >= 1:
        return f"{value:g} s"
    if value >= 1e-3:
        return f"{value * 1e3:g} ms"
    return f"{value * 1e6:g} µs"
