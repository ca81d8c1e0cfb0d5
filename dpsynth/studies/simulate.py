"""Data-generating processes of the papers' simulation studies, and their analytic summaries.

Every simulator takes the sample size ``n`` and an explicit ``numpy.random.Generator`` so that
a Monte Carlo replicate is reproducible from its seed alone (see ``dpsynth.studies.runner``). The
``*_reference`` functions return the analytic mean, median, 15th and 90th quantiles of the
generating distribution, with the same keys as ``dpsynth.curator.utility.summary_statistics``; the
notebooks draw them as the papers' dashed reference lines.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from dpsynth.errors import InputError, require_finite_positive

__all__ = [
    "beta_data",
    "beta_quantile",
    "beta_reference",
    "nb_mixture_cdf",
    "nb_mixture_data",
    "nb_mixture_mean",
    "nb_mixture_quantile",
    "nb_mixture_reference",
    "nb_mixture_variance",
    "poisson_data",
    "poisson_quantile",
    "poisson_reference",
]

REFERENCE_PROBS: dict[str, float] = {"median": 0.5, "q15": 0.15, "q90": 0.90}
"""Quantile levels reported by the papers' analysis-specific utility (mean is added separately)."""


def _require_n(n: int) -> int:
    """Validate a sample size: a non-negative integer."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InputError("n", f"must be a non-negative integer (got {n!r})")
    return int(n)


def _require_rng(rng: np.random.Generator) -> np.random.Generator:
    """Require an explicit Generator (no global-state RNG)."""
    if not isinstance(rng, np.random.Generator):
        raise InputError("rng", f"must be a numpy.random.Generator (got {type(rng).__name__})")
    return rng


# --- Beta(0.5, 3): censoring paper, section 4.1 ---------------------------------------------


def beta_data(n: int, rng: np.random.Generator, a: float = 0.5, b: float = 3.0) -> np.ndarray:
    """Draw a confidential database of ``n`` values from Beta(a, b).

    Hu, Williams & Savitsky (censoring paper) section 4.1: Beta(0.5, 3), a right-skewed
    distribution on (0, 1) with many high-risk records in the long tail. Returns shape (n,),
    float64, values in the open interval (0, 1) up to floating point.
    """
    _require_n(n)
    a = require_finite_positive("a", a)
    b = require_finite_positive("b", b)
    return _require_rng(rng).beta(a, b, size=n)


def beta_quantile(q: float | np.ndarray, a: float = 0.5, b: float = 3.0) -> np.ndarray:
    """Analytic quantile of Beta(a, b) at probabilities ``q`` (scalar or array, same shape out)."""
    return np.asarray(stats.beta.ppf(q, a, b), dtype=float)


def beta_reference(a: float = 0.5, b: float = 3.0) -> dict[str, float]:
    """Analytic mean, median, 15th and 90th quantiles of Beta(a, b) (censoring paper Figs 5, supp. 2-3)."""
    out = {"mean": a / (a + b)}
    out.update({k: float(beta_quantile(p, a, b)) for k, p in REFERENCE_PROBS.items()})
    return out


# --- Poisson(100): vector-weighted paper, section 3.1 ----------------------------------------


def poisson_data(n: int, rng: np.random.Generator, mu: float = 100) -> np.ndarray:
    """Draw ``n`` counts from Poisson(mu).

    Savitsky, Hu & Williams (vector-weighted paper) section 3: Poisson(mu = 100), the "less
    skewed" count data, n = 1000 there. Returns shape (n,), int64.
    """
    _require_n(n)
    mu = require_finite_positive("mu", mu)
    return _require_rng(rng).poisson(mu, size=n).astype(np.int64)


def poisson_quantile(q: float | np.ndarray, mu: float = 100) -> np.ndarray:
    """Analytic quantile of Poisson(mu): the smallest integer k with P(X <= k) >= q."""
    return np.asarray(stats.poisson.ppf(q, mu), dtype=float)


def poisson_reference(mu: float = 100) -> dict[str, float]:
    """Analytic mean, median, 15th and 90th quantiles of Poisson(mu)."""
    out = {"mean": float(mu)}
    out.update({k: float(poisson_quantile(p, mu)) for k, p in REFERENCE_PROBS.items()})
    return out


# --- NB mixture: vector-weighted paper, section 3.2 ------------------------------------------


Floats = Sequence[float]


def _nb_mixture_args(
    mu: float, phi: Sequence[float], weights: Sequence[float]
) -> tuple[float, np.ndarray, np.ndarray]:
    """Validate mixture parameters; returns (mu, phi (K,), weights (K,))."""
    mu = require_finite_positive("mu", mu)
    phi_arr = np.array([require_finite_positive("phi", p) for p in phi], dtype=float)
    w = np.asarray(weights, dtype=float)
    if phi_arr.ndim != 1 or phi_arr.size == 0 or w.shape != phi_arr.shape:
        raise InputError("weights", f"need one weight per phi (got {w.shape} vs {phi_arr.shape})")
    if np.any(~np.isfinite(w)) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise InputError("weights", f"must be non-negative and sum to 1 (got {list(weights)})")
    return mu, phi_arr, w / w.sum()


def nb_mixture_data(
    n: int,
    rng: np.random.Generator,
    mu: float = 100,
    phi: Floats = (5, 20),
    weights: Floats = (0.2, 0.8),
) -> np.ndarray:
    """Draw ``n`` counts from the mixture sum_k weights[k] * NB(mu, phi[k]).

    Vector-weighted paper section 3.2: 0.2 NB(mu=100, phi=5) + 0.8 NB(mu=100, phi=20), the
    "highly skewed" count data. NB is in mean / over-dispersion form, Var = mu + mu^2 / phi,
    i.e. numpy ``negative_binomial(n=phi, p=phi / (phi + mu))`` (R ``rnbinom(size=phi, mu=mu)``).
    (The paper's appendix 6 writes phi_2 = 5 for the second component; section 3.2 says 20,
    which is the default here.) Returns shape (n,), int64.
    """
    _require_n(n)
    mu, phi_arr, w = _nb_mixture_args(mu, phi, weights)
    rng = _require_rng(rng)
    component = rng.choice(phi_arr.size, size=n, p=w)
    phi_i = phi_arr[component]
    return rng.negative_binomial(phi_i, phi_i / (phi_i + mu)).astype(np.int64)


def nb_mixture_mean(mu: float = 100, phi: Floats = (5, 20), weights: Floats = (0.2, 0.8)) -> float:
    """Mean of the NB mixture: every component has mean ``mu``, so the mixture mean is ``mu``."""
    mu, _, _ = _nb_mixture_args(mu, phi, weights)
    return mu


def nb_mixture_variance(
    mu: float = 100, phi: Floats = (5, 20), weights: Floats = (0.2, 0.8)
) -> float:
    """Variance of the NB mixture: sum_k w_k (mu + mu^2/phi_k) (component means are all equal)."""
    mu, phi_arr, w = _nb_mixture_args(mu, phi, weights)
    return float(np.sum(w * (mu + mu**2 / phi_arr)))


def nb_mixture_cdf(
    k: float | np.ndarray, mu: float = 100, phi: Floats = (5, 20), weights: Floats = (0.2, 0.8)
) -> np.ndarray:
    """CDF P(X <= k) of the NB mixture at ``k`` (scalar or array, same shape out)."""
    mu, phi_arr, w = _nb_mixture_args(mu, phi, weights)
    k_arr = np.asarray(k, dtype=float)
    cdfs = [wj * stats.nbinom.cdf(k_arr, pj, pj / (pj + mu)) for wj, pj in zip(w, phi_arr)]
    return np.asarray(np.sum(cdfs, axis=0), dtype=float)


def nb_mixture_quantile(
    q: float | np.ndarray, mu: float = 100, phi: Floats = (5, 20), weights: Floats = (0.2, 0.8)
) -> np.ndarray:
    """Quantile of the NB mixture: the smallest integer k with P(X <= k) >= q, for q in (0, 1).

    The mixture quantile lies between the smallest and largest component quantiles, so the CDF
    is evaluated on that integer range only.
    """
    mu, phi_arr, w = _nb_mixture_args(mu, phi, weights)
    q_arr = np.asarray(q, dtype=float)
    if np.any(~((q_arr > 0) & (q_arr < 1))):
        raise InputError("q", "probabilities must lie in the open interval (0, 1)")
    comp = np.array([stats.nbinom.ppf(q_arr, pj, pj / (pj + mu)) for pj in phi_arr])
    lo, hi = int(np.min(comp)), int(np.max(comp))
    grid = np.arange(lo, hi + 1)
    cdf = nb_mixture_cdf(grid, mu, phi_arr, w)
    idx = np.searchsorted(cdf, q_arr, side="left")
    return grid[np.minimum(idx, grid.size - 1)].astype(float)


def nb_mixture_reference(
    mu: float = 100, phi: Floats = (5, 20), weights: Floats = (0.2, 0.8)
) -> dict[str, float]:
    """Analytic mean, median, 15th and 90th quantiles of the NB mixture."""
    out = {"mean": nb_mixture_mean(mu, phi, weights)}
    out.update(
        {k: float(nb_mixture_quantile(p, mu, phi, weights)) for k, p in REFERENCE_PROBS.items()}
    )
    return out
