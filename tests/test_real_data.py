"""Centred censoring (dpsynth's extension) in numpy, and the real-data study's helpers.

Fast: no Stan. The Stan programs' centred ``contrib`` is checked in ``tests/test_models.py``.
"""

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from dpsynth.errors import InputError
from dpsynth.mechanisms.posterior import _centred_source
from dpsynth.models.catalogue import (
    Model,
    design_matrix,
    get_model,
    negbin_saturated_log_lik,
    poisson_saturated_log_lik,
    stan_data,
)
from dpsynth.models.centring import record_centre
from dpsynth.studies import real_data as rd

Y_VALUES = [0, 1, 2, 5, 17, 58]


@pytest.mark.parametrize("y", Y_VALUES)
def test_poisson_saturated_is_the_maximum_over_mu(y):
    """Brute force: maximise log Poisson(y | exp(b)) over b."""
    res = optimize.minimize_scalar(
        lambda b: -stats.poisson.logpmf(y, np.exp(b)), bounds=(-30, 10), method="bounded"
    )
    best = max(-res.fun, stats.poisson.logpmf(y, 1e-12))  # y = 0: the sup is the limit mu -> 0
    assert poisson_saturated_log_lik(np.array([y]))[0] == pytest.approx(best, abs=1e-7)


@pytest.mark.parametrize("y", Y_VALUES)
def test_negbin_saturated_is_the_supremum_over_mu_and_phi(y):
    """Over a (mu, phi) grid NB2 never exceeds the Poisson saturated value, and reaches it
    as phi grows at mu = y (the gamma mixture collapses)."""
    sat = negbin_saturated_log_lik(np.array([y]))[0]
    mu = np.exp(np.linspace(-8, 5, 261))[:, None]
    phi = np.exp(np.linspace(-5, 12, 171))[None, :]
    grid = stats.nbinom.logpmf(y, phi, phi / (mu + phi))
    assert grid.max() <= sat + 1e-9
    mu_star = max(y, 1e-12)
    near = stats.nbinom.logpmf(y, 1e9, 1e9 / (mu_star + 1e9))
    assert near == pytest.approx(sat, abs=1e-5)
    assert sat == pytest.approx(poisson_saturated_log_lik(np.array([y]))[0], abs=0)


def _count_data(model, n=25, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.negative_binomial(0.6, 0.6 / 3.6, n)
    X = rng.normal(size=(n, 2))
    return stan_data(get_model(model), y, np.ones(n), X=X), X


def test_record_centre_known_answers():
    data, _ = _count_data("negbin")
    model = get_model("negbin")
    assert np.array_equal(record_centre(model, data, "none"), np.zeros(data["n"]))
    y = np.asarray(data["y"], float)
    assert np.allclose(record_centre(model, data, "saturated"), poisson_saturated_log_lik(y))
    point = {"beta": [0.4, -0.2, 0.3], "phi": 0.8}
    mu = np.exp(data["X"] @ np.array(point["beta"]))
    expected = stats.nbinom.logpmf(y, 0.8, 0.8 / (mu + 0.8))
    assert np.allclose(record_centre(model, data, point), expected, atol=1e-10)
    pois = get_model("poisson")
    expected = stats.poisson.logpmf(y, np.exp(data["X"] @ np.array(point["beta"])))
    assert np.allclose(record_centre(pois, data, {"beta": point["beta"]}), expected, atol=1e-10)


def test_record_centre_refusals():
    beta = get_model("beta")
    data = stan_data(beta, np.array([0.2, 0.7]), np.ones(2))
    with pytest.raises(InputError, match="^centring:.*saturated"):
        record_centre(beta, data, "saturated")
    assert np.all(np.isfinite(record_centre(beta, data, {"beta1": 2.0, "beta2": 3.0})))
    with pytest.raises(InputError, match="^centring:"):
        record_centre(beta, data, "median")
    with pytest.raises(InputError, match="^centring:"):
        record_centre(beta, data, {"phi": 1.0})  # beta1, beta2 missing
    user = Model("user", beta.stan_file, "unit", False)  # no numpy mirror, no `centre`
    with pytest.raises(InputError, match="^centring:"):
        stan_data(user, np.array([0.2, 0.7]), np.ones(2), centre=np.ones(2))
    assert "centre" not in stan_data(user, np.array([0.2, 0.7]), np.ones(2))
    assert np.array_equal(data["centre"], np.zeros(2))


def test_centred_source_is_the_clamped_quantity():
    """The fit's bounds are those of alpha (ll - c): the term the program clamps."""
    data, _ = _count_data("poisson")
    model = get_model("poisson")
    draws = {"beta": np.random.default_rng(2).normal(0.8, 0.3, size=(6, 3))}
    centre = record_centre(model, data, "saturated")
    ll = model.record_log_lik(draws, data)
    centred = _centred_source(model.record_log_lik, centre)(draws, data)
    assert np.allclose(centred, ll - centre)
    assert np.all(centred <= 1e-12)  # saturated: ll never exceeds its supremum
    assert np.allclose(_centred_source(ll, centre), ll - centre)


def test_transfer_beta_keeps_the_linear_predictor():
    rng = np.random.default_rng(5)
    A = np.column_stack([rng.integers(0, 2, 80), rng.normal(40, 9, 80), rng.integers(1, 5, 80)])
    B = np.column_stack([rng.integers(0, 2, 60), rng.normal(44, 7, 60), rng.integers(1, 5, 60)])
    beta = rng.normal(size=4)
    moved = rd.transfer_beta(beta, A, B)
    raw = np.linalg.lstsq(
        np.column_stack([np.ones(80), A]), design_matrix(80, A) @ beta, rcond=None
    )[0]
    assert np.allclose(design_matrix(60, B) @ moved, np.column_stack([np.ones(60), B]) @ raw)


def test_interval_overlap_known_answers():
    one = rd.interval_overlap(np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.0]))
    assert one[0] == pytest.approx(1.0)
    half = rd.interval_overlap(np.array([0.0]), np.array([2.0]), np.array([1.0]), np.array([3.0]))
    assert half[0] == pytest.approx(0.5)
    nested = rd.interval_overlap(np.array([0.0]), np.array([4.0]), np.array([1.0]), np.array([2.0]))
    assert nested[0] == pytest.approx(0.5 * (1 / 4 + 1))
    apart = rd.interval_overlap(np.array([0.0]), np.array([1.0]), np.array([5.0]), np.array([6.0]))
    assert apart[0] == 0.0


def test_nb2_fit_recovers_known_coefficients():
    rng = np.random.default_rng(9)
    X = np.column_stack([rng.integers(0, 2, 3000), rng.normal(size=3000)])
    beta = np.array([1.0, 0.5, -0.3])
    mu = np.exp(beta[0] + X @ beta[1:])
    y = rng.poisson(rng.gamma(0.8, mu / 0.8))
    coef, se = rd.nb2_fit(y, X)
    assert np.all(np.abs(coef - beta) < 4 * se)
    assert np.all((se > 0.01) & (se < 0.2))


def test_table_codes_round_trip():
    frame = pd.DataFrame(
        {
            "docvis": [0, 1, 4, 12, 60, 121],
            "female": [0, 1, 0, 1, 0, 1],
            "married": [1, 1, 0, 0, 1, 0],
            "outwork": [0, 0, 1, 1, 0, 1],
            "agegrp": [0, 1, 2, 3, 0, 3],
            "edlevel": [1, 2, 3, 4, 1, 4],
        }
    )
    codes, sizes = rd.table_codes(frame, bound=60)
    back = rd.decode_table(codes, sizes, np.random.default_rng(0))
    assert back[list(rd.COVARIATES)].equals(frame[list(rd.COVARIATES)])
    bins = np.digitize(back["docvis"], rd.TABLE_OUTCOME_EDGES[1:-1])
    assert np.array_equal(
        bins, np.digitize(frame["docvis"].clip(upper=60), rd.TABLE_OUTCOME_EDGES[1:-1])
    )


def test_opendp_histogram_shape_and_support():
    codes = np.array([0, 0, 1, 2, 2, 2, 4])
    cells = rd.opendp_histogram(codes, 5, 2.0, 3, np.random.default_rng(1))
    assert cells.shape == (3, 7) and cells.min() >= 0 and cells.max() < 5


def _tiny_long():
    rows = [
        {
            "model": "-",
            "mechanism": "Data",
            "epsilon": 0,
            "set": 1,
            "mean": 3.0,
            "zero_share": 0.4,
            "max_ecdf": 0.0,
        }
    ]
    for mech, mean, zero, ecdf in [("ph", 3.3, 0.38, 0.05), ("opendp-histogram", 3.2, 0.39, 0.04)]:
        rows += [
            {
                "model": "-",
                "mechanism": mech,
                "epsilon": 5.0,
                "set": j,
                "mean": mean + d,
                "zero_share": zero,
                "max_ecdf": ecdf + d / 100,
                "guarantee": "DP",
            }
            for j, d in enumerate((-0.1, 0.0, 0.5), start=1)
        ]
    for mech, mean, zero, ecdf in [
        ("censor-uw", 0.1, 0.95, 0.55),
        ("censor-uw/reference", 2.9, 0.42, 0.03),
    ]:
        rows += [
            {
                "model": "negbin",
                "mechanism": mech,
                "epsilon": 5.0,
                "set": j,
                "mean": mean * f,
                "zero_share": zero,
                "max_ecdf": ecdf,
                "guarantee": "DP",
                "rhat_max": 1.0 + j / 100,
            }
            for j, f in enumerate((1.0, 0.9, 1.1), start=1)
        ]
    return pd.DataFrame(rows)


def test_summary_table_takes_the_median_over_sets():
    table = rd.summary_table(_tiny_long())
    assert list(table["mechanism"]) == [
        "Data",
        "ph",
        "opendp-histogram",
        "censor-uw",
        "censor-uw/reference",
    ]
    ph = table[table["mechanism"] == "ph"].iloc[0]
    assert ph["mean"] == pytest.approx(3.3) and ph["max_ecdf"] == pytest.approx(0.05)
    ref = table[table["mechanism"] == "censor-uw/reference"].iloc[0]
    assert ref["mean"] == pytest.approx(2.9) and ref["rhat_max"] == pytest.approx(1.03)
    assert ref["guarantee"] == "DP"


def test_targets_pick_the_best_strict_dp_mechanism():
    out = rd.targets(rd.summary_table(_tiny_long()), epsilon=5.0)
    assert out["best"] == "negbin censor-uw/reference"
    assert out["mean_error"] == pytest.approx(0.1 / 3.0)
    assert out["zero_gap"] == pytest.approx(0.02) and out["bayes_met"]
    assert out["ph_over_opendp"] == pytest.approx(0.05 / 0.04) and out["ph_met"]


def test_settings_profiles():
    ci = rd.settings("ci")
    assert ci["profile"] == "ci" and ci["n"] == 300 and ci["sets"] >= 1
    assert rd.settings("paper")["epsilons"] == [1.0, 3.0, 5.0]
    with pytest.raises(InputError, match="^variants:"):
        rd.settings("ci", variants=["censor-x"])
