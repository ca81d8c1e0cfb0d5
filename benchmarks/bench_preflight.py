"""What a curator's first attempt meets: the preflight of the default spec on the reference.

``synthesize-table`` runs the spec on the spec's public reference file before it reads a
confidential value (:func:`dpsynth.table.preflight.preflight`): a column that does not
converge there, or a poor table verdict there that the reference is large enough to judge,
refuses the release in one line, before the budget is charged. This benchmark runs that
preflight on the three real tables of ``bench_defaults.py`` at the size of issue 52's
held-out table (``--held-out-size``'s records and references: CPS1988 and NMES1988 at 3,750
confidential records with references of 1,000 and 635, Wage at 2,700 with 300), each with its
default spec (names, models, public bounds and levels, the reference and the analysis), at
epsilon 3 and 6, with the release's own sampler and seeds from the OS, as a curator's run
would be (so no two runs are the same). Per run: the preflight's seconds, the verdict on the
reference and the figure that drives it, whether it refused, and the share of ideal
syntheses of the reference rated poor (computed after a poor verdict only).

    .venv/bin/python benchmarks/bench_preflight.py [--tables cps wage nmes] [--epsilons 3 6]
        [--replicates 1 2]

Writes ``benchmarks/results/preflight.csv`` (appends).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "preflight.csv"
FIELDS = [
    "table", "epsilon", "replicate", "n", "n_reference", "status", "seconds", "verdict",
    "driven_by", "refused", "ideal_poor", "refusal", "load1", "date", "versions",
]  # fmt: skip


def child(table: str, epsilon: float) -> None:
    """One preflight in this process (held-out sizes): its record on stdout, one JSON line."""
    import time

    sys.path.insert(0, str(HERE))
    import bench_defaults as bd

    from dpsynth.table.preflight import preflight

    for name, (n, k) in bd.HELD_OUT_SIZES.items():
        bd.TABLES[name].update(n=n, reference_n=k)
    conf, ref = bd.frames(table)
    raw = bd.variant(bd.TABLES[table]["spec"], "default")
    with tempfile.TemporaryDirectory(prefix="dpsynth-preflight-") as tmp:
        path = Path(tmp) / "reference.csv"
        ref.to_csv(path, index=False)
        start = time.perf_counter()
        result = preflight({**raw, "reference": str(path)}, epsilon, n=len(conf), reference=ref)
        seconds = time.perf_counter() - start
    driven = (result.refusal or "").split(": the table verdict there is poor (")
    record = {
        "n": len(conf),
        "n_reference": len(ref),
        "seconds": seconds,
        "verdict": result.verdict,
        "driven_by": driven[1].split(")")[0] if len(driven) > 1 else "",
        "refused": not result.ok,
        "ideal_poor": result.ideal_poor,
        "refusal": result.summary() if not result.ok else "",
    }
    print(json.dumps(record), flush=True)


def run_one(table: str, epsilon: float, rep: int, timeout: float) -> dict:
    """One preflight in a fresh child process; its row."""
    cmd = [sys.executable, __file__, "--child", table, str(epsilon)]
    head = {
        "table": table,
        "epsilon": epsilon,
        "replicate": rep,
        "load1": round(os.getloadavg()[0], 2),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    sys.path.insert(0, str(HERE))
    from bench_scaling import child_row

    return child_row(cmd, head, timeout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("TABLE", "EPSILON"))
    parser.add_argument("--tables", nargs="+", default=["cps", "wage", "nmes"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[3.0, 6.0])
    parser.add_argument("--replicates", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]))
        return
    sys.path.insert(0, str(HERE))
    from bench_defaults import versions

    stamp = versions()
    new = not args.out.is_file()
    with args.out.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        if new:
            writer.writeheader()
        for rep in args.replicates:
            for epsilon in args.epsilons:
                for table in args.tables:
                    row = {**run_one(table, epsilon, rep, args.timeout), "versions": stamp}
                    writer.writerow(row)
                    fh.flush()
                    print({k: row.get(k) for k in FIELDS[:11]}, flush=True)


if __name__ == "__main__":
    main()
