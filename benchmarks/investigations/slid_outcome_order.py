"""Investigation: should the analysis's outcome be synthesized after its predictors by default?

``dpsynth init-spec`` lists a public file's columns in the file's order, so the analysis's
outcome may come before its predictors: on ``carData::SLID`` (``slid_downscale.py``'s table,
split and spec) hourly wages is the first column, and its model then has no predictor but its
missingness indicator. The preflight of that spec at total epsilon 3 refused for a poor
verdict (the analysis ``wages ~ education + age + sex + language``' worst coefficient, the
intercept, did not overlap at all) and its next step proposed the predictors before the
outcome. A candidate default rule would move the outcome after its last confidential predictor.
This script releases the table on the public reference as the preflight does, seeded
(replicate r: seed 200 + r), with wages first as written (``as-written``) and with wages
listed after its predictors (``after-predictors``, what the rule would do), the same seeds.
Per variant: the replicates rated poor, the median worst and mean coefficient overlap of the
analysis, and the replicates whose fits all converged.

    .venv/bin/python benchmarks/investigations/slid_outcome_order.py [--replicates 4]

About 25 min on two cores.
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

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import _record  # noqa: E402
import slid_downscale  # noqa: E402

from dpsynth.table.pipeline import synthesize_table  # noqa: E402

EPSILON = 3.0
VARIANTS = ("as-written", "after-predictors")


def table_spec(variant: str, reference: str) -> dict[str, Any]:
    """The curator's whole spec (``slid_downscale.py``) with the analysis: wages first
    (``as-written``) or after its predictors (``after-predictors``)."""
    wages = slid_downscale.spec("default", reference)["confidential"][0]
    others = [
        {"name": "education", "type": "continuous", "model": "lognormal-regression",
         "bounds": [0, 20], "missing": "indicator"},
        {"name": "age", "type": "count", "model": "negbin", "bounds": [16, 95]},
        {"name": "sex", "type": "binary", "mechanism": "ph", "levels": ["Female", "Male"]},
        {"name": "language", "type": "categorical", "mechanism": "ph",
         "levels": ["English", "French", "Other"], "missing": "level"},
    ]  # fmt: skip
    columns = [wages, *others] if variant == "as-written" else [*others, wages]
    return {
        "neighbours": "substitution",
        "reference": reference,
        "confidential": columns,
        "analysis": {"formula": "wages ~ education + age + sex + language"},
    }


def run(variant: str, seed: int, reference: Any, path: str) -> tuple[str, float, float, bool]:
    """(verdict, worst and mean coefficient overlap, every fit converged) of one release of
    the reference, seeded, in ``variant``'s order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = synthesize_table(
            reference, table_spec(variant, path), EPSILON, seed=seed, reference=reference
        )
    verdict = release.diagnostics["verdict"]
    overlaps = [f["value"] for f in verdict["figures"] if f["figure"] == "ci_overlap"]
    return (
        str(verdict["verdict"]),
        float(min(overlaps)),
        float(np.mean(overlaps)),
        verdict.get("converged") is not False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=4)
    args = parser.parse_args()
    start, values = time.perf_counter(), {}
    reference, _ = slid_downscale.tables()
    with tempfile.TemporaryDirectory(prefix="dpsynth-slid-") as tmp:
        path = str(Path(tmp) / "reference.csv")
        reference.to_csv(path, index=False)
        for variant in VARIANTS:
            runs = [run(variant, 200 + r, reference, path) for r in range(args.replicates)]
            print(variant, runs, flush=True)
            key = variant.replace("-", "_")
            values[f"{key}_poor"] = sum(v == "poor" for v, *_ in runs)
            values[f"{key}_worst_median"] = float(np.median([w for _, w, *_ in runs]))
            values[f"{key}_mean_median"] = float(np.median([m for *_, m, _ in runs]))
            values[f"{key}_converged"] = sum(c for *_, c in runs)
    values["replicates"] = args.replicates
    _record.write(
        "slid_outcome_order", values, {"replicates": args.replicates, "epsilon": EPSILON}, start
    )


if __name__ == "__main__":
    main()
