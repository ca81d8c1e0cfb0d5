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
