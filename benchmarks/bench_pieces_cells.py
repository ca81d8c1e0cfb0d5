"""Pieces models: the fit on public cells (issue 49) against the fit on records it replaced.

One row per (configuration, replicate, tree): the same data, seed and sampler, run by the
library found first on ``sys.path`` (the working tree, or an older checkout put first with
PYTHONPATH), so the two constructions are measured side by side. Figures: seconds of the
release (the pieces' C++ build excluded: a warm-up release compiles first), the largest
R-hat, the posterior mean and sd of the first parameter, the synthetic mean.

    .venv/bin/python benchmarks/bench_pieces_cells.py --label cells --out results.csv
    PYTHONPATH=/path/to/old/checkout .venv/bin/python benchmarks/bench_pieces_cells.py \\
        --label records --out results.csv
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "dpsynth" / "stan" / "examples" / "pieces"

CONFIGS = {
    # name: (pieces file, n, distinct covariate values or None, bounds)
    "normal-n200": ("normal.pieces", 200, None, (-10.0, 12.0)),
    "normal-n2000": ("normal.pieces", 2000, None, (-10.0, 12.0)),
    "regression-5-rows-n500": ("regression.pieces", 500, 5, (-12.0, 14.0)),
    "regression-40-rows-n500": ("regression.pieces", 500, 40, (-12.0, 14.0)),
}


def data(name: str, replicate: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The configuration's records (seeded by its replicate): y, and X with few values."""
    _, n, rows, _ = CONFIGS[name]
    rng = np.random.default_rng(1000 + replicate)
    if rows is None:
        return rng.normal(1.0, 2.0, n), None
    x = rng.integers(0, rows, n) / (rows - 1) * 4.0 - 2.0
    return 1.0 + 2.0 * x + rng.normal(0.0, 1.0, n), x[:, None]


def run(name: str, replicate: int, label: str) -> dict:
    from dpsynth.models import pieces
    from dpsynth.release.single import synthesize
    from dpsynth.sampler import Sampler

    file, n, rows, bounds = CONFIGS[name]
    model = pieces.from_pieces(EXAMPLES / file)
    y, X = data(name, replicate)
    kw = dict(model=model, mechanism="censor-uw", epsilon=8.0, X=X, bounds=bounds,
              seed=replicate, sampler=Sampler(2, 500, 500),
              allow_unconverged=True)  # the older tree refused; the cells' ignores it  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        synthesize(y[:20], **{**kw, "X": None if X is None else X[:20]})  # compile, warm
        start = time.perf_counter()
        rel = synthesize(y, **kw)
        seconds = time.perf_counter() - start
    draws = rel.confidential.fit.stan_fit.draws
    first = "beta" if "beta" in draws else "mu"
    value = np.asarray(draws[first]).reshape(len(draws[first]), -1)[:, -1]
    return {
        "config": name, "replicate": replicate, "construction": label, "n": n,
        "seconds": round(seconds, 2), "rhat_max": rel.diagnostics["mcmc"]["rhat_max"],
        "parameter": first, "posterior_mean": float(value.mean()),
        "posterior_sd": float(value.std()), "synthetic_mean": float(rel.data["y"].mean()),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    args = parser.parse_args()
    out = Path(args.out)
    new = not out.exists()
    with out.open("a", newline="") as fh:
        for name in args.configs:
            for r in range(1, args.replicates + 1):
                row = run(name, r, args.label)
                writer = csv.DictWriter(fh, fieldnames=list(row))
                if new:
                    writer.writeheader()
                    new = False
                writer.writerow(row)
                fh.flush()
                print(row, flush=True)


if __name__ == "__main__":
    main()
