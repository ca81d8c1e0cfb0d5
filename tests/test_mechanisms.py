"""Mechanism invariants: strict censoring bound, re-weighting keeps Delta, PH noise, releases."""

import json

import numpy as np
import pytest
from scipy import stats

from dpsynth import mechanisms
from dpsynth.errors import InputError
from dpsynth.mechanisms import Synthesizer, perturbed_histogram, synthesize
from dpsynth.models import Model

GAMMA_PROGRAM = """
// A user's own model, written only here: y_i ~ gamma(shape, rate).
functions {
#include dpsynth_functions.stan
}
data {
  int<lower=0> n;
  vector<lower=0, upper=1>[n] alpha;
  int<lower=0, upper=1> censor;
  real<lower=0> M;
  int<lower=0, upper=1> want_log_lik;
  int<lower=0, upper=1> want_rep;
  vector<lower=0>[n] y;
}
transformed data {
  vector[n] log_y = log(y);
}
parameters {
  real<lower=0> shape;
  real<lower=0> rate;
}
model {
  vector[n] ll = shape * log(rate) - lgamma(shape) + (shape - 1) * log_y - rate * y;
  shape ~ gamma(2, 1);
  rate ~ gamma(2, 1);
  target += dpsynth_target(ll, alpha, censor, M);
}
generated quantities {
  vector[want_log_lik ? n : 0] log_lik;
  vector[want_log_lik ? n : 0] log_lik_raw;
  array[want_rep ? n : 0] real y_rep;
  if (want_log_lik == 1) {
    vector[n] ll = shape * log(rate) - lgamma(shape) + (shape - 1) * log_y - rate * y;
    log_lik = dpsynth_contrib(ll, alpha, censor, M);
    log_lik_raw = alpha .* ll;
  }
  if (want_rep == 1) {
    y_rep = gamma_rng(rep_vector(shape, n), rate);
  }
}
"""


@pytest.fixture(scope="module")
def heavy_beta_synth(small_sampler):
    rng = np.random.default_rng(2024)
    y = rng.beta(0.5, 3, 400).clip(1e-9, 1 - 1e-9)  # long right tail, many tiny values
    return Synthesizer(y, "beta", seed=7, sampler=small_sampler)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [5.0, 3.0])
def test_censor_w_and_uw_bound_is_strict(heavy_beta_synth, epsilon):
    syn = heavy_beta_synth
    unweighted = syn.unweighted()
    assert unweighted.lipschitz > epsilon / 2  # the data need censoring at all
    for result in (syn.censor_w(epsilon), syn.censor_uw(epsilon)):
        c = result.fit.contributions
        assert np.all(np.abs(c) <= epsilon / 2)  # every contribution in [-eps/2, eps/2]
        assert result.lipschitz <= epsilon / 2
        assert result.epsilon <= epsilon
        assert result.guarantee == "DP"
        assert result.fit.stan_fit.diagnostics["rhat_max"] < 1.05
    # Censor_uw must censor (Delta_x > eps/2); Censor_w censors fewer records because the
    # LW weights pre-shrink the tails (at eps = 5 often none, as in the paper's Table 1)
    assert syn.censor_uw(epsilon).fit.n_censored > 0
    assert syn.censor_w(epsilon).fit.n_censored < syn.censor_uw(epsilon).fit.n_censored


@pytest.mark.slow
def test_weighted_mechanisms_and_weighted_e(heavy_beta_synth):
    syn = heavy_beta_synth
    lw = syn.lw()
    assert lw.guarantee == "aDP"
    assert lw.lipschitz < syn.unweighted().lipschitz
    we = syn.weighted_e(3.0)
    assert we.n_zero_weight > 0
    # zeroed records: those whose LW record bound exceeded eps/2, plus the riskiest record,
    # which LW already weights 0 (f~ = 1 and g = 0)
    zeroed = (lw.fit.record_bounds > 1.5) | (lw.fit.alpha == 0)
    assert we.n_zero_weight == int(zeroed.sum())
    assert np.array_equal(we.fit.alpha == 0, zeroed)


@pytest.mark.slow
def test_downscaling_reduces_censoring(heavy_beta_synth):
    syn = heavy_beta_synth
    plain = syn.censor_w(3.0)
    down = syn.censor_w(3.0, downscale=0.6)
    assert down.fit.n_censored < plain.fit.n_censored
    assert down.lipschitz <= 1.5


@pytest.mark.slow
def test_reweighting_keeps_lipschitz_within_one_percent(small_sampler):
    rng = np.random.default_rng(5)
    y = np.concatenate(
        [rng.negative_binomial(5, 5 / 105, 60), rng.negative_binomial(20, 20 / 120, 240)]
    )
    syn = Synthesizer(y, "negbin", seed=3, sampler=small_sampler)
    before = syn.cw(radius=10.0)
    after = syn.cw(radius=10.0, reweight=True)
    assert after.tuning["k"] is not None and 0 < after.tuning["k"] < 1
    assert abs(after.lipschitz - before.lipschitz) <= 0.01 * before.lipschitz
    # re-weighting raises the weights of the overly downweighted records
    assert after.fit.alpha.mean() > before.fit.alpha.mean()


@pytest.mark.slow
def test_bring_your_own_model_censor_w(tmp_path, small_sampler):
    path = tmp_path / "gamma.stan"
    path.write_text(GAMMA_PROGRAM)
    rng = np.random.default_rng(8)
    y = rng.gamma(2.0, 1.5, 300)
    y[:5] = [40.0, 55.0, 0.001, 0.0005, 60.0]  # outliers with large |log-likelihood|
    model = Model.from_stan_file(path, outcome="real")
    release = synthesize(
        y, model=model, mechanism="censor-w", epsilon=2.0, seed=1, sampler=small_sampler, m=2
    )
    report = release.report
    assert report["lipschitz_bound"] <= 1.0
    assert report["epsilon"] <= 2.0
    assert report["n_censored"] > 0
    assert release.data.shape == (600, 2)
    assert (release.data["y"] > 0).all()
    assert set(release.data["synthetic_set"]) == {1, 2}


@pytest.mark.slow
def test_release_holds_synthetic_records_only(heavy_beta_synth, tmp_path):
    syn = heavy_beta_synth
    result = syn.censor_w(4.0)
    release = syn.release(result, m=3, column="y")
    data = release.data
    assert list(data.columns) == ["synthetic_set", "y"]
    assert len(data) == 3 * syn.n
    # no confidential value is copied into the release
    assert not np.isin(data["y"].to_numpy(), syn.y).any()
    # distinct posterior draws give distinct synthetic sets
    sets = [g["y"].to_numpy() for _, g in data.groupby("synthetic_set")]
    assert not np.allclose(sets[0], sets[1])
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    release.write(out, rep)
    report = json.loads(rep.read_text())
    for key in (
        "mechanism",
        "guarantee",
        "epsilon_target",
        "lipschitz_bound",
        "epsilon",
        "n_records",
        "n_censored",
        "n_zero_weight",
        "m",
        "seed",
        "backend",
        "diagnostics",
        "dpsynth_version",
    ):
        assert key in report
    assert set(report["diagnostics"]) == {"rhat_max", "ess_bulk_min", "divergences"}
    text = rep.read_text()
    assert "alpha" not in text and "record_bounds" not in text and "log_lik" not in text


def test_perturbed_histogram_noise_scale_and_support():
    # The noisy count of one bin minus its true count is Laplace(0, 2/eps): check by KS.
    rng = np.random.default_rng(0)
    eps = 1.0
    x = np.linspace(0.05, 0.95, 1000)
    from dpsynth.privacy import laplace_mechanism

    counts = np.histogram(x, bins=np.linspace(0, 1, 11))[0].astype(float)
    noise = np.array(
        [laplace_mechanism(counts, 2.0, eps, rng) - counts for _ in range(400)]
    ).ravel()
    assert stats.kstest(noise, "laplace", args=(0, 2 / eps)).pvalue > 0.01
    assert stats.kstest(noise, "laplace", args=(0, 1 / eps)).pvalue < 1e-6
    sets = perturbed_histogram(x, (0.0, 1.0), eps, np.random.default_rng(1), m=2)
    assert sets.shape == (2, 1000)
    assert sets.min() >= 0.0 and sets.max() <= 1.0


def test_perturbed_histogram_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="^--bounds:"):
        perturbed_histogram([0.1, 0.2], None, 1.0, rng)
    with pytest.raises(InputError, match="^--bounds:"):
        perturbed_histogram([0.1, 0.2], (1.0, 0.0), 1.0, rng)
    with pytest.raises(InputError, match="^--bounds:"):
        perturbed_histogram([0.1, 2.0], (0.0, 1.0), 1.0, rng)
    with pytest.raises(InputError, match="^--epsilon:"):
        perturbed_histogram([0.1, 0.2], (0.0, 1.0), 0.0, rng)
    assert mechanisms.ph_bins(2000) == 45  # ceil(44.72)


def test_ph_release_is_reproducible_and_reports_composition():
    x = np.random.default_rng(2).uniform(0, 10, 500)
    a = synthesize(x, mechanism="ph", epsilon=1.0, bounds=(0, 10), seed=4, m=2)
    b = synthesize(x, mechanism="ph", epsilon=1.0, bounds=(0, 10), seed=4, m=2)
    assert a.data.equals(b.data)
    assert a.report["guarantee"] == "DP" and a.report["epsilon"] == 2.0
    assert a.report["lipschitz_bound"] is None
