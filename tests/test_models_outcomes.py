"""Binary and categorical outcome models (issue 29): logistic and categorical regression.

Each program against an independent scipy computation of its per-record log-likelihood and
clamp, its numpy mirrors against the program, coefficient recovery on simulated data, and a
censor-uw release labelled DP. Fixed seeds throughout; tolerances stated where sampled.
"""

import re

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_softmax
from target_checks import target_minus_prior

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models.catalogue import (
    OUTCOME_MODELS,
    decode_levels,
    encode_levels,
    get_model,
    stan_data,
)
from dpsynth.models.centring import record_centre
from dpsynth.models.program_checks import check_convention
from dpsynth.release.single import KnownSeedWarning, synthesize

BETA_LOGISTIC = np.array([-0.5, 1.2])
BETA_CATEGORICAL = np.array([[0.3, -0.2], [1.0, -0.8]])  # K = 2 rows, levels 2 and 3
KS_ALPHA = 0.001


def _logistic_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    y = (rng.random(n) < expit(BETA_LOGISTIC[0] + BETA_LOGISTIC[1] * x[:, 0])).astype(int)
    return y, x


def _categorical_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    eta = np.c_[np.zeros(n), np.c_[np.ones(n), x] @ BETA_CATEGORICAL]
    p = np.exp(log_softmax(eta, axis=1))
    y = 1 + (rng.random(n)[:, None] >= np.cumsum(p, axis=1)[:, :-1]).sum(axis=1)
    return y, x


def _model_and_data(name: str, n: int, seed: int):
    if name == "logistic":
        return get_model("logistic"), *_logistic_data(n, seed)
    return get_model("categorical").with_levels(3), *_categorical_data(n, seed)


def _scipy_log_lik(name: str, beta: np.ndarray, y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """ll_i by scipy, independently of dpsynth: Bernoulli log pmf, or the log softmax at y_i."""
    if name == "logistic":
        return stats.bernoulli.logpmf(y, expit(X @ beta))
    eta = np.c_[np.zeros(len(y)), X @ beta]
    return log_softmax(eta, axis=1)[np.arange(len(y)), y - 1]


def _fit(model, data, **kw):
    return engine.fit(model.stan_file, model.fit_inputs(data), **kw)


def test_programs_follow_the_convention():
    check_convention(OUTCOME_MODELS["logistic"].stan_file)
    # the categorical program's one datum beyond the convention is its public number of
    # levels, which only LevelModel.fit_inputs supplies (a user program could not)
    with pytest.raises(InputError, match=r"cannot supply \(n_levels\);"):
        check_convention(OUTCOME_MODELS["categorical"].stan_file)
    for model in OUTCOME_MODELS.values():
        text = model.stan_file.read_text()
        head = text.split("\ndata {", 1)[0]
        defined = re.findall(r"^\s*vector\s+(\w+_record_log_lik)\s*\(", head, re.MULTILINE)
        assert len(defined) == 1
        assert (
            "contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);" in text
        )
        assert model.covariates and model.centred and not model.user_program


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic", "categorical"])
def test_stan_contributions_match_scipy(name):
    """Stan's record_log_lik equals scipy's log pmf, contrib = clip(alpha (ll - c), -M, M)
    with a public reference centre, at every retained draw (to 1e-8); the numpy mirror
    equals both; the log density minus the prior is the sum of the clamped terms."""
    model, y, x = _model_and_data(name, 60, 1)
    rng = np.random.default_rng(2)
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.2, 1, len(y))
    base = stan_data(model, y, np.ones(len(y)), X=x)
    point = {"beta": BETA_LOGISTIC * 0.5 if name == "logistic" else BETA_CATEGORICAL * 0.5}
    centre = record_centre(model, base, point)
    assert np.allclose(centre, _scipy_log_lik(name, point["beta"], y, base["X"]))
    M = 0.4
    data = stan_data(model, y, alpha, X=x, censor_bound=M, want_contrib=True, centre=centre)
    fit = _fit(model, data, seed=3, chains=2, iter_warmup=150, iter_sampling=50)
    beta = fit.draws["beta"]
    scipy_ll = np.stack([_scipy_log_lik(name, b, y, data["X"]) for b in beta])
    assert np.allclose(fit.record_log_lik, scipy_ll, rtol=1e-8, atol=1e-8)
    assert np.allclose(model.record_log_lik(fit.draws, data), scipy_ll, rtol=1e-8, atol=1e-8)
    expected = np.clip(alpha * (scipy_ll - centre), -M, M)
    assert np.allclose(fit.contrib, expected, rtol=1e-8, atol=1e-8)
    assert np.allclose(fit.contrib_uncensored, alpha * (scipy_ll - centre), atol=1e-8)
    assert np.any(np.abs(alpha * (scipy_ll - centre)) > M)  # the clamp really clamps
    params = fit.draw(fit.n_draws - 1)
    target = target_minus_prior(model, y, alpha, x, centre, M, params)
    assert target == pytest.approx(expected[-1].sum(), abs=1e-6)


@pytest.mark.slow
def test_categorical_smooth_clamp_is_m_tanh_of_the_term():
    """With clamp "smooth" (censor = 2), the categorical program's contrib is
    M tanh(alpha (ll - c) / M) at every retained draw (to 1e-8), within [-M, M] (tanh is
    1.0 in floating point far out) where the hard clamp would clamp, and the log density minus the prior is their sum:
    the bound the privacy map needs holds term by term."""
    model, y, x = _model_and_data("categorical", 60, 1)
    model = model.with_clamp("smooth")
    rng = np.random.default_rng(2)
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.2, 1, len(y))
    M = 0.4
    data = stan_data(model, y, alpha, X=x, censor_bound=M, want_contrib=True)
    assert data["censor"] == 2
    fit = _fit(model, data, seed=3, chains=2, iter_warmup=150, iter_sampling=50)
    scipy_ll = np.stack([_scipy_log_lik("categorical", b, y, data["X"]) for b in fit.draws["beta"]])
    term = alpha * scipy_ll
    expected = M * np.tanh(term / M)
    assert np.allclose(fit.contrib, expected, rtol=1e-8, atol=1e-8)
    assert np.all(np.abs(fit.contrib) <= M) and np.any(np.abs(term) > M)
    params = fit.draw(fit.n_draws - 1)

    def log_density(alpha_, bound):
        d = stan_data(model, y, alpha_, X=x, censor_bound=bound)
        return float(engine.log_density(model.stan_file, model.fit_inputs(d), [params])[0])

    prior = log_density(np.zeros(len(y)), None)
    assert log_density(alpha, M) - prior == pytest.approx(expected[-1].sum(), abs=1e-6)


def test_only_a_program_that_declares_it_takes_the_smooth_clamp():
    """The clamp's code reaches Stan as ``censor`` (hard 1, smooth 2, none 0); a model whose
    program does not accept "smooth" refuses it in one line naming ``clamp``."""
    model = get_model("categorical").with_levels(3)
    y, x = np.array([1, 2, 3]), np.zeros((3, 1))
    assert stan_data(model, y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 1
    smooth = model.with_clamp("smooth")
    assert stan_data(smooth, y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 2
    assert stan_data(smooth, y, np.ones(3), X=x)["censor"] == 0
    text = engine.program_code(smooth.stan_file)
    assert "int<lower=0, upper=2> censor;" in text
    with pytest.raises(
        InputError, match=r"^clamp: model 'lognormal' accepts hard \(got 'smooth'\)"
    ):
        get_model("lognormal").with_clamp("smooth")  # a one-column program: hard only


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic", "categorical"])
def test_fit_recovers_the_coefficients(name):
    """Uncensored fit to 3000 simulated records: every posterior mean within 0.2 of the true
    coefficient (posterior sds are about 0.05-0.08 at this n: 0.2 is about 3 sds)."""
    model, y, x = _model_and_data(name, 3000, 4)
    data = stan_data(model, model.to_stan_scale(y), np.ones(len(y)), X=x)
    fit = _fit(model, data, seed=5, chains=2, iter_warmup=300, iter_sampling=300)
    truth = BETA_LOGISTIC if name == "logistic" else BETA_CATEGORICAL
    mean = fit.draws["beta"].mean(axis=0)
    assert mean.shape == truth.shape
    assert np.max(np.abs(mean - truth)) < 0.2, mean


def test_simulate_draws_the_levels_with_the_model_probabilities():
    """At the true coefficients, 20,000 synthetic records: only public codes, and each
    level's count within a chi-square test (p > 0.001) of the summed model probabilities."""
    rng = np.random.default_rng(6)
    n = 20000
    x = rng.normal(size=(n, 1))
    X = np.c_[np.ones(n), x]
    for name, beta in (("logistic", BETA_LOGISTIC), ("categorical", BETA_CATEGORICAL)):
        model = get_model(name) if name == "logistic" else get_model(name).with_levels(3)
        y = model.simulate({"beta": beta}, {"X": X, "K": 2}, n, rng)
        assert y.dtype == np.int64
        if name == "logistic":
            assert set(np.unique(y)) == {0, 1}
            p1 = expit(X @ beta)
            expected = np.array([(1 - p1).sum(), p1.sum()])
            observed = np.bincount(y, minlength=2)
        else:
            assert set(np.unique(y)) == {1, 2, 3}
            expected = np.exp(log_softmax(np.c_[np.zeros(n), X @ beta], axis=1)).sum(axis=0)
            observed = np.bincount(y - 1, minlength=3)
        assert stats.chisquare(observed, expected).pvalue > KS_ALPHA
        shifted = np.array(beta, dtype=float)
        shifted.flat[0] += 0.3  # the test has power: a shifted intercept is rejected
        other = model.simulate({"beta": shifted}, {"X": X, "K": 2}, n, rng)
        counts = np.bincount(other - (0 if name == "logistic" else 1), minlength=len(expected))
        assert stats.chisquare(counts, expected).pvalue < KS_ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic", "categorical"])
def test_simulate_matches_stan_y_rep(name):
    """At one posterior draw, the level counts of Stan's y_rep and of numpy's simulate (40
    repetitions) agree by a chi-square test of homogeneity at 0.001."""
    model, y, x = _model_and_data(name, 400, 7)
    data = stan_data(model, model.to_stan_scale(y), np.ones(len(y)), X=x)
    fit = _fit(model, data, seed=8, chains=2, iter_warmup=150, iter_sampling=50)
    s = fit.n_draws - 1
    stan_rep = np.asarray(
        engine.generate(model.stan_file, model.fit_inputs(data), fit.draw(s), seed=9)
    )
    draw = {k: v[s] for k, v in fit.draws.items()}
    sims = np.concatenate(
        [model.simulate(draw, data, len(y), np.random.default_rng(i)) for i in range(40)]
    )
    levels = np.arange(2) if name == "logistic" else np.arange(1, 4)
    table = np.array([[np.sum(stan_rep == v) for v in levels], [np.sum(sims == v) for v in levels]])
    assert set(np.unique(stan_rep)) <= set(levels)
    assert stats.chi2_contingency(table).pvalue > KS_ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic", "categorical"])
def test_censor_uw_release_is_labelled_dp(name, converging_sampler):
    """synthesize(model=..., mechanism="censor-uw") on 300 records with a public covariate:
    labelled DP with the total epsilon, M = (epsilon / m) / 4 under substitution, every
    synthetic value a public code, one record per covariate row, and the curator's verdict
    computed. (At epsilon 4 over m = 2, M = 0.5 clamps every record with p(y_i) < 0.6 and
    the logistic fit missed R-hat 1.01 with 4 x 2000 draws; epsilon 10, M = 2.5, converges.)"""
    model, y, x = _model_and_data(name, 300, 10)
    with pytest.warns(KnownSeedWarning):
        rel = synthesize(
            y,
            model="logistic" if name == "logistic" else model,
            mechanism="censor-uw",
            epsilon=10.0,
            m=1,
            X=x,
            seed=11,
            sampler=converging_sampler,
        )
    report = {**rel.report, **rel.report["if_unseeded"]}
    assert report["guarantee"] == "DP"
    assert report["epsilon"] == pytest.approx(10.0)
    assert report["epsilon_per_set"] == pytest.approx(10.0)
    assert report["internal_bound"]["censor_bound_M"] == pytest.approx(2.5)
    assert report["ledger"]["spent"] == pytest.approx(10.0)
    values = rel.data["y"].to_numpy()
    assert len(values) == 300 and rel.data["y"].dtype.kind == "i"
    assert set(np.unique(values)) <= ({0, 1} if name == "logistic" else {1, 2, 3})
    assert rel.diagnostics["utility"]["verdict"] in ("good", "fair", "poor")


def test_outcome_checks_name_the_parameter_and_never_a_value():
    logistic = get_model("logistic")
    assert logistic.to_stan_scale([0, 1.0, 1]).dtype == np.int64
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 3\] is not a code of the public levels \(0\.\.1\)",
    ):
        logistic.to_stan_scale([0, 1, 2])
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 1\] is not a non-negative integer",
    ):
        logistic.to_stan_scale([0.5, 1])
    with pytest.raises(InputError, match="^levels: model 'categorical' needs its number"):
        get_model("categorical").to_stan_scale([1, 2])
    cat = get_model("categorical").with_levels(4)
    assert cat.fit_inputs({"n": 0})["n_levels"] == 4
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 2 \(and 1 more\)\] is not a code of the public levels \(1\.\.4\)",
    ):
        cat.to_stan_scale([1, 5, 7])
    with pytest.raises(InputError, match="^levels:"):
        get_model("categorical").with_levels(1)
    with pytest.raises(InputError, match="^levels:"):
        logistic.with_levels(3)
    with pytest.raises(InputError, match="^model: unknown model 'probit'; .*logistic, categorical"):
        get_model("probit")


def test_levels_are_coded_on_the_public_list_only():
    codes = encode_levels(["b", "a", "c", "a"], ["a", "b", "c"])
    assert codes.tolist() == [2, 1, 3, 1]
    assert decode_levels(codes, ["a", "b", "c"]).tolist() == ["b", "a", "c", "a"]
    with pytest.raises(
        InputError,
        match=r"^sex: \[CONFIDENTIAL, from the data: record 2\] is not one of the public levels",
    ):
        encode_levels(["a", "x"], ["a", "b"], "sex")
    with pytest.raises(
        InputError,
        match=r"^sex: \[CONFIDENTIAL, from the data: record 1\] is not one of the public levels",
    ):
        encode_levels([None, "a"], ["a", "b"], "sex")
    with pytest.raises(InputError, match="^levels:"):
        encode_levels(["a"], ["a", "a"])
