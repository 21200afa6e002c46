"""Clustering with a sentence-transformers model other than the bundled one, named by path.

No weights can be downloaded here, so the model is built in the test: a two-layer BERT with
random weights and the bundled MiniLM's WordPiece tokenizer, saved as a Hugging Face folder
(sentence-transformers adds mean pooling when it loads one).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import require_module
from decisionrag import NodeKind, Tree

require_module("sentence_transformers")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from decisionrag._embed import default_model_path

    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_corpus(folder: Path, topics: dict[str, list[str]]) -> Path:
    folder.mkdir()
    for topic, titles in topics.items():
        for title in titles:
            (folder / f"{topic}-{title}.md").write_text(
                f"# {title.title()}\n\nThe {title} is part of {topic}. It has details.\n")
    return folder


TOPICS = {
    "astronomy": ["planet", "galaxy", "comet", "nebula"],
    "cooking": ["bread", "cheese", "soup", "pastry"],
    "sailing": ["mast", "hull", "regatta", "keel"],
}


def test_build_and_add_with_a_model_named_by_path(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decisionrag._cli import main

    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECISIONRAG_EMBED_PRECISION", "float32")
    corpus = write_corpus(tmp_path / "docs", TOPICS)
    out = tmp_path / "docs.tree"
    argv = ["build", str(corpus), "-o", str(out), "--cluster", "3",
            "--cluster-model", str(tiny_model), "--quiet"]
    assert main(argv) == 0
    with Tree.open(out) as tree:
        groups = tree.children(tree.root.id)
        assert len(groups) == 3 and all(g.kind == NodeKind.GROUP for g in groups)
        assert sum(len(tree.children(g.id)) for g in groups) == 12
        assert tree.meta["clustering"]["model"] == str(tiny_model)
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.npy"))) == 1

    extra = write_corpus(tmp_path / "more", {"opera": ["aria", "tenor"]})
    assert main(["add", str(out), str(extra), "--quiet"]) == 0  # embeds with the stored model
    with Tree.open(out) as tree:
        groups = tree.children(tree.root.id)
        assert len(groups) == 3
        assert sum(len(tree.children(g.id)) for g in groups) == 14
