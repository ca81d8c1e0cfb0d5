"""What a table release reads of its confidential columns, gathered as the table's
partitions pass (a file's, read once, or a data frame's slices), so that the table is never
held whole:

* each column encoded and checked a partition at a time
  (``dpsynth.table.design.column_codes``; a refusal names its column and counts its
  records over the whole table, :class:`Refusal`), and its values clipped to its public
  bounds counted;
* a model column's fit records (a k-of-n subsample, positions drawn from n and the seed
  before any value is read: :func:`dpsynth.table.columns.fit_rows`): its own and its
  predecessors' values there, nothing else (every record only where it is fitted to all);
* a PH column's histogram and a calibrated column's marginal histogram
  (:func:`dpsynth.table.columns.histogram_records`,
  :func:`dpsynth.table.columns.marginal_records`: integer cells' counts, which add);
* the table verdict's sums of the confidential table
  (:class:`dpsynth.curator.table_verdict.TableSums`);
* the public columns, which the draws and the published table read (public: kept whole).

What a fit reads is then one column's :class:`dpsynth.table.columns.ConfidentialInputs`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import formats
from dpsynth.errors import DataRefusal, InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.histogram import CellCounts
from dpsynth.table.columns import (
    ColumnTask,
    ConfidentialInputs,
    fit_rows,
    histogram_records,
    marginal_records,
    subsample_size,
)
from dpsynth.table.design import column_codes, public_codes, public_encoder
from dpsynth.table.spec import PublicColumn, TableSpec, ph_parents

REFUSAL_ORDER = ("missing", "levels", "data", "bounds")
"""The order a column's checks run in (``dpsynth.table.design.column_codes``): of one
column's refusals in different partitions, the table's is the first kind in this order."""


@dataclass
class Refusal:
    """The refusal a table read in partitions gives: the first column's (synthesis order)
    first kind (:data:`REFUSAL_ORDER`), its records counted over every partition (a
    :class:`dpsynth.errors.DataRefusal` of each partition, merged), as of the whole table."""

    key: tuple[int, int] | None = None
    error: InputError | None = None

    def note(self, j: int, exc: InputError, offset: int) -> None:
        """Column j's refusal ``exc`` of the partition whose first record is ``offset + 1``."""
        if isinstance(exc, DataRefusal):
            exc = exc.at(offset)
        rank = REFUSAL_ORDER.index(exc.param) if exc.param in REFUSAL_ORDER else len(REFUSAL_ORDER)
        key = (j, rank)
        if self.key is None or key < self.key:
            self.key, self.error = key, exc
        elif key == self.key and isinstance(exc, DataRefusal):
            if isinstance(self.error, DataRefusal) and exc.head == self.error.head:
                self.error = self.error.merged(exc)

    def raise_for(self, j: int) -> None:
        """Raise the table's refusal if it is column j's."""
        if self.key is not None and self.key[0] == j and self.error is not None:
            raise self.error


class Added:
    """A histogram's records added a partition at a time: counts summed, values joined."""

    def __init__(self) -> None:
        self.counts: CellCounts | None = None
        self.values: list[np.ndarray] = []

    def add(self, part: CellCounts | np.ndarray) -> None:
        if isinstance(part, CellCounts):
            self.counts = part if self.counts is None else self.counts + part
        else:
            self.values.append(part)

    def total(self) -> CellCounts | np.ndarray:
        return self.counts if self.counts is not None else np.concatenate(self.values)


@dataclass
class Gathered:
    """What the reading gathered: per confidential column what its fit reads (``fits``), the values
    clipped per column (confidential), the public columns (every record), the record count,
    the confidential table's verdict sums (or why they could not be made) and the refusal."""

    fits: dict[str, ConfidentialInputs]
    clipped: dict[str, int]
    public: pd.DataFrame
    records: int
    sums: Any = None
    sums_reason: str | None = None
    refusal: Refusal = field(default_factory=Refusal)


@dataclass
class _Reads:
    """What the reading collects for one confidential column's fit."""

    task: ColumnTask
    rows: np.ndarray | None = None  # its fit records (None: all, or a PH column)
    names: tuple[str, ...] = ()  # the columns whose values its fit reads
    parents: tuple[Any, ...] = ()  # a PH column's
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    ph: Added | None = None
    marginal: Added | None = None


def partitions(
    frame: pd.DataFrame, records: int = formats.PARTITION_RECORDS
) -> Iterator[pd.DataFrame]:
    """A data frame's records ``records`` at a time (views, not copies)."""
    for start in range(0, len(frame), records):
        yield frame.iloc[start : start + records]


def gathered(
    parts: Iterable[pd.DataFrame],
    spec: TableSpec,
    n: int,
    tasks: Sequence[ColumnTask],
    sums: Callable[[], Any] | None = None,
) -> Gathered:
    """The table read once, ``parts`` (its n records in order), for ``tasks`` (one per
    column, synthesis order): what each fit reads, the clip counts, the public columns and
    the verdict's sums (``sums()`` makes an empty one; None: none). A refusal is noted, not
    raised (:class:`Refusal`: the release raises it before any fit)."""
    reads = [_plan(t, spec, n) for t in tasks]
    out = Gathered({}, {t.col.name: 0 for t in tasks}, pd.DataFrame(), 0)
    _start_sums(sums, out)
    public: list[pd.DataFrame] = []
    for part in parts:
        if len(part) == 0:
            continue
        codes = _codes(part, tasks, out)
        if out.refusal.key is None:  # a refused table: only its checks go on
            _add(part, codes, reads, spec, out)
            _add_sums(part, out)
        public.append(part[[c.name for c in spec.public]])
        out.records += len(part)
    if out.records == 0:
        raise InputError("data", "the data are empty")
    out.public = pd.concat(public, ignore_index=True) if public else pd.DataFrame()
    if out.refusal.key is None:
        every: dict[str, np.ndarray] = {}  # a column read on every record: joined once
        out.fits = {r.task.col.name: _fit_inputs(r, spec, every) for r in reads}
    return out


def _plan(task: ColumnTask, spec: TableSpec, n: int) -> _Reads:
    """What the reading collects for ``task``'s fit: a model column's fit records (drawn here,
    from n and its seed only) and the columns read there; a PH column's parents."""
    col, done = task.col, spec.order()[: task.j]
    out = _Reads(task)
    if col.calibrate_share > 0:
        out.marginal = Added()
    if registry.model_free(col.mechanism):
        out.parents, out.ph = tuple(ph_parents(col, list(done), spec.public)), Added()
        return out
    out.rows = fit_rows(subsample_size(col, spec.fit_records, n), n, task.col_seed)
    out.names = (col.name, *(p.name for p in done))
    out.values = {nm: [] for nm in out.names}
    return out


def _codes(part: pd.DataFrame, tasks: Sequence[ColumnTask], out: Gathered) -> dict[str, np.ndarray]:
    """Each column's codes of ``part`` (refusals noted, not raised: a later partition may
    hold an earlier column's), its clip count added."""
    codes = {}
    for t in tasks:
        try:
            codes[t.col.name], clipped = column_codes(part, t.col)
        except InputError as exc:
            out.refusal.note(t.j, exc, out.records)
            continue
        out.clipped[t.col.name] += clipped
    return codes


def _add(
    part: pd.DataFrame,
    codes: Mapping[str, np.ndarray],
    reads: Sequence[_Reads],
    spec: TableSpec,
    out: Gathered,
) -> None:
    """``part``'s records (the table's from ``out.records + 1``) added to each fit's reads;
    a histogram's refusal (an integer column's value that is not whole) noted."""
    public, offset = _public_parent_codes(part, spec.public), out.records
    for r in reads:
        col, y = r.task.col, codes[r.task.col.name]
        try:
            if r.marginal is not None:
                r.marginal.add(marginal_records(col, y))
            if r.ph is not None:
                r.ph.add(histogram_records(col, list(r.parents), {**public, **codes}, y))
        except InputError as exc:
            out.refusal.note(r.task.j, column_refusal(exc, col.name), offset)
            continue
        if r.ph is not None:
            continue
        take = slice(None)
        if r.rows is not None:
            lo, hi = np.searchsorted(r.rows, [offset, offset + len(part)])
            take = r.rows[lo:hi] - offset
        for nm in r.names:
            r.values[nm].append(codes[nm][take])


def column_refusal(exc: InputError, name: str) -> InputError:
    """A column's refusal as the table's, naming the column (once); a
    :class:`dpsynth.errors.DataRefusal` stays one (a later partition's count still adds)."""
    if f"column {name!r}" in exc.message:
        return exc if isinstance(exc, DataRefusal) else InputError(exc.param, exc.message)
    if isinstance(exc, DataRefusal):
        head = f"column {name!r}: {exc.head}"
        return DataRefusal(exc.param, head, exc.noun, exc.hits, exc.first, exc.tail)
    return InputError(exc.param, f"column {name!r}: {exc.message}")


def _public_parent_codes(
    part: pd.DataFrame, public: Sequence[PublicColumn]
) -> dict[str, np.ndarray]:
    """The public level columns' codes as PH parents (missing: the first level). A value
    outside the levels is refused with the public columns, after this pass; here it is 0."""
    out = {}
    for c in public:
        if c.levels is None:
            continue
        try:
            out[c.name] = public_codes(part, public_encoder(part, c))
        except InputError:
            out[c.name] = np.zeros(len(part))
    return out


def _start_sums(sums: Callable[[], Any] | None, out: Gathered) -> None:
    """The verdict's empty sums (a table the verdict cannot read: none, and why)."""
    if sums is None:
        return
    try:
        out.sums = sums()
    except (InputError, ValueError, KeyError) as exc:
        out.sums_reason = str(exc)


def _add_sums(part: pd.DataFrame, out: Gathered) -> None:
    """``part`` added to the verdict's sums; a refusal there makes the verdict unavailable
    (a verdict never blocks a release), with its reason."""
    if out.sums is None:
        return
    try:
        out.sums.add(part)
    except (InputError, ValueError, KeyError) as exc:
        out.sums, out.sums_reason = None, str(exc)


def _fit_inputs(r: _Reads, spec: TableSpec, every: dict[str, np.ndarray]) -> ConfidentialInputs:
    """One fit's confidential inputs, from what the reading collected for it (a column read on
    every record by several fits: one array, ``every``)."""
    histograms = {}
    if r.ph is not None:
        histograms["ph"] = r.ph.total()
    if r.marginal is not None:
        histograms["marginal"] = r.marginal.total()
    values = {}
    for nm, v in r.values.items():
        if r.rows is not None:
            values[nm] = np.concatenate(v)
            continue
        if nm not in every:
            every[nm] = np.concatenate(v)
        values[nm] = every[nm]
    r.values.clear()
    return ConfidentialInputs(
        values, fit_records=spec.fit_records, rows=r.rows, histograms=histograms
    )
