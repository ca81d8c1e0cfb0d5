"""Scaling benchmark: wall time, CPU time and peak memory of one release against n.

Each (workload, n) runs in a fresh child process (so peak memory is that release's own),
through the one release path ``dpsynth.release.synthesize`` with m = 1. Workloads:
beta ``censor-w`` (reference weights from a second sample of the same size) and
``censor-uw``, negbin ``censor-uw``, ``ph`` and ``sbs``. Prints one line per run and
writes ``benchmarks/results/scaling.csv`` (the book's scaling page plots it).

    .venv/bin/python benchmarks/bench_scaling.py [--n 2000 20000 200000 1000000]
        [--workloads beta-censor-uw ph sbs] [--chains 4 --iter 1000] [--timeout 3600]

Stan fits use ``allow_unconverged`` only so that a slow-mixing fit still reports its time;
the printed R-hat says whether it converged.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

WORKLOADS = {
    "beta-censor-w": ("beta", "censor-w"),
    "beta-censor-uw": ("beta", "censor-uw"),
    "negbin-censor-uw": ("negbin", "censor-uw"),
    "ph": (None, "ph"),
    "sbs": (None, "sbs"),
}

CHILD = r"""
import json, resource, sys, time
import numpy as np
from dpsynth.mechanisms import Sampler
from dpsynth.release import synthesize
model, mechanism, n, chains, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(n)
if model == "negbin":
    y = rng.negative_binomial(2, 2 / (2 + 3.0), n)
else:
    y = rng.beta(0.5, 3.0, n).clip(1e-9, 1 - 1e-9)
kw = {}
if mechanism in ("ph", "sbs"):
    kw["bounds"] = (0.0, 1.0)
else:
    kw.update(model=model, sampler=Sampler(chains, iters, iters), allow_unconverged=True)
if mechanism == "censor-w":
    kw["reference"] = rng.beta(0.5, 3.0, n).clip(1e-9, 1 - 1e-9)
t0, c0 = time.perf_counter(), time.process_time()
rel = synthesize(y, mechanism=mechanism, epsilon=5.0, **kw)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
mcmc = rel.diagnostics.get("mcmc", {})
print(json.dumps({"wall_s": wall, "cpu_s": cpu + kids.ru_utime + kids.ru_stime,
                  "peak_bytes": max(peak, kids.ru_maxrss * 1024),
                  "rhat_max": mcmc.get("rhat_max"), "n_out": len(rel.data)}))
"""


def run_one(workload: str, n: int, chains: int, iters: int, timeout: float) -> dict:
    """Run one release in a child process; return its figures (or the failure)."""
    model, mechanism = WORKLOADS[workload]
    argv = [sys.executable, "-c", CHILD, str(model), mechanism, str(n), str(chains), str(iters)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"workload": workload, "n": n, "status": f"timeout after {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"workload": workload, "n": n, "status": f"failed: {last[:120]}"}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["process_wall_s"] = time.perf_counter() - t0
    return {"workload": workload, "n": n, "status": "ok", **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2_000, 20_000, 200_000, 1_000_000])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--iter", type=int, default=1000, help="warmup = sampling iterations")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "scaling.csv"))
    parser.add_argument("--append", action="store_true", help="add rows to an existing --out")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    keys = ["workload", "n", "status", "wall_s", "cpu_s", "peak_bytes", "rhat_max"]
    if not (args.append and out.exists()):
        with out.open("w", newline="") as fh:
            csv.DictWriter(fh, fieldnames=keys).writeheader()
    print(f"{'workload':<18}{'n':>10}{'wall s':>10}{'cpu s':>10}{'peak GB':>10}{'R-hat':>8}")
    for workload in args.workloads:
        for n in args.n:
            row = run_one(workload, n, args.chains, args.iter, args.timeout)
            with out.open("a", newline="") as fh:  # one row at a time: a long run keeps its rows
                csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore").writerow(row)
            if row["status"] != "ok":
                print(f"{workload:<18}{n:>10}  {row['status']}", flush=True)
                continue
            rhat = row["rhat_max"]
            print(
                f"{workload:<18}{n:>10}{row['wall_s']:>10.1f}{row['cpu_s']:>10.1f}"
                f"{row['peak_bytes'] / 1e9:>10.2f}{(rhat or float('nan')):>8.3f}",
                flush=True,
            )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
