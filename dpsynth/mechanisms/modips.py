"""modips: model-based differentially private synthesis (Liu), with DP posterior sampling.

Algorithm 1 (modips and its nested variant), modips.SBS (Section 3.3, Proposition 2) with
communal / individualized sanitization (Definitions 5, 6), truncation and BIT bounding,
SDD / SDD.MC / SPHC (Algorithms 2-4, Propositions 3-5) and model-free histogram synthesis
(Section 3.5, Figure 5). Neighbouring datasets are "bounded DP" (substitution of one record,
n public), which is what the sensitivities 1/n, (c1-c0)/n and (c1-c0)^2/n assume.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import logsumexp

from dpsynth.errors import (
    InputError,
    require_bounds,
    require_choice,
    require_data,
    require_finite_positive,
    require_m,
)
from dpsynth.mechanisms.histogram import bin_volumes, make_edges, uniform_in_bin
from dpsynth.privacy.accounting import (
    BOUNDINGS,
    Bounding,
    BudgetLedger,
    exponential_mechanism,
    laplace_mechanism,
    require_generator,
    sanitize_bounded,
    secure_generator,
    sensitivity_mean,
    sensitivity_proportion,
    sensitivity_variance,
    variance_upper_bound,
)

SANITIZATIONS: tuple[str, ...] = ("communal", "individualized")
DATA_TYPES: tuple[str, ...] = ("binary", "gaussian")


def allocation_weights(allocation: float | Sequence[float], r: int) -> np.ndarray:
    """Budget shares w_1..w_r of individualized sanitization (Definition 6): each in (0,1), sum 1.

    A scalar ``allocation`` with r = 2 means (w, 1 - w), w being the share of the first statistic.
    """
    w = np.atleast_1d(np.asarray(allocation, dtype=float))
    if w.size == 1 and r == 2:
        w = np.array([w[0], 1.0 - w[0]])
    if w.size != r:
        raise InputError("allocation", f"need {r} weights (got {w.size})")
    if not np.all(np.isfinite(w)) or np.any(w <= 0) or np.any(w >= 1):
        raise InputError("allocation", f"every weight must lie in (0, 1) (got {w.tolist()})")
    if abs(w.sum() - 1.0) > 1e-9:
        raise InputError("allocation", f"weights must sum to 1 (got {w.sum():.12g})")
    return w


# ------------------------------------------------------------------------ posteriors and synthesis


def posterior_binary(
    p_star: float | np.ndarray, n: int, rng: np.random.Generator
) -> float | np.ndarray:
    """Draw p ~ Beta(n p* + 1, n (1 - p*) + 1): uniform prior, Bernoulli data (Sec 5.1)."""
    p = np.asarray(p_star, dtype=float)
    out = rng.beta(n * p + 1.0, n * (1.0 - p) + 1.0)
    return float(out) if np.ndim(p_star) == 0 else out


def posterior_gaussian_known_variance(
    mean_star: float | np.ndarray, sigma: float, n: int, rng: np.random.Generator
) -> float | np.ndarray:
    """Draw μ ~ N(x̄*, σ²/n): flat prior on μ, known σ (Liu, Section 5.1)."""
    m = np.asarray(mean_star, dtype=float)
    out = m + sigma / np.sqrt(n) * rng.standard_normal(m.shape)
    return float(out) if np.ndim(mean_star) == 0 else out


def posterior_gaussian(
    mean_star: float | np.ndarray,
    var_star: float | np.ndarray,
    n: int,
    rng: np.random.Generator,
) -> tuple[Any, Any]:
    """Draw (μ, σ²): prior ∝ 1/σ²; σ² ~ (n-1) s*²/χ²_{n-1}, μ | σ² ~ N(x̄*, σ²/n) (Sec 5.3)."""
    m = np.asarray(mean_star, dtype=float)
    v = np.asarray(var_star, dtype=float)
    shape = np.broadcast(m, v).shape
    sigma2 = (n - 1) * v / rng.chisquare(n - 1, size=shape)
    mu = m + np.sqrt(sigma2 / n) * rng.standard_normal(shape)
    if shape == ():
        return float(mu), float(sigma2)
    return mu, sigma2


def synthesize_binary(theta: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n synthetic Bernoulli(θ) records (int 0/1), shape (n,)."""
    return (rng.random(n) < theta).astype(int)


def synthesize_gaussian(
    mu: float,
    sigma: float,
    n: int,
    lower: float,
    upper: float,
    bounding: Bounding,
    rng: np.random.Generator,
) -> np.ndarray:
    """n synthetic N(μ, σ²) records in [c0, c1]: BIT clips, truncation truncates."""
    require_choice("bounding", bounding, BOUNDINGS)
    if sigma <= 0:
        return np.full(n, float(np.clip(mu, lower, upper)))
    if bounding == "bit":
        return np.clip(rng.normal(mu, sigma, size=n), lower, upper)
    a, b = (lower - mu) / sigma, (upper - mu) / sigma
    out = stats.truncnorm.rvs(a, b, loc=mu, scale=sigma, size=n, random_state=rng)
    return np.clip(out, lower, upper)


# ----------------------------------------------------------------------------- modips.SBS


@dataclass
class SBSDraw:
    """One sanitized posterior sample of modips.SBS.

    ``theta``: model parameters drawn from f(θ | s*); ``sanitized``: the DP statistics s* (bounded);
    ``spends``: (what, ε) pairs charged for this draw; ``epsilon``: their sum.
    """

    model: str
    n: int
    theta: dict[str, float]
    sanitized: dict[str, float]
    spends: list[tuple[str, float]]

    @property
    def epsilon(self) -> float:
        return float(sum(e for _, e in self.spends))


def sbs_binary(
    x: Any,
    epsilon: float,
    rng: np.random.Generator,
    bounding: Bounding = "bit",
    strict_truncation: bool = True,
) -> SBSDraw:
    """modips.SBS, binary data, uniform prior: sanitize p̂ (GS 1/n) to [0,1], draw p ~ Beta (5.1)."""
    arr = require_data(x)
    if not np.isin(arr, (0.0, 1.0)).all():
        raise InputError("x", "binary data must contain only 0 and 1")
    eps = require_finite_positive("epsilon", epsilon)
    require_generator(rng)
    n = arr.size
    how = (bounding, rng, strict_truncation)
    p_star = float(sanitize_bounded(arr.mean(), sensitivity_proportion(n), eps, 0.0, 1.0, *how))
    p = posterior_binary(p_star, n, rng)
    return SBSDraw("binary", n, {"p": p}, {"proportion": p_star}, [("proportion", eps)])


def _bounded_data(x: Any, bounds: tuple[float, float]) -> tuple[np.ndarray, float, float]:
    lo, hi = require_bounds("bounds", *bounds)
    return np.clip(require_data(x), lo, hi), lo, hi


def sbs_gaussian_known_variance(
    x: Any,
    sigma: float,
    bounds: tuple[float, float],
    epsilon: float,
    rng: np.random.Generator,
    bounding: Bounding = "bit",
    strict_truncation: bool = True,
) -> SBSDraw:
    """modips.SBS, Gaussian, known σ: sanitize x̄ (GS (c1-c0)/n), draw μ ~ N(x̄*, σ²/n) (Sec 5.1).

    Data are first projected onto the public bounds [c0, c1] (needed for the sensitivity).
    """
    arr, lo, hi = _bounded_data(x, bounds)
    sig = require_finite_positive("sigma", sigma)
    eps = require_finite_positive("epsilon", epsilon)
    require_generator(rng)
    n = arr.size
    how = (bounding, rng, strict_truncation)
    m_star = float(sanitize_bounded(arr.mean(), sensitivity_mean(lo, hi, n), eps, lo, hi, *how))
    mu = posterior_gaussian_known_variance(m_star, sig, n, rng)
    return SBSDraw(
        "gaussian_known_variance",
        n,
        {"mu": mu, "sigma": sig},
        {"mean": m_star},
        [("mean", eps)],
    )


def sbs_gaussian(
    x: Any,
    bounds: tuple[float, float],
    epsilon: float,
    rng: np.random.Generator,
    bounding: Bounding = "bit",
    sanitization: str = "individualized",
    allocation: float | Sequence[float] = 0.5,
    strict_truncation: bool = True,
) -> SBSDraw:
    """modips.SBS, Gaussian with unknown μ, σ²: sanitize (x̄, s²) then draw (μ, σ²) (Sec 3.4, 5.3).

    Communal (Definition 5): both statistics get Laplace scale (Δ_x̄ + Δ_s²)/ε.
    Individualized (Definition 6): statistic i gets Laplace scale Δ_i/(w_i ε), w = (w, 1-w).
    x̄* is bounded to [c0, c1], s*² to [0, n(c1-c0)²/(4(n-1))]. Needs n >= 2.
    """
    arr, lo, hi = _bounded_data(x, bounds)
    if arr.size < 2:
        raise InputError(
            "x", "need at least 2 records for the Gaussian model with unknown variance"
        )
    eps = require_finite_positive("epsilon", epsilon)
    require_choice("sanitization", sanitization, SANITIZATIONS)
    require_generator(rng)
    n = arr.size
    d_mean, d_var = sensitivity_mean(lo, hi, n), sensitivity_variance(lo, hi, n)
    stat = (arr.mean(), arr.var(ddof=1))
    if sanitization == "communal":
        # Definition 5: one Laplace mechanism on the 2-vector with its l1 GS.
        d_all = d_mean + d_var
        sens, eps_each = (d_all, d_all), (eps, eps)
        spends = [("mean+variance (communal)", eps)]
    else:
        w = allocation_weights(allocation, 2)
        sens, eps_each = (d_mean, d_var), (float(w[0] * eps), float(w[1] * eps))
        spends = [("mean", eps_each[0]), ("variance", eps_each[1])]
    m_star = float(
        sanitize_bounded(stat[0], sens[0], eps_each[0], lo, hi, bounding, rng, strict_truncation)
    )
    v_star = float(
        sanitize_bounded(
            stat[1],
            sens[1],
            eps_each[1],
            0.0,
            variance_upper_bound(lo, hi, n),
            bounding,
            rng,
            strict_truncation,
        )
    )
    mu, sigma2 = posterior_gaussian(m_star, v_star, n, rng)
    return SBSDraw(
        "gaussian",
        n,
        {"mu": mu, "sigma": float(np.sqrt(sigma2))},
        {"mean": m_star, "variance": v_star},
        spends,
    )


# ----------------------------------------------------------------------------- Algorithm 1


@dataclass
class ModipsModel:
    """A candidate Bayesian synthesis model for Algorithm 1.

    ``posterior_sampler(x, epsilon, rng)`` returns one ε-DP posterior sample θ*;
    ``synthesizer(theta, n, rng)`` returns n synthetic records; ``utility(x)`` (optional) scores
    the model on x for the exponential-mechanism selection (e.g. negative DIC).
    """

    name: str
    posterior_sampler: Callable[[np.ndarray, float, np.random.Generator], Any]
    synthesizer: Callable[[Any, int, np.random.Generator], np.ndarray]
    utility: Callable[[np.ndarray], float] | None = None


@dataclass
class ModipsResult:
    """Output of Algorithm 1: m (x t when nested) synthetic datasets and the budget ledger.

    ``datasets[k]`` has shape (n_synthetic,); ``set_ids[k] = (i, j)`` gives the posterior
    sample i = 1..m and, for the nested variant, the synthesis j = 1..t.
    """

    model: str
    datasets: list[np.ndarray]
    set_ids: list[tuple[int, int]]
    thetas: list[Any]
    ledger: BudgetLedger
    selection_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_frame(self, column: str, set_column: str = "synthetic_set") -> pd.DataFrame:
        """Stack the datasets into one frame; ``set_column`` = 1..(m t) if there are several."""
        frames = []
        for k, d in enumerate(self.datasets, start=1):
            f = pd.DataFrame({column: d})
            if len(self.datasets) > 1:
                f[set_column] = k
            frames.append(f)
        return pd.concat(frames, ignore_index=True)


def select_model(
    models: Sequence[ModipsModel],
    x: np.ndarray,
    utility_sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> int:
    """Algorithm 1, line 1: pick a model by the exponential mechanism on u(M | x), GS Δu."""
    if any(m.utility is None for m in models):
        raise InputError("models", "every candidate model needs a utility function for selection")
    u = np.array([float(m.utility(x)) for m in models])  # type: ignore[misc]
    return exponential_mechanism(u, utility_sensitivity, epsilon, rng)


def modips(
    x: Any,
    models: ModipsModel | Sequence[ModipsModel],
    m: int,
    epsilon: float,
    rng: np.random.Generator | None = None,
    *,
    epsilon_select: float = 0.0,
    utility_sensitivity: float | None = None,
    t: int = 1,
    n_synthetic: int | None = None,
    ledger: BudgetLedger | None = None,
    data_label: str = "x",
) -> ModipsResult:
    """Algorithm 1 (modips): optional DP model selection (ε0), then m posterior samples at (ε-ε0)/m.

    Nested variant (Figure 3): t > 1 synthetic datasets per posterior sample (no extra cost,
    post-processing), m t datasets in all. Every spend goes to ``ledger`` (sequential composition).
    ``rng`` None (a release) draws from the OS with OpenDP noise (:func:`secure_generator`);
    a seeded numpy generator reproduces a simulation and is not private.
    """
    arr = require_data(x)
    m = require_m(m)
    t = require_m(t, "t")
    eps = require_finite_positive("epsilon", epsilon)
    rng = secure_generator() if rng is None else require_generator(rng)
    cands = [models] if isinstance(models, ModipsModel) else list(models)
    if not cands:
        raise InputError("models", "need at least one candidate model")
    led = ledger if ledger is not None else BudgetLedger(eps)
    n_out = arr.size if n_synthetic is None else require_m(n_synthetic, "n_synthetic")
    sel: int | None = None
    eps_synth = eps
    if len(cands) > 1:
        e0 = require_finite_positive("epsilon_select", epsilon_select)
        if e0 >= eps:
            raise InputError("epsilon_select", f"must be < epsilon ({e0} >= {eps})")
        if utility_sensitivity is None:
            raise InputError("utility_sensitivity", "needed to select among several models")
        led.spend("model selection (exponential mechanism)", e0, data_label)
        sel = select_model(cands, arr, utility_sensitivity, e0, rng)
        eps_synth = eps - e0
    model = cands[sel or 0]
    eps_i = eps_synth / m
    datasets: list[np.ndarray] = []
    ids: list[tuple[int, int]] = []
    thetas: list[Any] = []
    for i in range(1, m + 1):
        led.spend(f"posterior sample {i}/{m} ({model.name})", eps_i, data_label)
        theta = model.posterior_sampler(arr, eps_i, rng)
        thetas.append(theta)
        for j in range(1, t + 1):
            datasets.append(np.asarray(model.synthesizer(theta, n_out, rng)))
            ids.append((i, j))
    return ModipsResult(model.name, datasets, ids, thetas, led, sel)


def sbs_model(
    data_type: str,
    *,
    bounds: tuple[float, float] | None = None,
    known_sd: float | None = None,
    bounding: Bounding = "bit",
    sanitization: str = "individualized",
    allocation: float | Sequence[float] = 0.5,
    strict_truncation: bool = True,
) -> ModipsModel:
    """The modips.SBS models of Section 5 as a :class:`ModipsModel` (sampler gives SBSDraw)."""
    require_choice("data_type", data_type, DATA_TYPES)
    require_choice("bounding", bounding, BOUNDINGS)
    if data_type == "binary":
        return ModipsModel(
            "sbs_binary",
            lambda x, e, r: sbs_binary(x, e, r, bounding, strict_truncation),
            lambda th, n, r: synthesize_binary(th.theta["p"], n, r),
        )
    if bounds is None:
        raise InputError("bounds", "public bounds [c0, c1] are required for Gaussian data")
    lo, hi = require_bounds("bounds", *bounds)

    def synth(th: SBSDraw, n: int, r: np.random.Generator) -> np.ndarray:
        return synthesize_gaussian(th.theta["mu"], th.theta["sigma"], n, lo, hi, bounding, r)

    if known_sd is not None:
        sd = require_finite_positive("known_sd", known_sd)
        return ModipsModel(
            "sbs_gaussian_known_variance",
            lambda x, e, r: sbs_gaussian_known_variance(
                x, sd, (lo, hi), e, r, bounding, strict_truncation
            ),
            synth,
        )
    require_choice("sanitization", sanitization, SANITIZATIONS)
    if sanitization == "individualized":
        allocation_weights(allocation, 2)
    return ModipsModel(
        "sbs_gaussian",
        lambda x, e, r: sbs_gaussian(
            x, (lo, hi), e, r, bounding, sanitization, allocation, strict_truncation
        ),
        synth,
    )


# ------------------------------------------------------------------------- discretized posteriors


def sdd_sample(
    log_density: Callable[[np.ndarray], np.ndarray],
    support: Any,
    bins: int | Sequence[int],
    epsilon: float,
    bound_a: float,
    rng: np.random.Generator,
    points_per_dim: int = 1,
) -> np.ndarray:
    """Algorithm 2 (SDD): exponential mechanism picks a bin of the discretized posterior; θ* in it.

    ``log_density(theta)`` takes shape (k, p) and returns (k,) values of log f(θ | x) (may be
    unnormalized, but |log f| must be bounded by A = ``bound_a`` for every x and θ in the support).
    Utility u_i = log(f̄_i V_i), f̄_i the mean density over ``points_per_dim``^p evenly spread points
    of bin i (1 = centre); Δu = 2A (Proposition 3). θ* is drawn uniformly within the chosen bin
    (a data-independent step, so only the selection costs ε). Returns shape (p,).
    """
    eps = require_finite_positive("epsilon", epsilon)
    a = require_finite_positive("bound_a", bound_a)
    require_generator(rng)
    edges = make_edges(support, bins)
    k = require_m(points_per_dim, "points_per_dim")
    # evaluation points: k evenly spread sub-cell midpoints per dimension of every bin
    frac = (np.arange(k) + 0.5) / k
    axes = [(e[:-1, None] + np.diff(e)[:, None] * frac[None, :]) for e in edges]  # (b_j, k)
    p = len(edges)
    grids = np.meshgrid(*[ax.reshape(-1) for ax in axes], indexing="ij")
    pts = np.stack([g.reshape(-1) for g in grids], axis=1)
    logf = np.asarray(log_density(pts), dtype=float).reshape(-1)
    if logf.shape[0] != pts.shape[0]:
        raise InputError("log_density", f"must return one value per point ({pts.shape[0]})")
    if not np.all(np.isfinite(logf)) or np.any(np.abs(logf) > a):
        raise InputError("bound_a", f"|log f(θ|x)| exceeds A = {a} on the support")
    # regroup: points indexed by (bin_1, sub_1, ..., bin_p, sub_p)
    shape = []
    for e in edges:
        shape += [len(e) - 1, k]
    lf = logf.reshape(shape)
    sub_axes = tuple(range(1, 2 * p, 2))
    log_fbar = logsumexp(lf, axis=sub_axes) - p * np.log(k)
    u = log_fbar.reshape(-1) + np.log(bin_volumes(edges))
    chosen = exponential_mechanism(u, 2.0 * a, eps, rng)
    return uniform_in_bin(edges, chosen, rng)


def _draws_counts(draws: Any, edges: list[np.ndarray]) -> tuple[np.ndarray, int]:
    d = np.asarray(draws, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    if d.ndim != 2 or d.shape[1] != len(edges) or d.shape[0] == 0:
        raise InputError("posterior_draws", f"must have shape (N, {len(edges)}) with N >= 1")
    if not np.all(np.isfinite(d)):
        raise InputError("posterior_draws", "must be finite")
    lo = np.array([e[0] for e in edges])
    hi = np.array([e[-1] for e in edges])
    counts, _ = np.histogramdd(np.clip(d, lo, hi), bins=edges)
    return counts.reshape(-1), d.shape[0]


MC_ALGORITHMS = ("sdd.mc", "sphc")
"""Algorithms that sanitize a histogram of posterior draws (Liu, Algorithms 3 and 4)."""


def mc_histogram_sample(
    algorithm: Literal["sdd.mc", "sphc"],
    posterior_draws: Any,
    support: Any,
    bins: int | Sequence[int],
    epsilon: float,
    bound: float,
    rng: np.random.Generator,
    sensitivity_mode: Literal["l1", "per_bin"] = "l1",
) -> np.ndarray:
    """Algorithms 3 (SDD.MC) and 4 (SPHC): sanitize an MC histogram of θ | x, draw θ* from it.

    ``posterior_draws`` shape (N, p) from f(θ | x), clipped to the support and counted in
    the bins (counts n_i). Returns θ* of shape (p,), uniform within a bin drawn from the
    sanitized histogram. ``bound`` is A for SDD.MC and G for SPHC.

    - ``"sdd.mc"``: log(n_i/N) is clamped to [log V_i - A, log V_i + A] (the range the A-bound
      allows), Laplace noise added with GS 2A per bin (Proposition 4; ``"per_bin"``) or 2A B for
      the whole B-vector (``"l1"``, default, the l1 GS of the released vector); exp, normalize.
    - ``"sphc"``: Laplace noise on the counts; GS of n_i is N V_i G with G = sup f(θ | x)
      (Proposition 5; ``"per_bin"``), or the l1 GS of the whole vector, N min(2, G Σ V_i)
      (``"l1"``, default). Negative counts are set to 0 (all zero: uniform over bins).
    """
    require_choice("algorithm", algorithm, MC_ALGORITHMS)
    eps = require_finite_positive("epsilon", epsilon)
    bound = require_finite_positive("bound", bound)
    require_generator(rng)
    require_choice("sensitivity_mode", sensitivity_mode, ("l1", "per_bin"))
    edges = make_edges(support, bins)
    counts, n_draws = _draws_counts(posterior_draws, edges)
    vol = bin_volumes(edges)
    per_bin = sensitivity_mode == "per_bin"
    if algorithm == "sdd.mc":
        with np.errstate(divide="ignore"):
            logq = np.clip(np.log(counts / n_draws), np.log(vol) - bound, np.log(vol) + bound)
        noisy = laplace_mechanism(logq, 2.0 * bound * (1 if per_bin else counts.size), eps, rng)
        prob = np.exp(noisy - noisy.max())
    else:
        if per_bin:  # n_i + Laplace(N V_i G / eps) = V_i (n_i / V_i + Laplace(N G / eps))
            noisy = vol * laplace_mechanism(counts / vol, n_draws * bound, eps, rng)
        else:
            noisy = laplace_mechanism(counts, n_draws * min(2.0, bound * vol.sum()), eps, rng)
        prob = np.maximum(noisy, 0.0)
        if prob.sum() <= 0:
            prob = np.ones(prob.size)
    prob = prob / prob.sum()
    return uniform_in_bin(edges, int(rng.choice(prob.size, p=prob)), rng)


# ----------------------------------------------------------------------------- SBS settings


@dataclass(frozen=True)
class SBSSettings:
    """A release's modips.SBS settings (Liu, Section 3.3), validated by :func:`sbs_settings`.

    ``allocation`` is the share w of the mean under individualized sanitization with
    unknown variance (Definition 6; 0.5 unless given).
    """

    data_type: str
    bounds: tuple[float, float]
    known_sd: float | None
    sanitization: str
    allocation: float
    bounding: str

    @property
    def unknown_variance(self) -> bool:
        """Gaussian data with unknown variance: two statistics share the budget."""
        return self.data_type == "gaussian" and self.known_sd is None

    def model(self) -> ModipsModel:
        """The SBS model of these settings (strict truncation: strict epsilon-DP)."""
        return sbs_model(
            self.data_type,
            bounds=self.bounds,
            known_sd=self.known_sd,
            bounding=self.bounding,
            sanitization=self.sanitization,
            allocation=self.allocation,
            strict_truncation=True,
        )


def sbs_settings(
    y: Any, bounds: Any, neighbours: str, options: dict[str, Any]
) -> tuple[np.ndarray, SBSSettings]:
    """The confidential column as an array and the SBS ``options`` of a release, checked.

    Liu's sensitivities (1/n, (c1-c0)/n) assume n public: substitution ``neighbours`` only.
    Gaussian data needs public ``bounds``; binary data 0/1 values.
    """
    from dpsynth.privacy.accounting import require_public_bounds

    if neighbours != "substitution":
        raise InputError(
            "neighbours", "modips' sensitivities (1/n, (c1-c0)/n) assume n public: use substitution"
        )
    data_type = require_choice("data_type", options.get("data_type", "gaussian"), DATA_TYPES)
    known_sd = options.get("known_sd")
    sanitization = options.get("sanitization", "individualized")
    arr = np.asarray(y, dtype=float).ravel()
    if not np.all(np.isfinite(arr)) or arr.size == 0:
        raise InputError("y", "must be a non-empty column of finite numbers")
    if data_type == "binary":
        if not np.isin(arr, (0.0, 1.0)).all():
            raise InputError("y", "data_type binary needs 0/1 values")
        lo, hi = 0.0, 1.0
    else:
        if bounds is None:
            raise InputError("bounds", "public bounds LO HI are required for Gaussian data")
        lo, hi = require_public_bounds(bounds)
        if arr.size < 2:
            raise InputError("y", "Gaussian SBS needs at least 2 records")
        if known_sd is not None:
            known_sd = require_finite_positive("known_sd", known_sd)
    w = _sbs_allocation(options.get("allocation"), data_type, known_sd, sanitization)
    bounding = options.get("bounding", "bit")
    return arr, SBSSettings(data_type, (lo, hi), known_sd, sanitization, w, bounding)


def _sbs_allocation(
    allocation: Any, data_type: str, known_sd: float | None, sanitization: str
) -> float:
    """The mean's share w of individualized sanitization (Definition 6), 0.5 by default."""
    if allocation is None:
        return 0.5
    if data_type != "gaussian" or known_sd is not None or sanitization != "individualized":
        raise InputError(
            "allocation",
            "only applies to Gaussian data with unknown variance and individualized sanitization",
        )
    allocation = float(allocation)
    if not 0.0 < allocation < 1.0:
        raise InputError("allocation", f"must lie in (0, 1) (got {allocation!r})")
    return allocation
