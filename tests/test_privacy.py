"""dpsynth.privacy.accounting: Laplace / exponential mechanisms (numpy and OpenDP noise), the budget
ledger, neighbour definitions, censoring bounds and the Lipschitz accounting."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.privacy import accounting
from dpsynth.privacy.accounting import (
    BudgetExceededError,
    BudgetLedger,
    SecureGenerator,
    exponential_mechanism,
    exponential_probabilities,
    laplace_mechanism,
    laplace_scale,
)

SEED = 20240601

# ----------------------------------------------------------------------------- Laplace


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


def test_opendp_noise_has_the_laplace_scale():
    # rng None: OpenDP's sampler, seeded by the OS (no seed to fix). E|noise| = b = 2 and
    # the mean of 10,000 |noise| has sd b / 100: the 5% tolerance is 5 sd (p ~ 6e-7).
    noise = laplace_mechanism(np.zeros(10_000), sensitivity=1.0, epsilon=0.5)
    assert noise.shape == (10_000,) and np.all(np.isfinite(noise))
    assert np.mean(np.abs(noise)) == pytest.approx(2.0, rel=0.05)
    assert abs(np.mean(noise)) < 0.1  # sd of the mean is sqrt(2) b / 100 = 0.028


def test_opendp_scalar_and_secure_generator_route_to_opendp(monkeypatch):
    x = laplace_mechanism(3.0, 1.0, 1.0)  # rng None
    assert isinstance(x, float) and np.isfinite(x) and x != 3.0
    calls = []
    real = accounting.opendp_laplace

    def spy(values, scale):
        calls.append(scale)
        return real(values, scale)

    monkeypatch.setattr(accounting, "opendp_laplace", spy)
    gen = accounting.secure_generator()
    assert isinstance(gen, SecureGenerator)
    out = laplace_mechanism(np.array([1.0, 2.0]), 2.0, 4.0, gen)
    assert out.shape == (2,) and calls == [0.5]
    # the generator's own laplace() also goes through OpenDP, one call per distinct scale
    calls.clear()
    draws = gen.laplace([0.0, 0.0, 0.0], [1.0, 2.0, 1.0])
    assert draws.shape == (3,) and sorted(calls) == [1.0, 2.0]
    assert gen.laplace(0.0, 1.0, size=(2, 3)).shape == (2, 3)
    # a plain numpy generator does not
    calls.clear()
    laplace_mechanism(np.array([1.0]), 1.0, 1.0, np.random.default_rng(0))
    assert calls == []


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


# ----------------------------------------------------------------------------- bounding


@pytest.mark.parametrize("rng", [None, "numpy"], ids=["opendp", "numpy"])
def test_truncated_laplace_stays_in_bounds(rng):
    gen = np.random.default_rng(SEED) if rng == "numpy" else None
    loc = np.full(2_000, 0.9)
    y = accounting.truncated_laplace(loc, 1.0, 0.0, 1.0, gen)
    assert y.shape == (2_000,) and y.min() >= 0.0 and y.max() <= 1.0
    # mass is pulled towards the location: Laplace(0.9, 1) truncated to [0, 1] has mean
    # 0.576 and sd 0.280 (numerical integration), so the mean of 2,000 draws (sd 0.0063)
    # exceeds the midpoint 0.5 with 12 sd to spare
    assert y.mean() > 0.5
    scalar = accounting.truncated_laplace(0.5, 1.0, 0.0, 1.0, gen)
    assert isinstance(scalar, float) and 0.0 <= scalar <= 1.0


def test_sanitize_bounded_bit_clamps_and_truncation_halves_epsilon(monkeypatch):
    rng = np.random.default_rng(SEED)
    out = accounting.sanitize_bounded(np.full(500, 0.99), 1.0, 0.1, 0.0, 1.0, "bit", rng)
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert np.mean(out == 1.0) > 0.3  # scale 10: about half the draws land above 1
    seen = {}

    def spy(loc, scale, lower, upper, rng):
        seen["scale"] = scale
        return loc

    monkeypatch.setattr(accounting, "truncated_laplace", spy)
    accounting.sanitize_bounded(0.5, 1.0, 2.0, 0.0, 1.0, "truncation", rng)
    assert seen["scale"] == pytest.approx(1.0)  # noise at eps/2 = 1 -> scale 1 / 1
    accounting.sanitize_bounded(0.5, 1.0, 2.0, 0.0, 1.0, "truncation", rng, strict_truncation=False)
    assert seen["scale"] == pytest.approx(0.5)
    with pytest.raises(InputError) as exc:
        accounting.sanitize_bounded(0.5, 1.0, 2.0, 0.0, 1.0, "clip", rng)
    assert exc.value.param == "bounding"


# ----------------------------------------------------------------------------- exponential


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


# ----------------------------------------------------------------------------- ledger


def test_ledger_records_sequential_and_parallel_spends():
    led = BudgetLedger(1.0, param="--epsilon")
    led.spend("mean", 0.25, "x")
    cost = led.spend_parallel("histogram", {"men": 0.5, "women": 0.5})
    assert cost == 0.5
    assert led.spent == pytest.approx(0.75)
    assert led.remaining == pytest.approx(0.25)
    d = led.to_dict()
    json.dumps(d, allow_nan=False)
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


# ----------------------------------------------------------------------------- budgets, neighbours


@pytest.mark.parametrize("value", [1e-6, 0.5, 1000.0])
def test_require_epsilon_accepts_its_range(value):
    assert accounting.require_epsilon("epsilon", value) == value


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf"), 1e-308, 1e308, 1001.0])
def test_require_epsilon_refuses_outside_its_range(value):
    with pytest.raises(InputError) as exc:
        accounting.require_epsilon("epsilon", value)
    assert exc.value.param == "epsilon"


def test_require_epsilon_refuses_text():
    with pytest.raises(InputError, match="must be a number"):
        accounting.require_epsilon("epsilon", "abc")


def test_censor_bound_per_neighbour_definition():
    # Eq. 3.5: add/remove eps = 2M (the papers' M = eps/2); substitution eps = 4M.
    assert accounting.censor_bound(1.0, "add-remove") == 0.5
    assert accounting.censor_bound(1.0, "substitution") == 0.25
    assert (
        accounting.censor_bound(3.0) == 0.75
    )  # default: substitution (relations.DEFAULT_NEIGHBOURS)
    for nb in accounting.NEIGHBOURS:
        assert accounting.epsilon_of(accounting.censor_bound(2.0, nb), nb) == pytest.approx(2.0)
    with pytest.raises(InputError) as exc:
        accounting.censor_bound(1.0, "swap")
    assert exc.value.param == "neighbours"


def test_histogram_sensitivity_per_neighbour_definition():
    assert accounting.histogram_sensitivity("substitution") == 2.0
    assert accounting.histogram_sensitivity("add-remove") == 1.0
    with pytest.raises(InputError):
        accounting.histogram_sensitivity("swap")


def test_guarantees_and_neighbours_are_described():
    assert set(accounting.GUARANTEES) == {
        "DP",
        "aDP",
        "none",
        "not established",
        "not private (known seed)",
    }
    assert set(accounting.NEIGHBOUR_MEANING) == set(accounting.NEIGHBOURS)
    assert accounting.NEIGHBOURS == ("substitution", "add-remove")


def test_require_public_bounds():
    assert accounting.require_public_bounds((0, 1)) == (0.0, 1.0)
    for bad in [(1, 0), (0, float("inf")), (0,), None, (0, "x")]:
        with pytest.raises(InputError) as exc:
            accounting.require_public_bounds(bad)
        assert exc.value.param == "bounds"


def test_sensitivities_of_the_modips_statistics():
    assert accounting.sensitivity_proportion(50) == pytest.approx(0.02)
    assert accounting.sensitivity_mean(-2.0, 2.0, 100) == pytest.approx(0.04)
    assert accounting.sensitivity_variance(-2.0, 2.0, 100) == pytest.approx(0.16)
    # n values in [0, 1], half at each end: the largest sample variance n / (4 (n - 1))
    x = np.array([0.0, 1.0] * 5)
    assert x.var(ddof=1) == pytest.approx(accounting.variance_upper_bound(0.0, 1.0, 10))


# ----------------------------------------------------------------------------- Lipschitz


def test_record_and_database_bounds():
    ll = np.array([[-1.0, -4.0, 0.5], [-2.0, -1.0, -3.0]])  # S=2, n=3
    alpha = np.array([1.0, 0.5, 0.0])
    c = accounting.weighted_contributions(ll, alpha)
    assert np.allclose(c, [[-1.0, -2.0, 0.0], [-2.0, -0.5, 0.0]])
    assert np.allclose(accounting.record_bounds(c), [2.0, 2.0, 0.0])
    assert accounting.lipschitz_bound(c) == 2.0
    assert accounting.epsilon_of(2.0) == 8.0  # the one default, substitution
    assert accounting.epsilon_of(2.0, "substitution") == 8.0


def test_censoring_clamps_and_counts():
    rng = np.random.default_rng(3)
    ll = rng.standard_cauchy((50, 200)) * 10  # heavy tails
    alpha = rng.uniform(0, 1, 200)
    M = 1.5
    c = accounting.weighted_contributions(ll, alpha, M)
    assert np.all(np.abs(c) <= M)
    raw = accounting.weighted_contributions(ll, alpha)
    mask = accounting.censored_records(raw, M)
    # a record counts once if clamped in any draw
    expected = sum(1 for i in range(200) if np.any(np.abs(alpha[i] * ll[:, i]) > M))
    assert mask.sum() == expected
    assert 0 < expected < 200


def test_zero_weight_record_with_infinite_loglik_contributes_zero():
    ll = np.array([[-np.inf, -1.0]])
    c = accounting.weighted_contributions(ll, np.array([0.0, 1.0]))
    assert np.array_equal(c, [[0.0, -1.0]])
