"""Investigation: what a PH column's calibrated marginal buys, and what it costs, on CPS 1988.

A PH column drawn given parents takes its marginal from the joint histogram, which sums
the noise of every parent cell (``dpsynth.table.spec.PH_CALIBRATION``). With
``calibrate_share = c`` it spends c of its share on a histogram of its own cells and rakes
its conditional draw to the noise-weighted blend of the two marginals. This script runs
the benchmark's ``dpsynth-table-histogram`` spec (``benchmarks/bench_table.py``) with the
wage by PH given schooling and experience instead of its regression (no Stan: the
question is about the histograms, and each run takes seconds), at epsilon 1, 3 and 6 and
c = 0 (off), 0.3 and 0.5 on schooling and experience, seeds 1-3 (seeded research runs,
never a release). For each (epsilon, c): the mean over the seeds of schooling's and
experience's one-way TVD and of the mean two-way TVD over all pairs (the benchmark's own
scores, ``bench_table.score``).

    .venv/bin/python benchmarks/investigations/table_ph_calibration.py

About 10 min on 2 cores.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _record import write

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_table as bt  # noqa: E402

EPSILONS = (1.0, 3.0, 6.0)
SHARES = (0.0, 0.3, 0.5)
SEEDS = (1, 2, 3)
CALIBRATED = bt.PH_CALIBRATED
FIGURES = ("tvd_education", "tvd_experience", "twoway_tvd_mean")


def histogram_only_spec() -> dict[str, Any]:
    """The benchmark's histogram spec with the wage by PH given schooling and experience on
    the scoring bins (14 public bins of each)."""
    raw = bt.histogram_spec()
    for col in raw["confidential"]:
        if col["name"] == "lwage":
            for key in ("model", "calibrate_bins", "calibrate_dispersion"):
                col.pop(key, None)
            col.update(mechanism="ph", type="continuous", given=list(CALIBRATED))
            col.update(bins=bt.SHAPE_BINS, given_bins=bt.SHAPE_BINS)
    return raw


def one_run(frame: Any, epsilon: float, share: float, seed: int) -> dict[str, float]:
    """One seeded table with ``calibrate_share = share`` on the two columns; its figures."""
    raw = histogram_only_spec()
    if share > 0:
        bt.with_keys(raw, CALIBRATED, calibrate_share=share)
    syn, _ = bt.run_dpsynth_table(frame, epsilon, seed, raw, reference=False)
    scores = bt.score(frame, syn, bt.ANALYSIS)
    return {key: scores[key] for key in FIGURES}


FLOOR_DRAWS = 50


def sampling_floor(frame: Any, names: tuple[str, ...] = CALIBRATED) -> dict[str, float]:
    """Each calibrated column's mean one-way TVD (the benchmark's bins) of n records drawn
    from its own confidential marginal (a bootstrap of the column, seeded): what drawing n
    synthetic records costs even from the true distribution."""
    from dpsynth.curator import table_verdict as tv

    rng = np.random.default_rng(29)
    cols = {c.name: c for c in tv.describe(list(bt.columns_info()))}
    conf = bt.coded(frame)
    out = {}
    for name in names:
        values = conf[name].to_numpy()
        draws = (pd.Series(rng.choice(values, size=len(values))) for _ in range(FLOOR_DRAWS))
        tvds = [tv.column_figures(cols[name], conf[name], d)["one_way_tvd"] for d in draws]
        out[f"floor_tvd_{name}"] = float(np.mean(tvds))
    return out


def main() -> None:
    start = time.perf_counter()
    frame = bt.cps1988()
    values: dict[str, float] = sampling_floor(frame)
    for epsilon in EPSILONS:
        for share in SHARES:
            runs = [one_run(frame, epsilon, share, seed) for seed in SEEDS]
            for key in FIGURES:
                mean = float(np.mean([r[key] for r in runs]))
                values[f"eps{epsilon:g}_c{round(10 * share)}_{key}"] = mean  # c in tenths
            print(f"epsilon {epsilon:g}, c {share:g}: done", flush=True)
    settings = {"epsilons": EPSILONS, "shares": SHARES, "seeds": SEEDS, "columns": CALIBRATED}
    write("table_ph_calibration", values, settings, start)


if __name__ == "__main__":
    main()
