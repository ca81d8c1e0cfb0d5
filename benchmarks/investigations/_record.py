"""Shared by the investigations: write one investigation's figures as a committed CSV.

Each script of ``benchmarks/investigations/`` answers a question the book's page "Where the
papers leave a choice" (``book/choices.md``) discusses, and writes
``benchmarks/results/investigations/<name>.csv`` (columns ``quantity, value``) and
``<name>.json`` (date, wall seconds, settings, dpsynth version). The page reads them at build
time and glues the values into its text, so no figure there is typed by hand.
"""

from __future__ import annotations

import datetime
import json
import platform
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpsynth.io import jsonable

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results" / "investigations"


def write(name: str, values: Mapping[str, Any], settings: Mapping[str, Any], start: float) -> Path:
    """Write ``values`` (quantity -> number) and the run's meta; print them; return the CSV."""
    from dpsynth import __version__

    OUT.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(
        {"quantity": list(values), "value": [jsonable(v) for v in values.values()]}
    )
    path = OUT / f"{name}.csv"
    frame.to_csv(path, index=False, float_format="%.10g", lineterminator="\n")
    meta = {
        "script": f"benchmarks/investigations/{name}.py",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "machine": f"{platform.machine()}, {_cores()} cores",
        "python": sys.version.split()[0],
        "dpsynth": __version__,
        "settings": jsonable(dict(settings)),
    }
    (OUT / f"{name}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(frame.to_string(index=False))
    print(f"wrote {path.relative_to(ROOT)} ({meta['wall_seconds']} s)")
    return path


def _cores() -> int:
    import os

    return os.cpu_count() or 1
