"""Each shipped model: numpy log-likelihood mirror equals the Stan program's own log_lik."""

import numpy as np
import pytest

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models import MODELS, check_outcome, get_model, stan_data


def _data(name, rng, n=30):
    if name == "beta":
        return rng.beta(0.5, 3, n).clip(1e-6, 1 - 1e-6), None
    if name == "beta-regression":
        return rng.beta(2, 5, n), rng.normal(size=(n, 2))
    y = rng.poisson(20, n)
    return y, (rng.normal(size=(n, 1)) if name == "negbin" else None)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_mirror_matches_stan_log_lik(name):
    rng = np.random.default_rng(4)
    model = get_model(name)
    y, X = _data(name, rng)
    y = check_outcome(model, y)
    alpha = rng.uniform(0.1, 1, len(y))
    data = stan_data(model, y, alpha, X=X, censor_bound=3.0, want_log_lik=True)
    fit = engine.fit(model.stan_file, data, seed=3, chains=2, iter_warmup=200, iter_sampling=100)
    mirror = model.log_lik(fit.draws, data)
    assert mirror.shape == fit.log_lik_raw.shape == (200, len(y))
    assert np.allclose(alpha * mirror, fit.log_lik_raw, rtol=1e-6, atol=1e-6)
    assert np.allclose(np.clip(alpha * mirror, -3, 3), fit.log_lik, rtol=1e-6, atol=1e-6)


def test_outcome_support_checks():
    beta = get_model("beta")
    with pytest.raises(InputError, match="0 < y < 1"):
        check_outcome(beta, [0.5, 1.0])
    scaled = check_outcome(beta, [0.0, 50.0, 100.0], bounds=(0.0, 100.0))
    assert np.all((scaled > 0) & (scaled < 1))
    with pytest.raises(InputError, match="^--bounds:"):
        check_outcome(beta, [0.0, 150.0], bounds=(0.0, 100.0))
    pois = get_model("poisson")
    with pytest.raises(InputError, match="non-negative integer"):
        check_outcome(pois, [1, 2.5])
    with pytest.raises(InputError, match="non-negative integer"):
        check_outcome(pois, [1, -2])
    with pytest.raises(InputError, match="NaN"):
        check_outcome(pois, [1, np.nan])
    with pytest.raises(InputError, match="empty"):
        check_outcome(pois, [])
    with pytest.raises(InputError, match="^--model:"):
        get_model("lognormal")


def test_weights_outside_unit_interval_rejected():
    beta = get_model("beta")
    y = np.array([0.2, 0.4])
    with pytest.raises(InputError, match="^alpha:"):
        stan_data(beta, y, np.array([0.5, 1.2]))
    with pytest.raises(InputError, match="^alpha:"):
        stan_data(beta, y, np.array([-0.1, 1.0]))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "design"),
    [
        ("beta", None),
        ("beta-regression", None),
        ("poisson", "intercept"),
        ("poisson", "covariate"),
        ("negbin", "intercept"),
        ("negbin", "covariate"),
    ],
)
def test_stan_target_equals_sum_of_mirror_contributions(name, design):
    """The model block's log density (regrouped for speed where uncensored: sufficient
    statistics, records grouped by outcome, one linear predictor for an intercept-only
    design) minus the prior equals sum_i alpha_i ll_i, and sum_i clip(alpha_i ll_i, -M, M)
    when censored."""
    stan = pytest.importorskip("stan")
    rng = np.random.default_rng(11)
    model = get_model(name)
    y, X = _data(name, rng)
    if design == "intercept":
        X = None
    elif design == "covariate":
        X = rng.normal(size=(len(y), 1))
    y = check_outcome(model, y)
    alpha = rng.uniform(0.1, 1, len(y))
    data = stan_data(model, y, alpha, X=X)
    fit = engine.fit(model.stan_file, data, seed=5, chains=2, iter_warmup=150, iter_sampling=50)
    code = engine.program_code(model.stan_file)

    def log_density(alpha_, censor_bound, params):
        d = engine._jsonable(stan_data(model, y, alpha_, X=X, censor_bound=censor_bound))
        post = stan.build(code, data=d, random_seed=1)
        return post.log_prob(post.unconstrain_pars(params), adjust_transform=False)

    for s in (0, fit.n_draws - 1):
        params = fit.draw(s)
        draws = {k: v[s : s + 1] for k, v in fit.draws.items()}
        contrib = alpha * model.log_lik(draws, data)[0]
        M = float(np.median(np.abs(contrib)))  # clamps about half of the records
        prior = log_density(np.zeros(len(y)), None, params)
        uncensored = log_density(alpha, None, params) - prior
        censored = log_density(alpha, M, params) - prior
        assert uncensored == pytest.approx(contrib.sum(), rel=1e-8, abs=1e-6)
        assert censored == pytest.approx(np.clip(contrib, -M, M).sum(), rel=1e-8, abs=1e-6)
        assert np.sum(np.abs(contrib) > M) >= len(y) // 3  # the censored check really clamps
