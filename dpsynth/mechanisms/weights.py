"""Record weights alpha in [0, 1]^n: LW, CW, SW, re-weighting, Weighted-e, downscaling.

Pure functions of arrays (no Stan). Papers: Savitsky, Hu & Williams (vector-weighted,
Algorithms 1-3) and Hu, Williams & Savitsky (censoring, Sections 2.2 and 4.4).
:func:`lw_record_bounds` computes the LW record bounds from the S x n log-likelihoods, by
default over all draws, optionally over the draws the vector-weighted paper's R script keeps.
"""

from __future__ import annotations

import numpy as np

from dpsynth.errors import InputError, require_downscale


def _check_tuning(c: float, g: float) -> None:
    for name, v in (("c", c), ("g", g)):
        if not np.isfinite(v):
            raise InputError(name, f"must be finite (got {v})")


def lw_weights(record_bounds: np.ndarray, c: float = 1.0, g: float = 0.0) -> np.ndarray:
    """Lipschitz weights, Algorithm 1 steps 3-4 of the vector-weighted paper.

    ``record_bounds`` (n,) holds f_i = max_s |f_theta_s(x_i)| from the unweighted
    fit. f~_i = (f_i - min f) / (max f - min f) and alpha_i = c (1 - f~_i) + g,
    clipped to [0, 1] as in the paper's appendix R script. Records with a
    non-finite bound get alpha_i = 0 (censoring paper, Section 2.1). If all
    bounds are equal, f~ = 0 (no record is riskier than another).
    """
    _check_tuning(c, g)
    f = np.asarray(record_bounds, dtype=float)
    finite = np.isfinite(f)
    alpha = np.zeros_like(f)
    if finite.any():
        lo, hi = f[finite].min(), f[finite].max()
        risk = (f[finite] - lo) / (hi - lo) if hi > lo else np.zeros(finite.sum())
        alpha[finite] = c * (1.0 - risk) + g
    return np.clip(alpha, 0.0, 1.0)


def lw_record_bounds(log_lik: np.ndarray, draw_quantile: float | None = None) -> np.ndarray:
    """Record bounds f_i of Algorithm 1 steps 1-3, from the S x n unweighted log-likelihoods.

    ``draw_quantile`` None: ``f_i = max_s |f_theta_s(x_i)|`` over all S draws (dpsynth's default,
    the algorithm as printed). A value q in (0, 1] follows the vector-weighted paper's
    appendix R script: the LOO log ratio of draw s and record i is
    ``|sum_j ll[s, j] - sum_{j != i} ll[s, j]| = |ll[s, i]|``, L is the q-quantile over draws
    of each draw's largest ratio (``L <- quantile(log_ratio_theta, thresh)``), and f_i is the
    largest ratio of record i over the draws whose largest ratio is at most L. The script
    uses an undefined ``logthresh_ratio`` there (a line was lost); dpsynth reads it as
    ``log_ratio[log_ratio_theta <= L, ]``. Non-finite log-likelihoods give f_i = inf.
    """
    ll = np.atleast_2d(np.asarray(log_lik, dtype=float))
    ratio = np.abs(ll)
    if draw_quantile is None:
        return ratio.max(axis=0)
    q = float(draw_quantile)
    if not (np.isfinite(q) and 0 < q <= 1):
        raise InputError("draw_quantile", f"must lie in (0, 1] (got {draw_quantile})")
    per_draw = np.where(np.isfinite(ratio), ratio, -np.inf).max(axis=1)
    keep = per_draw <= np.quantile(per_draw, q)
    out = ratio[keep].max(axis=0)
    out[~np.isfinite(ratio).all(axis=0)] = np.inf
    return out


def reference_lw_weights(
    record_bounds: np.ndarray, reference_bounds: np.ndarray, c: float = 1.0, g: float = 0.0
) -> np.ndarray:
    """LW weights whose normalisation comes from a public reference database (Section 4.5).

    ``record_bounds`` (n,) holds each confidential record's f_i = max_s |f_theta_s(x_i)|
    at the draws of the *reference* posterior; ``reference_bounds`` the reference
    records' own bounds. f~_i = (f_i - min ref) / (max ref - min ref), clipped to [0, 1],
    and alpha_i = c (1 - f~_i) + g, clipped to [0, 1]. Each alpha_i depends only on
    record i and public data, which is what the censoring proof needs (dpsynth's
    construction; the paper's Section 4.5 says to set the weights on a historical database).
    """
    _check_tuning(c, g)
    f = np.asarray(record_bounds, dtype=float)
    ref = np.asarray(reference_bounds, dtype=float)
    ref = ref[np.isfinite(ref)]
    if ref.size == 0:
        raise InputError("reference", "no reference record has a finite bound")
    lo, hi = ref.min(), ref.max()
    risk = np.clip((f - lo) / (hi - lo), 0.0, 1.0) if hi > lo else np.zeros_like(f)
    alpha = np.where(np.isfinite(f), c * (1.0 - risk) + g, 0.0)
    return np.clip(alpha, 0.0, 1.0)


def cw_risks(y: np.ndarray, radius: float) -> np.ndarray:
    """Identification risks IR_i, Algorithm 2 steps 1-3 of the vector-weighted paper.

    IR_i = #{j : |y_j - y_i| > r} / n: the share of records outside the ball of
    radius r around record i (M_i is the whole database, |M_i| = n). For a 2-D
    ``y`` (n, p) the ball is Euclidean.
    """
    if not (np.isfinite(radius) and radius >= 0):
        raise InputError("radius", f"must be finite and >= 0 (got {radius})")
    y = np.asarray(y, dtype=float)
    n = y.shape[0]
    if y.ndim == 1:
        s = np.sort(y)
        inside = np.searchsorted(s, y + radius, side="right") - np.searchsorted(
            s, y - radius, side="left"
        )
    else:
        d = np.sqrt(((y[:, None, :] - y[None, :, :]) ** 2).sum(-1))
        inside = (d <= radius).sum(1)
    return (n - inside) / n


def cw_weights(y: np.ndarray, radius: float, c: float = 1.0, g: float = 0.0) -> np.ndarray:
    """Count weights alpha_i = c (1 - IR_i) + g clipped to [0, 1] (Algorithm 2 step 4)."""
    _check_tuning(c, g)
    return np.clip(c * (1.0 - cw_risks(y, radius)) + g, 0.0, 1.0)


def sw_weight(unweighted_lipschitz: float, target_lipschitz: float) -> float:
    """Scalar weight alpha = Delta_target / Delta_x (the exponential mechanism, Section 3).

    Capped at 1: a target above the unweighted bound needs no downweighting.
    """
    if not (np.isfinite(target_lipschitz) and target_lipschitz > 0):
        raise InputError("target_lipschitz", f"must be > 0 and finite (got {target_lipschitz})")
    return float(min(1.0, target_lipschitz / unweighted_lipschitz))


def reweighted(
    alpha: np.ndarray, record_bounds: np.ndarray, k: float, delta: float | None = None
) -> np.ndarray:
    """Re-weighting, Eq. (6): alpha^w_i = k alpha_i Delta / Delta_i, clipped to [0, 1].

    ``record_bounds`` are the Delta_{alpha, x_i} of the alpha-weighted fit and
    Delta (``delta``) their max by default. A given ``delta`` is the Weighted bound of
    another database (re-weighting on a public reference, Section 4.5 of the censoring
    paper: Delta and the draws behind Delta_i then come from the reference only).
    Records with Delta_i = 0 (alpha_i = 0) keep weight 0.
    """
    if not (0 < k <= 1):
        raise InputError("k", f"must lie in (0, 1] (got {k})")
    alpha = np.asarray(alpha, dtype=float)
    b = np.asarray(record_bounds, dtype=float)
    delta = b.max() if delta is None else float(delta)
    out = np.zeros_like(alpha)
    pos = b > 0
    out[pos] = k * alpha[pos] * delta / b[pos]
    return np.clip(out, 0.0, 1.0)


WEIGHTED_E_RULES = ("weighted-fit", "lw-bound")
"""Which record bound Weighted-e compares with eps/2 (the censoring paper's Section 2.2 lost
its formula): ``weighted-fit`` max_s |alpha_i f_theta_s(x_i)| over the Weighted fit's draws
(dpsynth's first reading, the library default); ``lw-bound`` alpha_i f_i with f_i the record
bound that builds the LW weights, max_s |f_theta_s(x_i)| over the Unweighted fit's draws (the
reading that reproduces the paper's Table 1, :func:`lw_truncation_bounds`)."""


def lw_truncation_bounds(alpha: np.ndarray, unweighted_bounds: np.ndarray) -> np.ndarray:
    """Weighted-e's record bounds under the ``lw-bound`` reading: alpha_i f_i.

    ``unweighted_bounds`` (n,) are the f_i = max_s |f_theta_s(x_i)| of the Unweighted fit,
    the same numbers Algorithm 1 (vector-weighted paper) turns into the LW weights
    ``alpha``; no Weighted fit is involved. Records of weight 0 (including those with a
    non-finite f_i, which :func:`lw_weights` sets to 0) get bound 0.
    """
    alpha = np.asarray(alpha, dtype=float)
    f = np.asarray(unweighted_bounds, dtype=float)
    out = np.zeros_like(alpha)
    pos = alpha > 0
    out[pos] = alpha[pos] * f[pos]
    return out


def weighted_e_weights(alpha: np.ndarray, record_bounds: np.ndarray, epsilon: float) -> np.ndarray:
    """Weighted-e truncation (censoring paper, Section 2.2): alpha_i = 0 where Delta_i > eps/2.

    ``record_bounds`` are the weighted record bounds: max_s |alpha_i f_theta_s(x_i)| of the
    Weighted fit (``weighted-fit``) or alpha_i f_i (``lw-bound``, :func:`lw_truncation_bounds`).
    """
    alpha = np.asarray(alpha, dtype=float).copy()
    alpha[np.asarray(record_bounds) > epsilon / 2.0] = 0.0
    return alpha


def downscaled(alpha: np.ndarray, factor: float) -> np.ndarray:
    """Downscale weights before censoring (censoring paper, Section 4.4): factor * alpha.

    ``factor`` in (0, 1]; a smaller factor lowers the weighted Lipschitz bound
    towards the target so that censoring is invoked for fewer records.
    """
    return np.asarray(alpha, dtype=float) * require_downscale(factor)
