"""The smooth clamp M tanh(t / M) beyond the categorical model: every table regression's
program takes it (beta, log-normal, gamma, Poisson, negative binomial, logistic), its fit's
terms are M tanh(alpha (ll - c) / M) and its target their sum, a table's column uses it by
default where ``CLAMP_DEFAULT`` says so, and the bias correction of a censored draw
(``dpsynth.models.debias``) clamps its simulated objective the same way."""

import copy

import numpy as np
import pytest
from scipy.special import expit, logit
from target_checks import target_minus_prior

from dpsynth import engine
from dpsynth.models.catalogue import PublicDesign, design_matrix, get_model, stan_data
from dpsynth.models.centring import record_centre
from dpsynth.models.debias import Censoring, clamped_objective
from dpsynth.table.spec import MODEL_TYPES, parse_spec

SMOOTH_REGRESSIONS = (
    "lognormal-regression",
    "gamma-regression",
    "poisson-regression",
    "negbin-regression",
    "logistic",
)
"""The programs that took the smooth clamp after the beta regression and the categorical."""


@pytest.mark.parametrize("name", sorted(MODEL_TYPES))
def test_every_table_model_takes_the_smooth_clamp(name):
    """The clamp's code reaches Stan as ``censor`` (hard 1, smooth 2) and the program declares
    the smooth code."""
    model = get_model(name)
    model = (model.with_levels(3) if name == "categorical" else model).with_clamp("smooth")
    y, x = np.array([1, 0, 1]), np.zeros((3, 1))
    assert stan_data(model, y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 2
    assert stan_data(model.with_clamp("hard"), y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 1
    assert "int<lower=0, upper=2> censor;" in engine.program_code(model.stan_file)


def _smooth_case(name: str, slopes: bool, seed: int = 1):
    """A small data set of ``name``'s outcome (on the Stan scale), with a slope or
    intercept-only, and a public reference point near its truth for the centre."""
    n = 60
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 1)) if slopes else None
    eta = -0.3 + (1.2 * x[:, 0] if slopes else np.zeros(n))
    slope = [1.0] if slopes else []  # the reference's, near the truth
    if name == "lognormal-regression":
        y = np.exp(rng.normal(eta - 1.5, 0.5))
        point = {"beta": [-2.0, *slope], "sigma": 0.6}
    elif name == "gamma-regression":
        y = rng.gamma(3.0, np.exp(eta - 1.5) / 3.0)
        point = {"beta": [-2.0, *slope], "shape": 2.5}
    elif name == "logistic":
        y, point = (rng.random(n) < expit(eta)).astype(int), {"beta": [-0.2, *slope]}
    else:  # the count models: log rate eta + 1
        y, point = rng.poisson(np.exp(eta + 1.0)), {"beta": [0.8, *slope]}
        if name == "negbin-regression":
            point["phi"] = 4.0
    return y, x, point


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, slopes",
    [(name, True) for name in SMOOTH_REGRESSIONS]
    + [("poisson-regression", False), ("negbin-regression", False)],
)
def test_smooth_clamp_fit_is_m_tanh_of_each_term(name, slopes):
    """With clamp "smooth" (censor = 2) each program's ``contrib`` is M tanh(alpha (ll - c) / M)
    at every retained draw (to 1e-8; ll from the numpy mirror, c a public reference's centre),
    within [-M, M] where the hard clamp would clamp, and the log density minus the prior is
    their sum: the bound the privacy map needs holds term by term, and the target is the
    smooth one. Intercept-only count designs with equal weights take the programs' grouped
    sum (one term per distinct count), the others the per-record sum."""
    model = get_model(name).with_clamp("smooth")
    y, x, point = _smooth_case(name, slopes)
    rng = np.random.default_rng(2)
    alpha = rng.uniform(0.2, 1, len(y)) if slopes else np.ones(len(y))
    base = stan_data(model, y, np.ones(len(y)), X=x)
    centre = record_centre(model, base, point if slopes else "saturated")
    M = 0.4
    data = stan_data(model, y, alpha, X=x, censor_bound=M, want_contrib=True, centre=centre)
    assert data["censor"] == 2
    fit = engine.fit(model.stan_file, model.fit_inputs(data), seed=3, chains=2,
                     iter_warmup=150, iter_sampling=50)  # fmt: skip
    ll = model.record_log_lik(fit.draws, data)
    assert np.allclose(fit.record_log_lik, ll, rtol=1e-8, atol=1e-8)
    term = alpha * (ll - centre)
    expected = M * np.tanh(term / M)
    assert np.allclose(fit.contrib, expected, rtol=1e-8, atol=1e-8)
    assert np.all(np.abs(fit.contrib) <= M) and np.any(np.abs(term) > M)
    params = fit.draw(fit.n_draws - 1)
    target = target_minus_prior(model, y, alpha, x, centre, M, params)
    assert target == pytest.approx(expected[-1].sum(), abs=1e-6)


@pytest.mark.parametrize(
    "model, default",
    [
        ("beta-regression", "smooth"),
        ("lognormal-regression", "smooth"),
        ("gamma-regression", "smooth"),
        ("negbin-regression", "smooth"),
        ("logistic", "smooth"),
        ("poisson-regression", "hard"),  # lost utility under the smooth clamp (choices-clamp)
    ],
)
def test_a_table_model_column_takes_its_default_clamp_unless_the_spec_says(model, default):
    column = {"name": "v", "model": model, "bounds": [0, 10]}
    if model == "logistic":  # a level column's default is PH where its cells are few
        column = {"name": "v", "model": model, "levels": [0, 1], "mechanism": "censor-uw"}
    base = {
        "public": [{"name": "g", "type": "categorical", "levels": ["a", "b"]}],
        "confidential": [column],
    }
    assert parse_spec(copy.deepcopy(base)).confidential[0].clamp == default
    for clamp in ("hard", "smooth"):
        named = copy.deepcopy(base)
        named["confidential"][0]["clamp"] = clamp
        assert parse_spec(named).confidential[0].clamp == clamp


def test_debias_objective_follows_the_clamp():
    """Known answer: at a trial coefficient vector the simulated objective is
    (k / n) sum_i clamp(d (ll_i - c_i)) minus the slopes' prior, with the hard clip or
    M tanh(t / M) as the censoring says; the two differ where terms pass the bound."""
    rng = np.random.default_rng(3)
    x = rng.uniform(size=200)
    y = rng.beta(expit(-0.5 + 1.5 * x) * 20, (1 - expit(-0.5 + 1.5 * x)) * 20)
    model = get_model("beta-regression").with_known_dispersion(20.0)
    centring = {"beta": [float(logit(np.mean(y))), 0.0], "kappa": 20.0}
    X = design_matrix(200, x[:, None].view(PublicDesign))
    data = {"n": 200, "K": 2, "X": X, "y": y}
    centre = record_centre(model, data, centring)
    draw = {"beta": np.array(centring["beta"]), "kappa": 20.0}
    trial = np.array([0.4, 2.0])
    ll = np.asarray(model.log_lik_mirror()({"beta": trial[None], "kappa": np.array([20.0])},
                                           data))[0]  # fmt: skip
    t = 0.8 * (ll - centre)
    prior = 0.5 * trial[1] ** 2 / 2.5**2
    M = 0.25
    for clamp, terms in (("hard", np.clip(t, -M, M)), ("smooth", M * np.tanh(t / M))):
        f = clamped_objective(model, draw, data, centre, Censoring(centring, M, 0.8, 100, clamp))
        assert f(trial) == pytest.approx(100 / 200 * terms.sum() - prior, rel=1e-10)
    assert np.any(np.abs(t) > M)  # the clamps differ on these records
