"""``--judge-option KEY=VALUE`` and ``--generator-option KEY=VALUE``: the one place every
command that names a judge or an answer model reads them.

The values are checked and typed against the backend's options before anything is opened
(the judge's `JudgeOptions` class, the answer model's `GeneratorOptions`), exactly as
``load_judge(id, **options)`` and ``load_generator(id, **options)`` check them in Python; the
commands then hand them to the application layer, which loads the judge as every door does.
"""

from __future__ import annotations

import argparse
from typing import Any

JUDGE_FLAG = "--judge-option"
GENERATOR_FLAG = "--generator-option"


def add_judge_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(JUDGE_FLAG, dest="judge_option", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="an option of the judge, typed and checked like Python's "
                        "load_judge(id, KEY=VALUE), e.g. model=NAME, questions_per_call=8, "
                        "timeout=300 (repeatable; `decisionrag judges` lists the backends)")


def add_generator_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(GENERATOR_FLAG, dest="generator_option", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="an option of the answer model: temperature, concurrency, "
                        "max_attempts, timeout, deadline, backoff_initial, backoff_max "
                        "(repeatable)")


def judge_options(args: argparse.Namespace, judge_id: str | None = None) -> dict[str, Any]:
    """The typed options of ``--judge-option`` for `judge_id` (default ``args.judge``)."""
    from .._judges import judge_options as typed
    from .._judges._options import parse_assignments

    given = parse_assignments(getattr(args, "judge_option", []), JUDGE_FLAG)
    return typed(judge_id or args.judge, given, JUDGE_FLAG) if given else {}


def generator_options(args: argparse.Namespace) -> dict[str, Any]:
    """The typed options of ``--generator-option``."""
    from .._answer import generator_options as typed
    from .._judges._options import parse_assignments

    given = parse_assignments(getattr(args, "generator_option", []), GENERATOR_FLAG)
    return typed(given, GENERATOR_FLAG) if given else {}
