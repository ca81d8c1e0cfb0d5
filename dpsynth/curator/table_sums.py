"""What the table verdict reads of one table, added a partition at a time.

:class:`TableSums` holds, for one table (the confidential one or a synthetic one), the sums
every figure of :mod:`dpsynth.curator.table_verdict` is computed from, so that the verdict
never needs the table whole: counts add (one-way and two-way cells on the public bins),
sums add (each numeric column's moments for the mean error; the pairwise-complete
cross-products of the Pearson correlations), an R factor updates (the analysis's least
squares, :func:`dpsynth.curator.column_verdict.ols_from_r`), and the records the propensity
model and the max-ECDF read are a fixed subsample
(:data:`~dpsynth.curator.table_verdict.PMSE_RECORDS` positions drawn from the table's size
alone), gathered as their partitions pass.

What it holds is a partition's work, the cells, a few small matrices and the subsample:
not the table. Partitions are added in record order, and a refusal names the record's
position in the whole table.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.curator import table_verdict
from dpsynth.curator.table_verdict import (
    ColumnInfo,
    analysis_design,
    cells,
    numeric_values,
    parse_analysis,
    public_bins,
)
from dpsynth.formats import PARTITION_RECORDS


def subsample_positions(records: int, at_most: int | None = None) -> np.ndarray:
    """The positions, in order, of the records the propensity model and the max-ECDF read:
    all of them up to ``at_most`` (:data:`~dpsynth.curator.table_verdict.PMSE_RECORDS`), else
    ``at_most`` drawn with a fixed seed from ``records`` alone (no value is read to choose
    them)."""
    at_most = table_verdict.PMSE_RECORDS if at_most is None else at_most
    if records <= at_most:
        return np.arange(records)
    return np.sort(np.random.default_rng(records).choice(records, at_most, replace=False))


def _centre(col: ColumnInfo) -> float:
    """A public point inside the column's range, subtracted before summing (precision)."""
    if col.bounds is None:
        return 0.5  # binary: its 0/1 positions
    return (float(col.bounds[0]) + float(col.bounds[1])) / 2


def _numeric(col: ColumnInfo, values: Any, codes: np.ndarray) -> np.ndarray:
    """:func:`~dpsynth.curator.table_verdict.numeric_values` of a part whose public bins
    ``codes`` are made (a binary column's positions are its codes)."""
    if col.kind == "binary":
        return np.where(codes == cells(col) - 1, np.nan, codes.astype(float))
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)


class TableSums:
    """One table's sums for the verdict (see the module): ``records`` is the table's size,
    known before its first partition; ``param`` names the table in a refusal."""

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
        X, _ = analysis_design(self.columns, part, predictors)
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
    records: int = PARTITION_RECORDS,
) -> TableSums:
    """A whole frame's :class:`TableSums`, added ``records`` rows at a time."""
    out = TableSums(columns, len(frame), param, analysis)
    for start in range(0, len(frame), records):
        out.add(frame.iloc[start : start + records])
    return out
