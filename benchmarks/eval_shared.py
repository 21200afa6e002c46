"""Evaluate systems on the shared benchmark datasets and print one table per dataset.

    .venv/bin/python benchmarks/eval_shared.py --out bench-out \
        --systems decisionrag,bm25,dense,dense+judge,flat,decisionrag+dense

Each dataset runs with its preset and evaluation protocol (below); the JSON reports land in
``--out``. This is `decisionrag eval` run once per dataset, nothing more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from decisionrag._cli import main as cli

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# dataset -> (navigation preset, extra eval flags)
PROTOCOL: dict[str, tuple[str, list[str]]] = {
    "conditionalqa-dev": ("cqa", []),
    "mtrag-cloud-pooled": ("mtrag", ["--dedup-text", "--dedup-lowercase"]),
    "xquad-en": ("auto", []),
}
SYSTEMS = "decisionrag,bm25,dense,dense+judge,flat,decisionrag+dense"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench-out", help="folder for the JSON reports")
    parser.add_argument("--datasets", default=",".join(PROTOCOL))
    parser.add_argument("--systems", default=SYSTEMS)
    parser.add_argument("--judge", default="embedded")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--data", default=str(DATA), help="folder holding the datasets")
    args = parser.parse_args()
    out = Path(args.out)
    for name in args.datasets.split(","):
        preset, flags = PROTOCOL.get(name, ("auto", []))
        argv = [
            "eval",
            str(Path(args.data) / name),
            "--systems",
            args.systems,
            "--judge",
            args.judge,
            "--preset",
            preset,
            "--recall-ks",
            "1,5,10,100",
            "--json",
            str(out / f"{name}.json"),
            "--keep-runs",
            "100",
            *flags,
        ]
        if args.limit:
            argv += ["--limit", str(args.limit)]
        print(f"$ decisionrag {' '.join(argv)}", flush=True)
        code = cli(argv)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
