"""The Ray build engine on a local Ray instance (2 CPUs): the same tree as one machine."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import ray

from decisionrag import Tree, build_tree
from decisionrag._errors import InputError
from decisionrag._scale import RayOptions, build_on_ray, ray_encoder
from decisionrag._scale._ray_build import chunk_plan

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def hashing_encoder() -> Callable[[Sequence[str]], np.ndarray]:
    """Deterministic bag-of-words vectors: the same on the driver and on every worker."""

    def encode(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                h = int(hashlib.md5(word.encode()).hexdigest()[:8], 16)
                out[row, h % 64] += 1.0 if (h >> 8) & 1 else -1.0
        return out

    return encode


def snapshot(path: Path) -> list[tuple[object, ...]]:
    """Every node of a tree, top-down in reading order, with what a build decides about it."""
    tree = Tree.open(path)
    rows: list[tuple[object, ...]] = []

    def visit(node_id: int) -> None:
        for child in tree.children(node_id):
            rows.append((child.id, child.key, child.parent, child.kind, child.pos, child.title,
                         child.description, child.heading, child.text, child.n_passages))
            visit(child.id)

    visit(tree.node("root").id)
    tree.close()
    return rows


def test_clustered_build_on_ray_equals_the_local_build(local_ray: None, shared_data: Path,
                                                       tmp_path: Path) -> None:
    corpus = shared_data / "xquad-en" / "corpus.jsonl"
    local = build_tree([corpus], tmp_path / "local.tree", cluster=6,
                       cluster_options={"encode": hashing_encoder(), "use_cache": False})
    on_ray = build_on_ray([corpus], tmp_path / "ray.tree", cluster=6, encode=hashing_encoder(),
                          options=RayOptions(batch_size=16))
    assert on_ray.counts == local.counts
    assert on_ray.counts["group"] >= 6
    expected = snapshot(tmp_path / "local.tree")
    assert len(expected) == sum(local.counts.values()) - 1  # every node but the root
    assert snapshot(tmp_path / "ray.tree") == expected


def test_folder_parsed_on_workers_keeps_order_and_skips(local_ray: None, tmp_path: Path) -> None:
    src = tmp_path / "docs"
    (src / "b").mkdir(parents=True)
    for i in range(7):
        (src / f"{i:02d}.md").write_text(f"# Page {i}\n\nFirst paragraph {i}.\n\nSecond {i}.\n")
    (src / "b" / "empty.md").write_text("")
    (src / "b" / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    local = build_tree([src], tmp_path / "local.tree")
    on_ray = build_on_ray([src], tmp_path / "ray.tree")
    assert on_ray.counts == local.counts == {**local.counts, "document": 7}
    assert sorted(on_ray.skipped) == sorted(local.skipped)
    assert len(on_ray.skipped) == 2
    assert snapshot(tmp_path / "ray.tree") == snapshot(tmp_path / "local.tree")


def test_malformed_jsonl_on_a_worker_is_the_same_clear_error(local_ray: None,
                                                             tmp_path: Path) -> None:
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"id": "p1", "doc_id": "d", "text": "fine"}\n{"id": "p2", "doc_id": \n')
    with pytest.raises(InputError) as local_error:
        build_tree([bad], tmp_path / "local.tree")
    with pytest.raises(InputError) as ray_error:
        build_on_ray([bad], tmp_path / "ray.tree")
    assert str(ray_error.value) == str(local_error.value)
    assert "line 2" in str(ray_error.value)
    assert not (tmp_path / "ray.tree").exists()


def test_workers_minilm_vectors_are_bit_identical_to_the_local_encoder(local_ray: None) -> None:
    from decisionrag._cluster._embedding import embed_texts

    texts = [f"How do I renew passport number {i}?" for i in range(40)] + ["Tax credits."]
    local = embed_texts(texts, use_cache=False, max_tokens=64)
    remote = embed_texts(texts, encode=ray_encoder(RayOptions(workers=1), max_tokens=64),
                         use_cache=False)
    assert remote.shape == local.shape == (41, 384)
    assert np.array_equal(remote, local)


def test_passage_vectors_embedded_on_ray_equal_the_local_ones(local_ray: None, shared_data: Path,
                                                              tmp_path: Path) -> None:
    from decisionrag._tree._vectors import vectors_folder

    corpus = shared_data / "xquad-en" / "corpus.jsonl"
    local = build_tree([corpus], tmp_path / "local.tree", vectors=True,
                       vectors_precision="float32")
    on_ray = build_on_ray([corpus], tmp_path / "ray.tree", vectors=True,
                          vectors_precision="float32", options=RayOptions(workers=1))
    assert local.vectors is not None and on_ray.vectors is not None
    assert (on_ray.vectors.model, on_ray.vectors.precision, on_ray.vectors.passages) == \
        (local.vectors.model, local.vectors.precision, local.vectors.passages) == \
        (local.vectors.model, "float32", 240)
    # file names carry each tree's own stamp: pair them in order
    local_files, ray_files = (sorted(vectors_folder(tmp_path / name).glob("*.npy"))
                              for name in ("local.tree", "ray.tree"))
    assert local_files and len(local_files) == len(ray_files)
    for mine, theirs in zip(local_files, ray_files, strict=True):
        a, b = np.load(mine), np.load(theirs)
        assert a.shape == b.shape and np.array_equal(a, b)


def test_chunk_plan_is_the_local_encoders() -> None:
    texts = [("x" * (i % 7)) + str(i) for i in range(2500)]
    plan = chunk_plan(texts, 1024)
    assert [len(c) for c in plan] == [1024, 1024, 452]
    flat = np.concatenate(plan)
    assert sorted(flat.tolist()) == list(range(2500))
    lengths = [len(texts[i]) for i in flat]
    assert lengths == sorted(lengths, reverse=True)
    assert [c.tolist() for c in chunk_plan(texts[:9], 1024)] == [list(range(9))]


def test_cli_engine_ray(shared_data: Path, tmp_path: Path) -> None:
    corpus = shared_data / "xquad-en" / "corpus.jsonl"
    run = subprocess.run([sys.executable, "-m", "decisionrag", "build", str(corpus), "-o",
                          str(tmp_path / "cli.tree"), "--engine", "ray", "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    local = build_tree([corpus], tmp_path / "local.tree")
    assert snapshot(tmp_path / "cli.tree") == snapshot(tmp_path / "local.tree")
    assert local.counts["document"] == 48


def test_ray_options_reject_nonsense() -> None:
    with pytest.raises(InputError, match="batch size"):
        RayOptions(batch_size=0)
    with pytest.raises(InputError, match="workers"):
        RayOptions(workers=0)
