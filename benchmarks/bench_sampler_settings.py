"""Benchmark: bulk ESS per second of two MCMC settings with the same number of draws S.

A (the CLI default): 4 chains x (1000 warmup + 1000 draws); B: 2 chains x (1000 + 2000).
Both keep S = 4000 retained draws, so the draws-based Lipschitz bound is a maximum over
the same number of draws. Runs A and B alternately (pairs, so a drifting machine load
affects both alike) on one Censor_uw fit of the beta synthesizer at n = 2000, and prints
per pair: wall seconds, min bulk ESS, ESS per wall second, max R-hat; then the medians.

    .venv/bin/python benchmarks/bench_sampler_settings.py [--pairs 5] [--n 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dpsynth import engine
from dpsynth.models.catalogue import get_model, stan_data

SETTINGS = {"A 4x(1000+1000)": (4, 1000, 1000), "B 2x(1000+2000)": (2, 1000, 2000)}


def one_fit(data: dict, chains: int, warmup: int, draws: int, seed: int) -> dict:
    """Time one fit; return wall seconds, min bulk ESS and max R-hat."""
    t0 = time.perf_counter()
    fit = engine.fit(
        get_model("beta").stan_file,
        data,
        seed=seed,
        chains=chains,
        iter_warmup=warmup,
        iter_sampling=draws,
    )
    wall = time.perf_counter() - t0
    d = fit.diagnostics
    return {"wall": wall, "ess": d["ess_bulk_min"], "rhat": d["rhat_max"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=5.0)
    args = parser.parse_args()
    y = np.random.default_rng(1).beta(0.5, 3.0, args.n).clip(1e-12, 1 - 1e-12)
    model = get_model("beta")
    data = stan_data(model, model.to_stan_scale(y), np.ones(args.n), censor_bound=args.epsilon / 2)
    one_fit(data, 2, 100, 100, 0)  # warm-up: load the compiled program
    rates: dict[str, list[float]] = {k: [] for k in SETTINGS}
    for pair in range(args.pairs):
        for name, (chains, warmup, draws) in SETTINGS.items():
            r = one_fit(data, chains, warmup, draws, seed=1000 + pair)
            rates[name].append(r["ess"] / r["wall"])
            print(
                f"pair {pair + 1} {name}: {r['wall']:.2f} s, min bulk ESS {r['ess']:.0f}, "
                f"{r['ess'] / r['wall']:.0f} ESS/s, max R-hat {r['rhat']:.4f}",
                flush=True,
            )
    for name, values in rates.items():
        print(f"{name}: median {statistics.median(values):.0f} ESS per wall second")
    ratios = [b / a for a, b in zip(*rates.values(), strict=True)]
    print(
        f"B / A, pair by pair: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
