"""Tests of dpsynth.mechanisms.modips: SBS posteriors, bounding, Algorithm 1, SDD/SDD.MC/SPHC, histograms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.mechanisms.histogram import histogram_synthesis
from dpsynth.mechanisms.modips import (
    ModipsModel,
    allocation_weights,
    mc_histogram_sample,
    modips,
    sbs_binary,
    sbs_gaussian,
    sbs_gaussian_known_variance,
    sbs_model,
    sdd_sample,
    synthesize_gaussian,
)
from dpsynth.privacy.accounting import (
    BudgetExceededError,
    BudgetLedger,
    sanitize_bounded,
    truncated_laplace,
)

HUGE_EPS = 1e12  # ε → ∞: the Laplace noise is below 1e-11 here
KS_P = 0.01  # acceptance level of every goodness-of-fit test below (fixed seeds)


def _binary_data(n=60, k=18):
    return np.r_[np.ones(k), np.zeros(n - k)]


# ----------------------------------------------------------------- SBS posteriors at ε → ∞


def test_sbs_binary_posterior_is_beta_when_eps_infinite():
    x = _binary_data()
    rng = np.random.default_rng(11)
    draws = [sbs_binary(x, HUGE_EPS, rng) for _ in range(3000)]
    assert draws[0].sanitized["proportion"] == pytest.approx(18 / 60, abs=1e-9)
    p = np.array([d.theta["p"] for d in draws])
    assert stats.kstest(p, stats.beta(19, 43).cdf).pvalue > KS_P
    assert stats.kstest(p, stats.beta(21, 41).cdf).pvalue < 1e-4  # a wrong posterior is detected


def test_sbs_gaussian_known_variance_posterior_when_eps_infinite():
    rng = np.random.default_rng(12)
    x = rng.normal(0.5, 2.0, size=40)
    mu = np.array(
        [
            sbs_gaussian_known_variance(x, 2.0, (-10, 10), HUGE_EPS, rng).theta["mu"]
            for _ in range(3000)
        ]
    )
    assert stats.kstest(mu, stats.norm(x.mean(), 2.0 / np.sqrt(40)).cdf).pvalue > KS_P
    assert stats.kstest(mu, stats.norm(x.mean(), 2.4 / np.sqrt(40)).cdf).pvalue < 1e-4


@pytest.mark.parametrize("sanitization", ["communal", "individualized"])
def test_sbs_gaussian_posterior_when_eps_infinite(sanitization):
    rng = np.random.default_rng(13)
    n = 25
    x = rng.normal(1.0, 1.5, size=n)
    xbar, s2 = x.mean(), x.var(ddof=1)
    draws = [
        sbs_gaussian(x, (-10, 10), HUGE_EPS, rng, sanitization=sanitization) for _ in range(3000)
    ]
    sigma2 = np.array([d.theta["sigma"] ** 2 for d in draws])
    mu = np.array([d.theta["mu"] for d in draws])
    # σ² | x ~ (n-1) s² / χ²_{n-1};  (μ - x̄) / (s/√n) | x ~ t_{n-1}  (prior ∝ 1/σ²)
    assert stats.kstest((n - 1) * s2 / sigma2, stats.chi2(n - 1).cdf).pvalue > KS_P
    assert stats.kstest((mu - xbar) / np.sqrt(s2 / n), stats.t(n - 1).cdf).pvalue > KS_P
    assert stats.kstest((mu - xbar) / np.sqrt(s2 / n), stats.norm(scale=1.3).cdf).pvalue < 1e-4


# ----------------------------------------------------------------- sanitization schemes


def test_communal_and_individualized_noise_scales():
    # Definition 5: scale (Δx̄ + Δs²)/ε on both; Definition 6 with w = 0.5: Δx̄/(0.5 ε) on the mean.
    n, eps = 50, 1.0
    x = np.linspace(-0.2, 0.2, n)
    d_mean, d_var = 2.0 / n, 4.0 / n  # bounds [-1, 1]
    rng = np.random.default_rng(14)
    com = (
        np.array(
            [
                sbs_gaussian(x, (-1, 1), eps, rng, sanitization="communal").sanitized["mean"]
                for _ in range(4000)
            ]
        )
        - x.mean()
    )
    ind = (
        np.array(
            [
                sbs_gaussian(x, (-1, 1), eps, rng, allocation=0.5).sanitized["mean"]
                for _ in range(4000)
            ]
        )
        - x.mean()
    )
    assert stats.kstest(com, stats.laplace(scale=(d_mean + d_var) / eps).cdf).pvalue > KS_P
    assert stats.kstest(ind, stats.laplace(scale=d_mean / (0.5 * eps)).cdf).pvalue > KS_P
    assert stats.kstest(ind, stats.laplace(scale=(d_mean + d_var) / eps).cdf).pvalue < 1e-4


def test_individualized_spends_split_budget():
    d = sbs_gaussian(np.linspace(0, 1, 20), (0, 1), 2.0, np.random.default_rng(0), allocation=0.3)
    assert d.spends == [("mean", pytest.approx(0.6)), ("variance", pytest.approx(1.4))]
    assert d.epsilon == pytest.approx(2.0)


def test_bit_puts_mass_on_bound_truncation_does_not():
    x = np.ones(20)  # p̂ = 1 sits on the upper bound
    rng = np.random.default_rng(15)
    bit = np.array([sbs_binary(x, 0.5, rng, "bit").sanitized["proportion"] for _ in range(500)])
    tr = np.array(
        [sbs_binary(x, 0.5, rng, "truncation").sanitized["proportion"] for _ in range(500)]
    )
    assert (bit == 1.0).mean() > 0.3
    assert np.all((tr >= 0) & (tr <= 1)) and (tr == 1.0).mean() < 0.01
    assert np.all((bit >= 0) & (bit <= 1))


def test_truncated_laplace_matches_conditional_law():
    loc, b, lo, hi = 0.9, 0.5, 0.0, 1.0
    y = truncated_laplace(np.full(5000, loc), b, lo, hi, np.random.default_rng(16))
    lap = stats.laplace(loc, b)

    def cdf(v):
        return (lap.cdf(v) - lap.cdf(lo)) / (lap.cdf(hi) - lap.cdf(lo))

    assert stats.kstest(y, cdf).pvalue > KS_P
    assert stats.kstest(y, stats.uniform(0, 1).cdf).pvalue < 1e-4


def test_strict_truncation_halves_the_noise_budget():
    rng = np.random.default_rng(17)
    v = np.zeros(5000)
    strict = sanitize_bounded(v, 1.0, 1.0, -1e3, 1e3, "truncation", rng, strict_truncation=True)
    paper = sanitize_bounded(v, 1.0, 1.0, -1e3, 1e3, "truncation", rng, strict_truncation=False)
    assert stats.kstest(strict, stats.laplace(scale=2.0).cdf).pvalue > KS_P
    assert stats.kstest(paper, stats.laplace(scale=1.0).cdf).pvalue > KS_P


def test_synthetic_gaussian_values_respect_bounds():
    rng = np.random.default_rng(18)
    bit = synthesize_gaussian(0.9, 1.0, 2000, -1.0, 1.0, "bit", rng)
    tr = synthesize_gaussian(0.9, 1.0, 2000, -1.0, 1.0, "truncation", rng)
    assert bit.min() >= -1 and bit.max() <= 1 and (bit == 1.0).mean() > 0.3
    assert tr.min() >= -1 and tr.max() <= 1 and (tr == 1.0).mean() == 0.0


# ----------------------------------------------------------------- Algorithm 1


def test_modips_splits_budget_over_m_and_ledger_records_it():
    rng = np.random.default_rng(19)
    x = rng.normal(size=100)
    res = modips(x, sbs_model("gaussian", bounds=(-4, 4)), m=4, epsilon=2.0, rng=rng)
    assert len(res.datasets) == 4 and all(d.shape == (100,) for d in res.datasets)
    spends = res.ledger.to_dict()["spends"]
    assert [s["epsilon"] for s in spends] == [0.5] * 4
    assert res.ledger.spent == pytest.approx(2.0)
    assert all(t.epsilon == pytest.approx(0.5) for t in res.thetas)
    frame = res.to_frame("y")
    assert sorted(frame["synthetic_set"].unique()) == [1, 2, 3, 4]


def test_nested_modips_shares_theta_within_each_sanitization():
    rng = np.random.default_rng(20)
    res = modips(_binary_data(), sbs_model("binary"), m=2, epsilon=1.0, rng=rng, t=3)
    assert res.set_ids == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert len(res.thetas) == 2 and res.ledger.spent == pytest.approx(1.0)
    assert len(res.datasets) == 6


def test_modips_model_selection_by_exponential_mechanism():
    def synth_const(c):
        return lambda th, n, r: np.full(n, c)

    bad = ModipsModel("bad", lambda x, e, r: None, synth_const(0.0), utility=lambda x: 0.0)
    good = ModipsModel("good", lambda x, e, r: None, synth_const(1.0), utility=lambda x: 200.0)
    res = modips(
        np.ones(5),
        [bad, good],
        m=2,
        epsilon=1.5,
        rng=np.random.default_rng(21),
        epsilon_select=0.5,
        utility_sensitivity=1.0,
    )
    assert res.model == "good" and res.selection_index == 1
    eps = [s["epsilon"] for s in res.ledger.to_dict()["spends"]]
    assert eps == [0.5, 0.5, 0.5]


def test_modips_refuses_budget_overspend():
    led = BudgetLedger(1.0, param="--epsilon")
    led.spend("earlier release", 0.5)
    with pytest.raises(BudgetExceededError) as exc:
        modips(
            _binary_data(),
            sbs_model("binary"),
            2,
            1.0,
            np.random.default_rng(0),
            ledger=led,
        )
    assert exc.value.param == "--epsilon"


# ----------------------------------------------------------------- bad input, one per case


@pytest.mark.parametrize("eps", [0.0, -0.5, float("nan"), float("inf")])
def test_bad_epsilon(eps):
    with pytest.raises(InputError) as exc:
        sbs_binary(_binary_data(), eps, np.random.default_rng(0))
    assert exc.value.param == "epsilon"


def test_missing_bounds():
    with pytest.raises(InputError) as exc:
        sbs_model("gaussian", bounds=None)
    assert exc.value.param == "bounds"


def test_inverted_bounds():
    with pytest.raises(InputError) as exc:
        sbs_gaussian(np.zeros(5), (1.0, -1.0), 1.0, np.random.default_rng(0))
    assert exc.value.param == "bounds"


def test_m_below_one():
    with pytest.raises(InputError) as exc:
        modips(_binary_data(), sbs_model("binary"), 0, 1.0, np.random.default_rng(0))
    assert exc.value.param == "m"


@pytest.mark.parametrize("w", [[0.5, 0.6], [0.2, 0.3]])
def test_allocation_not_summing_to_one(w):
    with pytest.raises(InputError, match="sum to 1") as exc:
        allocation_weights(w, 2)
    assert exc.value.param == "allocation"


@pytest.mark.parametrize("w", [0.0, 1.0, -0.2, 1.3])
def test_allocation_outside_unit_interval(w):
    with pytest.raises(InputError) as exc:
        sbs_gaussian(np.zeros(5), (-1, 1), 1.0, np.random.default_rng(0), allocation=w)
    assert exc.value.param == "allocation"


def test_empty_data():
    with pytest.raises(InputError, match="empty"):
        sbs_binary(np.array([]), 1.0, np.random.default_rng(0))


def test_nan_data():
    with pytest.raises(InputError, match="NaN"):
        sbs_gaussian(np.array([0.1, np.nan, 0.3]), (-1, 1), 1.0, np.random.default_rng(0))


def test_non_binary_values_for_binary_model():
    with pytest.raises(InputError, match="0 and 1"):
        sbs_binary(np.array([0.0, 2.0]), 1.0, np.random.default_rng(0))


# ----------------------------------------------------------------- SDD, SDD.MC, SPHC


def _log_post_1d(theta):
    return np.clip(-0.5 * ((theta[:, 0] - 0.3) / 0.2) ** 2, -20, 20)


def test_sdd_selection_frequencies_follow_proposition_3_utility():
    # 4 bins on [-1, 1], centre evaluation: P(bin i) ∝ exp(ε (log f(c_i) + log V_i) / (2 · 2A)).
    a, eps = 20.0, 40.0
    rng = np.random.default_rng(22)
    draws = np.array([sdd_sample(_log_post_1d, [[-1, 1]], 4, eps, a, rng)[0] for _ in range(4000)])
    counts = np.histogram(draws, bins=np.linspace(-1, 1, 5))[0]
    centres = np.array([-0.75, -0.25, 0.25, 0.75])
    logw = eps * (-0.5 * ((centres - 0.3) / 0.2) ** 2 + np.log(0.5)) / (4 * a)
    expected = np.exp(logw - logw.max())
    expected = expected / expected.sum() * draws.size
    assert stats.chisquare(counts, expected).pvalue > KS_P
    assert stats.chisquare(counts, np.full(4, 1000.0)).pvalue < 1e-6


def test_sdd_two_dimensional_large_eps_hits_mode_bin():
    def logf(th):
        return np.clip(-0.5 * (((th - np.array([0.3, -0.5])) / 0.1) ** 2).sum(axis=1), -50, 50)

    th = sdd_sample(logf, [[-1, 1], [-1, 1]], [10, 10], 1e5, 50.0, np.random.default_rng(23), 3)
    assert th.shape == (2,)
    assert 0.2 <= th[0] <= 0.4 and -0.6 <= th[1] <= -0.4


def test_sdd_rejects_density_outside_a_bound():
    with pytest.raises(InputError) as exc:
        sdd_sample(
            lambda t: np.full(t.shape[0], 30.0),
            [[0, 1]],
            5,
            1.0,
            20.0,
            np.random.default_rng(0),
        )
    assert exc.value.param == "bound_a"


@pytest.mark.parametrize("mode", ["l1", "per_bin"])
def test_sdd_mc_and_sphc_concentrate_on_posterior_mode(mode):
    rng = np.random.default_rng(24)
    draws = rng.normal([0.3, -0.5], 0.05, size=(2000, 2))
    a = mc_histogram_sample("sdd.mc", draws, [[-1, 1], [-1, 1]], 10, 1e7, 10.0, rng, mode)
    b = mc_histogram_sample("sphc", draws, [[-1, 1], [-1, 1]], 10, 1e7, 10.0, rng, mode)
    for th in (a, b):
        assert th.shape == (2,)
        assert 0.2 <= th[0] <= 0.4 and -0.6 <= th[1] <= -0.4


def test_sphc_small_eps_spreads_over_bins():
    rng = np.random.default_rng(25)
    draws = rng.normal(0.0, 0.05, size=(200, 1))
    th = np.array(
        [mc_histogram_sample("sphc", draws, [[-1, 1]], 10, 1e-3, 5.0, rng)[0] for _ in range(300)]
    )
    assert (np.abs(th) > 0.2).mean() > 0.5  # far from the mode bin most of the time


# ----------------------------------------------------------------- model-free histogram


@pytest.mark.parametrize("bootstrap", ["none", "data", "sanitized"])
def test_histogram_synthesis_tracks_data_at_large_eps(bootstrap):
    rng = np.random.default_rng(26)
    x = rng.normal(size=2000)
    out = histogram_synthesis(x, [[-4, 4]], 16, 1e6, rng, bootstrap=bootstrap)
    assert out.records.shape == (2000, 1)
    assert abs(out.records.mean() - x.mean()) < 0.1 and abs(out.records.std() - x.std()) < 0.1
    assert out.sensitivity == (6.0 if bootstrap == "data" else 2.0)


def test_histogram_synthesis_noise_at_small_eps():
    rng = np.random.default_rng(27)
    x = np.zeros(100)
    out = histogram_synthesis(x, [[-1, 1]], 4, 0.05, rng)
    counts = np.histogram(x, bins=np.linspace(-1, 1, 5))[0]
    assert np.abs(out.sanitized_counts - counts).max() > 1.0


def test_mc_histogram_sample_refuses_unknown_algorithm_and_bound():
    draws = np.zeros((10, 1))
    with pytest.raises(InputError) as exc:
        mc_histogram_sample("sdd", draws, [[-1, 1]], 4, 1.0, 1.0, np.random.default_rng(0))
    assert exc.value.param == "algorithm"
    with pytest.raises(InputError) as exc:
        mc_histogram_sample("sphc", draws, [[-1, 1]], 4, 1.0, 0.0, np.random.default_rng(0))
    assert exc.value.param == "bound"


def test_sphc_per_bin_with_large_epsilon_picks_the_data_bin():
    draws = np.full((50, 1), 0.05)
    rng = np.random.default_rng(3)
    th = [
        mc_histogram_sample("sphc", draws, [[0, 1]], 5, 1e6, 1.0, rng, "per_bin")[0]
        for _ in range(50)
    ]
    assert all(0.0 <= t <= 0.2 for t in th)
