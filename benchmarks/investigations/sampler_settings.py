"""Investigation: bulk ESS per wall second of the release's MCMC default against Stan's.

For ``book/choices.md`` (section on the MCMC run length of a release). Runs
``benchmarks/bench_sampler_settings.py``'s two settings, A = 4 chains x (1000 + 1000) (Stan's
default) and B = 2 chains x (1000 + 2000) (dpsynth's), alternately in pairs on one Censor_uw
fit of the beta synthesizer at n = 2000 (epsilon = 5), and records each setting's median ESS
per wall second, the pair-by-pair ratio B / A and the largest R-hat. Wall time depends on the
machine and its load: the page says on what it was measured.

    .venv/bin/python benchmarks/investigations/sampler_settings.py [--pairs 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _record import write

from dpsynth.models.catalogue import get_model, stan_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_sampler_settings import SETTINGS, one_fit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=5.0)
    args = parser.parse_args()
    start = time.perf_counter()
    y = np.random.default_rng(1).beta(0.5, 3.0, args.n).clip(1e-12, 1 - 1e-12)
    model = get_model("beta")
    data = stan_data(model, model.to_stan_scale(y), np.ones(args.n), censor_bound=args.epsilon / 2)
    one_fit(data, 2, 100, 100, 0)  # load the compiled program
    rates: dict[str, list[float]] = {k: [] for k in SETTINGS}
    rhat: list[float] = []
    for pair in range(args.pairs):
        for name, (chains, warmup, draws) in SETTINGS.items():
            r = one_fit(data, chains, warmup, draws, seed=1000 + pair)
            rates[name].append(r["ess"] / r["wall"])
            rhat.append(r["rhat"])
    (a, rate_a), (b, rate_b) = rates.items()
    ratios = [rb / ra for ra, rb in zip(rate_a, rate_b, strict=True)]
    values = {
        "pairs": args.pairs,
        "n": args.n,
        "ess_per_s_A": statistics.median(rate_a),
        "ess_per_s_B": statistics.median(rate_b),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "rhat_min": min(rhat),
        "rhat_max": max(rhat),
    }
    settings = {"A": a, "B": b, "pairs": args.pairs, "n": args.n, "epsilon": args.epsilon}
    write("sampler_settings", values, settings, start)


if __name__ == "__main__":
    main()
