"""Benchmark: Liu (modips) Sections 5.1 and 5.2 at the paper's scale.

5,000 repetitions; m over the full grid 2..500 (``M_GRID``); binary and Gaussian data; BIT and
truncation. Prints wall time per section and in total. Usage::

    python benchmarks/bench_modips.py [--reps 5000] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dpsynth.modips_studies import (
    M_GRID,
    MULTI_RULES,
    study_combination_rules,
    study_m_effect,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=None, help="write the tidy results as CSV here")
    args = ap.parse_args()
    t_all = time.perf_counter()

    t0 = time.perf_counter()
    s51 = study_m_effect(m_values=M_GRID, reps=args.reps, rules=MULTI_RULES)
    t51 = time.perf_counter() - t0
    n51 = s51[["data_type", "n", "p", "lower", "upper", "bounding"]].drop_duplicates().shape[0]
    print(
        f"Section 5.1 (effect of m): {n51} settings x {len(M_GRID)} m values, "
        f"{args.reps} reps: {t51:.1f} s"
    )

    t0 = time.perf_counter()
    s52 = study_combination_rules(m_values=M_GRID, reps=args.reps, boundings=("bit", "truncation"))
    t52 = time.perf_counter() - t0
    n52 = s52[["data_type", "n", "p", "epsilon", "bounding"]].drop_duplicates().shape[0]
    print(
        f"Section 5.2 (combination rules): {n52} settings x {len(M_GRID)} m values, "
        f"{args.reps} reps: {t52:.1f} s"
    )

    total = time.perf_counter() - t_all
    print(f"Total: {total:.1f} s")
    table1 = s52[(s52.m.isin([0, 1, 10])) & (s52.bounding == "bit")].fillna({"p": -1.0})
    print("\nTable 1 analogue (coverage, m = 10, BIT):")
    piv = table1.pivot_table(
        index=["data_type", "epsilon", "n", "p"],
        columns="rule",
        values="coverage",
        dropna=False,
    )
    print(piv.dropna(how="all").round(3).to_string())
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        s51.to_csv(args.out / "modips_sec51.csv", index=False)
        s52.to_csv(args.out / "modips_sec52.csv", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
