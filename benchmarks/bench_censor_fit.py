"""Benchmark: one Censor_w fit of the beta synthesizer at n = 2000, Lipschitz computation included.

4 chains x 1000 warmup x 1000 draws, LW weights from one unweighted fit made
beforehand (not timed; the same weights and data for every backend). Each repeat
uses a new seed (httpstan caches identical fits). With ``--backend both`` (the
default when CmdStan is installed; else PyStan only) the backends alternate repeat
by repeat, in the order A B, B A, A B, ... so that machine drift (other jobs on a
shared machine) hits both alike; each backend first makes one untimed fit (loads
the compiled program, warms the caches). Prints every repeat, the medians and the
ratio, and writes ``benchmarks/results/censor_fit.csv`` (one row per repeat: backend,
repeat, seconds, fit_seconds (``engine.fit`` alone), rhat, the 1-minute load average
read just before the repeat, date, machine, versions; the book's scaling page reads it).

    .venv/bin/python benchmarks/bench_censor_fit.py [--backend pystan|cmdstanpy|both]
        [--repeats 5] [--n 2000] [--epsilon 5] [--out benchmarks/results/censor_fit.csv]

CmdStan is found as cmdstanpy finds it (the ``CMDSTAN`` environment variable).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from dpsynth import engine
from dpsynth.mechanisms.posterior import Synthesizer, WeightedFit
from dpsynth.models.catalogue import stan_data
from dpsynth.sampler import Sampler

BACKENDS = ("pystan", "cmdstanpy")
FIELDS = [
    "backend",
    "repeat",
    "n",
    "seconds",
    "fit_seconds",
    "rhat",
    "load1",
    "date",
    "machine",
    "versions",
]


def machine() -> str:
    """Cores, CPU model and memory of this machine (no host name)."""
    model = platform.processor() or platform.machine()
    memory = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next(
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.startswith("model name")
        )
        kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
        memory = f", {kb / 2**20:.0f} GB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{os.cpu_count()} cores, {model}{memory}, {platform.system()}"


def versions(backend: str) -> str:
    """The Stan stack a backend runs."""
    if backend == "cmdstanpy":
        import cmdstanpy

        stan = ".".join(map(str, cmdstanpy.cmdstan_version() or ()))
        return f"CmdStan {stan}, cmdstanpy {cmdstanpy.__version__}"
    import httpstan
    import stan  # pystan

    return f"httpstan {httpstan.__version__}, pystan {stan.__version__}"


def backends_from(choice: str | None) -> list[str]:
    """The backends to run: ``both`` when CmdStan is installed, else PyStan (said so)."""
    if choice is None:
        if engine.cmdstan_available():
            choice = "both"
        else:
            print("no CmdStan installation found: PyStan only (set CMDSTAN to compare)")
            choice = "pystan"
    return list(BACKENDS) if choice == "both" else [choice]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=[*BACKENDS, "both"], default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--epsilon", type=float, default=5.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "censor_fit.csv"))
    args = parser.parse_args()
    backends = backends_from(args.backend)

    y = np.random.default_rng(1).beta(0.5, 3.0, args.n).clip(1e-12, 1 - 1e-12)
    syn = Synthesizer(y, "beta", seed=1, sampler=Sampler(backend=backends[0]))
    alpha = syn.lw_alpha()  # compiles (or loads) the program; the unweighted fit
    M = args.epsilon / 2
    data = stan_data(syn.model, syn.y, alpha, censor_bound=M)
    for backend in backends:  # untimed: loads the program, warms each backend's caches
        engine.fit(syn.model.stan_file, data, seed=99, backend=backend)

    host = machine()
    stack = {b: versions(b) for b in backends}
    rows: list[dict] = []
    for r in range(args.repeats):
        order = backends if r % 2 == 0 else backends[::-1]
        for backend in order:
            load1 = os.getloadavg()[0]
            date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            t0 = time.perf_counter()
            fit = engine.fit(syn.model.stan_file, data, seed=100 + r, backend=backend)
            t_fit = time.perf_counter() - t0
            wf = WeightedFit(fit, alpha, syn.model.record_log_lik, M, data)
            delta = wf.lipschitz  # the streaming scan of a release
            seconds = time.perf_counter() - t0
            rhat = fit.diagnostics["rhat_max"]
            rows.append(
                {
                    "backend": backend,
                    "repeat": r + 1,
                    "n": args.n,
                    "seconds": round(seconds, 4),
                    "fit_seconds": round(t_fit, 4),
                    "rhat": round(rhat, 5),
                    "load1": round(load1, 2),
                    "date": date,
                    "machine": host,
                    "versions": stack[backend],
                }
            )
            print(
                f"repeat {r + 1} {backend:<10}: {seconds:.2f} s (fit {t_fit:.2f} s; "
                f"Delta = {delta:.3f}, rhat_max = {rhat:.3f}, load {load1:.2f})",
                flush=True,
            )

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    medians = {}
    for backend in backends:
        times = [row["seconds"] for row in rows if row["backend"] == backend]
        medians[backend] = statistics.median(times)
        print(
            f"{backend}: Censor_w beta fit, n = {args.n}, 4 x (1000 + 1000): median "
            f"{medians[backend]:.2f} s over {len(times)} repeats "
            f"(min {min(times):.2f}, max {max(times):.2f})"
        )
    if len(medians) == 2:
        print(f"ratio cmdstanpy / pystan (medians): {medians['cmdstanpy'] / medians['pystan']:.2f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
