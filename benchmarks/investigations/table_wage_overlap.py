"""Investigation: what keeps a table's wage regression from AIM's coefficient overlap.

On CPS 1988 (the benchmark of ``benchmarks/bench_table.py``, its ``dpsynth-table-histogram``
spec: the wage by a calibrated, marginal-centred censored beta regression on every column
before it, fitted to ``fit_records`` of the 28,155 records) the analysis' coefficients
overlap the confidential ones less than AIM's at epsilon 3 and 6. Two causes are possible:
the noise of a posterior drawn from a 2,000-record subsample (wider than the full file's
estimate), or a bias of the censored fit. This script separates them with seeded research
runs (never a release): the same spec at epsilon 6 with 2,000 records (two seeds) and with
8,000, and at epsilon 1,000 (``allow_large_epsilon``: the censoring bound is then so large
that no record is censored, which leaves the subsample's noise alone), all with the wage's
``calibrate_dispersion`` off, as before it existed; then at epsilon 6 with it on (the
default since). For each run: the
mean coefficient-interval overlap (``dpsynth.curator.table_verdict``), the R^2 of the analysis' OLS
fit on the synthetic table, and its schooling coefficient over the confidential one.

    .venv/bin/python benchmarks/investigations/table_wage_overlap.py [--all]

About 25 min on 2 cores (``--all`` adds a fit to every record at epsilon 6: 30 min more).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _record import write

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_table as bt  # noqa: E402

RUNS = (("eps6_k2000_seed1", 6.0, 2000, 1, False), ("eps6_k2000_seed2", 6.0, 2000, 2, False))
RUNS += (("eps6_k8000_seed1", 6.0, 8000, 1, False), ("eps1000_k2000_seed1", 1000.0, 2000, 1, False))
RUNS += (("matched_eps6_k2000_seed1", 6.0, 2000, 1, True),)
RUNS += (("matched_eps6_k2000_seed2", 6.0, 2000, 2, True),)
ALL_RUN = ("eps6_kall_seed1", 6.0, "all", 1, False)


def ols(frame: pd.DataFrame) -> tuple[float, float]:
    """R^2 and the schooling coefficient of the benchmark's analysis (OLS, region one-hot)."""
    predictors = ["education", "experience", "ethnicity", "smsa", "region", "parttime"]
    x = pd.get_dummies(frame[predictors], columns=["region"], drop_first=True).astype(float)
    x.insert(0, "(intercept)", 1.0)
    y = frame["lwage"].to_numpy(float)
    coef, *_ = np.linalg.lstsq(x.to_numpy(), y, rcond=None)
    resid = y - x.to_numpy() @ coef
    return float(1 - resid.var() / y.var()), float(coef[list(x.columns).index("education")])


def one_run(
    frame: pd.DataFrame, epsilon: float, k: int | str, seed: int, matched: bool
) -> dict[str, float]:
    """One seeded table of the histogram spec with ``fit_records = k`` and the wage's
    ``calibrate_dispersion`` set to ``matched``; its figures."""
    raw = bt.histogram_spec() if matched else bt.unmatched_histogram_spec()
    raw["fit_records"] = k
    syn, _ = bt.run_dpsynth_table(
        frame, epsilon, seed, raw, reference=False, allow_large_epsilon=epsilon > 20
    )
    scores = bt.score(frame, syn, bt.ANALYSIS)
    r2, school = ols(bt.coded(syn))
    _, school_conf = ols(bt.coded(frame))
    return {"overlap": scores["ci_overlap_mean"], "r2": r2, "school_ratio": school / school_conf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="add a fit to every record")
    args = parser.parse_args()
    start = time.perf_counter()
    frame = bt.cps1988()
    values: dict[str, float] = {"confidential_r2": ols(bt.coded(frame))[0]}
    for name, epsilon, k, seed, matched in RUNS + ((ALL_RUN,) if args.all else ()):
        for key, value in one_run(frame, epsilon, k, seed, matched).items():
            values[f"{name}_{key}"] = value
        print(f"{name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    settings = {"spec": "bench_table.histogram_spec", "sampler": bt.CPS_SAMPLER_SETTINGS}
    write("table_wage_overlap", values, {**settings, "all": args.all}, start)


if __name__ == "__main__":
    main()
