"""Investigation: how often a converged fit with many parameters misses R-hat <= 1.01.

For the table's default draws (``dpsynth.table.spec.TABLE_ITER_SAMPLING``). A table column's
regression can have 25 parameters (a public categorical column of 20 years one-hot, the
intercept, the columns before it), and a table refuses every column whose *largest* R-hat
exceeds 1.01. Chains that have converged still give an R-hat that scatters above 1, and the
maximum of 25 scatters far more than one. Here the chains are stationary AR(1) series (lag-1
autocorrelation phi, so every chain samples the same distribution: an ideal, converged fit)
and the figure is the share of R fits of K parameters whose largest R-hat (dpsynth's own
:func:`dpsynth.engine.diagnostics.rhat`) exceeds 1.01, for 2 chains of 1000, 2000, 3000, 4000 draws.

    .venv/bin/python benchmarks/investigations/rhat_many_parameters.py [--R 200]

Seconds on one core; numpy only (no Stan).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _record import write
from scipy.signal import lfilter

from dpsynth.engine.diagnostics import rhat

DRAWS = (1000, 2000, 3000, 4000)
PHIS = (0.5, 0.7, 0.8)


def stationary_ar1(rng: np.random.Generator, k: int, chains: int, n: int, phi: float) -> np.ndarray:
    """k parameters x chains x n draws of a stationary AR(1) with unit innovations (the
    recursion x_t = phi x_{t-1} + e_t, by ``scipy.signal.lfilter``)."""
    e = rng.standard_normal((k, chains, n))
    e[..., 0] /= np.sqrt(1 - phi**2)
    return lfilter([1.0], [1.0, -phi], e, axis=-1)


def share_refused(rng: np.random.Generator, k: int, n: int, phi: float, reps: int) -> float:
    """The share of ``reps`` converged fits (2 chains of n draws) with max R-hat > 1.01."""
    over = sum(max(rhat(p) for p in stationary_ar1(rng, k, 2, n, phi)) > 1.01 for _ in range(reps))
    return over / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--R", type=int, default=200, help="fits per setting")
    parser.add_argument("--K", type=int, default=25, help="parameters per fit")
    args = parser.parse_args()
    start = time.perf_counter()
    rng = np.random.default_rng(2029)
    values = {
        f"refused_share_phi{phi:g}_draws{n}": share_refused(rng, args.K, n, phi, args.R)
        for phi in PHIS
        for n in DRAWS
    }
    write("rhat_many_parameters", values, {"R": args.R, "K": args.K, "chains": 2}, start)


if __name__ == "__main__":
    main()
