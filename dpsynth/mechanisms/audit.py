"""Privacy audits: statistical lower bounds on epsilon, and the exact loss of censoring.

Two complementary checks that a release keeps the guarantee it states.

* **Distinguishing tests (Monte Carlo).** Run a mechanism many times on a fixed pair of
  neighbouring databases D, D', reduce each output to a scalar, and guess "D'" when the
  scalar passes a threshold. Pure epsilon-DP forces every such test to satisfy
  FPR + e^eps FNR >= 1 and FNR + e^eps FPR >= 1, so Clopper-Pearson upper bounds on the
  two error rates give a lower confidence bound on epsilon. A lower bound above the
  claimed epsilon proves a bug; a lower bound below it proves nothing (an audit can only
  catch bugs, never prove DP).
* **Exact privacy loss of the censored pseudo posterior** (Hu, Williams & Savitsky,
  Eq. 3.5-3.6) on a one-parameter model whose parameter space is a finite grid: the
  posterior mass function is computed exactly (normalising constant by logsumexp over the
  grid), so the loss of one posterior draw, max_theta |log xi(theta|x) - log xi(theta|x')|,
  is exact for that grid mechanism. It shows that Censor_uw and Censor_w with weights
  from a public reference database (Section 4.5) keep epsilon = 2M (add/remove) or 4M
  (substitution), while Censor_w with weights computed from the confidential data itself,
  as in the paper's simulations, does not: changing one record changes every weight.

:func:`audit_summary` runs both on fixed settings; ``tests/test_audit.py`` and the book
page ``book/privacy_audit.md`` report its figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from dpsynth.errors import InputError, require_choice
from dpsynth.mechanisms.histogram import perturbed_histogram
from dpsynth.mechanisms.modips import sbs_gaussian
from dpsynth.mechanisms.weights import lw_weights, reference_lw_weights
from dpsynth.privacy.accounting import (
    censor_bound,
    record_bounds,
    secure_generator,
    weighted_contributions,
)

LogLik = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""loglik(x, grid): per-record log-likelihoods f_theta(x_i), shape (len(grid), len(x))."""
WeightsFn = Callable[[np.ndarray], np.ndarray]
"""A weighting rule: maps a database x (n,) to its weights alpha (n,)."""

# ----------------------------------------------------------------------------- Clopper-Pearson


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided exact (Clopper-Pearson) upper 1 - alpha confidence bound on a binomial rate."""
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise InputError("trials", f"need 0 <= successes <= trials and trials >= 1 (got {k}/{n})")
    if not 0 < alpha < 1:
        raise InputError("alpha", f"must lie in (0, 1) (got {alpha})")
    return 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def epsilon_from_rates(fpr: float, fnr: float) -> float:
    """Smallest pure-DP epsilon consistent with a test's error rates (0 if none is forced).

    epsilon-DP implies FPR + e^eps FNR >= 1 and FNR + e^eps FPR >= 1 (delta = 0), hence
    eps >= max(log((1 - FNR) / FPR), log((1 - FPR) / FNR)).
    """
    with np.errstate(divide="ignore"):
        terms = np.log([1.0 - fnr, 1.0 - fpr]) - np.log([fpr, fnr])
    return float(max(0.0, np.nanmax(terms)))


def clopper_pearson_epsilon_lower(fp: int, fn: int, trials: int, alpha: float = 0.05) -> float:
    """Lower 1 - alpha confidence bound on epsilon from a distinguishing test, clipped at 0.

    ``fp`` false positives among ``trials`` runs on D and ``fn`` false negatives among
    ``trials`` runs on D'. FPR and FNR get one-sided Clopper-Pearson upper bounds at level
    alpha / 2 each (a union bound makes them hold jointly with probability >= 1 - alpha);
    plugged into :func:`epsilon_from_rates` they give eps_lb. If the mechanism is eps-DP,
    P(eps_lb > eps) <= alpha, whatever the test, provided the test was fixed before the
    counted runs.
    """
    fpr_ub = clopper_pearson_upper(fp, trials, alpha / 2.0)
    fnr_ub = clopper_pearson_upper(fn, trials, alpha / 2.0)
    return epsilon_from_rates(fpr_ub, fnr_ub)


def expected_epsilon_lower(fpr: float, fnr: float, trials: int, alpha: float = 0.05) -> float:
    """eps_lb at the expected counts fpr * trials and fnr * trials (to plan trial numbers)."""
    return clopper_pearson_epsilon_lower(round(fpr * trials), round(fnr * trials), trials, alpha)


# ----------------------------------------------------------------------------- the audit


@dataclass(frozen=True)
class AuditResult:
    """One distinguishing test: guess D' when ``direction * (statistic - threshold) >= 0``.

    ``fp`` and ``fn`` are counted on ``trials`` evaluation runs per database (runs not used
    to choose the threshold); ``epsilon_lower`` is their Clopper-Pearson eps_lb at ``alpha``.
    """

    epsilon_lower: float
    fp: int
    fn: int
    trials: int
    threshold: float
    direction: int
    alpha: float

    @property
    def fpr(self) -> float:
        """Observed false-positive rate (runs on D answered "D'")."""
        return self.fp / self.trials

    @property
    def fnr(self) -> float:
        """Observed false-negative rate (runs on D' answered "D")."""
        return self.fn / self.trials


def _error_counts(
    s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """False positives #(s0 >= t) and false negatives #(s1 < t) for each threshold t."""
    fp = s0.size - np.searchsorted(np.sort(s0), thresholds, side="left")
    fn = np.searchsorted(np.sort(s1), thresholds, side="left")
    return fp, fn


def select_threshold(
    scores_d: np.ndarray, scores_d_prime: np.ndarray, alpha: float = 0.05
) -> tuple[float, int]:
    """The (threshold, direction) whose eps_lb on these runs is largest (both directions tried).

    Candidate thresholds are the observed scores; direction +1 guesses D' for scores at or
    above the threshold, -1 for scores at or below it.
    """
    s0, s1 = np.asarray(scores_d, float), np.asarray(scores_d_prime, float)
    n = min(s0.size, s1.size)
    best = (-np.inf, 0.0, 1)
    for direction in (1, -1):
        a, b = direction * s0[:n], direction * s1[:n]
        cands = np.unique(np.concatenate([a, b]))
        fp, fn = _error_counts(a, b, cands)
        fpr_ub = np.where(fp == n, 1.0, stats.beta.ppf(1 - alpha / 2, fp + 1, n - fp))
        fnr_ub = np.where(fn == n, 1.0, stats.beta.ppf(1 - alpha / 2, fn + 1, n - fn))
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.maximum(np.log1p(-fnr_ub) - np.log(fpr_ub), np.log1p(-fpr_ub) - np.log(fnr_ub))
        i = int(np.nanargmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(direction * cands[i]), direction)
    return best[1], best[2]


def audit_scores(
    scores_d: Sequence[float],
    scores_d_prime: Sequence[float],
    alpha: float = 0.05,
    threshold: float | None = None,
    direction: int = 1,
) -> AuditResult:
    """eps_lb from scalar outputs of a mechanism run on D (``scores_d``) and D' (the other).

    Without ``threshold`` the first half of the runs on each side chooses the threshold and
    direction (:func:`select_threshold`) and the second half is counted, so the test is
    fixed before the counted runs. With a fixed ``threshold`` (and ``direction``) every
    run is counted.
    """
    s0, s1 = np.asarray(scores_d, float), np.asarray(scores_d_prime, float)
    if s0.size != s1.size or s0.size < 2:
        raise InputError("trials", "need the same number (>= 2) of runs on D and D'")
    if threshold is None:
        half = s0.size // 2
        threshold, direction = select_threshold(s0[:half], s1[:half], alpha)
        s0, s1 = s0[half:], s1[half:]
    if direction not in (1, -1):
        raise InputError("direction", f"must be 1 or -1 (got {direction})")
    fp, fn = _error_counts(direction * s0, direction * s1, np.array([direction * threshold]))
    fp_i, fn_i = int(fp[0]), int(fn[0])
    eps = clopper_pearson_epsilon_lower(fp_i, fn_i, s0.size, alpha)
    return AuditResult(eps, fp_i, fn_i, int(s0.size), float(threshold), int(direction), alpha)


def audit_mechanism(
    release_fn: Callable[[np.ndarray], Any],
    d: np.ndarray,
    d_prime: np.ndarray,
    statistic: Callable[[Any], float],
    trials: int,
    alpha: float = 0.05,
    threshold: float | None = None,
    direction: int = 1,
) -> AuditResult:
    """Run ``release_fn`` ``trials`` times on each of D and D', reduce by ``statistic``, audit.

    See :func:`audit_scores` for how the threshold is chosen and the runs are counted.
    """
    if int(trials) < 2:
        raise InputError("trials", f"need at least 2 runs per database (got {trials})")
    s0 = [float(statistic(release_fn(d))) for _ in range(int(trials))]
    s1 = [float(statistic(release_fn(d_prime))) for _ in range(int(trials))]
    return audit_scores(s0, s1, alpha, threshold, direction)


def laplace_llr(
    value: np.ndarray, loc: np.ndarray, loc_prime: np.ndarray, scale: float | np.ndarray = 1.0
) -> float:
    """log p'(value) / p(value) for independent Laplace releases centred at loc (D), loc' (D').

    sum_j (|v_j - loc_j| - |v_j - loc'_j|) / b_j: the Neyman-Pearson statistic for telling
    the two Laplace mechanisms apart, hence the most powerful scalar to audit them with.
    It is largest, sum_j |loc_j - loc'_j| / b_j, when every v_j lies beyond loc'_j.
    """
    v = np.asarray(value, float)
    return float(np.sum((np.abs(v - loc) - np.abs(v - loc_prime)) / np.asarray(scale, float)))


LLR_SHARE = 0.9
"""Fixed test rule of the release audits: guess D' when the LLR is >= 90% of its maximum."""


def llr_threshold(loc: np.ndarray, loc_prime: np.ndarray, share: float = LLR_SHARE) -> float:
    """``share`` times the largest value of :func:`laplace_llr` (unit scales)."""
    return float(share * np.sum(np.abs(np.asarray(loc, float) - np.asarray(loc_prime, float))))


# ----------------------------------------------------------------------------- audited releases

PH_BOUNDS = (0.0, 1.0)
PH_BINS = 3
PH_SYNTHETIC = 1000
"""PH audit: public bounds, bins and synthetic sample size (large, so counts are recoverable)."""


def ph_pair() -> tuple[np.ndarray, np.ndarray]:
    """Substitution neighbours for PH: 48 records at 0.5 and two at 0.1; D' moves one to 0.9.

    With 3 bins on [0, 1] the counts are (2, 48, 0) and (1, 48, 1): both changed counts are
    small, so a synthetic sample reveals them (the l1 change is the sensitivity 2).
    """
    d = np.r_[np.full(48, 0.5), 0.1, 0.1]
    return d, np.r_[d[:-1], 0.9]


def ph_counts(records: np.ndarray, n: int) -> np.ndarray:
    """Counts estimated from a PH synthetic sample: n times the share of records per bin."""
    edges = np.linspace(*PH_BOUNDS, PH_BINS + 1)
    r = np.asarray(records, float).ravel()
    return n * np.histogram(r, bins=edges)[0] / r.size


def ph_release(
    epsilon: float, rng: np.random.Generator | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """PH as released (:func:`~dpsynth.mechanisms.histogram.perturbed_histogram`, one set, substitution)."""

    def release(d: np.ndarray) -> np.ndarray:
        return perturbed_histogram(
            d, PH_BOUNDS, epsilon, rng, n_bins=PH_BINS, n_synthetic=PH_SYNTHETIC
        )

    return release


def ph_locations(d: np.ndarray, d_prime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The true bin counts of D and D' (the centres of PH's Laplace noise)."""
    edges = np.linspace(*PH_BOUNDS, PH_BINS + 1)
    return np.histogram(d, edges)[0].astype(float), np.histogram(d_prime, edges)[0].astype(float)


def ph_statistic(d: np.ndarray, d_prime: np.ndarray) -> Callable[[np.ndarray], float]:
    """Laplace log-likelihood ratio of the counts recovered from a PH synthetic sample."""
    loc, loc_prime = ph_locations(d, d_prime)
    return lambda out: laplace_llr(ph_counts(out, d.size), loc, loc_prime)


SBS_BOUNDS = (0.0, 1.0)


def sbs_pair(n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Substitution neighbours for Gaussian SBS: n zeros; D' turns one into a 1.

    Both the mean (0 -> 1/n) and the sample variance (0 -> 1/n) move by exactly their
    sensitivities (c1 - c0)/n and (c1 - c0)^2/n on [0, 1] (Liu, Sections 5.1 and 5.3).
    """
    d = np.zeros(n)
    return d, np.r_[d[:-1], 1.0]


def sbs_release(
    epsilon: float, rng: np.random.Generator | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """Gaussian modips.SBS as released by ``synthesize(mechanism="sbs")`` with m = 1.

    :func:`~dpsynth.mechanisms.modips.sbs_gaussian` with the release defaults (individualized
    sanitization with equal shares, BIT bounding); returns the sanitized statistics
    (x-bar*, s^2*), which the release publishes in ``report["sanitized_statistics"]``.
    """

    def release(d: np.ndarray) -> np.ndarray:
        gen = secure_generator() if rng is None else rng
        draw = sbs_gaussian(d, SBS_BOUNDS, epsilon, gen)
        return np.array([draw.sanitized["mean"], draw.sanitized["variance"]])

    return release


def sbs_locations(d: np.ndarray, d_prime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x-bar, s^2) of D and D' (the centres of SBS's Laplace noise)."""
    return (
        np.array([d.mean(), d.var(ddof=1)]),
        np.array([d_prime.mean(), d_prime.var(ddof=1)]),
    )


def sbs_statistic(d: np.ndarray, d_prime: np.ndarray) -> Callable[[np.ndarray], float]:
    """Laplace log-likelihood ratio of (x-bar*, s^2*); both have the same noise scale here
    (sensitivity 1/50 at budget epsilon/2 each)."""
    loc, loc_prime = sbs_locations(d, d_prime)
    return lambda out: laplace_llr(out, loc, loc_prime)


_RELEASES = {
    "ph": (ph_pair, ph_release, ph_statistic, ph_locations),
    "sbs": (sbs_pair, sbs_release, sbs_statistic, sbs_locations),
}


def audit_release(
    name: str, epsilon: float, trials: int, alpha: float, broken: bool = False, seed: int = 0
) -> AuditResult:
    """Audit PH (``name="ph"``) or SBS (``"sbs"``) at claimed ``epsilon``, ``trials`` runs each.

    The test is fixed in advance (:data:`LLR_SHARE`): guess D' when the Laplace LLR is at
    least 90% of its maximum, so every run is counted. The correct release draws OpenDP
    noise (unseeded). ``broken`` runs the same code at twice the claimed budget, i.e.
    Laplace noise at half the scale (as if the sensitivity had been halved), with numpy
    noise seeded by ``seed``: a bug the audit must flag.
    """
    require_choice("name", name, tuple(_RELEASES))
    pair, release, statistic, locations = _RELEASES[name]
    d, d_prime = pair()
    eps_run, rng = (2.0 * epsilon, np.random.default_rng(seed)) if broken else (epsilon, None)
    return audit_mechanism(
        release(eps_run, rng),
        d,
        d_prime,
        statistic(d, d_prime),
        trials,
        alpha,
        threshold=llr_threshold(*locations(d, d_prime)),
    )


# ----------------------------------------------------------------------------- censored, exact


@dataclass(frozen=True)
class GridModel:
    """A one-parameter model whose parameter space is the finite ``grid`` (with its prior).

    Treating the grid as the parameter space makes the posterior a probability mass
    function with an exactly computable normalising constant.
    """

    grid: np.ndarray
    loglik: LogLik
    log_prior: np.ndarray


def normal_grid_model(sigma: float = 0.1, points: int = 1001) -> GridModel:
    """y_i ~ Normal(theta, sigma^2), theta on an even grid of [0, 1] with a uniform prior.

    With sigma = 0.1 a record's log-likelihood ranges from +1.38 (theta at the record) to
    large negative values, so clamping to [-M, M] binds on both sides.
    """
    grid = np.linspace(0.0, 1.0, int(points))
    const = -np.log(sigma * np.sqrt(2.0 * np.pi))

    def loglik(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, float)[None, :] - np.asarray(theta, float)[:, None]) / sigma
        return const - 0.5 * z**2

    return GridModel(grid, loglik, np.full(grid.size, -np.log(grid.size)))


def censored_log_posterior(
    x: np.ndarray,
    alpha: np.ndarray,
    M: float,
    grid: np.ndarray,
    loglik: LogLik,
    log_prior: np.ndarray,
) -> np.ndarray:
    """log xi(theta | x) on the grid for the censored pseudo posterior (Eq. 3.5-3.6).

    xi(theta | x) ∝ prior(theta) exp(sum_i clamp(alpha_i f_theta(x_i), -M, M)), normalised
    exactly by logsumexp over the grid (the grid is the parameter space).
    """
    c = weighted_contributions(loglik(x, grid), alpha, M)
    lp = np.asarray(log_prior, float) + c.sum(axis=1)
    return lp - logsumexp(lp)


def privacy_loss(
    x: np.ndarray,
    x_prime: np.ndarray,
    weights_fn: WeightsFn,
    M: float,
    grid: np.ndarray,
    loglik: LogLik,
    log_prior: np.ndarray,
) -> float:
    """Exact privacy loss of one censored posterior draw between x and x'.

    max_theta |log xi(theta | x) - log xi(theta | x')| over the grid, each database weighted
    by ``weights_fn``. For a mechanism with a finite output space this is the smallest
    epsilon with which the pair satisfies pure DP.
    """
    x, x_prime = np.asarray(x, float), np.asarray(x_prime, float)
    a = censored_log_posterior(x, weights_fn(x), M, grid, loglik, log_prior)
    b = censored_log_posterior(x_prime, weights_fn(x_prime), M, grid, loglik, log_prior)
    return float(np.max(np.abs(a - b)))


def unit_weights(x: np.ndarray) -> np.ndarray:
    """alpha_i = 1 for every record: Censor_uw."""
    return np.ones(np.asarray(x).size)


def draw_support(x: np.ndarray, model: GridModel, cutoff: float = 1e-3) -> np.ndarray:
    """Grid points standing in for the posterior draws of the unweighted (uncensored) fit.

    The points whose unweighted posterior mass is at least ``cutoff`` times the largest:
    deterministic, and about the range a few thousand MCMC draws would cover (|z| < 3.7
    for a normal posterior at cutoff 1e-3).
    """
    lp = model.log_prior + model.loglik(np.asarray(x, float), model.grid).sum(axis=1)
    return model.grid[lp - lp.max() >= np.log(cutoff)]


def data_lw_weights(
    model: GridModel, c: float = 1.0, g: float = 0.0, cutoff: float = 1e-3
) -> WeightsFn:
    """Censor_w as in the paper's simulations: LW weights from the data's own unweighted fit.

    Record bounds Delta_i = max over the draws (:func:`draw_support`) of |f_theta(x_i)|,
    then :func:`dpsynth.mechanisms.weights.lw_weights`. Every alpha_i depends on the whole database
    (through the draws and the min / max normalisation), so clamping alone no longer
    bounds the loss.
    """

    def weights(x: np.ndarray) -> np.ndarray:
        draws = draw_support(x, model, cutoff)
        return lw_weights(record_bounds(model.loglik(x, draws)), c, g)

    return weights


def reference_weights(
    reference: np.ndarray, model: GridModel, c: float = 1.0, g: float = 0.0, cutoff: float = 1e-3
) -> WeightsFn:
    """Censor_w with weights set on a public (historical) database (censoring paper, Sec. 4.5).

    The draws and the normalisation come from ``reference`` only
    (:func:`dpsynth.mechanisms.weights.reference_lw_weights`): each alpha_i is a function of record i
    and public data, which is what the censoring proof needs.
    """
    ref = np.asarray(reference, float)
    draws = draw_support(ref, model, cutoff)
    ref_bounds = record_bounds(model.loglik(ref, draws))

    def weights(x: np.ndarray) -> np.ndarray:
        return reference_lw_weights(record_bounds(model.loglik(x, draws)), ref_bounds, c, g)

    return weights


def neighbour(x: np.ndarray, record: float, neighbours: str, replace: int = 0) -> np.ndarray:
    """x with ``record`` added (add/remove) or put in place of record ``replace`` (substitution)."""
    require_choice("neighbours", neighbours, ("add-remove", "substitution"))
    x = np.asarray(x, float)
    if neighbours == "add-remove":
        return np.r_[x, record]
    out = x.copy()
    out[replace] = record
    return out


CENSOR_EPSILON = 2.0
"""Claimed epsilon of one censored draw in the exact study (M = 1 add/remove, 0.5 substitution)."""
CENSOR_OUTLIER = 1.0
"""The neighbour's changed record: an outlier at the edge of the parameter space [0, 1]."""


def censor_data() -> np.ndarray:
    """n = 20 confidential records: 15 at 0.3 and 5 at 0.7.

    Under the data's own LW weights the 5 records at 0.7 have the largest bounds, hence
    weight 0; an outlier takes over the largest bound and lifts their weights (to 0.81 for
    an outlier at 1.0, towards 1 for outliers further out),
    so one changed record moves 5 others' contributions at once.
    """
    return np.r_[np.full(15, 0.3), np.full(5, 0.7)]


def censor_reference() -> np.ndarray:
    """A public reference database: the 20 quantiles of Normal(0.45, 0.15^2), clipped to [0, 1]."""
    q = (np.arange(20) + 0.5) / 20
    return np.clip(stats.norm.ppf(q, loc=0.45, scale=0.15), 0.0, 1.0)


def censor_mechanisms(model: GridModel) -> dict[str, WeightsFn]:
    """The three weighting rules compared: Censor_uw, Censor_w (reference), Censor_w (data)."""
    return {
        "Censor_uw": unit_weights,
        "Censor_w, reference weights": reference_weights(censor_reference(), model),
        "Censor_w, data-dependent weights": data_lw_weights(model),
    }


def censored_losses(
    outlier: float = CENSOR_OUTLIER, epsilon: float = CENSOR_EPSILON
) -> list[dict[str, Any]]:
    """Exact losses of the three censored mechanisms, both neighbour definitions.

    Rows: mechanism, neighbours, epsilon (claimed), M = :func:`~dpsynth.privacy.accounting.censor_bound`,
    loss. Substitution replaces the first record (at 0.3) by the outlier.
    """
    model = normal_grid_model()
    x = censor_data()
    rows = []
    for neighbours in ("add-remove", "substitution"):
        M = censor_bound(epsilon, neighbours)
        xp = neighbour(x, outlier, neighbours)
        for name, fn in censor_mechanisms(model).items():
            loss = privacy_loss(x, xp, fn, M, model.grid, model.loglik, model.log_prior)
            rows.append(
                {
                    "mechanism": name,
                    "neighbours": neighbours,
                    "epsilon": epsilon,
                    "M": M,
                    "loss": loss,
                }
            )
    return rows


def loss_curves(
    outliers: np.ndarray, neighbours: str, epsilon: float = CENSOR_EPSILON
) -> dict[str, np.ndarray]:
    """Exact loss of each censored mechanism as a function of the neighbour's changed record."""
    model = normal_grid_model()
    x = censor_data()
    M = censor_bound(epsilon, neighbours)
    return {
        name: np.array(
            [
                privacy_loss(
                    x, neighbour(x, v, neighbours), fn, M, model.grid, model.loglik, model.log_prior
                )
                for v in np.asarray(outliers, float)
            ]
        )
        for name, fn in censor_mechanisms(model).items()
    }


# ----------------------------------------------------------------------------- summary

AUDIT_EPSILON = 1.0
AUDIT_TRIALS = 2000
AUDIT_ALPHA = 1e-4


def audit_summary(
    trials: int = AUDIT_TRIALS, alpha: float = AUDIT_ALPHA, epsilon: float = AUDIT_EPSILON
) -> dict[str, Any]:
    """All audit figures: eps_lb of PH and SBS (correct and broken) and the censored losses.

    ``audits`` maps "PH", "PH (noise halved)", "SBS", "SBS (noise halved)" to an
    :class:`AuditResult` at claimed ``epsilon`` (``trials`` runs per database, all counted);
    ``censored`` holds the rows of :func:`censored_losses`.
    """
    audits = {}
    for name in ("ph", "sbs"):
        label = name.upper()
        audits[label] = audit_release(name, epsilon, trials, alpha)
        audits[f"{label} (noise halved)"] = audit_release(name, epsilon, trials, alpha, broken=True)
    return {
        "epsilon": epsilon,
        "trials": trials,
        "alpha": alpha,
        "audits": audits,
        "censored": censored_losses(),
    }
