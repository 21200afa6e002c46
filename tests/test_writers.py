"""Writers of one tree (issue 23): serialised by a lock beside it (both land, or one is refused
with a clear message), checked against the version they read, and the tree published with its
vectors and indexes or not at all — under Ctrl-C, SIGKILL and a crash between the renames.

The concurrency tests run real `decisionrag` processes."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from decisionrag._app import add_sources, build_tree, editing
from decisionrag._errors import InputError
from decisionrag._tree import DocumentSpec, PassageSpec, Tree, TreeWriter
from decisionrag._tree._publish import TreeBusy, TreeChanged, TreeLock, settle
from decisionrag._tree._staging import PENDING
from decisionrag._tree._vectors import NodeVectors, available_sets, vectors_folder

DIM = 16
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}


def _doc(folder: Path, name: str, words: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(f"# {name.title()}\n\n## About\n\n{words}\n")
    return path


def _keys(tree: Path) -> set[str]:
    with Tree.open(tree) as opened:
        return {node.key for node in opened.documents()}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "decisionrag", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or ENV)


# -- one writer at a time: real processes --------------------------------------------------------

@pytest.mark.parametrize("trial", range(3))
def test_two_concurrent_adds_both_land(tmp_path: Path, trial: int) -> None:
    tree = tmp_path / "docs.tree"
    build_tree([_doc(tmp_path / "base", "base", "The base document.")], tree, vectors=False)
    many = tmp_path / "many"
    for i in range(3000):  # a slow add (seconds), so that the small one runs inside it
        _doc(many, f"m{i:04d}", f"Document {i} about renewal and fees.")
    one = _doc(tmp_path / "one", "visas", "Apply for a visa at the embassy.")
    first = _cli("add", str(tree), str(many), "--quiet")
    time.sleep(0.15 * trial)
    second = _cli("add", str(tree), str(one), "--quiet")
    results = [(p.wait(300), p.stderr.read() if p.stderr else "") for p in (first, second)]
    assert all(code == 0 for code, _ in results), results
    keys = _keys(tree)
    assert "visas.md" in keys and "m2999.md" in keys and "base.md" in keys
    assert len(keys) == 3002  # nothing of either was lost (without the lock: 3001)
    assert not list(tmp_path.glob(".docs.tree*"))  # no lock file, no temporary file left


def test_a_writer_that_cannot_wait_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    tree = tmp_path / "docs.tree"
    build_tree([_doc(tmp_path / "base", "base", "The base document.")], tree, vectors=False)
    extra = _doc(tmp_path / "extra", "visas", "Apply for a visa.")
    with TreeLock(tree):  # another writer holds it
        refused = _cli("add", str(tree), str(extra), "--quiet",
                       env={**ENV, "DECISIONRAG_LOCK_WAIT": "0.5"})
        code, err = refused.wait(60), refused.stderr.read() if refused.stderr else ""
    assert code == 2 and "Traceback" not in err
    assert "another decisionrag process is writing it (pid" in err and "try again" in err
    assert _keys(tree) == {"base.md"}
    landed = _cli("add", str(tree), str(extra), "--quiet")
    assert landed.wait(60) == 0
    assert _keys(tree) == {"base.md", "visas.md"}


@pytest.mark.parametrize("command", ["sync", "remove", "build"])
def test_other_writers_wait_for_the_lock_too(tmp_path: Path, command: str) -> None:
    docs = tmp_path / "docs"
    _doc(docs, "a", "Alpha.")
    _doc(docs, "b", "Beta.")
    tree = tmp_path / "docs.tree"
    build_tree([docs], tree, vectors=False)
    args = {"sync": ["sync", str(tree), str(docs), "--quiet"],
            "remove": ["remove", str(tree), "a.md", "--quiet"],
            "build": ["build", str(docs), "-o", str(tree), "--quiet", "--no-vectors"]}[command]
    lock = TreeLock(tree).acquire()
    started = time.monotonic()
    waiting = _cli(*args)
    threading.Timer(1.5, lock.release).start()
    assert waiting.wait(60) == 0, waiting.stderr.read() if waiting.stderr else ""
    assert time.monotonic() - started >= 1.4  # it waited for the holder


def test_an_edit_refuses_to_replace_a_tree_changed_under_it(tmp_path: Path) -> None:
    tree = tmp_path / "docs.tree"
    build_tree([_doc(tmp_path / "a", "alpha", "Alpha.")], tree, vectors=False)
    other = tmp_path / "other.tree"
    build_tree([_doc(tmp_path / "b", "beta", "Beta.")], other, vectors=False)
    writer = TreeWriter.update(tree)  # reads the tree now...
    os.replace(other, tree)  # ...which a writer that took no lock then replaces
    with pytest.raises(TreeChanged, match="was replaced while this change ran"), writer:
        writer.add_document(DocumentSpec("Gamma", [PassageSpec("Gamma.")], key="gamma"))
    assert _keys(tree) == {"beta.md"}  # the other writer's file stands
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -- the tree and its vectors, together or not at all ---------------------------------------------

class SlowEncoder:
    """Bag of hashed words; `sleep` seconds a call (to be interrupted), `fail_after` calls."""

    name = "hash-words"
    precision = "float32"
    dim = DIM

    def __init__(self, sleep: float = 0.0, fail_after: int | None = None) -> None:
        self.sleep, self.fail_after, self.calls = sleep, fail_after, 0

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt  # what Ctrl-C raises in the middle of the vectors
        time.sleep(self.sleep)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _consistent(tree: Path) -> tuple[str, ...]:
    """The tree's document keys, after checking its vectors are its own (else this raises)."""
    with Tree.open(tree) as opened:
        stored = NodeVectors.open(tree, opened.meta, model="hash-words")
        assert stored.header.rows > max(node.id for node in opened.iter_passages())
        return tuple(sorted(node.key for node in opened.documents()))


def _with_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: SlowEncoder) -> None:
    import decisionrag._embed

    monkeypatch.setattr(decisionrag._embed, "load_vector_encoder", lambda *a, **k: encoder)


def _leftovers(tmp_path: Path) -> list[str]:
    found = [p.name for p in tmp_path.rglob("*") if p.name.endswith((".tmp", PENDING, ".lock"))]
    return sorted(found)


def test_ctrl_c_in_the_vectors_of_a_rebuild_keeps_the_old_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "docs.tree"
    _with_vectors(tmp_path, monkeypatch, SlowEncoder())
    build_tree([_doc(tmp_path / "old", "alpha", "Alpha renewal.")], tree, vectors=True)
    before = _consistent(tree)
    files = sorted(p.name for p in vectors_folder(tree).iterdir())
    _with_vectors(tmp_path, monkeypatch, SlowEncoder(fail_after=0))
    new = tmp_path / "new"
    for i in range(5):
        _doc(new, f"n{i}", f"New document {i}.")
    with pytest.raises(KeyboardInterrupt):
        build_tree([new], tree, vectors=True)
    assert _consistent(tree) == before  # the old tree, with its own vectors
    assert sorted(p.name for p in vectors_folder(tree).iterdir()) == files
    assert _leftovers(tmp_path) == []


def test_a_failed_add_leaves_the_tree_and_its_vectors(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from decisionrag._app._build import refresh_vectors

    tree = tmp_path / "docs.tree"
    _with_vectors(tmp_path, monkeypatch, SlowEncoder())
    build_tree([_doc(tmp_path / "old", "alpha", "Alpha renewal.")], tree, vectors=True)
    before = _consistent(tree)
    _with_vectors(tmp_path, monkeypatch, SlowEncoder(fail_after=0))
    with pytest.raises(KeyboardInterrupt), editing(tree):  # what `decisionrag add` runs
        add_sources(tree, [_doc(tmp_path / "more", "beta", "Beta fees.")])
        refresh_vectors(tree)
    assert _consistent(tree) == before
    assert _leftovers(tmp_path) == []


def test_a_crash_between_the_tree_and_its_vectors_reads_the_new_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL after the tree's rename, before the pending vectors are promoted: readers
    take the pending ones (they match the new tree), and the next writer promotes them."""
    tree = tmp_path / "docs.tree"
    _with_vectors(tmp_path, monkeypatch, SlowEncoder())
    build_tree([_doc(tmp_path / "old", "alpha", "Alpha renewal.")], tree, vectors=True)

    def crash_after_the_rename(publication: object) -> None:
        staged = publication.staged  # type: ignore[attr-defined]
        os.replace(staged, tree)
        raise SystemExit("killed")  # before `settle` promotes anything

    monkeypatch.setattr("decisionrag._tree._publish.publish", crash_after_the_rename)
    monkeypatch.setattr("decisionrag._tree._publish.discard", lambda publication: None)  # dead
    with pytest.raises(SystemExit):
        build_tree([_doc(tmp_path / "new", "beta", "Beta fees.")], tree, vectors=True)
    monkeypatch.undo()
    assert any(p.name.endswith(PENDING) for p in vectors_folder(tree).iterdir())
    assert _consistent(tree) == ("beta.md",)  # the new tree, with the new (pending) vectors
    settle(tree)
    assert not any(p.name.endswith(PENDING) for p in vectors_folder(tree).iterdir())
    assert _consistent(tree) == ("beta.md",)
    assert len(available_sets(tree)) == 1


def test_sigkill_during_the_vectors_of_a_rebuild_keeps_the_old_pair(tmp_path: Path) -> None:
    """A real process killed (SIGKILL) while its rebuild computes vectors."""
    script = f"""
import sys, time
import numpy as np
sys.path[:0] = {sys.path!r}
import decisionrag._embed
from test_writers import SlowEncoder
encoder = SlowEncoder()
decisionrag._embed.load_vector_encoder = lambda *a, **k: encoder
from decisionrag._app import build_tree
if sys.argv[1] == "old":
    build_tree([sys.argv[2]], sys.argv[3], vectors=True)
else:
    encoder.sleep = 30
    original = encoder.encode
    def encode(texts, **k):
        print("ENCODING", flush=True)
        return original(texts, **k)
    encoder.encode = encode
    build_tree([sys.argv[2]], sys.argv[3], vectors=True)
"""
    tree = tmp_path / "docs.tree"
    old = _doc(tmp_path / "old", "alpha", "Alpha renewal.")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    subprocess.run([sys.executable, "-c", script, "old", str(old), str(tree)], env=env,
                   check=True, timeout=120)
    before = _consistent(tree)
    new = tmp_path / "new"
    for i in range(5):
        _doc(new, f"n{i}", f"New document {i}.")
    rebuild = subprocess.Popen([sys.executable, "-c", script, "new", str(new), str(tree)],
                               env=env, stdout=subprocess.PIPE, text=True)
    assert rebuild.stdout is not None
    assert rebuild.stdout.readline().strip() == "ENCODING"
    rebuild.send_signal(signal.SIGKILL)
    rebuild.wait(30)
    assert _consistent(tree) == before  # the old tree and its own vectors
    # the next writer clears what the killed one left (its temporary tree file)
    build_tree([new], tree, vectors=False)
    assert _leftovers(tmp_path) == []


def test_a_lock_held_by_this_process_is_not_waited_for_twice(tmp_path: Path) -> None:
    tree = tmp_path / "docs.tree"
    build_tree([_doc(tmp_path / "a", "alpha", "Alpha.")], tree, vectors=False)
    with editing(tree):  # nested writers join the outer publication
        add_sources(tree, [_doc(tmp_path / "b", "beta", "Beta.")])
        add_sources(tree, [_doc(tmp_path / "c", "gamma", "Gamma.")])
        assert _keys(tree) == {"alpha.md", "beta.md", "gamma.md"}  # what it will publish
        seen: list[set[str]] = []
        reader = threading.Thread(target=lambda: seen.append(_keys(tree)))  # another reader
        reader.start()
        reader.join()
        assert seen == [{"alpha.md"}]  # not published yet
    assert _keys(tree) == {"alpha.md", "beta.md", "gamma.md"}
    with pytest.raises(TreeBusy), TreeLock(tree), TreeLock(tree, wait=0.2):
        pass
    assert isinstance(TreeBusy("x"), InputError)


@pytest.mark.parametrize("where", ["making the file", "opening a new tree", "copying a tree"])
def test_a_writer_interrupted_while_opening_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A SIGTERM (which the CLI turns into SystemExit) can land after the temporary file
    exists and before a writer is returned to be aborted: the file goes with the error."""
    from decisionrag import _files
    from decisionrag._tree import _writer

    tree = tmp_path / "t.tree"
    if where == "copying a tree":
        with TreeWriter(tree) as writer:
            writer.add_document(DocumentSpec("Title", [PassageSpec("text")], key="d"))
    before = sorted(tmp_path.iterdir())

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    if where == "making the file":
        monkeypatch.setattr(_files.os, "fchmod", interrupted)
    else:
        monkeypatch.setattr(_writer.TreeWriter, "_load_state" if where == "copying a tree"
                            else "_tune", interrupted)
    with pytest.raises(SystemExit):
        TreeWriter.update(tree) if where == "copying a tree" else TreeWriter(tree)
    assert sorted(tmp_path.iterdir()) == before


def test_a_lock_interrupted_while_taken_leaves_no_lock_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock file is the first file a build makes: a SIGTERM (SystemExit) that lands
    while the lock is being taken, before a caller holds it to release, takes it away."""
    def interrupted(_lock: TreeLock) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    monkeypatch.setattr(TreeLock, "_note_holder", interrupted)
    with pytest.raises(SystemExit):
        TreeLock(tmp_path / "t.tree").acquire()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    with TreeLock(tmp_path / "t.tree", wait=0):  # and nobody holds it
        pass
