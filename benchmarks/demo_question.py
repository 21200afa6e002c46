"""Why the embedded judge misses the demo's first question (docs/embedded-judge.md, "Known
limits"), and what building the demo's vectors costs with each encoder.

    python benchmarks/demo_question.py [--out out/demo] [--encoders]

Walks the demo tree (built by `python -m decisionrag.demo` if absent) with the question
"How do I catch several exceptions in one except clause?", prints where the answering passage
(`try.txt#p4`) ranked in the passage stage, and the cosines of the question (and rephrasings)
with it and with the `except*` passages that won. `--encoders` also times encoding every
passage of the tree with the numpy encoder and with sentence-transformers (float32), and
compares their vectors.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from decisionrag._app import ask
from decisionrag._bert import NumpyEncoder
from decisionrag._build._vectors import _layout
from decisionrag._embed import DEFAULT_MODEL, default_model_path
from decisionrag._tree import Tree
from decisionrag._tree._vectors import passage_text
from decisionrag.demo import ensure_tree

QUESTION = "How do I catch several exceptions in one except clause?"
ANSWER = "try.txt#p4"
WINNERS = ("try.txt#p17", "try.txt#p15", "try.txt#p19")
REPHRASED = (
    "Can an except clause catch a tuple of exception types?",
    "How do I handle more than one exception type in a single except clause?",
)


def walk(tree: Path) -> None:
    result = ask(tree, QUESTION, k=20)
    stage = result.trace.stage("passage")
    ranked = sorted(stage.scores.items(), key=lambda item: -item[1])
    rank = {key: i + 1 for i, (key, _score) in enumerate(ranked)}
    pages = result.trace.stages[0]
    print(f"page stage kept: {', '.join(f'{k} {s:.3f}' for k, s in pages.kept[:3])}")
    print(f"passage stage: {stage.n_candidates} candidates; {ANSWER} ranked "
          f"{rank.get(ANSWER)} with P(yes) {stage.scores.get(ANSWER, float('nan')):.3f}")
    print(f"top hit: {result.hits[0].key}")


def cosines(tree: Path) -> None:
    encoder = NumpyEncoder(default_model_path(), DEFAULT_MODEL)
    keys = (ANSWER, *WINNERS)
    with Tree.open(tree) as opened:
        nodes = [opened.node(key) for key in keys]
        title = opened.node("try.txt").title
    rows = encoder.encode([passage_text(title, n.heading, n.text) for n in nodes])
    sentences = [s for s in nodes[0].text.split(". ") if s]
    sentence_rows = encoder.encode(sentences)
    print("cosine with " + ", ".join(keys))
    for question in (QUESTION, *REPHRASED):
        q = encoder.encode([question])[0]
        best = int(np.argmax(sentence_rows @ q))
        print(f"  {np.round(rows @ q, 3)}  {question}")
        print(f"      best sentence of {ANSWER}: {float(sentence_rows[best] @ q):.3f} "
              f"{sentences[best][:70]!r}")


def encoders(tree: Path) -> None:
    from decisionrag._embed import load_encoder

    with Tree.open(tree) as opened:
        _ids, texts, *_ = _layout(opened)
    numpy_encoder = NumpyEncoder(default_model_path(), DEFAULT_MODEL)
    cpu, wall = time.process_time(), time.perf_counter()
    a = numpy_encoder.encode(texts)
    print(f"numpy: {len(texts)} passages, {time.perf_counter() - wall:.1f} s wall, "
          f"{time.process_time() - cpu:.1f} s CPU")
    started = time.perf_counter()
    torch_encoder = load_encoder(precision="float32")
    print(f"sentence-transformers loaded in {time.perf_counter() - started:.1f} s")
    cpu, wall = time.process_time(), time.perf_counter()
    b = torch_encoder.encode(texts)
    print(f"torch: {len(texts)} passages, {time.perf_counter() - wall:.1f} s wall, "
          f"{time.process_time() - cpu:.1f} s CPU")
    agreement = (a * b).sum(axis=1)
    print(f"cosine numpy vs torch: min {agreement.min():.7f}, mean {agreement.mean():.7f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/demo"))
    parser.add_argument("--encoders", action="store_true")
    args = parser.parse_args()
    tree = ensure_tree(args.out)
    walk(tree)
    cosines(tree)
    if args.encoders:
        encoders(tree)


if __name__ == "__main__":
    main()
