"""`decisionrag answer TREE "question"`: retrieve, then a chat model answers with citations."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from .._deadline import QueryDeadline
from .._errors import InputError
from .._query import Query
from .._walkpage import walk_page
from ._ask import add_force_argument, check_html, read_history, seconds_arg, write_html
from ._options import add_generator_option, add_judge_option, generator_options, judge_options
from ._waiting import DEFAULT_NOTICE_AFTER, notice_when_slow

DEFAULT_DEADLINE = 120.0  # seconds for the walk and the whole answer, from the command's start


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "answer", help="answer a question from the passages a walk finds, with citations",
        description="Walk a tree with a decision model, then have a chat model (any "
        "OpenAI-compatible endpoint) answer from the top passages, citing them as [n]. "
        "The model is --generator or $DECISIONRAG_GENERATOR; the endpoint --base-url or "
        "$OPENAI_BASE_URL; the key $OPENAI_API_KEY.",
    )
    parser.add_argument("tree", type=Path, help="a tree file written by `decisionrag build`")
    parser.add_argument("question", help="the question (or the user's last turn)")
    parser.add_argument("--generator", metavar="ID",
                        help="answer model, openai-compatible:MODEL (default: $DECISIONRAG_GENERATOR)")
    parser.add_argument("--base-url", metavar="URL",
                        help="the chat endpoint, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, "
                        "else the OpenAI API)")
    add_generator_option(parser)
    parser.add_argument("--top", type=int, default=5, metavar="N",
                        help="passages given to the model (default 5)")
    parser.add_argument("--task", default="auto", choices=("auto", "qa", "short", "conversation"),
                        help="answer task: qa (short answer, conditions), short (at most five words), "
                        "conversation (the agent's next reply); auto picks by --history (default)")
    parser.add_argument("--stream", action="store_true", help="print the answer as it is written")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (with --stream: JSON lines, one per event)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write the walk and the answer as one self-contained HTML page")
    parser.add_argument("--judge", default="embedded", help="judge id (default: embedded)")
    add_judge_option(parser)
    parser.add_argument("--preset", default="auto", help="navigation preset (default: auto)")
    parser.add_argument("--history", type=Path, metavar="FILE",
                        help="earlier turns: a JSON list of {role, text}, or JSON lines")
    parser.add_argument("--context", default="", help="the user's situation (background)")
    parser.add_argument("--deadline", type=seconds_arg, default=DEFAULT_DEADLINE, metavar="SECONDS",
                        help="the walk and the whole answer (every request, retry and wait; a "
                        "stream however long the model keeps it going) must finish within this "
                        f"many seconds of the start, or fail saying so (default {DEFAULT_DEADLINE:g})")
    add_force_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._answer import AnswerEvent
    from .._app import answer_once

    if args.top < 1:
        raise InputError(f"--top must be at least 1, not {args.top}")
    check_html(args)
    options, model_options = judge_options(args), generator_options(args)
    history = read_history(args.history) if args.history else ()
    query = Query(text=args.question, context=args.context, history=history)
    out = sys.stdout

    def show(event: AnswerEvent) -> None:
        if not args.stream:
            return
        if args.json:
            _json_event(event, out)
        elif event.kind == "delta":
            out.write(event.text)
            out.flush()

    scope = QueryDeadline(args.deadline, from_now=True)
    # the wait may be the answer model's as well (a slow local server generating)
    with notice_when_slow(scope, DEFAULT_NOTICE_AFTER, what="the judge or the answer model"):
        reply = answer_once(
            args.tree, query, judge_id=args.judge, preset=args.preset, generator=args.generator,
            base_url=args.base_url, top=args.top, task=args.task, stream=args.stream,
            on_event=show, deadline=scope, judge_options=options, generator_options=model_options,
        )
    if args.html:
        write_html(args, walk_page(reply))
    if args.json:
        if not args.stream:
            json.dump(reply.to_dict(), out, ensure_ascii=False, indent=2)
            print(file=out)
        return 0
    if args.stream:
        print(file=out)
    else:
        print(reply.text.strip(), file=out)
    print_sources(reply, out)
    if args.html:
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def print_sources(reply: Any, out: TextIO) -> None:
    from .._app import shorten

    cited = [c for c in reply.citations if c.valid]
    if cited:
        print("\nSources:", file=out)
    for citation in cited:
        hit = citation.hit
        meta = "; ".join(f"{k}={v}" for k, v in list(hit.metadata.items())[:4])
        page = f"  {hit.page_reference}" if hit.page_reference else ""
        print(f"[{citation.number}] {' › '.join(hit.path)}{page}  [{hit.key}]"
              + (f"  {meta}" if meta else ""), file=out)
        print("    " + shorten(hit.node.text, 200), file=out)
    if not reply.citations:
        print("\n(the answer cites no passage)", file=out)
    if reply.invalid_citations:
        given = len(reply.sources)
        names = ", ".join(f"[{n}]" for n in reply.invalid_citations)
        print(f"\nwarning: the answer cites {names}, which names no passage given "
              f"(passages 1–{given})", file=sys.stderr)


def _json_event(event: Any, out: TextIO) -> None:
    if event.kind == "retrieved":
        payload: dict[str, Any] = {"type": "retrieved",
                                   "results": [hit.to_dict() for hit in event.result.hits]}
    elif event.kind == "delta":
        payload = {"type": "delta", "text": event.text}
    else:
        payload = {"type": "done", **event.answer.to_dict()}
    out.write(json.dumps(payload, ensure_ascii=False) + "\n")
    out.flush()
