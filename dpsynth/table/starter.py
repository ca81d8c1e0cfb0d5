"""A starter table spec written from a PUBLIC file (``dpsynth init-spec``).

Every column of the public file (a public-use sample, an earlier period: never the
confidential file) becomes a confidential column with its type, its levels or its bounds as
seen in that file, the model the rule below names and, where that file has missing values, the
column's ``missing`` option (:func:`missing_line`), each marked for the curator to confirm.
Nothing else: every other option keeps its default. The bounds a release uses are
the curator's promise about the confidential data, which a public file can only suggest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import formats
from dpsynth.errors import InputError

MAX_LEVELS = 50
"""A text column with more distinct values than this is left out of the starter spec (free
text: dpsynth synthesizes level columns with public levels)."""

CONFIRM = "# confirm"
"""The mark on every line the curator must check before a release."""


def _toml(value: Any) -> str:
    """A TOML literal of a string, a number or a list of them."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _numeric(values: pd.Series) -> np.ndarray | None:
    """The values as finite floats when every one parses as a number, else None."""
    parsed = pd.to_numeric(values, errors="coerce")
    if parsed.isna().any():
        return None
    out = parsed.to_numpy(dtype=float)
    return out if np.isfinite(out).all() else None


def level_text(v: Any) -> str:
    """A level as the spec reads it: 1.0 and 1 alike (as :mod:`dpsynth.table.design` does)."""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _levels(values: pd.Series) -> list[str]:
    """Distinct values as text, in sorted order (numbers by value)."""
    distinct = pd.unique(values)
    numeric = _numeric(pd.Series(distinct))
    order = np.argsort(numeric, kind="stable") if numeric is not None else None
    texts = [level_text(v) for v in distinct]
    return [texts[i] for i in order] if order is not None else sorted(texts)


def continuous_model(lo: float, hi: float) -> tuple[str, str]:
    """(key, value) of a continuous column's starter: beta-regression on [0, 1], a log-normal
    regression on non-negative bounds, else a perturbed histogram on public bins (no shipped
    model takes negative values)."""
    if lo >= 0 and hi <= 1:
        return "model", "beta-regression"
    if lo >= 0:
        return "model", "lognormal-regression"
    return "mechanism", "ph"


def missing_line(values: pd.Series, model: bool, kind: str) -> list[str]:
    """A ``missing`` line where the public file has missing values: ``"indicator"`` for a
    model column, ``"level"`` for a histogram level column; a histogram of numbers, which
    takes neither, gets a comment for the curator. Nothing where no value is missing."""
    share = float(values.isna().mean())
    if share == 0:
        return []
    seen = f"{share:.0%} missing in the public file"
    if model:
        return [f'missing = "indicator"  {CONFIRM}: {seen}']
    if kind in ("binary", "categorical"):
        return [f'missing = "level"  {CONFIRM}: {seen}']
    return [f"# {seen}: a histogram of numbers has no missing cell; refused where the data has one"]


def column_entry(name: str, values: pd.Series) -> list[str] | None:
    """The TOML lines of one column (None: left out, with the reason as a comment line),
    with :func:`missing_line`."""
    seen = values.dropna()
    if seen.empty:
        return [f"# {name!r}: left out (no value in the public file)"]
    if formats.holds_times(seen):
        return [f"# {name!r}: left out (it {formats.TIME_VALUES})"]
    numbers = _numeric(seen)
    lines = ["[[confidential]]", f"name = {_toml(name)}"]
    if numbers is not None and np.unique(numbers).size > 2:
        lo, hi = float(numbers.min()), float(numbers.max())
        count = bool(np.all(numbers == np.round(numbers)) and lo >= 0)
        key, value = ("model", "negbin") if count else continuous_model(lo, hi)
        kind = "count" if count else "continuous"
        lines += [f'type = "{kind}"', f"{key} = {_toml(value)}  {CONFIRM}"]
        bounds = [math.floor(lo), math.ceil(hi)] if lo != hi else [lo, lo + 1]
        lines.append(f"bounds = {_toml(bounds)}  {CONFIRM}: seen in the public file")
        return lines + missing_line(values, key == "model", kind)
    levels = _levels(seen)
    if len(levels) > MAX_LEVELS:
        return [f"# {name!r}: left out ({len(levels)} distinct values: free text?)"]
    kind = "binary" if len(levels) <= 2 else "categorical"
    lines += [f'type = "{kind}"', f'mechanism = "ph"  {CONFIRM}']
    lines.append(f"levels = {_toml(levels)}  {CONFIRM}: seen in the public file")
    return lines + missing_line(values, False, kind)


def starter_spec(frame: pd.DataFrame, source: str) -> str:
    """The starter spec of a public ``frame`` read from ``source``, as TOML text."""
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise InputError("data", "the public file has no column or no record")
    head = [
        f"# A starter table spec from the PUBLIC file {source} (dpsynth init-spec).",
        "# Every line marked 'confirm' is a guess from that file: check each, move the columns",
        "# you publish as they are to [[public]] entries, and widen the bounds to what the",
        "# confidential file may hold (a record outside them is refused). Book: A whole table.",
        "",
        'neighbours = "substitution"',
        f"# reference = {_toml(source)}  {CONFIRM}: a public file of the same population",
        "",
    ]
    first: list[str] = []  # a histogram of a continuous column comes first (spec rule)
    body: list[str] = []
    for name in frame.columns:
        lines = column_entry(str(name), frame[name])
        if 'mechanism = "ph"' in "\n".join(lines) and 'type = "continuous"' in lines:
            if first:
                lines = [f"# {str(name)!r}: left out (negative values: no shipped model, and "
                         "only one continuous histogram column can come first)"]  # fmt: skip
            else:
                first = [*lines, ""]
                continue
        body += [*lines, ""]
    return "\n".join(head + first + body)
