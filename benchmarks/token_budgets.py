"""Input tokens per query for oversized inputs: a 20 MB passage, a 131 kB question, a 1 MB
conversation turn, against the fault server's clean judge (declared limit 32,000 tokens per
request). Prints requests, total input tokens and the largest request (characters / 4, as
the server counts them).

    .venv/bin/python benchmarks/token_budgets.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from decisionrag import Navigator, Tree, build_tree, load_judge
from decisionrag._judges._faults import FaultServer
from decisionrag._query import Query, Turn


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, FaultServer() as server:
        root = Path(folder)
        (root / "huge.txt").write_text("renew " + "word " * 4_000_000)  # 20 MB, one passage
        (root / "small.md").write_text("# Passports\n\nRenew a passport online.\n")
        tree_path = build_tree([root], root / "tok.tree").path
        cases: list[tuple[str, str | Query]] = [
            ("20 MB passage", "how do I renew?"),
            ("131 kB question", "renew? " + "why " * 33_000),
            ("1 MB conversation turn",
             Query("my passport", history=(Turn("user", "hello " * 170_000),))),
        ]
        with Tree.open(tree_path) as tree:
            navigator = Navigator(tree, load_judge(server.judge_id("ok")), "flat")
            for name, query in cases:
                server.reset()
                result = navigator.retrieve(query, k=2)
                largest = max(size // 4 + 1 for size in server.request_sizes("ok"))
                print(f"{name}: {result.usage.requests} requests, "
                      f"{result.usage.input_tokens:,} input tokens, largest ~{largest:,}")


if __name__ == "__main__":
    main()
