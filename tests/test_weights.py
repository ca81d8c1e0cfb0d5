"""Known-answer tests for LW, CW, SW, re-weighting, Weighted-e and downscaling weights."""

import numpy as np
import pytest

from dpsynth.errors import InputError
from dpsynth.mechanisms import weights


def test_lw_weights_hand_computed():
    # f = (1, 2, 3, 5): f~ = (0, .25, .5, 1); c = 1, g = 0 -> alpha = 1 - f~
    f = np.array([1.0, 2.0, 3.0, 5.0])
    assert np.allclose(weights.lw_weights(f), [1.0, 0.75, 0.5, 0.0])
    # c = 0.8, g = 0.1 -> 0.8 (1 - f~) + 0.1
    assert np.allclose(weights.lw_weights(f, c=0.8, g=0.1), [0.9, 0.7, 0.5, 0.1])


def test_lw_weights_clip_and_nonfinite():
    f = np.array([1.0, 3.0, np.inf])
    # finite f~ = (0, 1); c = 2, g = 0.5 -> (2.5, 0.5) -> clipped (1, 0.5); inf -> 0
    assert np.allclose(weights.lw_weights(f, c=2.0, g=0.5), [1.0, 0.5, 0.0])
    assert np.allclose(weights.lw_weights(np.array([2.0, 2.0])), [1.0, 1.0])


def test_cw_risks_and_weights_hand_computed():
    y = np.array([0.0, 1.0, 2.0, 10.0])
    # radius 1: record 0 has {0,1} inside -> 2 of 4 outside -> IR 0.5
    # record 1: {0,1,2} inside -> IR 0.25; record 2: {1,2} -> 0.5; record 3: {10} -> 0.75
    assert np.allclose(weights.cw_risks(y, 1.0), [0.5, 0.25, 0.5, 0.75])
    assert np.allclose(weights.cw_weights(y, 1.0), [0.5, 0.75, 0.5, 0.25])
    assert np.allclose(weights.cw_weights(y, 1.0, c=0.5, g=0.6), [0.85, 0.975, 0.85, 0.725])


def test_cw_risks_two_dimensional_matches_one_dimensional():
    y = np.array([0.0, 1.0, 2.0, 10.0])
    two_d = np.column_stack([y, np.zeros(4)])
    assert np.allclose(weights.cw_risks(two_d, 1.0), weights.cw_risks(y, 1.0))


def test_sw_weight():
    assert weights.sw_weight(10.0, 2.5) == pytest.approx(0.25)
    assert weights.sw_weight(2.0, 5.0) == 1.0


def test_reweighted_equation_6():
    alpha = np.array([1.0, 0.5, 0.2, 0.0])
    bounds = np.array([4.0, 2.0, 1.0, 0.0])  # Delta = 4
    # k alpha Delta / Delta_i with k = .9: (.9, .9, .72, 0)
    assert np.allclose(weights.reweighted(alpha, bounds, 0.9), [0.9, 0.9, 0.72, 0.0])
    # clipped to 1
    assert weights.reweighted(np.array([1.0, 0.9]), np.array([4.0, 1.0]), 0.9).max() == 1.0
    with pytest.raises(InputError, match="^k:"):
        weights.reweighted(alpha, bounds, 1.5)


def test_reweighted_against_a_given_delta():
    """Reference re-weighting: Delta is the reference's Weighted bound, not the data's max."""
    alpha = np.array([1.0, 0.5, 0.2])
    bounds = np.array([1.0, 2.0, 0.5])  # the data's max would be 2
    # k alpha Delta / Delta_i with k = .95, Delta = 3: (2.85 -> 1, .7125, 1.14 -> 1)
    np.testing.assert_allclose(
        weights.reweighted(alpha, bounds, 0.95, delta=3.0), [1.0, 0.7125, 1.0]
    )
    np.testing.assert_allclose(weights.reweighted(alpha, bounds, 0.95), [1.0, 0.475, 0.76])


def test_lw_truncation_bounds_and_the_two_weighted_e_rules():
    """The lw-bound reading: alpha_i f_i with the Unweighted bounds f_i that built alpha
    (hand computed); the weighted-fit reading reads other bounds and zeroes other records."""
    f = np.array([1.0, 3.0, 5.0, 9.0, np.inf])
    alpha = weights.lw_weights(f)  # (1 - (f - 1) / 8): 1, .75, .5, 0, and 0 for inf
    np.testing.assert_allclose(alpha, [1.0, 0.75, 0.5, 0.0, 0.0])
    b = weights.lw_truncation_bounds(alpha, f)
    np.testing.assert_allclose(b, [1.0, 2.25, 2.5, 0.0, 0.0])
    # eps = 4.6, M = 2.3: only record 3 (2.5 > 2.3) is newly truncated
    np.testing.assert_allclose(weights.weighted_e_weights(alpha, b, 4.6), [1, 0.75, 0, 0, 0])
    # the same weights against (made-up) Weighted-fit bounds truncate record 2 instead
    fitted = np.array([1.1, 2.4, 2.2, 0.0, 0.0])
    np.testing.assert_allclose(weights.weighted_e_weights(alpha, fitted, 4.6), [1, 0, 0.5, 0, 0])
    assert weights.WEIGHTED_E_RULES == ("weighted-fit", "lw-bound")


def test_weighted_e_and_downscale():
    alpha = np.array([1.0, 0.8, 0.5])
    bounds = np.array([1.0, 2.6, 2.4])
    assert np.allclose(weights.weighted_e_weights(alpha, bounds, 5.0), [1.0, 0.0, 0.5])
    assert np.allclose(weights.downscaled(alpha, 0.5), [0.5, 0.4, 0.25])
    with pytest.raises(InputError, match="^downscale:"):
        weights.downscaled(alpha, 0.0)


def test_reference_lw_weights_known_answer_and_record_locality():
    """Reference normalisation (bounds 1..3): f = 1 -> 1, 2 -> 0.5, 3 -> 0, outside clipped;
    a record's weight does not change when another record changes (what the censoring
    proof needs), unlike LW weights normalised on the data themselves."""
    ref = np.array([1.0, 2.0, 3.0])
    alpha = weights.reference_lw_weights(np.array([1.0, 2.0, 3.0, 0.5, 9.0, np.inf]), ref)
    np.testing.assert_allclose(alpha, [1.0, 0.5, 0.0, 1.0, 0.0, 0.0])
    a1 = weights.reference_lw_weights(np.array([1.5, 2.5, 2.0]), ref, c=0.8, g=0.1)
    a2 = weights.reference_lw_weights(np.array([1.5, 2.5, 50.0]), ref, c=0.8, g=0.1)
    np.testing.assert_allclose(a1[:2], a2[:2])
    np.testing.assert_allclose(a1[:2], [0.8 * 0.75 + 0.1, 0.8 * 0.25 + 0.1])
    lw1 = weights.lw_weights(np.array([1.5, 2.5, 2.0]))
    lw2 = weights.lw_weights(np.array([1.5, 2.5, 50.0]))
    assert not np.allclose(lw1[:2], lw2[:2])
