"""The published table of a whole-table release, made a partition at a time.

A table release draws each confidential column's m synthetic sets as numbers (a level
column's as codes, :func:`dpsynth.table.pipeline.synthesize_table`); the table it publishes
(the public columns copied, the confidential ones decoded to their levels, m sets one after
another) is made from them ``dpsynth.formats.PARTITION_RECORDS`` records at a time
(:meth:`dpsynth.table.published.SyntheticTable.parts`) when it is written and when its
verdict's sums are added, so that the release never holds it whole.
:class:`TableRelease` makes it whole only when its ``data`` is read (the API's frame).
A table larger than ``dpsynth.models.synthesis.DRAW_ROWS`` records is not held drawn: its
columns' draws took their steps at a pilot (the table's public random step rows), and
:class:`PartitionDraw` draws each of its partitions from the fits and those steps when the
partition is published (each column, set and partition from its own stream, so the same
partition drawn again is the same records). Nothing here reads a confidential value: the
sets are synthetic and the columns public.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import entropy, formats
from dpsynth.release.single import SET_COLUMN, Release
from dpsynth.table.columns import ColumnPlan, PublicInputs, kind_of, partition_inputs
from dpsynth.table.design import decoded
from dpsynth.table.spec import ConfidentialColumn, TableSpec


@dataclass(frozen=True)
class PartitionDraw:
    """A table's synthetic sets drawn a partition (``records`` records) at a time: each
    column's fit (its published draws and public settings) and what its pilot fixed (the
    draws after their steps, the PH shares, the histogram samples' order), the public
    inputs of every record (without synthetic sets) and the draw seed (never published)."""

    order: tuple[ConfidentialColumn, ...]
    plans: Mapping[str, ColumnPlan]
    pub: PublicInputs
    seed: int
    records: int = formats.PARTITION_RECORDS
    progress: bool = False  # a line on the terminal each tenth of a set's partitions

    @classmethod
    def of(
        cls,
        spec: TableSpec,
        plans: Mapping[str, ColumnPlan],
        pub: PublicInputs,
        seed: int | None,
        progress: bool = False,
    ) -> PartitionDraw:
        """The partition draw of ``spec``'s columns from their fits and pilots (``plans``)."""
        pub = PublicInputs(pub.public, {}, (), pub.m, pub.public_columns)
        seed = entropy.draw_seed(seed)
        return cls(spec.order(), dict(plans), pub, seed, formats.PARTITION_RECORDS, progress)

    def columns(self, k: int, p: int) -> dict[str, np.ndarray]:
        """Set k's synthetic values at partition p, each column in synthesis order."""
        start = p * self.records
        rows = slice(start, min(start + self.records, self.pub.n))
        pub = partition_inputs(self.pub, rows)
        for j, col in enumerate(self.order):
            fit, plan = self.plans[col.name]
            rng = entropy.partition_stream(self.seed, j, k, p)
            pub = pub.with_column(col, [kind_of(col).part(fit, plan, pub, k, rows, rng)])
        total = -(-self.pub.n // self.records)
        if self.progress and ((p + 1) % max(1, total // 10) == 0 or p + 1 == total):
            print(f"[dpsynth] set {k + 1}/{self.pub.m}: {p + 1} of {total} partitions drawn",
                  file=sys.stderr, flush=True)  # fmt: skip
        return {name: sets[0] for name, sets in pub.synthetic.items()}


@dataclass(frozen=True)
class SyntheticTable:
    """A table release's published records: the public columns (``public``, n records),
    each confidential column's m synthetic sets (``synthetic``, on the codes' scale; empty
    where ``draw`` draws them a partition at a time) and the spec that decodes them, m sets
    long (a ``set`` column first when m > 1)."""

    public: pd.DataFrame
    spec: TableSpec
    synthetic: Mapping[str, tuple[np.ndarray, ...]]
    m: int
    n: int
    draw: PartitionDraw | None = None  # a table drawn a partition at a time (no ``synthetic``)

    def __len__(self) -> int:
        return self.n * self.m

    def set_parts(self, k: int, records: int = formats.PARTITION_RECORDS) -> Iterator[pd.DataFrame]:
        """Set k (from 0) ``records`` records at a time, in record order (within the
        partitions a partition draw makes)."""
        if self.draw is None:
            for start in range(0, max(self.n, 1), records):
                stop = min(start + records, self.n)
                values = {c.name: self.synthetic[c.name][k][start:stop] for c in self.spec.order()}
                yield self._part(k, start, stop, values)
            return
        size = self.draw.records
        for p, first in enumerate(range(0, self.n, size)):
            drawn = self.draw.columns(k, p)
            for start in range(first, min(first + size, self.n), records):
                stop = min(start + records, first + size, self.n)
                values = {name: v[start - first : stop - first] for name, v in drawn.items()}
                yield self._part(k, start, stop, values)

    def parts(self, records: int = formats.PARTITION_RECORDS) -> Iterator[pd.DataFrame]:
        """The published table ``records`` records at a time: set 1's, then set 2's, ..."""
        for k in range(self.m):
            yield from self.set_parts(k, records)

    def frame(self) -> pd.DataFrame:
        """The published table whole (its parts joined)."""
        return pd.concat(list(self.parts()), ignore_index=True)

    def _part(
        self, k: int, start: int, stop: int, values: Mapping[str, np.ndarray]
    ) -> pd.DataFrame:
        """Records ``start:stop`` of set k: public columns copied, confidential ones (set k's
        ``values`` there) decoded."""
        names = [c.name for c in self.spec.public]
        if names:
            out = self.public.iloc[start:stop][names].reset_index(drop=True)
        else:  # no public column: the frame gathered for them may have no records
            out = pd.DataFrame(index=pd.RangeIndex(stop - start))
        for col in self.spec.order():
            out[col.name] = decoded(col, values[col.name])  # index 0..
        if self.m > 1:
            out.insert(0, SET_COLUMN, k + 1)
        return out


class TableRelease(Release):
    """A whole table's :class:`~dpsynth.release.single.Release`: ``data`` is made from its
    :class:`SyntheticTable` on first use; :meth:`write` writes the table a partition at a
    time without making it whole (unless ``data`` was read or set)."""

    def __init__(
        self,
        table: SyntheticTable,
        report: dict[str, Any],
        diagnostics: dict[str, Any],
        confidential: Any = None,
    ) -> None:
        self.table = table
        super().__init__(None, report, diagnostics, confidential)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def data(self) -> pd.DataFrame:
        """The published table, m sets long (made whole here, once)."""
        if self._frame is None:
            self._frame = self.table.frame()
        return self._frame

    @data.setter
    def data(self, frame: pd.DataFrame | None) -> None:
        self._frame = frame

    def write_data(self, path: str | Path, fmt: str) -> None:
        """The published table to ``path``, a partition at a time."""
        if self._frame is not None:
            super().write_data(path, fmt)
        else:
            formats.write_parts(self.table.parts(), path, fmt)
