"""`decisionrag ask TREE "question"`: retrieve passages by walking a tree with a judge."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .._app import degraded_warning
from .._deadline import QueryDeadline
from .._errors import InputError
from .._query import Query, Turn
from .._walkpage import walk_page
from ._options import add_judge_option, judge_options
from ._terminal import printable
from ._waiting import DEFAULT_NOTICE_AFTER, notice_when_slow

DEFAULT_DEADLINE = 60.0  # seconds for one query from the command line


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "ask", help="find the passages that answer a question",
        description="Walk a tree with a decision model and print the ranked passages.",
    )
    parser.add_argument("tree", type=Path, help="a tree file written by `decisionrag build`")
    parser.add_argument("question", help="the question (or the user's last turn)")
    parser.add_argument("--judge", default="embedded", help="judge id (default: embedded)")
    add_judge_option(parser)
    parser.add_argument("--preset", default="auto", help="navigation preset (default: auto)")
    parser.add_argument("--history", type=Path, metavar="FILE",
                        help="earlier turns: a JSON list of {role, text}, or JSON lines")
    parser.add_argument("--context", default="", help="the user's situation (background)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="passages to print")
    parser.add_argument("--keep-pages", type=int, metavar="K", help="pages kept at the page stage")
    parser.add_argument("--mc-top", type=int, metavar="M", help="multiple-choice shortlist size")
    parser.add_argument("--mc-mode", choices=("order", "top1", "off"), help="multiple-choice mode")
    parser.add_argument("--questions", choices=("paper", "compact"),
                        help="binary question form: the paper's sentence per candidate (default) "
                        "or compact (the sentence once in the context, 'Page 12?' per candidate: "
                        "about 45%% fewer billed tokens on an NQ-sized tree)")
    parser.add_argument("--max-input-tokens", type=int, metavar="N",
                        help="the most input tokens the whole query may send: the passage stage "
                        "and the choice shortlist shrink to fit, a level that alone does not "
                        "fit is refused")
    parser.add_argument("--on-failure", choices=("degrade", "fail"),
                        help="when a judge request still fails after its retries: go on without "
                        "its candidates and flag the result (degrade, the presets' default) or "
                        "stop with an error naming the stage (fail)")
    parser.add_argument("--hybrid", choices=("bm25", "dense", "hybrid"),
                        help="add this retriever's top passages to the passage stage (hybrid "
                        "candidates; the dense index is built once per tree and cached on disk)")
    parser.add_argument("--hybrid-k", type=int, metavar="N",
                        help="how many retriever passages to add (default: the preset's, 20)")
    parser.add_argument("--filter", action="append", default=[], metavar="COND",
                        help="keep only passages whose metadata match (repeatable, all must "
                        "hold): key=value, key=a|b (any of), key!=value, key>=v, key>v, key<=v, "
                        "key<v, key? (has key), !key? (lacks it); whole branches that cannot "
                        "match are never judged")
    parser.add_argument("--filters", metavar="JSON",
                        help="a filter as JSON, e.g. '{\"year\": {\"gte\": 2023}, \"or\": [...]}' "
                        "(combined with --filter)")
    parser.add_argument("--deadline", type=seconds_arg, default=DEFAULT_DEADLINE, metavar="SECONDS",
                        help="the whole query (opening the tree and the judge, every request, retry "
                        "and wait) must finish within this many seconds of the start, or fail "
                        f"naming the stage (default {DEFAULT_DEADLINE:g})")
    parser.add_argument("--notice-after", type=seconds_arg, default=DEFAULT_NOTICE_AFTER,
                        metavar="SECONDS", help="print a line on stderr when the judge has not "
                        f"answered for this long, and again as often (default {DEFAULT_NOTICE_AFTER:g})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--trace", action="store_true", help="also print the walk, stage by stage")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write the walk as one self-contained HTML page (a page "
                        "decisionrag wrote there is replaced; any other file only with --force)")
    add_force_argument(parser)
    parser.set_defaults(func=run)


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="replace an output file decisionrag did not write (never one of "
                        "this command's inputs, a folder or a device)")


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise InputError(f"--top must be at least 1, not {args.top}")
    check_html(args)  # before the walk: a refused output costs nothing
    options = judge_options(args)  # refused here, before the tree and the judge are opened
    history = read_history(args.history) if args.history else ()
    query = Query(text=args.question, context=args.context, history=history).check()
    scope = QueryDeadline(args.deadline, from_now=True)  # the command's start-up counts too
    with notice_when_slow(scope, args.notice_after):
        result = _ask_once(args, query, scope, options)
    if args.html:
        write_html(args, walk_page(result))
        print(f"wrote {args.html}", file=sys.stderr)
    warning = degraded_warning(result)
    if warning:
        print(printable(f"decisionrag: warning: {warning}"), file=sys.stderr)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, ensure_ascii=False, indent=2)
        print()
        return 0
    from .._app import print_result

    print_result(result, trace=args.trace)
    return 0


def _filters(args: argparse.Namespace) -> dict[str, Any] | None:
    spec = parse_filter_args(args.filter)
    if args.filters:
        try:
            given = json.loads(args.filters)
        except json.JSONDecodeError as exc:
            raise InputError(f"--filters: not valid JSON ({exc.msg}, column {exc.colno})") from exc
        except RecursionError as exc:
            raise InputError("--filters: JSON nested too deeply") from exc
        if not isinstance(given, dict):
            raise InputError("--filters: expected a JSON object")
        spec = {"and": [*(spec or {}).get("and", []), given]}
    if spec is not None:
        from .._navigate._filters import parse_filters

        parse_filters(spec)  # refused here, before the tree and the judge are opened
    return spec


def seconds_arg(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {value!r}")
    return seconds


def _ask_once(args: argparse.Namespace, query: Query, scope: QueryDeadline,
              options: dict[str, Any]) -> Any:
    from .._app import ask

    return ask(
        args.tree, query, judge_id=args.judge, judge_options=options, preset=args.preset, k=args.top,
        overrides={"keep_pages": args.keep_pages, "mc_top": args.mc_top, "mc_mode": args.mc_mode,
                   "on_failure": args.on_failure, "questions": args.questions,
                   "hybrid_k": args.hybrid_k},
        hybrid=args.hybrid, filters=_filters(args), deadline=scope,
        max_input_tokens=args.max_input_tokens,
    )


def _html_rule(args: argparse.Namespace) -> dict[str, Any]:
    """The output rule of --html: never the tree read (nor its vectors and indexes) or the
    history file; a page decisionrag wrote is replaced, anything else only with --force."""
    from .._files import HTML_PAGE
    from .._tree._output import tree_inputs

    files, folders = tree_inputs(args.tree)
    inputs = [*files, *([args.history] if args.history else [])]
    return {"inputs": inputs, "within": folders, "force": args.force, "kind": HTML_PAGE,
            "flag": "--html"}


def check_html(args: argparse.Namespace) -> None:
    """Refuse a bad --html path before any work is done."""
    if args.html:
        from .._files import check_output

        check_output(args.html, **_html_rule(args))


def write_html(args: argparse.Namespace, page: str) -> None:
    """Write the page whole or not at all, under the one output rule."""
    from .._files import write_output

    write_output(args.html, page, **_html_rule(args))


def read_history(path: Path) -> tuple[Turn, ...]:
    """Turns from a JSON list or JSON lines of {"role": "user"|"agent", "text": ...}."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the history file ({exc.strerror})") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line_no}: not UTF-8 (byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start}); save the history as UTF-8") from exc
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise InputError(f"{path}: JSON nested too deeply") from exc
        if not isinstance(items, list):
            raise InputError(f"{path}: expected a JSON list of turns")
        return tuple(_turn(item, path, index + 1, "item") for index, item in enumerate(items))
    turns = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number}: not valid JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise InputError(f"{path}: line {number}: JSON nested too deeply") from exc
        turns.append(_turn(item, path, number, "line"))
    return tuple(turns)


def _turn(item: Any, path: Path, number: int, unit: str) -> Turn:
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        raise InputError(f"{path}: {unit} {number}: expected an object with a string field 'text'")
    role = item.get("role", "user")
    if role not in ("user", "agent"):
        raise InputError(f"{path}: {unit} {number}: 'role' must be 'user' or 'agent', not {role!r}")
    return Turn(role, item["text"])


_FILTER_ARG = re.compile(r"^([^=!<>]+?)(!=|>=|<=|=|>|<)(.*)$")
_FILTER_OPS = {"!=": "ne", ">=": "gte", "<=": "lte", ">": "gt", "<": "lt", "=": "eq"}


def parse_filter_args(args: list[str]) -> dict[str, Any] | None:
    """``--filter`` arguments as one filter mapping (all must hold): ``key=value`` (``a|b``:
    any of), ``key!=value``, ``key>=v``, ``key>v``, ``key<=v``, ``key<v``, ``key?`` (has the
    key) and ``!key?`` (lacks it). Values are typed as in front matter (numbers, true/false);
    for = and != an integer also matches the same digits as text (``page_label=12``)."""
    from .._build._metadata import typed_value

    conditions: list[dict[str, Any]] = []
    for arg in args:
        if arg.endswith("?") and not _FILTER_ARG.match(arg):
            negated = arg.startswith("!")
            conditions.append({arg[1:-1] if negated else arg[:-1]: {"exists": not negated}})
            continue
        match = _FILTER_ARG.match(arg)
        if match is None:
            raise InputError(f"--filter {arg!r}: expected key=value, key!=value, key>=value, "
                             "key<=value, key>value, key<value, key? or !key?")
        key, symbol, raw = match.group(1).strip(), match.group(2), match.group(3)
        values = [form for v in raw.split("|") for form in _equality_forms(v)] \
            if symbol in ("=", "!=") else []
        if len(values) > 1:
            condition: dict[str, Any] = {key: {"in": values}}
            conditions.append({"not": condition} if symbol == "!=" else condition)
        else:
            conditions.append({key: {_FILTER_OPS[symbol]: typed_value(raw)}})
    return {"and": conditions} if conditions else None


def _equality_forms(raw: str) -> list[Any]:
    """The values `raw` may stand for on the command line: typed as in front matter, and an
    integer also as the string it is written as (a printed page label "12" is text)."""
    from .._build._metadata import typed_value

    value = typed_value(raw)
    if isinstance(value, int) and not isinstance(value, bool) and str(value) == raw.strip():
        return [value, raw.strip()]
    return [value]
