"""The one progress display (`decisionrag._progress`): redrawn on a terminal, plain lines in a
log, and `decisionrag eval ... > log 2>&1` leaves a log a person can read."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decisionrag._progress import Step, within


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_plain_line_every_interval_and_one_at_the_end() -> None:
    out = io.StringIO()
    with Step("vectors", 1000, "passages", stream=out, interval=0.2) as shown:
        for _ in range(10):
            for _ in range(100):
                shown.advance(1)
            time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert 2 <= len(lines) <= 5, lines  # 0.5 s of work: a line per 0.2 s, and the last
    assert all(line.startswith("decisionrag: vectors") for line in lines)
    assert "/1,000 passages" in lines[0] and "%" in lines[0]
    assert lines[-1].startswith("decisionrag: vectors: 1,000 passages in ")


def test_a_terminal_gets_one_line_redrawn_with_the_time_left() -> None:
    out = Terminal()
    with Step("vectors", 100, "passages", stream=out) as shown:
        time.sleep(1.05)  # the time left is shown once a second has passed
        shown.advance(50)
        text = out.getvalue()
    assert "\n" not in text and text.count("\r") >= 2
    assert "50/100 passages" in text and "50%" in text and "left" in text
    assert out.getvalue().endswith("\r\x1b[K")  # cleared when done: the command's summary follows


def test_the_time_left_follows_the_cost_of_unequal_items() -> None:
    shown = Step("embedding", 4, "texts", stream=io.StringIO())
    shown.started -= 10.0  # ten seconds in
    shown.expect(1000)
    shown.advance(1, cost=500)  # the longest text first: half the work in one item of four
    assert "25%" in shown.line() and "about 10s left" in shown.line()


def test_a_failed_step_says_so_and_a_disabled_one_says_nothing() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), Step("clustering", stream=out):
        raise RuntimeError("boom")
    assert out.getvalue().startswith("decisionrag: clustering: stopped after")
    quiet = io.StringIO()
    with Step("parsing", 10, stream=quiet, enabled=False) as shown:
        shown.advance(10)
    assert quiet.getvalue() == ""


def test_within_advances_the_callers_step_or_shows_its_own() -> None:
    out = io.StringIO()
    outer = Step("vectors", 3, "passages", stream=out)
    with within(outer, "embedding", 3) as shown:
        assert shown is outer
        shown.advance(3)
    assert outer.done == 3 and out.getvalue() == ""  # left open for its owner
    with within(False, "embedding", 3) as own:
        assert own is not outer and not own.enabled


def _dataset(folder: Path, n_queries: int) -> Path:
    folder.mkdir(parents=True)
    topics = ["passport", "driving", "tax", "pension", "benefits", "school"]
    corpus = [{"id": f"{t}{i}", "doc_id": t, "doc_title": t.title(), "section": [f"Part {i}"],
               "text": f"How to handle your {t} case number {i} online or by post."}
              for t in topics for i in range(4)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = [{"id": f"q{n}", "text": f"{topics[n % 6]} case {n % 4} online"}
               for n in range(n_queries)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    rows = [f"q{n}\t{topics[n % 6]}{n % 4}\t1" for n in range(n_queries)]
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return folder


@pytest.mark.slow
def test_eval_into_a_log_file_leaves_readable_lines(tmp_path: Path) -> None:
    """What issue 26 saw: tqdm wrote every redraw into the log (2,373 of them, 177 kB). Now
    each step writes a plain line every few seconds and one at its end."""
    data = _dataset(tmp_path / "many", 120)
    log = tmp_path / "eval.log"
    env = {**os.environ, "DECISIONRAG_PROGRESS_SECONDS": "1", "HF_HUB_OFFLINE": "1"}
    with log.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "decisionrag", "eval", str(data), "--systems",
             "bm25,decisionrag", "--judge", "simulated:latency=0.01", "--cache-dir",
             str(tmp_path / "cache")],
            stdout=out, stderr=subprocess.STDOUT, env=env, timeout=600, check=False)
    text = log.read_text()
    assert done.returncode == 0, text
    assert "\r" not in text and "\x1b" not in text
    assert "Batches" not in text and "it/s" not in text  # no other library's bar
    lines = text.splitlines()
    progress = [line for line in lines if line.startswith("decisionrag: ")]
    assert any(line.startswith("decisionrag: parsing: ") for line in progress)
    assert any(line.startswith("decisionrag: preparing systems: 2 systems in") for line in progress)
    for system in ("bm25", "decisionrag"):
        assert any(line.startswith(f"decisionrag: {system}: 120 queries in") for line in progress)
    assert all(len(line) < 200 for line in lines)
    assert len(text) < 8_000, text  # the table and a few dozen lines, not thousands of redraws
