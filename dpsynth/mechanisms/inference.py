"""Inference from m synthetic datasets: Liu's Theorem 7 and the comparison rules of Section 5.2.

Notation (per set i = 1..m): estimate q_i, variance estimate v_i; q̄ = mean q_i,
w̄ = mean v_i (within-set variance), b = Σ (q_i - q̄)² / (m - 1) (between-set variance).

Rules (``rule=``):

- ``"thm7"``  (Liu, Theorem 7; = Reiter 2003): T = w̄ + b/m, t with ν = (m-1)(1 + m w̄/b)².
- ``"rubin"`` (Rubin 1987, multiple imputation): T = w̄ + (1 + 1/m) b,
  t with ν = (m-1)(1 + w̄/((1 + 1/m) b))².
- ``"raghunathan"`` (Raghunathan, Reiter and Rubin 2003, full synthesis): T = (1 + 1/m) b - w̄
  with a standard normal reference, as Liu's Section 5.2 states (the original paper proposes a t
  with ν = (m-1)(1 - m w̄/((m + 1) b))²). When T <= 0 (no valid interval) we fall back to
  T = w̄ (Reiter 2002's adjustment with synthetic size = n) and set ``fallback``; Liu's Table 1 is
  reproduced when such repetitions count as non-covering (see ``modips_studies``).
- ``"raab"`` (Raab, Nowok and Dibben 2017, "proper" full synthesis): T = (1 + 2/m) w̄, normal
  reference.
- ``"single"`` (one synthetic set analysed as if it were the original): T = v_1, normal reference.

Intervals are q̄ ± t_{ν, (1+level)/2} √T (normal quantile when ν = ∞, also used when b = 0).

Reading of the paper where the PDF text is ambiguous: Theorem 7(b) prints b with a 1/m factor,
but Appendix F says b is *approximated* for finite m and Section 4 says the rule coincides with
Reiter (2003), whose b has divisor m - 1 (unbiased); we use m - 1. Section 5.2's text labels the
Raab et al. rule "(1+2/m)b", but the same section says that rule ignores b and Raab et al. (2017)
give (1 + 2/m) ū for proper synthesis with a normal reference, which also matches Table 1's
pattern; we implement (1 + 2/m) w̄.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsynth.errors import InputError
from dpsynth.mechanisms.combining import (  # noqa: F401 - ESTIMANDS: inference's API too
    ESTIMANDS,
    RULES,
    CombineSettings,
    require_level,
)

if TYPE_CHECKING:  # pandas and scipy load where used
    import pandas as pd


@dataclass(frozen=True)
class CombinedEstimate:
    """Combined inference from m synthetic datasets (scalar estimand).

    ``df`` is ``inf`` for a normal reference. ``within`` = w̄, ``between`` = b (nan when m = 1).
    ``fallback`` is True when Raghunathan's T was <= 0 and T = w̄ was used instead.
    """

    rule: str
    m: int
    estimate: float
    variance: float
    df: float
    lower: float
    upper: float
    level: float
    within: float
    between: float
    fallback: bool = False

    @property
    def se(self) -> float:
        return float(np.sqrt(self.variance))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (infinite df -> None with ``reference: "normal"``; nan -> None)."""
        d = asdict(self)
        d["se"] = self.se
        d["reference"] = "normal" if np.isinf(self.df) else "t"
        for k, v in d.items():
            if isinstance(v, float) and not np.isfinite(v):
                d[k] = None
        return d


def _require_rule(rule: str) -> str:
    if rule not in RULES:
        raise InputError("rule", f"must be one of {', '.join(RULES)} (got {rule!r})")
    return rule


def _quantile(df: np.ndarray, level: float) -> np.ndarray:
    p = 0.5 + level / 2.0
    df = np.asarray(df, dtype=float)
    finite = np.isfinite(df) & (df > 0)
    from scipy import special, stats

    z = np.full(df.shape, stats.norm.ppf(p))
    if finite.any():
        z[finite] = special.stdtrit(df[finite], p)
    return z


def combine_arrays(
    estimates: np.ndarray,
    variances: np.ndarray,
    rule: str = "thm7",
    level: float = 0.95,
) -> dict[str, np.ndarray]:
    """Vectorized combination rule over leading axes: inputs shape (..., m); outputs shape (...).

    Returns arrays ``estimate, variance, df, lower, upper, within, between, fallback``. No check of
    values beyond shapes (used in simulations); see :func:`combine` for the checked scalar API.
    """
    _require_rule(rule)
    level = require_level(level)
    q = np.asarray(estimates, dtype=float)
    u = np.asarray(variances, dtype=float)
    if q.shape != u.shape or q.ndim == 0:
        raise InputError(
            "variances",
            f"must have the same shape as estimates ({q.shape} vs {u.shape})",
        )
    m = q.shape[-1]
    qbar = q.mean(axis=-1)
    wbar = u.mean(axis=-1)
    b = q.var(axis=-1, ddof=1) if m >= 2 else np.full(qbar.shape, np.nan)
    return combine_moments(qbar, wbar, b, m, rule, level)


def combine_moments(
    qbar: np.ndarray,
    wbar: np.ndarray,
    b: np.ndarray,
    m: int,
    rule: str = "thm7",
    level: float = 0.95,
) -> dict[str, np.ndarray]:
    """The rules from the summaries q̄, w̄, b (any common shape) of m sets; see :func:`combine_arrays`."""
    _require_rule(rule)
    level = require_level(level)
    qbar, wbar, b = (np.asarray(a, dtype=float) for a in (qbar, wbar, b))
    if rule == "single" and m != 1:
        raise InputError("rule", f"'single' combines exactly one synthetic set (got m = {m})")
    if rule in ("thm7", "rubin", "raghunathan") and m < 2:
        raise InputError("estimates", f"rule {rule!r} needs m >= 2 synthetic sets (got {m})")
    inf = np.full(qbar.shape, np.inf)
    fallback = np.zeros(qbar.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "thm7":
            total = wbar + b / m
            df = np.where(b > 0, (m - 1) * (1 + m * wbar / b) ** 2, inf)
        elif rule == "rubin":
            bm = (1 + 1 / m) * b
            total = wbar + bm
            df = np.where(b > 0, (m - 1) * (1 + wbar / bm) ** 2, inf)
        elif rule == "raghunathan":
            tf = (1 + 1 / m) * b - wbar
            ok = tf > 0
            total = np.where(ok, tf, wbar)
            fallback = ~ok
            df = inf
        elif rule == "raab":
            total = (1 + 2 / m) * wbar
            df = inf
        else:  # single
            total = wbar
            df = inf
    half = _quantile(df, level) * np.sqrt(total)
    return {
        "estimate": qbar,
        "variance": total,
        "df": df,
        "lower": qbar - half,
        "upper": qbar + half,
        "within": wbar,
        "between": b,
        "fallback": fallback,
    }


def combine(
    estimates: Iterable[float],
    variances: Iterable[float],
    rule: str = "thm7",
    level: float = 0.95,
) -> CombinedEstimate:
    """Combine m per-set estimates q_i and variances v_i into one inference (see module doc)."""
    q = np.asarray(list(estimates), dtype=float)
    u = np.asarray(list(variances), dtype=float)
    if q.ndim != 1 or q.size == 0:
        raise InputError("estimates", "need a non-empty 1-D sequence of estimates")
    if u.shape != q.shape:
        raise InputError("variances", f"need one variance per estimate ({u.size} vs {q.size})")
    if not np.all(np.isfinite(q)):
        raise InputError("estimates", "must be finite (got NaN or inf)")
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise InputError("variances", "must be finite and >= 0")
    r = combine_arrays(q, u, rule, level)
    return CombinedEstimate(
        rule=rule,
        m=int(q.size),
        level=float(level),
        fallback=bool(r.pop("fallback")),
        **{k: float(v) for k, v in r.items()},
    )


def analyze_each(
    datasets: Iterable[Any], analysis_fn: Callable[[Any], tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Apply ``analysis_fn(dataset) -> (estimate, variance)`` to each set; arrays (m,)."""
    est, var = [], []
    for i, d in enumerate(datasets, start=1):
        out = analysis_fn(d)
        try:
            e, v = (float(out[0]), float(out[1]))
        except (TypeError, ValueError, IndexError):
            raise InputError(
                "analysis_fn", f"must return (estimate, variance); set {i} gave {out!r}"
            ) from None
        if not (np.isfinite(e) and np.isfinite(v) and v >= 0):
            raise InputError(
                "analysis_fn",
                f"set {i}: need finite estimate and variance >= 0 (got {e}, {v})",
            )
        est.append(e)
        var.append(v)
    if not est:
        raise InputError("datasets", "need at least one synthetic dataset")
    return np.array(est), np.array(var)


def estimate_mean(values: np.ndarray) -> tuple[float, float]:
    """Sample mean and its variance estimate s²/n (s² with divisor n-1); needs n >= 2."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        raise InputError(
            "column", f"each synthetic set needs >= 2 values for a mean (got {v.size})"
        )
    return float(v.mean()), float(v.var(ddof=1) / v.size)


def estimate_proportion(values: np.ndarray) -> tuple[float, float]:
    """Sample proportion p̂ and its variance estimate p̂(1 - p̂)/n; values must be 0/1."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or not np.isin(v, (0.0, 1.0)).all():
        raise InputError("column", "a proportion needs non-empty 0/1 values")
    p = float(v.mean())
    return p, p * (1 - p) / v.size


def combine_frame(
    df: pd.DataFrame,
    column: str,
    estimand: str,
    rule: str = "thm7",
    set_column: str = "synthetic_set",
    level: float = 0.95,
) -> CombinedEstimate:
    """Per-set estimate/variance of ``column`` (``"mean"``/``"proportion"``), then :func:`combine`.

    The settings are a :class:`dpsynth.mechanisms.combining.CombineSettings`. Sets are the
    distinct values of ``set_column`` (sorted); without it the frame is one set, which only
    the rule ``"single"`` takes; a set column with missing values is refused.
    """
    CombineSettings(column, estimand, rule, set_column, level).validate()
    if column not in df.columns:
        raise InputError("column", f"column {column!r} not found (have {list(df.columns)})")
    if df.empty:
        raise InputError("column", "the synthetic data are empty")
    import pandas as pd

    values = pd.to_numeric(df[column], errors="coerce")
    if values.isna().any():
        raise InputError("column", f"column {column!r} has missing or non-numeric values")
    fn = estimate_mean if estimand == "mean" else estimate_proportion
    est, var = analyze_each(_sets(df, values, rule, set_column), fn)
    return combine(est, var, rule, level)


def _sets(df: pd.DataFrame, values: pd.Series, rule: str, set_column: str) -> list[np.ndarray]:
    """The values of each set: by ``set_column``, or one set when the frame has none (for
    the rule ``"single"`` only)."""
    if set_column not in df.columns:
        if rule != "single":
            raise InputError(
                "set_column",
                f"column {set_column!r} not found; rule {rule!r} needs m >= 2 sets "
                "(the rule 'single' takes one set)",
            )
        return [values.to_numpy()]
    if df[set_column].isna().any():
        raise InputError("set_column", f"column {set_column!r} has missing values")
    return [g.to_numpy() for _, g in values.groupby(df[set_column], sort=True)]
