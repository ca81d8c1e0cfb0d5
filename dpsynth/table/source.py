"""The confidential table as a table release reads it from a file: in partitions
(``dpsynth.formats.read_partitions``: CSV in chunks, a Parquet file's or directory's
record batches, Stata and SAS chunks), only the spec's columns, each level column stored on
arrival as a categorical on the spec's levels (a small integer a record, not a text object).

Reading then holds the table's columns compactly plus one partition of the file, whatever
the file's other columns. The levels are the spec's: a value outside them is kept as an
extra category and refused, naming the column and the record, where the release encodes
the column (``dpsynth.table.design.level_codes``), exactly as from a data frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsynth import formats
from dpsynth.errors import InputError
from dpsynth.table.spec import PublicColumn, TableSpec

if TYPE_CHECKING:
    import pandas as pd


def spec_partitions(
    path: str | Path, spec: TableSpec, param: str, records: int = formats.PARTITION_RECORDS
) -> Iterator[pd.DataFrame]:
    """The spec's columns of the table at ``path``, ``records`` records at a time whatever
    the file's own partitions (:func:`rechunked`: what a release computes from them does
    not depend on how the file was written), each level column a categorical
    (:func:`compact`): what a table release reads, once (:mod:`dpsynth.table.gather`)."""
    parts = (compact(p, spec) for p in formats.read_partitions(path, param, spec.columns))
    yield from rechunked(parts, records)


def rechunked(parts: Iterable[pd.DataFrame], records: int) -> Iterator[pd.DataFrame]:
    """``parts`` (compact, in record order) as partitions of exactly ``records`` records but
    the last: at most two partitions held at a time."""
    held: list[pd.DataFrame] = []
    size = 0
    for part in parts:
        if not len(part):
            continue
        held.append(part)
        size += len(part)
        while size >= records:
            whole = held[0] if len(held) == 1 else concat_compact([p.copy() for p in held])
            yield whole.iloc[:records]
            rest = whole.iloc[records:]
            held, size = ([rest] if len(rest) else []), len(rest)
    if size:
        yield held[0] if len(held) == 1 else concat_compact([p.copy() for p in held])


def read_spec_columns(path: str | Path, spec: TableSpec, param: str) -> pd.DataFrame:
    """The spec's columns of the table at ``path`` as one table, read a partition at a
    time, each level column stored as a categorical on arrival (:func:`compact`); an empty
    table is refused naming ``param``."""
    parts = [p for p in spec_partitions(path, spec, param) if len(p)]
    if not parts:
        raise InputError(param, "the data are empty")
    return concat_compact(parts)


def level_columns(spec: TableSpec) -> dict[str, tuple[Any, ...] | None]:
    """The spec's level columns in the file, with their public levels (None: a public
    level column without stated levels, whose levels are its values)."""
    out: dict[str, tuple[Any, ...] | None] = {}
    for col in [*spec.public, *spec.confidential]:
        if getattr(col, "indicator_of", None) is not None:
            continue
        levels = col.levels if isinstance(col, PublicColumn) else col.public_levels
        if levels is not None or col.type in ("binary", "categorical"):
            out[col.name] = levels
    return out


def compact(part: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    """``part`` with every level column (:func:`level_columns`) as a categorical of its
    values' level text (``dpsynth.formats.level_text``): the spec's levels first, in the
    spec's order, then any other value seen (refused later by the column's encoding)."""
    import pandas as pd

    part = part.copy()
    for name, levels in level_columns(spec).items():
        text = part[name].map(formats.level_text, na_action="ignore")
        known = [] if levels is None else [formats.level_text(v) for v in levels]
        seen = set(known)
        extra = sorted({v for v in text.dropna().unique() if v not in seen})
        part[name] = pd.Categorical(text, categories=known + extra)
    return part


def concat_compact(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The partitions as one table, each categorical column on the union of its
    partitions' categories (in the order first seen), so that it stays categorical."""
    import pandas as pd

    for name in parts[0].columns:
        if not all(isinstance(p[name].dtype, pd.CategoricalDtype) for p in parts):
            continue
        union = list(dict.fromkeys(c for p in parts for c in p[name].cat.categories))
        for p in parts:
            p[name] = p[name].cat.set_categories(union)
    return pd.concat(parts, ignore_index=True)
