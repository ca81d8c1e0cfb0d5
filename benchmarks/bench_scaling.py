"""Scaling benchmark: wall time, CPU time and peak memory of one release against n.

Each (workload, n, backend, repeat) runs in a fresh child process (so peak memory is
that release's own), through the one release path ``dpsynth.release.single.synthesize`` with
m = 1. Workloads: beta ``censor-w`` (reference weights from a second sample of the
same size) and ``censor-uw``, negbin ``censor-uw``, ``ph`` and ``sbs``. The Stan
workloads run on each backend of ``--backend`` (``both``, the default when CmdStan is
installed, else ``pystan``, said so; backends alternate run by run); ``ph`` and ``sbs``
use no Stan and run once, with backend ``none``. Prints one line per run and writes
``benchmarks/results/scaling.csv`` (the book's scaling page reads it).

    .venv/bin/python benchmarks/bench_scaling.py [--n 2000 20000 200000 1000000]
        [--workloads beta-censor-uw ph sbs] [--backend pystan|cmdstanpy|both]
        [--repeats 1] [--chains 4 --iter 1000] [--timeout 3600] [--append]

How each figure is measured, the same way for both backends (the child process runs
the release; its sampler processes are its children: httpstan's forked pool workers,
or the CmdStan chain processes that cmdstanpy starts, one per chain):

- ``wall_s``: ``time.perf_counter`` around ``synthesize`` (imports, data and the
  child's start excluded).
- ``cpu_s``: user + system time of the child itself (``getrusage(RUSAGE_SELF)``) plus
  that of its finished children (``getrusage(RUSAGE_CHILDREN)``), the difference
  between before and after ``synthesize``. CmdStan processes end with their run and
  cmdstanpy waits for them; httpstan's pool workers live on, so the child shuts the
  pool down and waits for its workers before the second reading (a child's times count
  in ``RUSAGE_CHILDREN`` only once it has been waited for), then waits for any other
  child left (the cleanup watcher of a CmdStan run).
- ``peak_bytes``: the largest resident set of any one process of the release: the
  larger of ``ru_maxrss`` of ``RUSAGE_SELF`` and of ``RUSAGE_CHILDREN`` (on Linux the
  peak of the largest waited-for descendant). It is not the sum over the processes
  running at once (the Python process and two chains on 2 cores, each holding the data).
- ``load1``: the 1-minute load average just before the run (it includes this
  benchmark's own earlier runs); ``date`` (UTC), ``machine`` and ``versions`` too.

A slow-mixing Stan fit is released and timed like any other (a release never depends on its
convergence); the printed R-hat says whether it converged. CmdStan is found as cmdstanpy finds it
(the ``CMDSTAN`` environment variable).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_censor_fit import backends_from, machine, versions  # noqa: E402

WORKLOADS = {
    "beta-censor-w": ("beta", "censor-w"),
    "beta-censor-uw": ("beta", "censor-uw"),
    "negbin-censor-uw": ("negbin", "censor-uw"),
    "ph": (None, "ph"),
    "sbs": (None, "sbs"),
}

CHILD = r"""
import json, multiprocessing, resource, sys, time
import numpy as np
import psutil
from dpsynth.sampler import Sampler
from dpsynth.release.single import synthesize
model, mechanism, n, chains, iters, backend = sys.argv[1:7]
n, chains, iters = int(n), int(chains), int(iters)
rng = np.random.default_rng(n)
if model == "negbin":
    y = rng.negative_binomial(2, 2 / (2 + 3.0), n)
else:
    y = rng.beta(0.5, 3.0, n).clip(1e-9, 1 - 1e-9)
kw = {}
if mechanism in ("ph", "sbs"):
    kw["bounds"] = (0.0, 1.0)
else:
    sampler = Sampler(chains, iters, iters, backend=backend)
    kw.update(model=model, sampler=sampler)
if mechanism == "censor-w":
    kw["reference"] = rng.beta(0.5, 3.0, n).clip(1e-9, 1 - 1e-9)

def cpu():
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

t0, c0 = time.perf_counter(), cpu()
rel = synthesize(y, mechanism=mechanism, epsilon=5.0, **kw)
wall = time.perf_counter() - t0
stub = sys.modules.get("httpstan.services_stub")
if stub is not None:  # httpstan's sampler pool: its workers are waited for on shutdown
    stub.executor.shutdown(wait=True)
for p in multiprocessing.active_children():
    p.join(10)
for child in psutil.Process().children():  # e.g. a CmdStan run's cleanup watcher
    try:
        child.wait(10)
    except psutil.Error:
        pass
cpu_s = cpu() - c0
peak = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
mcmc = rel.diagnostics.get("mcmc", {})
print(json.dumps({"wall_s": wall, "cpu_s": cpu_s, "peak_bytes": peak * 1024,
                  "rhat_max": mcmc.get("rhat_max"), "n_out": len(rel.data)}))
"""

FIELDS = [
    "workload",
    "backend",
    "n",
    "repeat",
    "status",
    "wall_s",
    "cpu_s",
    "peak_bytes",
    "rhat_max",
    "load1",
    "date",
    "machine",
    "versions",
]


def run_one(workload: str, n: int, backend: str, chains: int, iters: int, timeout: float) -> dict:
    """Run one release in a child process; return its figures (or the failure)."""
    model, mechanism = WORKLOADS[workload]
    argv = [sys.executable, "-c", CHILD, str(model), mechanism, str(n), str(chains), str(iters)]
    argv.append(backend if model else "pystan")  # unused without Stan
    head = {
        "workload": workload,
        "backend": backend,
        "n": n,
        "load1": round(os.getloadavg()[0], 2),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return child_row(argv, head, timeout)


def child_row(argv: list[str], head: dict, timeout: float) -> dict:
    """``head`` with the status and figures of a child process that prints one JSON line last
    (``timeout after ...`` or ``failed: <its last error line>`` instead when it does not)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {**head, "status": f"timeout after {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {**head, "status": f"failed: {last[:120]}"}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**head, "status": "ok", **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2_000, 20_000, 200_000, 1_000_000])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--backend", choices=["pystan", "cmdstanpy", "both"], default=None)
    parser.add_argument("--repeats", type=int, default=1, help="runs per (workload, n, backend)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--iter", type=int, default=1000, help="warmup = sampling iterations")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "scaling.csv"))
    parser.add_argument("--append", action="store_true", help="add rows to an existing --out")
    args = parser.parse_args()
    backends = backends_from(args.backend)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not (args.append and out.exists()):
        with out.open("w", newline="") as fh:
            csv.DictWriter(fh, fieldnames=FIELDS).writeheader()
    host = machine()
    stack = {b: versions(b) for b in backends}
    stack["none"] = ""
    print(
        f"{'workload':<18}{'backend':<11}{'n':>9}{'wall s':>9}{'cpu s':>9}{'peak GB':>9}"
        f"{'R-hat':>7}{'load':>6}"
    )
    runs = 0
    for workload in args.workloads:
        for n in args.n:
            for r in range(args.repeats):
                order = backends if runs % 2 == 0 else backends[::-1]
                runs += 1
                for backend in order if WORKLOADS[workload][0] else ["none"]:
                    row = run_one(workload, n, backend, args.chains, args.iter, args.timeout)
                    row.update(repeat=r + 1, machine=host, versions=stack[backend])
                    # one row at a time: a long run keeps its rows
                    with out.open("a", newline="") as fh:
                        csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore").writerow(row)
                    lead = f"{workload:<18}{backend:<11}{n:>9}"
                    if row["status"] != "ok":
                        print(f"{lead}  {row['status']}", flush=True)
                        continue
                    rhat = row["rhat_max"]
                    print(
                        f"{lead}{row['wall_s']:>9.1f}{row['cpu_s']:>9.1f}"
                        f"{row['peak_bytes'] / 1e9:>9.2f}{(rhat or float('nan')):>7.3f}"
                        f"{row['load1']:>6.2f}",
                        flush=True,
                    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
