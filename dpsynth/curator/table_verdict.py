"""The curator's verdict on a whole synthetic table: figures, label, next step.

Pure functions of two tables, the confidential table and one synthetic table, each as a pandas
frame or as its sums added a partition at a time (:class:`TableSums`: every ``*_of``
function reads those), and the **public** description of each column
(:class:`ColumnInfo`: its type, public bounds or public levels). Every bin is cut from public
bounds or public levels, never from the data. Like :mod:`dpsynth.curator.column_verdict`,
everything here is computed from the confidential data without noise: **it is not private**,
it is for the curator who holds the data, never for publication.

The figures:

* per column (:func:`column_figures`): the one-way total variation distance (TVD) on the
  column's public bins or levels; for continuous and count columns also the max-ECDF
  distance (:func:`dpsynth.curator.utility.ecdf_measures`, censoring paper Section 4.3; beyond
  :data:`PMSE_RECORDS` records, on the tables' subsamples) and the relative mean error (as :mod:`dpsynth.curator.column_verdict` defines it);
* every two-way marginal's TVD on the public bins (:func:`two_way_tvd`);
* the largest absolute difference between the two Pearson correlation matrices of the
  numeric columns (continuous, count, binary; :func:`correlation_difference`);
* pMSE and its standardized ratio pMSE / E[pMSE] (Snoke, Raab, Nowok, Dibben & Slavkovic
  2018, "General and specific utility measures for synthetic data", JRSS A 181) with a
  logistic propensity model fitted by scikit-learn on the one-hot public bins (main effects
  and, by default, all two-way interactions): E[pMSE] = (k - 1) c (1 - c) / N for k
  parameters, c the synthetic share of the N stacked records (:func:`pmse`, which says why
  this is not the paper's printed (k - 1)(1 - c)^2 c / N);
* where an analysis is named (``"y ~ x1 + x2"``), each coefficient's 95% interval overlap
  (Karr, Kohnen, Oganian, Reiter & Sanil 2006) between the ordinary least squares fits to the
  two tables (:func:`coefficient_overlap`).

:func:`table_verdict` labels each judged figure good / fair / poor by the named thresholds
below; the table's verdict is the WORST, and names the figure and the column(s) that drove
it, with one next step.
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from threadpoolctl import threadpool_limits

from dpsynth import formats
from dpsynth.curator import column_verdict
from dpsynth.curator.column_verdict import MEAN_NEAR_ZERO
from dpsynth.curator.utility import ecdf_measures, interval_overlap
from dpsynth.errors import InputError, from_data
from dpsynth.mechanisms import registry

VERDICTS = ("good", "fair", "poor")

DEFAULT_BINS = 10
"""Equal-width bins over a continuous column's public bounds: ten bins resolve a marginal to
a tenth of its range while keeping the 100 cells of a two-way marginal well filled at the
sizes of a statistical agency's file (thousands of records)."""

GOOD_ONE_WAY_TVD = 0.05
"""One-way TVD at most 0.05: good. TVD is the largest difference in the probability of any
event on the public bins; 5 points is below what a reader of a published frequency table
would call a different distribution."""
FAIR_ONE_WAY_TVD = 0.10
"""One-way TVD at most 0.10: fair; above, some range of the column holds a tenth of the
records more or less than it should: poor."""
GOOD_TWO_WAY_TVD = 0.10
"""Two-way TVD at most 0.10: good. A two-way marginal spreads the records over many more
cells than a one-way one, so sampling noise alone is larger (twice the one-way line)."""
FAIR_TWO_WAY_TVD = 0.20
"""Two-way TVD at most 0.20: fair; above, a fifth of the probability of the pair sits in the
wrong cells: the pair's dependence is lost or invented (poor)."""
GOOD_CORRELATION_DIFFERENCE = 0.10
"""Largest |r* - r| at most 0.10: good. 0.1 is a "small" correlation (Cohen 1988), so no
pair can move from no association to a small one, or from small to moderate."""
FAIR_CORRELATION_DIFFERENCE = 0.20
"""Largest |r* - r| at most 0.20: fair; above, an association of moderate size is lost or
invented (poor)."""
GOOD_PMSE_RATIO = 3.0
"""pMSE ratio at most 3: good. Ratio 1 is the null expectation, a propensity model that
finds nothing beyond chance (Snoke et al. 2018); up to three times what chance gives it
means the two tables are hard to tell apart."""
FAIR_PMSE_RATIO = 10.0
"""pMSE ratio at most 10: fair; above, the propensity model tells the tables apart an order
of magnitude better than chance (poor). The ratio grows with N for a fixed difference, so
a large table is judged more strictly: that is the figure's design."""

PMSE_MAX_ITER = 300
"""Iterations of the propensity model's L-BFGS fit. Where a cell holds records of one table
only (perfect separation) the unpenalized maximum is at infinity and L-BFGS stops here with
its propensities near 0 or 1, the limit the pMSE needs; the entry then says
``converged: False``."""

PMSE_GROUPS = 11
"""Cells of one column in the propensity model's interactions: a column of more cells (its public
levels or bins and the missing cell) enters each product as its cells merged, in order, into
this many groups of consecutive cells (positions only, never values); its main effect keeps every
cell. Eleven leaves a column of ten public bins or levels and its missing cell whole. Without
the merge a table's product of a 60-level and a 31-level column alone held 1,860 parameters,
and the rank of a design of 18,000 took most of the time and memory of a 12-column release (the
book's scaling page)."""
PMSE_PARAMETERS = 7_000
"""The most columns the propensity design may have (main effects and products, before the
empty ones are dropped): a wider table's products merge each column's cells into fewer groups
than :data:`PMSE_GROUPS` (:func:`interaction_groups`, from the columns' public cells alone),
down to two. The design's rank is a dense eigendecomposition, cubic in its columns, so that a
table of some twenty columns of ten levels could not be judged within a release's time and
memory, nor one of fifty at all (the book's scaling page). This bound leaves a table of twelve
columns of ten levels or bins each, and every table of the scale benchmark, as it was."""
PMSE_RECORDS = 200_000
"""Records of each table the propensity model reads: a larger table is judged on a random
subsample of this many of its records (positions drawn with a fixed seed, from the two tables'
sizes only). Up to it, the ratio grows with N for a fixed difference (a large table is judged
more strictly); beyond, N stays at twice this."""

THRESHOLDS: dict[str, tuple[float, float, str]] = {
    "one_way_tvd": (GOOD_ONE_WAY_TVD, FAIR_ONE_WAY_TVD, "at most"),
    "max_ecdf": column_verdict.THRESHOLDS["max_ecdf"],
    "mean_error": column_verdict.THRESHOLDS["mean_error"],
    "two_way_tvd": (GOOD_TWO_WAY_TVD, FAIR_TWO_WAY_TVD, "at most"),
    "correlation_difference": (GOOD_CORRELATION_DIFFERENCE, FAIR_CORRELATION_DIFFERENCE, "at most"),
    "pmse_ratio": (GOOD_PMSE_RATIO, FAIR_PMSE_RATIO, "at most"),
    "ci_overlap": column_verdict.THRESHOLDS["ci_overlap"],
}
"""figure -> (good threshold, fair threshold, direction); the max-ECDF, mean-error and
interval-overlap lines are :mod:`dpsynth.curator.column_verdict`'s (one place for each). Boundary values
count as the better level."""


@dataclass(frozen=True)
class ColumnInfo:
    """The public description of one column: its name, type (:data:`dpsynth.mechanisms.registry.COLUMN_TYPES`), public
    ``bounds`` (continuous and count columns) or public ``levels`` (categorical; binary
    columns default to 0 and 1), ``bins`` (equal-width bins over the bounds), and whether it
    is ``public`` (copied, not synthesized)."""

    name: str
    kind: str
    bounds: tuple[float, float] | None = None
    levels: tuple[Any, ...] | None = None
    bins: int = DEFAULT_BINS
    public: bool = False
    mechanism: str | None = None  # how a synthesized column was made (for the next step)
    given: tuple[str, ...] | None = None  # a PH column's parents (for the next step)
    calibrated: bool = False  # a PH column given parents with calibrate_share (next step)
    fit_records: int | None = None  # a model column fitted to a subsample this big (next step)

    def __post_init__(self) -> None:
        if self.kind not in registry.COLUMN_TYPES:
            types = ", ".join(registry.COLUMN_TYPES)
            raise InputError("columns", f"{self.name!r}: type must be one of {types}")
        if self.kind in ("continuous", "count"):
            if self.bounds is None or not float(self.bounds[0]) < float(self.bounds[1]):
                raise InputError("columns", f"{self.name!r}: needs public bounds lo < hi")
        if self.kind == "categorical" and (self.levels is None or len(self.levels) < 2):
            raise InputError("columns", f"{self.name!r}: needs at least two public levels")
        if isinstance(self.bins, bool) or int(self.bins) < 1:
            raise InputError("columns", f"{self.name!r}: bins must be a positive integer")

    @property
    def public_levels(self) -> tuple[Any, ...] | None:
        """The public levels of a binary (default 0, 1) or categorical column, else None."""
        if self.kind == "binary":
            return self.levels if self.levels is not None else (0, 1)
        return self.levels if self.kind == "categorical" else None


def describe(columns: Sequence[ColumnInfo] | Mapping[str, Mapping[str, Any]]) -> list[ColumnInfo]:
    """Column descriptions from :class:`ColumnInfo` objects or a mapping name -> {"type",
    "bounds", "levels", "bins", "public", ...} (the table spec's public part; the other keys
    are :class:`ColumnInfo`'s fields)."""
    if isinstance(columns, Mapping):
        out = []
        for name, d in columns.items():
            levels = d.get("levels")
            out.append(
                ColumnInfo(
                    str(name),
                    d.get("type", d.get("kind", "")),
                    None if d.get("bounds") is None else tuple(d["bounds"]),
                    None if levels is None else tuple(levels),
                    int(d.get("bins", DEFAULT_BINS)),
                    bool(d.get("public", False)),
                    d.get("mechanism"),
                    None if d.get("given") is None else tuple(d["given"]),
                    bool(d.get("calibrated", False)),
                    d.get("fit_records"),
                )
            )
        return out
    return [c if isinstance(c, ColumnInfo) else ColumnInfo(**c) for c in columns]


# ----------------------------------------------------------------------------- public bins


def n_cells(col: ColumnInfo) -> int:
    """How many public bins or levels the column has."""
    levels = col.public_levels
    if levels is not None:
        return len(levels)
    if col.kind == "count":
        lo, hi = col.bounds
        return min(col.bins, int(np.floor(hi) - np.ceil(lo)) + 1)
    return col.bins


def cells(col: ColumnInfo) -> int:
    """The column's public bins or levels plus one cell for missing values (the last)."""
    return n_cells(col) + 1


def public_bins(
    col: ColumnInfo, values: Any, param: str = "confidential", first: int = 1
) -> np.ndarray:
    """Codes 0..cells-1 of ``values`` on the column's public bins or levels; a missing value
    (None, NaN) gets the last code, ``n_cells(col)`` (missing values are
    part of a table, kept or synthesized).

    Continuous and count: equal-width bins over the public bounds (values outside them in
    the edge bins; a count with fewer integers in its bounds than bins gets one bin each).
    Binary and categorical: the position of the value among the public levels; a value
    that is not a public level is refused naming ``param``, the column and the record's
    position (never the value; ``first``: the position of ``values[0]`` in its table).
    """
    levels = col.public_levels
    s = pd.Series(np.asarray(values, dtype=object))
    missing = s.isna().to_numpy()
    if levels is not None:
        codes = pd.Index(list(levels)).get_indexer(s.astype(object))
        if levels == (0, 1) and np.any(codes < 0):  # 0/1 stored as floats or booleans
            codes = pd.Index([0.0, 1.0]).get_indexer(pd.to_numeric(s, errors="coerce"))
        if np.any((codes < 0) & ~missing):  # a file's 1 or 1.0 for the spec's level "1"
            text = [formats.level_text(v) for v in levels]
            codes = pd.Index(text).get_indexer(s.map(formats.level_text, na_action="ignore"))
        bad = np.flatnonzero((codes < 0) & ~missing)
        if bad.size:
            raise InputError(
                param,
                f"column {col.name!r} has a value that is not one of its public levels "
                f"{from_data(f'record {bad[0] + first}')}",
            )
        return np.where(missing, len(levels), codes).astype(np.int64)
    x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(np.isnan(x) & ~missing)
    if bad.size:
        raise InputError(
            param,
            f"column {col.name!r} has a value that is not a number "
            f"{from_data(f'record {bad[0] + first}')}",
        )
    lo, hi = (float(b) for b in col.bounds)
    k = n_cells(col)
    if col.kind == "count" and k == int(np.floor(hi) - np.ceil(lo)) + 1:
        raw = np.rint(np.nan_to_num(x)) - np.ceil(lo)
    else:
        raw = np.floor((np.nan_to_num(x) - lo) / (hi - lo) * k)
    return np.where(missing, k, np.clip(raw, 0, k - 1)).astype(np.int64)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance 0.5 sum |p - q| of two count (or probability) vectors of the
    same cells, each normalized to sum 1."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    return float(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())


# ----------------------------------------------------------------------------- the figures


def column_figures(col: ColumnInfo, conf: Any, syn: Any) -> dict[str, float]:
    """One column's figures (:func:`figures_of_column`) from its two sets of values."""
    conf, syn = (pd.DataFrame({col.name: np.asarray(v, dtype=object)}) for v in (conf, syn))
    return figures_of_column(col, *_both([col], conf, syn))


def figures_of_column(col: ColumnInfo, a: TableSums, b: TableSums) -> dict[str, float]:
    """One column's figures: ``one_way_tvd`` on its public bins; for continuous and count
    columns also ``max_ecdf`` (on the tables' subsamples, :data:`PMSE_RECORDS`) and
    ``mean_error`` (relative, or sd-scaled near 0, as :mod:`dpsynth.curator.column_verdict`),
    on the values present."""
    out = {"one_way_tvd": tvd(a.counts[col.name], b.counts[col.name])}
    if col.kind not in ("continuous", "count"):
        return out
    (nx, mean_x, sd_x), (ny, mean_y, _) = a.moments(col.name), b.moments(col.name)
    if nx and ny:
        x, y = a.present_sample(col.name), b.present_sample(col.name)
        out["max_ecdf"] = ecdf_measures(x, y)["max_ecdf"]
        out["mean_error"] = _mean_error(mean_x, sd_x, mean_y)
    return out


def _mean_error(mean_x: float, sd_x: float, mean_y: float) -> float:
    """|mean* - mean| / |mean|, or / sd when |mean| < MEAN_NEAR_ZERO sd (curator's rule)."""
    gap = abs(mean_y - mean_x)
    scale = abs(mean_x) if abs(mean_x) >= MEAN_NEAR_ZERO * sd_x else sd_x
    return gap / scale if scale > 0 else (0.0 if gap == 0 else float("inf"))


def two_way_tvd(
    columns: Sequence[ColumnInfo], conf: pd.DataFrame, syn: pd.DataFrame
) -> dict[tuple[str, str], float]:
    """The TVD of every two-way marginal on the public bins: (a, b) -> TVD, over all pairs
    of ``columns`` in their order."""
    a, b = _both(columns, conf, syn)
    return {pair: tvd(a.pairs[pair], b.pairs[pair]) for pair in a.pairs}


def numeric_values(col: ColumnInfo, values: Any, param: str = "confidential") -> np.ndarray:
    """A column as numbers, NaN where missing: continuous and count as they are, binary as
    the position 0/1 of its public level (categorical columns have no numeric scale)."""
    if col.kind == "binary":
        codes = public_bins(col, values, param).astype(float)
        return np.where(codes == n_cells(col), np.nan, codes)
    if col.kind == "categorical":
        raise InputError("analysis", f"categorical column {col.name!r} has no numeric scale")
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)


def correlation_difference(
    columns: Sequence[ColumnInfo], conf: pd.DataFrame, syn: pd.DataFrame
) -> tuple[float, tuple[str, str] | None]:
    """:func:`correlation_difference_of` the two tables."""
    return correlation_difference_of(*_both(columns, conf, syn))


def correlation_difference_of(a: TableSums, b: TableSums) -> tuple[float, tuple[str, str] | None]:
    """max |r* - r| over the Pearson correlations of the numeric columns (continuous, count,
    binary; categorical ones are judged by their two-way TVD), and the pair attaining it.
    A constant column has correlation 0 with every other. (0, None) with fewer than two."""
    names = [c.name for c in a.numeric]
    if len(names) < 2:
        return 0.0, None
    diff = np.abs(b.correlations() - a.correlations())
    upper_i, upper_j = np.triu_indices(len(names), k=1)  # the pairs, never a column with itself
    best = int(np.argmax(diff[upper_i, upper_j]))
    i, j = upper_i[best], upper_j[best]
    return float(diff[i, j]), (names[i], names[j])


def propensity_design(
    columns: Sequence[ColumnInfo],
    codes: Mapping[str, np.ndarray],
    interactions: bool = True,
    groups: int = PMSE_GROUPS,
) -> sparse.csr_matrix:
    """One-hot public bins of each column (first bin dropped) and, with ``interactions``, the
    products of every two columns' dummies, a column of more than ``groups`` cells taken there
    as ``groups`` runs of consecutive cells (:data:`PMSE_GROUPS`); all-zero columns dropped.
    Sparse, N x p, built row by row from one column index per part (a main effect or a pair):
    a record has at most one 1 in each, so the matrix is its indices, never a copy per part."""
    n = len(next(iter(codes.values())))
    mains = [(np.asarray(codes[c.name], np.int64), cells(c)) for c in columns]
    merged = [(code * groups // k, groups) if k > groups else (code, k) for code, k in mains]
    pairs = list(itertools.combinations(merged, 2)) if interactions else []
    if not mains and not pairs:
        return sparse.csr_matrix((n, 0))
    width = sum(k - 1 for _, k in mains) + sum((ka - 1) * (kb - 1) for (_, ka), (_, kb) in pairs)
    small = np.int32 if width < np.iinfo(np.int32).max else np.int64
    index = np.empty((n, len(mains) + len(pairs)), small)  # N x parts, filled part by part
    start = 0
    for j, (code, k) in enumerate(mains):  # dummy j of a column: its cell j (cell 0 dropped)
        index[:, j] = np.where(code > 0, start + code - 1, -1)
        start += k - 1
    for j, ((a, ka), (b, kb)) in enumerate(pairs, len(mains)):  # b's cell, then a's
        both = (a > 0) & (b > 0)
        index[:, j] = np.where(both, start + (b - 1) * (ka - 1) + (a - 1), -1)
        start += (ka - 1) * (kb - 1)
    used = index >= 0  # each row's indices increase along it
    indices = index[used]
    del index
    keep = np.flatnonzero(np.bincount(indices, minlength=width) > 0)
    renumber = np.full(width, -1, small)
    renumber[keep] = np.arange(keep.size, dtype=small)
    indptr = np.r_[0, np.cumsum(used.sum(axis=1))]
    del used
    data = np.ones(indices.size)
    return sparse.csr_matrix((data, renumber[indices], indptr), shape=(n, keep.size))


def pmse(
    columns: Sequence[ColumnInfo],
    conf: pd.DataFrame,
    syn: pd.DataFrame,
    interactions: bool = True,
) -> dict[str, float]:
    """:func:`pmse_of` the two tables."""
    return pmse_of(*_both(columns, conf, syn), interactions)


def interaction_groups(columns: Sequence[ColumnInfo], at_most: int | None = None) -> int:
    """The groups each column's cells are merged into in the propensity design's products:
    :data:`PMSE_GROUPS`, or the most (at least two) that keep the design within ``at_most``
    columns (:data:`PMSE_PARAMETERS`); from the columns' public cells only."""
    at_most = PMSE_PARAMETERS if at_most is None else at_most
    ks = [cells(c) for c in columns]
    mains = sum(k - 1 for k in ks)
    for g in range(PMSE_GROUPS, 2, -1):
        pairs = sum((min(a, g) - 1) * (min(b, g) - 1) for a, b in itertools.combinations(ks, 2))
        if mains + pairs <= at_most:
            return g
    return 2


def pmse_of(a: TableSums, b: TableSums, interactions: bool = True) -> dict[str, float]:
    """pMSE of a logistic propensity model and its standardized ratio (Snoke et al. 2018).

    The N = n + n* stacked records (each table's subsample, :data:`PMSE_RECORDS`) get label 1
    when synthetic; an unpenalized logistic regression (scikit-learn) on
    :func:`propensity_design` (its products' groups :func:`interaction_groups`, reported as
    ``groups``) gives propensities p_i, and
    pMSE = mean (p_i - c)^2, c = n*/N. ``pmse_ratio`` is pMSE over its null expectation
    (k - 1) c (1 - c) / N, k the estimable parameters (intercept included: 1 + the rank of
    the design). To first order p - c is the projection of the labels' deviations onto the
    design, so N pMSE / (c (1 - c)) is chi-square with k - 1 degrees of freedom. Snoke et al.
    (2018) print (k - 1)(1 - c)^2 c / N, smaller by the factor 1 - c; against theirs a null
    table's (random labels) ratio lies near 1 / (1 - c), against ours near 1, so ours is
    used (a ratio near 1 means what chance gives). ``pmse_share`` is pMSE over its maximum c (1 - c).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    codes = {c.name: np.concatenate([a.sampled(c.name), b.sampled(c.name)]) for c in a.columns}
    groups = interaction_groups(a.columns)
    X = propensity_design(a.columns, codes, interactions, groups)
    del codes
    n_conf, n_syn = len(a.positions), len(b.positions)
    N = n_conf + n_syn
    label = np.r_[np.zeros(n_conf), np.ones(n_syn)]
    c = n_syn / N
    k = 1 + _rank(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        if X.shape[1] == 0:  # every column constant over both tables: nothing to tell apart
            p = np.full(N, c)
        else:
            model = LogisticRegression(C=np.inf, max_iter=PMSE_MAX_ITER).fit(X, label)
            p = model.predict_proba(X)[:, 1]
    value = float(np.mean((p - c) ** 2))
    expected = (k - 1) * c * (1 - c) / N
    ratio = value / expected if expected > 0 else (0.0 if value < 1e-12 else float("inf"))
    return {
        "pmse": value,
        "pmse_expected": float(expected),
        "pmse_ratio": float(ratio),
        "pmse_share": value / (c * (1 - c)),
        "parameters": int(k),
        "groups": groups,
        "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


RANK_BLOCK = 20_000
"""Records per block of the Gram matrix :func:`_rank` sums (its memory: one block's product)."""


def _rank(X: sparse.spmatrix) -> int:
    """Rank of [1, X] minus 1: the dummies' parameters beyond the intercept."""
    if X.shape[1] == 0:
        return 0
    gram = np.empty((X.shape[1] + 1, X.shape[1] + 1))  # of [1, X]: counts, so exact
    gram[0, 0] = X.shape[0]
    gram[0, 1:] = gram[1:, 0] = np.asarray(X.sum(axis=0)).ravel()
    gram[1:, 1:] = 0.0
    for start in range(0, X.shape[0], RANK_BLOCK):  # a block's product at a time
        block = X[start : start + RANK_BLOCK]
        gram[1:, 1:] += (block.T @ block).toarray()
    # one BLAS thread: on a loaded 2-core machine two threads made this 25x slower (measured)
    with threadpool_limits(1):
        eig = np.linalg.eigvalsh(gram)  # symmetric, positive semi-definite
    return int(np.sum(eig > eig.max() * gram.shape[0] * np.finfo(float).eps)) - 1


# ----------------------------------------------------------------------------- the analysis


def parse_analysis(analysis: str, names: Sequence[str]) -> tuple[str, list[str]]:
    """``"y ~ x1 + x2"`` -> ("y", ["x1", "x2"]); every name must be a described column."""
    m = re.fullmatch(r"\s*([^~\s]+)\s*~\s*(.+?)\s*", str(analysis))
    if m is None:
        raise InputError("analysis", f"give a formula 'outcome ~ x1 + x2' (got {analysis!r})")
    outcome, rhs = m.group(1), [t.strip() for t in m.group(2).split("+")]
    missing = [t for t in [outcome, *rhs] if t not in names]
    if missing or not all(rhs):
        raise InputError("analysis", f"names no described column {', '.join(missing) or '(empty)'}")
    return outcome, rhs


def analysis_design(
    columns: Sequence[ColumnInfo], frame: pd.DataFrame, predictors: Sequence[str]
) -> tuple[np.ndarray, list[str]]:
    """Intercept, numeric predictors as they are, categorical ones dummy-coded on their
    public levels (first level the reference): (N x p design, coefficient names); a row
    with a missing predictor is NaN."""
    info = {c.name: c for c in columns}
    parts, names = [np.ones((len(frame), 1))], ["(intercept)"]
    for name in predictors:
        col = info[name]
        if col.kind == "categorical":
            codes = public_bins(col, frame[name], "analysis")
            levels = col.public_levels
            dummies = np.vstack([np.eye(len(levels)), np.full(len(levels), np.nan)])
            parts.append(dummies[codes][:, 1:])
            names += [f"{name}[{lv}]" for lv in levels[1:]]
        else:
            parts.append(numeric_values(col, frame[name], "analysis")[:, None])
            names.append(name)
    return np.hstack(parts), names


def _complete_ols(sums: TableSums) -> tuple[np.ndarray, np.ndarray, float] | None:
    """:func:`dpsynth.curator.column_verdict.ols_from_r` on a table's complete records,
    without the design columns that are 0 on every one of them (a public level no complete
    record has): such a coefficient is not estimable, and leaving it out changes no other
    one (R's ``lm`` reports it NA). Its coefficient and standard error are NaN; None if the
    rest is not estimable either."""
    from dpsynth.curator.column_verdict import ols_from_r

    if sums.ols_r is None:
        return None
    used = sums.ols_used
    kept = np.linalg.qr(sums.ols_r[:, np.r_[np.flatnonzero(used), used.size]], mode="r")
    fit = ols_from_r(kept, sums.ols_n)
    if fit is None:
        return None
    coef, se = np.full(used.size, np.nan), np.full(used.size, np.nan)
    coef[used], se[used] = fit[0], fit[1]
    return coef, se, fit[2]


def coefficient_overlap(
    columns: Sequence[ColumnInfo], conf: pd.DataFrame, syn: pd.DataFrame, analysis: str
) -> list[dict[str, Any]]:
    """:func:`coefficient_overlap_of` the two tables."""
    return coefficient_overlap_of(*_both(columns, conf, syn, analysis))


def coefficient_overlap_of(a: TableSums, b: TableSums) -> list[dict[str, Any]]:
    """Per coefficient of the analysis's OLS fit (classical standard errors, 95% t
    intervals) on each table's complete records: Karr et al. (2006) interval overlap and the
    shift (b* - b) / se in confidential standard errors (overlap 0, shift inf where a fit is
    not estimable, or where the synthetic table cannot estimate a coefficient the data can).
    A coefficient the confidential records cannot estimate (a public level none of them has)
    is left out. A binary outcome is fitted as a linear probability model."""
    names = a.ols_names
    fa, fb = _complete_ols(a), _complete_ols(b)
    if fa is None or fb is None:
        return [{"name": nm, "overlap": 0.0, "shift": float("inf")} for nm in names]
    (ca, sa, ta), (cb, sb, tb) = fa, fb
    overlap = interval_overlap(ca - ta * sa, ca + ta * sa, cb - tb * sb, cb + tb * sb)
    out = []
    for nm, o, x, se, y in zip(names, overlap, ca, sa, cb, strict=True):
        if not np.isfinite(x):
            continue  # not estimable from the confidential records
        entry = {"name": nm, "overlap": 0.0, "shift": float("inf"), "confidential": float(x)}
        if np.isfinite(y):  # else the synthetic table cannot estimate it
            entry.update(overlap=float(o), shift=float((y - x) / se), synthetic=float(y))
        out.append(entry)
    return out


def _both(
    columns: Sequence[ColumnInfo],
    conf: pd.DataFrame,
    syn: pd.DataFrame,
    analysis: str | None = None,
) -> tuple[TableSums, TableSums]:
    """The confidential and the synthetic frame's :class:`TableSums` (:func:`summed`)."""
    a = summed(columns, conf, "confidential", analysis)
    return a, summed(columns, syn, "synthetic", analysis)


# ----------------------------------------------------------------------------- the verdict


def level(figure: str, value: float) -> str:
    """good / fair / poor of one figure by :data:`THRESHOLDS` (not finite: poor)."""
    return column_verdict.level_by(THRESHOLDS, figure, value)


def _severity(figure: str, value: float) -> float:
    """How far past its good line a figure is (ranks figures of the same level)."""
    good, _, direction = THRESHOLDS[figure]
    if not np.isfinite(value):
        return float("inf")
    if direction == "at most":
        return value / good
    return good / max(value, 1e-12)


def table_figures(
    columns: Sequence[ColumnInfo],
    conf: pd.DataFrame,
    syn: pd.DataFrame,
    analysis: str | None = None,
    interactions: bool = True,
) -> list[dict[str, Any]]:
    """:func:`figures_of` the two tables."""
    return figures_of(*_both(columns, conf, syn, analysis), interactions)


def figures_of(a: TableSums, b: TableSums, interactions: bool = True) -> list[dict[str, Any]]:
    """Every judged figure as {"figure", "value", "columns", "level"} (:func:`table_verdict`)
    from the two tables' sums; the pMSE entry carries its null expectation, parameters and
    share."""
    entries = []
    for c in a.columns:
        for figure, value in figures_of_column(c, a, b).items():
            entries.append({"figure": figure, "value": value, "columns": [c.name]})
    for (x, y), value in ((pair, tvd(a.pairs[pair], b.pairs[pair])) for pair in a.pairs):
        entries.append({"figure": "two_way_tvd", "value": value, "columns": [x, y]})
    value, pair = correlation_difference_of(a, b)
    if pair is not None:
        entries.append({"figure": "correlation_difference", "value": value, "columns": list(pair)})
    p = pmse_of(a, b, interactions)
    entries.append({"figure": "pmse_ratio", "value": p.pop("pmse_ratio"), "columns": [], **p})
    if a.analysis is not None:
        outcome = a.analysis[0]
        for coef in coefficient_overlap_of(a, b):
            entries.append(
                {"figure": "ci_overlap", "value": coef.pop("overlap"), "columns": [outcome], **coef}
            )
    for e in entries:
        e["level"] = level(e["figure"], e["value"])
    return entries


def table_verdict(
    confidential: pd.DataFrame,
    synthetic: pd.DataFrame,
    columns: Sequence[ColumnInfo] | Mapping[str, Mapping[str, Any]],
    analysis: str | None = None,
    interactions: bool = True,
) -> dict[str, Any]:
    """The table's verdict (confidential): good / fair / poor by its WORST figure.

    ``columns`` describe the table in synthesis order (public columns first, marked
    ``public``); ``analysis`` (``"y ~ x1 + x2"``) adds each coefficient's interval overlap.
    Returns {"verdict", "driven_by" (figure, value, columns, level; a coefficient's name),
    "next_step",
    "reasons" (every figure not good), "figures" (all), "thresholds"}: JSON-able.
    """
    cols = describe(columns)
    for param, frame in (("confidential", confidential), ("synthetic", synthetic)):
        missing = [c.name for c in cols if c.name not in frame.columns]
        if missing:
            raise InputError(param, f"has no column(s) {', '.join(missing)}")
        if len(frame) == 0:
            raise InputError(param, "has no records")
    return verdict_of(*_both(cols, confidential, synthetic, analysis), interactions)


def verdict_of(a: TableSums, b: TableSums, interactions: bool = True) -> dict[str, Any]:
    """:func:`table_verdict` from the two tables' sums (the confidential ``a``, the synthetic
    ``b``), added a partition at a time (:class:`TableSums`)."""
    entries = figures_of(a, b, interactions)
    cols, analysis = a.columns, a.formula
    worst = max(
        entries, key=lambda e: (VERDICTS.index(e["level"]), _severity(e["figure"], e["value"]))
    )
    return {
        "verdict": worst["level"],
        "driven_by": {
            k: worst[k] for k in ("figure", "value", "columns", "level", "name") if k in worst
        },
        "next_step": next_step(worst, cols, entries, analysis),
        "reasons": [
            f"{e['figure']} {e['value']:.3g} on {', '.join(e['columns']) or 'the table'} is "
            f"{e['level']}"
            for e in entries
            if e["level"] != "good"
        ],
        "figures": entries,
        "thresholds": {
            k: {"good": g, "fair": f, "direction": d} for k, (g, f, d) in THRESHOLDS.items()
        },
    }


def _ignored_parent(
    columns: Sequence[ColumnInfo], later: str, other: str, public: set[str]
) -> str | None:
    """A PH column drawn given parents that leave out the other column of its worst pair:
    name it among them (PH never reads the public columns: a model does)."""
    col = next((c for c in columns if c.name == later), None)
    if (
        col is None
        or not registry.model_free(col.mechanism)
        or col.given is None
        or other in col.given
    ):
        return None
    if other in public:
        return (
            f"give {later!r} a model: a ph column is drawn given confidential columns only, "
            f"never the public {other!r}"
        )
    return (
        f"draw {later!r} given {other!r} too (add it to its given; a continuous column enters "
        f"on public bins): its ph draw ignores {other!r}"
    )


def _ph_advice(columns: Sequence[ColumnInfo], names: Sequence[str]) -> str | None:
    """A level column behind the worst figure fitted by a censored model: PH is the move
    (a censored logistic or categorical fit at a small share of epsilon is nearly flat)."""
    censored = [
        c.name
        for c in columns
        if c.name in names and not c.public and c.kind in ("binary", "categorical")
        and c.mechanism is not None and not registry.model_free(c.mechanism)
    ]  # fmt: skip
    if not censored:
        return None
    return (
        f"synthesize {censored[-1]!r} by ph (its levels drawn given the level columns before "
        "it): a censored logistic or categorical fit at a small share of epsilon is nearly flat"
    )


def next_step(
    worst: Mapping[str, Any],
    columns: Sequence[ColumnInfo],
    entries: Sequence[Mapping[str, Any]],
    analysis: str | None,
) -> str:
    """One next step for the figure that drove the verdict (fixed rules, no data read)."""
    if worst["level"] == "good":
        return "none needed: every figure is within its good line"
    order = [c.name for c in columns]
    public = {c.name for c in columns if c.public}
    figure, names = worst["figure"], list(worst["columns"])
    if figure == "pmse_ratio":
        pairs = [e for e in entries if e["figure"] == "two_way_tvd"]
        if not pairs:
            return "raise the share of epsilon of the synthesized column"
        names = list(max(pairs, key=lambda e: e["value"])["columns"])
    advice = _ph_advice(columns, names) if figure != "ci_overlap" else None
    if advice:
        return advice
    if figure in ("one_way_tvd", "max_ecdf", "mean_error"):
        col = next((c for c in columns if c.name == names[0]), None)
        if (
            col is not None
            and registry.model_free(col.mechanism)
            and col.given
            and not col.calibrated
        ):
            return (
                f"give {names[0]!r} a calibrate_share (drawn given {', '.join(col.given)}, "
                "its marginal sums the noise of every parent cell; a histogram of its own "
                "cells takes most of it back), or raise its share of epsilon"
            )
        return (
            f"raise the share of epsilon of {names[0]!r} (its own distribution drove the "
            "verdict), or give its model a public reference for centring"
        )
    if figure == "ci_overlap":
        outcome, predictors = parse_analysis(str(analysis), order)
        if outcome in public:
            return f"raise the shares of epsilon of {', '.join(map(repr, predictors))}"
        late = [p for p in predictors if p not in public and order.index(p) > order.index(outcome)]
        move = f"; put {', '.join(map(repr, late))} before it in the order" if late else ""
        k = next((c.fit_records for c in columns if c.name == outcome), None)
        more = f", or fit it to more than {k:,} records (fit_records)" if k else ""
        return (
            f"raise the share of epsilon of the analysis's outcome {outcome!r} (coefficient "
            f"{worst.get('name')!r} drove the verdict){more}{move}"
        )
    later = max((n for n in names if n not in public), key=order.index, default=names[-1])
    other = [n for n in names if n != later]
    ignored = _ignored_parent(columns, later, other[0], public)
    if ignored:
        return ignored
    lead = (
        "the propensity model tells the tables apart; its worst pair is "
        if figure == "pmse_ratio"
        else ""
    )
    return (
        f"{lead}raise the share of epsilon of {later!r}: its model is where the dependence on "
        f"{other[0]!r} is fitted (keep {other[0]!r} among its predecessors)"
    )


# ----------------------------------------------------------------------------- a table's sums


def subsample_positions(records: int, at_most: int | None = None) -> np.ndarray:
    """The positions, in order, of the records the propensity model and the max-ECDF read:
    all of them up to ``at_most`` (:data:`PMSE_RECORDS`), else
    ``at_most`` drawn with a fixed seed from ``records`` alone (no value is read to choose
    them)."""
    at_most = PMSE_RECORDS if at_most is None else at_most
    if records <= at_most:
        return np.arange(records)
    return np.sort(np.random.default_rng(records).choice(records, at_most, replace=False))


def _centre(col: ColumnInfo) -> float:
    """A public point inside the column's range, subtracted before summing (precision)."""
    if col.bounds is None:
        return 0.5  # binary: its 0/1 positions
    return (float(col.bounds[0]) + float(col.bounds[1])) / 2


def _numeric(col: ColumnInfo, values: Any, codes: np.ndarray) -> np.ndarray:
    """:func:`numeric_values` of a part whose public bins
    ``codes`` are made (a binary column's positions are its codes)."""
    if col.kind == "binary":
        return np.where(codes == cells(col) - 1, np.nan, codes.astype(float))
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)


class TableSums:
    """What the verdict reads of one table (the confidential one or a synthetic one), added a
    partition at a time in record order (:meth:`add`), so that the verdict never needs the
    table whole: counts add (one-way and two-way cells on the public bins), sums add (each
    numeric column's moments; the pairwise-complete cross-products of the Pearson
    correlations), an R factor updates (the analysis's least squares,
    :func:`dpsynth.curator.column_verdict.ols_from_r`), and the records the propensity model
    and the max-ECDF read are a fixed subsample (:func:`subsample_positions`), gathered as
    their partitions pass. It holds a partition's work, the cells, a few small matrices and
    the subsample, not the table. ``records`` is the table's size, known before its first
    partition; ``param`` names the table in a refusal, which names the record's place in the
    whole table."""

    def __init__(
        self,
        columns: Sequence[ColumnInfo],
        records: int,
        param: str,
        analysis: str | None = None,
    ) -> None:
        self.columns, self.records, self.param = list(columns), int(records), param
        self.seen = 0
        self.counts = {c.name: np.zeros(cells(c), np.int64) for c in self.columns}
        self.pairs = {
            (a.name, b.name): np.zeros(cells(a) * cells(b), np.int64)
            for a, b in itertools.combinations(self.columns, 2)
        }
        self.numeric = [c for c in self.columns if c.kind != "categorical"]
        self.centres = np.array([_centre(c) for c in self.numeric])
        q = len(self.numeric)
        self.cross = np.zeros((4, q, q))  # n_ij, sum x_i, sum x_i^2 (where j too), sum x_i x_j
        self.positions = subsample_positions(self.records)
        self.sampled_codes: dict[str, list[np.ndarray]] = {c.name: [] for c in self.columns}
        self.sampled_values: dict[str, list[np.ndarray]] = {c.name: [] for c in self.numeric}
        self.formula = analysis
        self.analysis = None if analysis is None else parse_analysis(analysis, self.names)
        self.ols_r: np.ndarray | None = None  # R of [design, outcome] on the complete records
        self.ols_n, self.ols_used = 0, np.zeros(0, bool)
        self.ols_names: list[str] = []  # the analysis's coefficients (its design's columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def add(self, part: pd.DataFrame) -> None:
        """Add the table's next ``len(part)`` records (its columns named as described)."""
        lo, hi = np.searchsorted(self.positions, [self.seen, self.seen + len(part)])
        at = self.positions[lo:hi] - self.seen  # the subsample's positions in this part
        first = self.seen + 1  # a refusal names the record's place in the table
        codes = {c.name: public_bins(c, part[c.name], self.param, first) for c in self.columns}
        for c in self.columns:
            self.counts[c.name] += np.bincount(codes[c.name], minlength=cells(c))
            self.sampled_codes[c.name].append(codes[c.name][at].astype(np.int32))
        for a, b in itertools.combinations(self.columns, 2):
            both = codes[a.name] * cells(b) + codes[b.name]
            self.pairs[(a.name, b.name)] += np.bincount(both, minlength=cells(a) * cells(b))
        x = np.zeros((len(part), len(self.numeric)))
        for i, c in enumerate(self.numeric):  # a binary column: its 0/1 positions
            x[:, i] = _numeric(c, part[c.name], codes[c.name])
        del codes
        for i, c in enumerate(self.numeric):
            self.sampled_values[c.name].append(x[at, i])
        self._add_cross(x - self.centres)
        if self.analysis is not None:
            self._add_ols(part)
        self.seen += len(part)

    def _add_cross(self, x: np.ndarray) -> None:
        """Pairwise-complete sums: for each pair (i, j), over the records with both."""
        present = np.isfinite(x).astype(float)
        x0 = np.where(present > 0, x, 0.0)
        self.cross[0] += present.T @ present
        self.cross[1] += x0.T @ present
        self.cross[2] += (x0 * x0).T @ present
        self.cross[3] += x0.T @ x0

    def _add_ols(self, part: pd.DataFrame) -> None:
        """The analysis's complete records folded into the R factor of [design, outcome]."""
        outcome, predictors = self.analysis
        info = {c.name: c for c in self.columns}
        X, self.ols_names = analysis_design(self.columns, part, predictors)
        z = numeric_values(info[outcome], part[outcome], "analysis")
        keep = np.isfinite(z) & np.all(np.isfinite(X), axis=1)
        used = np.any(X[keep] != 0, axis=0)
        self.ols_used = used if self.ols_r is None else self.ols_used | used
        rows = np.column_stack([X[keep], z[keep]])
        stack = rows if self.ols_r is None else np.vstack([self.ols_r, rows])
        self.ols_r = np.linalg.qr(stack, mode="r") if len(stack) else stack
        self.ols_n += int(keep.sum())

    # ------------------------------------------------------------------ what the figures read

    def sampled(self, name: str) -> np.ndarray:
        """Column ``name``'s public bins at the subsample's positions."""
        return np.concatenate(self.sampled_codes[name])

    def present_sample(self, name: str) -> np.ndarray:
        """Numeric column ``name``'s values present at the subsample's positions."""
        v = np.concatenate(self.sampled_values[name])
        return v[np.isfinite(v)]

    def moments(self, name: str) -> tuple[int, float, float]:
        """(count present, mean, sd with ddof 1) of numeric column ``name``: every record."""
        i = [c.name for c in self.numeric].index(name)
        n, s, ss = (float(self.cross[k, i, i]) for k in range(3))
        if n == 0:
            return 0, float("nan"), float("nan")
        var = max(ss - s * s / n, 0.0) / (n - 1) if n > 1 else 0.0
        return int(n), float(self.centres[i] + s / n), float(np.sqrt(var))

    def correlations(self) -> np.ndarray:
        """Pearson correlations of the numeric columns on the pairwise complete records (0
        where undefined: fewer than two records, or a column constant on them)."""
        n, sx, sxx, sxy = self.cross
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = sxy - sx * sx.T / n
            var_i, var_j = sxx - sx * sx / n, (sxx - sx * sx / n).T
            flat = (var_i <= 1e-12 * sxx) | (var_j <= 1e-12 * sxx.T)
            r = cov / np.sqrt(var_i * var_j)
        r[(n < 2) | flat | ~np.isfinite(r)] = 0.0
        return np.clip(r, -1.0, 1.0)


def summed(
    columns: Sequence[ColumnInfo],
    frame: pd.DataFrame,
    param: str,
    analysis: str | None = None,
    records: int = formats.PARTITION_RECORDS,
) -> TableSums:
    """A whole frame's :class:`TableSums`, added ``records`` rows at a time."""
    parts = (frame.iloc[start : start + records] for start in range(0, len(frame), records))
    return summed_parts(columns, parts, len(frame), param, analysis)


def summed_parts(
    columns: Sequence[ColumnInfo],
    parts: Iterable[pd.DataFrame],
    records: int,
    param: str,
    analysis: str | None = None,
) -> TableSums:
    """The :class:`TableSums` of a table of ``records`` records given as its ``parts``, in
    record order (e.g. a release's published table, made a partition at a time)."""
    out = TableSums(columns, records, param, analysis)
    for part in parts:
        out.add(part)
    return out
