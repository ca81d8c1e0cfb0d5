"""Utility measures of synthetic data and summaries over Monte Carlo replicates.

Global utility: the ECDF measures of Woo, Reiter, Oganian & Karr (2009) as used in the
censoring paper (Hu, Williams & Savitsky) section 4.3. Analysis-specific utility: mean,
median, 15th and 90th quantiles (censoring paper Table 2; vector-weighted paper section 3).
Replicate summaries: min, Q1, median, mean, Q3, max, sd (censoring paper Table 1) and
empirical 95% intervals (vector-weighted paper appendix Table 1). Pure numpy (pandas only
to lay out tables); nothing here knows about Stan.

Quantiles use numpy's default ("linear", Hyndman & Fan type 7), which is also R's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from dpsynth.errors import InputError
from dpsynth.mechanisms.histogram import CellCounts

__all__ = [
    "REPLICATE_COLUMNS",
    "count_quantiles",
    "ecdf_measures",
    "interval_summary",
    "interval_table",
    "replicate_summary",
    "replicate_table",
    "summary_statistics",
    "utility_table",
]

REPLICATE_COLUMNS: tuple[str, ...] = ("min", "q1", "median", "mean", "q3", "max", "sd")
"""Column order of the censoring paper's Table 1."""


def _as_1d(param: str, x: ArrayLike) -> np.ndarray:
    """Return ``x`` as a non-empty, finite, 1-d float array, else raise InputError(param)."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise InputError(param, f"must be one-dimensional (got shape {np.shape(x)})")
    if arr.size == 0:
        raise InputError(param, "must not be empty")
    if not np.all(np.isfinite(arr)):
        raise InputError(param, "must contain only finite values")
    return arr


def ecdf_measures(confidential: ArrayLike, synthetic: ArrayLike) -> dict[str, float]:
    """Global ECDF utility: max-ECDF and avg-ECDF between two univariate samples.

    Censoring paper section 4.3 (Woo et al. 2009). With pooled points z = (x, x*) of length
    n + n*, let F and F* be the ECDFs of the confidential (n,) and synthetic (n*,) samples;
    ``max_ecdf`` = max_j |F(z_j) - F*(z_j)| and ``avg_ecdf`` = mean_j (F(z_j) - F*(z_j))^2.
    Both are in [0, 1]; smaller means higher utility. Sample sizes may differ. Integer
    samples may be given as their :class:`~dpsynth.mechanisms.histogram.CellCounts` (both,
    on the same bounds): the same figures, from the counts.
    """
    if isinstance(confidential, CellCounts):
        return _count_ecdf(confidential, synthetic)
    x = np.sort(_as_1d("confidential", confidential))
    y = np.sort(_as_1d("synthetic", synthetic))
    pooled = np.concatenate([x, y])
    f_x = np.searchsorted(x, pooled, side="right") / x.size
    f_y = np.searchsorted(y, pooled, side="right") / y.size
    diff = f_x - f_y
    return {
        "max_ecdf": float(np.max(np.abs(diff))),
        "avg_ecdf": float(np.mean(diff**2)),
    }


def _count_ecdf(a: CellCounts, b: Any) -> dict[str, float]:
    """:func:`ecdf_measures` of two samples held as counts: the ECDFs differ only at the
    integers either sample takes, each pooled point weighing its records."""
    if not isinstance(b, CellCounts) or (a.lo, a.hi) != (b.lo, b.hi):
        raise InputError("synthetic", "must be counts on the confidential counts' bounds")
    if a.n == 0 or b.n == 0:
        raise InputError("confidential" if a.n == 0 else "synthetic", "must not be empty")
    diff = np.cumsum(a.counts) / a.n - np.cumsum(b.counts) / b.n
    pooled = a.counts + b.counts
    return {
        "max_ecdf": float(np.max(np.abs(diff[pooled > 0]))),
        "avg_ecdf": float(pooled @ diff**2 / (a.n + b.n)),
    }


def count_quantiles(c: CellCounts, q: ArrayLike) -> np.ndarray:
    """``np.quantile`` (its default, "linear") of the records ``c`` counts, from the counts:
    the order statistics each quantile interpolates found by the counts' running sum."""
    if c.n == 0:
        raise InputError("confidential", "must not be empty")
    scalar = np.ndim(q) == 0
    virtual = (c.n - 1) * np.atleast_1d(np.asarray(q, dtype=float))
    before = np.floor(virtual).astype(np.int64)
    after = np.minimum(before + 1, c.n - 1)
    ends = np.cumsum(c.counts)
    a = c.support[np.searchsorted(ends, before, side="right")]
    b = c.support[np.searchsorted(ends, after, side="right")]
    gamma = virtual - before
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out[0] if scalar else out


def summary_statistics(x: ArrayLike) -> dict[str, float]:
    """Analysis-specific utility statistics of one sample (n,): mean, median, q15, q90.

    Censoring paper Table 2 rows "Mean, Median, 15th Q, 90th Q"; quantiles are type 7.
    """
    arr = _as_1d("x", x)
    q15, median, q90 = np.quantile(arr, [0.15, 0.5, 0.90])
    return {
        "mean": float(np.mean(arr)),
        "median": float(median),
        "q15": float(q15),
        "q90": float(q90),
    }


def interval_summary(values: ArrayLike, level: float = 0.95) -> tuple[float, float]:
    """Empirical central interval (lower, upper) of ``values`` (R,) at coverage ``level``.

    The (1 - level)/2 and (1 + level)/2 quantiles (type 7), as in the vector-weighted paper's
    appendix Table 1 ("95% confidence interval" over Monte Carlo replicates).
    """
    arr = _as_1d("values", values)
    lv = float(level)
    if not 0 < lv < 1:
        raise InputError("level", f"must lie in (0, 1) (got {level!r})")
    lower, upper = np.quantile(arr, [(1 - lv) / 2, (1 + lv) / 2])
    return float(lower), float(upper)


def replicate_summary(values: ArrayLike) -> dict[str, float]:
    """Min, Q1, median, mean, Q3, max and sd (ddof=1, as R's ``sd``) of ``values`` (R,).

    The layout of the censoring paper's Table 1 (one row per synthesizer and epsilon). The sd
    of a single value is NaN.
    """
    arr = _as_1d("values", values)
    q1, med, q3 = np.quantile(arr, [0.25, 0.5, 0.75])
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else float("nan")
    return {
        "min": float(np.min(arr)),
        "q1": float(q1),
        "median": float(med),
        "mean": float(np.mean(arr)),
        "q3": float(q3),
        "max": float(np.max(arr)),
        "sd": sd,
    }


def replicate_table(groups: Mapping[str, ArrayLike] | pd.DataFrame) -> pd.DataFrame:
    """Table 1 layout: one row per group (e.g. synthesizer), columns ``REPLICATE_COLUMNS``.

    ``groups`` maps a row label to that group's replicate values (R,), or is a DataFrame whose
    columns are the groups (one row per replicate; NaNs are dropped per column).
    """
    items = (
        {c: groups[c].dropna().to_numpy() for c in groups.columns}
        if isinstance(groups, pd.DataFrame)
        else dict(groups)
    )
    rows = {str(k): replicate_summary(v) for k, v in items.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(REPLICATE_COLUMNS))


def interval_table(
    groups: Mapping[str, ArrayLike] | pd.DataFrame, level: float = 0.95
) -> pd.DataFrame:
    """Rows of (lower, upper) empirical intervals, one per group; see ``interval_summary``."""
    items = (
        {c: groups[c].dropna().to_numpy() for c in groups.columns}
        if isinstance(groups, pd.DataFrame)
        else dict(groups)
    )
    rows = {str(k): interval_summary(v, level) for k, v in items.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["lower", "upper"])


def utility_table(confidential: ArrayLike, synthetic: Mapping[str, ArrayLike]) -> pd.DataFrame:
    """Censoring paper Table 2 layout: rows max_ecdf, avg_ecdf, mean, median, q15, q90.

    Column "Data" holds the confidential sample's statistics (ECDF rows NaN); one further
    column per synthesizer in ``synthetic`` (name -> synthetic sample (n*,)).
    """
    rows = ["max_ecdf", "avg_ecdf", "mean", "median", "q15", "q90"]
    cols = {
        "Data": {
            "max_ecdf": np.nan,
            "avg_ecdf": np.nan,
            **summary_statistics(confidential),
        }
    }
    for name, values in synthetic.items():
        cols[str(name)] = {
            **ecdf_measures(confidential, values),
            **summary_statistics(values),
        }
    return pd.DataFrame(cols).loc[rows]


def interval_overlap(
    lo1: np.ndarray, hi1: np.ndarray, lo2: np.ndarray, hi2: np.ndarray
) -> np.ndarray:
    """Karr et al. (2006) interval overlap of two sets of intervals, clipped at 0 (disjoint).

    0.5 * (overlap / (hi1 - lo1) + overlap / (hi2 - lo2)), overlap = min(hi) - max(lo); 1 for
    identical intervals.
    """
    overlap = np.minimum(hi1, hi2) - np.maximum(lo1, lo2)
    value = 0.5 * (overlap / (hi1 - lo1) + overlap / (hi2 - lo2))
    return np.clip(value, 0.0, None)
