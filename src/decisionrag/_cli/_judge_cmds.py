"""`decisionrag judges` (the backends) and `decisionrag judge ID` (a quick probe)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from .._deadline import QueryDeadline
from ._ask import DEFAULT_DEADLINE, seconds_arg
from ._waiting import notice_when_slow


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    listing = subparsers.add_parser("judges", help="list the decision-model backends")
    listing.add_argument("--discover", metavar="URL",
                         help="list the models a server's /v1/models offers, marking decision "
                         "models (output_modalities: decisions), with the judge id to use")
    listing.add_argument("--api-key", help="bearer key for --discover (if the server wants one)")
    listing.set_defaults(func=_list_judges)

    probe = subparsers.add_parser(
        "judge", help="ask a decision model yes/no questions about a context",
        description="Ask one judge yes/no questions over one shared context; prints P(yes) "
        "per question and the usage.",
    )
    probe.add_argument("judge_id", metavar="ID", help="e.g. typesafe:jev-1.13, embedded")
    probe.add_argument("--context", required=True, help="the shared context")
    probe.add_argument("--question", "-q", action="append", required=True, dest="questions",
                       help="a yes/no question (repeatable)")
    probe.add_argument("--option", "-o", action="append", default=[], metavar="NAME=VALUE",
                       help="a judge option, e.g. concurrency=4 or base_url=http://... "
                       "(repeatable)")
    probe.add_argument("--judgment-cache", metavar="DIR",
                       help="remember answers in this directory (a rerun costs nothing)")
    probe.add_argument("--deadline", type=seconds_arg, default=DEFAULT_DEADLINE, metavar="SECONDS",
                       help="the call (every attempt, retry and wait) must finish within this "
                       f"many seconds (default {DEFAULT_DEADLINE:g})")
    probe.add_argument("--json", action="store_true", help="print JSON")
    probe.set_defaults(func=_probe)


def _list_judges(args: argparse.Namespace) -> int:
    from .._judges._registry import BACKEND_INFO

    if args.discover:
        return _discover(args.discover, args.api_key)
    rows = [("backend", "example id", "environment", "limits per request")]
    rows += [(b.backend, b.example, b.env, b.limits) for b in BACKEND_INFO]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[3])
    return 0


def _discover(url: str, api_key: str | None) -> int:
    from .._judges._selfhosted import discover, judge_id_for

    models = discover(url, api_key=api_key)
    if not models:
        print(f"{url}: /v1/models lists no models")
        return 1
    for model in models:
        kind = {True: "decisions", False: "not a decision model", None: "unmarked"}[model.decisions]
        hint = judge_id_for(url, model) if model.decisions is not False else "-"
        print(f"{model.id}\t{kind}\t{hint}")
    if all(m.decisions is None for m in models):
        print("(the server does not mark output modalities; llm2jev and other System One servers "
              "serve every listed model as a decision model)")
    return 0


def _probe(args: argparse.Namespace) -> int:
    from .._judges._registry import parse_options

    options: dict[str, Any] = parse_options(",".join(args.option))
    if args.judgment_cache:
        options["judgment_cache"] = args.judgment_cache
    scope = QueryDeadline(args.deadline)
    with notice_when_slow(scope):
        result = asyncio.run(_ask(args.judge_id, args.context, args.questions, options, scope))
    probabilities, usage = result
    if args.json:
        print(json.dumps({"judge": args.judge_id, "probabilities": probabilities,
                          "usage": usage}, indent=2))
        return 0
    for question, p in zip(args.questions, probabilities, strict=True):
        print(f"{p:.4f}  {question}")
    print("usage: " + ", ".join(f"{k}={v}" for k, v in usage.items()))
    return 0


async def _ask(judge_id: str, context: str, questions: list[str], options: dict[str, Any],
               scope: QueryDeadline) -> tuple[list[float], dict[str, Any]]:
    from .._judges._base import BinaryRequest, Candidate
    from .._judges._registry import load_judge

    candidates = tuple(Candidate(str(i), q) for i, q in enumerate(questions))
    request = BinaryRequest(context, tuple(questions), query=context, candidates=candidates)
    judge = load_judge(judge_id, **options)
    try:
        with scope:
            try:
                async with asyncio.timeout(scope.remaining()):
                    result = await judge.binary(request)
            except TimeoutError as exc:
                raise scope.expired_error(judge.name, "before the judge answered") from exc
    finally:
        await judge.aclose()
    return result.probabilities, result.usage.to_dict()
