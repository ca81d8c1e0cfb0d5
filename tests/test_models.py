"""Each shipped model: the numpy mirrors equal the Stan program's own output.

``Model.record_log_lik`` against the program's ``record_log_lik``, ``contrib`` and
``contrib_uncensored``; ``Model.simulate`` against the known distribution at fixed
parameters and against the program's ``y_rep`` at one posterior draw.
"""

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models.catalogue import (
    MODELS,
    TABLE_COUNT_MODELS,
    Model,
    check_outcome,
    get_model,
    stan_data,
)
from dpsynth.models.centring import record_centre

SPREAD = "lognormal-regression:spread"
SHIPPED = {
    **MODELS,
    **TABLE_COUNT_MODELS,
    SPREAD: MODELS["lognormal-regression"].with_spread(True),
}
"""Every shipped program with a numpy mirror but the level models (tests/test_models_outcomes.py);
the log-normal regression also with its spread by the design (``SPREAD``: the same program)."""


def _model(name):
    """A shipped model by its key in :data:`SHIPPED`."""
    return SHIPPED[name]


USER_PROGRAM = Path(__file__).parent / "stan" / "normal_known_sd.stan"
KS_ALPHA = 0.001  # every distributional test: fixed seed, reject at p < 0.001


POSITIVE = ("lognormal", "gamma", "lognormal-regression", "gamma-regression", SPREAD)


def _data(name, rng, n=30):
    if name in POSITIVE:  # positive, skewed, on the unit scale's order of magnitude
        y = rng.lognormal(-2.0, 0.8, n)
        return y, (rng.normal(size=(n, 2)) if "regression" in name else None)
    if name == "beta":
        return rng.beta(0.5, 3, n).clip(1e-6, 1 - 1e-6), None
    if name == "beta-regression":
        return rng.beta(2, 5, n), rng.normal(size=(n, 2))
    y = rng.poisson(20, n)
    return y, (rng.normal(size=(n, 1)) if name == "negbin" else None)


def _output(fit, name):
    """A generated quantity of the convention from a StanFit (a field, else in ``draws``)."""
    value = getattr(fit, name, None)
    if value is None:
        value = fit.draws.get(name)
    return value


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHIPPED))
def test_mirror_matches_stan_record_log_lik(name):
    rng = np.random.default_rng(4)
    model = _model(name)
    y, X = _data(name, rng)
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.1, 1, len(y))
    data = stan_data(model, y, alpha, X=X, censor_bound=3.0, want_contrib=True)
    fit = engine.fit(model.stan_file, data, seed=3, chains=2, iter_warmup=200, iter_sampling=100)
    mirror = model.record_log_lik(fit.draws, data)
    record_log_lik = _output(fit, "record_log_lik")
    contrib = _output(fit, "contrib")
    contrib_uncensored = _output(fit, "contrib_uncensored")
    assert mirror.shape == record_log_lik.shape == (200, len(y))
    assert np.allclose(mirror, record_log_lik, rtol=1e-6, atol=1e-6)
    assert np.allclose(alpha * mirror, contrib_uncensored, rtol=1e-6, atol=1e-6)
    assert np.allclose(np.clip(alpha * mirror, -3, 3), contrib, rtol=1e-6, atol=1e-6)


def test_outcome_support_checks():
    beta = get_model("beta")
    with pytest.raises(
        InputError, match=r"^y: \[CONFIDENTIAL, from the data: record 2\] is outside \(0, 1\)"
    ):
        beta.to_stan_scale([0.5, 1.0])
    scaled = beta.to_stan_scale([0.0, 50.0, 100.0], bounds=(0.0, 100.0))
    assert np.all((scaled > 0) & (scaled < 1))
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 2\] lies outside the public bounds",
    ) as err:
        beta.to_stan_scale([0.0, 150.0], bounds=(0.0, 100.0))
    assert "150" not in str(err.value)  # positions, never values
    with pytest.raises(InputError, match="^bounds:"):
        beta.to_stan_scale([0.5], bounds=(1.0, 0.0))
    with pytest.raises(InputError, match="^bounds:"):
        beta.to_stan_scale([0.5], bounds=(0.0,))
    pois = get_model("poisson")
    assert pois.to_stan_scale([0, 3.0, 7]).dtype == np.int64
    with pytest.raises(InputError, match="^y: .*non-negative integer"):
        pois.to_stan_scale([1, 2.5])
    with pytest.raises(InputError, match="^y: .*non-negative integer"):
        pois.to_stan_scale([1, -2])
    with pytest.raises(
        InputError, match=r"^y: \[CONFIDENTIAL, from the data: record 2\] is missing or infinite"
    ):
        pois.to_stan_scale([1, np.nan])
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 3\] exceeds Stan\'s 32-bit integers",
    ):
        pois.to_stan_scale([1, 2, 1e10])
    with pytest.raises(InputError, match="^y: .*empty"):
        pois.to_stan_scale([])
    with pytest.raises(InputError, match="^y: .*numeric"):
        pois.to_stan_scale(["a", "b"])
    with pytest.raises(InputError, match="^model:"):
        get_model("weibull")
    with pytest.raises(InputError, match="^stan_file:"):
        Model.from_stan_file("no/such/program.stan")
    # check_outcome is the former name of to_stan_scale
    assert np.array_equal(check_outcome(beta, [0.0, 100.0], (0.0, 100.0)), scaled[[0, 2]])


def test_scale_round_trip():
    beta = get_model("beta")
    x = np.array([0.0, 12.5, 99.0, 100.0])
    u = beta.to_stan_scale(x, bounds=(0.0, 100.0))
    assert np.allclose(u, (x + 1e-4) / (100 + 2e-4))  # pad: a millionth of the range
    assert np.allclose(beta.from_stan_scale(u, bounds=(0.0, 100.0)), x)
    assert np.array_equal(beta.from_stan_scale(u), u)  # no bounds: the Stan scale is the scale
    counts = get_model("negbin").from_stan_scale(np.array([[1.0, 4.0], [0.0, 2.0]]))
    assert counts.dtype == np.int64 and counts.shape == (2, 2)


@pytest.mark.parametrize("name", POSITIVE)
def test_positive_outcomes_zero_at_the_lower_bound(name):
    """A positive model maps public bounds [0, hi] as the beta model does, so a record at
    the lower bound (an income of 0) lands at pad / (hi - lo + 2 pad) > 0 (pad 1e-3 here, a
    millionth of the range) and its ll is finite;
    without bounds a record <= 0 is refused, naming its position, never its value; synthetic
    records come back clipped to the bounds."""
    model = _model(name)
    y = np.array([0.0, 250.0, 1000.0])
    z = model.to_stan_scale(y, bounds=(0.0, 1000.0))
    assert np.allclose(z, (y + 1e-3) / (1000 + 2e-3))
    assert np.allclose(model.from_stan_scale(z, bounds=(0.0, 1000.0)), y)
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 2 \(and 1 more\)\] is not positive",
    ) as err:
        model.to_stan_scale([3.0, 0.0, -7.5])
    assert "7.5" not in str(err.value)
    with pytest.raises(
        InputError,
        match=r"^y: \[CONFIDENTIAL, from the data: record 3\] lies outside the public bounds",
    ):
        model.to_stan_scale([1.0, 2.0, 1001.0], bounds=(0.0, 1000.0))
    assert np.array_equal(model.to_stan_scale([0.2, 3.0]), [0.2, 3.0])  # no bounds: as given
    back = model.from_stan_scale(np.array([1e-9, 0.5, 1.7, 40.0]), bounds=(0.0, 1000.0))
    assert back.min() == 0.0 and back.max() == 1000.0 and back[1] == pytest.approx(500.0)
    X = np.random.default_rng(1).normal(size=(3, 2)) if model.covariates else None
    data = stan_data(model, z, np.ones(3), X=X)
    draws = _reference_point(model)
    ll = model.record_log_lik({k: np.asarray(v, float)[None] for k, v in draws.items()}, data)
    assert ll.shape == (1, 3) and np.all(np.isfinite(ll))


@pytest.mark.parametrize("name", POSITIVE)
def test_positive_outcomes_above_a_positive_lower_bound_are_modelled_as_themselves(name):
    """With a positive lower bound the Stan scale is y / hi, a change of units: log y moves by
    the constant log hi, so a log-linear fit of the Stan-scale outcome has the residual spread
    of log y itself. Mapped as the beta model is, (y - lo + 0.5) / (hi - lo + 1), the records
    near the bound (weekly wages just above 50 dollars) were stretched and that spread grew
    (the book's choices page, section choices-positive-scale, measures it). Synthetic values
    come back clipped to [lo, hi]."""
    model, bounds = _model(name), (50.0, 20_000.0)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, 4000)
    y = np.clip(np.exp(5.0 + 1.2 * x + 0.6 * rng.standard_normal(4000)), *bounds)
    z = model.to_stan_scale(y, bounds=bounds)
    assert np.allclose(np.log(z), np.log(y) - np.log(bounds[1]), rtol=0, atol=1e-12)
    X = np.column_stack([np.ones_like(y), x])

    def spread(v: np.ndarray) -> float:
        resid = v - X @ np.linalg.lstsq(X, v, rcond=None)[0]
        return float(resid.std())

    assert spread(np.log(z)) == pytest.approx(spread(np.log(y)), abs=1e-9)
    assert np.allclose(model.from_stan_scale(z, bounds=bounds), y)
    back = model.from_stan_scale(np.array([1e-6, 0.01, 3.0]), bounds=bounds)
    assert back.tolist() == [50.0, 200.0, 20_000.0]


@pytest.mark.parametrize("name", ["lognormal", "gamma"])
def test_positive_log_likelihood_is_free_of_the_scale(name):
    """ll is the log density of log y (no Jacobian term): rescaling y by c with the location
    moved by log c leaves every record's ll unchanged, so a wide public upper bound does not
    move ll relative to the censoring bound M."""
    model = _model(name)
    y = np.random.default_rng(2).lognormal(-3.0, 1.0, 50)
    point = _reference_point(model)
    loc = "mu" if name == "lognormal" else "log_mean"
    c = 1e-3
    draws = {k: np.asarray([v], float) for k, v in point.items()}
    moved = dict(draws, **{loc: draws[loc] + np.log(c)})
    ll = model.record_log_lik(draws, {"y": y})
    ll_scaled = model.record_log_lik(moved, {"y": c * y})
    assert np.allclose(ll, ll_scaled, rtol=1e-9, atol=1e-9)
    # and it is not the plain density of y, which moves by -log c
    plain = stats.lognorm if name == "lognormal" else None
    if plain is not None:
        dens = stats.lognorm(s=point["sigma"], scale=np.exp(point["mu"])).logpdf(y)
        assert np.allclose(ll, dens + np.log(y))


def test_weights_outside_unit_interval_rejected():
    beta = get_model("beta")
    y = np.array([0.2, 0.4])
    with pytest.raises(InputError, match="^alpha:"):
        stan_data(beta, y, np.array([0.5, 1.2]))
    with pytest.raises(InputError, match="^alpha:"):
        stan_data(beta, y, np.array([-0.1, 1.0]))


def test_stan_data_switches():
    beta = get_model("beta")
    y = np.array([0.2, 0.4])
    data = stan_data(beta, y, np.ones(2), want_contrib=True)
    assert data["want_contrib"] == 1 and data["want_rep"] == 0 and "want_log_lik" not in data
    with pytest.raises(TypeError, match="want_log_lik"):
        stan_data(beta, y, np.ones(2), want_log_lik=True)  # the former name is gone
    with pytest.raises(InputError, match="^X:"):
        stan_data(get_model("poisson"), np.array([1, 2]), np.ones(2), X=np.ones((3, 1)))


def test_program_hash():
    for model in SHIPPED.values():
        code = engine.program_code(model.stan_file)
        assert "#include" not in code.split("functions {", 1)[1].split("}", 1)[0]
        assert model.program_hash() == hashlib.sha256(code.encode()).hexdigest()
    hashes = {m.program_hash() for m in SHIPPED.values()}
    assert len(hashes) == len({m.stan_file for m in SHIPPED.values()})


def test_programs_follow_the_naming_convention():
    """Every program declares the convention's switches and outputs, and defines its
    per-record log-likelihood once as a function used by the model block and the
    generated quantities."""
    for path in [m.stan_file for m in SHIPPED.values()] + [USER_PROGRAM]:
        text = path.read_text()
        for decl in (
            "int<lower=0, upper=1> want_contrib;",
            "int<lower=0, upper=1> want_rep;",
            "vector[want_contrib ? n : 0] contrib;",
            "vector[want_contrib ? n : 0] contrib_uncensored;",
            "vector[want_contrib ? n : 0] record_log_lik;",
        ):
            assert decl in text, f"{path.name}: missing {decl!r}"
        # The paper's contributions, or their centred form (dpsynth's extension, `centre`).
        plain = (
            "contrib = dpsynth_contrib(record_log_lik, alpha, censor, M);",
            "contrib_uncensored = alpha .* record_log_lik;",
        )
        centred = (
            "contrib = dpsynth_centred_contrib(record_log_lik, centre, alpha, censor, M);",
            "contrib_uncensored = alpha .* (record_log_lik - centre);",
        )
        assert all(d in text for d in plain) or all(d in text for d in centred), path.name
        if path != USER_PROGRAM:
            assert all(d in text for d in centred), f"{path.name}: shipped programs are centred"
        assert "log_lik_raw" not in text and "want_log_lik" not in text
        head, body = text.split("\ndata {", 1)
        defined = re.findall(r"^\s*vector\s+(\w+_record_log_lik)\s*\(", head, re.MULTILINE)
        assert len(defined) == 1, f"{path.name}: one *_record_log_lik function expected"
        model_block = body.split("\nmodel {", 1)[1].split("\ngenerated quantities {", 1)[0]
        gq_block = body.split("\ngenerated quantities {", 1)[1]
        assert defined[0] + "(" in model_block and defined[0] + "(" in gq_block


# --- Model.simulate: the numpy posterior predictive -----------------------------------


def _one_column(n):
    return {"X": np.ones((n, 1)), "K": 1}


@pytest.mark.parametrize(("a", "b"), [(0.3, 0.6), (0.8, 4.0), (5.0, 2.0)])
def test_simulate_beta_matches_beta_distribution(a, b):
    model = get_model("beta")
    y = model.simulate({"beta1": a, "beta2": b}, {}, 20_000, np.random.default_rng(1))
    assert y.shape == (20_000,) and np.all((y > 0) & (y < 1))
    assert stats.kstest(y, stats.beta(a, b).cdf).pvalue > KS_ALPHA


def _chisquare_counts(y, pmf_of_k):
    """Chi-square goodness of fit of integer samples, bins with expected count >= 5."""
    top = int(y.max())
    k = np.arange(top + 1)
    expected = pmf_of_k(k) * y.size
    observed = np.bincount(y, minlength=top + 1).astype(float)
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], y.size - expected[keep].sum())
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("beta0", [np.log(0.7), np.log(20.0)])
def test_simulate_poisson_matches_poisson_distribution(beta0):
    model = get_model("poisson")
    n = 20_000
    y = model.simulate({"beta": [beta0]}, _one_column(n), n, np.random.default_rng(2))
    assert y.dtype == np.int64 and y.shape == (n,)
    assert _chisquare_counts(y, stats.poisson(np.exp(beta0)).pmf) > KS_ALPHA


@pytest.mark.parametrize(("mu", "phi"), [(3.0, 0.7), (40.0, 12.0)])
def test_simulate_negbin_matches_nb2(mu, phi):
    model = get_model("negbin")
    n = 20_000
    draw = {"beta": np.array([np.log(mu)]), "phi": phi}
    y = model.simulate(draw, _one_column(n), n, np.random.default_rng(3))
    assert y.dtype == np.int64
    # scipy's nbinom(n, p) counts failures before n successes: NB2 is n = phi, p = phi/(phi+mu)
    assert _chisquare_counts(y, stats.nbinom(phi, phi / (phi + mu)).pmf) > KS_ALPHA
    assert np.var(y) == pytest.approx(mu + mu**2 / phi, rel=0.1)


@pytest.mark.parametrize(("mu", "sigma"), [(-3.0, 0.4), (-1.0, 1.5)])
def test_simulate_lognormal_matches_lognormal_distribution(mu, sigma):
    y = get_model("lognormal").simulate(
        {"mu": mu, "sigma": sigma}, {}, 20_000, np.random.default_rng(4)
    )
    assert y.shape == (20_000,) and np.all(y > 0)
    assert stats.kstest(y, stats.lognorm(s=sigma, scale=np.exp(mu)).cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize(("log_mean", "shape"), [(-3.0, 0.6), (-1.0, 8.0)])
def test_simulate_gamma_matches_gamma_distribution(log_mean, shape):
    y = get_model("gamma").simulate(
        {"log_mean": log_mean, "shape": shape}, {}, 20_000, np.random.default_rng(5)
    )
    dist = stats.gamma(shape, scale=np.exp(log_mean) / shape)  # mean exp(log_mean)
    assert y.shape == (20_000,) and np.all(y > 0)
    assert stats.kstest(y, dist.cdf).pvalue > KS_ALPHA


def test_simulate_positive_regressions_follow_the_rows_of_x():
    rng = np.random.default_rng(7)
    n = 20_000
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    beta = np.array([-2.0, 0.6])
    eta = X @ beta
    y = get_model("lognormal-regression").simulate(
        {"beta": beta, "sigma": 0.7}, {"X": X}, n, np.random.default_rng(8)
    )
    u = stats.norm(eta, 0.7).cdf(np.log(y))
    assert stats.kstest(u, "uniform").pvalue > KS_ALPHA
    # spread by the design: sd_i = sigma exp(X_i[2:] gamma); one sigma fails the PIT
    y = SHIPPED[SPREAD].simulate(
        {"beta": beta, "sigma": 0.7, "gamma": [0.5]}, {"X": X}, n, np.random.default_rng(10)
    )
    sd = 0.7 * np.exp(0.5 * X[:, 1])
    assert stats.kstest(stats.norm(eta, sd).cdf(np.log(y)), "uniform").pvalue > KS_ALPHA
    assert stats.kstest(stats.norm(eta, 0.7).cdf(np.log(y)), "uniform").pvalue < KS_ALPHA
    y = get_model("gamma-regression").simulate(
        {"beta": beta, "shape": 2.5}, {"X": X}, n, np.random.default_rng(9)
    )
    u = stats.gamma(2.5, scale=np.exp(eta) / 2.5).cdf(y)
    assert stats.kstest(u, "uniform").pvalue > KS_ALPHA
    # power: the PIT under the wrong slope is not uniform
    wrong = stats.gamma(2.5, scale=np.exp(X @ np.array([-2.0, 0.3])) / 2.5).cdf(y)
    assert stats.kstest(wrong, "uniform").pvalue < KS_ALPHA


def test_simulate_covariate_models_follow_the_rows_of_x():
    """With covariates the records differ in distribution; the probability integral
    transform of each record under its own distribution is uniform."""
    rng = np.random.default_rng(5)
    n = 20_000
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    beta = np.array([-0.3, 0.8])
    mu = expit(X @ beta)
    kappa = 7.0
    y = get_model("beta-regression").simulate(
        {"beta": beta, "kappa": kappa}, {"X": X}, n, np.random.default_rng(6)
    )
    u = stats.beta(mu * kappa, (1 - mu) * kappa).cdf(y)
    assert stats.kstest(u, "uniform").pvalue > KS_ALPHA
    # counts: randomized PIT, F(y - 1) + V (F(y) - F(y - 1)) is uniform
    lam = np.exp(np.array([1.0, 0.5]) @ X.T)
    yc = get_model("poisson").simulate({"beta": [1.0, 0.5]}, {"X": X}, n, rng)
    dist = stats.poisson(lam)
    pit = dist.cdf(yc - 1) + rng.random(n) * dist.pmf(yc)
    assert stats.kstest(pit, "uniform").pvalue > KS_ALPHA


def test_simulate_input_checks():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="^n_out:"):
        get_model("poisson").simulate({"beta": [0.0]}, _one_column(5), 6, rng)
    with pytest.raises(InputError, match="^n_out:"):
        get_model("beta").simulate({"beta1": 1.0, "beta2": 1.0}, {}, -1, rng)
    with pytest.raises(InputError, match="^draw:"):
        get_model("negbin").simulate({"beta": [0.0]}, _one_column(5), 5, rng)
    with pytest.raises(InputError, match="^draw:"):
        get_model("poisson").simulate({"beta": [0.0, 1.0]}, _one_column(5), 5, rng)
    assert get_model("beta").simulate({"beta1": 1.0, "beta2": 1.0}, {}, 0, rng).shape == (0,)
    user = Model.from_stan_file(USER_PROGRAM)
    assert user.simulate is None and user.record_log_lik is None


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHIPPED))
def test_simulate_matches_stan_y_rep(name):
    """At one posterior draw of a small fit, Stan's y_rep (one engine.generate call) and
    numpy's simulate (many repetitions) pass a two-sample KS test at alpha = 0.001."""
    rng = np.random.default_rng(8)
    model = _model(name)
    y, X = _data(name, rng, n=300)
    y = model.to_stan_scale(y)
    data = stan_data(model, y, np.ones(len(y)), X=X)
    fit = engine.fit(model.stan_file, data, seed=9, chains=2, iter_warmup=150, iter_sampling=50)
    s = fit.n_draws - 1
    stan_rep = np.asarray(engine.generate(model.stan_file, data, fit.draw(s), seed=10))
    draw = {k: v[s] for k, v in fit.draws.items()}  # includes transformed parameters
    sims = [model.simulate(draw, data, len(y), np.random.default_rng(i)) for i in range(40)]
    numpy_rep = np.concatenate(sims)
    assert stan_rep.shape == (len(y),)
    assert stats.ks_2samp(stan_rep, numpy_rep).pvalue > KS_ALPHA
    # the test has power: a clearly different parameter is rejected
    if name == "beta":
        other = dict(draw, beta1=draw["beta1"] * 1.5)
    elif name == "lognormal":
        other = dict(draw, mu=draw["mu"] + 0.5)
    elif name == "gamma":
        other = dict(draw, log_mean=draw["log_mean"] + 0.5)
    elif name == "beta-regression":
        other = dict(draw, beta=draw["beta"] + np.r_[0.5, np.zeros(len(draw["beta"]) - 1)])
    else:
        other = dict(draw, beta=draw["beta"] + np.r_[0.3, np.zeros(len(draw["beta"]) - 1)])
    shifted = np.concatenate(
        [model.simulate(other, data, len(y), np.random.default_rng(i)) for i in range(40)]
    )
    assert stats.ks_2samp(stan_rep, shifted).pvalue < KS_ALPHA


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
        ("poisson", "grouped"),
        ("negbin", "grouped"),
        ("poisson-regression", "covariate"),
        ("negbin-regression", "covariate"),
        ("poisson-regression", "grouped"),
        ("lognormal", None),
        ("gamma", None),
        ("lognormal-regression", None),
        (SPREAD, None),
        ("gamma-regression", None),
    ],
)
def test_stan_target_equals_sum_of_mirror_contributions(name, design):
    """The model block's log density (regrouped for speed where uncensored: sufficient
    statistics, records grouped by outcome, one linear predictor for an intercept-only
    design) minus the prior equals sum_i alpha_i ll_i, and sum_i clip(alpha_i ll_i, -M, M)
    when censored."""
    rng = np.random.default_rng(11)
    model = _model(name)
    y, X = _data(name, rng)
    if design in ("intercept", "grouped"):
        X = None
    elif design == "covariate":
        X = rng.normal(size=(len(y), 1))
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.1, 1, len(y))
    if design == "grouped":  # weights that depend on y alone: one censored term per outcome
        alpha = 0.4 + 0.6 / (1.0 + y)
    data = stan_data(model, y, alpha, X=X)
    fit = engine.fit(model.stan_file, data, seed=5, chains=2, iter_warmup=150, iter_sampling=50)

    def log_density(alpha_, censor_bound, params):
        d = stan_data(model, y, alpha_, X=X, censor_bound=censor_bound)
        return float(engine.log_density(model.stan_file, d, [params])[0])

    for s in (0, fit.n_draws - 1):
        params = fit.draw(s)
        draws = {k: v[s : s + 1] for k, v in fit.draws.items()}
        contrib = alpha * model.record_log_lik(draws, data)[0]
        M = float(np.median(np.abs(contrib)))  # clamps about half of the records
        prior = log_density(np.zeros(len(y)), None, params)
        uncensored = log_density(alpha, None, params) - prior
        censored = log_density(alpha, M, params) - prior
        assert uncensored == pytest.approx(contrib.sum(), rel=1e-8, abs=1e-6)
        assert censored == pytest.approx(np.clip(contrib, -M, M).sum(), rel=1e-8, abs=1e-6)
        assert np.sum(np.abs(contrib) > M) >= len(y) // 3  # the censored check really clamps


# --- centred censoring (dpsynth's extension) ------------------------------------------


def _reference_point(model):
    """A public parameter value per model without a finite saturated log-likelihood."""
    return {
        "beta": {"beta1": 0.6, "beta2": 2.5},
        "beta-regression": {"beta": [-0.9, 0.2, -0.1], "kappa": 6.0},
        "lognormal": {"mu": -2.1, "sigma": 0.6},
        "gamma": {"log_mean": -1.7, "shape": 1.8},
        "lognormal-regression": {"beta": [-2.1, 0.2, -0.1], "sigma": 0.6},
        "gamma-regression": {"beta": [-1.7, 0.2, -0.1], "shape": 1.8},
    }[model.name]


def _centring_for(model, data):
    """A record-only centre per model: saturated where finite, else a public point."""
    if model.saturated is not None:
        return record_centre(model, data, "saturated")
    return record_centre(model, data, _reference_point(model))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHIPPED))
def test_centred_contrib_matches_numpy_clamp(name):
    """Stan's ``contrib`` = clip(alpha (ll - c), -M, M) and ``contrib_uncensored`` =
    alpha (ll - c) at every retained draw, to 1e-8; ``record_log_lik`` stays the raw ll."""
    rng = np.random.default_rng(21)
    model = _model(name)
    y, X = _data(name, rng)
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.1, 1, len(y))
    base = stan_data(model, y, np.ones(len(y)), X=X)
    centre = _centring_for(model, base)
    M = 1.5
    data = stan_data(model, y, alpha, X=X, censor_bound=M, want_contrib=True, centre=centre)
    fit = engine.fit(model.stan_file, data, seed=8, chains=2, iter_warmup=150, iter_sampling=50)
    ll = model.record_log_lik(fit.draws, data)
    assert np.allclose(_output(fit, "record_log_lik"), ll, rtol=1e-8, atol=1e-8)
    expected = np.clip(alpha * (ll - centre), -M, M)
    assert np.allclose(_output(fit, "contrib"), expected, rtol=1e-8, atol=1e-8)
    assert np.allclose(_output(fit, "contrib_uncensored"), alpha * (ll - centre), atol=1e-8)
    assert np.any(np.abs(alpha * (ll - centre)) > M)  # the check really clamps


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHIPPED))
def test_zero_centre_is_the_uncentred_program(name):
    """centre = 0 is the paper's program exactly: Stan's contrib equals the uncentred clamp
    of its own record_log_lik bit for bit, and the log density (minus the prior) equals
    sum clip(alpha ll); a non-zero centre shifts the censored log density as the clamp of
    alpha (ll - c) says."""
    rng = np.random.default_rng(13)
    model = _model(name)
    y, X = _data(name, rng)
    y = model.to_stan_scale(y)
    alpha = rng.uniform(0.1, 1, len(y))
    M = 2.0
    data = stan_data(model, y, alpha, X=X, censor_bound=M, want_contrib=True)
    assert np.array_equal(data["centre"], np.zeros(len(y)))
    fit = engine.fit(model.stan_file, data, seed=4, chains=2, iter_warmup=150, iter_sampling=50)
    own = np.clip(alpha * _output(fit, "record_log_lik"), -M, M)
    assert np.array_equal(_output(fit, "contrib"), own)
    centre = _centring_for(model, stan_data(model, y, np.ones(len(y)), X=X))

    def log_density(alpha_, censor_bound, params, centre_=None):
        d = stan_data(model, y, alpha_, X=X, censor_bound=censor_bound, centre=centre_)
        return float(engine.log_density(model.stan_file, d, [params])[0])

    params = fit.draw(fit.n_draws - 1)
    draws = {k: v[-1:] for k, v in fit.draws.items()}
    ll = model.record_log_lik(draws, data)[0]
    prior = log_density(np.zeros(len(y)), None, params)
    plain = log_density(alpha, M, params) - prior
    assert plain == pytest.approx(np.clip(alpha * ll, -M, M).sum(), rel=1e-8, abs=1e-6)
    shifted = log_density(alpha, M, params, centre) - prior
    assert shifted == pytest.approx(np.clip(alpha * (ll - centre), -M, M).sum(), rel=1e-8, abs=1e-6)
    uncensored = log_density(alpha, None, params, centre) - prior
    assert uncensored == pytest.approx((alpha * (ll - centre)).sum(), rel=1e-8, abs=1e-6)


# --- the beta program's blocked censored sum (sub-linear per gradient) ------------------


def _blocked_case(name, rng, n):
    """Outcomes (with extreme records) and 12 random parameter values of a blocked program."""
    if name == "beta":
        y = np.concatenate([rng.beta(0.5, 3.0, n - 2), [1e-9, 1 - 1e-9]])
        params = [
            {"phi": float(p), "lambda": float(lam)}
            for p, lam in zip(rng.uniform(0.02, 0.98, 12), np.exp(rng.uniform(-2.0, 3.5, 12)))
        ]
        draws = {k: np.array([p[k] for p in params]) for k in ("phi", "lambda")}
        draws["beta1"] = draws["lambda"] * draws["phi"]
        draws["beta2"] = draws["lambda"] * (1.0 - draws["phi"])
        return y, params, draws
    y = np.concatenate([rng.lognormal(-3.0, 1.0, n - 2), [1e-7, 1 - 1e-7]])
    loc, spread = ("mu", "sigma") if name == "lognormal" else ("log_mean", "shape")
    locs, spreads = rng.uniform(-6.0, 0.0, 12), np.exp(rng.uniform(-1.5, 1.5, 12))
    params = [{loc: float(a), spread: float(b)} for a, b in zip(locs, spreads)]
    return y, params, {loc: locs, spread: spreads}


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["equal", "smooth-in-y", "random"])
def test_beta_blocked_censored_sum_equals_record_by_record(weights):
    """The beta program's censored target (records sorted by y, blocks of ~sqrt(n) with box
    bounds: dpsynth_blocked_censored_sum) equals sum_i clip(alpha_i (ll_i - c_i), -M, M),
    computed record by record in numpy, to 1e-8 relative, at 12 random parameter values and
    bounds M from 'everything clamped' to 'nothing clamped', with and without centring."""
    _check_blocked_sum("beta", weights)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lognormal", "gamma"])
@pytest.mark.parametrize("weights", ["equal", "smooth-in-y", "random"])
def test_positive_blocked_censored_sum_equals_record_by_record(name, weights):
    """The same check for the intercept-only log-normal and gamma programs."""
    _check_blocked_sum(name, weights)


def _check_blocked_sum(name, weights):
    from dpsynth.models.program_checks import log_density

    rng = np.random.default_rng(31)
    model = _model(name)
    n = 700  # B = 27: 26 blocks, the last one short
    y, params, draws = _blocked_case(name, rng, n)
    alpha = {
        "equal": np.ones(n),
        "smooth-in-y": 0.2 + 0.8 / (1.0 + 5.0 * y),
        "random": rng.uniform(0.0, 1.0, n),
    }[weights]
    for centre in (np.zeros(n), rng.normal(0.0, 2.0, n)):
        base = stan_data(model, y, alpha, centre=centre)
        ll = model.record_log_lik(draws, base)  # (12, n), numpy mirror (tested above)
        terms = alpha * (ll - centre)
        prior = log_density(model.stan_file, {**base, "alpha": np.zeros(n)}, params)
        clamped_shares = []
        for M in (1e-6, 0.05, 0.5, 2.0, 10.0, 1e6):
            data = stan_data(model, y, alpha, censor_bound=M, centre=centre)
            got = log_density(model.stan_file, data, params) - prior
            want = np.clip(terms, -M, M).sum(axis=1)
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8 * M * n)
            clamped_shares.append(float(np.mean(np.abs(terms) > M)))
        # the grid of bounds goes from all records clamped to none
        assert max(clamped_shares) > 0.99 and min(clamped_shares) == 0.0
        assert any(0.2 < s < 0.8 for s in clamped_shares)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, m in SHIPPED.items() if m.covariates])
def test_every_regression_fits_an_intercept_only_design(name):
    """A regression with no covariates (K = 1: a table's first column without public
    columns) samples: the programs' slope priors must not index beta[2:K] when K = 1
    (lognormal- and gamma-regression failed there until they guarded it)."""
    rng = np.random.default_rng(5)
    model = _model(name)
    y, _ = _data(name, rng)
    data = stan_data(model, model.to_stan_scale(y), np.ones(len(y)), X=None)
    fit = engine.fit(model.stan_file, data, seed=2, chains=1, iter_warmup=100, iter_sampling=50)
    assert fit.draws["beta"].shape == (50, 1)
