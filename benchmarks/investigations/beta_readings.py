"""Investigation: readings of the censoring paper's Section 4 on fresh Beta(0.5, 3) databases.

For ``book/choices.md`` (sections on the Lipschitz bound, Weighted-e, PH bins and the
downscaling factor). On R databases of n = 2000 records (seeds: the runner's replicate seeds of
master seed 5000, not the notebooks' 20230), with the ``paper`` profile of
``dpsynth.studies.censoring`` (2 chains of 1000 + 1000 iterations), it records:

* the median max-ECDF of PH with ceil(ln n) and with ceil(sqrt n) bins (same database, same
  noise stream), of Censor_w (re-weighted, the notebooks' reading) and of Censor_uw, per epsilon;
* the mean Weighted-e count under the two truncation rules (``lw-bound``, ``weighted-fit``);
* with plain LW weights (c = 1, g = 0, no re-weighting): the Weighted bound and Censor_w's
  mean count when the weights keep every draw and when they drop the top 10% of draws
  (``lw_draw_quantile = 0.9``, the R script's ``thresh``);
* the quartiles of the Weighted bound (the notebooks' LW weights) over the databases.

    .venv/bin/python benchmarks/investigations/beta_readings.py [--R 8]

About 16 s per database on one core, more on a loaded machine; the JSON file beside its CSV
records the last run's wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _record import write

from dpsynth.curator.utility import ecdf_measures
from dpsynth.mechanisms.histogram import perturbed_histogram, ph_bins
from dpsynth.mechanisms.posterior import Synthesizer
from dpsynth.studies import censoring
from dpsynth.studies.runner import replicate_seed
from dpsynth.studies.simulate import beta_data

MASTER_SEED = 5000
DRAW_QUANTILE = 0.9


def one_database(params: dict, r: int) -> dict:
    """Per-database figures (see the module docstring)."""
    seed = replicate_seed(MASTER_SEED, r)
    frame = censoring.beta_replicate(params, r, seed)
    y = beta_data(int(params["n"]), np.random.default_rng([seed, 0]), params["a"], params["b"])
    syn = Synthesizer(y, "beta", seed=seed, sampler=censoring._sampler(params))
    out: dict = {}
    main = frame[frame.study == "main"]
    for eps in params["epsilons"]:
        at = main[main.epsilon == eps].set_index("mechanism")
        ph = perturbed_histogram(
            y, (0.0, 1.0), eps, np.random.default_rng([seed, 2, int(eps * 1e6)]), bin_rule="sqrt"
        )
        out[f"ph_log_max_ecdf_{eps:g}"] = at.loc["PH", "max_ecdf"]
        out[f"ph_sqrt_max_ecdf_{eps:g}"] = ecdf_measures(y, ph[0])["max_ecdf"]
        out[f"censor_w_max_ecdf_{eps:g}"] = at.loc["Censor_w", "max_ecdf"]
        out[f"censor_uw_max_ecdf_{eps:g}"] = at.loc["Censor_uw", "max_ecdf"]
        out[f"weighted_e_lw_bound_{eps:g}"] = at.loc["Weighted-e", "n_invoked"]
        fit_rule = censoring._Weighted(syn, 1.0, 0.0, None, "weighted-fit")
        we = fit_rule.weighted_e(eps, neighbours="add-remove")
        out[f"weighted_e_weighted_fit_{eps:g}"] = we.n_zero_weight - fit_rule.result.n_zero_weight
    out["weighted_bound"] = main[main.mechanism == "Weighted"].lipschitz.iloc[0]
    for q, tag in ((None, "all"), (DRAW_QUANTILE, "q90")):
        plain = censoring._Weighted(syn, 1.0, 0.0, q, "lw-bound", reweight=False)
        out[f"plain_weighted_bound_{tag}"] = plain.result.lipschitz
        for eps in params["epsilons"]:
            out[f"plain_censor_w_{tag}_{eps:g}"] = plain.censor_w(
                eps, neighbours="add-remove"
            ).fit.n_censored
    rhat = [frame.rhat_max.max(), syn.unweighted_fit().stan_fit.diagnostics["rhat_max"]]
    out["rhat_max"] = float(np.nanmax(rhat))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--R", type=int, default=8)
    args = parser.parse_args()
    start = time.perf_counter()
    s = censoring.settings("paper")
    params = censoring.beta_params(s)
    rows = []
    for r in range(args.R):
        rows.append(one_database(params, r))
        print(f"database {r + 1}/{args.R} done", flush=True)
    per = pd.DataFrame(rows)
    values: dict = {"R": args.R, "n": params["n"], "master_seed": MASTER_SEED}
    values["chains"], values["iter_warmup"] = params["chains"], params["iter_warmup"]
    values["iter_sampling"] = params["iter_sampling"]
    values["bins_log"] = ph_bins(params["n"], rule="log")
    values["bins_sqrt"] = ph_bins(params["n"], rule="sqrt")
    for col in per:
        if "max_ecdf" in col:
            values[f"median_{col}"] = per[col].median()
        elif col.startswith(("weighted_e_", "plain_")):
            values[f"mean_{col}"] = per[col].mean()
    for q, name in ((0.25, "q1"), (0.5, "median"), (0.75, "q3")):
        values[f"weighted_bound_{name}"] = per.weighted_bound.quantile(q)
    values["rhat_max"] = per.rhat_max.max()
    settings = {**params, "R": args.R, "master_seed": MASTER_SEED, "draw_quantile": DRAW_QUANTILE}
    write("beta_readings", values, settings, start)


if __name__ == "__main__":
    main()
