"""Investigation: what drawing a table's records systematically buys, on CPS 1988.

A synthetic set drawn from a noisy histogram carries two noises: the Laplace noise of the
histogram, and the sampling noise of drawing n records from its shares. Independent draws
(the censoring paper's supplement) leave a one-way TVD of about the same size as a sample
of n from the confidential marginal itself; systematic draws (``table.TABLE_PH``,
``histogram.drawn_cells``) give every cell its noisy share of the records to within one.
This script runs the benchmark's calibrated histogram spec (``dpsynth-table-calibrated``
of ``benchmarks/bench_table.py``) with the wage by PH given schooling and experience
instead of its regression, as ``table_ph_calibration.py`` does (no Stan: each run takes
seconds), at epsilon 1, 3 and 6, with draw "iid" and "systematic", seeds 1-3 (seeded
research runs, never a release). For each (epsilon, draw): the mean over the seeds of the
numeric columns' one-way TVD, of the mean and largest two-way TVD over all pairs and of
the analysis' mean coefficient-interval overlap (the benchmark's own scores,
``bench_table.score``).

    .venv/bin/python benchmarks/investigations/table_ph_draw.py

About 10 min on 2 cores.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from _record import write
from table_ph_calibration import histogram_only_spec, sampling_floor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_table as bt  # noqa: E402

from dpsynth.table import pipeline  # noqa: E402

EPSILONS = (1.0, 3.0, 6.0)
DRAWS = ("iid", "systematic")
SEEDS = (1, 2, 3)
FIGURES = (
    "tvd_education",
    "tvd_experience",
    "tvd_lwage",
    "twoway_tvd_mean",
    "twoway_tvd_max",
    "ci_overlap_mean",
)


def one_run(frame: Any, epsilon: float, draw: str, seed: int) -> dict[str, float]:
    """One seeded table, its PH histograms drawn by ``draw``; its figures."""
    raw = histogram_only_spec()
    bt.with_keys(raw, bt.PH_CALIBRATED, calibrate_share=bt.PH_CALIBRATE_SHARE)
    with mock.patch.dict(pipeline.TABLE_PH, draw=draw):
        syn, _ = bt.run_dpsynth_table(frame, epsilon, seed, raw, reference=False)
    scores = bt.score(frame, syn, bt.ANALYSIS)
    return {key: scores[key] for key in FIGURES}


def main() -> None:
    start = time.perf_counter()
    frame = bt.cps1988()
    values: dict[str, float] = sampling_floor(frame, (*bt.PH_CALIBRATED, "lwage"))
    for epsilon in EPSILONS:
        for draw in DRAWS:
            runs = [one_run(frame, epsilon, draw, seed) for seed in SEEDS]
            for key in FIGURES:
                values[f"eps{epsilon:g}_{draw}_{key}"] = float(np.mean([r[key] for r in runs]))
            print(f"epsilon {epsilon:g}, {draw}: done", flush=True)
    settings = {"epsilons": EPSILONS, "draws": DRAWS, "seeds": SEEDS, "spec": "calibrated"}
    write("table_ph_draw", values, settings, start)


if __name__ == "__main__":
    main()
