"""Benchmark: one Censor_w fit of the beta synthesizer at n = 2000, Lipschitz computation included.

4 chains x 1000 warmup x 1000 draws, LW weights from one unweighted fit made
beforehand (not timed). Each repeat uses a new seed (httpstan caches identical
fits). Prints every repeat and the median. Usage:

    .venv/bin/python benchmarks/bench_censor_fit.py [--repeats 5] [--n 2000] [--epsilon 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dpsynth import engine
from dpsynth.mechanisms import Sampler, Synthesizer, WeightedFit
from dpsynth.models import stan_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=5.0)
    args = parser.parse_args()

    y = np.random.default_rng(1).beta(0.5, 3.0, args.n).clip(1e-12, 1 - 1e-12)
    syn = Synthesizer(y, "beta", seed=1, sampler=Sampler())
    alpha = syn.lw_alpha()  # warm-up: compiles (or loads) the program, unweighted fit
    M = args.epsilon / 2
    data = stan_data(syn.model, syn.y, alpha, censor_bound=M)
    times = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        fit = engine.fit(syn.model.stan_file, data, seed=100 + r)
        wf = WeightedFit(fit, alpha, syn.model.record_log_lik, M, data)
        delta = wf.lipschitz  # the streaming scan of a release
        times.append(time.perf_counter() - t0)
        print(
            f"repeat {r + 1}: {times[-1]:.2f} s  (Delta = {delta:.3f}, "
            f"rhat_max = {fit.diagnostics['rhat_max']:.3f})",
            flush=True,
        )
    print(
        f"Censor_w beta fit, n = {args.n}, 4 x (1000 + 1000): median {statistics.median(times):.2f} s "
        f"over {args.repeats} repeats (min {min(times):.2f}, max {max(times):.2f})"
    )


if __name__ == "__main__":
    main()
