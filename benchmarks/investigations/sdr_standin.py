"""Investigation: the censoring paper's SDR application (Table 2) on the SIMULATED stand-in.

For ``book/choices.md`` (sections on PH bins, the LW weights of the SDR application and
Table 2). With notebook 02's ``paper`` profile (2 chains of 1000 + 1000 iterations, seed as
the notebook's one replicate), on all 1000 records of the stand-in, it records:

* PH at epsilon = 5 on the public salary bounds with ceil(ln n) and ceil(sqrt n) bins:
  mean over 200 noise draws of max-ECDF, avg-ECDF and the 15th / 50th / 90th percentiles;
* the search of ``tune_lw_weights`` for the LW scale c (each fit's c and Weighted epsilon,
  the first being c = 1) and the Weighted-e epsilon with the tuned weights;
* for Weighted, Weighted-e, Censor_w and Censor_uw (the notebook's fits), the central 95% of
  max-ECDF, avg-ECDF, median, 15th and 90th percentile over 200 synthetic datasets from the
  same fit (Table 2 reports one synthetic dataset).

    .venv/bin/python benchmarks/investigations/sdr_standin.py

The JSON file beside its CSV records the last run's wall time.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _record import write

from dpsynth.curator.utility import ecdf_measures, summary_statistics
from dpsynth.mechanisms.histogram import perturbed_histogram, ph_bins
from dpsynth.mechanisms.posterior import Synthesizer
from dpsynth.models.catalogue import covariate_matrix
from dpsynth.studies import censoring
from dpsynth.studies.runner import replicate_seed
from dpsynth.studies.sdr_data import SALARY_BOUNDS, SimulatedDataWarning, load_sdr_standin

NOISE_DRAWS = 200
SYNTHETIC_SETS = 200
STATS = ("max_ecdf", "avg_ecdf", "median", "q15", "q90")


def _stats(y: np.ndarray, synthetic: np.ndarray) -> dict[str, float]:
    return {**ecdf_measures(y, synthetic), **summary_statistics(synthetic)}


def main() -> None:
    start = time.perf_counter()
    s = censoring.settings("paper")
    seed = replicate_seed(s["seed"], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulatedDataWarning)
        frame = load_sdr_standin("censoring")
    y = frame["salary"].to_numpy(dtype=float)
    eps = float(s["sdr_epsilon"])
    values: dict = {"n": y.size, "epsilon": eps, "noise_draws": NOISE_DRAWS}
    values["synthetic_sets"] = SYNTHETIC_SETS

    rng = np.random.default_rng([seed, 9])
    for rule in ("log", "sqrt"):
        values[f"ph_{rule}_bins"] = ph_bins(y.size, rule=rule)
        draws = [
            _stats(y, perturbed_histogram(y, SALARY_BOUNDS, eps, rng, bin_rule=rule)[0])
            for _ in range(NOISE_DRAWS)
        ]
        for stat in STATS:
            values[f"ph_{rule}_{stat}"] = float(np.mean([d[stat] for d in draws]))

    X = covariate_matrix(frame, censoring.SDR_COVARIATES, censoring.SDR_CATEGORICAL)
    syn = Synthesizer(
        y, "beta-regression", X=X, bounds=SALARY_BOUNDS, seed=seed, sampler=censoring._sampler(s)
    )
    c, g, weighted, trace = censoring.tune_lw_weights(
        syn, s["sdr_weighted_epsilon"], tol=s["sdr_tune_tol"]
    )
    values["tune_fits"] = len(trace)
    for row in trace.itertuples():
        values[f"tune_c_{row.fit}"] = row.c
        values[f"tune_epsilon_{row.fit}"] = row.epsilon
    values["tuned_c"], values["tuned_g"] = c, g
    results = {
        "weighted": weighted,
        "weighted_e": syn.weighted_e(
            eps, c, g, truncation=s["weighted_e_rule"], neighbours="add-remove"
        ),
        "censor_w": syn.censor_w(
            eps, c, g, reweight=s["censor_w_reweight"], k=s["censor_w_k"], neighbours="add-remove"
        ),
        "censor_uw": syn.censor_uw(eps, neighbours="add-remove"),
    }
    values["weighted_epsilon"] = weighted.epsilon
    values["weighted_e_epsilon"] = results["weighted_e"].epsilon
    rhat = []
    for name, result in results.items():
        rhat.append(result.fit.stan_fit.diagnostics["rhat_max"])
        sets = [_stats(y, row) for row in syn.synthesize(result, SYNTHETIC_SETS)]
        for stat in STATS:
            lo, hi = np.quantile([d[stat] for d in sets], [0.025, 0.975])
            values[f"{name}_{stat}_lo"], values[f"{name}_{stat}_hi"] = lo, hi
    values["rhat_max"] = max(rhat)
    settings = {k: s[k] for k in ("chains", "iter_warmup", "iter_sampling", "sdr_epsilon")}
    settings.update(
        seed=seed,
        sdr_weighted_epsilon=s["sdr_weighted_epsilon"],
        sdr_tune_tol=s["sdr_tune_tol"],
        weighted_e_rule=s["weighted_e_rule"],
        censor_w_reweight=s["censor_w_reweight"],
        censor_w_k=s["censor_w_k"],
        data="SIMULATED SDR stand-in (data/sdr_standin.csv, censoring)",
    )
    write("sdr_standin", values, settings, start)


if __name__ == "__main__":
    main()
