"""Lipschitz bounds, epsilon = 2 Delta, guarantee kinds and censoring counts.

Knows nothing of Stan: everything is computed from the ``S x n`` matrix of
weighted log-likelihood contributions alpha_i f_theta_s(x_i).
"""

from __future__ import annotations

import numpy as np

GUARANTEES = {"DP": "strict epsilon-DP", "aDP": "asymptotic DP (local bound)"}


def weighted_contributions(
    log_lik: np.ndarray, alpha: np.ndarray, censor_bound: float | None = None
) -> np.ndarray:
    """alpha_i f_theta_s(x_i), clamped to [-M, M] when ``censor_bound`` M is given (Eq. 3.5).

    ``log_lik`` is the unweighted ``S x n`` matrix; records with alpha_i = 0
    contribute exactly 0 even where their log-likelihood is not finite.
    """
    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(alpha[None, :] > 0, alpha[None, :] * log_lik, 0.0)
    if censor_bound is not None:
        out = np.clip(out, -censor_bound, censor_bound)
    return out


def record_bounds(contributions: np.ndarray) -> np.ndarray:
    """Record-level bounds Delta_i = max_s |alpha_i f_theta_s(x_i)|, shape (n,)."""
    return np.max(np.abs(contributions), axis=0)


def lipschitz_bound(contributions: np.ndarray) -> float:
    """Database bound Delta = max_i Delta_i (Algorithm 1 step 7)."""
    return float(np.max(np.abs(contributions)))


def epsilon_of(lipschitz: float) -> float:
    """epsilon = 2 Delta (the exponential / pseudo posterior mechanism)."""
    return 2.0 * float(lipschitz)


def censored_records(raw_contributions: np.ndarray, censor_bound: float) -> np.ndarray:
    """Mask (n,): records whose weighted contribution is clamped in any retained draw."""
    return np.any(np.abs(raw_contributions) > censor_bound, axis=0)
