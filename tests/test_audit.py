"""Privacy audits: releases keep the epsilon they state, and broken ones are caught.

Run with ``pytest -s tests/test_audit.py`` to see the figures. About 20 s in all, most of
it the four Monte Carlo audits of :func:`dpsynth.mechanisms.audit.audit_summary`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from dpsynth.mechanisms import audit
from dpsynth.mechanisms.histogram import perturbed_histogram
from dpsynth.mechanisms.modips import sbs_gaussian
from dpsynth.privacy.accounting import censor_bound
from dpsynth.release.single import KnownSeedWarning, synthesize

# ----------------------------------------------------------------------------- Clopper-Pearson


def test_clopper_pearson_upper_is_exact():
    for k, n in [(0, 50), (3, 50), (40, 200), (199, 200)]:
        ub = audit.clopper_pearson_upper(k, n, 0.05)
        # the exact one-sided bound: a rate this large gives <= k successes with prob alpha
        assert stats.binom.cdf(k, n, ub) == pytest.approx(0.05, rel=1e-6)
    assert audit.clopper_pearson_upper(7, 7, 0.05) == 1.0
    assert audit.clopper_pearson_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100))


def test_epsilon_lower_bound_behaves():
    # a coin-flip test forces nothing
    assert audit.clopper_pearson_epsilon_lower(500, 500, 1000) == 0.0
    # rates e^-1 / 2 and 1/2 are the tight Laplace test at epsilon 1: the bound is below 1
    # and approaches it as the trials grow
    lbs = [audit.expected_epsilon_lower(0.5 / np.e, 0.5, n) for n in (10**3, 10**4, 10**6)]
    assert lbs[0] < lbs[1] < lbs[2] < 1.0
    assert lbs[2] > 0.98
    # the two error-rate inequalities are symmetric
    assert audit.clopper_pearson_epsilon_lower(30, 400, 1000) == pytest.approx(
        audit.clopper_pearson_epsilon_lower(400, 30, 1000)
    )
    assert audit.epsilon_from_rates(0.1, 0.0) == np.inf


def test_threshold_chosen_on_one_half_counted_on_the_other():
    rng = np.random.default_rng(11)
    n = 4000
    s0 = rng.laplace(0.0, 1.0, n)
    s1 = rng.laplace(1.0, 1.0, n)  # a Laplace mechanism at epsilon 1 (sensitivity 1, scale 1)
    res = audit.audit_scores(s0, s1, alpha=0.05)
    assert res.trials == n // 2 and res.direction == 1
    assert 0.6 < res.epsilon_lower <= 1.0
    # the reversed scores are caught by the other direction
    flipped = audit.audit_scores(-s0, -s1, alpha=0.05)
    assert flipped.direction == -1
    assert flipped.epsilon_lower == pytest.approx(res.epsilon_lower, abs=0.15)
    # scale 0.5 at a claimed epsilon 1 is flagged
    bad = audit.audit_scores(rng.laplace(0, 0.5, n), rng.laplace(1, 0.5, n), alpha=0.05)
    assert bad.epsilon_lower > 1.0


# ----------------------------------------------------------------------------- audited = released


def test_audited_functions_are_the_release_path():
    """The audits call perturbed_histogram and sbs_gaussian; synthesize() releases exactly them."""
    d, _ = audit.ph_pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KnownSeedWarning)
        ph = synthesize(
            d, mechanism="ph", epsilon=1.0, bounds=audit.PH_BOUNDS, seed=5, n_bins=audit.PH_BINS
        )
        sbs = synthesize(np.linspace(0, 1, 50), mechanism="sbs", epsilon=1.0, bounds=(0, 1), seed=5)
    direct = perturbed_histogram(
        d, audit.PH_BOUNDS, 1.0, np.random.default_rng(5), n_bins=audit.PH_BINS
    )
    assert np.allclose(ph.data["y"].to_numpy(), direct.ravel())
    draw = sbs_gaussian(np.linspace(0, 1, 50), (0, 1), 1.0, np.random.default_rng(5))
    published = sbs.report["sanitized_statistics"][0]
    assert published["mean"] == pytest.approx(draw.sanitized["mean"])
    assert published["variance"] == pytest.approx(draw.sanitized["variance"])


# ----------------------------------------------------------------------------- Monte Carlo audits


@pytest.fixture(scope="module")
def summary() -> dict:
    return audit.audit_summary()


def test_releases_keep_and_broken_variants_break_epsilon(summary):
    """PH and Gaussian SBS at a claimed epsilon = 1, 2000 runs on each of D and D'.

    The test is fixed in advance (guess D' when the Laplace log-likelihood ratio of the
    published statistics reaches 90% of its maximum), so every run is counted, and the
    Clopper-Pearson bounds are taken at alpha = 1e-4. If the release is 1-DP, P(eps_lb > 1)
    <= alpha = 1e-4 whatever the (unseeded, OpenDP) noise does: exact binomial coverage of
    the two error rates plus a union bound. Expected eps_lb of the tight test (FPR = e^-1/4,
    FNR = 3/4) at 2000 runs: 0.58; measured 0.46 to 0.75 in four runs of each.

    The broken variants run the same code at twice the claimed budget (Laplace noise at half
    the scale, as if the sensitivity had been halved) with seeded numpy noise, so their eps_lb
    is fixed. Expected for the tight test (FPR = e^-2/4): 1.40; over 12 other seeds PH gave
    1.38 +- 0.11 (min 1.23; PH recovers the counts from a synthetic sample, a little noise)
    and SBS 1.41 +- 0.07 (min 1.30): below 1 with probability about 2e-4 for a random seed.
    """
    eps = summary["epsilon"]
    print(
        f"\nclaimed epsilon {eps}, {summary['trials']} runs per database, alpha {summary['alpha']}"
    )
    for name, res in summary["audits"].items():
        print(
            f"  {name:20s} eps_lb = {res.epsilon_lower:.3f}  (FPR {res.fpr:.4f}, FNR {res.fnr:.4f})"
        )
    audits = summary["audits"]
    for name in ("PH", "SBS"):
        assert audits[name].epsilon_lower <= eps, name
        # the test has power (expected 0.58, sd about 0.08: below 0.1 is a 6-sigma event)
        assert audits[name].epsilon_lower > 0.1, name
        assert audits[f"{name} (noise halved)"].epsilon_lower > eps, name


# ----------------------------------------------------------------------------- censored, exact


def test_censored_losses_exact(summary):
    """Exact loss of one censored draw (grid model, n = 20, outlier at 1.0, claimed eps 2).

    Censor_uw reaches its epsilon (2M add/remove, 4M substitution) and never exceeds it;
    reference weights (Section 4.5) stay within it; weights computed from the data's own
    fit exceed it: the outlier lifts the weights of the five records at 0.7 from 0 to 0.81.
    """
    print("\nexact privacy loss of one censored draw (claimed epsilon 2):")
    for r in summary["censored"]:
        print(f"  {r['mechanism']:34s} {r['neighbours']:13s} M={r['M']:.2f}  loss={r['loss']:.3f}")
    loss = {(r["mechanism"], r["neighbours"]): r["loss"] for r in summary["censored"]}
    for nb in ("add-remove", "substitution"):
        assert loss["Censor_uw", nb] <= 2.0 + 1e-9
        assert loss["Censor_uw", nb] > 1.99
        assert loss["Censor_w, reference weights", nb] <= 2.0 + 1e-9
        assert loss["Censor_w, data-dependent weights", nb] > 2.0 * 2.0
    assert censor_bound(2.0, "add-remove") == 2 * censor_bound(2.0, "substitution")


@pytest.mark.parametrize("neighbours", ["add-remove", "substitution"])
def test_censored_bound_holds_for_every_outlier(neighbours):
    """The sweep drawn in the book: Censor_uw and reference weights stay <= epsilon."""
    outliers = np.linspace(0.0, 1.5, 31)
    curves = audit.loss_curves(outliers, neighbours)
    eps = audit.CENSOR_EPSILON
    assert np.all(curves["Censor_uw"] <= eps + 1e-9)
    assert np.all(curves["Censor_w, reference weights"] <= eps + 1e-9)
    assert np.max(curves["Censor_w, data-dependent weights"]) > eps


def test_censor_uw_bound_on_random_databases():
    model = audit.normal_grid_model(points=201)
    rng = np.random.default_rng(4)
    for neighbours in ("add-remove", "substitution"):
        M = censor_bound(1.0, neighbours)
        for _ in range(25):
            x = rng.uniform(0, 1, 15)
            xp = audit.neighbour(x, rng.uniform(-1, 2), neighbours, replace=int(rng.integers(15)))
            loss = audit.privacy_loss(
                x, xp, audit.unit_weights, M, model.grid, model.loglik, model.log_prior
            )
            assert loss <= 1.0 + 1e-9


def test_data_dependent_weights_depend_on_other_records():
    model = audit.normal_grid_model()
    x = audit.censor_data()
    weights = audit.data_lw_weights(model)
    before = weights(x)
    after = weights(audit.neighbour(x, 1.0, "add-remove"))[:-1]
    assert np.all(before[15:] == 0.0) and np.all(after[15:] > 0.8)
    ref = audit.reference_weights(audit.censor_reference(), model)
    assert np.array_equal(ref(x), ref(audit.neighbour(x, 1.0, "add-remove"))[:-1])


def test_censored_posterior_is_normalised():
    model = audit.normal_grid_model(points=101)
    x = audit.censor_data()
    lp = audit.censored_log_posterior(
        x, np.ones(x.size), 1.0, model.grid, model.loglik, model.log_prior
    )
    assert np.exp(lp).sum() == pytest.approx(1.0)
