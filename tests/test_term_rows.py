"""Passages' term counts stored at build time (`TermRows`): scores read from them are the
floats counting the texts gives, they are stored and published with the lexicon, and a walk
that reads them returns what a walk that counts returns."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decisionrag import _words
from decisionrag._tree._vectors import (
    LEXICON_FILE,
    lexicon_files,
    read_lexicon_terms,
    vectors_folder,
    write_lexicon,
)
from decisionrag._words import CountedText, Lexicon, TermRows

_WORDS = ["renew", "renewing", "passport", "Passports", "abroad", "apply", "fee", "the", "of",
          "2024", "visa", "K\u212aelvin", "İstanbul", "ıs", "Σίσυφος", "日本", "café", "naïve"]
_PUNCTUATION = [" ", " ", ", ", ". ", ":", " > ", "\n", "-", "\u00a0", "!"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_WORDS) + rng.choice(_PUNCTUATION) for _ in range(n)).strip()


def _prefix(rng: random.Random) -> str:
    """What a walk puts before a passage's text: nothing, or its header path and ": "."""
    if rng.random() < 0.2:
        return ""
    return " > ".join(_text(rng, rng.randint(0, 3)) for _ in range(rng.randint(1, 3))) + ": "


@pytest.mark.parametrize("seed", range(12))
def test_scores_from_stored_counts_are_the_floats_counting_gives(seed: int) -> None:
    rng = random.Random(seed)
    own = [_text(rng, rng.randint(0, 30)) for _ in range(60)]
    prefixes = [_prefix(rng) for _ in own]
    texts = [p + t for p, t in zip(prefixes, own, strict=True)]
    lexicon = Lexicon.count(texts)
    rows = [3 * i + 1 for i in range(len(own))]  # rows are node ids: not every id a passage
    lexicon.rows = TermRows.count(list(lexicon.frequencies), 3 * len(own) + 2, rows, own)
    for _ in range(8):
        chosen = rng.sample(range(len(own)), rng.randint(1, len(own)))
        asked = [texts[i] for i in chosen]
        stored = [CountedText(prefixes[i], rows[i]) for i in chosen]
        query = _text(rng, rng.randint(1, 8)) + " unseenword"
        counted = lexicon.scores(query, asked)
        assert lexicon.scores(query, asked, stored=stored) == counted  # the same floats
        weights = lexicon.query_weights(query)
        assert counted == [lexicon.score(weights, t) for t in asked]
    # one text without stored counts: all are counted (the same floats again)
    assert lexicon.scores("passport fee", asked, stored=[*stored[:-1], None]) == \
        lexicon.scores("passport fee", asked)


def test_stored_counts_are_what_term_counts_counts_row_by_row() -> None:
    own = ["Renewing a passport abroad", "", "fee fee FEE 2024", "the of a"]
    lexicon = Lexicon.count(own)
    rows = TermRows.count(list(lexicon.frequencies), 6, [0, 2, 3, 5], own)
    for row, text in zip([0, 2, 3, 5], own, strict=True):
        expected, length = _words.term_counts(text)
        start, stop = rows.offsets[row], rows.offsets[row + 1]
        got = {rows.vocabulary[t]: int(c) for t, c in zip(rows.terms[start:stop],
                                                           rows.counts[start:stop], strict=True)}
        assert got == expected and rows.lengths[row] == length
    assert rows.offsets[2] == rows.offsets[1]  # row 1 holds no passage
    with pytest.raises(ValueError, match="ascending"):
        TermRows.count(list(lexicon.frequencies), 6, [2, 0, 3, 5], own)


def _stored(tmp_path: Path) -> tuple[Path, Lexicon, TermRows, dict[str, Any]]:
    tree = tmp_path / "corpus.tree"
    tree.write_bytes(b"")
    meta = {"written_at": "2026-12-06T00:00:00", "write_id": "a1"}
    own = ["passport fee", "renewing abroad", "fee"]
    lexicon = Lexicon.count(own)
    rows = TermRows.count(list(lexicon.frequencies), 4, [1, 2, 3], own)
    write_lexicon(tree, lexicon.to_json(), meta, rows.arrays())
    return tree, lexicon, rows, meta


def test_term_counts_are_stored_beside_the_lexicon_and_read_back_mapped(tmp_path: Path) -> None:
    tree, lexicon, rows, meta = _stored(tmp_path)
    found = read_lexicon_terms(tree, meta)
    assert found is not None and found[1] is not None
    body, arrays = found
    assert Lexicon.from_json(body) == lexicon
    read = TermRows.stored(list(lexicon.frequencies), arrays)
    assert read is not None
    for name, array in rows.arrays().items():
        assert np.array_equal(arrays[name], array) and arrays[name].dtype == array.dtype
    header = vectors_folder(tree) / LEXICON_FILE
    stamp, files = lexicon_files(header)
    assert stamp is not None and len(files) == 1 and (header.parent / files.pop()).is_file()
    # written again: the new header names a new file and the old one is removed
    write_lexicon(tree, lexicon.to_json(), meta, rows.arrays())
    assert len(list(header.parent.glob("lexicon-*.terms"))) == 1
    assert read_lexicon_terms(tree, {**meta, "write_id": "b2"}) is None  # another tree


def test_term_counts_that_do_not_fit_their_lexicon_are_not_used(tmp_path: Path) -> None:
    tree, lexicon, rows, meta = _stored(tmp_path)
    arrays = rows.arrays()
    assert TermRows.stored(list(lexicon.frequencies)[:1], arrays) is None  # another vocabulary
    assert TermRows.stored(list(lexicon.frequencies), {**arrays, "counts": arrays["counts"][:1]}) is None
    assert TermRows.stored(list(lexicon.frequencies), {"offsets": arrays["offsets"]}) is None
    shuffled = arrays["offsets"].copy()
    shuffled[[1, 2]] = shuffled[[2, 1]]  # rows whose spans run backwards
    assert TermRows.stored(list(lexicon.frequencies), {**arrays, "offsets": shuffled}) is None
    header = vectors_folder(tree) / LEXICON_FILE
    named = json.loads(header.read_text().partition("\n")[0])["terms"]["file"]
    (header.parent / named).unlink()
    found = read_lexicon_terms(tree, meta)
    assert found is not None and found[1] is None  # the lexicon still reads, counts do not
    write_lexicon(tree, lexicon.to_json(), meta)  # a lexicon stored without counts
    found = read_lexicon_terms(tree, meta)
    assert found is not None and found[1] is None


def test_a_walk_reading_stored_counts_returns_what_counting_returns(
        xquad_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decisionrag import Navigator
    from decisionrag._judges import load_judge
    from decisionrag._navigate import _navigator
    from decisionrag._tree import Tree

    queries = ["How many Super Bowls have the Broncos won?", "Who designed the Warsaw palace?",
               "What is the largest city in Poland?"]
    tree = Tree.open(xquad_tree)
    lexicon = _navigator.stored_lexicon(tree)
    assert lexicon is not None and lexicon.rows is not None  # the default build stores them
    read: list[int] = []
    stored_scores = Lexicon._stored_scores

    def recorded(self: Lexicon, weights: Any, total: float, stored: Any) -> Any:
        read.append(len(stored))
        return stored_scores(self, weights, total, stored)

    monkeypatch.setattr(Lexicon, "_stored_scores", recorded)
    stored = [Navigator(tree, load_judge("embedded")).retrieve(q, k=10) for q in queries]
    assert sum(read) >= 10  # passages went by their stored counts
    monkeypatch.setattr(_navigator.TermRows, "stored", classmethod(lambda cls, *a: None))
    counted = [Navigator(Tree.open(xquad_tree), load_judge("embedded")).retrieve(q, k=10)
               for q in queries]
    for a, b in zip(stored, counted, strict=True):
        assert [h.node.key for h in a.hits] == [h.node.key for h in b.hits]
        assert [h.score for h in a.hits] == [h.score for h in b.hits]
