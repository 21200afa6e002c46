"""The on-disk judgment cache: a second run hits, costs nothing and replays exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decisionrag._judges import BinaryRequest, Candidate, ChoiceRequest, ScriptedJudge, load_judge
from decisionrag._judges._cache import CachedJudge

CANDIDATES = (Candidate("a", "passport renewal form"), Candidate("b", "tax credit rates"),
              Candidate("c", "renew your passport online"))
BINARY = BinaryRequest("ctx", ("Page 1?", "Page 2?", "Page 3?"), query="renew passport",
                       candidates=CANDIDATES)
CHOICE = ChoiceRequest("ctx", "Which page?", ("Page 1", "Page 2", "Page 3"),
                       query="renew passport", candidates=CANDIDATES)


def priced_scripted() -> ScriptedJudge:
    judge = ScriptedJudge(name="scripted")
    judge.price_per_million_input = 0.042
    return judge


async def test_second_run_hits_the_cache_and_costs_nothing(tmp_path: Path) -> None:
    inner = priced_scripted()
    judge = CachedJudge(inner, tmp_path)
    first = await judge.binary(BINARY)
    second = await judge.binary(BINARY)
    assert first.usage.requests == 1 and first.usage.cached == 0
    assert first.usage.cost_usd is not None and first.usage.cost_usd > 0
    assert second.probabilities == first.probabilities
    assert second.usage.cached == 1 and second.usage.requests == 0
    assert second.usage.input_tokens == 0 and second.usage.cost_usd == 0.0
    assert len(inner.calls) == 1  # the judge was asked once


async def test_a_new_process_replays_from_disk(tmp_path: Path) -> None:
    first = await CachedJudge(priced_scripted(), tmp_path).choice(CHOICE)
    fresh_inner = ScriptedJudge(scores={"a": 0.0, "b": 0.0, "c": 1.0})  # would answer otherwise
    replay = await CachedJudge(fresh_inner, tmp_path).choice(CHOICE)
    assert replay.probabilities == first.probabilities
    assert fresh_inner.calls == []


async def test_any_change_to_the_request_is_a_miss(tmp_path: Path) -> None:
    inner = priced_scripted()
    judge = CachedJudge(inner, tmp_path)
    await judge.binary(BINARY)
    await judge.binary(BinaryRequest("ctx ", BINARY.questions, BINARY.query, BINARY.candidates))
    await judge.binary(BinaryRequest("ctx", ("Page 1?", "Page 2?", "Page 4?"), BINARY.query,
                                     BINARY.candidates))
    await judge.choice(CHOICE)
    assert len(inner.calls) == 4


async def test_the_judge_id_is_part_of_the_key(tmp_path: Path) -> None:
    one = priced_scripted()
    other = priced_scripted()
    other.name = "scripted-2"
    await CachedJudge(one, tmp_path).binary(BINARY)
    await CachedJudge(other, tmp_path).binary(BINARY)
    assert len(other.calls) == 1


async def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path: Path) -> None:
    inner = priced_scripted()
    judge = CachedJudge(inner, tmp_path)
    await judge.binary(BINARY)
    [entry] = list(tmp_path.glob("*/*.json"))
    entry.write_text("{half a file", encoding="utf-8")
    again = await judge.binary(BINARY)
    assert len(inner.calls) == 2 and again.usage.cached == 0
    stored = json.loads(entry.read_text(encoding="utf-8"))
    assert stored["probabilities"] == again.probabilities
    assert stored["usage"]["requests"] == 1  # the original usage is kept


def test_load_judge_with_judgment_cache(tmp_path: Path) -> None:
    judge = load_judge("simulated:latency=0.01,max_questions=64", judgment_cache=tmp_path / "cache")
    assert isinstance(judge, CachedJudge) and judge.name == "simulated:latency=0.01,max_questions=64"
    first = judge.binary_sync(BINARY)
    second = judge.binary_sync(BINARY)
    assert second.probabilities == first.probabilities
    assert (first.usage.requests, second.usage.requests, second.usage.cached) == (1, 0, 1)
    assert judge.limits.max_questions == 64  # the wrapped judge's limits show through


def test_an_unusable_cache_dir_is_a_config_error(tmp_path: Path) -> None:
    from decisionrag._errors import JudgeConfigError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(JudgeConfigError, match="judgment cache"):
        load_judge("scripted", judgment_cache=blocker / "cache")


def test_an_empty_path_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    judge = load_judge("scripted", judgment_cache="")
    assert not isinstance(judge, CachedJudge)
    judge.binary_sync(BINARY)
    assert list(tmp_path.iterdir()) == []


def test_cache_entries_are_readable_by_others(tmp_path: Path) -> None:
    judge = CachedJudge(priced_scripted(), tmp_path)
    judge.binary_sync(BINARY)
    [entry] = list(tmp_path.glob("*/*.json"))
    assert entry.stat().st_mode & 0o044 == 0o044
