"""`decisionrag eval`: run systems on a dataset (shared format, BEIR, or a tree with one's own
labels), score runs read from files beside them, and print a metrics table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._errors import InputError
from ._options import add_generator_option, add_judge_option, generator_options, judge_options

DEFAULT_SYSTEMS = "decisionrag,bm25,dense"


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate retrieval systems on a labelled dataset",
        description="Run systems (decisionrag, decisionrag+dense, flat, dense+judge, bm25, dense, "
        "hybrid; the ablations walk-only, all+judge, hybrid+judge) "
        "on a dataset folder (corpus.jsonl, queries.jsonl, qrels.tsv[, qrels_docs.tsv]), a BEIR "
        "folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) or a .tree file with --queries and "
        "--qrels, add runs of other retrievers with --run, and print metrics with paired 95%% "
        "bootstrap intervals against the first system.",
    )
    parser.add_argument(
        "dataset", metavar="DATASET", help="dataset folder (shared format or BEIR), or a .tree file"
    )
    parser.add_argument(
        "--systems",
        default=DEFAULT_SYSTEMS,
        help=f"comma-separated (default {DEFAULT_SYSTEMS}); 'none' to score --run files only",
    )
    parser.add_argument(
        "--run", dest="runs", action="append", default=[], metavar="NAME=FILE",
        help="add a run of another retriever (TREC 'qid Q0 docid rank score tag' or JSONL "
        "{query_id, results: [{id, score}]}); repeatable",
    )
    parser.add_argument(
        "--tie-break", choices=("file", "docid"), default="file",
        help="order of equal scores in --run files: the file's order (default) or trec_eval's "
        "(docid descending)",
    )
    parser.add_argument("--save-runs", metavar="DIR", help="write every system's run as DIR/<name>.trec")
    parser.add_argument("--report", metavar="DIR", help="write DIR/index.html (plots) and DIR/report.md")
    parser.add_argument(
        "--queries", metavar="FILE", help="queries JSONL (with a .tree, or replacing a folder's)"
    )
    parser.add_argument("--qrels", metavar="FILE", help="labels: BEIR TSV with header, or TREC qrels")
    parser.add_argument("--split", default="test", help="BEIR qrels split: qrels/SPLIT.tsv (default test)")
    parser.add_argument(
        "--passages", choices=("whole", "split"), default="whole",
        help="BEIR documents as one passage each (default) or split into paragraphs",
    )
    parser.add_argument(
        "--judge", default="embedded", help="judge id for navigation systems (default embedded)"
    )
    add_judge_option(parser)
    parser.add_argument("--preset", default="auto", help="navigation preset (default auto)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N queries")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="write the full report as JSON")
    parser.add_argument("--dedup-text", action="store_true", help="count passages with identical text once")
    parser.add_argument("--dedup-lowercase", action="store_true", help="with --dedup-text: also ignore case")
    parser.add_argument("--ks", default="1,5,10", help="cut-offs for Hit@k and page Hit@k (default 1,5,10)")
    parser.add_argument("--recall-ks", default=None, help="cut-offs for Recall@k (default: --ks)")
    parser.add_argument(
        "--price", type=float, default=None,
        help="USD per million input tokens for every system (default: each judge's own "
        "price, e.g. hosted Jev 0.042; the embedded judge is free; cached "
        "judgments cost nothing)"
    )
    parser.add_argument(
        "--cache-dir", default=None,
        help="tree cache folder (default: $DECISIONRAG_CACHE_DIR/trees, else ~/.cache/decisionrag/trees)"
    )
    parser.add_argument(
        "--embed-model", default=None, help="sentence-transformers model for dense (default MiniLM)"
    )
    parser.add_argument(
        "--dense-search", choices=("auto", "exact", "ann"), default="auto",
        help="how dense and hybrid search the stored vectors: 'auto' (default) uses the tree's "
        "ANN index from 100,000 passages and exact search below; the report gives the "
        "index's recall@100 against exact search when it is used"
    )
    parser.add_argument(
        "--answers", action="store_true",
        help="also answer from each system's top 5 with --generator (or $DECISIONRAG_GENERATOR) "
        "and score exact match and token F1",
    )
    parser.add_argument("--generator", default=None, metavar="ID",
                        help="answer model for --answers: openai-compatible:MODEL")
    parser.add_argument("--base-url", default=None, metavar="URL",
                        help="the answer model's endpoint (default: $OPENAI_BASE_URL, else the OpenAI API)")
    parser.add_argument(
        "--answer-model", default=None, metavar="MODEL",
        help="the same as --answers --generator openai-compatible:MODEL",
    )
    add_generator_option(parser)
    parser.add_argument(
        "--keep-runs",
        type=int,
        default=0,
        metavar="N",
        help="store each query's top N keys in the JSON",
    )
    parser.add_argument("--force", action="store_true",
                        help="replace output files eval did not write (never the dataset, its "
                        "queries, labels or runs, a folder or a device)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress display (its steps go to stderr: redrawn on a terminal, "
                        "a plain line every few seconds elsewhere)")
    parser.set_defaults(func=run_eval)


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise InputError(f"{flag}: expected comma-separated integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise InputError(f"{flag}: cut-offs must be positive integers, got {text!r}")
    return values


def run_eval(args: argparse.Namespace) -> int:
    from .._app import eval_judge, parse_systems, run_evaluation
    from .._eval import EvalSettings, MetricSpec
    from .._eval._outputs import EvalOutputs
    from .._eval._report import write_report
    from .._eval._runner import write_runs
    from .._eval._runs import parse_run_spec, read_run
    from .._eval._sources import open_dataset

    systems = [] if args.systems.strip() == "none" else parse_systems(args.systems)
    specs = [parse_run_spec(spec) for spec in args.runs]
    if not systems and not specs:
        raise InputError("--systems none needs at least one --run NAME=FILE")
    outputs = EvalOutputs.of(args.dataset, [args.queries, args.qrels, *(p for _, p in specs)],
                             json_out=args.json_out, runs_dir=args.save_runs,
                             report_dir=args.report, systems=systems, force=args.force)
    outputs.check()  # before anything runs: a refused output costs nothing
    options, model_options = judge_options(args), generator_options(args)
    external = [read_run(path, name, args.tie_break) for name, path in specs]
    ks = _ints(args.ks, "--ks")
    recall_ks = _ints(args.recall_ks, "--recall-ks") if args.recall_ks else ks
    dataset = open_dataset(
        args.dataset,
        queries=args.queries,
        qrels=args.qrels,
        split=args.split,
        passages=args.passages,
        cache_dir=args.cache_dir,
    ).limit(args.limit)
    for warning in dataset.warnings:
        print(f"decisionrag: warning: {warning}", file=sys.stderr)
    settings = EvalSettings(
        systems=systems,
        preset=args.preset,
        spec=MetricSpec(ks, recall_ks),
        dedup_text=args.dedup_text,
        dedup_lowercase=args.dedup_lowercase,
        price_per_million=args.price,
        tree_cache=args.cache_dir,
        embed_model=args.embed_model,
        keep_runs=args.keep_runs,
        dense_search=args.dense_search,
        progress=not args.no_progress,
    )
    judge = eval_judge(args.judge, systems, options)
    answers = _answer_client(args, model_options)
    evaluation = run_evaluation(dataset, settings, judge, answers=answers, external=external)
    report = evaluation.report
    if judge is not None:
        report["settings"]["judge"] = args.judge
    for warning in report["warnings"]:
        print(f"decisionrag: warning: {warning}", file=sys.stderr)
    if args.json_out:
        outputs.write_json(report)
    if args.save_runs:
        for path in write_runs(evaluation.runs, args.save_runs, **outputs.run_rule()):
            print(f"decisionrag: wrote {path}", file=sys.stderr)
    if args.report:
        rules = {name: outputs.report_rule(name) for name in ("index.html", "report.md")}
        for path in write_report(report, args.report, rules=rules):
            print(f"decisionrag: wrote {path}", file=sys.stderr)
    print(format_report(report))
    return 0


def _answer_client(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    from .._answer._generator import generator_model
    from .._app import answer_client

    if args.answer_model:
        return answer_client(args.answer_model, args.base_url, options)
    if args.answers or args.generator:
        return answer_client(generator_model(args.generator), args.base_url, options)
    return None


# -- the table ------------------------------------------------------------------------------

_COST_COLUMNS = (
    ("latency_p50", "p50 s"),
    ("latency_p90", "p90 s"),
    ("tokens_per_query", "tokens/q"),
    ("cents_per_query", "¢/q"),
)


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table, one column per system and one row per metric; metric cells read
    ``value (difference to the first system [95% interval])``."""
    systems: dict[str, dict[str, float]] = report["systems"]
    if not systems:
        return "no systems"
    metrics = [m for m in next(iter(systems.values())) if "@" in m or m.endswith(("exact_match", "token_f1"))]
    rows = [["", *systems]]
    rows.extend([metric, *(_metric_cell(report, name, metric) for name in systems)] for metric in metrics)
    rows.extend(
        [label, *(_cost_cell(systems[name], key) for name in systems)] for key, label in _COST_COLUMNS
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    title = (
        f"{report['dataset']}: {report['n_queries']} queries; metrics in %, "
        f"(difference to {report.get('baseline')} [95% interval])"
    )
    return "\n".join([title, *lines, *_runs_in_lines(report)])


def _runs_in_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for name, info in report.get("runs_in", {}).items():
        lines.append(
            f"run {name}: {info['queries_in_run']} queries in {Path(info['file']).name}; "
            f"{info['missing_queries']} of {info['queries_scored']} missing (scored as empty), "
            f"{info['extra_queries']} not in the dataset, {info['unknown_ids']} of "
            f"{info['retrieved']} ids unknown; cut to {info['cut_to']}"
        )
    return lines


def _metric_cell(report: dict[str, Any], system: str, metric: str) -> str:
    cell = _pct(report["systems"][system].get(metric))
    interval = report.get("intervals", {}).get(system, {}).get(metric)
    if interval:
        cell += f" ({_signed(interval[0])} [{_signed(interval[1])}, {_signed(interval[2])}])"
    return cell


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _signed(value: float) -> str:
    return f"{100 * value:+.1f}"


def _cost_cell(values: dict[str, Any], key: str) -> str:
    """A cost column's cell; token counts that were estimated get a leading "~"."""
    cell = _plain(values.get(key), key)
    return f"~{cell}" if key == "tokens_per_query" and values.get("tokens_estimated") else cell


def _plain(value: float | None, key: str) -> str:
    if value is None:
        return "–"
    if key.startswith("latency"):
        return f"{value:.3f}"
    if key.startswith("cents"):
        return f"{value:.3f}"
    return f"{value:.0f}"
