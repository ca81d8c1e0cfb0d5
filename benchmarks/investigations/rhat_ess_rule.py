"""Investigation: the R-hat rule tied to the ESS, against the fixed 1.01, at fewer draws.

A table column's regression has up to 25-40 parameters, and a fit passes only if *every*
parameter's R-hat is within its limit. With the fixed limit 1.01, converged chains are refused
ever more often the more parameters and the fewer draws
(``rhat_many_parameters.py``), which is why a table ran 2 x (1000 + 4000) iterations per column.
dpsynth's rule (:func:`dpsynth.engine.diagnostics.rhat_limit`) lets each parameter's R-hat
reach max(1.01, 1 + c / ESS), c chosen so that at most 1 % of converged fits of K parameters
are refused. This script measures, on chains whose truth is known (numpy only, no Stan):

* **false refusals**: stationary AR(1) chains (lag-1 autocorrelation phi, every chain the same
  law: a converged fit), K parameters, 2 chains of 1000 / 2000 / 4000 draws: the share of fits
  the whole policy refuses (the R-hat rule and the bulk-ESS floor of 100) under each rule, and
  the share the floor alone refuses;
* **power**: the same chains with one parameter's second chain shifted by delta marginal
  standard deviations (a chain stuck elsewhere): the share refused.

    .venv/bin/python benchmarks/investigations/rhat_ess_rule.py [--R 200]

Minutes on one core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _record import write
from rhat_many_parameters import stationary_ar1

from dpsynth.engine.diagnostics import CONVERGENCE, ess_bulk, ess_within, rhat, rhat_limit

DRAWS = (1000, 2000, 4000)
PHIS = (0.5, 0.8, 0.9)
DELTAS = (0.0, 0.25, 0.5, 1.0)


def chains_ar1(rng: np.random.Generator, k: int, n: int, phi: float, delta: float) -> np.ndarray:
    """k parameters x 2 chains x n draws of a stationary AR(1); parameter 0's second chain
    shifted by ``delta`` marginal standard deviations."""
    x = stationary_ar1(rng, k, 2, n, phi)
    x[0, 1] += delta / np.sqrt(1 - phi**2)
    return x


def refused(x: np.ndarray) -> tuple[bool, bool, bool]:
    """(the policy with the fixed 1.01 refuses, the policy with the ESS-tied limit refuses,
    the bulk-ESS floor alone refuses): both policies include the floor."""
    r = np.array([rhat(p) for p in x])
    e = np.array([ess_bulk(p) for p in x])
    w = np.array([ess_within(p) for p in x])
    floor = e.min() < CONVERGENCE["ess_bulk_min"]
    fixed = r.max() > CONVERGENCE["rhat_max"]
    tied = any(ri > rhat_limit(wi, len(r), x.shape[1]) for ri, wi in zip(r, w, strict=True))
    return bool(fixed or floor), bool(tied or floor), bool(floor)


def shares(rng: np.random.Generator, k: int, n: int, phi: float, delta: float, reps: int):
    """Shares of ``reps`` fits refused: (fixed policy, tied policy, the floor alone)."""
    out = np.array([refused(chains_ar1(rng, k, n, phi, delta)) for _ in range(reps)])
    return out.mean(axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--R", type=int, default=200, help="fits per setting")
    parser.add_argument("--K", type=int, default=25, help="parameters per fit")
    args = parser.parse_args()
    start = time.perf_counter()
    rng = np.random.default_rng(2031)
    values = {}
    for phi in PHIS:
        for n in DRAWS:
            for delta in DELTAS:
                fixed, tied, floor = shares(rng, args.K, n, phi, delta, args.R)
                tag = f"phi{round(phi * 100)}_draws{n}_delta{round(delta * 100)}"
                values[f"fixed_{tag}"], values[f"tied_{tag}"] = fixed, tied
                values[f"floor_{tag}"] = floor
    write("rhat_ess_rule", values, {"R": args.R, "K": args.K, "chains": 2}, start)


if __name__ == "__main__":
    main()
