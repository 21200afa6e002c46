"""What a judge reads survives every wrapper: declared once (`Judge.reads`), forwarded by
construction (`JudgeWrapper`), so a server's gate or a judgment cache cannot drop the stored
vectors and word statistics a walk attaches for the judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import require_module
from decisionrag import JudgeWrapper, Limits, Reads, VectorSpace
from decisionrag._judges import ScriptedJudge
from decisionrag._judges._cache import CachedJudge
from decisionrag._serve._gate import GatedJudge, JudgeGate


class Reader(ScriptedJudge):
    """A judge that declares it reads vectors and statistics."""

    def __init__(self) -> None:
        super().__init__(limits=Limits(max_questions=7, max_tokens=900), name="reader")
        self.reads = Reads(context=False, vectors=VectorSpace("m", "float32"), statistics=True)
        self.price_per_million_input = 0.5


def wrappers(inner: Reader, tmp_path: Path) -> list[JudgeWrapper]:
    require_module("prometheus_client")
    from decisionrag._serve._metrics import Metrics

    metrics = Metrics()
    gated = GatedJudge(inner, JudgeGate(2, 2, metrics), metrics)
    return [gated, CachedJudge(inner, tmp_path / "cache"),
            CachedJudge(gated, tmp_path / "cache2"), JudgeWrapper(inner)]


def test_every_wrapper_forwards_what_the_judge_declares(tmp_path: Path) -> None:
    inner = Reader()
    for wrapper in wrappers(inner, tmp_path):
        assert wrapper.reads is inner.reads
        assert (wrapper.name, wrapper.limits, wrapper.price_per_million_input) == (
            "reader", inner.limits, 0.5)
        assert wrapper.count_tokens("a b c d e f g h") == inner.count_tokens("a b c d e f g h")
        assert wrapper.computes_here is inner.computes_here is True  # a scripted judge's
    inner.computes_here = False  # (as if reached over the network: a walk uses its waits)
    assert not any(wrapper.computes_here for wrapper in wrappers(inner, tmp_path))


def test_a_wrapper_changes_what_it_forwards_only_at_its_inner_judge(tmp_path: Path) -> None:
    inner = Reader()
    wrapper = JudgeWrapper(inner)
    with pytest.raises(AttributeError, match="inner judge"):
        wrapper.reads = Reads()
    with pytest.raises(AttributeError, match="inner judge"):
        wrapper.computes_here = True
    inner.reads = Reads(statistics=True)
    assert wrapper.reads == Reads(statistics=True)  # read through, never copied


def test_a_served_walk_attaches_what_the_gated_judge_reads(xquad_tree: Path) -> None:
    """The server's gate around the embedded judge: its navigator reads the stored vectors
    and statistics, and `auto` adds the flat candidates, as `decisionrag ask` does."""
    require_module("prometheus_client")
    from decisionrag import Navigator, load_judge
    from decisionrag._serve._metrics import Metrics

    metrics = Metrics()
    judge = load_judge("embedded")
    gated = GatedJudge(judge, JudgeGate(4, 4, metrics), metrics)
    plain, served = Navigator(xquad_tree, judge), Navigator(xquad_tree, gated)
    for navigator in (plain, served):
        assert navigator.view.vectors is not None and navigator.view.lexicon is not None
        assert navigator.preset.candidates == "hybrid" and navigator.retriever is not None
    question = "How many points did the Panthers defense surrender?"
    assert [(h.node.key, h.score) for h in served.retrieve(question).hits] == [
        (h.node.key, h.score) for h in plain.retrieve(question).hits]
