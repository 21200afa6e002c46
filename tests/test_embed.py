"""The shared sentence encoder: chunked encoding keeps order and equals one-shot encoding."""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np
import pytest

from conftest import require_module
from decisionrag import _embed as embed_module
from decisionrag._embed import Encoder, load_encoder, release_freed_memory, resolve_precision
from decisionrag._errors import InputError

TEXTS = [
    "Cats sleep for most of the day.",
    "A short one.",
    "The treaty was signed in 1648 and ended thirty years of war in central Europe.",
    "Photosynthesis turns light into chemical energy.",
    "x",
    "Rivers carry sediment from mountains to the sea, building deltas at their mouths.",
    "Tax returns are due in April.",
    "Volcanoes form where tectonic plates meet or over hot spots in the mantle.",
    "Bread rises because yeast makes carbon dioxide.",
    "Jupiter is the largest planet.",
    "Owls hunt at night.",
]


class RecordingModel:
    """A stand-in sentence-transformers model: a text's vector is (length, first letter code)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def get_embedding_dimension(self) -> int:
        return 2

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[len(text), ord(text[0])] for text in texts], dtype=np.float32)


def test_chunks_are_bounded_longest_first_and_results_keep_input_order() -> None:
    model = RecordingModel()
    vectors = Encoder(model, "recording").encode(TEXTS, chunk_size=4)
    expected = np.array([[len(text), ord(text[0])] for text in TEXTS], dtype=np.float32)
    assert np.array_equal(vectors, expected)
    assert [len(call) for call in model.calls] == [4, 4, 3]
    lengths = [len(text) for call in model.calls for text in call]
    assert lengths == sorted(lengths, reverse=True)


def test_small_input_is_one_call_and_empty_input_is_no_call() -> None:
    model = RecordingModel()
    encoder = Encoder(model, "recording")
    assert encoder.encode([]).shape == (0, 2)
    assert encoder.encode(TEXTS[:3]).shape == (3, 2)
    assert len(model.calls) == 1


def test_chunked_minilm_equals_one_shot_minilm() -> None:
    require_module("sentence_transformers")
    encoder = load_encoder(precision="float32")
    one_shot = encoder.encode(TEXTS)
    chunked = encoder.encode(TEXTS, chunk_size=3)
    assert chunked.shape == (len(TEXTS), encoder.dim)
    np.testing.assert_allclose(chunked, one_shot, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(chunked, axis=1), 1.0, atol=1e-5)


def test_release_freed_memory_calls_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert embed_module._malloc_trim() is not None  # glibc's malloc_trim was found
    calls: list[int] = []
    monkeypatch.setattr(embed_module, "_malloc_trim", lambda: calls.append)
    release_freed_memory()
    assert calls == [0]  # trim everything above the heap's top
    monkeypatch.setattr(embed_module, "_malloc_trim", lambda: None)
    release_freed_memory()  # without glibc: nothing to call, no error
    assert calls == [0]


def test_bfloat16_vectors_are_unit_length_and_close_to_float32() -> None:
    require_module("sentence_transformers")
    exact = load_encoder(precision="float32")
    fast = load_encoder(precision="bfloat16")
    assert (exact.cache_key, fast.cache_key) == ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2+bf16")
    vectors = fast.encode(TEXTS, chunk_size=4)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * exact.encode(TEXTS), axis=1)
    assert cosines.min() > 0.999


def test_precision_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DECISIONRAG_EMBED_PRECISION", "bfloat16")
    assert resolve_precision() == "bfloat16"
    assert resolve_precision("float32") == "float32"
    monkeypatch.setenv("DECISIONRAG_EMBED_PRECISION", "auto")
    assert resolve_precision() in ("float32", "bfloat16")
    assert resolve_precision(device="mps") == "float32"


def test_unknown_precision_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISIONRAG_EMBED_PRECISION", "fp8")
    with pytest.raises(InputError, match="DECISIONRAG_EMBED_PRECISION"):
        resolve_precision()
