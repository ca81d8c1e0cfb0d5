"""Investigation: the direction of CW's bias in the vector-weighted paper's appendix Table 1.

For ``book/choices.md`` (section "Discrepancies investigated") and issue 54. The paper's CW
intervals lie above its Data intervals for the mean, the median and q15; dpsynth's CW (radius
matched to LW's bound) sits at or below the data at every radius tried (``cw_radius.py``).

Why, without a fit: the synthesizer is a negative binomial NB(mu, phi), and under weights
alpha the pseudo likelihood's score for mu is sum_i alpha_i (y_i - mu) phi / (mu (mu + phi)),
zero at mu = sum alpha_i y_i / sum alpha_i whatever phi. So the weighted posterior of mu
centres on the weighted mean of the data, and the synthetic mean (and the median, which an NB
ties to it) moves up only if the weights grow with y. On notebook 04's database (the NB
mixture of Section 3.2, ``paper`` profile seed) this script records, for a grid of radii and
three readings of the CW weights, the weighted mean minus the data mean and the correlation of
the weights with y:

* ``printed``: Algorithm 2 step 4 as printed, alpha_i = 1 - IR_i (c = 1, g = 0), IR_i the
  share of records outside the ball of radius r (dpsynth's reading);
* ``inverse``: Section 2's "alpha_i proportional to 1 / IR_i", scaled so the largest is 1;
* ``risk``: alpha_i = IR_i, the weights the wrong way round (for contrast).

    .venv/bin/python benchmarks/investigations/cw_direction.py

Under a second on one core; the JSON file beside its CSV records the last run's wall time.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from _record import write

from dpsynth.mechanisms import weights
from dpsynth.studies import vector_weighted as vw
from dpsynth.studies.results import results_root

RADII = (5, 10, 20, 36, 72, 144)


def readings(y: np.ndarray, radius: float) -> dict[str, np.ndarray]:
    ir = weights.cw_risks(y, radius)
    inverse = 1.0 / np.maximum(ir, 1e-12)
    return {
        "printed": np.clip(1.0 - ir, 0.0, 1.0),
        "inverse": inverse / inverse.max(),
        "risk": ir,
    }


def main() -> None:
    start = time.perf_counter()
    cfg = vw.settings("paper")
    y = vw._database("nb_mixture", cfg).astype(float)
    synth = pd.read_csv(results_root() / "04_reweighting" / "synthesizers.csv", index_col=0)
    committed_radius = float(synth.loc["CW", "radius"])
    values: dict[str, float] = {
        "n": y.size,
        "data_mean": float(y.mean()),
        "data_median": float(np.median(y)),
        "committed_radius": committed_radius,
    }
    shifts = {}
    for radius in (*RADII, committed_radius):
        tag = "committed" if radius == committed_radius else f"r{radius:g}"
        for name, alpha in readings(y, radius).items():
            wmean = float(np.sum(alpha * y) / np.sum(alpha))
            values[f"{name}_{tag}_mean_shift"] = wmean - float(y.mean())
            values[f"{name}_{tag}_corr"] = float(np.corrcoef(alpha, y)[0, 1])
            shifts.setdefault(name, []).append(wmean - float(y.mean()))
    for name, s in shifts.items():
        values[f"{name}_max_mean_shift"] = float(max(s))
        values[f"{name}_min_mean_shift"] = float(min(s))
    settings = {"database": "notebook 04 (nb_mixture, paper profile seed)", "radii": RADII}
    settings.update(seed=cfg["seed"], n=cfg["n"])
    write("cw_direction", values, settings, start)


if __name__ == "__main__":
    main()
