"""Small numpy helpers for the book's teaching pages: grid posteriors, illustrations, exercises.

Nothing in a release uses this module. It holds

* one-parameter **grid posteriors** built from the library's own accounting functions
  (:func:`dpsynth.privacy.accounting.weighted_contributions`), so the by-hand chapter
  (``book/by_hand.md``) and the Foundations figures can show the unweighted, weighted and
  censored posteriors exactly, without Stan;
* the exact **privacy loss** of a grid posterior (a discrete exponential mechanism);
* quick **privacy-utility curves** (Laplace mean, perturbed histogram) with seeded numpy
  noise: illustrations, not releases;
* the **exercises' answers**: :func:`exercise_answer` computes each with the library and
  :data:`EXPECTED` holds the closed-form value the book's solutions derive by hand.
  ``tests/test_teaching.py`` checks that the two agree, and each solution cell in the
  book asserts the same numbers when the book is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import betaln, logsumexp

from dpsynth.curator.utility import ecdf_measures
from dpsynth.errors import InputError
from dpsynth.mechanisms import inference, weights
from dpsynth.mechanisms.histogram import perturbed_histogram
from dpsynth.privacy import accounting, relations

# ----------------------------------------------------------------------------- log-likelihoods


def beta_log_lik(y: Any, a: Any, b: Any) -> np.ndarray:
    """Per-record log-likelihood log Beta(y_i | a_s, b_s) as an ``S x n`` matrix.

    ``a`` and ``b`` are the S parameter values (arrays of equal length, or scalars),
    ``y`` the n records in (0, 1). The same formula as the beta model's numpy mirror
    (``dpsynth.models.catalogue``), written out so the by-hand chapter can show it.
    """
    y = np.asarray(y, dtype=float).reshape(-1)
    if np.any((y <= 0) | (y >= 1)):
        raise InputError("y", "beta records must lie strictly inside (0, 1)")
    a, b = np.broadcast_arrays(
        np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    )
    a, b = a[:, None], b[:, None]
    return (a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - betaln(a, b)


def normal_log_lik(y: Any, mu: Any, sigma: float) -> np.ndarray:
    """Per-record log N(y_i | mu_s, sigma^2) as an ``S x n`` matrix (known ``sigma``)."""
    y = np.asarray(y, dtype=float).reshape(-1)
    mu = np.atleast_1d(np.asarray(mu, dtype=float))[:, None]
    return stats.norm.logpdf(y[None, :], loc=mu, scale=float(sigma))


# ----------------------------------------------------------------------------- grid posteriors


def grid_log_posterior(
    log_lik: np.ndarray,
    alpha: Any = None,
    censor_bound: float | None = None,
    log_prior: Any = None,
) -> np.ndarray:
    """Normalised log posterior on a grid of G parameter values, shape (G,).

    ``log_lik`` is the ``G x n`` matrix of unweighted per-record log-likelihoods at the grid
    points. The utility is the sum of :func:`dpsynth.privacy.accounting.weighted_contributions`: the
    weighted contributions alpha_i f_theta(x_i), clamped to [-M, M] when ``censor_bound`` M
    is given. ``alpha`` defaults to 1 for every record (the ordinary posterior), ``log_prior``
    to a flat prior on the grid. The result sums (in probability) to 1 over the grid.
    """
    ll = np.asarray(log_lik, dtype=float)
    if ll.ndim != 2:
        raise InputError("log_lik", "must be a G x n matrix")
    a = np.ones(ll.shape[1]) if alpha is None else np.asarray(alpha, dtype=float)
    u = accounting.weighted_contributions(ll, a, censor_bound).sum(axis=1)
    if log_prior is not None:
        u = u + np.asarray(log_prior, dtype=float)
    return u - logsumexp(u)


def grid_posterior(log_lik: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """Posterior probabilities on the grid: :func:`grid_log_posterior` (same arguments), exp."""
    return np.exp(grid_log_posterior(log_lik, *args, **kwargs))


def grid_draws(grid: Any, prob: Any, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of the parameter from a grid posterior (the stand-in for MCMC draws)."""
    accounting.require_generator(rng)
    grid = np.asarray(grid, dtype=float)
    return grid[rng.choice(grid.size, size=int(size), p=np.asarray(prob, dtype=float))]


def grid_record_bounds(
    log_lik: np.ndarray,
    alpha: Any = None,
    censor_bound: float | None = None,
    size: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Record bounds Delta_i = max_s |alpha_i f_theta_s(x_i)| from draws of a grid posterior.

    ``size`` draws are taken from :func:`grid_posterior` (``log_lik`` is ``G x n`` at the grid
    points, so the draws' log-likelihoods are rows of it) with a fixed ``seed``, so refits
    under different weights use common random numbers, as a search over weights needs.
    Returns shape (n,): :func:`dpsynth.privacy.accounting.record_bounds` of the weighted (and, with
    ``censor_bound``, clamped) contributions at the draws.
    """
    ll = np.asarray(log_lik, dtype=float)
    a = np.ones(ll.shape[1]) if alpha is None else np.asarray(alpha, dtype=float)
    prob = grid_posterior(ll, a, censor_bound)
    idx = np.random.default_rng(seed).choice(prob.size, size=int(size), p=prob)
    return accounting.record_bounds(accounting.weighted_contributions(ll[idx], a, censor_bound))


def grid_privacy_loss(
    log_lik: np.ndarray, alpha: Any = None, censor_bound: float | None = None, log_prior: Any = None
) -> np.ndarray:
    """Exact privacy loss of one draw from a grid posterior, record by record, shape (n,).

    A draw from the grid posterior is a discrete exponential mechanism. Deleting record i
    (add/remove neighbours) changes the log probability of grid point theta by
    log p(theta | x) - log p(theta | x without i); entry i is the largest absolute value of
    that change over the grid. The weights ``alpha`` are held fixed (as the censoring proof
    requires). With a censor bound M every entry is at most 2M = epsilon.
    """
    ll = np.asarray(log_lik, dtype=float)
    a = np.ones(ll.shape[1]) if alpha is None else np.asarray(alpha, dtype=float)
    full = grid_log_posterior(ll, a, censor_bound, log_prior)
    loss = np.empty(ll.shape[1])
    for i in range(ll.shape[1]):
        keep = np.arange(ll.shape[1]) != i
        without = grid_log_posterior(ll[:, keep], a[keep], censor_bound, log_prior)
        loss[i] = np.max(np.abs(full - without))
    return loss


# ----------------------------------------------------------------------------- illustrations


def laplace_mean_errors(
    y: Any,
    bounds: tuple[float, float],
    epsilons: Sequence[float],
    reps: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Mean absolute error of the Laplace-sanitized sample mean at each epsilon, shape (E,).

    Substitution neighbours: sensitivity (hi - lo) / n (:func:`dpsynth.privacy.accounting.sensitivity_mean`).
    Seeded numpy noise: an illustration of the privacy-utility trade-off, not a release.
    """
    y = np.asarray(y, dtype=float)
    lo, hi = accounting.require_public_bounds(bounds)
    sens = accounting.sensitivity_mean(lo, hi, y.size)
    mean = float(np.clip(y, lo, hi).mean())
    out = []
    for eps in epsilons:
        noisy = accounting.laplace_mechanism(np.full(int(reps), mean), sens, float(eps), rng)
        out.append(float(np.mean(np.abs(noisy - mean))))
    return np.array(out)


def ph_max_ecdf(
    y: Any,
    bounds: tuple[float, float],
    epsilons: Sequence[float],
    reps: int,
    rng: np.random.Generator,
    n_bins: int | None = None,
) -> np.ndarray:
    """Mean max-ECDF distance of perturbed-histogram synthetic data to ``y``, per epsilon.

    Each of ``reps`` synthetic sets is one PH release (:func:`dpsynth.mechanisms.histogram.perturbed_histogram`,
    substitution neighbours) with seeded numpy noise: an illustration, not a release.
    """
    out = []
    for eps in epsilons:
        sets = perturbed_histogram(y, bounds, float(eps), rng, n_bins=n_bins, m=int(reps))
        out.append(float(np.mean([ecdf_measures(y, s)["max_ecdf"] for s in sets])))
    return np.array(out)


def binomial_posterior_bounds(n: int, support: tuple[float, float]) -> tuple[float, float]:
    """Liu's bounds A and G for the posterior Beta(s + 1, n - s + 1) of a proportion.

    Uniform prior, n Bernoulli records, s successes; theta restricted to the public
    ``support`` inside (0, 1). Returns (A, G): A = sup |log f(theta | x)| and
    G = sup f(theta | x) over every s in 0..n and theta in the support. The log density is
    concave in theta, so its extremes lie at the ends of the support or at the mode.
    """
    lo, hi = accounting.require_public_bounds(support, "support")
    if not 0.0 < lo < hi < 1.0:
        raise InputError("support", "must lie strictly inside (0, 1)")
    s = np.arange(int(n) + 1)
    a, b = s + 1.0, n - s + 1.0
    mode = np.clip(s / max(int(n), 1), lo, hi)
    pts = np.stack([np.full(s.size, lo), np.full(s.size, hi), mode])
    logf = stats.beta.logpdf(pts, a, b)
    return float(np.max(np.abs(logf))), float(np.exp(logf.max()))


# ----------------------------------------------------------------------------- exercises


def _dp_laplace() -> np.ndarray:
    scale = accounting.laplace_scale(accounting.sensitivity_mean(0.0, 1.0, 500), 1.0)
    return np.array([scale, math.exp(-0.01 / scale)])


def _dp_compose() -> np.ndarray:
    return np.array([5 * accounting.epsilon_of(0.4, n) for n in ("add-remove", "substitution")])


def _dp_bernoulli() -> np.ndarray:
    theta = np.linspace(0.05, 0.95, 1801)
    ll = np.concatenate([np.log(theta), np.log1p(-theta)])  # records x = 1 and x = 0
    delta = float(np.max(np.abs(ll)))
    return np.array([delta, accounting.epsilon_of(delta, relations.PAPER_NEIGHBOURS)])


def _pp_lw() -> np.ndarray:
    f = np.array([1.0, 2.0, 3.0, 5.0])
    return np.concatenate([weights.lw_weights(f), weights.lw_weights(f, c=0.8, g=0.1)])


def _pp_bounds() -> np.ndarray:
    log_lik = np.array([[-0.5, 1.2, -4.0], [0.3, 0.9, -6.0]])
    contrib = accounting.weighted_contributions(log_lik, np.array([1.0, 1.0, 0.25]))
    delta = accounting.lipschitz_bound(contrib)
    return np.concatenate(
        [
            accounting.record_bounds(contrib),
            [delta, accounting.epsilon_of(delta, relations.PAPER_NEIGHBOURS)],
        ]
    )


def _pp_sw() -> np.ndarray:
    alpha = weights.sw_weight(6.0, 1.5)
    return np.array([alpha, alpha * 400])


def _cens_m() -> np.ndarray:
    return np.array([accounting.censor_bound(4.0 / 2, n) for n in ("substitution", "add-remove")])


def _cens_clamp() -> np.ndarray:
    raw = np.array([[-3.2, 0.4, 1.7, -0.9]])
    clamped = accounting.weighted_contributions(raw, np.ones(4), 1.0)
    n_censored = int(accounting.censored_records(raw, 1.0).sum())
    return np.array([clamped.sum(), n_censored, np.abs(clamped).max()])


def _cens_ph() -> np.ndarray:
    scale = accounting.laplace_scale(accounting.histogram_sensitivity("substitution"), 1.0)
    law = stats.laplace(0.0, scale)
    return np.array([scale, law.sf(0.0), law.sf(1.0)])


def _rw_weights() -> np.ndarray:
    return weights.reweighted(np.array([1.0, 0.5, 0.2]), np.array([0.4, 0.8, 1.0]), 0.95)


def _rw_frozen() -> np.ndarray:
    alpha, bounds = np.array([1.0, 0.5, 0.2]), np.array([0.4, 0.8, 1.0])
    return weights.reweighted(alpha, bounds, 0.95) * bounds / alpha


def _modips_sdd() -> np.ndarray:
    u = np.log([0.9, 0.1])
    return np.array(
        [accounting.exponential_probabilities(u, 2 * 5.0, eps)[0] for eps in (1.0, 4 * 5.0)]
    )


def _modips_sphc() -> np.ndarray:
    n_draws, g, h = 1000, 5.0, 0.1
    return np.array([n_draws * g * h, 1.0 / (g * h)])


def _modips_combine() -> np.ndarray:
    r = inference.combine([1.0, 1.2, 0.8], [0.04, 0.05, 0.03])
    return np.array([r.estimate, r.between, r.variance, r.df])


def _stan_m() -> np.ndarray:
    per_set = 8.0 / 4
    return np.array([accounting.censor_bound(per_set, nb) for nb in ("substitution", "add-remove")])


def _stan_contrib() -> np.ndarray:
    ll = normal_log_lik([0.0, 1.0, 3.0], 0.0, 1.0)
    alpha = np.array([1.0, 1.0, 0.5])
    return np.concatenate(
        [
            ll[0],
            accounting.weighted_contributions(ll, alpha)[0],
            accounting.weighted_contributions(ll, alpha, 2.0)[0],
        ]
    )


def _hand_record() -> np.ndarray:
    f = float(beta_log_lik([0.01], 0.5, 3.0)[0, 0])
    clamped = [
        float(accounting.weighted_contributions(np.array([[f]]), np.ones(1), m)[0, 0])
        for m in (
            accounting.censor_bound(4.0, relations.PAPER_NEIGHBOURS),
            accounting.censor_bound(2.0, relations.PAPER_NEIGHBOURS),
        )
    ]
    return np.array([f, *clamped])


def _hand_compose() -> np.ndarray:
    m = accounting.censor_bound(4.0, relations.PAPER_NEIGHBOURS)
    return np.array([3 * accounting.epsilon_of(m, nb) for nb in ("add-remove", "substitution")])


def _choose_units() -> np.ndarray:
    y = np.array([42.0, 55.0, 61.0])  # salaries in thousands of dollars
    thousands = normal_log_lik(y, 50.0, 10.0)[0]
    dollars = normal_log_lik(1000 * y, 50_000.0, 10_000.0)[0]
    return dollars - thousands


def _choose_budget() -> np.ndarray:
    return np.array([accounting.censor_bound(6.0 / 3, n) for n in ("substitution", "add-remove")])


_EXERCISES: dict[str, Callable[[], np.ndarray]] = {
    "ex-dp-laplace": _dp_laplace,
    "ex-dp-compose": _dp_compose,
    "ex-dp-bernoulli": _dp_bernoulli,
    "ex-pp-lw": _pp_lw,
    "ex-pp-bounds": _pp_bounds,
    "ex-pp-sw": _pp_sw,
    "ex-cens-m": _cens_m,
    "ex-cens-clamp": _cens_clamp,
    "ex-cens-ph": _cens_ph,
    "ex-rw-weights": _rw_weights,
    "ex-rw-frozen": _rw_frozen,
    "ex-modips-sdd": _modips_sdd,
    "ex-modips-sphc": _modips_sphc,
    "ex-modips-combine": _modips_combine,
    "ex-stan-m": _stan_m,
    "ex-stan-contrib": _stan_contrib,
    "ex-hand-record": _hand_record,
    "ex-hand-compose": _hand_compose,
    "ex-choose-units": _choose_units,
    "ex-choose-budget": _choose_budget,
}

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

EXPECTED: dict[str, np.ndarray] = {
    # dp_primer: Laplace scale 1/(500 * 1) and P(|noise| > 0.01) = exp(-0.01 / 0.002)
    "ex-dp-laplace": np.array([0.002, math.exp(-5.0)]),
    # m = 5 draws with Delta = 0.4: 5 * 2 * 0.4 (add/remove), 5 * 4 * 0.4 (substitution)
    "ex-dp-compose": np.array([4.0, 8.0]),
    # Bernoulli on [0.05, 0.95]: Delta = -log 0.05 = log 20, epsilon = 2 log 20
    "ex-dp-bernoulli": np.array([math.log(20.0), 2 * math.log(20.0)]),
    # f = (1, 2, 3, 5): f~ = (0, .25, .5, 1); (c, g) = (1, 0) then (0.8, 0.1)
    "ex-pp-lw": np.array([1.0, 0.75, 0.5, 0.0, 0.9, 0.7, 0.5, 0.1]),
    # record bounds (0.5, 1.2, 0.25 * 6), Delta = 1.5, epsilon = 3
    "ex-pp-bounds": np.array([0.5, 1.2, 1.5, 1.5, 3.0]),
    # alpha = 1.5 / 6, effective sample size 0.25 * 400
    "ex-pp-sw": np.array([0.25, 100.0]),
    # epsilon 4 over m = 2 sets: M = 2 / 4 (substitution), 2 / 2 (add/remove)
    "ex-cens-m": np.array([0.5, 1.0]),
    # clamp (-3.2, 0.4, 1.7, -0.9) to [-1, 1]: sum -0.5, 2 records censored, max |term| 1
    "ex-cens-clamp": np.array([-0.5, 2.0, 1.0]),
    # PH at epsilon 1: scale 2/1; P(noise > 0) = 1/2; P(noise > 1) = exp(-1/2) / 2
    "ex-cens-ph": np.array([2.0, 0.5, 0.5 * math.exp(-0.5)]),
    # 0.95 * (1 * 1/0.4, 0.5 * 1/0.8, 0.2 * 1/1) = (2.375 -> 1, 0.59375, 0.19)
    "ex-rw-weights": np.array([1.0, 0.59375, 0.19]),
    # frozen log-likelihoods: new bound alpha^w_i Delta_i / alpha_i = (0.4, 0.95, 0.95)
    "ex-rw-frozen": np.array([0.4, 0.95, 0.95]),
    # P(bin 1) = 0.9^t / (0.9^t + 0.1^t), t = eps / (4 A): t = 1/20, then t = 1
    "ex-modips-sdd": np.array([1.0 / (1.0 + (1.0 / 9.0) ** 0.05), 0.9]),
    # per-bin sensitivity N G h = 1000 * 5 * 0.1; N = 1 / (G h) = 2 gives sensitivity 1
    "ex-modips-sphc": np.array([500.0, 2.0]),
    # q-bar = 1, b = (0 + .04 + .04) / 2, T = .04 + .04 / 3, nu = 2 (1 + 3 * .04 / .04)^2
    "ex-modips-combine": np.array([1.0, 0.04, 0.04 + 0.04 / 3, 32.0]),
    # total epsilon 8 over m = 4 sets: M = 2 / 4 (substitution), 2 / 2 (add/remove)
    "ex-stan-m": np.array([0.5, 1.0]),
    # N(y | 0, 1) at y = (0, 1, 3): -log(2 pi) / 2 - y^2 / 2; alpha = (1, 1, 1/2); clamp at 2
    "ex-stan-contrib": np.array(
        [-_HALF_LOG_2PI, -_HALF_LOG_2PI - 0.5, -_HALF_LOG_2PI - 4.5]
        + [-_HALF_LOG_2PI, -_HALF_LOG_2PI - 0.5, (-_HALF_LOG_2PI - 4.5) / 2]
        + [-_HALF_LOG_2PI, -_HALF_LOG_2PI - 0.5, -2.0]
    ),
    # Beta(0.5, 3) at y = 0.01: -log(0.01) / 2 + 2 log(0.99) - log B(1/2, 3), B = 16/15;
    # about 2.22: above M = 2 (epsilon 4, add/remove), so clamped to 2; to 1 at M = 1
    "ex-hand-record": np.array(
        [-0.5 * math.log(0.01) + 2 * math.log(0.99) - math.log(16 / 15), 2.0, 1.0]
    ),
    # three draws at M = 2: 3 * 2M (add/remove), 3 * 4M (substitution)
    "ex-hand-compose": np.array([12.0, 24.0]),
    # every log-density shifts by -log 1000 when dollars replace thousands of dollars
    "ex-choose-units": np.full(3, -math.log(1000.0)),
    # epsilon 6 over m = 3 sets: M = 2 / 4 (substitution), 2 / 2 (add/remove)
    "ex-choose-budget": np.array([0.5, 1.0]),
}
"""Closed-form answers of the book's exercises, keyed by the exercise label."""


def exercise_labels() -> list[str]:
    """The labels of the book's exercises that have a checked answer."""
    return list(_EXERCISES)


def exercise_answer(label: str) -> np.ndarray:
    """The answer of the exercise ``label``, computed with dpsynth's functions."""
    if label not in _EXERCISES:
        raise InputError("label", f"no exercise {label!r} (known: {', '.join(_EXERCISES)})")
    return np.asarray(_EXERCISES[label](), dtype=float)


def check_answer(label: str, value: Any, rtol: float = 1e-9, atol: float = 1e-12) -> None:
    """Raise AssertionError unless ``value`` matches :data:`EXPECTED` and :func:`exercise_answer`.

    Used by the solutions in the book, so that a build of the book fails when a solution,
    its closed form and the library disagree.
    """
    got = np.asarray(value, dtype=float)
    for name, ref in (("closed form", EXPECTED[label]), ("dpsynth", exercise_answer(label))):
        if got.shape != ref.shape or not np.allclose(got, ref, rtol=rtol, atol=atol):
            raise AssertionError(f"{label}: {got} differs from the {name} answer {ref}")
