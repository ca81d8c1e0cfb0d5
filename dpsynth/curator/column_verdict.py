"""Feedback for the data curator: how useful is a release, and what to try next.

A DP label says nothing about utility: a release can be strict epsilon-DP and useless (issue
19: a beta model on skewed income, 2711 of 3000 records censored, the synthetic mean twice
the true one). :func:`utility_verdict` compares the synthetic sets with the confidential data
and returns the figures, a verdict ("good", "fair", "poor") decided by the thresholds below,
and a concrete next step chosen by fixed rules (:data:`RULES`); :func:`format_summary` prints
it for the curator's terminal.

Everything here is computed from the confidential data without noise: **it is not private**.
It is for the curator who holds the data, never for publication (the summary starts with
"CONFIDENTIAL").

The figures (per synthetic draw, then the median over the draws, with min and max):

* mean error: the relative error |mean* - mean| / |mean|; when the confidential mean is
  within :data:`MEAN_NEAR_ZERO` sds of 0, |mean* - mean| / sd, and the summary says so;
* sd error: |sd* - sd| / sd;
* max-ECDF: the largest gap between the two empirical CDFs (:func:`dpsynth.curator.utility.ecdf_measures`,
  censoring paper Section 4.3);
* quantiles 5, 25, 50, 75 and 95% (reported, judged through the max-ECDF);
* zero share (count outcomes): |share of zeros* - share of zeros|, in proportion points;
* with covariates, per coefficient of one analyst's regression fitted to the confidential
  and to each synthetic set (ordinary least squares of log y for positive outcomes,
  log(1 + y) for counts, y otherwise; 95% intervals): the interval overlap (Karr et al. 2006)
  and the shift (beta* - beta) / se in confidential standard errors. The figures judged are
  the WORST coefficient's (an effect lost while the others hold is not averaged away).

A release judges its published set(s) and :data:`EXTRA_DRAWS` extra synthetic draws that are
never published (one draw is one sample of a random figure). Each figure is "good", "fair" or
"poor" by its two thresholds; the verdict is the worst of them (a figure that cannot be
computed, e.g. a constant synthetic set's regression, counts as poor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from dpsynth.curator.utility import count_quantiles, ecdf_measures
from dpsynth.errors import EPSILON_SANITY_LIMIT, InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.histogram import CellCounts
from dpsynth.models.catalogue import OUTCOMES

__all__ = [
    "EXTRA_DRAWS",
    "FAIR_CI_OVERLAP",
    "FAIR_COEF_SHIFT",
    "FAIR_MAX_ECDF",
    "FAIR_MEAN_ERROR",
    "FAIR_SD_ERROR",
    "FAIR_ZERO_SHARE_ERROR",
    "GOOD_CI_OVERLAP",
    "GOOD_COEF_SHIFT",
    "GOOD_MAX_ECDF",
    "GOOD_MEAN_ERROR",
    "GOOD_SD_ERROR",
    "GOOD_ZERO_SHARE_ERROR",
    "MANY_CENSORED",
    "MANY_ZERO_WEIGHT",
    "MEAN_NEAR_ZERO",
    "MOVES",
    "QUANTILES",
    "RULES",
    "SKEWED",
    "THRESHOLDS",
    "VERDICTS",
    "format_summary",
    "utility_verdict",
    "verdict_of_release",
]

VERDICTS = ("good", "fair", "poor")
QUANTILES = (0.05, 0.25, 0.50, 0.75, 0.95)

GOOD_MEAN_ERROR = 0.10
"""Mean error at most 10%: good (the utility goal the curators set)."""
FAIR_MEAN_ERROR = 0.25
"""Mean error at most 25%: fair; above: poor."""
GOOD_SD_ERROR = 0.20
FAIR_SD_ERROR = 0.50
GOOD_MAX_ECDF = 0.10
"""Max-ECDF at most 0.10: good (the censoring paper's best releases at epsilon 5 are 0.03-0.1)."""
FAIR_MAX_ECDF = 0.20
GOOD_ZERO_SHARE_ERROR = 0.03
"""Zero share within 3 proportion points: good (count outcomes only)."""
FAIR_ZERO_SHARE_ERROR = 0.10
GOOD_CI_OVERLAP = 0.50
"""Interval overlap of the WORST coefficient at least 0.5: good (1 = identical intervals).
For two 95% intervals of equal width, overlap 0.5 means the centres differ by 1.96 standard
errors: the synthetic estimate lies at the edge of the confidential interval."""
FAIR_CI_OVERLAP = 0.25
"""Worst-coefficient overlap at least 0.25: fair (equal widths: a shift of 2.94 s.e.)."""
GOOD_COEF_SHIFT = 1.96
"""Worst |beta* - beta| / se (confidential s.e.) at most 1.96: good, the synthetic estimate
inside the confidential 95% interval; the same line as :data:`GOOD_CI_OVERLAP` for equal
widths, but it also sees a shift hidden by a wider synthetic interval."""
FAIR_COEF_SHIFT = 2.94
"""Worst shift at most 2.94 s.e.: fair (equal widths: overlap 0.25); above: poor. A lost
effect (0.269 -> 0.013 with s.e. 0.05, five s.e.) is poor."""
MEAN_NEAR_ZERO = 0.10
"""A confidential mean within a tenth of an sd of 0 makes the relative mean error explode:
then the mean error is |mean* - mean| / sd, and the summary says "sd-scaled"."""
EXTRA_DRAWS = 4
"""Extra confidential synthetic draws the release adds to its verdict (never published): a
verdict of one draw is one sample of a random figure (trial: PH at epsilon 3 said "good"
once, "fair" on five reruns)."""

MANY_CENSORED = 0.25
"""A quarter or more of the records censored (clamped at -M or M): the censored likelihood
has lost most of what those records say; the first rule of :data:`RULES` fires."""
MANY_ZERO_WEIGHT = 0.10
"""A tenth or more of the records with weight 0 (the weighted mechanisms)."""
SKEWED = 1.0
"""Sample skewness above 1: a skewed outcome (beta on it: try lognormal or gamma)."""

THRESHOLDS: dict[str, tuple[float, float, str]] = {
    "mean_error": (GOOD_MEAN_ERROR, FAIR_MEAN_ERROR, "at most"),
    "sd_error": (GOOD_SD_ERROR, FAIR_SD_ERROR, "at most"),
    "max_ecdf": (GOOD_MAX_ECDF, FAIR_MAX_ECDF, "at most"),
    "zero_share_error": (GOOD_ZERO_SHARE_ERROR, FAIR_ZERO_SHARE_ERROR, "at most"),
    "ci_overlap": (GOOD_CI_OVERLAP, FAIR_CI_OVERLAP, "at least"),
    "coef_shift": (GOOD_COEF_SHIFT, FAIR_COEF_SHIFT, "at most"),
}
"""figure -> (good threshold, fair threshold, direction). Boundary values count as the better
level: a mean error of exactly 0.10 is good."""

RULES: tuple[tuple[str, str], ...] = (
    ("censored", "{censored:.0%} of the records were censored"),
    ("zero_weight", "{zero_weight:.0%} of the records got weight 0"),
    (
        "beta_on_skewed",
        "the outcome is skewed (skewness {skewness:.1f}) and the beta model misses its mean",
    ),
    (
        "ph_wide_bounds",
        "95% of the records lie in the lowest {span:.0%} of the public bounds, so most "
        "histogram bins are empty noise",
    ),
    (
        "regression",
        "the coefficients are not preserved (worst coefficient: interval overlap "
        "{ci_overlap:.2f}, shifted {coef_shift:.1f} confidential standard errors)",
    ),
    ("off", "the synthetic data miss the confidential distribution"),
    ("good", "the release meets every threshold: it can be published as it is"),
    (
        "good_not_dp",
        "the synthetic data meet every utility threshold, but the release has no DP "
        "guarantee ({guarantee}): do not publish it as a private release; for one, use a "
        "strict-DP mechanism (censor-uw, censor-w with reference weights, ph, sbs) without "
        "a seed",
    ),
    (
        "good_large_epsilon",
        "the synthetic data meet every utility threshold, but epsilon {epsilon:g} is above "
        "the sanity limit ({epsilon_limit:g}): its guarantee protects almost nothing, so do "
        "not publish it as a private release; for one, release at a smaller epsilon",
    ),
)
"""Next-step rules, in order: (name, finding). Every rule that fires is listed; the first is
the next step, its finding followed by the moves of :data:`RULE_MOVES` that the run has not
already made. "censored": censored share >= MANY_CENSORED (censoring mechanisms);
"zero_weight": zero-weight share >= MANY_ZERO_WEIGHT; "beta_on_skewed": a beta model, skewness
> SKEWED and the mean error not good; "ph_wide_bounds": PH, the max-ECDF not good and the
95% quantile below a tenth of the public range; "regression": the worst coefficient's
overlap or shift not good; "off": the verdict is not good and no rule above fired; "good":
the verdict is good (then it is the next step, and any other rule that fired follows as a
note); "good_not_dp": "good" for a release without a DP guarantee (never "publish");
"good_large_epsilon": "good" for a DP release above the epsilon sanity limit (never
"publish" either)."""

WEIGHTED = registry.weighted_names()
"""Mechanisms whose weights cost utility (switching to censor-uw drops them)."""

MOVES: dict[str, str] = {
    "censor_uw": "censor-uw (no weights: the weights' cost to utility goes, the bound "
    "stays the same)",
    "centre_reference": "centre the censored likelihood at a public reference fit "
    "(centring_from), i.e. centring = dpsynth.release.plan.reference_point of a public file",
    "ph": "PH (mechanism ph), which fits no model to one outcome",
    "epsilon": "a larger epsilon",
    "model": "another model (model)",
    "lognormal_gamma": "the lognormal or gamma model (model lognormal / gamma, same bounds)",
    "tighten_bounds": "tighter public bounds (bounds)",
    "model_based": "a model-based mechanism (censor-uw, centred at a public reference fit)",
    "plan": "compare the mechanisms on a public reference file first (dpsynth.release.plan)",
}
"""Moves a next step may propose; :func:`_applies` drops those the run already made or
that do not apply to it (no centring for PH, no PH for a regression)."""

RULE_MOVES: dict[str, tuple[str, ...]] = {
    "censored": ("centre_reference", "censor_uw", "ph", "epsilon", "model"),
    "zero_weight": ("censor_uw", "epsilon"),
    "beta_on_skewed": ("lognormal_gamma", "centre_reference"),
    "ph_wide_bounds": ("tighten_bounds", "model_based"),
    "regression": ("censor_uw", "centre_reference", "epsilon", "model"),
    "off": ("censor_uw", "epsilon", "model", "ph", "plan"),
}
"""Each rule's moves, the one most likely to help its failing figure first."""

_PH_SPAN = 0.10


def utility_verdict(
    confidential: Any,
    synthetic_sets: Any,
    *,
    outcome: str,
    X: Any = None,
    n_censored: int | None = None,
    n_zero_weight: int | None = None,
    n: int | None = None,
    mechanism: str | None = None,
    model: str | None = None,
    bounds: tuple[float, float] | None = None,
    guarantee: str | None = None,
    centring: str | None = None,
    reference_weights: bool = False,
    n_published: int | None = None,
    extra_source: str | None = None,
    epsilon: float | None = None,
    coef_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Compare m synthetic sets with the confidential outcome; verdict and next step.

    ``confidential``: the outcome (n,), or integer records' :class:`CellCounts` (the same
    figures, from the counts); ``synthetic_sets``: m x N (or one set (N,)), original
    scale; ``outcome``: one of ``dpsynth.models.catalogue.OUTCOMES``. ``X`` (n x p, public covariates, no
    intercept; needs N = n) adds the per-coefficient interval overlap and shift, named by
    ``coef_names`` (one per column of ``X``; default ``x1 ... xp``).
    ``n_censored``, ``n_zero_weight`` (confidential diagnostics), ``n`` (default: the records
    of ``confidential``), ``mechanism``, ``model``, public ``bounds`` and the run's settings
    (``centring``: "none", "saturated" or "reference"; ``reference_weights``) feed the
    next-step rules, which never propose what the run already did. ``guarantee`` not "DP":
    the summary starts "NOT DP"; ``epsilon`` above the sanity limit: never "publish". The first ``n_published`` sets (default all) are published,
    the rest extra confidential draws (``extra_source``). Returns a JSON-able dict.
    """
    if outcome not in OUTCOMES:
        raise InputError("outcome", f"must be one of {', '.join(OUTCOMES)} (got {outcome!r})")
    y = _confidential(confidential, X)
    sets = _sets("synthetic_sets", synthetic_sets)
    n = _size(y) if n is None else int(n)
    design = None if X is None else _design(X, _size(y), sets.shape[1])
    held = [_held_as(y, s) for s in sets]  # a set at a time: counts, where y is held so
    per_set = [_set_figures(y, s, outcome, design, coef_names) for s in held]
    figures = [k for k in THRESHOLDS if k in per_set[0]]
    summary = {k: float(np.median([row[k] for row in per_set])) for k in figures}
    levels = {k: _level(k, summary[k]) for k in figures}
    verdict = max(levels.values(), key=VERDICTS.index)
    shares = _shares(n_censored, n_zero_weight, n)
    context = dict(
        mechanism=mechanism, model=model, skewness=_skewness(y) if _size(y) > 2 else 0.0,
        span=_span(y, bounds), guarantee=guarantee, centring=centring,
        reference_weights=reference_weights, regression=design is not None, epsilon=epsilon,
    )  # fmt: skip
    fired = _rules(verdict, levels, summary, shares, context)
    steps = [_advice(name, text, _fill(summary, shares, context), context) for name, text in fired]
    return {
        "verdict": verdict,
        "next_step": steps[0],
        "next_moves": [m for m in RULE_MOVES.get(fired[0][0], ()) if _applies(m, context)],
        "next_steps": steps,
        "rules": [name for name, _ in fired],
        "reasons": [f"{k} {summary[k]:.3g} is {levels[k]}" for k in figures if levels[k] != "good"],
        "summary": summary,
        "levels": levels,
        "spread": _spread(per_set, figures),
        "draws": _draws(sets.shape[0], n_published, extra_source),
        "mean_error_scale": per_set[0]["mean_error_scale"],
        "coefficients": _coefficients(per_set) if design is not None else None,
        "confidential": _statistics(y, outcome),
        "synthetic": _statistics(_pooled(held, sets), outcome),
        "sets": per_set,
        "shares": shares,
        "m": int(sets.shape[0] if n_published is None else n_published),
        "n": n,
        "outcome": outcome,
        "mechanism": mechanism,
        "model": model,
        "guarantee": guarantee,
        "dp": None if guarantee is None else guarantee == "DP",
        "thresholds": _thresholds(),
    }


def _shares(n_censored: int | None, n_zero_weight: int | None, n: int) -> dict[str, Any]:
    """Censored and zero-weight shares of the n records (None when not reported)."""
    return {
        "censored": None if n_censored is None else n_censored / max(n, 1),
        "zero_weight": None if n_zero_weight is None else n_zero_weight / max(n, 1),
    }


def _thresholds() -> dict[str, dict[str, Any]]:
    return {k: {"good": g, "fair": f, "direction": d} for k, (g, f, d) in THRESHOLDS.items()}


def _spread(per_set: list[dict[str, Any]], figures: list[str]) -> dict[str, dict[str, float]]:
    """min / median / max of each figure over the synthetic draws."""
    out = {}
    for k in figures:
        v = np.array([row[k] for row in per_set], dtype=float)
        out[k] = {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}
    return out


def _draws(total: int, n_published: int | None, extra_source: str | None) -> dict[str, Any]:
    """How many synthetic draws the verdict judged, how many are published."""
    published = total if n_published is None else int(n_published)
    if not 1 <= published <= total:
        raise InputError("n_published", f"must lie in 1..{total} (got {n_published!r})")
    return {
        "total": total,
        "published": published,
        "extra": total - published,
        "source": extra_source,
    }


def _coefficients(per_set: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per coefficient: median over draws of its interval overlap and its signed shift
    (beta* - beta) / se in confidential standard errors."""
    names = per_set[0]["coef_names"]
    over = np.median([row["coef_overlaps"] for row in per_set], axis=0)
    shift = np.median([row["coef_shifts"] for row in per_set], axis=0)
    return [
        {"coefficient": c, "overlap": float(o), "shift_se": float(z)}
        for c, o, z in zip(names, over, shift)
    ]


def verdict_of_release(
    y: Any,
    release: Any,
    *,
    outcome: str,
    column: str = "y",
    X: Any = None,
    bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """:func:`utility_verdict` of a :class:`dpsynth.release.single.Release` of ``y``.

    The sets come from ``release.data[column]`` (stored one after another), the censored and
    zero-weight counts from ``release.diagnostics``, mechanism and model from the report.
    """
    m = int(release.report.get("m", 1))
    values = release.data[column].to_numpy(dtype=float)
    diag = release.diagnostics
    return utility_verdict(
        y,
        values.reshape(m, -1),
        outcome=outcome,
        X=X,
        n_censored=diag.get("n_censored"),
        n_zero_weight=diag.get("n_zero_weight"),
        mechanism=release.report.get("mechanism"),
        model=release.report.get("model"),
        bounds=bounds,
    )


def with_convergence(verdict: dict[str, Any], note: str) -> dict[str, Any]:
    """The verdict of a release whose fit did not converge: poor, driven by the convergence
    ``note`` (:func:`dpsynth.engine.diagnostics.convergence_note`), its other figures kept."""
    out = dict(verdict)
    out["verdict"] = "poor"
    out["converged"] = False
    out["next_step"] = note
    out["next_steps"] = [note, *verdict.get("next_steps", [])]
    out["rules"] = ["convergence", *verdict.get("rules", [])]
    out["reasons"] = ["the MCMC fit did not converge", *verdict.get("reasons", [])]
    out["next_moves"] = []
    return out


def not_dp_line(guarantee: str | None) -> str | None:
    """The line that opens the terminal verdict of a release without a DP guarantee."""
    if guarantee in (None, "DP"):
        return None
    return (
        f"NOT DP: this release has no differential-privacy guarantee (guarantee: {guarantee}); "
        "do not publish it as a private release"
    )


def format_summary(verdict: dict[str, Any]) -> str:
    """A short summary for the curator's terminal (stderr): first word "NOT DP" for a release
    without a DP guarantee, else "CONFIDENTIAL"."""
    conf, syn, summ = verdict["confidential"], verdict["synthetic"], verdict["summary"]
    what = " ".join(str(v) for v in (verdict.get("mechanism"), verdict.get("model")) if v)
    not_dp = not_dp_line(verdict.get("guarantee"))
    level = verdict["verdict"].upper()
    levels = verdict["levels"]
    lines = [
        *([not_dp] if not_dp else []),
        "CONFIDENTIAL (computed from the confidential data without noise; do not publish): "
        f"utility of {verdict['m']} synthetic set(s){' (' + what + ')' if what else ''}",
        f"  verdict: NOT DP (utility {level})" if not_dp else f"  verdict: {level}",
        *_draws_lines(verdict),
        f"  mean: data {conf['mean']:.4g}, synthetic {syn['mean']:.4g} "
        f"({_mean_label(verdict)} {summ['mean_error']:.1%}{_range(verdict, 'mean_error', '.1%')}, "
        f"{levels['mean_error']})",
        f"  sd: data {conf['sd']:.4g}, synthetic {syn['sd']:.4g} "
        f"(relative error {summ['sd_error']:.1%}{_range(verdict, 'sd_error', '.1%')}, "
        f"{levels['sd_error']})",
        f"  max-ECDF: {summ['max_ecdf']:.3f}{_range(verdict, 'max_ecdf', '.3f')} "
        f"({levels['max_ecdf']})",
        "  quantiles 5/25/50/75/95%: data "
        + " / ".join(f"{conf[_qname(q)]:.4g}" for q in QUANTILES)
        + "; synthetic "
        + " / ".join(f"{syn[_qname(q)]:.4g}" for q in QUANTILES),
    ]
    if "zero_share_error" in summ:
        lines.append(
            f"  zero share: data {conf['zero_share']:.3f}, synthetic {syn['zero_share']:.3f} "
            f"({levels['zero_share_error']})"
        )
    lines += _coefficient_lines(verdict)
    shares = verdict["shares"]
    for key, label in (("censored", "censored"), ("zero_weight", "with weight 0")):
        if shares.get(key) is not None:
            lines.append(f"  records {label}: {shares[key]:.1%}")
    lines.append(f"  next step: {verdict['next_step']}")
    return "\n".join(lines)


def _mean_label(verdict: dict[str, Any]) -> str:
    if verdict.get("mean_error_scale") == "sd":
        return "error in sds (confidential mean near 0, so sd-scaled, not relative)"
    return "relative error"


def _range(verdict: dict[str, Any], figure: str, fmt: str) -> str:
    """ " [min-max over K draws]" when the verdict judged more than one draw."""
    spread, draws = verdict.get("spread", {}).get(figure), verdict.get("draws") or {}
    if not spread or draws.get("total", 1) < 2:
        return ""
    return f" [min {spread['min']:{fmt}}, max {spread['max']:{fmt}}]"


def _draws_lines(verdict: dict[str, Any]) -> list[str]:
    draws = verdict.get("draws") or {}
    if draws.get("total", 1) < 2:
        return ["  figures of one synthetic draw (a random figure: another draw may differ)"]
    line = f"  figures: median over {draws['total']} synthetic draws [min, max]"
    if draws.get("extra"):
        line += (
            f"; {draws['published']} published, {draws['extra']} extra draws NOT published "
            f"({draws.get('source') or 'confidential'}), used only for this verdict"
        )
    return [line]


def _coefficient_lines(verdict: dict[str, Any]) -> list[str]:
    """The regression figures: the worst coefficient's, then one line per coefficient."""
    summ, levels = verdict["summary"], verdict["levels"]
    if "ci_overlap" not in summ:
        return []
    lines = [
        f"  regression, worst coefficient: interval overlap {summ['ci_overlap']:.2f} "
        f"({levels['ci_overlap']}), shift {summ['coef_shift']:.2f} confidential s.e. "
        f"({levels['coef_shift']})"
    ]
    for c in verdict.get("coefficients") or []:
        lines.append(
            f"    {c['coefficient']}: overlap {c['overlap']:.2f}, "
            f"(beta* - beta) / se {c['shift_se']:+.2f}"
        )
    return lines


# ----------------------------------------------------------------------------- figures


def _qname(q: float) -> str:
    return f"q{round(q * 100):02d}"


Records = np.ndarray | CellCounts
"""A sample as the verdict reads it: its values, or integer ones' counts."""


def _confidential(confidential: Any, X: Any) -> Records:
    """The confidential outcome: finite values, or integer ones held as their counts (no
    regression: its design needs the records)."""
    if not isinstance(confidential, CellCounts):
        return _finite_1d("confidential", confidential)
    if X is not None:
        raise InputError("X", "a regression's figures need the records, not their counts")
    if confidential.n == 0:
        raise InputError("confidential", "must not be empty")
    return confidential


def _held_as(y: Records, s: np.ndarray) -> Records:
    """Synthetic values held as the confidential ones are: as they are, or counted on the
    counts' bounds."""
    return y.alike(s) if isinstance(y, CellCounts) else s


def _pooled(held: list[Records], sets: np.ndarray) -> Records:
    """Every set's values as one sample: the sets' counts added, or their values."""
    if isinstance(held[0], CellCounts):
        return CellCounts(held[0].lo, np.sum([h.counts for h in held], axis=0))
    return sets.ravel()


def _size(y: Records) -> int:
    return y.n if isinstance(y, CellCounts) else int(y.size)


def _skewness(y: Records) -> float:
    """The sample skewness (``scipy.stats.skew``, biased), from the counts where held so."""
    if not isinstance(y, CellCounts):
        return float(stats.skew(y))
    d = y.support - y.counts @ y.support / y.n
    m2, m3 = y.counts @ d**2 / y.n, y.counts @ d**3 / y.n
    return float(m3 / m2**1.5) if m2 > 0 else float("nan")


def _finite_1d(param: str, x: Any) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError):
        raise InputError(param, "must be numeric") from None
    if arr.size == 0:
        raise InputError(param, "must not be empty")
    if not np.all(np.isfinite(arr)):
        raise InputError(param, "must contain only finite values")
    return arr


def _sets(param: str, x: Any) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InputError(param, "must be numeric") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.size == 0:
        raise InputError(param, f"must be one set (N,) or m sets (m, N) (got shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise InputError(param, "must contain only finite values")
    return arr


def _design(X: Any, n: int, n_syn: int) -> np.ndarray:
    arr = np.asarray(X, dtype=float)
    arr = arr[:, None] if arr.ndim == 1 else arr
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InputError("X", f"needs one row per confidential record ({n})")
    if n_syn != n:
        raise InputError("X", "the synthetic sets must have one record per row of X")
    if not np.all(np.isfinite(arr)):
        raise InputError("X", "must contain only finite values")
    return np.column_stack([np.ones(n), arr])


def _statistics(x: Records, outcome: str) -> dict[str, float]:
    if isinstance(x, CellCounts):
        return _count_statistics(x, outcome)
    out = {"mean": float(np.mean(x)), "sd": float(np.std(x, ddof=1)) if x.size > 1 else 0.0}
    out.update({_qname(q): float(v) for q, v in zip(QUANTILES, np.quantile(x, QUANTILES))})
    if outcome == "count":
        out["zero_share"] = float(np.mean(x == 0))
    return out


def _count_statistics(c: CellCounts, outcome: str) -> dict[str, float]:
    """:func:`_statistics` of the records ``c`` counts, from the counts."""
    v, w, n = c.support, c.counts, c.n
    mean = float(w @ v / n)
    out = {"mean": mean, "sd": float(np.sqrt(w @ (v - mean) ** 2 / (n - 1))) if n > 1 else 0.0}
    out.update({_qname(q): float(x) for q, x in zip(QUANTILES, count_quantiles(c, QUANTILES))})
    if outcome == "count":
        out["zero_share"] = float(w[v == 0].sum() / n)
    return out


def _set_figures(
    y: Records,
    syn: Records,
    outcome: str,
    design: np.ndarray | None,
    coef_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One synthetic set's figures; regression ones are those of the worst coefficient."""
    conf, s = _statistics(y, outcome), _statistics(syn, outcome)
    near_zero = abs(conf["mean"]) < MEAN_NEAR_ZERO * conf["sd"]
    scale = conf["sd"] if near_zero else abs(conf["mean"])
    row: dict[str, Any] = {
        "mean_error": _ratio(abs(s["mean"] - conf["mean"]), scale),
        "mean_error_scale": "sd" if near_zero else "relative",
        "sd_error": _ratio(abs(s["sd"] - conf["sd"]), conf["sd"]),
        "max_ecdf": ecdf_measures(y, syn)["max_ecdf"],
        **{f"synthetic_{k}": v for k, v in s.items()},
    }
    if outcome == "count":
        row["zero_share_error"] = abs(s["zero_share"] - conf["zero_share"])
    if design is not None:
        overlaps, shifts = _coef_figures(y, syn, design, outcome)
        row.update(
            ci_overlap=float(np.min(overlaps)),
            coef_shift=float(np.max(np.abs(shifts))),
            coef_overlaps=overlaps.tolist(),
            coef_shifts=shifts.tolist(),
            coef_names=_coef_names(design.shape[1] - 1, coef_names),
        )
    return row


def _coef_names(p: int, names: Sequence[str] | None) -> list[str]:
    """``intercept`` and one name per covariate column (``x1 ... xp`` unless given)."""
    if names is not None and len(names) != p:
        raise InputError("coef_names", f"needs one name per column of X ({p}), got {len(names)}")
    return ["intercept", *(names if names is not None else (f"x{j}" for j in range(1, p + 1)))]


def _ratio(num: float, den: float) -> float:
    if den > 0:
        return float(num / den)
    return 0.0 if num == 0 else float("inf")


def _analysis_scale(y: np.ndarray, outcome: str) -> np.ndarray:
    """The analyst's regression outcome: log y (positive), log(1 + y) (count), else y."""
    if outcome == "positive":
        return np.log(np.maximum(y, np.min(y[y > 0]) if np.any(y > 0) else 1.0))
    if outcome == "count":
        return np.log1p(np.maximum(y, 0))
    return y


def _ols(z: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """OLS coefficients of z on the design, their standard errors and the t quantile of a
    95% interval (None if not estimable): :func:`ols_from_r` of their R factor."""
    n, k = design.shape
    if n <= k:
        return None
    return ols_from_r(np.linalg.qr(np.column_stack([design, z]), mode="r"), n)


def ols_from_r(r: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, float] | None:
    """OLS of the last column on the others from the R factor ``r`` of [design, z] over
    ``n`` records (R^T R = [X z]^T [X z], so a table's R updates a partition at a time):
    coefficients (least squares, the smallest if not unique), classical standard errors
    sqrt(diag(sigma^2 pinv(X^T X))) and the 95% t quantile; None if not estimable."""
    k = r.shape[1] - 1
    if n <= k:
        return None
    r_x, r_z = r[:k, :k], r[:k, k]
    r_zz = float(r[k, k]) if r.shape[0] > k else 0.0
    coef, *_ = np.linalg.lstsq(r_x, r_z, rcond=None)
    rss = r_zz**2 + float(np.sum((r_z - r_x @ coef) ** 2))
    cov = rss / (n - k) * np.linalg.pinv(r_x.T @ r_x)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    if not np.all(se > 0):
        return None
    return coef, se, float(stats.t.ppf(0.975, n - k))


def _coef_figures(
    y: np.ndarray, syn: np.ndarray, design: np.ndarray, outcome: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per coefficient: Karr et al. (2006) interval overlap and (beta* - beta) / se_conf
    (overlap 0 and shift inf when either fit is not estimable). Arrays of length p + 1."""
    from dpsynth.curator.utility import interval_overlap

    a = _ols(_analysis_scale(y, outcome), design)
    b = _ols(_analysis_scale(syn, outcome), design)
    if a is None or b is None:
        k = design.shape[1]
        return np.zeros(k), np.full(k, np.inf)
    (ca, sa, ta), (cb, sb, tb) = a, b
    overlap = interval_overlap(ca - ta * sa, ca + ta * sa, cb - tb * sb, cb + tb * sb)
    return np.asarray(overlap, dtype=float), (cb - ca) / sa


def _level(figure: str, value: float) -> str:
    return level_by(THRESHOLDS, figure, value)


def level_by(thresholds: dict[str, tuple[float, float, str]], figure: str, value: float) -> str:
    """good / fair / poor of one figure by ``thresholds`` (figure -> good, fair, direction;
    boundary values count as the better level; not finite: poor)."""
    good, fair, direction = thresholds[figure]
    if not np.isfinite(value):
        return "poor"
    if direction == "at most":
        return "good" if value <= good else "fair" if value <= fair else "poor"
    return "good" if value >= good else "fair" if value >= fair else "poor"


def _span(y: Records, bounds: tuple[float, float] | None) -> float | None:
    """Share of the public range below the data's 95% quantile (None without bounds)."""
    if bounds is None:
        return None
    lo, hi = (float(b) for b in bounds)
    if not hi > lo:
        raise InputError("bounds", "needs lo < hi")
    q95 = count_quantiles(y, 0.95) if isinstance(y, CellCounts) else np.quantile(y, 0.95)
    return float((q95 - lo) / (hi - lo))


# ----------------------------------------------------------------------------- rules


def _rules(
    verdict: str,
    levels: dict[str, str],
    summary: dict[str, float],
    shares: dict[str, float | None],
    context: dict[str, Any],
) -> list[tuple[str, str]]:
    """The rules of :data:`RULES` that fire, in order (see its docstring)."""
    mechanism, model = context["mechanism"] or "", context["model"] or ""
    fires = {
        "censored": (shares["censored"] or 0.0) >= MANY_CENSORED and registry.censored(mechanism),
        "zero_weight": (shares["zero_weight"] or 0.0) >= MANY_ZERO_WEIGHT,
        "beta_on_skewed": model.startswith("beta")
        and context["skewness"] > SKEWED
        and levels["mean_error"] != "good",
        "ph_wide_bounds": registry.histogram(mechanism)
        and levels["max_ecdf"] != "good"
        and context["span"] is not None
        and context["span"] < _PH_SPAN,
        "regression": levels.get("ci_overlap", "good") != "good"
        or levels.get("coef_shift", "good") != "good",
    }
    fired = [(name, text) for name, text in RULES if fires.get(name, False)]
    if verdict == "good":  # publishable if DP; anything else that fired is a note
        not_dp = context["guarantee"] not in (None, "DP")
        eps = context.get("epsilon")
        large = eps is not None and eps > EPSILON_SANITY_LIMIT
        name = "good_not_dp" if not_dp else "good_large_epsilon" if large else "good"
        return [_rule(name), *fired]
    return fired or [_rule("off")]


def _rule(name: str) -> tuple[str, str]:
    return next(rule for rule in RULES if rule[0] == name)


def _applies(move: str, context: dict[str, Any]) -> bool:
    """Whether a move of :data:`MOVES` is new to the run and possible for it."""
    mechanism = context["mechanism"] or ""
    censoring = registry.censored(mechanism)
    checks = {
        "censor_uw": mechanism in WEIGHTED,
        "centre_reference": censoring and context["centring"] != "reference",
        "ph": not registry.histogram(mechanism) and not context["regression"],
        "model": bool(mechanism) and not registry.model_free(mechanism),
        "lognormal_gamma": (context["model"] or "").startswith("beta"),
        "tighten_bounds": registry.model_free(mechanism),
        "model_based": registry.model_free(mechanism),
    }
    return checks.get(move, True)


def _advice(name: str, text: str, fill: dict[str, Any], context: dict[str, Any]) -> str:
    """A rule's finding and the moves of :data:`RULE_MOVES` the run has not made yet."""
    finding = text.format(**fill)
    moves = [MOVES[m] for m in RULE_MOVES.get(name, ()) if _applies(m, context)]
    if not moves:
        return finding
    tail = moves[0] if len(moves) == 1 else "; ".join(moves[:-1]) + "; or " + moves[-1]
    return f"{finding}: try {tail}"


def _fill(
    summary: dict[str, float], shares: dict[str, float | None], context: dict[str, Any]
) -> dict[str, Any]:
    return {
        "censored": shares["censored"] or 0.0,
        "zero_weight": shares["zero_weight"] or 0.0,
        "skewness": context["skewness"],
        "span": context["span"] or 0.0,
        "ci_overlap": summary.get("ci_overlap", float("nan")),
        "coef_shift": summary.get("coef_shift", float("nan")),
        "guarantee": context["guarantee"],
        "epsilon": context.get("epsilon") or 0.0,
        "epsilon_limit": EPSILON_SANITY_LIMIT,
    }
