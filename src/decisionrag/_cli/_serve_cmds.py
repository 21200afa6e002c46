"""`decisionrag serve`, `decisionrag ui`, `decisionrag mcp` and `decisionrag keys`: shells over `_serve`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from .._errors import InputError, missing_extra
from ._options import add_generator_option, add_judge_option, generator_options, judge_options


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    _register_serve(subparsers)
    _register_ui(subparsers)
    _register_mcp(subparsers)
    _register_keys(subparsers)


def _tree_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trees", nargs="+", metavar="TREE",
                        help="tree files to serve, as PATH (named after the file: docs.tree -> docs) "
                        "or NAME=PATH; the first is the default")
    parser.add_argument("--judge", default="embedded", help="judge id (default: embedded)")
    add_judge_option(parser)
    parser.add_argument("--preset", default="auto", help="default navigation preset (default: auto)")


def _register_serve(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve trees over HTTP (retrieve, rerank, trees; a console at /ui, OpenAPI at /docs)",
        description="An HTTP retrieval service over one or more tree files (FastAPI + uvicorn, the "
        "'serve' extra). A tree file replaced on disk is reopened; requests in flight finish on "
        "the old one. SIGTERM drains requests in flight, then exits. Logs are JSON lines on stderr. "
        "A web console to browse, search and ask is at /ui.")
    _tree_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes sharing the port and the read-only tree files")
    _service_arguments(parser)
    parser.add_argument("--drain-timeout", type=float, default=30.0, metavar="S",
                        help="seconds SIGTERM waits for requests in flight (default: 30)")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    parser.add_argument("--no-ui", action="store_true", help="do not serve the web console at /ui")
    parser.set_defaults(func=_run_serve)


def _service_arguments(parser: argparse.ArgumentParser) -> None:
    """What `serve` and `ui` both take: the service's state, keys, limits and answer model."""
    parser.add_argument("--state-dir", metavar="DIR",
                        help="folder of the state the workers share (conversations), kept when "
                        "the server stops, so conversations survive a restart (default: with "
                        "--workers 2+ a temporary folder removed at shutdown; with one worker "
                        "its memory)")
    parser.add_argument("--state", metavar="URL",
                        help="Redis every replica shares, redis://HOST:PORT/DB or rediss://... "
                        "(password in the URL or $DECISIONRAG_REDIS_PASSWORD): conversations, "
                        "so a turn may land on any host, and the per-key rates (the 'redis' extra)")
    parser.add_argument("--requests-per-minute", type=int, metavar="N",
                        help="requests each API key may send per minute (a key file entry may set "
                        "its own; without keys, all callers together); shared by every replica "
                        "with --state, else per process")
    parser.add_argument("--judge-tokens-per-minute", type=int, metavar="N",
                        help="judge input tokens each API key may spend per minute (as above)")
    parser.add_argument("--api-key-file", metavar="FILE",
                        help="JSON file of hashed API keys (`decisionrag keys add`); without it "
                        "the server only binds a loopback address")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="default per-request deadline in seconds (default: 30)")
    parser.add_argument("--max-judge-requests", type=int, metavar="N",
                        help="judge requests in flight at most, per worker (default: 64)")
    parser.add_argument("--judge-queue", type=int, metavar="N",
                        help="judge requests that may wait for a slot before new requests get "
                        "503 + Retry-After (default: 512)")
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="any other limit, e.g. max_k=50, max_body_bytes=200000, max_query_chars, "
                        "max_messages, max_conversation_chars, max_documents, max_timeout, "
                        "max_conversations, conversation_ttl, state_timeout (repeatable)")
    parser.add_argument("--reload-interval", type=float, default=1.0, metavar="S",
                        help="how often tree and key files are checked for replacement (default: 1)")
    parser.add_argument("--generator", metavar="ID",
                        help="answer model, openai-compatible:MODEL: enables POST /v1/answer "
                        "(default: $DECISIONRAG_GENERATOR; none: no such endpoint)")
    parser.add_argument("--generator-base-url", metavar="URL",
                        help="the answer model's endpoint (default: $OPENAI_BASE_URL, else the OpenAI API)")
    add_generator_option(parser)


def _register_ui(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "ui", help="the web console on a loopback server: prints its address",
        description="Serve trees on 127.0.0.1 (a free port unless --port) with the same settings "
        "as `decisionrag serve`, and print the address of the console (browse a tree, search "
        "it, watch the walk, read the answer). One process; Ctrl-C stops it.")
    _tree_arguments(parser)
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    _service_arguments(parser)
    parser.add_argument("--open", action="store_true", help="also open the console in the default browser")
    parser.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"),
                        help="request logs on stderr from this level (default: warning)")
    parser.set_defaults(func=_run_ui)


def _settings(args: argparse.Namespace) -> Any:
    from .._serve._settings import ServeLimits, ServeSettings, tree_argument

    options = judge_options(args)  # refused before anything else is checked or opened
    generator = getattr(args, "generator", None) or os.environ.get("DECISIONRAG_GENERATOR") or None
    model_options = generator_options(args)
    assignments: dict[str, str] = {}
    for item in getattr(args, "limit", []):
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--limit {item!r}: expected NAME=VALUE")
        assignments[name.strip()] = value.strip()
    for flag, name in (("timeout", "default_timeout"), ("max_judge_requests", "max_judge_requests"),
                       ("judge_queue", "max_judge_queue"), ("requests_per_minute", "requests_per_minute"),
                       ("judge_tokens_per_minute", "judge_tokens_per_minute")):
        value = getattr(args, flag, None)
        if value is not None:
            assignments[name] = str(value)
    limits = ServeLimits().replace(assignments)
    trees = tuple(tree_argument(text) for text in args.trees)
    for name, path in trees:
        if not Path(path).is_file():
            raise InputError(f"{path}: no such tree file (tree {name!r})")
    if generator:
        from .._answer._generator import generator_model

        generator_model(generator)  # a bad id fails here, before the server starts
    return ServeSettings(trees=trees, judge=args.judge, preset=args.preset,
                         judge_options=options, generator_options=model_options if generator else {},
                         api_key_file=getattr(args, "api_key_file", None), limits=limits,
                         reload_seconds=getattr(args, "reload_interval", 1.0), generator=generator,
                         generator_base_url=getattr(args, "generator_base_url", None),
                         state_dir=getattr(args, "state_dir", None),
                         state_url=getattr(args, "state", None),
                         ui=not getattr(args, "no_ui", False))


def _run_serve(args: argparse.Namespace) -> int:
    try:
        from .._serve._run import serve
    except ImportError as exc:
        raise missing_extra(exc.name or "fastapi", "serve") from exc
    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, not {args.workers}")
    settings = _settings(args)
    # after a drain uvicorn re-raises SIGTERM: that is a clean exit
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    serve(settings, host=args.host, port=args.port, workers=args.workers,
          drain_seconds=args.drain_timeout, log_level=args.log_level)
    return 0


def _run_ui(args: argparse.Namespace) -> int:
    try:
        from .._serve._run import serve_console
    except ImportError as exc:
        raise missing_extra(exc.name or "fastapi", "serve") from exc
    settings = _settings(args)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    serve_console(settings, port=args.port, open_browser=args.open, log_level=args.log_level)
    return 0


def _register_mcp(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "mcp", help="a Model Context Protocol tool server on stdio (retrieve, read_node)",
        description="Serve tree files to MCP clients (agents, IDEs) over stdio with the official "
        "`mcp` SDK (the 'mcp' extra). Tools: retrieve, read_node, list_trees.")
    _tree_arguments(parser)
    parser.set_defaults(func=_run_mcp)


def _run_mcp(args: argparse.Namespace) -> int:
    try:
        from .._serve._mcp import run_mcp
    except ImportError as exc:
        raise missing_extra(exc.name or "mcp", "mcp") from exc
    run_mcp(_settings(args))
    return 0


def _register_keys(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "keys", help="create, list and remove the server's API keys",
        description="API keys for `decisionrag serve --api-key-file FILE`. The file keeps only "
        "SHA-256 hashes; a new key is printed once.")
    actions = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="create a key and store its hash")
    add.add_argument("file", type=Path, help="the key file (created if absent)")
    add.add_argument("--name", required=True, help="who the key is for (shown in logs)")
    add.add_argument("--tree", action="append", default=[], metavar="NAME",
                     help="a tree the key may read (repeatable; default: all trees)")
    add.add_argument("--requests-per-minute", type=int, metavar="N",
                     help="this key's own request rate (default: the server's)")
    add.add_argument("--judge-tokens-per-minute", type=int, metavar="N",
                     help="this key's own judge-token rate (default: the server's)")
    add.set_defaults(func=_keys_add)
    listing = actions.add_parser("list", help="the keys' names and trees")
    listing.add_argument("file", type=Path)
    listing.set_defaults(func=_keys_list)
    remove = actions.add_parser("remove", help="revoke a key (a running server notices)")
    remove.add_argument("file", type=Path)
    remove.add_argument("name")
    remove.set_defaults(func=_keys_remove)
    hashing = actions.add_parser("hash", help="print the SHA-256 of a key read from stdin")
    hashing.set_defaults(func=_keys_hash)


def _keys_add(args: argparse.Namespace) -> int:
    from .._serve._auth import add_key

    rates = {name: getattr(args, name) for name in ("requests_per_minute", "judge_tokens_per_minute")
             if getattr(args, name) is not None}
    key = add_key(args.file, args.name, args.tree, rates)
    print(key)
    print(f"decisionrag: key {args.name!r} added to {args.file}; it is shown only now", file=sys.stderr)
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    from .._serve._auth import read_key_file

    for principal in read_key_file(args.file).values():
        rates = "".join(f"\t{name}={'none' if value is None else value}" for name, value in principal.rates)
        print(f"{principal.name}\t{','.join(sorted(principal.trees))}{rates}")
    return 0


def _keys_remove(args: argparse.Namespace) -> int:
    from .._serve._auth import remove_key

    remove_key(args.file, args.name)
    return 0


def _keys_hash(args: argparse.Namespace) -> int:
    from .._serve._auth import hash_key

    key = sys.stdin.readline().strip()
    if not key:
        raise InputError("keys hash: give the key on stdin")
    print(hash_key(key))
    return 0
