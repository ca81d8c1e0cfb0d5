"""Investigation: what the table verdict's pMSE costs as a table widens, with its products'
cells merged to keep the propensity design within ``PMSE_PARAMETERS`` columns, and without.

An agency's file has 10 to 50 columns; the scale benchmark's widest has 12. Here each table
has ``C`` categorical columns of ten public levels (C = 12, 20, 30, 50), ``--records``
records, each column a noisy copy of the one before it (kept with probability 1/2, else a
uniform level), so that every neighbouring pair depends. The synthetic table is a second draw
of the same process (a perfect synthesis: the ratio's null) or one whose columns are drawn
independently (every dependence lost). Per width, one child process per case computes the
pMSE (``dpsynth.curator.table_verdict.pmse_of``: design, rank, logistic fit) and reports its
seconds, peak resident memory, the products' groups, the design's parameters and the ratio;
the verdict's exact two-way TVDs of the same tables are reported beside it (they do not
depend on the merge). "unmerged" (every product at ``PMSE_GROUPS``) runs where its design has
at most ``--unmerged-max`` columns; beyond, its cost is not run.

    .venv/bin/python benchmarks/investigations/verdict_width.py [--records 20000]

About 15 minutes on a quiet 2-core machine (the unmerged 20-column rank dominates).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _record  # noqa: E402

WIDTHS = (12, 20, 30, 50)


def _tables(width: int, records: int, lost: bool, seed: int):
    """The confidential table and a synthetic one (a second draw, or independent columns)."""
    import pandas as pd

    def chain(rng: np.random.Generator, independent: bool) -> pd.DataFrame:
        cols = [rng.integers(0, 10, records)]
        for _ in range(width - 1):
            keep = (rng.random(records) < 0.5) & (not independent)
            cols.append(np.where(keep, cols[-1], rng.integers(0, 10, records)))
        return pd.DataFrame({f"c{i}": c.astype(str) for i, c in enumerate(cols)})

    return chain(np.random.default_rng(seed), False), chain(np.random.default_rng(seed + 1), lost)


def child(width: int, records: int, lost: bool, merged: bool) -> None:
    """One pMSE in this process; prints its figures as JSON."""
    import resource

    from dpsynth.curator import table_verdict as tv
    from dpsynth.curator.table_verdict import summed

    level = {"type": "categorical", "levels": [str(k) for k in range(10)]}
    cols = tv.describe({f"c{i}": level for i in range(width)})
    conf, syn = _tables(width, records, lost, 2026)
    a, b = summed(cols, conf, "confidential"), summed(cols, syn, "synthetic")
    if not merged:
        tv.PMSE_PARAMETERS = 10**9
    start = time.perf_counter()
    out = tv.pmse_of(a, b)
    seconds = time.perf_counter() - start
    tvd = max(tv.tvd(a.pairs[p], b.pairs[p]) for p in a.pairs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "two_way_tvd_max": tvd, **out}))


def _bound(width: int, groups: int) -> int:
    mains = width * 10
    return mains + width * (width - 1) // 2 * (min(11, groups) - 1) ** 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--unmerged-max", type=int, default=20_000)
    parser.add_argument("--child", nargs=4, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        width, records, lost, merged = args.child
        child(width, records, bool(lost), bool(merged))
        return
    start = time.perf_counter()
    values: dict[str, float] = {"records": args.records}
    for width in WIDTHS:
        for merged in (1, 0):
            if not merged and _bound(width, 11) > args.unmerged_max:
                continue
            for lost in (0, 1):
                if not merged and lost:
                    continue  # the cost is the case's; one run of it is enough
                cmd = [sys.executable, __file__, "--child", str(width), str(args.records),
                       str(lost), str(merged)]  # fmt: skip
                got = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                                check=True).stdout.splitlines()[-1])  # fmt: skip
                key = f"c{width}.{'merged' if merged else 'unmerged'}.{'lost' if lost else 'same'}"
                for name in ("seconds", "peak_mb", "groups", "parameters", "pmse_ratio",
                             "two_way_tvd_max"):  # fmt: skip
                    values[f"{key}.{name}"] = got[name]
                print(key, {k: got[k] for k in ("seconds", "peak_mb", "groups", "parameters",
                                                "pmse_ratio")}, flush=True)  # fmt: skip
    _record.write("verdict_width", values, vars(args), start)


if __name__ == "__main__":
    main()
