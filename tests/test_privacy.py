"""Lipschitz bounds, censoring invariants and counts on hand-made matrices."""

import numpy as np

from dpsynth import privacy


def test_record_and_database_bounds():
    ll = np.array([[-1.0, -4.0, 0.5], [-2.0, -1.0, -3.0]])  # S=2, n=3
    alpha = np.array([1.0, 0.5, 0.0])
    c = privacy.weighted_contributions(ll, alpha)
    assert np.allclose(c, [[-1.0, -2.0, 0.0], [-2.0, -0.5, 0.0]])
    assert np.allclose(privacy.record_bounds(c), [2.0, 2.0, 0.0])
    assert privacy.lipschitz_bound(c) == 2.0
    assert privacy.epsilon_of(2.0) == 4.0


def test_censoring_clamps_and_counts():
    rng = np.random.default_rng(3)
    ll = rng.standard_cauchy((50, 200)) * 10  # heavy tails
    alpha = rng.uniform(0, 1, 200)
    M = 1.5
    c = privacy.weighted_contributions(ll, alpha, M)
    assert np.all(np.abs(c) <= M)
    raw = privacy.weighted_contributions(ll, alpha)
    mask = privacy.censored_records(raw, M)
    # a record counts once if clamped in any draw
    expected = sum(1 for i in range(200) if np.any(np.abs(alpha[i] * ll[:, i]) > M))
    assert mask.sum() == expected
    assert 0 < expected < 200


def test_zero_weight_record_with_infinite_loglik_contributes_zero():
    ll = np.array([[-np.inf, -1.0]])
    c = privacy.weighted_contributions(ll, np.array([0.0, 1.0]))
    assert np.array_equal(c, [[0.0, -1.0]])
