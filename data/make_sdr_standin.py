"""Make ``data/sdr_standin.csv``: a SIMULATED stand-in for the papers' 2017 SDR samples.

Nothing in the output is Survey of Doctorate Recipients data. The real 2017 SDR public-use
file must be downloaded by the user (see ``dpsynth.studies.sdr_data.load_sdr_public_use``); this script
fabricates two samples of n = 1000 whose salary summaries match what the papers publish:

* ``sample == "censoring"``: mimics the mathematics & statistics, 4-year-institution sample of
  Hu, Williams & Savitsky (censoring paper) section 5, Table 2 "Data" column: mean 91019,
  median 80000, 15th quantile 51000, 90th quantile 150000. (The paper does not report n;
  1000 is a choice.)
* ``sample == "reweighting"``: mimics the n = 1000 sample of Savitsky, Hu & Williams
  (vector-weighted paper) section 5: mean 107609, median 95000, range [0, 509000], sd 69718.

Design (deterministic given ``SEED``):

1. Covariates are drawn independently per record: ``gender`` ("F"/"M"), ``agegrp`` (9
   five-year groups, coded by their lower age 25, 30, ..., 65; 65 means 65 and over) and
   ``wkswk`` (weeks worked, integer 2..52, mostly 52).
2. A latent score z = effects(gender, agegrp, wkswk) + N(0, 1) noise ranks the records.
3. Salaries are the values of a fixed target quantile function at the Hazen plotting
   positions (i + 0.5) / n, assigned to records in the order of z, so the marginal salary
   distribution is exactly calibrated while salary still depends on the covariates (useful
   for the censoring paper's beta regression). The quantile function is piecewise linear in
   log-salary against normal scores (a "piecewise log-normal"): knots at the published
   quantiles, tail slopes tuned (once, by root finding; the tuned values are the constants
   below) to hit the published mean (and sd), capped at the public top-code 509000 and
   rounded to whole thousands of dollars. In the "reweighting" sample the lowest record is
   set to 0 to reproduce the published range [0, 509000].

Run ``python data/make_sdr_standin.py`` from the repository root to rewrite the CSV and
print the achieved summaries; ``tests/test_data.py`` checks that the committed file is
reproduced byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

SEED = 20170201
"""Seed of the covariate and noise draws (2017 SDR reference date, 1 February 2017)."""

N_PER_SAMPLE = 1000
TOP_CODE = 509_000
"""Public top-code of SDR salary (SALARYP) in the 2017 public-use file."""

ROUND_TO = 1_000
"""Salaries are rounded to whole thousands of dollars."""

COLUMNS = ["sample", "simulated", "salary", "gender", "agegrp", "wkswk"]

AGE_CODES = np.arange(25, 70, 5)
"""Lower bound of each five-year age group: 25 = 25-29, ..., 65 = 65 and over (9 groups)."""

# Per-sample design. ``knots`` are (probability, salary) pairs the log-quantile function
# passes through; ``slope_lo`` / ``slope_hi`` are the log-salary slopes per normal score
# below the first and above the last knot. ``slope_hi`` of "censoring" was tuned to the
# published mean; ``knots`` q90 and ``slope_hi`` of "reweighting" were tuned (given
# slope_lo = 0.65 and the knot (0.15, 48500), both free choices: the paper publishes no
# quantiles but the median for that sample) to the published mean and sd. The tuning used
# scipy.optimize.brentq / least_squares on ``calibrated_salaries``; its result is frozen
# here so that the file does not depend on optimizer versions.
DESIGN: dict[str, dict] = {
    "censoring": {
        "knots": [(0.15, 51_000.0), (0.50, 80_000.0), (0.90, 150_000.0)],
        "slope_lo": 0.60,
        "slope_hi": 0.5075,
        "zero_min": False,
        "p_female": 0.30,
        "age_probs": [0.04, 0.12, 0.15, 0.14, 0.13, 0.12, 0.11, 0.10, 0.09],
    },
    "reweighting": {
        "knots": [
            (0.15, 48_500.0),
            (0.50, 95_000.0),
            (0.90, 179_100.0),
        ],
        "slope_lo": 0.65,
        "slope_hi": 0.7514,
        "zero_min": True,
        "p_female": 0.35,
        "age_probs": [0.06, 0.14, 0.15, 0.14, 0.13, 0.12, 0.11, 0.09, 0.06],
    },
}


def quantile_function(p: np.ndarray, design: dict) -> np.ndarray:
    """Target salary quantile function at probabilities ``p`` (n,) -> dollars (n,).

    Piecewise linear in log-salary against the normal score norm.ppf(p), through the design's
    knots, linearly extrapolated with the tail slopes, capped at ``TOP_CODE``.
    """
    kp, kv = (np.array(v, dtype=float) for v in zip(*design["knots"]))
    kz, lv = norm.ppf(kp), np.log(kv)
    z = norm.ppf(p)
    out = np.interp(z, kz, lv)
    out = np.where(z < kz[0], lv[0] + design["slope_lo"] * (z - kz[0]), out)
    out = np.where(z > kz[-1], lv[-1] + design["slope_hi"] * (z - kz[-1]), out)
    return np.minimum(np.exp(out), TOP_CODE)


def calibrated_salaries(n: int, design: dict) -> np.ndarray:
    """Sorted salaries (n,) in whole dollars: the quantile function at (i + 0.5) / n, rounded."""
    p = (np.arange(n) + 0.5) / n
    salary = np.round(quantile_function(p, design) / ROUND_TO) * ROUND_TO
    if design["zero_min"]:
        salary[0] = 0.0
    return salary.astype(np.int64)


def make_sample(name: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated sample: covariates from ``rng``, salaries assigned by latent rank."""
    design = DESIGN[name]
    gender = np.where(rng.random(n) < design["p_female"], "F", "M")
    age_idx = rng.choice(AGE_CODES.size, size=n, p=design["age_probs"])
    kind = rng.choice(3, size=n, p=[0.72, 0.18, 0.10])  # full year / academic year / part year
    wkswk = np.select(
        [kind == 0, kind == 1],
        [52, rng.integers(36, 52, size=n)],
        rng.integers(2, 36, size=n),
    )
    latent = (
        0.25 * (gender == "M")
        + 0.40 * age_idx
        - 0.035 * age_idx**2
        + 0.04 * (wkswk - 52)
        + rng.normal(0.0, 1.0, size=n)
    )
    salary = np.empty(n, dtype=np.int64)
    salary[np.argsort(latent, kind="stable")] = calibrated_salaries(n, design)
    return pd.DataFrame(
        {
            "sample": name,
            "simulated": True,
            "salary": salary,
            "gender": gender,
            "agegrp": AGE_CODES[age_idx],
            "wkswk": wkswk.astype(np.int64),
        },
        columns=COLUMNS,
    )


def make_standin(seed: int = SEED, n: int = N_PER_SAMPLE) -> pd.DataFrame:
    """Both samples stacked ("censoring" first), one independent child stream each."""
    streams = np.random.SeedSequence(seed).spawn(len(DESIGN))
    parts = [make_sample(name, n, np.random.default_rng(s)) for name, s in zip(DESIGN, streams)]
    return pd.concat(parts, ignore_index=True)


def write_standin(out_dir: str | Path, seed: int = SEED) -> Path:
    """Write ``sdr_standin.csv`` into ``out_dir`` (LF line ends, no index); return its path."""
    path = Path(out_dir) / "sdr_standin.csv"
    make_standin(seed).to_csv(path, index=False, lineterminator="\n")
    return path


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Achieved salary summaries per sample (for the calibration report)."""

    def one(s: pd.Series) -> pd.Series:
        x = s.to_numpy(dtype=float)
        return pd.Series(
            {
                "n": x.size,
                "mean": x.mean(),
                "median": np.quantile(x, 0.5),
                "q15": np.quantile(x, 0.15),
                "q90": np.quantile(x, 0.90),
                "sd": x.std(ddof=1),
                "min": x.min(),
                "max": x.max(),
            }
        )

    return df.groupby("sample", sort=False)["salary"].apply(one).unstack()


if __name__ == "__main__":
    out = write_standin(Path(__file__).resolve().parent)
    print(f"wrote {out} (SIMULATED stand-in, not SDR data)", file=sys.stderr)
    with pd.option_context("display.float_format", "{:.1f}".format):
        print(summarize(pd.read_csv(out)))
