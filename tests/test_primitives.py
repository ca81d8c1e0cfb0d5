"""Tests of dpsynth.privacy: Laplace / exponential mechanisms and the budget ledger."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.privacy import (
    BudgetExceededError,
    BudgetLedger,
    exponential_mechanism,
    exponential_probabilities,
    laplace_mechanism,
    laplace_scale,
)

SEED = 20240601


def test_laplace_scale_is_sensitivity_over_epsilon():
    assert laplace_scale(2.0, 0.5) == pytest.approx(4.0)


def test_laplace_noise_matches_scale_ks():
    # KS, seed 20240601, 20,000 draws: accept at p > 0.01; a 20% wrong scale is rejected (p < 1e-6).
    rng = np.random.default_rng(SEED)
    noise = laplace_mechanism(np.zeros(20_000), sensitivity=2.0, epsilon=0.5, rng=rng)
    assert noise.shape == (20_000,)
    assert stats.kstest(noise, stats.laplace(scale=4.0).cdf).pvalue > 0.01
    assert stats.kstest(noise, stats.laplace(scale=4.8).cdf).pvalue < 1e-6


def test_laplace_scalar_in_float_out_and_reproducible():
    a = laplace_mechanism(3.0, 1.0, 1.0, np.random.default_rng(1))
    b = laplace_mechanism(3.0, 1.0, 1.0, np.random.default_rng(1))
    assert isinstance(a, float) and a == b and a != 3.0


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_laplace_rejects_bad_epsilon(eps):
    with pytest.raises(InputError) as exc:
        laplace_mechanism(0.0, 1.0, eps, np.random.default_rng(0))
    assert exc.value.param == "epsilon"


@pytest.mark.parametrize("sens", [0.0, -2.0, float("inf"), float("nan")])
def test_laplace_rejects_bad_sensitivity(sens):
    with pytest.raises(InputError) as exc:
        laplace_scale(sens, 1.0)
    assert exc.value.param == "sensitivity"


def test_laplace_rejects_nan_value_and_non_generator():
    with pytest.raises(InputError, match="value"):
        laplace_mechanism(np.array([1.0, np.nan]), 1.0, 1.0, np.random.default_rng(0))
    with pytest.raises(InputError, match="rng"):
        laplace_mechanism(1.0, 1.0, 1.0, 42)  # type: ignore[arg-type]


def test_exponential_mechanism_frequencies_chi_square():
    # chi-square goodness of fit at seed 20240601, 20,000 selections: p > 0.01 for exp(eps u / 2 du)
    # proportions, and the uniform alternative is rejected (p < 1e-6).
    u = np.array([0.0, 1.0, 2.0, 3.0])
    eps, du = 1.0, 1.0
    rng = np.random.default_rng(SEED)
    picks = np.array([exponential_mechanism(u, du, eps, rng) for _ in range(20_000)])
    counts = np.bincount(picks, minlength=4)
    expected = np.exp(eps * u / (2 * du))
    expected = expected / expected.sum() * picks.size
    assert stats.chisquare(counts, expected).pvalue > 0.01
    assert stats.chisquare(counts, np.full(4, picks.size / 4)).pvalue < 1e-6


def test_exponential_probabilities_stable_for_huge_utilities():
    p = exponential_probabilities(np.array([1e6, 1e6 + 2.0]), 1.0, 1.0)
    assert p == pytest.approx([1 / (1 + np.e), np.e / (1 + np.e)])


def test_exponential_mechanism_rejects_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="utilities"):
        exponential_mechanism(np.array([]), 1.0, 1.0, rng)
    with pytest.raises(InputError, match="utilities"):
        exponential_mechanism(np.array([0.0, np.nan]), 1.0, 1.0, rng)
    with pytest.raises(InputError) as exc:
        exponential_mechanism(np.array([0.0, 1.0]), 1.0, -1.0, rng)
    assert exc.value.param == "epsilon"


def test_ledger_records_sequential_and_parallel_spends():
    led = BudgetLedger(1.0, param="--epsilon")
    led.spend("mean", 0.25, "x")
    cost = led.spend_parallel("histogram", {"men": 0.5, "women": 0.5})
    assert cost == 0.5
    assert led.spent == pytest.approx(0.75)
    assert led.remaining == pytest.approx(0.25)
    d = led.to_dict()
    json.dumps(d)
    assert [s["data"] for s in d["spends"]] == ["x", "men", "women"]
    assert [s["charged"] for s in d["spends"]] == [0.25, 0.5, 0.0]


@pytest.mark.parametrize("m", [3, 7, 10, 500])
def test_ledger_accepts_m_equal_shares_despite_rounding(m):
    led = BudgetLedger(0.7)
    for _ in range(m):
        led.spend("set", 0.7 / m)
    assert led.spent == pytest.approx(0.7)


def test_ledger_refuses_overspend_and_names_parameter():
    led = BudgetLedger(1.0, param="--epsilon")
    led.spend("a", 0.6)
    with pytest.raises(BudgetExceededError) as exc:
        led.spend("b", 0.5)
    assert exc.value.param == "--epsilon"
    assert led.spent == pytest.approx(0.6)  # the refused spend is not recorded
    with pytest.raises(BudgetExceededError):
        led.spend_parallel("c", {"g1": 0.1, "g2": 0.45})


def test_ledger_rejects_bad_total_and_bad_spend():
    with pytest.raises(InputError):
        BudgetLedger(0.0)
    with pytest.raises(InputError):
        BudgetLedger(1.0).spend("x", float("nan"))
