"""The smooth clamp M tanh(t / M) beyond the categorical model: the beta regression's program
takes it, a table's beta-regression column uses it by default, and the bias correction of a
censored draw (``dpsynth.models.debias``) clamps its simulated objective the same way."""

import copy

import numpy as np
import pytest
from scipy.special import expit, logit

from dpsynth import engine
from dpsynth.models.catalogue import PublicDesign, design_matrix, get_model, stan_data
from dpsynth.models.centring import record_centre
from dpsynth.models.debias import Censoring, clamped_objective
from dpsynth.table.spec import parse_spec


def test_beta_regression_takes_the_smooth_clamp():
    """The clamp's code reaches Stan as ``censor`` (hard 1, smooth 2) and the program declares
    the smooth code."""
    model = get_model("beta-regression").with_clamp("smooth")
    y, x = np.array([0.2, 0.5, 0.7]), np.zeros((3, 1))
    assert stan_data(model, y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 2
    assert stan_data(model.with_clamp("hard"), y, np.ones(3), X=x, censor_bound=0.5)["censor"] == 1
    assert "int<lower=0, upper=2> censor;" in engine.program_code(model.stan_file)


def test_a_table_beta_regression_column_is_smooth_unless_the_spec_says_hard():
    base = {
        "public": [{"name": "g", "type": "categorical", "levels": ["a", "b"]}],
        "confidential": [{"name": "v", "model": "beta-regression", "bounds": [0, 10]}],
    }
    assert parse_spec(copy.deepcopy(base)).confidential[0].clamp == "smooth"
    hard = copy.deepcopy(base)
    hard["confidential"][0]["clamp"] = "hard"
    assert parse_spec(hard).confidential[0].clamp == "hard"


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
