"""A walk that survives a failing judge, and long pages without headings (issue #16)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from decisionrag._app import degraded_warning, format_trace
from decisionrag._build import build_tree
from decisionrag._cli import main
from decisionrag._errors import JudgeUnavailable
from decisionrag._judges import ScriptedJudge, load_judge
from decisionrag._judges._faults import POISON, FaultServer
from decisionrag._navigate import Navigator, get_preset
from decisionrag._tree import NodeKind, Tree

FAST_RETRIES = {"max_attempts": 2, "backoff_initial": 0.01, "max_questions": 2}


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture(scope="module")
def tree_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    topics = ("passports", f"taxes {POISON}", "visas", "pensions")
    for i, topic in enumerate(topics):
        (folder / f"{i}.md").write_text(f"# {topic}\n\nHow to renew {topic}.\n\n"
                                        f"Fees for {topic} number {i}.\n")
    return build_tree([folder], folder / "docs.tree").path


def test_one_failing_request_of_a_level_degrades_the_walk(faults: FaultServer, tree_path: Path) -> None:
    judge = load_judge(faults.judge_id("one-fails"), **FAST_RETRIES)
    with Tree.open(tree_path) as tree:
        result = Navigator(tree, judge, "flat").retrieve("how do I renew?", k=4)
    assert result.degraded == {"page": 2}  # 4 pages in 2 requests: the poisoned one failed
    assert result.hits  # the walk went on with what was judged
    page = result.trace.stage("page")
    assert "this request always fails" in page.errors[0]
    assert result.to_dict()["degraded"] == {"page": 2}
    assert POISON not in " ".join(result.trace.stage("page").opened)


def test_fail_mode_names_the_stage(faults: FaultServer, tree_path: Path) -> None:
    judge = load_judge(faults.judge_id("one-fails"), **FAST_RETRIES)
    with Tree.open(tree_path) as tree:
        preset = get_preset("flat").with_overrides(on_failure="fail")
        with pytest.raises(JudgeUnavailable, match=r"^the page stage: a request of 2 failed: .*"
                                                   r"always fails"):
            Navigator(tree, judge, preset).retrieve("how do I renew?")


def test_a_stage_whose_every_request_failed_is_an_error(faults: FaultServer, tree_path: Path) -> None:
    judge = load_judge(faults.judge_id("storm-503"), max_attempts=1)
    with Tree.open(tree_path) as tree, pytest.raises(JudgeUnavailable, match=r"^the page stage: all 1"):
        Navigator(tree, judge, "flat").retrieve("renew?")


def test_a_failing_choice_keeps_the_binary_order(faults: FaultServer, tree_path: Path) -> None:
    class ChoiceFails(ScriptedJudge):
        async def choice(self, request):  # type: ignore[no-untyped-def]
            raise JudgeUnavailable("judge: gave up after 2 attempt(s): HTTP 503")

    with Tree.open(tree_path) as tree:
        result = Navigator(tree, ChoiceFails({}), "flat").retrieve("renew?", k=3)
    assert set(result.degraded) == {"choice"}
    assert all(hit.choice is None for hit in result.hits)


def test_ask_names_the_stage_when_nothing_could_be_judged(
    faults: FaultServer, tree_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = faults.judge_id("one-fails")  # one page request (64 questions fit): it fails
    assert main(["ask", str(tree_path), "renew?", "--judge", judge, "--preset", "flat",
                 "--deadline", "20"]) == 2
    err = capsys.readouterr().err
    assert "error: the page stage: all 1 request(s) failed" in err and "Traceback" not in err


def test_the_degraded_warning_line(faults: FaultServer, tree_path: Path) -> None:
    judge = load_judge(faults.judge_id("one-fails"), **FAST_RETRIES)
    with Tree.open(tree_path) as tree:
        result = Navigator(tree, judge, "flat").retrieve("how do I renew?", k=4)
    warning = degraded_warning(result)
    assert warning is not None and warning.startswith("degraded result (page stage: 2 candidates")
    assert "DEGRADED: 2 candidates not judged" in format_trace(result)


def _long_page(path: Path, n: int) -> Path:
    path.write_text("\n\n".join(f"Paragraph number {i} about subject {i}." for i in range(n)) + "\n")
    return path


def test_a_long_page_without_headings_is_split_into_parts(tmp_path: Path) -> None:
    report = build_tree([_long_page(tmp_path / "long.txt", 1000)], tmp_path / "long.tree")
    assert report.split == 1 and "split into parts of 7 passages" in report.summary()
    with Tree.open(report.path) as tree:
        page = tree.children(tree.root.id)[0]
        sections = [n for n in tree.subtree(page.id) if n.kind == NodeKind.SECTION]
        assert len(sections) == 143
        assert sections[-1].title.startswith("Part 143 (passages 995–1000): Paragraph number 994")
        wanted = next(n for n in tree.subtree(page.id)
                      if n.kind == NodeKind.PASSAGE and "number 987 " in n.text)
        assert wanted.parent is not None
        judge = ScriptedJudge({wanted.key: 0.99, tree.node(wanted.parent).key: 0.99})
        result = Navigator(tree, judge, "mtrag").retrieve("subject 987", k=3)
    assert result.hits[0].node.key == wanted.key  # beyond the first 60 passages


def test_an_old_tree_with_a_headingless_long_page_says_it_was_capped(tmp_path: Path) -> None:
    from decisionrag._tree import DocumentSpec, PassageSpec, TreeWriter

    with TreeWriter(tmp_path / "old.tree") as writer:  # as builds before the split wrote it
        writer.add_document(DocumentSpec("Long", [PassageSpec(f"p {i}") for i in range(200)]))
    with Tree.open(tmp_path / "old.tree") as tree:
        result = Navigator(tree, ScriptedJudge({}), "mtrag").retrieve("anything", k=3)
    notes = [note for stage in result.trace.stages for note in stage.notes]
    assert any("200 passages without headings; only the first 60 were judged" in n for n in notes)
