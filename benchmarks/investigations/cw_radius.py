"""Investigation: the vector-weighted paper's appendix Table 1, CW's radius and the interval reading.

For ``book/choices.md`` (section on the other numeric tables). On notebook 04's database (the
negative binomial mixture of Section 3.2, n = 1000; the ``paper`` profile of
``dpsynth.studies.vector_weighted``: 2 chains of 500 + 500, seed 2024, m = 100 synthetic sets)
it reruns notebook 04's four synthesizers and records:

* how many distinct values a synthetic set's q15, median and q90 take over the m sets (the
  outcome is a count), smallest and largest over the synthesizers;
* the summed distance to the paper's 40 endpoints when the intervals are read as the 2.5% and
  97.5% percentiles over the sets (notebook 04's reading) and as mean +- 1.96 sd;
* CW at a grid of radii (the paper does not state its radius): the bound, the mean weight and
  the four intervals over m synthetic sets.

    .venv/bin/python benchmarks/investigations/cw_radius.py

The JSON file beside its CSV records the last run's wall time.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from _record import write

from dpsynth.curator.utility import interval_summary, summary_statistics
from dpsynth.studies import vector_weighted as vw

RADII = (10, 20, 36, 72, 144)


def main() -> None:
    start = time.perf_counter()
    cfg = vw.settings("paper")
    study = vw.section4_reweighting(cfg)
    values: dict = {"n": study.info["n"], "m": cfg["m"], "matched_radius": study.info["radius"]}
    u = study.utility
    distinct = [
        u[(u.synthesizer == name) & (u.statistic == stat)].value.nunique()
        for name in study.order
        for stat in ("q15", "median", "q90")
    ]
    values["distinct_min"], values["distinct_max"] = min(distinct), max(distinct)
    paper = {row["key"]: row["paper"] for row in vw.appendix_table1_rows()}
    dist = {"percentile": 0.0, "normal": 0.0}
    for stat, cells in vw.PAPER["table1"].items():
        for name in cells:
            v = u[(u.synthesizer == name) & (u.statistic == stat)].value.to_numpy()
            ends = {
                "percentile": interval_summary(v, 0.95),
                "normal": (v.mean() - 1.96 * v.std(ddof=1), v.mean() + 1.96 * v.std(ddof=1)),
            }
            for reading, (lo, hi) in ends.items():
                dist[reading] += abs(lo - paper[f"t1_{stat}_{name}_lo"])
                dist[reading] += abs(hi - paper[f"t1_{stat}_{name}_hi"])
    values["distance_percentile"], values["distance_normal"] = dist["percentile"], dist["normal"]
    syn = study.synthesizer
    rhat = [vw.max_rhat(study)]
    for radius in RADII:
        res = syn.cw(float(radius), cfg["c"], cfg["g"], neighbours="add-remove")
        rhat.append(res.fit.stan_fit.diagnostics["rhat_max"])
        values[f"r{radius}_bound"] = res.lipschitz
        values[f"r{radius}_alpha_mean"] = float(res.fit.alpha.mean())
        sets = pd.DataFrame([summary_statistics(row) for row in syn.synthesize(res, cfg["m"])])
        for stat in vw.STATISTICS:
            lo, hi = interval_summary(sets[stat].to_numpy(), 0.95)
            values[f"r{radius}_{stat}_lo"], values[f"r{radius}_{stat}_hi"] = lo, hi
    values["rhat_max"] = float(np.max(rhat))
    settings = {k: cfg[k] for k in ("n", "m", "chains", "iter_warmup", "iter_sampling", "seed")}
    settings.update(c=cfg["c"], g=cfg["g"], radii=list(RADII), n_boot=cfg["n_boot"])
    write("cw_radius", values, settings, start)


if __name__ == "__main__":
    main()
