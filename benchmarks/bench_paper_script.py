"""Benchmark: a whole CLI release against the censoring paper's own Stan script.

The paper's script (supplement S2, transcribed verbatim in
``benchmarks/stan/beta_censor_supplement.stan``) is timed for its sampling only: one
censored fit of n records with given weights, chains and iterations, draws and its
two n-vectors of generated quantities returned. The CLI is timed as a whole process
(start-up, reading the CSV, the reference fit behind the weights, the censored fit, the
record bounds, synthesis, the report) with ``--mechanism censor-w --weights-from``,
the same chains and iterations. Both use the same data; they alternate, so load on the
machine affects both alike. Prints each repeat, the medians and their ratio.

    .venv/bin/python benchmarks/bench_paper_script.py [--n 2000] [--repeats 5]
        [--chains 2] [--iter-warmup 1000] [--iter-sampling 2000] [--model-block-only]

``--model-block-only`` times the script without its generated quantities (its two
n-vectors per draw dominate its run time), a kinder comparison for the script.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpsynth import engine

SCRIPT = Path(__file__).parent / "stan" / "beta_censor_supplement.stan"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--iter-warmup", type=int, default=1000)
    parser.add_argument("--iter-sampling", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=5.0)
    parser.add_argument("--model-block-only", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    y = rng.beta(0.5, 3.0, args.n).clip(1e-9, 1 - 1e-9)
    ref = rng.beta(0.5, 3.0, args.n).clip(1e-9, 1 - 1e-9)
    alpha = rng.uniform(0.5, 1.0, args.n)  # the script takes weights as given
    data = {"n": args.n, "outcome": y, "alpha": alpha, "M": args.epsilon / 2}
    mcmc = {"chains": args.chains, "iter_warmup": args.iter_warmup}
    mcmc["iter_sampling"] = args.iter_sampling
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        script = SCRIPT
        if args.model_block_only:
            code = SCRIPT.read_text()
            script = t / "beta_censor_supplement_model_only.stan"
            script.write_text(code[: code.index("generated quantities")])
        engine.fit(script, data, seed=1, **mcmc)  # warm-up: compile or load, not timed
        pd.DataFrame({"y": y}).to_csv(t / "in.csv", index=False)
        pd.DataFrame({"y": ref}).to_csv(t / "ref.csv", index=False)
        cli = [sys.executable, "-m", "dpsynth", "synthesize", str(t / "in.csv")]
        cli += ["--column", "y", "--mechanism", "censor-w", "--epsilon", str(args.epsilon)]
        cli += ["--weights-from", str(t / "ref.csv"), "--chains", str(args.chains)]
        cli += ["--iter-warmup", str(args.iter_warmup)]
        cli += ["--iter-sampling", str(args.iter_sampling), "--quiet"]
        cli += ["--out", str(t / "o.csv"), "--report", str(t / "r.json")]
        cli += ["--diagnostics", str(t / "d.json")]
        script_s, cli_s = [], []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            engine.fit(script, data, seed=100 + r, **mcmc)
            script_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(cli, check=True)
            cli_s.append(time.perf_counter() - t0)
            print(f"repeat {r + 1}: paper script {script_s[-1]:.2f} s, CLI {cli_s[-1]:.2f} s")
    a, b = statistics.median(script_s), statistics.median(cli_s)
    print(
        f"n = {args.n}, {args.chains} x ({args.iter_warmup} + {args.iter_sampling}): "
        f"paper script{' (model block only)' if args.model_block_only else ''} (sampling only) "
        f"median {a:.2f} s, CLI release median {b:.2f} s, "
        f"ratio CLI / script {b / a:.2f}"
    )


if __name__ == "__main__":
    main()
