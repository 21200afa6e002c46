"""Small trees for the navigation tests, written with the real TreeWriter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from decisionrag._judges import BinaryRequest, ChoiceRequest, ScriptedJudge
from decisionrag._navigate import ChoiceSettings, Preset, StageSettings
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter

ONE_REQUEST = StageSettings(top_k=None, max_candidates_per_request=None)


def pets_tree(path: Path) -> Tree:
    """root → Cats (c1, c2), Dogs (d1, d2), Fish (f1); passages keyed <doc>-p<i>."""
    layout = {
        "Cats": {
            "c1": ("Cat food", [("Feeding",), ("Feeding",), ("Treats",)]),
            "c2": ("Cat health", [("Vets",), ("Vets",)]),
        },
        "Dogs": {
            "d1": ("Dog walks", [(), ()]),
            "d2": ("Dog food", [("Kibble",), ("Kibble", "Wet"), ()]),
        },
        "Fish": {"f1": ("Fish tanks", [("Water",)])},
    }
    with TreeWriter(path) as writer:
        for group, docs in layout.items():
            for key, (title, sections) in docs.items():
                passages = [
                    PassageSpec(f"{title} passage {i}", section=s, key=f"{key}-p{i}")
                    for i, s in enumerate(sections)
                ]
                writer.add_document(DocumentSpec(title, passages, key=key, groups=(group,)))
    return Tree.open(path)


def flat_tree(path: Path, n_docs: int, passages_per_doc: int = 2) -> Tree:
    """Documents d0..d{n-1} directly under the root."""
    with TreeWriter(path) as writer:
        for d in range(n_docs):
            passages = [
                PassageSpec(f"text {d}.{i}", key=f"d{d}-p{i}") for i in range(passages_per_doc)
            ]
            writer.add_document(DocumentSpec(f"Doc {d}", passages, key=f"d{d}"))
    return Tree.open(path)


def preset(**changes: object) -> Preset:
    """A plain test preset: one group level keeping 1, pages keeping 1, everything in one
    request, multiple choice off; override any field."""
    base = Preset(
        name="test",
        task="qa",
        groups=(StageSettings(top_k=1, max_candidates_per_request=None),),
        documents=StageSettings(top_k=1, max_candidates_per_request=None),
        passages=ONE_REQUEST,
        choice=ChoiceSettings(top=20, mode="off"),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def asked(judge: ScriptedJudge) -> list[list[str]]:
    """Candidate ids of every binary request, in the order sent."""
    return [
        [c.id for c in call.candidates] for call in judge.calls if isinstance(call, BinaryRequest)
    ]


def choices(judge: ScriptedJudge) -> list[ChoiceRequest]:
    return [call for call in judge.calls if isinstance(call, ChoiceRequest)]
