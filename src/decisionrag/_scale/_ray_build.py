"""Ray Data as the build engine: parse sources and embed texts on a Ray cluster.

The expensive, embarrassingly parallel parts of a build — parsing files and embedding
document descriptions (and passages) — run as Ray Data pipelines; everything that decides
the tree (the order documents are written in, k-means, balancing, describing, the one
writer) runs on the driver exactly as on one machine. So for the same seed and the same
vectors the tree is the same, node for node, whichever engine built it.

Order is kept end to end (``preserve_order``): documents reach the writer in plan order and
vectors come back indexed by row, however the blocks were scheduled. Workers return pickled
results (a parse error travels back as a message, never as a worker crash), so the driver
reports it as the single-machine build would.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._embed import CHUNK_SIZE
from .._errors import InputError, missing_extra


@dataclass(frozen=True, slots=True)
class RayOptions:
    """How a build uses Ray.

    `address` joins a running cluster (``ray://host:10001`` or ``auto``); None starts a local
    instance with `num_cpus` CPUs (None: all). `batch_size` texts go to an encoder call
    (default: the local encoder's chunk, 1,024 — keep it so, and vectors are bit-identical to
    a one-machine build's on the same hardware; another size changes padding, so vectors by
    float rounding and possibly the groups);
    `workers` encoder actors run at once (None: one per GPU when the cluster has GPUs, else
    one per two CPUs); `precision` is the encoder's (``auto``, ``float32``, ``bfloat16``)."""

    address: str | None = None
    num_cpus: int | None = None
    batch_size: int = CHUNK_SIZE
    workers: int | None = None
    precision: str | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InputError(f"ray batch size must be at least 1, not {self.batch_size}")
        if self.workers is not None and self.workers < 1:
            raise InputError(f"ray workers must be at least 1, not {self.workers}")


def _ray() -> Any:
    try:
        import ray
        import ray.data  # Ray Data is the part a build needs
    except ImportError as exc:
        raise missing_extra("ray[data]", "ray") from exc
    return ray


@contextmanager
def ray_session(options: RayOptions) -> Iterator[Any]:
    """A connected Ray; a local instance started here is shut down on exit."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "ignore_reinit_error": True, "logging_level": logging.WARNING}
        if options.address:
            kwargs["address"] = options.address
        elif options.num_cpus is not None:
            kwargs["num_cpus"] = options.num_cpus
        ray.init(**kwargs)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _parse_row(row: dict[str, Any]) -> dict[str, Any]:
    """Worker side: parse one planned source; a failure comes back as a message."""
    from .._build import read_source  # workers import the package themselves

    source = pickle.loads(row["source"])
    try:
        result: Any = read_source(source)
    except InputError as exc:
        result = exc
    return {"i": row["i"], "result": pickle.dumps(result)}


def ray_read(plan: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
    """(source, result) for every planned source in plan order, parsed on Ray workers.

    `result` is what :func:`decisionrag._build.read_source` returns on one machine: a list of
    documents, or the reason the file is skipped. A parse error (malformed JSONL) raises
    here, on the driver, as the same `InputError`."""
    ray = _ray()
    if not plan:
        return
    items = [{"i": i, "source": pickle.dumps(source)} for i, source in enumerate(plan)]
    # one block a file, so files parse in parallel; a JSONL shard's documents are one row
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    for row in dataset.map(_parse_row).iter_rows():
        result = pickle.loads(row["result"])
        if isinstance(result, InputError):
            raise InputError(str(result)) from result
        yield plan[int(row["i"])], result


class _EncoderActor:
    """Worker side: one encoder per actor, loaded once, fed one chunk of texts per call."""

    def __init__(self, model: str | None, precision: str | None, max_tokens: int | None,
                 encode: bytes | None, threads: int) -> None:
        self.encode: Callable[[Sequence[str]], np.ndarray]
        if encode is not None:
            self.encode = pickle.loads(encode)  # cloudpickle output loads with pickle
            return
        import torch

        from .._embed import load_encoder

        torch.set_num_threads(threads)  # the driver's: same kernels, same bits
        encoder = load_encoder(model, precision=precision)
        if max_tokens is not None:  # descriptions are capped; passages keep the model's limit
            encoder.model.max_seq_length = min(encoder.model.max_seq_length or max_tokens,
                                               max_tokens)
        self.encode = lambda texts: encoder.encode_chunk(texts, batch_size=64)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = np.asarray(self.encode([str(t) for t in batch["text"]]), dtype=np.float32)
        return {"i": batch["i"], "vector": vectors}


def _torch_threads() -> int:
    try:
        import torch
    except ImportError:
        return 1
    return int(torch.get_num_threads())


def chunk_plan(texts: Sequence[str], chunk_size: int) -> list[np.ndarray]:
    """The row indices of each encoder call, as `Encoder.encode` makes them on one machine
    (one call for a small input; else longest first, `chunk_size` at a time), so a worker's
    call holds the same texts in the same order — same padding, same vectors."""
    if len(texts) <= chunk_size:
        return [np.arange(len(texts), dtype=np.int64)]
    order = np.argsort([-len(text) for text in texts], kind="stable")
    return [order[i:i + chunk_size] for i in range(0, len(texts), chunk_size)]


def _gpu_count(ray: Any) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def _actor_count(ray: Any, options: RayOptions) -> tuple[int, float]:
    """How many encoder actors, and the GPUs each takes."""
    gpus = _gpu_count(ray)
    if options.workers is not None:
        return options.workers, (gpus / options.workers if gpus else 0.0)
    if gpus:
        return gpus, 1.0
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // 2), 0.0


def ray_encoder(options: RayOptions, model: str | None = None, *, max_tokens: int | None = 64,
                encode: Callable[[Sequence[str]], np.ndarray] | None = None,
                ) -> Callable[[Sequence[str]], np.ndarray]:
    """An encode function (texts → raw float32 vectors, one row per text, in order) that
    runs on Ray Data encoder actors. `encode` replaces the sentence-transformers encoder in
    the workers (it must pickle); the caller normalises, as it does on one machine."""
    payload = _cloudpickle().dumps(encode) if encode is not None else None

    def run(texts: Sequence[str]) -> np.ndarray:
        ray = _ray()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        import pyarrow as pa

        blocks = [pa.table({"i": rows, "text": [texts[i] for i in rows]})
                  for rows in chunk_plan(texts, options.batch_size)]
        actors, gpus = _actor_count(ray, options)
        encoded = ray.data.from_arrow(blocks).map_batches(
            _EncoderActor,
            fn_constructor_args=(model, options.precision, max_tokens, payload, _torch_threads()),
            batch_size=None, batch_format="numpy",  # one call per block: one chunk of the plan
            compute=ray.data.ActorPoolStrategy(size=actors), num_gpus=gpus or None)
        out: np.ndarray | None = None
        for batch in encoded.iter_batches(batch_format="numpy", batch_size=None):
            vectors = np.asarray(batch["vector"], dtype=np.float32)
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[np.asarray(batch["i"], dtype=np.int64)] = vectors
        assert out is not None
        return out

    return run


def _ray_reader(plan: Sequence[Any], report: Any, advance: Callable[[int], None],
                ) -> Iterator[Any]:
    from .._build._sources import shown_name, source_size

    for source, result in ray_read(plan):
        advance(source_size(source.path))
        if isinstance(result, str):
            report.skipped.append((shown_name(source.path), result))
        else:
            yield from result


def build_on_ray(
    sources: Sequence[Any], out: Any, *, options: RayOptions | None = None, format: str = "auto",
    cluster: int | str | None = None, cluster_model: str | None = None,
    cluster_options: dict[str, Any] | None = None, progress: bool = False,
    encode: Callable[[Sequence[str]], np.ndarray] | None = None, force: bool = False,
    vectors: bool | str = False, vectors_model: str | None = None,
    vectors_precision: str | None = None,
) -> Any:
    """`decisionrag.build_tree` with parsing and embedding on Ray (see the module
    docstring); returns its `BuildReport`. `encode` replaces the workers' sentence encoder
    (it must pickle with cloudpickle). Embeddings are not cached: a distributed build is
    meant to run once, and its vectors are too many for the per-corpus cache file.
    `vectors` (True, False, ``"auto"``) stores the passage vectors beside the tree as
    `decisionrag.build_tree` does, with the passages embedded on Ray."""
    from .._app import build_tree, editing
    from .._tree import check_output

    options = options or RayOptions()
    check_output(out, sources, force=force)  # before the lock beside it is taken
    with ray_session(options), editing(out):  # the tree and its vectors published together
        cluster_options = dict(cluster_options or {})
        if cluster is not None:
            max_tokens = int(cluster_options.get("max_tokens", 64))
            cluster_options["encode"] = ray_encoder(options, cluster_model, max_tokens=max_tokens,
                                                    encode=encode)
            cluster_options["use_cache"] = False
        report = build_tree(sources, out, format=format, cluster=cluster,
                            cluster_model=cluster_model, cluster_options=cluster_options,
                            progress=progress, reader=_ray_reader, force=force,
                            vectors=False)  # embedded on Ray below, not locally
        if vectors:
            _store_vectors_on_ray(report, options, vectors is True, vectors_model,
                                  vectors_precision, encode)
        return report


def _store_vectors_on_ray(report: Any, options: RayOptions, required: bool, model: str | None,
                          precision: str | None,
                          encode: Callable[[Sequence[str]], np.ndarray] | None) -> None:
    """The tree's passage vectors embedded on Ray and filed under the model name and
    precision a local build would use, so judges accept them (`store_vectors` decides what
    a missing embedded extra means)."""
    from .._build._vectors import store_vectors
    from .._embed import DEFAULT_MODEL, require_sentence_transformers, resolve_precision

    name = model or ("custom" if encode is not None else DEFAULT_MODEL)
    resolved = (precision or "float32") if encode is not None else resolve_precision(precision)

    def encoder() -> Callable[[Sequence[str]], np.ndarray]:
        if encode is None:
            require_sentence_transformers()
        return ray_encoder(replace(options, precision=resolved), model, max_tokens=None,
                           encode=encode)

    store_vectors(report, required=required, model=name, precision=resolved, encoder=encoder)


def _cloudpickle() -> Any:
    return _ray().cloudpickle
