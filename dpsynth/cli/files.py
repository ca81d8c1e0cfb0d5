"""The command line's files: input files checked from their header before anything is
read (a CSV's without the scientific stack; CSV, Parquet, Stata and SAS through
:mod:`dpsynth.formats`), output paths checked before anything is written, and the one
reader of an input column (:func:`read_input`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from dpsynth import formats
from dpsynth.errors import InputError, count_first, from_data

if TYPE_CHECKING:  # the scientific stack is imported only once the arguments are checked
    import pandas as pd


def check_output_paths(input_path: str, outputs: dict[str, str | None]) -> dict[str, Path]:
    """Output paths must be files in existing, writable folders, distinct from the input
    and from each other (so no run can overwrite the confidential data)."""
    seen = {_resolved(input_path): "IN.csv"}
    checked: dict[str, Path] = {}
    for flag, value in outputs.items():
        if value is None:
            continue
        if not str(value).strip():
            raise InputError(flag, "is an empty path: name a file")
        path = Path(value)
        key = _resolved(value)
        if key in seen:
            raise InputError(flag, f"is the same file as {seen[key]}")
        seen[key] = flag
        if path.is_dir():
            raise InputError(flag, f"{value} is a directory")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(flag, f"folder {folder} does not exist")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise InputError(flag, f"{value} is not writable")
        checked[flag] = path
    return checked


def _resolved(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def check_input_file(path: str, columns: list[str], param: str) -> list[str]:
    """Check an input file's existence and header, and that it has ``columns``.

    Reads the header only: a CSV's first line (no scientific stack; UTF-8), or a Parquet,
    Stata or SAS file's column names (:mod:`dpsynth.formats`). A missing column is refused
    with the list of the columns the file has, and a hint when a CSV header looks like
    another delimiter (``;`` or tab). Returns the header's names.
    """
    if not str(path).strip():
        raise InputError(param, "is an empty path: name a file")
    p = Path(path)
    if not p.exists():
        raise InputError(param, f"no such file: {path}")
    names = formats.header_names(p, param)
    if any(not h for h in names):
        raise InputError(param, f"column {names.index('') + 1} has an empty name")
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise InputError(param, f"duplicated column name(s): {', '.join(dupes)}")
    for column in columns:
        if column not in names:
            flag = "--column" if column == columns[0] else "--covariates"
            raise InputError(flag, f"no column {column!r} in {path}{_columns_hint(names)}")
    return names


def _columns_hint(names: list[str]) -> str:
    """The columns a file has, and a delimiter hint when its header looks like one column."""
    shown = ", ".join(repr(n) for n in names[:20]) + (" ..." if len(names) > 20 else "")
    hint = f"; its columns are {shown}"
    if len(names) == 1 and (";" in names[0] or "\t" in names[0]):
        sep = "semicolons" if ";" in names[0] else "tabs"
        hint += f" (the file seems to be separated by {sep}: save it with commas)"
    return hint


def read_csv(path: str, param: str, empty_param: str | None = None) -> pd.DataFrame:
    """The table at ``path`` in its format (a UTF-8 CSV, a BOM is fine; Parquet, Stata, SAS:
    :func:`dpsynth.formats.read_table`) with stripped header names; an unreadable file is
    refused naming ``param``, an empty one ``empty_param`` if given."""
    try:
        return formats.read_table(path, param)
    except InputError as exc:
        if exc.message == "the data are empty" and empty_param is not None:
            raise InputError(empty_param, exc.message) from None
        raise


def read_input(
    path: str, column: str, param: str, allow_missing: bool = False, regression: bool = False
) -> pd.DataFrame:
    """Read a UTF-8 CSV (a BOM is fine), refusing unreadable files and ambiguous headers.

    Missing outcome values are refused with the column's name and their count, unless
    ``allow_missing`` (``--drop-missing``: the library drops them); the refusal's hint
    offers ``--drop-missing`` without covariates and ``synthesize-table`` (a missingness
    indicator) for a ``regression``. Non-numeric and infinite values are always refused."""
    import numpy as np
    import pandas as pd

    check_input_file(path, [column], param)
    frame = read_csv(path, param, empty_param="--column")
    missing = frame[column].isna().to_numpy()
    if missing.any() and not allow_missing:
        hint = ""
        if param == "IN.csv":
            hint = (
                "; with --covariates, dropping them would tell whose outcome was missing: "
                "synthesize-table synthesizes a missingness indicator instead"
                if regression
                else "; --drop-missing drops such records"
            )
        raise InputError(
            "--column",
            f"column {column!r} of {path} has missing values "
            f"{from_data(count_first(missing, 'value'))}{hint}",
        )
    if formats.holds_times(frame[column]):
        raise InputError("--column", f"column {column!r} of {path} {formats.TIME_VALUES}")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) & ~missing)
    if bad.size:
        raise InputError(
            "--column",
            f"column {column!r} of {path} has a non-numeric or infinite value "
            f"{from_data(f'record {int(bad[0]) + 1}')}",
        )
    frame[column] = values
    return frame
