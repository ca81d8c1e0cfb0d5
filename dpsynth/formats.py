"""The file formats a curator's tables come in and go out as: CSV, Parquet (a file or a
directory of partitions, through pyarrow), Stata ``.dta`` and SAS ``.sas7bdat`` in; CSV or
Parquet out, by the file's extension.

Only the values are read (a blank text value of Stata and SAS, their missing text, as
missing): a column's type and levels come from the spec, never from a file's metadata (a Stata
value label or a Parquet dictionary becomes plain text, whose levels the spec states). The
scientific stack is imported on use.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsynth.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

READERS: dict[str, str] = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".dta": "stata",
    ".sas7bdat": "sas",
}
"""File extension -> format read; any other name is read as CSV, a directory as Parquet
partitions."""

WRITERS: dict[str, str] = {".parquet": "parquet", ".pq": "parquet"}
"""File extension -> format written; any other name is written as CSV."""


def input_format(path: str | Path) -> str:
    """The format ``path`` is read as (a directory: a Parquet dataset of partitions)."""
    p = Path(path)
    if p.is_dir():
        return "parquet"
    return READERS.get(p.suffix.lower(), "csv")


def output_format(path: str | Path) -> str:
    """The format ``path`` is written as: Parquet by its extension, else CSV."""
    return WRITERS.get(Path(path).suffix.lower(), "csv")


def _partitions(path: Path) -> list[Path]:
    """A directory's Parquet files, in name order (refused when there is none)."""
    files = sorted(
        q for q in path.rglob("*") if q.is_file() and q.suffix.lower() in (".parquet", ".pq")
    )
    if not files:
        raise InputError("data", f"{path} holds no .parquet file")
    return files


def header(path: str | Path, param: str) -> list[str]:
    """The column names of a Parquet, Stata or SAS file without reading its values."""
    p, kind = Path(path), input_format(path)
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(_partitions(p)[0] if p.is_dir() else p).names)
        import pandas as pd

        if kind == "stata":
            with pd.read_stata(p, iterator=True) as reader:
                return list(reader.variable_labels())
        if kind == "sas":
            with pd.read_sas(p, format="sas7bdat", iterator=True) as reader:
                return [str(c) for c in reader.column_names]
    except InputError as exc:
        raise InputError(param, exc.message) from None
    except Exception:  # noqa: BLE001 - any reader's failure is one refusal naming the file
        raise InputError(param, f"cannot be read as {kind}: {p.name}") from None
    raise InputError(param, f"{p.name} is read as CSV, not by this function")


def header_names(path: str | Path, param: str) -> list[str]:
    """The stripped column names of ``path`` in its format (a directory: Parquet partitions),
    from its header only (a CSV's first line, without the scientific stack)."""
    p = Path(path)
    if input_format(p) != "csv":
        return [str(h).strip() for h in header(p, param)]
    if p.is_dir():
        raise InputError(param, f"{p} is a directory")
    try:
        with p.open(encoding="utf-8-sig", newline="") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise InputError(param, "is not UTF-8 text (save it as UTF-8 CSV)") from None
    except OSError:
        raise InputError(param, f"cannot read {p}") from None
    if not first:
        raise InputError(param, "is empty")
    return [h.strip() for h in first]


def record_count(path: str | Path, param: str, columns: Sequence[str] | None = None) -> int:
    """The records of an input file, counted without using a value: a Parquet file's
    metadata; any other format's partitions as :func:`read_partitions` reads them (the same
    reader, options and ``columns``), counted and dropped. One counter for both, so the
    count the release checks after its read (``dpsynth.table.pipeline.synthesize_table``)
    agrees with it on every file, whatever lines the file holds (a line of blanks, which
    Python's ``csv`` module would count and pandas skips). Public under the substitution
    relation (a table's only one)."""
    p = Path(path)
    kind = input_format(p)
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq

            parts = _partitions(p) if p.is_dir() else [p]
            return sum(pq.ParquetFile(q).metadata.num_rows for q in parts)
        except Exception:  # noqa: BLE001 - any reader's failure is one refusal naming the file
            raise InputError(param, f"cannot count the records of {p.name}") from None
    if columns is None:
        columns = header_names(p, param)[:1]
    return sum(len(part) for part in read_partitions(p, param, columns))


BLANK_IS_MISSING = ("stata", "sas")
"""Formats whose missing text value is the blank string (Stata's ``""``, SAS's all-blank
character value): read as missing, as a CSV's empty field is."""


def _plain(frame: pd.DataFrame, kind: str = "csv") -> pd.DataFrame:
    """Categorical columns (a Stata value label, a Parquet dictionary) as plain values; in a
    :data:`BLANK_IS_MISSING` format, a text value that is blank as missing."""
    import pandas as pd

    for name in frame.columns:
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype(object)
        if kind in BLANK_IS_MISSING and pd.api.types.is_string_dtype(frame[name].dtype):
            text = frame[name].map(lambda v: isinstance(v, str) and not v.strip())
            frame[name] = frame[name].mask(text.astype(bool))
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


PARTITION_RECORDS = 100_000
"""The records read, or written, at a time (:func:`read_partitions`, :func:`write_table`): a
partition's size, not the table's, bounds what reading and writing hold besides the result."""


def read_partitions(
    path: str | Path,
    param: str,
    columns: Sequence[str] | None = None,
    records: int = PARTITION_RECORDS,
) -> Iterator[pd.DataFrame]:
    """The table at ``path`` in partitions of at most ``records`` records, only the named
    ``columns`` (header names stripped; all when None): CSV in chunks, a Parquet file's or a
    directory's record batches, Stata and SAS through their chunked readers. A file that
    cannot be read is refused naming ``param`` (an empty one is the caller's to refuse)."""
    p, kind = Path(path), input_format(path)
    wanted = None if columns is None else {str(c).strip() for c in columns}
    with _refusals(param, kind, p):
        for part in _chunks(p, kind, wanted, records):
            part = _plain(part, kind)
            yield part if wanted is None else part[[c for c in part.columns if c in wanted]]


@contextlib.contextmanager
def _refusals(param: str, kind: str, p: Path) -> Iterator[None]:
    """A reader's failure as one refusal naming ``param`` (and the file)."""
    import pandas as pd

    try:
        yield
    except InputError:
        raise
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError):
        raise InputError(
            param, f"cannot be parsed as {kind.upper() if kind == 'csv' else kind}"
        ) from None
    except Exception:  # noqa: BLE001 - a reader's own error type: one refusal naming the file
        raise InputError(param, f"cannot be read as {kind}: {p.name}") from None


def _chunks(p: Path, kind: str, wanted: set[str] | None, records: int) -> Iterator[pd.DataFrame]:
    """The raw partitions of :func:`read_partitions` (names not yet stripped; only the
    ``wanted`` columns where the reader can skip the others: CSV and Parquet)."""
    import pandas as pd

    keep = None if wanted is None else (lambda c: str(c).strip() in wanted)
    if kind == "csv":
        with pd.read_csv(p, encoding="utf-8-sig", usecols=keep, chunksize=records) as reader:
            yield from reader
    elif kind == "parquet":
        import pyarrow.parquet as pq

        for f in _partitions(p) if p.is_dir() else [p]:
            handle = pq.ParquetFile(f)
            names = [n for n in handle.schema_arrow.names if keep is None or keep(n)]
            for batch in handle.iter_batches(batch_size=records, columns=names):
                yield batch.to_pandas()
    elif kind == "stata":  # every column read: read_partitions keeps the wanted ones
        with pd.read_stata(p, convert_categoricals=True, chunksize=records) as reader:
            yield from reader
    else:
        with pd.read_sas(p, format="sas7bdat", encoding="utf-8", chunksize=records) as reader:
            yield from reader


def read_table(path: str | Path, param: str) -> pd.DataFrame:
    """The whole table at ``path`` in its format (:func:`input_format`); a file that cannot
    be read is refused naming ``param``, an empty one too."""
    import pandas as pd

    p, kind = Path(path), input_format(path)
    with _refusals(param, kind, p):
        if kind == "csv":
            frame = pd.read_csv(p, encoding="utf-8-sig")
        elif kind == "parquet":
            frame = pd.read_parquet(p)
        elif kind == "stata":
            frame = pd.read_stata(p, convert_categoricals=True)
        else:
            frame = pd.read_sas(p, format="sas7bdat", encoding="utf-8")
    frame = _plain(frame, kind)
    if len(frame) == 0:
        raise InputError(param, "the data are empty")
    return frame


def write_table(
    frame: pd.DataFrame, path: str | Path, fmt: str, records: int = PARTITION_RECORDS
) -> None:
    """Write ``frame`` to ``path`` as ``fmt`` (``"csv"`` or ``"parquet"``), without its index,
    a partition of ``records`` records at a time (a Parquet row group each; CSV appended), so
    that writing holds one partition's conversion, not the whole table's."""
    parts = (frame.iloc[s : s + records] for s in range(0, max(len(frame), 1), records))
    write_parts(parts, path, fmt, _arrow_schema(frame) if fmt == "parquet" else None)


def write_parts(
    parts: Iterable[pd.DataFrame], path: str | Path, fmt: str, schema: Any = None
) -> None:
    """Write a table given as its ``parts`` (frames with the same columns, in order) to
    ``path`` as ``fmt``, one at a time: a Parquet row group each (``schema``: the table's,
    else the first part's, a column of no values there read as text), or CSV appended."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = None
        try:
            for part in parts:
                if writer is None:
                    if schema is None:
                        schema = _arrow_schema(part, text_if_empty=True)
                    writer = pq.ParquetWriter(path, schema)
                writer.write_table(pa.Table.from_pandas(part, schema, preserve_index=False))
        finally:
            if writer is not None:
                writer.close()
    else:
        for i, part in enumerate(parts):
            part.to_csv(path, index=False, mode="w" if i == 0 else "a", header=i == 0)


def _arrow_schema(frame: pd.DataFrame, text_if_empty: bool = False) -> Any:
    """``frame``'s Arrow schema, inferred a column at a time (``text_if_empty``: a column
    with no values there typed as text, the type of dpsynth's level columns)."""
    import pyarrow as pa

    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    if not text_if_empty:
        return schema
    for i, f in enumerate(schema):
        if pa.types.is_null(f.type):
            schema = schema.set(i, pa.field(f.name, pa.string()))
    return schema


def level_text(value: object) -> str:
    """A level as text, so that a file's 1, 1.0 and "1" are the spec's level "1" (a CSV
    column with missing values reads as float, a Parquet one keeps its integers): a
    column's levels are the spec's, whatever type the file stored them in."""
    if isinstance(value, float) and value.is_integer():  # numpy floats are floats
        return str(int(value))
    return str(value)


TIME_VALUES = (
    "holds dates or times, which dpsynth does not read as numbers (the number a file gives a "
    "date depends on its format's unit): convert them to a number, such as days since a "
    "public date, before the release"
)
"""Why a column of dates or times (:func:`holds_times`) is refused where the spec reads
numbers, and left out of a starter spec."""

_TIME_KINDS = frozenset(
    {"date", "datetime", "datetime64", "time", "timedelta", "timedelta64", "period"}
)


def holds_times(values: pd.Series) -> bool:
    """Whether ``values`` are dates or times (a date, datetime, duration or period type, or
    Python date and time objects, as a Parquet date column reads): a kind of value, not a
    value, so it says nothing of any record."""
    import pandas as pd

    dtype = values.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        return True
    if isinstance(dtype, pd.PeriodDtype):
        return True
    return (
        pd.api.types.is_object_dtype(dtype)
        and pd.api.types.infer_dtype(values, skipna=True) in _TIME_KINDS
    )


def sha256(path: str | Path) -> str:
    """The dataset's identity for the budget file: the SHA-256 of the file, or of a Parquet
    directory's partitions (their names and bytes, in name order)."""
    p = Path(path)
    digest = hashlib.sha256()
    files = _partitions(p) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            digest.update(f.relative_to(p).as_posix().encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
