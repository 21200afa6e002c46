"""Node vectors stored with the tree: written by build/add, read by the judge and dense search."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from decisionrag import DocumentSpec, PassageSpec, Tree, TreeWriter
from decisionrag._app import build_tree
from decisionrag._build._vectors import embed_tree
from decisionrag._judges._base import BinaryRequest, Candidate, ChoiceRequest
from decisionrag._judges._embedded import EmbeddedJudge
from decisionrag._judges._testing import ScriptedJudge
from decisionrag._navigate import Navigator
from decisionrag._tree._vectors import (
    NodeVectors,
    VectorsError,
    available_sets,
    open_query_vectors,
    open_vectors,
    vectors_folder,
)
from decisionrag._words import Lexicon, terms

DIM = 16


class HashEncoder:
    """A deterministic stand-in encoder: bag of hashed words, L2-normalised."""

    name = "hash-words"
    precision = "float32"
    dim = DIM

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.texts.extend(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in terms(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


def _documents() -> list[DocumentSpec]:
    return [
        DocumentSpec("Passports", [PassageSpec("Renew your passport online from abroad.", key="pa"),
                                   PassageSpec("Passport photos must be recent.", key="pb")],
                     key="passports"),
        DocumentSpec("Fishing", [PassageSpec("Buy a rod fishing licence for rivers.", key="fa"),
                                 PassageSpec("Fishing seasons close in spring.", key="fb")],
                     key="fishing"),
    ]


def _tree(path: Path, documents: Sequence[DocumentSpec] | None = None) -> Path:
    with TreeWriter(path) as writer:
        for spec in documents or _documents():
            writer.add_document(spec)
    return path


def test_build_stores_vectors_rows_by_node_id(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    encoder = HashEncoder()
    report = embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    assert report.passages == 4 and report.encoded == 4
    with Tree.open(tree_path) as tree:
        vectors = open_vectors(tree, model="hash-words", precision="float32")
        passage = tree.node("pa")
        page = tree.node("passports")
        expected = encoder.encode([f"Passports\n{passage.text}"])[0]
        assert np.allclose(vectors.row(passage.id), expected, atol=1e-3)
        inside = vectors.take([tree.node("pa").id, tree.node("pb").id]).sum(axis=0)
        assert np.allclose(vectors.row(page.id), inside / np.linalg.norm(inside), atol=1e-3)
        assert not np.any(vectors.row(tree.root.id))
        q = encoder.encode(["fishing licence"])[0]
        assert np.allclose(vectors.scan(q), np.asarray(vectors.matrix, np.float32) @ q, atol=1e-5)
    header = json.loads((vectors_folder(tree_path) / "hash-words.json").read_text())
    assert header["version"] == 1 and header["dtype"] == "float16"
    assert not list(vectors_folder(tree_path).glob("*.tmp"))


def test_vectors_stay_in_step_with_add_and_only_new_text_is_encoded(tmp_path: Path) -> None:
    from decisionrag._cluster import add_documents

    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    new = DocumentSpec("Council tax", [PassageSpec("Pay your council tax by direct debit.", key="ct")],
                       key="tax")
    add_documents(tree_path, [new])
    with Tree.open(tree_path) as tree, pytest.raises(VectorsError, match="another version"):
        open_vectors(tree)
    encoder = HashEncoder()
    report = embed_tree(tree_path, model="hash-words", encode=encoder.encode)
    assert report.encoded == 1 and encoder.texts == ["Council tax\nPay your council tax by direct debit."]
    with Tree.open(tree_path) as tree:
        vectors = open_vectors(tree)
        row = vectors.row(tree.node("ct").id)
        assert np.allclose(row, HashEncoder().encode([encoder.texts[0]])[0], atol=1e-3)
    assert len(list(vectors_folder(tree_path).glob("hash-words-*.npy"))) == 2  # matrix + checks


def test_mismatched_model_or_precision_is_refused(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    with Tree.open(tree_path) as tree:
        with pytest.raises(VectorsError, match=r"stored for hash-words \(float32\), not for other"):
            open_vectors(tree, model="other", precision="float32")
        with pytest.raises(VectorsError, match=r"not for hash-words \(bfloat16"):
            open_vectors(tree, model="hash-words", precision="bfloat16")
        judge = EmbeddedJudge(_Bf16(HashEncoder()))
        with pytest.raises(VectorsError, match="decisionrag vectors"):
            Navigator(tree, judge, preset="flat")


def test_a_float32_query_reads_either_precision_of_its_model(tmp_path: Path) -> None:
    """Queries are only compared, so a float32 query encoder reads bfloat16 vectors of its
    model; float32 vectors win when both are stored; writing keeps the precisions apart."""
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", precision="bfloat16", encode=HashEncoder().encode)
    encoder = HashEncoder()  # float32
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, EmbeddedJudge(encoder), preset="flat")
        assert navigator.view.vectors is not None
        assert navigator.view.vectors.precision == "bfloat16"
        assert navigator.retrieve("renew passport abroad", k=2).hits[0].node.key == "pa"
        assert len(set(encoder.texts)) == 1  # the query only: the stored rows were read
        with pytest.raises(VectorsError, match=r"stored for hash-words \(bfloat16\), not for other"):
            open_query_vectors(tree, model="other", precision="float32")
        with pytest.raises(VectorsError, match=r"stored for hash-words \(bfloat16\)"):
            open_vectors(tree, model="hash-words", precision="float32")  # exact, as writers use
    report = embed_tree(tree_path, model="hash-words", precision="float32",
                        encode=HashEncoder().encode)
    assert report.encoded == 4  # nothing reused across precisions: a set of its own
    with Tree.open(tree_path) as tree:
        assert open_query_vectors(tree, model="hash-words", precision="float32").precision == "float32"
        assert open_query_vectors(tree, model="hash-words",
                                  precision="bfloat16").precision == "bfloat16"


class _Bf16:
    def __init__(self, inner: HashEncoder) -> None:
        self.inner, self.name, self.dim, self.precision = inner, inner.name, inner.dim, "bfloat16"

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        return self.inner.encode(texts)


def test_only_the_query_is_embedded_when_vectors_are_stored(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    encoder = HashEncoder()
    with Tree.open(tree_path) as tree:
        navigator = Navigator(tree, EmbeddedJudge(encoder), preset="flat")
        result = navigator.retrieve("renew passport abroad", k=2)
    assert result.hits[0].node.key == "pa"
    assert len(set(encoder.texts)) == 1 and "renew passport abroad" in encoder.texts[0]


def test_a_tree_without_vectors_warns_and_text_only_judges_need_none(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    with Tree.open(tree_path) as tree:
        with pytest.warns(RuntimeWarning, match="no stored vectors"):
            Navigator(tree, EmbeddedJudge(HashEncoder()), preset="flat")
        assert Navigator(tree, ScriptedJudge(), preset="flat").view.vectors is None


def test_build_without_the_embedded_extra_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decisionrag import _embed
    from decisionrag._errors import missing_extra

    def missing(*_a: object, **_k: object) -> None:
        raise missing_extra("sentence-transformers", "embedded")

    monkeypatch.setattr(_embed, "load_encoder", missing)
    source = tmp_path / "doc.md"
    source.write_text("# Title\n\nSome text here.\n", encoding="utf-8")
    report = build_tree([source], tmp_path / "t.tree", vectors="auto")
    assert report.vectors is None and report.vectors_note and "embedded" in report.vectors_note
    assert available_sets(tmp_path / "t.tree") == []


def test_judge_reads_a_page_through_its_best_passage() -> None:
    encoder = HashEncoder()
    q = "rod fishing licence"
    centroid = encoder.encode(["general information about many things"])[0]
    best = encoder.encode([q])[0]
    page = Candidate("page", "Outdoors", vectors=np.stack([centroid, np.zeros(DIM), best]))
    plain = Candidate("plain", "Outdoors", vectors=np.stack([centroid]))
    judge = EmbeddedJudge(encoder)
    own, top, _lex = judge.evidence(q, [page, plain])
    assert own[0] == pytest.approx(own[1]) and top[0] > top[1]
    result = judge.binary_sync(BinaryRequest("ctx", ("a?", "b?"), q, (page, plain)))
    assert result.probabilities[0] > result.probabilities[1]
    assert result.usage.estimated


def test_lexical_evidence_uses_corpus_statistics() -> None:
    lexicon = Lexicon.count(["the rare zebra word", "common words here", "common words again"])
    assert lexicon.idf("zebra") > lexicon.idf("common")
    scores = lexicon.scores("zebra common", ["zebra", "common"])
    assert scores[0] > scores[1] > 0
    assert Lexicon.from_json(lexicon.to_json()) == lexicon
    judge = EmbeddedJudge(HashEncoder())
    candidates = (Candidate("a", "zebra"), Candidate("b", "common"))
    request = ChoiceRequest("ctx", "which?", ("1", "2"), "zebra common", candidates,
                            statistics=lexicon)
    assert judge.evidence("zebra common", candidates, lexicon)[2][0] > 0
    assert sum(judge.choice_sync(request).probabilities) == pytest.approx(1.0)


def test_node_vectors_refuse_a_damaged_matrix(tmp_path: Path) -> None:
    tree_path = _tree(tmp_path / "t.tree")
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    header = json.loads((vectors_folder(tree_path) / "hash-words.json").read_text())
    (vectors_folder(tree_path) / header["matrix"]).write_bytes(b"garbage")
    with Tree.open(tree_path) as tree, pytest.raises(VectorsError, match="unreadable"):
        NodeVectors.open(tree.file, tree.meta)


def test_a_ray_build_without_the_embedded_extra_notes_it_before_starting_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decisionrag import _embed
    from decisionrag._build import BuildReport
    from decisionrag._errors import MissingDependency, missing_extra
    from decisionrag._scale import _ray_build

    def missing() -> None:
        raise missing_extra("sentence-transformers", "embedded")

    def no_workers(*_a: object, **_k: object) -> None:
        raise AssertionError("Ray workers started although the extra is missing")

    monkeypatch.setattr(_embed, "require_sentence_transformers", missing)
    monkeypatch.setattr(_ray_build, "ray_encoder", no_workers)
    source = tmp_path / "doc.md"
    source.write_text("# Title\n\nSome text here.\n", encoding="utf-8")
    build_tree([source], tmp_path / "t.tree", vectors=False)
    report = BuildReport(path=tmp_path / "t.tree")
    _ray_build._store_vectors_on_ray(report, _ray_build.RayOptions(), False, None, None, None)
    assert report.vectors is None and report.vectors_note and "embedded" in report.vectors_note
    with pytest.raises(MissingDependency, match="embedded"):
        _ray_build._store_vectors_on_ray(report, _ray_build.RayOptions(), True, None, None, None)


def test_auto_adds_hybrid_candidates_for_a_judge_that_reads_vectors(tmp_path: Path) -> None:
    from decisionrag._navigate import _config

    tree_path = _tree(tmp_path / "t.tree")
    judge = EmbeddedJudge(HashEncoder())
    with Tree.open(tree_path) as tree:
        assert _config.auto_preset(tree, judge).candidates is None  # no vectors stored yet
    embed_tree(tree_path, model="hash-words", encode=HashEncoder().encode)
    with Tree.open(tree_path) as tree:
        assert _config.auto_preset(tree, judge).candidates == "hybrid"
        assert _config.auto_preset(tree, ScriptedJudge()).candidates is None  # a remote-style judge
        assert not hasattr(_config, "HYBRID_UP_TO")  # at every size (issue 30)
