"""A BERT sentence encoder in pure numpy: the query-time encoder that needs no torch.

It runs the forward pass of a sentence-transformers folder made of a ``BertModel``
(absolute positions, GELU in its erf form, post-LayerNorm), mean pooling over the attention
mask and L2 normalisation — the bundled all-MiniLM-L6-v2 (6 layers, 384 hidden, 12 heads).
Weights come from ``model.safetensors`` (``safetensors.numpy``), tokens from ``tokenizer.json``
(the ``tokenizers`` library), truncated to the folder's ``max_seq_length`` as
sentence-transformers truncates. Neither imports torch or transformers: a process that only
embeds queries stays small (docs/benchmarks.md, "Vectors at NQ scale").

Everything is float32. A batch is padded to its longest text and masked, so a text's vector
does not depend on the batch it is encoded in (to float32 rounding); texts are batched by
length. `tests/test_bert.py` checks the vectors against sentence-transformers' own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import InputError, missing_extra
from ._progress import Step, within

F32 = np.float32
MASKED = F32(-1e9)  # added to attention logits of padding: exp() of it is exactly 0
BATCH_SIZE = 32  # texts per forward pass at most
# padded tokens per forward pass at most: 8 texts of 256 tokens, whose attention scores
# (12 heads) take 25 MB; queries, being short, go 32 at a time
TOKEN_BUDGET = 2048

# erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (erf is +-1 in float32 beyond), the rational
# approximation Eigen and XLA use for float32; |error| < 5e-7 evaluated in float32.
_ERF_P = tuple(F32(c) for c in (-2.72614225801306e-10, 2.77068142495902e-08,
                                -2.10102402082508e-06, -5.69250639462346e-05,
                                -7.34990630326855e-04, -2.95459980854025e-03,
                                -1.60960333262415e-02))
_ERF_Q = tuple(F32(c) for c in (-1.45660718464996e-05, -2.13374055278905e-04,
                                -1.68282697438203e-03, -7.37332916720468e-03,
                                -1.42647390514189e-02))


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, float32 (see `_ERF_P`)."""
    return _erf_times(np.array(x, dtype=F32), None)


def _erf_times(t: np.ndarray, factor: np.ndarray | None) -> np.ndarray:
    """erf(t) (times `factor` when given), overwriting `t`; three buffers of t's size."""
    np.clip(t, F32(-4.0), F32(4.0), out=t)
    t2 = t * t
    p = t2 * _ERF_P[0]
    p += _ERF_P[1]
    for c in _ERF_P[2:]:
        p *= t2
        p += c
    p *= t
    if factor is not None:
        p *= factor
    np.multiply(t2, _ERF_Q[0], out=t)
    t += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        t *= t2
        t += c
    p /= t
    return p


def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) = x (1 + erf(x / sqrt 2)) / 2, the exact form (Hugging Face's "gelu")."""
    half = x * F32(0.5)
    out = _erf_times(x * F32(1 / np.sqrt(2.0)), half)
    out += half
    return out


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.mean(centred * centred, axis=-1, keepdims=True)
    centred /= np.sqrt(variance + F32(eps))
    centred *= weight
    centred += bias
    return centred


@dataclass(frozen=True, slots=True)
class Layer:
    """One transformer layer; matrices are (in, out) views, so activations multiply them directly."""

    qkv: np.ndarray  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_bias: np.ndarray
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: np.ndarray
    intermediate_bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


class TokenEmbeddings:
    """The word-embedding matrix, read row by row from safetensors' memory map of the file
    (kept open): a query touches the pages of its own tokens only, where a copy of the
    matrix would hold 47 MB (all-MiniLM-L6-v2's 30,522 x 384) resident for good."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.rows = handle.get_slice(name)
        count, self.dim = (int(n) for n in self.rows.get_shape())
        self.shape = (count, self.dim)

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(ids, return_inverse=True)
        table = np.empty((len(unique), self.dim), dtype=F32)
        for row, token in enumerate(unique.tolist()):
            table[row] = self.rows[token:token + 1][0]
        return table[inverse.reshape(ids.shape)]

    def close(self) -> None:
        self.handle.__exit__(None, None, None)


@dataclass(frozen=True, slots=True)
class BertWeights:
    words: TokenEmbeddings | np.ndarray
    positions: np.ndarray
    token_type: np.ndarray  # row 0: every token is of segment 0
    embedding_norm: tuple[np.ndarray, np.ndarray]
    layers: tuple[Layer, ...]
    heads: int
    eps: float

    @property
    def hidden(self) -> int:
        return int(self.positions.shape[1])


def forward(weights: BertWeights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Last hidden states (batch, tokens, hidden) of token `ids` with attention `mask` (1 =
    token, 0 = padding). Dense layers multiply (batch * tokens, hidden) matrices: one GEMM,
    where a 3-d operand would be one small GEMM per text."""
    batch, length = ids.shape
    hidden, heads = weights.hidden, weights.heads
    size = hidden // heads
    x = weights.words[ids] + weights.positions[:length] + weights.token_type
    x = layer_norm(x.astype(F32, copy=False).reshape(batch * length, hidden),
                   *weights.embedding_norm, weights.eps)
    padding = np.where(mask[:, None, None, :] > 0, F32(0.0), MASKED).astype(F32)
    scale = F32(1.0 / np.sqrt(size))
    for layer in weights.layers:
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        qkv = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]  # (batch, heads, tokens, size)
        scores = query @ key.transpose(0, 1, 3, 2)
        scores *= scale
        scores += padding
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
        attended = context @ layer.attention_out
        attended += layer.attention_out_bias
        attended += x
        x = layer_norm(attended, *layer.attention_norm, weights.eps)
        inner = x @ layer.intermediate
        inner += layer.intermediate_bias
        out = gelu(inner) @ layer.output
        out += layer.output_bias
        out += x
        x = layer_norm(out, *layer.output_norm, weights.eps)
    return x.reshape(batch, length, hidden)


def mean_pool(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token states under the mask, L2-normalised (sentence-transformers'
    Pooling(mean) then Normalize)."""
    weights = mask.astype(F32)[:, :, None]
    summed = (states * weights).sum(axis=1)
    summed /= np.maximum(weights.sum(axis=1), F32(1e-9))
    summed /= np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), F32(1e-12))
    return summed


# -- the folder ----------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not readable as JSON ({exc})") from exc
    if not isinstance(data, (dict, list)):
        raise InputError(f"{path}: expected a JSON object")
    return data if isinstance(data, dict) else {"modules": data}


def _require(path: Path, config: dict[str, Any], field: str, allowed: Sequence[Any]) -> None:
    value = config.get(field, allowed[0])
    if value not in allowed:
        raise InputError(f"{path}: {field}={value!r}; the numpy encoder runs "
                         f"{' or '.join(map(repr, allowed))} only (use encoder=torch)")


def check_folder(folder: Path) -> dict[str, Any]:
    """The BERT config of a sentence-transformers folder, after checking the numpy encoder
    computes what sentence-transformers would: a BERT with absolute positions and erf GELU,
    mean pooling only, normalised output. InputError names the file and field otherwise."""
    config_path = folder / "config.json"
    config = _read_json(config_path)
    _require(config_path, config, "model_type", ["bert"])
    _require(config_path, config, "hidden_act", ["gelu"])
    _require(config_path, config, "position_embedding_type", ["absolute"])
    modules_path = folder / "modules.json"
    modules = [str(m.get("type", "")).rsplit(".", 1)[-1]
               for m in _read_json(modules_path).get("modules", [])]
    if modules[:2] != ["Transformer", "Pooling"] or "Normalize" not in modules[2:] or any(
            m not in ("Normalize",) for m in modules[2:]):
        raise InputError(f"{modules_path}: modules {modules}; the numpy encoder runs "
                         "Transformer, Pooling, Normalize only (use encoder=torch)")
    pooling_path = folder / "1_Pooling" / "config.json"
    pooling = _read_json(pooling_path)
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if modes != ["pooling_mode_mean_tokens"]:
        raise InputError(f"{pooling_path}: pooling {modes}; the numpy encoder runs mean "
                         "pooling only (use encoder=torch)")
    return config


def load_weights(folder: Path, config: dict[str, Any]) -> BertWeights:
    """The model's tensors from ``model.safetensors``: the word embeddings stay in
    safetensors' memory map (`TokenEmbeddings`); the rest is copied out one layer at a time
    with the map closed in between (its pages count as resident while it is open, and
    holding all of them beside the copies would double the peak).
    Projection matrices are kept as stored, (out, in), and used through their transposed
    views (BLAS reads them transposed without a copy)."""
    try:
        from safetensors import safe_open
    except ImportError as exc:
        raise missing_extra("safetensors", "embedded") from exc
    path = folder / "model.safetensors"
    try:
        with safe_open(str(path), framework="numpy") as handle:
            names = set(handle.keys())
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in names else ""

        def group() -> _Tensors:
            return _Tensors(path, safe_open(str(path), framework="numpy"), names, prefix)

        words = _token_embeddings(path, prefix, names)
        with group() as tensors:
            embeddings = (words, tensors.take("embeddings.position_embeddings.weight"),
                          tensors.take("embeddings.token_type_embeddings.weight")[0],
                          tensors.norm("embeddings.LayerNorm"))
        layers = []
        for index in range(int(config["num_hidden_layers"])):
            with group() as tensors:
                layers.append(_layer(tensors, f"encoder.layer.{index}."))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable weights ({exc}); the numpy encoder needs "
                         "model.safetensors") from exc
    return BertWeights(*embeddings, layers=tuple(layers),
                       heads=int(config["num_attention_heads"]),
                       eps=float(config.get("layer_norm_eps", 1e-12)))


def _token_embeddings(path: Path, prefix: str, names: set[str]) -> TokenEmbeddings:
    from safetensors import safe_open

    name = prefix + "embeddings.word_embeddings.weight"
    if name not in names:
        raise InputError(f"{path}: no tensor {name!r}")
    handle = safe_open(str(path), framework="numpy")
    handle.__enter__()
    return TokenEmbeddings(handle, name)  # rows of another dtype become float32 on reading


class _Tensors:
    """Copies of tensors out of one open safetensors file (a context manager closing it)."""

    def __init__(self, path: Path, handle: Any, names: set[str], prefix: str) -> None:
        self.path, self.handle, self.names, self.prefix = path, handle, names, prefix

    def __enter__(self) -> _Tensors:
        self.handle.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.__exit__(*exc)

    def take(self, name: str) -> np.ndarray:
        full = self.prefix + name
        if full not in self.names:
            raise InputError(f"{self.path}: no tensor {full!r}")
        return np.asarray(self.handle.get_tensor(full), dtype=F32)

    def norm(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.take(f"{name}.weight"), self.take(f"{name}.bias")

    def linear(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.take(f"{name}.weight").T, self.take(f"{name}.bias")


def _layer(tensors: _Tensors, base: str) -> Layer:
    projections = [tensors.linear(base + f"attention.self.{p}") for p in ("query", "key", "value")]
    attention_out = tensors.linear(base + "attention.output.dense")
    intermediate = tensors.linear(base + "intermediate.dense")
    output = tensors.linear(base + "output.dense")
    return Layer(
        qkv=np.concatenate([w.T for w, _ in projections], axis=0).T,
        qkv_bias=np.concatenate([b for _, b in projections]),
        attention_out=attention_out[0], attention_out_bias=attention_out[1],
        attention_norm=tensors.norm(base + "attention.output.LayerNorm"),
        intermediate=intermediate[0], intermediate_bias=intermediate[1],
        output=output[0], output_bias=output[1],
        output_norm=tensors.norm(base + "output.LayerNorm"))


def max_tokens(folder: Path, config: dict[str, Any]) -> int:
    """Tokens per text, special tokens included: the folder's ``max_seq_length`` (what
    sentence-transformers truncates to), at most the model's positions."""
    settings = folder / "sentence_bert_config.json"
    limit = _read_json(settings).get("max_seq_length") if settings.is_file() else None
    positions = int(config.get("max_position_embeddings", 512))
    return min(int(limit), positions) if limit else positions


class NumpyEncoder:
    """Encodes texts into L2-normalised float32 vectors with a BERT folder, in numpy.

    The same shape as `decisionrag._embed.Encoder` (`encode`, `dim`, `name`, `precision`,
    `cache_key`), so the embedded judge and the dense retriever hold either."""

    precision = "float32"

    def __init__(self, folder: str | os.PathLike[str], name: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise missing_extra("tokenizers", "embedded") from exc
        path = Path(folder)
        config = check_folder(path)
        self.name = name
        self.cache_key = name  # float32 adds nothing (`_embed.precision_tag`)
        self.folder = path
        self.max_tokens = max_tokens(path, config)
        settings = path / "sentence_bert_config.json"
        self.lower_case = bool(settings.is_file() and _read_json(settings).get("do_lower_case"))
        self.weights = load_weights(path, config)
        self.dim = self.weights.hidden
        try:
            self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # the Rust library raises plain Exceptions
            raise InputError(f"{path / 'tokenizer.json'}: unreadable tokenizer ({exc})") from exc
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_tokens, strategy="longest_first")

    def __repr__(self) -> str:
        return f"<NumpyEncoder {self.name} {self.dim}-d, {self.max_tokens} tokens>"

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, with [CLS]/[SEP] and truncated as sentence-transformers does."""
        inputs = [t.lower() if self.lower_case else t for t in texts]
        return [list(e.ids) for e in self.tokenizer.encode_batch(inputs)]

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE,
               progress: bool | Step = False, chunk_size: int | None = None) -> np.ndarray:
        """Vectors of `texts`, in their order; texts of similar length are batched together.
        `progress`: show an "embedding" step, or advance the caller's `Step`, by batch
        (`chunk_size` is accepted for `Encoder`'s signature and unused)."""
        del chunk_size
        out = np.zeros((len(texts), self.dim), dtype=F32)
        if not texts:
            return out
        tokens = self.tokenize(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(tokens[i]))
        start = 0
        with within(progress, "embedding", len(texts), "texts") as shown:
            shown.expect(sum(len(t) for t in tokens))  # longest first: time goes by tokens
            while start < len(order):
                longest = len(tokens[order[start]])
                count = max(1, min(int(batch_size), TOKEN_BUDGET // max(1, longest)))
                chunk = order[start:start + count]
                out[chunk] = self._encode_ids([tokens[i] for i in chunk])
                start += count
                shown.advance(len(chunk), cost=sum(len(tokens[i]) for i in chunk))
        return out

    def encode_chunk(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        return self.encode(texts, batch_size)

    def _encode_ids(self, tokens: Sequence[Sequence[int]]) -> np.ndarray:
        length = max(len(t) for t in tokens)
        ids = np.zeros((len(tokens), length), dtype=np.int64)
        mask = np.zeros((len(tokens), length), dtype=np.int64)
        for row, sequence in enumerate(tokens):
            ids[row, :len(sequence)] = sequence
            mask[row, :len(sequence)] = 1
        return mean_pool(forward(self.weights, ids, mask), mask)
