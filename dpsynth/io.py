"""Files in and out: the one JSON converter, strict JSON text and atomic writes."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any, *, finite: bool = True) -> Any:
    """``obj`` as plain JSON values: mappings with string keys, lists, Python numbers.

    numpy scalars and arrays become Python numbers and lists, tuples lists, sets sorted
    lists, paths strings. With ``finite`` (the default), NaN and infinities become ``None``
    (strict JSON has no such numbers); without it they are kept as floats.
    """
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v, finite=finite) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v, finite=finite) for v in obj]
    if isinstance(obj, set | frozenset):
        return [jsonable(v, finite=finite) for v in sorted(obj, key=repr)]
    if isinstance(obj, np.ndarray):
        if _plain(obj, finite):
            return obj.tolist()  # the same values, at C speed (Stan data of 10^5 records)
        return jsonable(obj.tolist(), finite=finite)
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if (math.isfinite(v) or not finite) else None
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _plain(arr: np.ndarray, finite: bool) -> bool:
    """True if ``arr.tolist()`` is already plain JSON values (booleans, integers, floats that
    need no replacing)."""
    if arr.dtype.kind in "biu":
        return True
    return arr.dtype.kind == "f" and (not finite or bool(np.isfinite(arr).all()))


def to_json(obj: Any) -> str:
    """Strict, indented JSON text (no NaN or Infinity: they become null), newline-ended."""
    return json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n"
