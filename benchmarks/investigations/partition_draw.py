"""A large table drawn whole against drawn a partition at a time: the verdict's figures of
seeded releases of the same table by the dpsynth tree given, so that a commit before the
partition draw and one after it run the same releases (same input, same seeds).

Input: ``--rows`` flights (resampled as in ``benchmarks/bench_scale.py``) x 10 columns, its
spec with the public settings that exercise every draw step: model columns fitted to 1,000
records each, a marginal centre (air_time), a rank map onto a 20-bin histogram
(distance), a calibrated PH column with parents (minute); epsilon 6, m = 2, 2 chains x
(150 + 150). A table larger than 200,000 records is drawn by the partition draw after it.

    PYTHONPATH=/path/to/dpsynth-tree .venv/bin/python \
        benchmarks/investigations/partition_draw.py --label after --seeds 1 2 3

Appends one row per release and figure to
``benchmarks/results/investigations/partition_draw.csv``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE.parent))  # bench_scale: the input and its spec
RESULTS = HERE.parent / "results" / "investigations" / "partition_draw.csv"
FIELDS = ["label", "commit", "rows", "seed", "seconds", "figure", "value", "verdict", "date"]


def spec(columns: int = 10) -> dict:
    """The flights spec with a marginal centre, a rank map and a calibrated PH column."""
    import bench_scale

    out = bench_scale.spec_for(columns)
    out["fit_records"] = 1000
    for c in out["confidential"]:
        if c["name"] == "air_time":
            c["centring"] = "marginal"
        if c["name"] == "distance":
            c["calibrate_bins"] = 20
        if c["name"] == "minute":
            c["calibrate_share"] = 0.2
    return out


def release(path: Path, seed: int) -> tuple[float, dict]:
    """One seeded release of ``path``: its seconds and its verdict (confidential)."""
    from dpsynth.sampler import Sampler
    from dpsynth.table import pipeline

    sampler = Sampler(chains=2, iter_warmup=150, iter_sampling=150)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pipeline.synthesize_table(path, spec(), 6.0, m=2, seed=seed, sampler=sampler)
        rel.write(path.parent / f"out-{seed}.csv", path.parent / f"report-{seed}.json")
    return time.perf_counter() - start, rel.diagnostics["verdict"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="e.g. before or after")
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    import bench_scale
    from release_memory import tree_commit

    commit = tree_commit()
    with tempfile.TemporaryDirectory(prefix="dpsynth-partition-draw-") as tmp:
        path = bench_scale.make_input(args.rows, 10, Path(tmp))
        for seed in args.seeds:
            seconds, verdict = release(path, seed)
            date = datetime.now(UTC).isoformat(timespec="seconds")
            for fig in verdict["figures"]:
                row = {"label": args.label, "commit": commit, "rows": args.rows, "seed": seed}
                row |= {"seconds": round(seconds, 1), "figure": _name(fig)}
                row |= {"value": fig["value"], "verdict": verdict["verdict"], "date": date}
                _append(row)
            print(seed, round(seconds), verdict["verdict"], flush=True)


def _name(fig: dict) -> str:
    """A figure's name: what it measures and on which columns."""
    return f"{fig['figure']} {'+'.join(fig.get('columns', ()))}".strip()


def _append(row: dict) -> None:
    from release_memory import append_row

    append_row(RESULTS, FIELDS, row)


if __name__ == "__main__":
    main()
