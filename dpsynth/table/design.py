"""The public design of a table column: its codes, its features as a predecessor, and the
encoding of the public columns.

A column's values enter a later column's design scaled by their PUBLIC bounds (and one-hot
on PUBLIC levels), so record i's values enter row i of each design only. Nothing here reads a
bound, a level or a domain from the data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import formats
from dpsynth.errors import (
    DataRefusal,
    InputError,
    refuse_records,
)
from dpsynth.models.catalogue import (
    Model,
    PublicDesign,
    get_model,
)
from dpsynth.table.spec import (
    ConfidentialColumn,
    PublicColumn,
    own_size,
    parent_size,
)


@dataclass(frozen=True)
class PublicEncoder:
    """How a public column enters every design: scaled by its public bounds (or by its own
    public mean and sd when it has none), one-hot on its levels; NaN as 0 plus an indicator."""

    column: PublicColumn
    centre: float
    scale: float
    levels: tuple[Any, ...] | None
    has_missing: bool


def public_encoder(frame: pd.DataFrame, col: PublicColumn) -> PublicEncoder:
    """The encoder of a public column, from the spec and (public) values only."""
    s = frame[col.name]
    has_missing = bool(s.isna().any())
    if col.type in ("binary", "categorical"):
        levels = col.levels or tuple(sorted(s.dropna().astype(str).unique()))
        return PublicEncoder(col, 0.0, 1.0, levels, has_missing)
    values = _numeric(s, col.name)
    if col.bounds is not None:
        lo, hi = col.bounds
        _refuse_outside(values, lo, hi, col.name)
        return PublicEncoder(col, lo, hi - lo, None, has_missing)
    present = values[np.isfinite(values)]
    sd = float(present.std()) if present.size else 0.0
    centre = float(present.mean()) if present.size else 0.0
    return PublicEncoder(col, centre, sd if sd > 0 else 1.0, None, has_missing)


@dataclass(frozen=True)
class EncodedPublic:
    """One public column as its features are made from it (:class:`PublicFeatures`): a
    level column's codes (-1 missing) or a numeric column's scaled values (0 where missing),
    and its missing mask when the column has missing values."""

    values: np.ndarray
    levels: int | None  # a level column's number of levels
    missing: np.ndarray | None
    name: str = ""

    @property
    def width(self) -> int:
        k = 1 if self.levels is None else self.levels - 1
        return k + (self.missing is not None)

    def at(self, rows: Any) -> np.ndarray:
        """The column's features at ``rows`` (its missing indicator last, if any)."""
        v = self.values[rows]
        feats = v[:, None] if self.levels is None else one_hot(v, self.levels)
        if self.missing is None:
            return feats
        missing = self.missing[rows][:, None]
        return np.hstack([np.where(missing, 0.0, feats), missing.astype(float)])


def _encode_public(frame: pd.DataFrame, enc: PublicEncoder) -> EncodedPublic:
    """One public column kept as its features are made from it: codes or scaled values."""
    s = frame[enc.column.name]
    isna = s.isna().to_numpy()
    missing = isna if enc.has_missing else None
    if enc.levels is not None:
        codes = level_codes(s, enc.levels, enc.column.name)
        small = np.int16 if len(enc.levels) < np.iinfo(np.int16).max else np.int64
        return EncodedPublic(codes.astype(small), len(enc.levels), missing, enc.column.name)
    scaled = (_numeric(s, enc.column.name) - enc.centre) / enc.scale
    return EncodedPublic(np.where(isna, 0.0, scaled), None, missing, enc.column.name)


@dataclass(frozen=True)
class PublicFeatures:
    """The public columns' features, n x p, kept as each column is encoded
    (:class:`EncodedPublic`: a level column of k levels one small code a record, not k - 1
    floats) and made at the rows a fit or a draw reads (``features[rows]``); the same matrix
    as :func:`public_matrix`."""

    columns: tuple[EncodedPublic, ...]
    records: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.records, sum(c.width for c in self.columns)

    def __getitem__(self, rows: Any) -> np.ndarray:
        """The features at ``rows`` (positions, a mask or a slice of the records)."""
        parts = [c.at(rows) for c in self.columns]
        if parts:
            return np.hstack(parts)
        return np.empty((np.arange(self.records)[rows].size, 0))

    def take(self, rows: slice | np.ndarray) -> PublicFeatures:
        """These features at the records ``rows`` (a slice, or positions), kept encoded."""
        size = len(range(*rows.indices(self.records))) if isinstance(rows, slice) else len(rows)
        columns = tuple(
            replace(
                c, values=c.values[rows], missing=None if c.missing is None else c.missing[rows]
            )
            for c in self.columns
        )
        return PublicFeatures(columns, size)

    def level_codes(self, name: str) -> np.ndarray | None:
        """A public level column's 0-based codes as a PH column's parent (as
        ``public_codes`` makes them: a missing value the first level), or None."""
        for c in self.columns:
            if c.name == name and c.levels is not None:
                return parent_codes(c.values)
        return None


def public_features(frame: pd.DataFrame, encoders: list[PublicEncoder]) -> PublicFeatures:
    """The public columns' features (:class:`PublicFeatures`) of ``frame``."""
    return PublicFeatures(tuple(_encode_public(frame, e) for e in encoders), len(frame))


def public_codes(frame: pd.DataFrame, enc: PublicEncoder) -> np.ndarray:
    """A public level column's 0-based codes on its spec's levels, as a PH column's parent
    (:func:`dpsynth.table.spec.ph_parents`): a missing value counts as the first level, as a
    confidential parent's does."""
    return parent_codes(level_codes(frame[enc.column.name], enc.levels, enc.column.name))


def parent_codes(codes: np.ndarray) -> np.ndarray:
    """Level codes (-1 missing) as a PH column's parent reads them: floats, a missing value
    the first level."""
    return np.where(codes < 0, 0, codes).astype(float)


def level_codes(s: pd.Series, levels: tuple[Any, ...], name: str) -> np.ndarray:
    """0-based codes of ``s`` on its public ``levels`` (-1 for missing); a value outside is
    refused (names the column, the record; never the value)."""
    index = pd.Index([_level_text(v) for v in levels])
    if isinstance(s.dtype, pd.CategoricalDtype):  # read in partitions: codes of its categories
        of_category = index.get_indexer([_level_text(c) for c in s.cat.categories])
        raw = s.cat.codes.to_numpy()
        codes = np.where(raw >= 0, of_category[np.maximum(raw, 0)], -1)
    else:
        text = s.map(_level_text, na_action="ignore")
        codes = index.get_indexer(text.to_numpy(dtype=object))
    outside = (codes < 0) & s.notna().to_numpy()
    head = f"column {name!r} has a level outside the spec's public levels "
    refuse_records("levels", head, outside, "record")
    return codes.astype(np.int64)


def _level_text(v: Any) -> str:
    """A level as text, 1.0 and 1 alike (:func:`dpsynth.formats.level_text`)."""
    return formats.level_text(v)


def one_hot(codes: np.ndarray, k: int) -> np.ndarray:
    """n x (k - 1) dummies of 0-based ``codes`` (first level dropped; code -1: all zeros)."""
    return (codes[:, None] == np.arange(1, k)[None, :]).astype(float)


def _numeric(s: pd.Series, name: str) -> np.ndarray:
    if formats.holds_times(s):
        raise InputError("data", f"column {name!r} {formats.TIME_VALUES}")
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) & s.notna().to_numpy()
    if bad.any():
        head = f"column {name!r} has a value that is not a finite number "
        raise DataRefusal("data", head, "value", None, int(np.flatnonzero(bad)[0]) + 1)
    return values


def _refuse_outside(values: np.ndarray, lo: float, hi: float, name: str) -> None:
    outside = (values < lo) | (values > hi)
    head = f"column {name!r} has values outside the spec's public bounds "
    tail = "; set clip = true in the spec to clip them (the count stays confidential)"
    refuse_records("bounds", head, outside, "record", tail)


def column_codes(frame: pd.DataFrame, col: ConfidentialColumn) -> tuple[np.ndarray, int]:
    """A confidential column's values (bounded numbers, or 0-based level codes as floats;
    NaN where missing) and how many were clipped to the public bounds (confidential)."""
    if col.indicator_of is not None:
        return frame[col.indicator_of].isna().to_numpy().astype(float), 0
    s = frame[col.name]
    missing = s.isna().to_numpy()
    if col.missing == "refuse":
        head = f"column {col.name!r} has missing values "
        tail = (
            '; set missing = "indicator" in the spec (or "level" for a ph binary or '
            "categorical column)"
        )
        refuse_records("missing", head, missing, "value", tail)
    if col.levels is not None:
        codes = level_codes(s, col.public_levels, col.name).astype(float)
        if col.missing == "level":  # the last level stands for missing
            return np.where(missing, len(col.levels) - 1, codes), 0
        return np.where(missing, np.nan, codes), 0
    values = _numeric(s, col.name)
    lo, hi = col.bounds
    if not col.clip:
        _refuse_outside(values, lo, hi, col.name)
        return values, 0
    clipped = np.clip(values, lo, hi)
    return clipped, int(np.sum((clipped != values) & ~missing))


def features(col: ConfidentialColumn, values: np.ndarray) -> np.ndarray:
    """n x k features of a predecessor on PUBLIC scales: u = (v - lo)/(hi - lo) (and, design
    "quadratic", 4 (u - 1/2)^2), 0/1 codes, or one-hot on the public levels; each in [0, 1];
    a missing value enters as 0 (its indicator carries it)."""
    present = np.isfinite(values)
    if col.type == "categorical" and col.design == "number":  # the level, scaled by its range
        lv = np.asarray(col.levels, dtype=float)
        scaled = (lv - lv.min()) / (lv.max() - lv.min())
        codes = np.where(present, values, 0).astype(np.int64)
        return np.where(present, scaled[codes], 0.0)[:, None]
    if col.type == "categorical":
        return one_hot(np.where(present, values, -1).astype(np.int64), len(col.levels))
    if col.type == "binary":
        return np.where(present, values, 0.0)[:, None]
    lo, hi = col.bounds
    u = np.where(present, (values - lo) / (hi - lo), 0.0)
    if col.design == "quadratic":
        return np.column_stack([u, np.where(present, 4.0 * (u - 0.5) ** 2, 0.0)])
    return u[:, None]


def column_design(public: np.ndarray, parts: list[np.ndarray], rows: np.ndarray | None) -> Any:
    """The public design of a column (no intercept: :func:`design_matrix` adds it), marked
    :class:`PublicDesign` so that it is never standardized by the data; None when empty."""
    X = np.hstack([public, *parts]) if parts or public.shape[1] else None
    if X is None or X.shape[1] == 0:
        return None
    if rows is not None:
        X = X[rows]
    return np.ascontiguousarray(X, dtype=float).view(PublicDesign)


def stan_outcome(col: ConfidentialColumn, values: np.ndarray) -> np.ndarray:
    """The outcome a column's model fits: values, 0/1 codes, or categories 1..K."""
    return values + 1 if col.type == "categorical" else values


def from_outcome(col: ConfidentialColumn, y: np.ndarray) -> np.ndarray:
    """Synthetic outcomes back to the table's coding (0-based level codes for levels)."""
    return y - 1 if col.type == "categorical" else y


def parent_cell_codes(
    col: ConfidentialColumn, parents: list[ConfidentialColumn], values: dict[str, np.ndarray]
) -> np.ndarray:
    """Each record's cell among the parents' public level and bin combinations (mixed radix;
    a continuous or count parent on ``col.given_bins`` equal-width bins of its public bounds);
    a missing value counts as the first (its indicator, if a parent, tells them apart)."""
    n = len(values[parents[0].name])
    cell = np.zeros(n, np.int64)
    for p in parents:
        v = values[p.name]
        size = parent_size(p, col.given_bins)
        if p.levels is None:  # the public bin of a bounded value
            code = bin_codes(v, p.bounds, size)
        else:
            code = np.where(np.isfinite(v), v, 0).astype(np.int64)
        cell = cell * size + code
    return cell


def own_codes(col: ConfidentialColumn, y: np.ndarray) -> np.ndarray:
    """A PH column's own cell: its level code, or its public equal-width bin (``bins``)."""
    if col.levels is not None:
        return y.astype(np.int64)
    return bin_codes(y, col.bounds, own_size(col))


def bin_codes(values: np.ndarray, bounds: tuple[float, float], k: int) -> np.ndarray:
    """0-based codes of ``values`` on k equal-width bins of the PUBLIC ``bounds`` (the upper
    bound in the last bin; a missing value in the first)."""
    lo, hi = bounds
    codes = np.floor((values - lo) / (hi - lo) * k)
    return np.clip(np.where(np.isfinite(codes), codes, 0), 0, k - 1).astype(np.int64)


def column_model(col: ConfidentialColumn) -> Model:
    """A column's model; a categorical one on its number of public levels, a log-normal
    regression with its spread (``spread``, :data:`dpsynth.table.spec.SPREADS`)."""
    model = get_model(col.model)
    if col.type == "categorical":
        model = model.with_levels(len(col.levels))
    if col.spread is not None:
        model = model.with_spread(col.spread == "by-parents")
    return model


def public_matrix(frame: pd.DataFrame, encoders: list[PublicEncoder]) -> np.ndarray:
    """The public columns' n x p features of ``frame`` (a reference file's), made whole."""
    return public_features(frame, encoders)[:]


def reference_codes(ref: pd.DataFrame, col: ConfidentialColumn) -> np.ndarray:
    """A reference column's values (public): clipped to the public bounds, NaN where missing."""
    if col.indicator_of is not None:
        return ref[col.indicator_of].isna().to_numpy().astype(float)
    if col.levels is not None:
        codes = level_codes(ref[col.name], col.levels, col.name).astype(float)
        return np.where(ref[col.name].isna().to_numpy(), np.nan, codes)
    return np.clip(_numeric(ref[col.name], col.name), *col.bounds)


def decoded(col: ConfidentialColumn, values: np.ndarray) -> pd.Series:
    if col.levels is not None:
        codes = np.where(np.isfinite(values), values, -1).astype(np.int64)
        if col.missing == "level":  # its last level is written back as missing
            codes = np.where(codes == len(col.levels) - 1, -1, codes)
        levels = np.asarray(col.levels, dtype=object)
        return pd.Series(np.where(codes >= 0, levels[np.maximum(codes, 0)], None), dtype=object)
    if col.type == "count":
        return pd.Series(np.rint(values)).astype("Int64")
    return pd.Series(values)
