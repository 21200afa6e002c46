"""Recovery from pruning: an unsure page stage reopens the best pruned branches, best first."""

from __future__ import annotations

from pathlib import Path

from _navigate_helpers import asked, pets_tree, preset
from decisionrag._judges import ScriptedJudge
from decisionrag._navigate import Navigator, RecoverySettings

# Cats wins the group stage, but none of its pages is convincing; Dogs was the runner-up.
SCORES = {
    "g:Cats": 0.9, "g:Dogs": 0.6, "g:Fish": 0.1,
    "c1": 0.3, "c2": 0.2,
    "d1": 0.1, "d2": 0.8, "f1": 0.9,
    "d2-p0": 0.9,
}


def test_recovery_reopens_exactly_the_best_pruned_group(tmp_path: Path) -> None:
    judge = ScriptedJudge(SCORES, default=0.05)
    recovery = RecoverySettings(below=0.5, pages=1, groups=1, pages_per_group=1)
    with pets_tree(tmp_path / "pets.tree") as tree:
        result = Navigator(tree, judge, preset(recovery=recovery)).retrieve("dog food", k=3)
    stages = {stage.name: stage for stage in result.trace.stages}
    assert stages["recovery"].candidates == ["g:Dogs"]  # not Fish: it scored lower
    assert stages["recovery"].kept == [("d2", 0.8)]
    assert asked(judge)[2] == ["d1", "d2"]  # the reopened group's pages, in one request
    assert result.hits[0].node.key == "d2-p0"
    assert stages["page"].scores == {"c1": 0.3, "c2": 0.2}  # the reopened page is not added


def test_a_sure_page_stage_reopens_nothing(tmp_path: Path) -> None:
    judge = ScriptedJudge({**SCORES, "c1": 0.95}, default=0.05)
    with pets_tree(tmp_path / "pets.tree") as tree:
        result = Navigator(tree, judge, preset(recovery=RecoverySettings(below=0.5, flat=0.0))
                           ).retrieve("cat food", k=3)
    assert "recovery" not in [stage.name for stage in result.trace.stages]
    assert all("d" not in ids[0] for ids in asked(judge)[1:])


def test_a_pruned_page_scoring_above_every_pruned_group_rejoins_first(tmp_path: Path) -> None:
    judge = ScriptedJudge({**SCORES, "c1": 0.45, "c2": 0.4}, default=0.05)
    recovery = RecoverySettings(below=0.5, flat=0.0, pages=1, groups=1)
    with pets_tree(tmp_path / "pets.tree") as tree:
        # Cats kept, pages keep 1: c1 kept, c2 (0.4) pruned; Dogs (0.6) outranks c2
        result = Navigator(tree, judge, preset(recovery=recovery)).retrieve("x", k=3)
    stage = next(s for s in result.trace.stages if s.name == "recovery")
    assert stage.candidates == ["g:Dogs"] and stage.kept == [("d2", 0.8)]
    judge = ScriptedJudge({**SCORES, "g:Dogs": 0.3, "c1": 0.45, "c2": 0.4}, default=0.05)
    with pets_tree(tmp_path / "pets2.tree") as tree:
        result = Navigator(tree, judge, preset(recovery=recovery)).retrieve("x", k=3)
    stage = next(s for s in result.trace.stages if s.name == "recovery")
    assert stage.candidates == ["c2"] and stage.kept == [("c2", 0.4)]
    assert len(asked(judge)) == 3  # groups, pages, passages: no group was reopened


def test_a_reopened_page_propagates_its_own_score_and_stays_out_of_the_page_stage(
        tmp_path: Path) -> None:
    """With propagation, a passage of a page recovery reopened is weighed by that page's own
    score, as the judged pages' passages by theirs; the page stage's trace keeps only the
    pages it judged (the walk's page scores are made when propagation first asks)."""
    from decisionrag._navigate import StageSettings

    judge = ScriptedJudge(SCORES, default=0.05)
    recovery = RecoverySettings(below=0.5, pages=1, groups=1, pages_per_group=1)
    pages = StageSettings(top_k=2, propagate=True)
    with pets_tree(tmp_path / "pets.tree") as tree:
        result = Navigator(tree, judge, preset(recovery=recovery, documents=pages)
                           ).retrieve("dog food", k=3)
    stages = {stage.name: stage for stage in result.trace.stages}
    assert stages["recovery"].kept == [("d2", 0.8)]
    top = result.hits[0]
    assert top.node.key == "d2-p0" and top.score == 0.9 * 0.8  # its page's own score
    assert stages["page"].scores == {"c1": 0.3, "c2": 0.2}
