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

The figures (per synthetic set, then the median over the m sets):

* mean error: |mean* - mean| / |mean| (for a ``real`` outcome, whose mean may be near 0,
  |mean* - mean| / sd);
* sd error: |sd* - sd| / sd;
* max-ECDF: the largest gap between the two empirical CDFs (:func:`dpsynth.utility.ecdf_measures`,
  censoring paper Section 4.3);
* quantiles 5, 25, 50, 75 and 95% (reported, judged through the max-ECDF);
* zero share (count outcomes): |share of zeros* - share of zeros|, in proportion points;
* with covariates: the interval overlap (Karr et al. 2006) of the coefficients of one
  analyst's regression fitted to the confidential and to each synthetic set (ordinary least
  squares of log y for positive outcomes, log(1 + y) for counts, y otherwise; 95% intervals).

Each figure is "good", "fair" or "poor" by its two thresholds; the verdict is the worst of them
(a figure that cannot be computed, e.g. a constant synthetic set's regression, counts as poor).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.utility import ecdf_measures

__all__ = [
    "FAIR_CI_OVERLAP",
    "FAIR_MAX_ECDF",
    "FAIR_MEAN_ERROR",
    "FAIR_SD_ERROR",
    "FAIR_ZERO_SHARE_ERROR",
    "GOOD_CI_OVERLAP",
    "GOOD_MAX_ECDF",
    "GOOD_MEAN_ERROR",
    "GOOD_SD_ERROR",
    "GOOD_ZERO_SHARE_ERROR",
    "MANY_CENSORED",
    "MANY_ZERO_WEIGHT",
    "OUTCOMES",
    "QUANTILES",
    "RULES",
    "SKEWED",
    "THRESHOLDS",
    "VERDICTS",
    "format_summary",
    "utility_verdict",
    "verdict_of_release",
]

OUTCOMES = ("unit", "count", "real", "positive")
VERDICTS = ("good", "fair", "poor")
QUANTILES = (0.05, 0.25, 0.50, 0.75, 0.95)

GOOD_MEAN_ERROR = 0.10
"""Mean error at most 10%: good (the goal of issue 19)."""
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
"""Median coefficient-interval overlap at least 0.5: good (1 = identical intervals)."""
FAIR_CI_OVERLAP = 0.25

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
}
"""figure -> (good threshold, fair threshold, direction). Boundary values count as the better
level: a mean error of exactly 0.10 is good."""

RULES: tuple[tuple[str, str], ...] = (
    (
        "censored",
        "{censored:.0%} of the records were censored: centre the censored likelihood at a "
        "public reference fit (centring = public parameter values from an earlier period, "
        "e.g. dpsynth.plan.reference_point of a public file), or use PH (mechanism ph) for a "
        "single outcome, or a larger epsilon",
    ),
    (
        "zero_weight",
        "{zero_weight:.0%} of the records got weight 0: try censor-uw (no weights) or a larger "
        "epsilon",
    ),
    (
        "beta_on_skewed",
        "the outcome is skewed (skewness {skewness:.1f}) and the beta model misses its mean: "
        "try the lognormal or gamma model (model lognormal / gamma, same bounds), centred at "
        "a public reference fit",
    ),
    (
        "ph_wide_bounds",
        "95% of the records lie in the lowest {span:.0%} of the public bounds, so most "
        "histogram bins are empty noise: tighten the public bounds or try a model-based "
        "mechanism (censor-uw with reference centring)",
    ),
    (
        "regression",
        "the coefficients are not preserved (interval overlap {ci_overlap:.2f}): try censor-w "
        "with reference weights, reference centring, or a larger epsilon",
    ),
    (
        "off",
        "the synthetic data miss the confidential distribution: try a larger epsilon, "
        "another model, or compare the mechanisms on a public reference file first "
        "(dpsynth.plan)",
    ),
    ("good", "the release meets every threshold: it can be published as it is"),
    (
        "good_not_dp",
        "the synthetic data meet every utility threshold, but the release has no DP "
        "guarantee ({guarantee}): do not publish it as a private release; for one, use a "
        "strict-DP mechanism (censor-uw, censor-w with reference weights, ph, sbs) without "
        "a seed",
    ),
)
"""Next-step rules, in order: (name, advice). Every rule that fires is listed; the first is
the next step. "censored": censored share >= MANY_CENSORED (censoring mechanisms);
"zero_weight": zero-weight share >= MANY_ZERO_WEIGHT; "beta_on_skewed": a beta model, skewness
> SKEWED and the mean error not good; "ph_wide_bounds": PH, the max-ECDF not good and the
95% quantile below a tenth of the public range; "regression": the CI overlap not good; "off":
the verdict is not good and no rule above fired; "good": the verdict is good (then it is the
next step, and any other rule that fired follows as a note); "good_not_dp": "good" for a release
without a DP guarantee (it never says the release can be published)."""

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
) -> dict[str, Any]:
    """Compare m synthetic sets with the confidential outcome; verdict and next step.

    ``confidential`` is the outcome (n,) and ``synthetic_sets`` the sets (m x N, or one set
    (N,)), both on the original scale. ``outcome`` is one of :data:`OUTCOMES`. ``X`` (n x p,
    public covariates, no intercept) adds the coefficient-interval overlap; it needs N = n
    (each synthetic outcome beside its record's covariates). ``n_censored`` and
    ``n_zero_weight`` (from the release's confidential diagnostics), ``n`` (default: the
    records of ``confidential``), ``mechanism``, ``model`` and public ``bounds`` feed the
    next-step rules. ``guarantee`` is the release's (the report's ``guarantee``): any but
    ``"DP"`` makes the summary start "NOT DP" and the good rule never say "publish" (None: a
    plan on public data, no release). Returns a JSON-able dict: ``verdict``, ``next_step``, ``next_steps``,
    ``reasons``, ``summary`` (medians over sets), ``levels`` (per figure), ``confidential``
    and ``synthetic`` (statistics), ``sets`` (per-set figures), ``shares``, ``thresholds``.
    """
    if outcome not in OUTCOMES:
        raise InputError("outcome", f"must be one of {', '.join(OUTCOMES)} (got {outcome!r})")
    y = _finite_1d("confidential", confidential)
    sets = _sets("synthetic_sets", synthetic_sets)
    n = y.size if n is None else int(n)
    design = None if X is None else _design(X, y.size, sets.shape[1])
    per_set = [_set_figures(y, s, outcome, design) for s in sets]
    figures = [k for k in THRESHOLDS if k in per_set[0]]
    summary = {k: float(np.median([row[k] for row in per_set])) for k in figures}
    levels = {k: _level(k, summary[k]) for k in figures}
    verdict = max(levels.values(), key=VERDICTS.index)
    shares = {
        "censored": None if n_censored is None else n_censored / max(n, 1),
        "zero_weight": None if n_zero_weight is None else n_zero_weight / max(n, 1),
    }
    context = {
        "mechanism": mechanism,
        "model": model,
        "skewness": float(stats.skew(y)) if y.size > 2 else 0.0,
        "span": _span(y, bounds),
        "guarantee": guarantee,
    }
    fired = _rules(verdict, levels, summary, shares, context)
    steps = [text.format(**_fill(summary, shares, context)) for _, text in fired]
    return {
        "verdict": verdict,
        "next_step": steps[0],
        "next_steps": steps,
        "rules": [name for name, _ in fired],
        "reasons": [f"{k} {summary[k]:.3g} is {levels[k]}" for k in figures if levels[k] != "good"],
        "summary": summary,
        "levels": levels,
        "confidential": _statistics(y, outcome),
        "synthetic": _statistics(sets.ravel(), outcome),
        "sets": per_set,
        "shares": shares,
        "m": int(sets.shape[0]),
        "n": n,
        "outcome": outcome,
        "mechanism": mechanism,
        "model": model,
        "guarantee": guarantee,
        "dp": None if guarantee is None else guarantee == "DP",
        "thresholds": {
            k: {"good": g, "fair": f, "direction": d} for k, (g, f, d) in THRESHOLDS.items()
        },
    }


def verdict_of_release(
    y: Any,
    release: Any,
    *,
    outcome: str,
    column: str = "y",
    X: Any = None,
    bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """:func:`utility_verdict` of a :class:`dpsynth.release.Release` of ``y``.

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
    lines = [
        *([not_dp] if not_dp else []),
        "CONFIDENTIAL (computed from the confidential data without noise; do not publish): "
        f"utility of {verdict['m']} synthetic set(s){' (' + what + ')' if what else ''}",
        f"  verdict: NOT DP (utility {level})" if not_dp else f"  verdict: {level}",
        f"  mean: data {conf['mean']:.4g}, synthetic {syn['mean']:.4g} "
        f"(error {summ['mean_error']:.1%}, {verdict['levels']['mean_error']})",
        f"  sd: data {conf['sd']:.4g}, synthetic {syn['sd']:.4g} "
        f"(error {summ['sd_error']:.1%}, {verdict['levels']['sd_error']})",
        f"  max-ECDF: {summ['max_ecdf']:.3f} ({verdict['levels']['max_ecdf']})",
        "  quantiles 5/25/50/75/95%: data "
        + " / ".join(f"{conf[_qname(q)]:.4g}" for q in QUANTILES)
        + "; synthetic "
        + " / ".join(f"{syn[_qname(q)]:.4g}" for q in QUANTILES),
    ]
    if "zero_share_error" in summ:
        lines.append(
            f"  zero share: data {conf['zero_share']:.3f}, synthetic {syn['zero_share']:.3f} "
            f"({verdict['levels']['zero_share_error']})"
        )
    if "ci_overlap" in summ:
        lines.append(
            f"  coefficient interval overlap: {summ['ci_overlap']:.2f} "
            f"({verdict['levels']['ci_overlap']})"
        )
    shares = verdict["shares"]
    for key, label in (("censored", "censored"), ("zero_weight", "with weight 0")):
        if shares.get(key) is not None:
            lines.append(f"  records {label}: {shares[key]:.1%}")
    lines.append(f"  next step: {verdict['next_step']}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures


def _qname(q: float) -> str:
    return f"q{round(q * 100):02d}"


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


def _statistics(x: np.ndarray, outcome: str) -> dict[str, float]:
    out = {"mean": float(np.mean(x)), "sd": float(np.std(x, ddof=1)) if x.size > 1 else 0.0}
    out.update({_qname(q): float(v) for q, v in zip(QUANTILES, np.quantile(x, QUANTILES))})
    if outcome == "count":
        out["zero_share"] = float(np.mean(x == 0))
    return out


def _set_figures(
    y: np.ndarray, syn: np.ndarray, outcome: str, design: np.ndarray | None
) -> dict[str, float]:
    conf, s = _statistics(y, outcome), _statistics(syn, outcome)
    scale = conf["sd"] if outcome == "real" else abs(conf["mean"])
    row = {
        "mean_error": _ratio(abs(s["mean"] - conf["mean"]), scale),
        "sd_error": _ratio(abs(s["sd"] - conf["sd"]), conf["sd"]),
        "max_ecdf": ecdf_measures(y, syn)["max_ecdf"],
        **{f"synthetic_{k}": v for k, v in s.items()},
    }
    if outcome == "count":
        row["zero_share_error"] = abs(s["zero_share"] - conf["zero_share"])
    if design is not None:
        row["ci_overlap"] = _ci_overlap(y, syn, design, outcome)
    return row


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


def _ols_intervals(z: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """95% intervals of the OLS coefficients of z on the design (None if not estimable)."""
    n, k = design.shape
    if n <= k:
        return None
    coef, *_ = np.linalg.lstsq(design, z, rcond=None)
    resid = z - design @ coef
    sigma2 = float(resid @ resid) / (n - k)
    cov = sigma2 * np.linalg.pinv(design.T @ design)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    if not np.all(se > 0):
        return None
    half = stats.t.ppf(0.975, n - k) * se
    return coef - half, coef + half


def _ci_overlap(y: np.ndarray, syn: np.ndarray, design: np.ndarray, outcome: str) -> float:
    """Mean Karr et al. (2006) overlap of the coefficient intervals (0 if not estimable)."""
    from dpsynth.utility import interval_overlap

    a = _ols_intervals(_analysis_scale(y, outcome), design)
    b = _ols_intervals(_analysis_scale(syn, outcome), design)
    if a is None or b is None:
        return 0.0
    return float(np.mean(interval_overlap(a[0], a[1], b[0], b[1])))


def _level(figure: str, value: float) -> str:
    good, fair, direction = THRESHOLDS[figure]
    if not np.isfinite(value):
        return "poor"
    if direction == "at most":
        return "good" if value <= good else "fair" if value <= fair else "poor"
    return "good" if value >= good else "fair" if value >= fair else "poor"


def _span(y: np.ndarray, bounds: tuple[float, float] | None) -> float | None:
    """Share of the public range below the data's 95% quantile (None without bounds)."""
    if bounds is None:
        return None
    lo, hi = (float(b) for b in bounds)
    if not hi > lo:
        raise InputError("bounds", "needs lo < hi")
    return float((np.quantile(y, 0.95) - lo) / (hi - lo))


# ----------------------------------------------------------------------------- rules


def _rules(
    verdict: str,
    levels: dict[str, str],
    summary: dict[str, float],
    shares: dict[str, float | None],
    context: dict[str, Any],
) -> list[tuple[str, str]]:
    mechanism, model = context["mechanism"] or "", context["model"] or ""
    fires = {
        "censored": (shares["censored"] or 0.0) >= MANY_CENSORED and mechanism.startswith("censor"),
        "zero_weight": (shares["zero_weight"] or 0.0) >= MANY_ZERO_WEIGHT,
        "beta_on_skewed": model.startswith("beta")
        and context["skewness"] > SKEWED
        and levels["mean_error"] != "good",
        "ph_wide_bounds": mechanism == "ph"
        and levels["max_ecdf"] != "good"
        and context["span"] is not None
        and context["span"] < _PH_SPAN,
        "regression": levels.get("ci_overlap", "good") != "good",
    }
    fired = [(name, text) for name, text in RULES if fires.get(name, False)]
    if verdict == "good":  # publishable if DP; anything else that fired is a note
        not_dp = context["guarantee"] not in (None, "DP")
        return [_rule("good_not_dp" if not_dp else "good"), *fired]
    return fired or [_rule("off")]


def _rule(name: str) -> tuple[str, str]:
    return next(rule for rule in RULES if rule[0] == name)


def _fill(
    summary: dict[str, float], shares: dict[str, float | None], context: dict[str, Any]
) -> dict[str, Any]:
    return {
        "censored": shares["censored"] or 0.0,
        "zero_weight": shares["zero_weight"] or 0.0,
        "skewness": context["skewness"],
        "span": context["span"] or 0.0,
        "ci_overlap": summary.get("ci_overlap", float("nan")),
        "guarantee": context["guarantee"],
    }
