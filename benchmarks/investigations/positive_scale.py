"""Investigation: the Stan scale of a log-normal outcome with a positive public lower bound.

A log-normal model column with public bounds [lo, hi] was fitted to
log((y - lo + pad) / (hi - lo + 2 pad)), the beta model's map: a model of y - lo, not of y.
Where lo is a floor the data sit near (CPS weekly wages from 50 dollars, Wage's from 20
thousand), that stretches the records just above it far into the left tail of log(y - lo).
Since the fix the scale is y / hi when lo > 0 (``dpsynth.models.scaling.positive_to_scale``),
a change of units. This script isolates the map from everything else a release does: on each
real table of ``benchmarks/bench_defaults.py`` at the held-out size (``HELD_OUT_SIZES``; its
seeded split), the analysis' outcome alone is synthesized, every other column copied, by
an ideal log-normal regression on every other column, without privacy noise: one draw of
(beta, sigma) from its exact posterior under a flat prior (sigma^2 from the scaled inverse
chi-square, beta given sigma normal around the least-squares fit), the records simulated
and mapped back, clipped to the public bounds. The two maps use the same random numbers
(replicate r's seed). Each synthetic table is judged by the release's own verdict
(``dpsynth.table.pipeline.table_verdict_of``). Per table and map: the share of replicates
rated poor, the share rated poor for a coefficient, the median worst coefficient overlap, the
residual spread on the fitted scale and the outcome's one-way TVD (the verdict's figure).

    .venv/bin/python benchmarks/investigations/positive_scale.py [--replicates 50]

About 5 min on one core (the verdicts' pMSE fits dominate).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _record  # noqa: E402
import bench_defaults  # noqa: E402

from dpsynth.curator.column_verdict import FAIR_CI_OVERLAP  # noqa: E402
from dpsynth.models.scaling import unit_pad  # noqa: E402
from dpsynth.table.pipeline import table_verdict_of  # noqa: E402
from dpsynth.table.spec import load_spec  # noqa: E402

TABLES = ("cps", "wage", "nmes")
MAPS = ("shifted", "scaled")
"""``shifted``: log(y - lo + pad), the map before the fix; ``scaled``: log y (y / hi: the
constant log hi moves the intercept only)."""


def _design(frame: pd.DataFrame, outcome: str) -> np.ndarray:
    """Every other column as the outcome's regressors: levels one-hot (first dropped),
    numbers as they are, and an intercept."""
    others = frame.drop(columns=[outcome])
    X = pd.get_dummies(others, drop_first=True).astype(float)
    return np.column_stack([np.ones(len(frame)), X.to_numpy()])


def _forward(y: np.ndarray, bounds: tuple[float, float], how: str) -> np.ndarray:
    lo, hi = bounds
    return np.log(y - lo + unit_pad(lo, hi)) if how == "shifted" else np.log(y)


def _back(z: np.ndarray, bounds: tuple[float, float], how: str) -> np.ndarray:
    lo, hi = bounds
    y = np.exp(z) + lo - unit_pad(lo, hi) if how == "shifted" else np.exp(z)
    return np.clip(y, lo, hi)


def ideal_draw(X: np.ndarray, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One posterior predictive draw of a normal linear model of ``z`` under a flat prior."""
    n, p = X.shape
    b, *_ = np.linalg.lstsq(X, z, rcond=None)
    s2 = float(np.sum((z - X @ b) ** 2)) / (n - p)
    sigma2 = (n - p) * s2 / rng.chisquare(n - p)
    chol = np.linalg.cholesky(np.linalg.inv(X.T @ X) * sigma2)
    beta = b + chol @ rng.standard_normal(p)
    return X @ beta + np.sqrt(sigma2) * rng.standard_normal(n)


def table_runs(table: str, replicates: int, seed: int) -> dict[str, Any]:
    """Both maps on ``table``: the figures this script records (prefixed by table and map)."""
    info = bench_defaults.TABLES[table]
    info["n"], info["reference_n"] = bench_defaults.HELD_OUT_SIZES[table]
    conf, _ = bench_defaults.frames(table)
    raw = info["spec"]
    spec = load_spec(raw)
    outcome = bench_defaults.analysis_outcome(raw)
    bounds = tuple(float(v) for v in next(c for c in spec.confidential if c.name == outcome).bounds)
    X, y = _design(conf, outcome), conf[outcome].to_numpy(float)
    values: dict[str, Any] = {f"{table}_n": len(conf), f"{table}_lower": bounds[0]}
    for how in MAPS:
        z = _forward(y, bounds, how)
        resid = z - X @ np.linalg.lstsq(X, z, rcond=None)[0]
        runs = []
        for r in range(replicates):
            rng = np.random.default_rng([seed, r])  # the same numbers for both maps
            syn = conf.copy()
            syn[outcome] = _back(ideal_draw(X, z, rng), bounds, how)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                verdict = table_verdict_of(conf, syn, spec)
            figures = verdict["figures"]
            overlaps = [f["value"] for f in figures if f["figure"] == "ci_overlap"]
            tvd = next(
                f["value"]
                for f in figures
                if f["figure"] == "one_way_tvd" and f["columns"] == [outcome]
            )
            figure = verdict.get("driven_by", {}).get("figure")
            runs.append((verdict["verdict"], figure, min(overlaps), tvd))
        key = f"{table}_{how}"
        values[f"{key}_spread"] = float(resid.std())
        values[f"{key}_poor"] = float(np.mean([v == "poor" for v, *_ in runs]))
        values[f"{key}_poor_coef"] = float(
            np.mean([v == "poor" and f == "ci_overlap" for v, f, *_ in runs])
        )
        worst = np.array([w for *_, w, _ in runs])
        values[f"{key}_worst_median"] = float(np.median(worst))
        values[f"{key}_worst_below_fair"] = float(np.mean(worst < FAIR_CI_OVERLAP))
        values[f"{key}_tvd_median"] = float(np.median([t for *_, t in runs]))
        print(key, {k: v for k, v in values.items() if k.startswith(key)}, flush=True)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20_261_130)
    args = parser.parse_args()
    start, values = time.perf_counter(), {}
    for table in TABLES:
        values |= table_runs(table, args.replicates, args.seed)
    values["replicates"] = args.replicates
    _record.write(
        "positive_scale", values, {"replicates": args.replicates, "seed": args.seed}, start
    )


if __name__ == "__main__":
    main()
