"""The foundations on disk: one atomic writer, one content-keyed cache, one version."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import numpy as np
import pytest

from decisionrag._files import ContentCache, atomic_write, cache_root, content_key


def test_atomic_write_leaves_the_old_file_or_the_new_one(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    atomic_write(target, "one")
    assert target.read_text() == "one" and oct(target.stat().st_mode & 0o777) == "0o644"

    def broken(stream: IO[bytes]) -> None:
        stream.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, broken)
    assert target.read_text() == "one"  # the old file, whole
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]  # no temporary left
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"


def test_content_keys_separate_their_parts() -> None:
    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key("m", ["a", "b"]) != content_key("m", ["ab"])
    assert content_key("m", ["a", "b"]) == content_key("m", ("a", "b"))
    assert len(content_key("x")) == 32


def test_content_cache_misses_on_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISIONRAG_CACHE_DIR", str(tmp_path / "root"))
    cache = ContentCache("things")
    assert cache.folder == cache_root() / "things" == tmp_path / "root" / "things"
    key = content_key("k")
    assert cache.read_json(key) is None and cache.read_array(key) is None
    cache.write_json(key, {"a": 1})
    cache.write_array(key, np.arange(3, dtype=np.float32))
    assert cache.read_json(key) == {"a": 1}
    assert cache.read_array(key).tolist() == [0.0, 1.0, 2.0]  # type: ignore[union-attr]
    cache.path(key, ".json").write_text("{broken")
    cache.path(key, ".npy").write_bytes(b"not numpy")
    assert cache.read_json(key) is None and cache.read_array(key) is None


def test_one_version_source() -> None:
    import decisionrag
    from decisionrag._version import __version__

    assert decisionrag.__version__ is __version__
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    assert 'version = { attr = "decisionrag._version.__version__" }' in pyproject.read_text()
