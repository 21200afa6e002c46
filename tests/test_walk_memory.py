"""What a walk holds and where the embedded judge computes (docs/benchmarks.md, "Vectors at
NQ scale"): cached entries hold handles to stored rows, not copies; a level's requests
encode their query once; requests run on the judge's own thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from decisionrag import Tree
from decisionrag._build._vectors import embed_tree
from decisionrag._errors import JudgeConfigError
from decisionrag._judges._base import BinaryRequest, Candidate
from decisionrag._judges._embedded import EmbeddedJudge, EmbeddedOptions
from decisionrag._judges._registry import load_judge
from decisionrag._navigate import Navigator
from decisionrag._navigate._render import clean, clean_line
from decisionrag._tree._vectors import StoredRows, open_vectors
from test_vectors import HashEncoder, _tree


class SlowEncoder(HashEncoder):
    """Takes its time, so that concurrent requests overlap; notes the threads it runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def encode(self, texts: Sequence[str], **options: object) -> np.ndarray:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.05)
        return super().encode(texts, **options)


def _request(query: str) -> BinaryRequest:
    candidates = (Candidate("a", "renew a passport"), Candidate("b", "fishing licence"))
    return BinaryRequest("context", ("a?", "b?"), query, candidates)


async def _all(judge: EmbeddedJudge, queries: Sequence[str]) -> list[list[float]]:
    results = await asyncio.gather(*(judge.binary(_request(q)) for q in queries))
    return [r.probabilities for r in results]


def test_cached_entries_hold_handles_to_stored_rows(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, EmbeddedJudge(HashEncoder()), preset="flat")
        page = tree.node("passports")
        entry = navigator.view.entry("document", page, "title")
        stored = open_vectors(tree)
        assert isinstance(entry.vectors, StoredRows)
        assert len(entry.vectors) == page.end + 1 - page.id == entry.vectors.shape[0]
        assert np.array_equal(np.asarray(entry.vectors), stored.rows(page.id, page.end + 1))
        assert np.array_equal(np.asarray(entry.vectors, np.float32),
                              stored.rows(page.id, page.end + 1).astype(np.float32))
        assert np.array_equal(entry.vectors[:1], stored.rows(page.id, page.id + 1))
        assert np.array_equal(entry.vectors[1:], stored.rows(page.id + 1, page.end + 1))
        assert len(entry.vectors[5:2]) == 0
        assert navigator.retrieve("renew passport abroad", k=2).hits[0].node.key == "pa"


def test_concurrent_requests_encode_their_shared_query_once() -> None:
    encoder = SlowEncoder()
    judge = EmbeddedJudge(encoder, workers=4)
    answers = asyncio.run(_all(judge, ["renew passport abroad"] * 6))
    assert encoder.texts.count("renew passport abroad") == 1
    assert sorted(encoder.texts) == ["fishing licence", "renew a passport", "renew passport abroad"]
    assert all(a == answers[0] for a in answers)


def test_requests_run_on_the_judges_own_thread() -> None:
    encoder = SlowEncoder()
    judge = EmbeddedJudge(encoder)
    asyncio.run(_all(judge, [f"query number {i}" for i in range(5)]))
    assert len(encoder.threads) == 1
    (name,) = encoder.threads
    assert name.startswith(judge.name) and name != threading.main_thread().name
    assert EmbeddedOptions().workers == 1


def test_the_workers_option_is_checked() -> None:
    with pytest.raises(JudgeConfigError, match="workers=0"):
        load_judge("embedded", workers=0)


def test_a_cached_entry_holds_one_copy_of_equal_strings(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    with Tree.open(tree_path) as tree:
        page = tree.node("passports")  # no headings: its description is its title
        assert page.description == page.title and page.description is page.title
        navigator = Navigator(tree, EmbeddedJudge(HashEncoder()), preset="flat")
        entry = navigator.view.entry("document", page, "title")
        assert entry.line is entry.text
    messy = "Renew  your\tpassport [online]"
    assert clean_line(messy) == clean(messy) == "Renew your passport [online]"


def test_ascii_lines_are_cleaned_as_the_full_table_cleans_them() -> None:
    """ASCII text skips the per-character table where it holds no control character that
    `str.split` keeps: the line is the same as through the table (random ASCII, markers,
    brackets and every control character among them)."""
    import random

    from decisionrag._navigate import _clean

    def through_the_table(text: str) -> str:
        line = _clean._defused(" ".join(text.translate(_clean._NORMALISE).split()))
        return text if line == text else line

    rng = random.Random(5)
    alphabet = [chr(i) for i in range(128)] + list("[] :'") * 20 + list("end of pages user's question ")
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert clean_line(text) == through_the_table(text), repr(text)


def _groups_tree(path: Path, groups: int, pages: int) -> Path:
    from decisionrag import DocumentSpec, PassageSpec, TreeWriter

    with TreeWriter(path) as writer:
        for g in range(groups):
            group = writer.add_group(f"Group {g}", key=f"g{g}")
            for p in range(pages):
                writer.add_document(DocumentSpec(f"Page {g}-{p}", [PassageSpec(f"text {g} {p}")],
                                                 key=f"p{g}-{p}"), parent=group)
    return path


def test_the_views_caches_stay_within_their_budget_and_keep_what_was_used_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most `cache_nodes` children and as many page entries, and at most CONTENT_ENTRIES
    passage entries: entries live in two generations, so pages shown in the last rounds come
    back as the same objects (not rebuilt) while the oldest are dropped; passages do not
    push pages out; DECISIONRAG_CACHE_NODES sets the budget, and a bad value is named."""
    from decisionrag._errors import InputError
    from decisionrag._navigate import _view
    from decisionrag._navigate._view import TreeView, default_cache_nodes

    monkeypatch.setattr(_view, "CONTENT_ENTRIES", 16)

    path = _groups_tree(tmp_path / "g.tree", groups=12, pages=10)
    with Tree.open(path) as tree:
        view = TreeView(tree, len, cache_nodes=40)
        groups = view.split_children(tree.root.id).groups
        shown = {}
        for round_ in range(3):
            for group in groups:
                pages = view.split_children(group.id).documents
                entries = view.entries("document", pages, "title")
                assert view._children_held <= 40 + 10 + 12  # the root's children stay too
                assert len(view._outline_entries) <= 40 + 2 * 10  # + a lookup each
                passages = [p for page in pages for p in tree.passages_of(page)]
                view.entries("passage", passages, "text")
                assert len(view._content_entries) <= 16 + 2 * 10
                if round_ == 0:
                    shown[group.key] = entries
        last = groups[-1]
        again = view.entries("document", view.split_children(last.id).documents, "title")
        # rebuilt since round 0, then kept because just used
        assert all(a is b for a, b in zip(again, shown[last.key], strict=True)) is False
        for group in groups[:5]:  # passages shown meanwhile: their own cache turns over
            pages = view.split_children(group.id).documents
            view.entries("passage", [p for page in pages for p in tree.passages_of(page)], "text")
        fresh = view.entries("document", view.split_children(last.id).documents, "title")
        assert all(a is b for a, b in zip(again, fresh, strict=True))
        assert [e.key for e in fresh] == [f"{last.key.replace('g', 'p')}-{p}" for p in range(10)]
    monkeypatch.setenv("DECISIONRAG_CACHE_NODES", "12_000")
    assert default_cache_nodes() == 12_000
    monkeypatch.setenv("DECISIONRAG_CACHE_NODES", "lots")
    with pytest.raises(InputError, match="DECISIONRAG_CACHE_NODES='lots'"):
        default_cache_nodes()


@pytest.mark.parametrize("filters", [None, {"missing": "x"}])
def test_a_finished_walk_leaves_no_cycles_behind(tmp_path: Path, filters: dict[str, str] | None) -> None:
    """A walk is freed when its result is: nothing of it waits for a full garbage collection
    (a walk in a reference cycle kept its traces, 16,000 scores a level at NQ size, until
    one: 150 MB after 109 walks; docs/benchmarks.md, issue 30)."""
    import gc

    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, EmbeddedJudge(HashEncoder()), preset="auto")
        assert navigator.preset.recovery is not None  # the walk holds a recovery step
        navigator.retrieve("renew a passport", k=2, filters=filters)  # caches filled
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            navigator.retrieve("renew a passport", k=2, filters=filters)
            gc.collect()
            ours = [type(o).__qualname__ for o in gc.garbage
                    if type(o).__module__.startswith("decisionrag")]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert ours == []


def test_a_cached_level_looked_up_again_keeps_its_generation(tmp_path: Path) -> None:
    """A level whose entries are all cached is read from the young generation as it is: the
    lookup's size does not turn the generations over (which sent every later lookup of an
    NQ page level, 16,293 pages, through the old one)."""
    from decisionrag._navigate._view import TreeView

    path = _groups_tree(tmp_path / "g.tree", groups=1, pages=15)
    with Tree.open(path) as tree:
        view = TreeView(tree, len, cache_nodes=40)  # generations of 20: one level fits
        group = view.split_children(tree.root.id).groups[0]
        pages = view.split_children(group.id).documents
        first = view.entries("document", pages, "title")
        again = view.entries("document", pages, "title")
        assert all(a is b for a, b in zip(first, again, strict=True))
        assert view._outline_entries.old == {} and view._outline_entries.held == 15
