"""Page-level retrieval on real PDF manuals: Hit@1/Hit@3 of decisionrag, bm25, dense and hybrid.

    python benchmarks/pdf_questions.py                  # the R manuals of Debian's r-doc-pdf
    python benchmarks/pdf_questions.py --systems bm25 --limit 10
    python benchmarks/pdf_questions.py --count-only     # only the junk-passage counts

The questions (``benchmarks/pdf_questions/r_manuals.jsonl``) were written by reading the
manuals' pages, each with the file, the physical page(s) that answer it (1-based, as in a
hit's ``page`` metadata) and a short quote from those pages (``evidence``), which this script
checks against the PDF's own text before anything else, so a gold page cannot drift.

The script builds one tree of the manuals with the builder on ``PYTHONPATH`` (run it once with
``PYTHONPATH=src`` and once against another checkout to compare builders), turns the page gold
into passage labels — every passage of the gold file whose ``page``/``pages`` include a gold
page — and scores the systems with ``decisionrag eval TREE --queries --qrels`` (its Hit@k over
passages is then Hit@k over pages). It also counts the passages that are navigation furniture
(see ``pdf_audit.py``): running heads, page numbers, table-of-contents and index entries.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pdf_audit import audit_tree, page_texts

HERE = Path(__file__).resolve().parent
MANUALS = Path("/usr/share/R/doc/manual")  # Debian's r-doc-pdf
FILES = ("R-FAQ.pdf", "R-admin.pdf", "R-data.pdf", "R-exts.pdf", "R-intro.pdf", "R-ints.pdf",
         "R-lang.pdf")
QUESTIONS = HERE / "pdf_questions" / "r_manuals.jsonl"


def read_questions(path: Path) -> list[dict[str, Any]]:
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    for number, question in enumerate(questions, 1):
        missing = {"id", "text", "doc", "pages", "evidence"} - set(question)
        if missing:
            raise SystemExit(f"{path}:{number}: missing {', '.join(sorted(missing))}")
    return questions


def _flat(text: str) -> str:
    return " ".join(text.replace("-\n", "").split())


def check_evidence(questions: list[dict[str, Any]], folder: Path) -> None:
    """Every question's quote is on one of its gold pages (pypdf's plain page text)."""
    texts: dict[str, list[str]] = {}
    wrong = []
    for question in questions:
        pages = texts.setdefault(question["doc"], page_texts(folder / question["doc"]))
        quote = _flat(question["evidence"])
        if not any(quote in _flat(pages[page - 1]) for page in question["pages"]):
            wrong.append(f"{question['id']}: {question['evidence']!r} not on "
                         f"{question['doc']} pages {question['pages']}")
    if wrong:
        raise SystemExit("evidence check failed:\n" + "\n".join(wrong))


def page_labels(tree_file: Path, questions: list[dict[str, Any]]) -> dict[str, list[str]]:
    """query id → the keys of the passages on its gold pages."""
    from decisionrag._tree import Tree

    wanted: dict[tuple[str, int], list[str]] = {}
    for question in questions:
        for page in question["pages"]:
            wanted.setdefault((question["doc"], page), []).append(question["id"])
    labels: dict[str, list[str]] = {q["id"]: [] for q in questions}
    with Tree.open(tree_file) as tree:
        for doc in tree.documents():
            for node in tree.passages_of(doc):
                meta = node.meta or {}
                for page in meta.get("pages") or [meta.get("page")]:
                    for query in wanted.get((doc.key, page), ()):
                        if node.key not in labels[query]:
                            labels[query].append(node.key)
    return labels


def run_eval(tree_file: Path, questions: list[dict[str, Any]], labels: dict[str, list[str]],
             systems: str, work: Path, limit: int | None) -> dict[str, Any]:
    queries, qrels, report = work / "queries.jsonl", work / "qrels.tsv", work / "eval.json"
    queries.write_text("".join(json.dumps({"id": q["id"], "text": q["text"]}) + "\n"
                               for q in questions), encoding="utf-8")
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{query}\t{key}\t1\n" for query, keys in labels.items() for key in keys), encoding="utf-8")
    command = [sys.executable, "-m", "decisionrag", "eval", str(tree_file), "--queries",
               str(queries), "--qrels", str(qrels), "--systems", systems, "--ks", "1,3",
               "--json", str(report), "--no-progress"]
    if limit:
        command += ["--limit", str(limit)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manuals", type=Path, default=MANUALS)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--systems", default="decisionrag,bm25,dense,hybrid")
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--keep", type=Path, help="keep the tree and the eval JSON in this folder")
    parser.add_argument("--count-only", action="store_true", help="only count junk passages")
    parser.add_argument("--tree", type=Path, help="score this tree, built before from the "
                        "manuals (with vectors), instead of building one")
    args = parser.parse_args()
    files = [args.manuals / name for name in FILES]
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        raise SystemExit(f"missing {', '.join(absent)} (apt-get install r-doc-pdf)")
    questions = read_questions(args.questions)
    check_evidence(questions, args.manuals)
    import decisionrag

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        tree_file = args.tree or work / "manuals.tree"
        if args.tree is None:
            tree_file.unlink(missing_ok=True)
            started = time.perf_counter()
            decisionrag.build_tree(files, tree_file, vectors=not args.count_only)
            print(f"built {tree_file.name} from {len(files)} files in "
                  f"{time.perf_counter() - started:.1f} s"
                  + ("" if args.count_only else " (with vectors)"))
        counts = audit_tree(tree_file, args.manuals)
        print("| file | passages | running heads | page numbers | contents/index entries |")
        print("|---|---|---|---|---|")
        for name, row in counts.items():
            print(f"| {name} | {row['passages']:,} | {row['running_head']} | {row['page_number']} "
                  f"| {row['index_or_contents']} |")
        if args.count_only:
            return
        labels = page_labels(tree_file, questions)
        unlabelled = [query for query, keys in labels.items() if not keys]
        if unlabelled:
            print(f"warning: no passage on the gold pages of {', '.join(unlabelled)}",
                  file=sys.stderr)
        started = time.perf_counter()
        report = run_eval(tree_file, questions, labels, args.systems, work, args.limit)
        print(f"decisionrag from {Path(decisionrag.__file__).parent.parent}")
        print(f"\n{report.get('n_queries', len(questions))} questions, eval in "
              f"{time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f}")
        print_table(report)


def print_table(report: dict[str, Any]) -> None:
    prefix, counted = report["prefix"], report["metric_queries"]["hit@1"]
    print("| system | Hit@1 | Hit@3 | MRR@10 | questions | p50 s |")
    print("|---|---|---|---|---|---|")
    for name, metrics in report["systems"].items():
        print(f"| {name} | {metrics[f'{prefix}_hit@1']:.3f} | {metrics[f'{prefix}_hit@3']:.3f} "
              f"| {metrics[f'{prefix}_mrr@10']:.3f} | {counted} | {metrics['latency_p50']:.2f} |")


if __name__ == "__main__":
    main()
