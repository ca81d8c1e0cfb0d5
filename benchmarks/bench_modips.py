"""Benchmark: Liu (modips) Sections 5.1 and 5.2 at the paper's scale.

5,000 repetitions; m over the full grid 2..500 (``M_GRID``); binary and Gaussian data; BIT and
truncation. Prints wall time and CPU time (this process plus its workers) per section and in
total; CPU time does not depend on how busy the machine is. Usage::

    python benchmarks/bench_modips.py [--reps 5000] [--workers 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pandas as pd

from dpsynth.studies.modips_simulation import (
    M_GRID,
    MULTI_RULES,
    study_combination_rules,
    study_m_effect,
)


def _cpu() -> float:
    """CPU seconds used so far by this process and its finished children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def _timed(label: str, fn, n_settings: int) -> tuple[pd.DataFrame, float, float]:
    w0, c0 = time.perf_counter(), _cpu()
    out = fn()
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    print(
        f"{label}: {n_settings(out)} settings x {len(M_GRID)} m values: "
        f"wall {wall:.1f} s, CPU {cpu:.1f} s",
        flush=True,
    )
    return out, wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=2, help="processes (settings run in parallel)")
    ap.add_argument("--out", type=Path, default=None, help="write the tidy results as CSV here")
    args = ap.parse_args()
    print(f"{args.reps} repetitions, m grid {M_GRID}, {args.workers} worker(s)", flush=True)

    s51, w51, c51 = _timed(
        "Section 5.1 (effect of m)",
        lambda: study_m_effect(
            m_values=M_GRID, reps=args.reps, rules=MULTI_RULES, workers=args.workers
        ),
        lambda d: (
            d[["data_type", "n", "p", "lower", "upper", "bounding"]].drop_duplicates().shape[0]
        ),
    )
    s52, w52, c52 = _timed(
        "Section 5.2 (combination rules)",
        lambda: study_combination_rules(
            m_values=M_GRID, reps=args.reps, boundings=("bit", "truncation"), workers=args.workers
        ),
        lambda d: d[["data_type", "n", "p", "epsilon", "bounding"]].drop_duplicates().shape[0],
    )
    print(f"Total: wall {w51 + w52:.1f} s, CPU {c51 + c52:.1f} s", flush=True)

    table1 = s52[(s52.m.isin([0, 1, 10])) & (s52.bounding == "bit")].fillna({"p": -1.0})
    piv = table1.pivot_table(
        index=["data_type", "epsilon", "n", "p"], columns="rule", values="coverage"
    )
    cols = ["original", "thm7", "raab", "raghunathan", "rubin", "single"]
    print("\nTable 1 analogue (coverage of 95% CIs, m = 10, BIT; p = -1: Gaussian):")
    print(piv.sort_index(ascending=[True, False, True, False])[cols].round(3).to_string())
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        s51.to_csv(args.out / "modips_sec51.csv", index=False)
        s52.to_csv(args.out / "modips_sec52.csv", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
