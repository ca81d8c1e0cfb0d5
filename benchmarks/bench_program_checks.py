"""Benchmark: what the differential checks of a user program add to a censored release.

A Censor_uw release (epsilon 8, substitution, one set, the default sampler) of the test
program ``tests/stan/honest_normal.stan`` on N(1, 1) data, with the checks
(:func:`dpsynth.models.program_checks.check_program`) timed on their own. Prints, per n, the
whole release and the checks' share. Usage:

    .venv/bin/python benchmarks/bench_program_checks.py [--n 2000 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from dpsynth.models import program_checks
from dpsynth.models.catalogue import Model
from dpsynth.release.single import synthesize

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "stan" / "honest_normal.stan"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = Model.from_stan_file(PROGRAM, "real")
    spent: list[float] = []
    original = program_checks.check_program

    def timed(*a, **k):
        start = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            spent.append(time.perf_counter() - start)

    program_checks.check_program = timed
    print("n, release s (median), checks s (median), checks share")
    for n in args.n:
        y = np.random.default_rng(n).normal(1.0, 1.0, n)
        totals, checks = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            synthesize(y, model=model, mechanism="censor-uw", epsilon=8.0)
            totals.append(time.perf_counter() - start)
            checks.append(spent[-1])
        t, c = statistics.median(totals), statistics.median(checks)
        print(f"{n}, {t:.2f}, {c:.2f}, {c / t:.0%}", flush=True)


if __name__ == "__main__":
    main()
