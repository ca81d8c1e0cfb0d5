"""What a large table release holds once it has returned, before it is written: the bytes of
every array (and string) reachable from the release object, for the dpsynth tree given, so
that a commit before a change and one after it measure the same input. Unlike the resident
set (``release_memory.py``), this is not raised by heap an earlier phase used and the
allocator kept: it is what the release itself keeps, and how it grows with n.

Input: the flights table of ``benchmarks/bench_scale.py`` (``--rows`` records x 12 columns,
a Parquet directory), released at epsilon 6, m = 1, with short fits (2 chains x (150 + 150)).

    PYTHONPATH=/path/to/dpsynth-tree .venv/bin/python \
        benchmarks/investigations/release_held.py --label after --rows 300000

Appends one row per run to ``benchmarks/results/investigations/release_held.csv``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import types
import warnings
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE.parent))  # bench_scale: the input and its spec
RESULTS = HERE.parent / "results" / "investigations" / "release_held.csv"
FIELDS = ["label", "commit", "rows", "columns", "held_mb", "arrays", "date"]
SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def held_bytes(root: object) -> tuple[int, int]:
    """The bytes of the arrays (each buffer once) and strings reachable from ``root``, and
    the number of arrays."""
    import numpy as np

    seen, buffers, todo, total = set(), set(), [root], 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, SKIP):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            owner = obj
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            if id(owner) not in buffers:
                buffers.add(id(owner))
                total += owner.nbytes
            if obj.dtype == object:
                todo.extend(obj.ravel().tolist())
            continue
        if isinstance(obj, str | bytes):
            total += sys.getsizeof(obj)
            continue
        todo.extend(gc.get_referents(obj))
    return total, len(buffers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help="e.g. before or after")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=12)
    args = parser.parse_args()
    import bench_scale
    from release_memory import append_row, tree_commit

    from dpsynth.sampler import Sampler
    from dpsynth.table import pipeline

    commit = tree_commit()
    sampler = Sampler(chains=2, iter_warmup=150, iter_sampling=150)
    with tempfile.TemporaryDirectory(prefix="dpsynth-held-") as tmp:
        path = bench_scale.make_input(args.rows, args.columns, Path(tmp))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = pipeline.synthesize_table(path, bench_scale.spec_for(args.columns), 6.0,
                                            sampler=sampler)  # fmt: skip
        gc.collect()
        held, arrays = held_bytes(rel)
    row = {"label": args.label, "commit": commit, "rows": args.rows, "columns": args.columns}
    row |= {"held_mb": round(held / 2**20, 1), "arrays": arrays}
    row |= {"date": datetime.now(UTC).isoformat(timespec="seconds")}
    append_row(RESULTS, FIELDS, row)
    print(row)


if __name__ == "__main__":
    main()
