"""MCMC convergence diagnostics in numpy: rank-normalized split R-hat and bulk ESS.

The same computation as ArviZ 0.22 (``az.rhat(x)``, default method ``"rank"``, and
``az.ess(x, method="bulk")``) for one scalar quantity, ``x`` of shape ``(chains, draws)``,
following Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-normalization,
folding, and localization: an improved R-hat", Bayesian Analysis 16(2). Kept here so that
the engine does not import ArviZ (slow to import, heavy); ``tests/test_diagnostics.py``
checks agreement with ArviZ.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtri

__all__ = [
    "CONVERGENCE",
    "converged",
    "convergence_failures",
    "convergence_note",
    "ess_bulk",
    "ess_within",
    "rhat",
    "rhat_excess",
    "rhat_limit",
]

CONVERGENCE = {"rhat_max": 1.01, "rhat_scatter": 0.01, "ess_bulk_min": 100.0, "divergences": 0}
"""The convergence a strict-DP release requires of its fit (the release's policy, and the one
named threshold every study and notebook check uses unless it says why it differs): every
parameter's R-hat within its limit (:func:`rhat_limit`: ``rhat_max``, or more where its
within-chain ESS is small, set so that about a share ``rhat_scatter`` of converged fits is
refused for R-hat's scatter whatever their number of parameters), a bulk ESS of at least
``ess_bulk_min`` and no divergent transition. Evidence: book/choices.md, section choices-sampler."""


def rhat_limit(ess: float, parameters: int, chains: int) -> float:
    """The largest R-hat a parameter with within-chain ESS ``ess`` (:func:`ess_within`) may show
    in a converged fit of ``parameters`` parameters and ``chains`` chains: max(1.01, 1 + c / ESS).

    dpsynth's rule, after Vats & Knudson (2021, "Revisiting the Gelman-Rubin diagnostic",
    Statistical Science 36(4)), who tie R-hat to the ESS: on stationary chains
    (R-hat - 1) x ESS scatters about as (m / (2 (m - 1))) chi2(m - 1), m = 2 x chains split
    chains, so c is that law's 1 - ``rhat_scatter`` / ``parameters`` quantile (a Bonferroni
    bound over the parameters). The fixed 1.01 stays the floor, so the rule never refuses
    what 1.01 passes; ``benchmarks/investigations/rhat_ess_rule.py`` measures its
    false-refusal rate and its power against chains offset from one another.
    """
    if not (ess > 0 and math.isfinite(ess)):
        return CONVERGENCE["rhat_max"]
    return max(CONVERGENCE["rhat_max"], 1.0 + _scatter_bound(int(parameters), int(chains)) / ess)


@functools.lru_cache(maxsize=64)
def _scatter_bound(parameters: int, chains: int) -> float:
    """c of :func:`rhat_limit`: the 1 - ``rhat_scatter`` / ``parameters`` quantile of
    (m / (2 (m - 1))) chi2(m - 1), m = 2 x ``chains``."""
    from scipy.stats import chi2

    m = 2 * max(chains, 1)
    tail = CONVERGENCE["rhat_scatter"] / max(parameters, 1)
    return m / (2.0 * (m - 1)) * float(chi2.isf(tail, m - 1))


def rhat_excess(rhats: list[float], esss: list[float], chains: int) -> tuple[float, float]:
    """(the largest R-hat minus its :func:`rhat_limit`, that limit) over the parameters whose
    R-hat and within-chain ESS (:func:`ess_within`) are ``rhats`` and ``esss``: the fit meets
    the R-hat rule when the excess is at most 0."""
    limits = [rhat_limit(e, len(rhats), chains) for e in esss]
    worst = int(np.argmax([r - lim for r, lim in zip(rhats, limits, strict=True)]))
    return rhats[worst] - limits[worst], limits[worst]


def rhat(x: np.ndarray) -> float:
    """Rank-normalized split R-hat: the max of the bulk and the folded (tail) R-hat.

    ``x`` has shape ``(chains, draws)``; NaN when it holds a NaN, fewer than 2 chains or
    fewer than 4 draws (as ArviZ).
    """
    x = _as_chains(x)
    if np.isnan(x).any() or x.shape[0] < 2 or x.shape[1] < 4:
        return float("nan")
    split = _split_chains(x)
    bulk = _rhat(_z_scale(split))
    tail = _rhat(_z_scale(np.abs(split - np.median(split))))
    return float(max(bulk, tail))


def ess_bulk(x: np.ndarray) -> float:
    """Bulk effective sample size: ESS of the rank-normalized split chains.

    ``x`` has shape ``(chains, draws)``; NaN when it holds a NaN or fewer than 4 draws.
    """
    x = _as_chains(x)
    if np.isnan(x).any() or x.shape[1] < 4:
        return float("nan")
    return _ess(_z_scale(_split_chains(x)))


def ess_within(x: np.ndarray) -> float:
    """Bulk ESS of the rank-normalized split chains from their within-chain autocorrelation
    alone (dpsynth's, for :func:`rhat_limit`): the ESS the chains would have if their means
    agreed, so chains that disagree do not lower it (the bulk ESS falls with the between-chain
    variance). Equal to :func:`ess_bulk` up to the between-chain term; NaN as it."""
    x = _as_chains(x)
    if np.isnan(x).any() or x.shape[1] < 4:
        return float("nan")
    return _ess(_z_scale(_split_chains(x)), between=False)


def _as_chains(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return x[None, :]
    if x.ndim != 2:
        raise ValueError(f"expected an array of shape (chains, draws), got shape {x.shape}")
    return x


def _split_chains(x: np.ndarray) -> np.ndarray:
    """Halves of each chain as separate chains (the middle draw of an odd length dropped)."""
    half = x.shape[1] // 2
    return np.vstack((x[:, :half], x[:, -half:]))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..N over all values, ties given their average rank (``rankdata`` "average")."""
    flat = x.ravel()
    order = np.argsort(flat, kind="mergesort")
    ordered = flat[order]
    first = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, flat.size))
    ranks = np.empty(flat.size)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)
    return ranks.reshape(x.shape)


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Normal scores of the pooled ranks with Blom's offset 3/8."""
    ranks = _average_ranks(x)
    return ndtri((ranks - 0.375) / (x.size + 0.25))


def _rhat(x: np.ndarray) -> float:
    """Classic potential scale reduction of chains ``x`` (chains, draws)."""
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    return float(np.sqrt((between / within + n - 1) / n))


def _ess(x: np.ndarray, between: bool = True) -> float:
    """ESS with Geyer's initial monotone sequence over the multi-chain autocorrelation (the
    variance estimate with the between-chain term, or without it: ``between``)."""
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    n_chain, n_draw = x.shape
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1 and between:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n_draw)
    rho_even, rho_odd = 1.0, 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[0], rho[1] = rho_even, rho_odd
    # Geyer's initial positive sequence
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    # Geyer's initial monotone sequence
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    total = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    tau = max(tau, 1 / np.log10(total))
    return float("nan") if np.isnan(rho).any() else float(total / tau)


def _autocov(x: np.ndarray) -> np.ndarray:
    """Autocovariance of each chain at every lag (biased, divided by the chain length), by FFT."""
    n = x.shape[1]
    m = _next_fast_len(2 * n)
    centered = x - x.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(centered, n=m, axis=1)
    spectrum *= np.conjugate(spectrum)
    return np.fft.irfft(spectrum, n=m, axis=1)[:, :n] / n


def _next_fast_len(target: int) -> int:
    """Smallest 5-smooth integer >= ``target`` (``scipy.fftpack.next_fast_len``)."""
    best = None
    p5 = 1
    while p5 < 2 * target:
        p35 = p5
        while p35 < 2 * target:
            p235 = p35
            while p235 < target:
                p235 *= 2
            if best is None or p235 < best:
                best = p235
            p35 *= 3
        p5 *= 5
    return int(best)


# The release's convergence policy: what a strict-DP fit must meet, and the refusal.


def _rhat_ok(diagnostics: dict[str, float]) -> bool:
    """The R-hat rule: every parameter within its :func:`rhat_limit` (``rhat_excess`` <= 0);
    diagnostics without the excess (older records) meet the fixed 1.01."""
    rhat = diagnostics.get("rhat_max")
    if rhat is None or not math.isfinite(rhat):
        return False
    if rhat <= CONVERGENCE["rhat_max"]:
        return True
    excess = diagnostics.get("rhat_excess")
    return excess is not None and math.isfinite(excess) and excess <= 0


def converged(diagnostics: dict[str, float]) -> bool:
    """True when the fit meets :data:`CONVERGENCE` (NaN R-hat or ESS counts as failing)."""
    ess = diagnostics.get("ess_bulk_min")
    return bool(
        _rhat_ok(diagnostics)
        and ess is not None
        and math.isfinite(ess)
        and ess >= CONVERGENCE["ess_bulk_min"]
        and diagnostics.get("divergences", 1) <= CONVERGENCE["divergences"]
    )


def _rhat_failure(diagnostics: dict[str, float]) -> str:
    """The R-hat rule's failure in words."""
    rhat, limit = diagnostics.get("rhat_max"), diagnostics.get("rhat_limit")
    if rhat is None or not math.isfinite(rhat):
        return "no R-hat" if rhat is None else f"max R-hat {rhat:.3g}"
    if limit is None or not math.isfinite(limit) or diagnostics.get("rhat_excess") is None:
        return f"max R-hat {rhat:.3g} > {CONVERGENCE['rhat_max']}"
    over = limit + diagnostics["rhat_excess"]
    return f"R-hat {over:.4f} > its limit {limit:.4f} (max R-hat {rhat:.4f})"


def convergence_failures(diagnostics: dict[str, float]) -> list[str]:
    """The :data:`CONVERGENCE` criteria a fit fails, in words (empty when it converged)."""
    ess = diagnostics.get("ess_bulk_min")
    div = diagnostics.get("divergences", 1)
    out = []
    if not _rhat_ok(diagnostics):
        out.append(_rhat_failure(diagnostics))
    if ess is None or not math.isfinite(ess) or ess < CONVERGENCE["ess_bulk_min"]:
        shown = f"{ess:.0f}" if ess is not None and math.isfinite(ess) else "unknown"
        out.append(f"min bulk ESS {shown} < {CONVERGENCE['ess_bulk_min']:.0f}")
    if div > CONVERGENCE["divergences"]:
        out.append(f"{div} divergent transitions")
    return out


MULTIMODAL_RHAT = 1.3
"""R-hat above this with a bulk ESS under :data:`MULTIMODAL_ESS`: the chains sit in different
modes (longer chains do not help; seen with censored posteriors of skewed incomes)."""
MULTIMODAL_ESS = 20.0
MULTIMODAL_SAYS = "the chains settled in different modes of the censored posterior"
"""How a refusal names that failure (a table's refusal reads it to choose its advice)."""


def multimodal(diagnostics: dict[str, float]) -> bool:
    """Chains in different modes: R-hat above :data:`MULTIMODAL_RHAT` with a bulk ESS
    under :data:`MULTIMODAL_ESS` (more draws would not bring them together)."""
    rhat = diagnostics.get("rhat_max") or math.nan
    ess = diagnostics.get("ess_bulk_min") or math.nan
    return rhat > MULTIMODAL_RHAT and not ess >= MULTIMODAL_ESS


def convergence_note(diagnostics: dict[str, float], *, centred: bool = False) -> str:
    """What the curator's verdict says of an unconverged fit: figures marked confidential,
    advice. The release is made all the same (its outcome must not depend on the data).

    The figures come from the confidential fit, so they are marked as such (they reach
    only the curator's terminal and the confidential diagnostics). The advice depends on the failure: chains in different
    modes, divergent transitions, or too few effective draws; it proposes centring at a
    public reference file (``centring_from``) only to a run that was not ``centred`` there.
    """
    figures = "; ".join(convergence_failures(diagnostics))
    if diagnostics.get("started") == 0:  # dpsynth.models.pieces.starting_fit
        return (
            "the sampler could not start on the confidential data (Stan refused every initial "
            "value): the released draw is its chains' starting point, a prior draw, not a "
            "posterior draw [CONFIDENTIAL: from the confidential fit, do not publish]: make the "
            "record function's gradient finite at every public cell"
        )
    centre = "" if centred else "centre at a public reference file's fit (centring_from), "
    if multimodal(diagnostics):
        advice = (
            f"{MULTIMODAL_SAYS}, so longer "
            f"chains will not help; try {centre}another epsilon, or another model (model), "
            "or PH (mechanism ph) for a single outcome"
        )
    elif diagnostics.get("divergences", 0) > CONVERGENCE["divergences"]:
        advice = (
            "divergent transitions: raise the step-size target (adapt_delta) to 0.95 or "
            f"0.99, {centre}or use another model (model)"
        )
    else:
        advice = "run longer chains (iter_warmup, iter_sampling) or more chains"
    return (
        "the MCMC fit did not converge: the draw may not come from the censored posterior, "
        "the premise of the DP guarantee "
        f"[CONFIDENTIAL figures from the confidential fit, do not publish: {figures}]: {advice}"
    )
