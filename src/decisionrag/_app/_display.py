"""Plain-text views of a result: the ranked passages, and the walk as a tree."""

from __future__ import annotations

import sys
import textwrap
from typing import TextIO

from .._navigate import Result, StageTrace

SHOWN_PER_STAGE = 5  # kept nodes listed under each stage of the trace


def shorten(text: str, width: int) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …") or "(empty)"


def degraded_warning(result: Result) -> str | None:
    """One line naming the stages of a degraded walk, or None for a complete one."""
    if not result.degraded:
        return None
    parts = ", ".join(f"{stage} stage: {n} candidates not judged" for stage, n in result.degraded.items())
    return f"degraded result ({parts}); the ranking uses what was judged"


def format_hits(result: Result) -> str:
    if not result.hits:
        return "No passages found."
    lines = []
    for rank, hit in enumerate(result.hits, 1):
        choice = f"  choice {hit.choice:.3f}" if hit.choice is not None else ""
        where = " › ".join(hit.path)
        page = f"  {hit.page_reference}" if hit.page_reference else ""
        lines.append(f"{rank:>2}. {hit.score:.3f}{choice}  {where}{page}  [{hit.node.key}]")
        lines.append("    " + shorten(hit.node.text, 200))
        if hit.also_at:  # the same text elsewhere, collapsed into this hit
            lines.append("    also at: " + ", ".join(f"{' › '.join(place.path)}  [{place.key}]"
                                                     for place in hit.also_at))
    return "\n".join(lines)


def format_trace(result: Result) -> str:
    usage = result.usage
    lines = [
        f"Walk: {len(result.trace.stages)} stages, {usage.requests} requests, "
        f"{usage.input_tokens:,} input tokens, {result.seconds:.2f} s"
    ]
    stages = result.trace.stages
    unjudged = {name: n for name, n in result.trace.filtered.items()
                if not any(stage.name == name for stage in stages)}
    if unjudged:
        lines.append("Filtered out (no stage left to judge): " + ", ".join(
            f"{name} {n}" for name, n in unjudged.items()))
    for index, stage in enumerate(stages):
        last = index == len(stages) - 1
        lines.extend(_stage_lines(stage, "└─ " if last else "├─ ", "   " if last else "│  "))
    return "\n".join(lines)


def _stage_lines(stage: StageTrace, branch: str, indent: str) -> list[str]:
    requests = _plural(stage.requests, "request")
    head = (
        f"{branch}{stage.name}: {stage.n_candidates} candidates, {requests}, "
        f"{stage.input_tokens:,} tokens, judge {stage.seconds:.2f} s + local {stage.local_seconds:.2f} s; "
        f"kept {len(stage.kept)}, "
        f"pruned {stage.pruned}" + (f", filtered out {stage.filtered} before judging"
                                     if stage.filtered else "")
    )
    lines = [head]
    if stage.unjudged:
        lines.append(f"{indent}!  DEGRADED: {stage.unjudged} candidates not judged "
                     f"({_plural(len(stage.errors), 'failed request')}: {shorten(stage.errors[0], 120)})")
    lines.extend(f"{indent}!  {note}" for note in stage.notes)
    shown = stage.kept[:SHOWN_PER_STAGE]
    opened = set(stage.opened)
    for position, (key, score) in enumerate(shown):
        more = len(stage.kept) > len(shown)
        twig = "└─ " if position == len(shown) - 1 and not more else "├─ "
        mark = "  (opened)" if key in opened else ""
        title = shorten(stage.titles.get(key, key), 70)
        lines.append(f"{indent}{twig}{score:.3f}  {title}  [{key}]{mark}")
    if len(stage.kept) > len(shown):
        lines.append(f"{indent}└─ … {len(stage.kept) - len(shown)} more kept")
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def print_result(result: Result, *, trace: bool, out: TextIO | None = None) -> None:
    """The ranked passages (and, with `trace`, the walk) as `decisionrag ask` prints them."""
    out = out or sys.stdout
    print(format_hits(result), file=out)
    if trace:
        print(file=out)
        print(format_trace(result), file=out)
