"""The numpy query encoder (`decisionrag._bert`): an oracle test against sentence-transformers
on the same bundled model, batching, the folder checks, the judge's `encoder` option, and a
querying process that never imports torch."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import require_module
from decisionrag import DocumentSpec, PassageSpec, TreeWriter
from decisionrag._bert import NumpyEncoder, check_folder, erf
from decisionrag._build._vectors import embed_tree
from decisionrag._embed import (
    DEFAULT_MODEL,
    default_model_path,
    load_encoder,
    load_query_encoder,
)
from decisionrag._errors import InputError, JudgeConfigError
from decisionrag._judges._registry import load_judge

LONG = " ".join(f"clause {i} of the agreement, as amended," for i in range(120))  # > 256 tokens
TEXTS = [
    "How do I renew my passport when I live abroad?",
    "x",
    "",
    "   spaces around   ",
    "Punctuation!!! ??? ... ;;; (brackets) [square] {curly} <angle> -- 'quotes' \"double\"",
    "Ünïcödé: naïve café, Zürich, 東京タワー, Здравствуйте, مرحبا, emoji 🙂 and ½ ≥ ∑",
    "1234567890 3.14159 2026-12-01 v2.0.1 e=mc^2 a_b-c/d",
    LONG,
    "The quick brown fox jumps over the lazy dog. " * 40,
    "Tabs\tand\nnew\nlines\r\nmixed",
]


@pytest.fixture(scope="module")
def numpy_encoder() -> NumpyEncoder:
    encoder = load_query_encoder(encoder="numpy")
    assert isinstance(encoder, NumpyEncoder)
    return encoder


def test_vectors_match_sentence_transformers_on_the_same_model(numpy_encoder: NumpyEncoder) -> None:
    require_module("sentence_transformers")
    reference = load_encoder(precision="float32")
    expected = reference.encode(TEXTS)
    got = numpy_encoder.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    cosines = np.sum(got * expected, axis=1) / np.linalg.norm(expected, axis=1)
    assert np.all(cosines >= 0.99999), dict(zip(TEXTS, cosines.tolist(), strict=True))
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    lengths = reference.model.tokenizer(TEXTS, truncation=True,
                                        max_length=reference.model.max_seq_length)["input_ids"]
    assert numpy_encoder.tokenize(TEXTS) == [list(ids) for ids in lengths]
    assert max(len(ids) for ids in numpy_encoder.tokenize(TEXTS)) == 256  # LONG is truncated


def test_a_batch_equals_one_text_at_a_time(numpy_encoder: NumpyEncoder) -> None:
    batch = numpy_encoder.encode(TEXTS)
    alone = np.stack([numpy_encoder.encode([text])[0] for text in TEXTS])
    assert np.max(np.abs(batch - alone)) < 1e-6
    small_batches = numpy_encoder.encode(TEXTS, batch_size=3)
    assert np.max(np.abs(small_batches - alone)) < 1e-6
    assert numpy_encoder.encode([]).shape == (0, 384)


def test_erf_is_accurate_in_float32() -> None:
    x = np.linspace(-6.0, 6.0, 24_001, dtype=np.float32)
    reference = np.array([math.erf(float(v)) for v in x])
    assert erf(x).dtype == np.float32
    assert np.max(np.abs(erf(x) - reference)) < 1e-6


def test_the_encoder_has_the_shape_of_the_torch_one(numpy_encoder: NumpyEncoder) -> None:
    assert (numpy_encoder.name, numpy_encoder.precision, numpy_encoder.cache_key,
            numpy_encoder.dim) == (DEFAULT_MODEL, "float32", DEFAULT_MODEL, 384)
    assert numpy_encoder.max_tokens == 256
    assert load_query_encoder() is numpy_encoder  # auto: numpy for the bundled model on CPU


def test_a_folder_it_cannot_run_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(default_model_path(), folder,
                    ignore=shutil.ignore_patterns("model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(InputError, match=r"config\.json: hidden_act='relu'.*encoder=torch"):
        check_folder(folder)
    (folder / "config.json").write_text(json.dumps(config))
    pooling = folder / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**settings, "pooling_mode_mean_tokens": False,
                                   "pooling_mode_cls_token": True}))
    with pytest.raises(InputError, match=r"1_Pooling.config\.json: pooling.*cls"):
        check_folder(folder)
    pooling.write_text(json.dumps(settings))
    with pytest.raises(InputError, match=r"model\.safetensors"):
        NumpyEncoder(folder, "copy")
    with pytest.raises(InputError, match="not one"):
        load_query_encoder(str(tmp_path / "absent"), encoder="numpy")


def test_the_judge_encoder_option_is_typed(numpy_encoder: NumpyEncoder) -> None:
    assert load_judge("embedded").encoder is numpy_encoder
    assert load_judge("embedded", encoder="numpy", lru_size="10").cache.size == 10
    with pytest.raises(JudgeConfigError, match="known encoders: auto, numpy, torch"):
        load_judge("embedded", encoder="onnx")
    with pytest.raises(JudgeConfigError, match="runs float32 on the CPU"):
        load_judge("embedded", encoder="numpy", precision="bfloat16")
    with pytest.raises(JudgeConfigError, match=r"known options: .*encoder"):
        load_judge("embedded", engine="numpy")


def test_torch_is_chosen_explicitly_or_for_bfloat16() -> None:
    require_module("sentence_transformers")
    from decisionrag._embed import Encoder

    torch_judge = load_judge("embedded", encoder="torch", precision="float32")
    assert isinstance(torch_judge.encoder, Encoder)
    assert isinstance(load_query_encoder(precision="bfloat16"), Encoder)


QUERY_PROCESS = """
import json, sys
from decisionrag._app import open_navigator
navigator = open_navigator(sys.argv[1], "embedded")
result = navigator.retrieve("renew a passport from abroad", k=2)
dense = navigator.retriever.dense if hasattr(navigator.retriever, "dense") else navigator.retriever
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers",
                                                         "sentence_transformers"})
print(json.dumps({"top": result.hits[0].node.key, "heavy": heavy,
                  "retriever": type(navigator.retriever).__name__,
                  "dense_encoder": type(dense.encoder).__name__,
                  "stored": navigator.view.vectors.precision}))
"""


def test_a_querying_process_never_imports_torch(tmp_path: Path,
                                                numpy_encoder: NumpyEncoder) -> None:
    """A fresh interpreter opens a tree whose vectors were stored in bfloat16, walks it with
    the default judge and hybrid candidates (BM25 + dense), and has no torch loaded."""
    tree_path = tmp_path / "t.tree"
    with TreeWriter(tree_path) as writer:
        writer.add_document(DocumentSpec("Passports", [
            PassageSpec("Renew your passport online when you live abroad.", key="pa"),
            PassageSpec("Passport photos must be taken in the last month.", key="pb")],
            key="passports"))
        writer.add_document(DocumentSpec("Fishing", [
            PassageSpec("Buy a rod fishing licence for rivers and lakes.", key="fa")],
            key="fishing"))
    embed_tree(tree_path, model=DEFAULT_MODEL, precision="bfloat16", encode=numpy_encoder.encode)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    env.pop("DECISIONRAG_EMBED_PRECISION", None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(QUERY_PROCESS), str(tree_path)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], report
    assert report["top"] == "pa" and report["stored"] == "bfloat16"
    assert report["retriever"] == "HybridRetriever" and report["dense_encoder"] == "NumpyEncoder"
