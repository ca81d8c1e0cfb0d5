"""Simulation studies of Liu (modips), Sections 5.1-5.3, vectorized over repetitions.

Each setting simulates ``reps`` original datasets, then for every m the whole modips.SBS
pipeline per repetition and synthetic set as (reps, m) arrays: sanitized sufficient statistics,
posterior draws, and the *sufficient statistics of each synthetic dataset* (exact for binary data
and unbounded Gaussians; for bounded Gaussian synthetic data the mean and variance are drawn from
the moment-matched normal / scaled χ² laws, see :func:`synthetic_gaussian_stats`). The same
original datasets are reused across m (common random numbers). Results are tidy DataFrames with
one row per (setting, m, rule); ``rule`` also takes ``"original"`` (inference on the original data)
and ``"single"`` (one synthetic set with the full budget, analysed as if original).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import product
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import log_ndtr, ndtr

from dpsynth.errors import InputError, require_bounds, require_finite_positive
from dpsynth.mechanisms.inference import RULES, combine_arrays, combine_moments
from dpsynth.mechanisms.modips import (
    allocation_weights,
    posterior_binary,
    posterior_gaussian,
    posterior_gaussian_known_variance,
)
from dpsynth.privacy.accounting import (
    sanitize_bounded,
    sensitivity_mean,
    sensitivity_proportion,
    sensitivity_variance,
    variance_upper_bound,
)

#: m grid (log-spaced over [2, 500], the range of Liu Section 5.1, Figure 6).
M_GRID: tuple[int, ...] = (
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    80,
    100,
    150,
    200,
    300,
    400,
    500,
)
MULTI_RULES: tuple[str, ...] = tuple(r for r in RULES if r != "single")
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


# ------------------------------------------------------------------------- bounded normal moments


def bounded_normal_moments(
    mu: np.ndarray, sigma: np.ndarray, lower: float, upper: float, bounding: str
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of N(μ, σ²) clipped (``"bit"``) or truncated (``"truncation"``) to [c0,c1].

    Elementwise over broadcast arrays; σ = 0 gives (clip(μ), 0). Truncation uses log-space tails.
    """
    mu, sigma = np.broadcast_arrays(np.asarray(mu, float), np.asarray(sigma, float))
    zero = sigma <= 0
    s = np.where(zero, 1.0, sigma)
    a, b = (lower - mu) / s, (upper - mu) / s
    mean, var = mu.copy(), s * s
    # bounds further than 9 SD away change nothing in double precision: only compute where they bind
    hit = ((a > -9.0) | (b < 9.0)) & ~zero
    if hit.any():
        mz, vz = _standard_bounded_moments(a[hit], b[hit], bounding)
        mean[hit] = mu[hit] + s[hit] * mz
        var[hit] = s[hit] ** 2 * vz
    mean = np.clip(mean, lower, upper)
    var = np.clip(var, 0.0, (upper - lower) ** 2 / 4)
    return np.where(zero, np.clip(mu, lower, upper), mean), np.where(zero, 0.0, var)


def _standard_bounded_moments(
    a: np.ndarray, b: np.ndarray, bounding: str
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of a standard normal clipped / truncated to [a, b] (1-D arrays)."""
    if bounding == "bit":
        pa, pb_up = ndtr(a), ndtr(-b)
        fa, fb = (
            np.exp(-0.5 * a * a - _LOG_SQRT_2PI),
            np.exp(-0.5 * b * b - _LOG_SQRT_2PI),
        )
        e1 = a * pa + b * pb_up + fa - fb
        e2 = a * a * pa + b * b * pb_up + (1 - pa - pb_up) + a * fa - b * fb
        return e1, e2 - e1 * e1
    flip = a > 0  # put the interval in the lower tail or across 0 for accuracy
    aa, bb = np.where(flip, -b, a), np.where(flip, -a, b)
    lb, la = log_ndtr(bb), log_ndtr(aa)
    log_z = lb + np.log1p(-np.exp(np.minimum(la - lb, 0.0)))
    ra = np.exp(-0.5 * aa * aa - _LOG_SQRT_2PI - log_z)
    rb = np.exp(-0.5 * bb * bb - _LOG_SQRT_2PI - log_z)
    mz = ra - rb
    vz = 1 + aa * ra - bb * rb - mz * mz
    return np.where(flip, -mz, mz), vz


def synthetic_gaussian_stats(
    mu: np.ndarray,
    sigma: np.ndarray,
    n: int,
    lower: float,
    upper: float,
    bounding: str,
    rng: np.random.Generator,
    exact: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and variance (divisor n-1) of n bounded N(μ, σ²) synthetic records, per element.

    ``exact=False``: mean ~ N(E X, Var X / n), s² ~ Var X · χ²_{n-1}/(n-1) with the bounded-normal
    moments (exact when no bound binds; CLT / moment matching otherwise). ``exact=True`` draws the
    n records (memory ∝ size · n; for validation).
    """
    if exact:
        shape = np.shape(mu)
        z = rng.standard_normal(shape + (n,))
        if bounding == "bit":
            x = np.clip(mu[..., None] + sigma[..., None] * z, lower, upper)
        else:
            s = np.where(sigma > 0, sigma, 1e-300)[..., None]
            a, b = (lower - mu[..., None]) / s, (upper - mu[..., None]) / s
            x = stats.truncnorm.rvs(a, b, loc=mu[..., None], scale=s, random_state=rng)
            x = np.clip(x, lower, upper)
        return x.mean(axis=-1), x.var(axis=-1, ddof=1)
    mean_x, var_x = bounded_normal_moments(mu, sigma, lower, upper, bounding)
    xbar = mean_x + np.sqrt(var_x / n) * rng.standard_normal(np.shape(mean_x))
    s2 = var_x * rng.chisquare(n - 1, size=np.shape(mean_x)) / (n - 1)
    return np.clip(xbar, lower, upper), s2


# ----------------------------------------------------------------------------- one setting


def _original(
    data_type: str,
    n: int,
    reps: int,
    rng: np.random.Generator,
    p: float,
    lo: float,
    hi: float,
    mu: float,
    sigma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Original sufficient statistics per repetition: (proportion or mean, sample variance)."""
    if data_type == "binary":
        phat = rng.binomial(n, p, size=reps) / n
        return phat, phat * (1 - phat) * n / max(n - 1, 1)
    x = np.clip(rng.normal(mu, sigma, size=(reps, n)), lo, hi)
    return x.mean(axis=1), x.var(axis=1, ddof=1)


def _one_pass(
    stat: tuple[np.ndarray, np.ndarray],
    m: int,
    eps_set: float,
    cfg: dict[str, Any],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-set estimates and variance estimates, shape (reps, m), for one m at eps_set per set."""
    n, lo, hi, bnd, strict = (
        cfg["n"],
        cfg["lower"],
        cfg["upper"],
        cfg["bounding"],
        cfg["strict"],
    )
    reps = stat[0].shape[0]
    s0 = np.broadcast_to(stat[0][:, None], (reps, m))
    if cfg["data_type"] == "binary":
        p_star = sanitize_bounded(
            s0, sensitivity_proportion(n), eps_set, 0.0, 1.0, bnd, rng, strict
        )
        theta = posterior_binary(p_star, n, rng)
        q = rng.binomial(n, theta) / n
        return q, q * (1 - q) / n
    if cfg["known_sd"] is not None:
        m_star = sanitize_bounded(
            s0, sensitivity_mean(lo, hi, n), eps_set, lo, hi, bnd, rng, strict
        )
        mu_d = posterior_gaussian_known_variance(m_star, cfg["known_sd"], n, rng)
        sd_d = np.asarray(cfg["known_sd"], dtype=float)
    else:
        s1 = np.broadcast_to(stat[1][:, None], (reps, m))
        d_m, d_v = sensitivity_mean(lo, hi, n), sensitivity_variance(lo, hi, n)
        if cfg["sanitization"] == "communal":
            (sm, em), (sv, ev) = (d_m + d_v, eps_set), (d_m + d_v, eps_set)
        else:
            w = allocation_weights(cfg["allocation"], 2)
            (sm, em), (sv, ev) = (d_m, w[0] * eps_set), (d_v, w[1] * eps_set)
        m_star = sanitize_bounded(s0, sm, em, lo, hi, bnd, rng, strict)
        v_star = sanitize_bounded(
            s1, sv, ev, 0.0, variance_upper_bound(lo, hi, n), bnd, rng, strict
        )
        mu_d, s2_d = posterior_gaussian(m_star, v_star, n, rng)
        sd_d = np.sqrt(s2_d)
    xbar, s2 = synthetic_gaussian_stats(mu_d, sd_d, n, lo, hi, bnd, rng, cfg["exact"])
    return xbar, s2 / n


def _metrics(res: dict[str, np.ndarray], truth: float) -> dict[str, float]:
    """Summaries over repetitions.

    A repetition where the rule gives no valid variance (Raghunathan's T <= 0, ``fallback``)
    counts as *not covering* in ``coverage`` (no interval), which reproduces Liu's Table 1;
    ``coverage_fallback`` instead uses the fallback interval (T = w̄) there.
    """
    cover = (res["lower"] <= truth) & (truth <= res["upper"])
    fb = np.broadcast_to(res.get("fallback", False), cover.shape)
    ok = ~fb
    return {
        "bias": float(res["estimate"].mean() - truth),
        "sd_estimate": float(np.sqrt(res["variance"][ok]).mean()) if ok.any() else np.nan,
        "empirical_sd": float(res["estimate"].std(ddof=1)),
        "coverage": float((cover & ok).mean()),
        "coverage_fallback": float(cover.mean()),
        "frac_fallback": float(fb.mean()),
        "ci_half_width": float(((res["upper"] - res["lower"]) / 2)[ok].mean())
        if ok.any()
        else np.nan,
        "median_df": float(np.median(res["df"])),
    }


def simulate_sbs(
    data_type: str,
    n: int,
    epsilon: float,
    m_values: Iterable[int] = M_GRID,
    reps: int = 5000,
    rng: np.random.Generator | int | None = None,
    *,
    bounding: str = "bit",
    p: float = 0.5,
    bounds: tuple[float, float] = (-4.0, 4.0),
    mu: float = 0.0,
    sigma: float = 1.0,
    known_sd: float | None = 1.0,
    sanitization: str = "individualized",
    allocation: float = 0.5,
    rules: Sequence[str] = MULTI_RULES,
    include_single: bool = True,
    level: float = 0.95,
    strict_truncation: bool = False,
    exact_synthetic: bool = False,
) -> pd.DataFrame:
    """Bias, SD estimate, empirical SD, coverage, CI half-width of modips.SBS inference (5.1-5.3).

    ``data_type`` "binary" (Bernoulli(p), estimand p) or "gaussian" (N(μ, σ²) clipped to ``bounds``,
    estimand μ; ``known_sd`` given: known-variance model, Sec 5.1; ``None``: unknown variance, 5.3).
    Budget ε is split equally over the m sets. ``strict_truncation=False`` replicates the paper.
    One row per (m, rule) plus ``"original"`` and ``"single"`` rows.
    """
    eps = require_finite_positive("epsilon", epsilon)
    reps = int(reps)
    if reps < 2:
        raise InputError("reps", "need at least 2 repetitions")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    lo, hi = (0.0, 1.0) if data_type == "binary" else require_bounds("bounds", *bounds)
    if data_type not in ("binary", "gaussian"):
        raise InputError("data_type", f"must be binary or gaussian (got {data_type!r})")
    cfg = {
        "data_type": data_type,
        "n": int(n),
        "lower": lo,
        "upper": hi,
        "bounding": bounding,
        "strict": strict_truncation,
        "known_sd": known_sd,
        "sanitization": sanitization,
        "allocation": allocation,
        "exact": exact_synthetic,
    }
    truth = p if data_type == "binary" else mu
    stat = _original(data_type, int(n), reps, gen, p, lo, hi, mu, sigma)
    base = {
        "data_type": data_type,
        "n": int(n),
        "epsilon": eps,
        "bounding": bounding,
        "p": p if data_type == "binary" else np.nan,
        "lower": lo,
        "upper": hi,
        "variance_model": "-" if data_type == "binary" else ("known" if known_sd else "unknown"),
        "sanitization": sanitization if data_type == "gaussian" and known_sd is None else "-",
        "allocation": allocation
        if (known_sd is None and sanitization == "individualized" and data_type == "gaussian")
        else np.nan,
        "reps": reps,
        "truth": truth,
    }
    orig = _original_interval(stat, data_type, int(n), reps, level)
    rows = [{**base, "m": 0, "rule": "original", **_metrics(orig, truth)}]
    if include_single:
        q, v = _one_pass(stat, 1, eps, cfg, gen)
        single = _metrics(combine_arrays(q, v, "single", level), truth)
        rows.append({**base, "m": 1, "rule": "single", **single})
    for m in m_values:
        rows += _rule_rows(stat, int(m), eps, cfg, gen, rules, level, base, truth)
    return pd.DataFrame(rows)


def _original_interval(
    stat: tuple[np.ndarray, np.ndarray], data_type: str, n: int, reps: int, level: float
) -> dict[str, Any]:
    """Original-data inference (Liu, Section 5): Wald interval for p, t_{n-1} interval for μ."""
    se = np.sqrt(stat[1] / n)
    df0 = np.inf if data_type == "binary" else n - 1
    half = (
        stats.norm.ppf(0.5 + level / 2) if df0 == np.inf else stats.t.ppf(0.5 + level / 2, df0)
    ) * se
    return {
        "estimate": stat[0],
        "variance": se**2,
        "df": np.full(reps, df0),
        "lower": stat[0] - half,
        "upper": stat[0] + half,
    }


def _rule_rows(
    stat: tuple[np.ndarray, np.ndarray],
    m: int,
    eps: float,
    cfg: dict[str, Any],
    gen: np.random.Generator,
    rules: Sequence[str],
    level: float,
    base: dict[str, Any],
    truth: float,
) -> list[dict[str, Any]]:
    """One row per combining rule of m synthetic sets at eps / m each (Liu, Theorems 6-7)."""
    q, v = _one_pass(stat, m, eps / m, cfg, gen)
    moments = (q.mean(axis=1), v.mean(axis=1), q.var(axis=1, ddof=1) if m > 1 else np.nan)
    rows = []
    for rule in rules:
        if m < 2 and rule in ("thm7", "rubin", "raghunathan"):
            continue
        combined = combine_moments(*moments, m, rule, level)
        rows.append({**base, "m": m, "rule": rule, **_metrics(combined, truth)})
    return rows


def _run_one(kw: dict[str, Any]) -> pd.DataFrame:
    return simulate_sbs(**kw)


def _run_grid(
    settings: list[dict[str, Any]], seed: int | None, workers: int = 1, **common: Any
) -> pd.DataFrame:
    """Run every setting with its own spawned seed (results do not depend on ``workers``)."""
    seqs = np.random.SeedSequence(seed).spawn(len(settings))
    jobs = [
        {"rng": np.random.default_rng(s), **common, **kw}
        for kw, s in zip(settings, seqs, strict=True)
    ]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(_run_one, jobs))
    else:
        frames = [_run_one(j) for j in jobs]
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- paper sections


def study_m_effect(
    m_values: Sequence[int] = M_GRID,
    reps: int = 5000,
    seed: int | None = 2016,
    epsilon: float = 1.0,
    ns_binary: Sequence[int] = (100, 1000),
    ns_gaussian: Sequence[int] = (100, 1000),
    ps: Sequence[float] = (0.1, 0.5),
    bounds_list: Sequence[tuple[float, float]] = ((-4.0, 4.0), (-4.0, 5.0)),
    boundings: Sequence[str] = ("bit", "truncation"),
    data_types: Sequence[str] = ("binary", "gaussian"),
    rules: Sequence[str] = ("thm7",),
    workers: int = 1,
) -> pd.DataFrame:
    """Section 5.1 (Figure 6): m vs bias, SD estimate, coverage (binary; Gaussian σ = 1).

    Figure 6's ε is not in the extracted text; ε = 1 gives the Gaussian pattern the paper
    describes (SD peak at m ≈ 15 / 30 for truncation / BIT at n = 100; paper: 20 / 40).
    """
    settings: list[dict[str, Any]] = []
    for dt, bnd in product(data_types, boundings):
        for n in ns_binary if dt == "binary" else ns_gaussian:
            settings += _setting(dt, n, bnd, ps, bounds_list)
    return _run_grid(
        settings, seed, workers, epsilon=epsilon, m_values=m_values, reps=reps, rules=rules
    )


def _setting(dt: str, n: int, bnd: str, ps: Sequence[float], bounds_list: Any) -> list[dict]:
    if dt == "binary":
        return [{"data_type": dt, "n": n, "bounding": bnd, "p": p} for p in ps]
    return [{"data_type": dt, "n": n, "bounding": bnd, "bounds": b} for b in bounds_list]


def study_combination_rules(
    m_values: Sequence[int] = (10,),
    reps: int = 5000,
    seed: int | None = 2017,
    epsilons: Sequence[float] = (100.0, 10.0, 1.0, 0.5),
    ns_binary: Sequence[int] = (100, 1000),
    ns_gaussian: Sequence[int] = (10, 100),
    ps: Sequence[float] = (0.5, 0.1),
    bounds: tuple[float, float] = (-4.0, 4.0),
    boundings: Sequence[str] = ("bit",),
    data_types: Sequence[str] = ("binary", "gaussian"),
    workers: int = 1,
) -> pd.DataFrame:
    """Section 5.2 (Table 1, Fig 7): coverage, SD of Thm 7 vs Rubin, Raghunathan, Raab, single.

    Table 1(a) prints n = 10 / 100 for the binary data, but its numbers (e.g. Raab 0.532 and
    single 0.686 at ε = 0.5, p = 0.1) are reproduced with n = 100 / 1000, hence ``ns_binary``;
    Table 1(b) (Gaussian) is reproduced with the printed n = 10 / 100.
    """
    settings: list[dict[str, Any]] = []
    for dt, eps, bnd in product(data_types, epsilons, boundings):
        for n in ns_binary if dt == "binary" else ns_gaussian:
            settings += [{**s, "epsilon": eps} for s in _setting(dt, n, bnd, ps, [bounds])]
    return _run_grid(settings, seed, workers, m_values=m_values, reps=reps, rules=MULTI_RULES)


def study_allocation(
    allocations: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    m: int = 5,
    reps: int = 5000,
    seed: int | None = 2018,
    epsilon: float = 1.0,
    ns: Sequence[int] = (100, 1000),
    bounds_list: Sequence[tuple[float, float]] = ((-4.0, 4.0), (-4.0, 5.0)),
    boundings: Sequence[str] = ("bit", "truncation"),
    include_communal: bool = True,
    workers: int = 1,
) -> pd.DataFrame:
    """Section 5.3 (Figure 8): effect of the share w of ε on x̄ (1 - w on s²) on inference for μ.

    Rows with ``sanitization == "communal"`` give Definition 5 for comparison.
    """
    settings: list[dict[str, Any]] = []
    for n, b, bnd in product(ns, bounds_list, boundings):
        common = {
            "data_type": "gaussian",
            "n": n,
            "bounds": b,
            "bounding": bnd,
            "known_sd": None,
        }
        settings += [{**common, "allocation": w} for w in allocations]
        if include_communal:
            settings.append({**common, "sanitization": "communal"})
    return _run_grid(
        settings,
        seed,
        workers,
        m_values=(m,),
        reps=reps,
        epsilon=epsilon,
        rules=("thm7",),
        include_single=False,
    )
