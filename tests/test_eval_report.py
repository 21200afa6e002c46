"""`--report DIR`: a self-contained HTML page with inline SVG plots, and the same tables as Markdown."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from decisionrag._cli import main
from decisionrag._eval._report import render_html, render_markdown, wins_and_losses
from test_eval_runner import write_dataset


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report")
    dataset = write_dataset(base / "tiny-data")
    run_file = base / "ext.trec"
    run_file.write_text("q3 Q0 dl2 1 9 x\nq4 Q0 pp1 1 9 x\nq4 Q0 vt2 2 8 x\n")
    code = main(["eval", str(dataset), "--systems", "decisionrag,bm25", "--judge", "scripted",
                 "--run", f"ext={run_file}", "--report", str(base / "out"), "--json",
                 str(base / "out" / "report.json"), "--cache-dir", str(base / "c"), "--no-progress"])
    assert code == 0
    return base / "out"


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def test_html_is_self_contained_with_every_plot(report_dir: Path) -> None:
    html = (report_dir / "index.html").read_text()
    parser = _Elements()
    parser.feed(html)
    assert "script" not in parser.tags and "img" not in parser.tags and "link" not in parser.tags
    assert not any(name in ("src", "href") for name, _ in parser.attrs)
    assert not re.search(r"https?://", html)  # nothing to fetch, not even an SVG namespace
    assert parser.tags.count("svg") == 6  # recall curve, 2 win/loss, latency, tokens, pruning
    for heading in ("Recall@k", "Per query against the baseline", "Latency per query",
                    "Tokens and cost per query", "Pruning recall per stage", "Imported runs"):
        assert f"<h2>{heading}</h2>" in html
    assert "decisionrag" in html and "bm25" in html and "ext" in html
    assert "3 of 5" in html  # ext lacks 3 queries: the report says so


def test_markdown_has_the_same_tables(report_dir: Path) -> None:
    markdown = (report_dir / "report.md").read_text()
    report: dict[str, Any] = json.loads((report_dir / "report.json").read_text())
    assert markdown == render_markdown(report)
    assert (report_dir / "index.html").read_text() == render_html(report)
    header = "| metric | decisionrag | bm25 | ext |"
    assert header in markdown
    hit = report["systems"]["ext"]["tiny_data_hit@1"]
    interval = report["intervals"]["ext"]["tiny_data_hit@1"]
    assert (f"| hit@1 | {100 * report['systems']['decisionrag']['tiny_data_hit@1']:.1f} |" in markdown)
    low, high = interval[1], interval[2]
    assert f"{100 * hit:.1f} ({100 * interval[0]:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}])" in markdown
    for section in ("## Per query against the baseline", "## Latency per query",
                    "## Tokens and cost per query", "## Pruning recall per stage", "## Imported runs"):
        assert section in markdown
    assert "| ext | ext.trec | trec | 2 | 3 of 5 |" in markdown
    latency_rows = markdown.split("## Latency per query")[1].split("##")[0]
    assert "| decisionrag |" in latency_rows and "| ext |" not in latency_rows  # ext was not timed


def test_win_loss_counts_follow_the_per_query_values(report_dir: Path) -> None:
    report: dict[str, Any] = json.loads((report_dir / "report.json").read_text())
    better, same, worse, diffs = wins_and_losses(report, "ext", "hit@1")
    base = report["per_query"]["decisionrag"]["hit@1"]
    ext = report["per_query"]["ext"]["hit@1"]
    assert len(diffs) == len(base) == 4
    assert better == sum(ext[q] > base[q] for q in base)
    assert worse == sum(ext[q] < base[q] for q in base)
    assert better + same + worse == 4
    assert f"| ext | {better} / {same} / {worse} |" in (report_dir / "report.md").read_text()
