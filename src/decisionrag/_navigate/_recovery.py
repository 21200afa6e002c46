"""Recovery from pruning: the frontier of judged-and-pruned branches, reopened when unsure.

Every group and page level adds its best pruned candidates to the frontier. When the page
stage is unsure (`RecoverySettings.unsure`: its best kept page is weak, or the kept pages
are hard to tell apart), the frontier is reopened best first: a pruned page rejoins the
kept pages; a pruned group has its pages judged in one request and its best join.
"""

from __future__ import annotations

from collections.abc import Callable

from .._tree import Node, NodeKind
from ._config import POOLED, RecoverySettings, Rendering
from ._level import LevelEngine
from ._ranking import Ranking, Scored, close_stage
from ._result import Stage, StageTrace
from ._view import TreeView

Admit = Callable[[list[Node], str], list[Node]]  # the walk's filter step, counted per stage


class Recovery:
    """The frontier of one walk, and reopening it (`settings` None: no recovery)."""

    def __init__(self, settings: RecoverySettings | None, levels: LevelEngine, view: TreeView,
                 admit: Admit, render: Rendering) -> None:
        self.settings = settings
        self.levels = levels
        self.view = view
        self.admit = admit
        self.render = render  # how pages of a reopened group are shown (the page stage's way)
        self.frontier: list[Scored] = []

    def remember_pruned(self, ranking: Ranking, kept: set[str]) -> None:
        """Add a level's best pruned candidates to the frontier recovery may reopen."""
        settings = self.settings
        if settings is None:
            return
        room = settings.pages + settings.groups + len(kept)
        self.frontier.extend(s for s in ranking.top(room) if s.node.key not in kept)

    async def recover(self, kept: list[Scored]) -> list[Scored]:
        """The pages to add to `kept` (best first) when the page stage is unsure; none when
        it is sure, or there is nothing to reopen."""
        settings = self.settings
        if settings is None or not self.frontier or not settings.unsure([s.score for s in kept]):
            return []
        present = {s.node.key for s in kept}
        frontier = sorted(self.frontier, key=lambda s: -s.score)  # stable: reading order on ties
        stage = self.levels.new_stage(Stage.RECOVERY.value, [])
        added: list[Scored] = []
        groups = 0
        for item in frontier:
            if len(added) >= settings.pages:
                break
            if item.node.key in present:
                continue
            if item.node.kind == NodeKind.DOCUMENT:
                added.append(item)
                present.add(item.node.key)
                stage.candidates.append(item.node.key)
            elif item.node.kind == NodeKind.GROUP and groups < settings.groups:
                groups += 1
                stage.candidates.append(item.node.key)
                for page in await self.reopen_group(item.node, stage, settings.pages_per_group):
                    if page.node.key not in present and len(added) < settings.pages:
                        added.append(page)
                        present.add(page.node.key)
        stage.n_candidates = len(stage.candidates)
        reopened = {s.node.key: s for s in frontier if s.node.key in set(stage.candidates)}
        stage.nodes = [reopened[key].node for key in stage.candidates]
        stage.scores = {key: reopened[key].score for key in stage.candidates}
        close_stage(self.levels, stage, added, opened=[s.node.key for s in added])
        return added

    async def reopen_group(self, group: Node, stage: StageTrace, keep: int) -> list[Scored]:
        """Judge the pages under a pruned group (its subgroups' pages too) in one request;
        its `keep` best, best first."""
        pages: list[Node] = []
        level = [group.id]
        while level:
            families = [self.view.split_children(node_id) for node_id in level]
            pages.extend(p for family in families for p in family.documents)
            level = [g.id for family in families for g in family.groups]
        pages = self.admit(pages, Stage.RECOVERY.value)
        if not pages:
            return []
        pages.sort(key=self.view.reading_key)
        entries = self.view.entries("document", pages, self.render)
        values = await self.levels.judge_entries(stage, "document", entries, POOLED, ())
        return Ranking.of(pages, values).top(keep)
