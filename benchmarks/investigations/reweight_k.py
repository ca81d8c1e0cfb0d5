"""Investigation: how the re-weighted bound depends on k (Algorithm 3), on the salary stand-in.

For ``book/choices.md`` (section on the re-weighting constant k). On notebook 05's database
(the SIMULATED SDR salary stand-in, n = 1000, negative binomial synthesizer, the ``paper``
profile of ``dpsynth.studies.vector_weighted``: 2 chains of 500 + 500 iterations, seed 2024),
it fits LW and CW (radius matched to LW's bound as the notebook does), re-weights each by
Eq. (6) at a grid of k and records the bound after / before re-weighting; then it runs the
library's two-sided search (``Synthesizer.lw(..., reweight=True, neighbours="add-remove")``, tolerance 1%) and records
the k it lands at.

    .venv/bin/python benchmarks/investigations/reweight_k.py

The JSON file beside its CSV records the last run's wall time.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _record import write

from dpsynth.mechanisms import weights
from dpsynth.mechanisms.posterior import Synthesizer
from dpsynth.studies import vector_weighted as vw
from dpsynth.studies.sdr_data import SimulatedDataWarning, load_sdr_standin

K_GRID = (0.90, 0.95, 0.97, 0.99, 1.00)


def main() -> None:
    start = time.perf_counter()
    cfg = vw.settings("paper")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulatedDataWarning)
        frame = load_sdr_standin("reweighting")
    salary = frame["salary"].to_numpy(dtype=float)
    if cfg["n"] < salary.size:
        rng = np.random.default_rng([cfg["seed"], 5])
        salary = salary[np.sort(rng.choice(salary.size, cfg["n"], replace=False))]
    counts = np.rint(salary / cfg["salary_unit"]).astype(np.int64)
    c, g = cfg["c"], cfg["g"]
    syn = Synthesizer(counts, "negbin", seed=cfg["seed"], sampler=vw.sampler_of(cfg))
    lw = syn.lw(c, g, neighbours="add-remove")
    radius, cw, _ = vw.match_cw_radius(syn, lw.lipschitz, c=c, g=g, max_fits=cfg["cw_fits"])
    values: dict = {"n": counts.size, "cw_radius": radius}
    rhat = []
    for name, base in (("lw", lw), ("cw", cw)):
        wf = base.fit
        values[f"{name}_bound"] = wf.lipschitz
        for k in K_GRID:
            fit = syn.fit(weights.reweighted(wf.alpha, wf.record_bounds, k), tag=f"{name}-rw-{k}")
            values[f"{name}_ratio_{k:.2f}"] = fit.lipschitz / wf.lipschitz
            rhat.append(fit.stan_fit.diagnostics["rhat_max"])
    values["lw_search_k"] = syn.lw(c, g, reweight=True, neighbours="add-remove").tuning["k"]
    values["cw_search_k"] = syn.cw(radius, c, g, reweight=True, neighbours="add-remove").tuning["k"]
    values["rhat_max"] = max(rhat)
    settings = {k: cfg[k] for k in ("n", "chains", "iter_warmup", "iter_sampling", "seed")}
    settings.update(
        c=c,
        g=g,
        salary_unit=cfg["salary_unit"],
        k_grid=list(K_GRID),
        search_tolerance=0.01,
        data="SIMULATED SDR stand-in (data/sdr_standin.csv, reweighting)",
    )
    write("reweight_k", values, settings, start)


if __name__ == "__main__":
    main()
