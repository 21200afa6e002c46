"""Navigation settings. Presets are data: a Preset is a list of stage settings, nothing more.

Override anything with ``dataclasses.replace`` (or `Preset.with_overrides` for the few
settings the CLI exposes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from .._errors import NavigationError
from ._render import QUESTION_FORMS, QuestionForm

if TYPE_CHECKING:
    from .._judges import Judge
    from .._tree import Tree

Task = Literal["qa", "conversation", "auto"]
McMode = Literal["order", "top1", "off"]
OnFailure = Literal["degrade", "fail"]
Rendering = Literal["description", "title"]

# (up to rank, passages per page; None = all): ((3, None), (10, 10), (30, 3)) reads "all
# paragraphs of pages 1-3, the first 10 of pages 4-10, the first 3 of pages 11-30".
Expansion = tuple[tuple[int, "int | None"], ...]


@dataclass(frozen=True, slots=True)
class StageSettings:
    """How one level is judged and how much of it survives.

    Budget: keep `top_k`, or the `share` of the level (when both are set the larger wins:
    budgets lean towards recall), never fewer than `min_keep`; when the best score is below
    `runner_up_below`, the runner-up is kept too.
    Splitting: a level is cut into parallel requests of at most `max_candidates_per_request`
    candidates and `max_tokens_per_request` tokens (and the judge's own limits), keeping the
    children of one parent together when `keep_siblings` is set. When a level was split,
    `rescore_top` > 0 rescores the pooled top N in one shared request before keeping.
    `render` is how candidates are shown in the (first) pass: their description or their title.
    Document level only: `propagate` multiplies each passage's score by its page's;
    `partial_expansion` limits how many passages of each kept page reach the passage stage.
    """

    top_k: int | None = 10
    share: float | None = None
    min_keep: int = 1
    runner_up_below: float | None = None
    max_candidates_per_request: int | None = 50
    max_tokens_per_request: int | None = None
    keep_siblings: bool = True
    rescore_top: int = 0
    render: Rendering = "description"
    propagate: bool = False
    partial_expansion: Expansion | None = None

    def keep_count(self, n_candidates: int, scores_desc: list[float]) -> int:
        """How many of `n_candidates` (scores sorted best first) survive this level."""
        if n_candidates == 0:
            return 0
        budget = _budget(self.top_k, self.share, n_candidates)
        budget = max(budget, self.min_keep)
        if self.runner_up_below is not None and scores_desc and scores_desc[0] < self.runner_up_below:
            budget = max(budget, 2)
        return min(budget, n_candidates)

    def expansion_limit(self, rank: int) -> int | Literal[0] | None:
        """Passages to open for the page ranked `rank` (1-based): None = all, 0 = none."""
        if not self.partial_expansion:
            return None
        for up_to, limit in self.partial_expansion:
            if rank <= up_to:
                return limit
        return 0


def _budget(top_k: int | None, share: float | None, n: int) -> int:
    from_share = math.ceil(share * n) if share is not None else None
    if top_k is None and from_share is None:
        return n
    return max(v for v in (top_k, from_share) if v is not None)


# every candidate judged, in as few requests as the judge's limits allow, all kept
ONE_REQUEST = StageSettings(top_k=None, max_candidates_per_request=None)
# the same for a pooled shortlist (a rescoring pass, a reopened group): no siblings to keep together
POOLED = StageSettings(top_k=None, max_candidates_per_request=None, keep_siblings=False)


@dataclass(frozen=True, slots=True)
class HeadingSettings:
    """Pages with more than `threshold` passages first get their section headings scored
    (`keep` per page survive); then at most `max_passages` passages under the kept headings,
    in document order, reach the passage stage."""

    threshold: int = 60
    keep: int = 8
    max_passages: int = 60


@dataclass(frozen=True, slots=True)
class ChoiceSettings:
    """The final multiple-choice judgment over the binary top `top` (≤ 255) passages.
    `order`: choice probabilities reorder the shortlist; `top1`: only the most probable
    choice moves to rank one; `off`: binary order only."""

    top: int = 20
    mode: McMode = "order"


@dataclass(frozen=True, slots=True)
class RecoverySettings:
    """Recovery from pruning: when the page stage is unsure — its best kept page has P(yes)
    below `below`, or the best and the last kept page differ by less than `flat` — reopen
    pruned branches best-first over the explored frontier (every group and page judged and
    pruned so far, by its own score): a pruned page rejoins the kept pages, a pruned group
    has its pages judged (one request) and its best `pages_per_group` join. At most
    `groups` groups are reopened and `pages` pages added. The stage is traced as
    ``recovery``."""

    below: float = 0.5
    flat: float = 0.05
    pages: int = 3
    groups: int = 1
    pages_per_group: int = 2

    def unsure(self, kept_scores_desc: list[float]) -> bool:
        if not kept_scores_desc:
            return True
        return kept_scores_desc[0] < self.below or kept_scores_desc[0] - kept_scores_desc[-1] < self.flat


@dataclass(frozen=True, slots=True)
class NotepadSettings:
    """Conversation memory (pages this system retrieved, most recent first): the page stage
    shows them, the passage stage also scores the passages of the `passage_pages` most recent,
    and with `keep_group` the most recent page's group survives its group stage."""

    show_pages: bool = True
    passage_pages: int = 2
    keep_group: bool = True


@dataclass(frozen=True, slots=True)
class Preset:
    """A complete navigation configuration.

    `groups[i]` judges the i-th group level (the last entry repeats for deeper levels);
    with `route_groups=False` group levels are skipped and every document is judged directly
    (rendered under its parent group's title). `headings` None disables the heading stage,
    `notepad` None ignores conversation memory, `hybrid_k` is how many passages of an
    attached retriever join the passage stage. `questions` is the binary question form:
    ``paper`` (the paper's full sentence per candidate) or ``compact`` (the sentence once in
    the shared context, ``Page 12?`` per candidate: fewer billed tokens, see
    docs/integrations.md).
    attached retriever join the passage stage; `candidates` names the retriever the
    application attaches when the caller gives none (None: no hybrid candidates);
    `recovery` None never reopens pruned branches.

    `on_failure` is what a request that still fails after its retries (server errors,
    timeouts, broken answers) does to the walk: ``"degrade"`` marks its candidates unjudged
    (ranked after every judged one, in reading order) and goes on, flagging the result
    (`Result.degraded`: stages and counts); ``"fail"`` raises the error, naming the stage. A
    stage none of whose requests succeeded always fails, as do refused requests (4xx) and
    the query's deadline.
    """

    name: str
    task: Task = "auto"
    groups: tuple[StageSettings, ...] = (StageSettings(top_k=None, share=0.15, min_keep=2),)
    documents: StageSettings = StageSettings(top_k=10)
    passages: StageSettings = ONE_REQUEST
    headings: HeadingSettings | None = None
    choice: ChoiceSettings = ChoiceSettings()
    notepad: NotepadSettings | None = None
    route_groups: bool = True
    hybrid_k: int = 20
    candidates: Literal["hybrid", "bm25", "dense"] | None = None
    recovery: RecoverySettings | None = None
    notes: str = ""
    questions: QuestionForm = "paper"
    on_failure: OnFailure = "degrade"
    # passages of identical text (whitespace aside) are one hit, the others listed on it
    # (`Hit.also_at`), as the paper counts identical texts once; False keeps every copy
    collapse_duplicates: bool = True

    def group_settings(self, depth: int) -> StageSettings:
        return self.groups[min(depth, len(self.groups) - 1)]

    def with_overrides(
        self,
        *,
        keep_pages: int | None = None,
        mc_top: int | None = None,
        mc_mode: McMode | None = None,
        hybrid_k: int | None = None,
        task: Task | None = None,
        questions: QuestionForm | None = None,
        on_failure: OnFailure | None = None,
        collapse_duplicates: bool | None = None,
    ) -> Preset:
        """A copy with the settings the command line exposes replaced (None = unchanged)."""
        preset = self
        if collapse_duplicates is not None:
            preset = replace(preset, collapse_duplicates=bool(collapse_duplicates))
        if keep_pages is not None:
            preset = replace(preset, documents=replace(preset.documents, top_k=keep_pages, share=None))
        if mc_top is not None or mc_mode is not None:
            choice = replace(
                preset.choice,
                top=mc_top if mc_top is not None else preset.choice.top,
                mode=mc_mode or preset.choice.mode,
            )
            preset = replace(preset, choice=choice)
        if hybrid_k is not None:
            preset = replace(preset, hybrid_k=hybrid_k)
        if task is not None:
            preset = replace(preset, task=task)
        if questions is not None:
            if questions not in QUESTION_FORMS:
                raise NavigationError(f"unknown question form {questions!r}: use one of "
                                      f"{', '.join(QUESTION_FORMS)}")
            preset = replace(preset, questions=questions)
        if on_failure is not None:
            if on_failure not in ("degrade", "fail"):
                raise NavigationError(f"on_failure must be 'degrade' or 'fail', not {on_failure!r}")
            preset = replace(preset, on_failure=on_failure)
        return preset



PRESETS: dict[str, Preset] = {
    "md2d": Preset(
        name="md2d",
        task="conversation",
        groups=(StageSettings(top_k=1, runner_up_below=0.8, max_candidates_per_request=None),),
        documents=StageSettings(top_k=10, max_candidates_per_request=None),
        passages=ONE_REQUEST,
        choice=ChoiceSettings(top=20, mode="order"),
        notepad=NotepadSettings(),
        notes="help center (runner-up below 0.8, notepad's center) → keep 10 pages → passages, MC top 20",
    ),
    "cqa": Preset(
        name="cqa",
        task="qa",
        groups=(StageSettings(top_k=None, share=0.15, min_keep=2),),
        documents=StageSettings(top_k=3, max_candidates_per_request=None),
        passages=ONE_REQUEST,
        choice=ChoiceSettings(top=20, mode="order"),
        route_groups=False,
        notes="all pages in one request, keep 3, paragraphs under heading paths, MC top 20",
    ),
    "mtrag": Preset(
        name="mtrag",
        task="conversation",
        documents=StageSettings(
            top_k=10,
            max_candidates_per_request=None,
            max_tokens_per_request=10_000,
            keep_siblings=True,
            rescore_top=50,
            render="title",
        ),
        passages=ONE_REQUEST,
        headings=HeadingSettings(threshold=60, keep=8, max_passages=60),
        choice=ChoiceSettings(top=20, mode="top1"),
        notepad=NotepadSettings(show_pages=True, passage_pages=0, keep_group=False),
        route_groups=False,
        notes="page titles in requests ≤ 10k tokens keeping products together, rescore top 50 "
        "with headings, keep 10, heading stage, MC top1",
    ),
    "nq": Preset(
        name="nq",
        task="qa",
        groups=(StageSettings(top_k=150, max_candidates_per_request=125),),
        documents=StageSettings(
            top_k=30,
            max_candidates_per_request=None,
            max_tokens_per_request=20_000,
            render="title",
            propagate=True,
            partial_expansion=((3, None), (10, 10), (30, 3)),
        ),
        passages=ONE_REQUEST,
        choice=ChoiceSettings(top=5, mode="order"),
        notes="keep 150 of 1,000 clusters (8 requests), page titles in requests ≤ 20k tokens, "
        "partial expansion of the top 30 pages, score propagation, MC top 5",
    ),
    "flat": Preset(
        name="flat",
        documents=StageSettings(top_k=10, max_candidates_per_request=50),
        passages=ONE_REQUEST,
        route_groups=False,
        notes="every document judged directly (no group routing): measures what pruning loses",
    ),
}

PRESET_NAMES = (*PRESETS, "auto")


def get_preset(name: str | Preset, tree: Tree | None = None, judge: Judge | None = None) -> Preset:
    """A preset by name; ``auto`` is derived from the tree's shape and the judge's limits."""
    if isinstance(name, Preset):
        return name
    if name == "auto":
        if tree is None:
            raise NavigationError("the 'auto' preset needs the tree it will navigate")
        return auto_preset(tree, judge)
    if name not in PRESETS:
        raise NavigationError(f"unknown preset {name!r}; choose one of {', '.join(PRESET_NAMES)}")
    return PRESETS[name]


# -- auto ---------------------------------------------------------------------------------

PASSAGE_STAGE_TARGET = 300  # passages the final shared context should hold at most (about)
SPLIT_AT = 50  # candidates per request where the shared-context benefit levels off


def _reads_vectors(judge: Judge | None) -> bool:
    """A judge that reads stored vectors (the embedded one) runs here and holds an encoder:
    hybrid candidates cost it one query embedding and recovery a local request. For a
    judge reached over HTTP both would add requests, tokens and an encoder to load, so
    `auto` leaves them to presets that ask for them."""
    return judge is not None and judge.reads.vectors is not None


def auto_preset(tree: Tree, judge: Judge | None = None) -> Preset:
    """Budgets from the tree's shape (see docs/navigation.md, "What auto picks").

    * groups: keep 15 % of each group level (at least 2), the runner-up when unsure;
    * pages: keep enough pages for about 300 passages (between 3 and 10 pages), judged in
      requests of at most 50; when the page level is split, the pooled top 3×k (at least
      20) are rescored together before keeping k;
    * pages with more than 60 passages get the heading stage;
    * multiple choice over the top 20; the task wording follows the query (history or not);
    * for a judge that reads stored vectors (the embedded judge): recovery from pruning
      (`RecoverySettings` defaults) when the page stage is unsure, and, when the tree stores
      vectors, hybrid candidates (the top 20 of BM25 and dense fused by reciprocal rank)
      join the passage stage, so passages of pruned pages can still win. At any size: both
      read indexes stored with the tree (BM25 and, from 100,000 passages, an ANN index over
      the vectors), so opening them indexes nothing.
    """
    from .._tree._vectors import available_sets

    local = _reads_vectors(judge)
    counts = tree.counts
    n_docs = max(1, counts.get("document", 0))
    per_doc = counts.get("passage", 0) / n_docs
    keep_pages = max(3, min(10, int(PASSAGE_STAGE_TARGET // max(per_doc, 1.0))))
    max_tokens = judge.limits.max_tokens if judge is not None else None
    documents = StageSettings(
        top_k=keep_pages,
        max_candidates_per_request=SPLIT_AT,
        max_tokens_per_request=max_tokens,
        rescore_top=max(20, 3 * keep_pages),
    )
    group = StageSettings(
        top_k=None,
        share=0.15,
        min_keep=2,
        runner_up_below=0.8,
        max_candidates_per_request=SPLIT_AT * 3,
        max_tokens_per_request=max_tokens,
    )
    passages = StageSettings(top_k=None, max_candidates_per_request=None, max_tokens_per_request=max_tokens)
    hybrid = local and bool(available_sets(tree.file))
    notes = f"derived: {n_docs} pages, {per_doc:.1f} passages/page"
    return Preset(
        name="auto",
        task="auto",
        groups=(group,),
        documents=documents,
        passages=passages,
        headings=HeadingSettings(),
        choice=ChoiceSettings(top=20, mode="order"),
        notepad=NotepadSettings(),
        candidates="hybrid" if hybrid else None,
        recovery=RecoverySettings() if local else None,
        notes=notes,
    )
