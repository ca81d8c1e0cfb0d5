"""The file formats a curator's tables come in and go out as: CSV, Parquet (a file or a
directory of partitions, through pyarrow), Stata ``.dta`` and SAS ``.sas7bdat`` in; CSV or
Parquet out, by the file's extension.

Only the values are read: a column's type and levels come from the spec, never from a
file's metadata (a Stata value label or a Parquet dictionary becomes plain text, whose
levels the spec states). The scientific stack is imported on use.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

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


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns (a Stata value label, a Parquet dictionary) as plain values."""
    import pandas as pd

    for name in frame.columns:
        if isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype(object)
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def read_table(path: str | Path, param: str) -> pd.DataFrame:
    """The whole table at ``path`` in its format (:func:`input_format`); a file that cannot
    be read is refused naming ``param``, an empty one too."""
    import pandas as pd

    p, kind = Path(path), input_format(path)
    try:
        if kind == "csv":
            frame = pd.read_csv(p, encoding="utf-8-sig")
        elif kind == "parquet":
            frame = pd.read_parquet(p)
        elif kind == "stata":
            frame = pd.read_stata(p, convert_categoricals=True)
        else:
            frame = pd.read_sas(p, format="sas7bdat", encoding="utf-8")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError):
        raise InputError(
            param, f"cannot be parsed as {kind.upper() if kind == 'csv' else kind}"
        ) from None
    except Exception:  # noqa: BLE001 - a reader's own error type: one refusal naming the file
        raise InputError(param, f"cannot be read as {kind}: {p.name}") from None
    frame = _plain(frame)
    if len(frame) == 0:
        raise InputError(param, "the data are empty")
    return frame


def write_table(frame: pd.DataFrame, path: str | Path, fmt: str) -> None:
    """Write ``frame`` to ``path`` as ``fmt`` (``"csv"`` or ``"parquet"``), without its index."""
    if fmt == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def level_text(value: object) -> str:
    """A level as text, so that a file's 1, 1.0 and "1" are the spec's level "1" (a CSV
    column with missing values reads as float, a Parquet one keeps its integers): a
    column's levels are the spec's, whatever type the file stored them in."""
    if isinstance(value, float) and value.is_integer():  # numpy floats are floats
        return str(int(value))
    return str(value)


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
