"""Paired bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest

from decisionrag._eval._bootstrap import compare, paired_bootstrap


def test_identical_systems_give_a_zero_interval() -> None:
    values = np.random.default_rng(1).integers(0, 2, size=200).astype(float)
    interval = paired_bootstrap(values, values, resamples=2000)
    assert (interval.diff, interval.low, interval.high) == (0.0, 0.0, 0.0)


def test_interval_contains_the_mean_difference_and_excludes_zero_for_a_clear_gain() -> None:
    rng = np.random.default_rng(2)
    baseline = rng.integers(0, 2, size=300).astype(float)
    better = np.maximum(baseline, rng.random(300) < 0.4)
    interval = paired_bootstrap(better, baseline)
    assert interval.low <= interval.diff <= interval.high
    assert interval.diff == pytest.approx(float((better - baseline).mean()))
    assert interval.excludes_zero()


def test_noise_only_interval_straddles_zero() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, size=300).astype(float)
    b = rng.permutation(a)
    interval = paired_bootstrap(a, b)
    assert interval.low < 0 < interval.high


def test_seeded_determinism() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random(100), rng.random(100)
    assert paired_bootstrap(a, b, seed=7) == paired_bootstrap(a, b, seed=7)
    assert paired_bootstrap(a, b, seed=7) != paired_bootstrap(a, b, seed=8)


def test_conversation_resampling_widens_the_interval_for_correlated_turns() -> None:
    # 20 conversations of 10 turns; all turns of a conversation share one difference
    rng = np.random.default_rng(5)
    per_conversation = rng.normal(0.0, 1.0, size=20)
    diffs = np.repeat(per_conversation, 10)
    clusters = [f"c{i}" for i in range(20) for _ in range(10)]
    by_query = paired_bootstrap(diffs, np.zeros_like(diffs))
    by_conversation = paired_bootstrap(diffs, np.zeros_like(diffs), clusters)
    assert by_conversation.diff == pytest.approx(by_query.diff)
    width_query = by_query.high - by_query.low
    width_conversation = by_conversation.high - by_conversation.low
    # resampling 20 clusters, not 200 independent turns: about sqrt(10) times wider
    assert width_conversation > 2.0 * width_query


def test_compare_pairs_by_id_and_detects_conversations() -> None:
    ids = [f"conv{c}<::>{t}" for c in range(10) for t in range(5)]
    system = {i: float(n % 3 == 0) for n, i in enumerate(ids)}
    baseline = {i: 0.0 for i in reversed(ids)}  # a different key order must not matter
    auto = compare(system, baseline)
    forced = compare(system, baseline, by_conversation=True)
    independent = compare(system, baseline, by_conversation=False)
    assert auto == forced
    assert auto != independent
    assert auto.n == 50
    assert auto.diff == pytest.approx(sum(system.values()) / 50)
