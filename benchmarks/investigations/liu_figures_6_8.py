"""Investigation: why Liu's Figure 6 (binary, n = 100, p = 0.1, BIT) and Figure 8 are not reproduced.

Liu (modips), Section 5.1 / Figure 6 and Section 5.3 / Figure 8; the committed paper-scale run is
``results/07_modips_inference/summary.csv`` (epsilon = 1 total, split over m; Figure 8 at m = 5).
Each candidate reading is run with the library's own simulator
(:func:`dpsynth.studies.modips_simulation.simulate_sbs`, unchanged) on the same seeds: every
setting is run as ``BATCHES`` independent batches of ``REPS_PER_BATCH`` repetitions, the seed of a
batch depending on the setting and the batch only (not on the candidate), so candidates share
their original datasets (common random numbers). Each metric is the mean over the batches and its
Monte Carlo standard error the SD of the batch means / sqrt(BATCHES).

Figure 6 candidates (binary, n = 100, p = 0.1, BIT, Theorem 7, m in the library's grid 2..500):

* ``current``: total epsilon = 1 split equally over the m sets (the committed run);
* ``eps_total_<e>``: total epsilon = e (2, 5, 10, 20, 50, 100) split over the m sets
  (Figure 6's epsilon is lost from the extracted caption);
* ``eps_per_set_1``: epsilon = 1 for *each* set (the budget not split; total m);
* ``n1000_eps1``: n = 1000 in place of the printed 100 (Table 1(a)'s binary n is off by 10).
  Also at n = 100, p = 0.5 and n = 1000, p = 0.1 / 0.5 for epsilon 1 and 10 (the other panels
  of Figure 6(a), to judge which epsilon fits the paper's description of all four).

Figure 8 candidates (Gaussian, unknown variance, individualized, w = 0.1..0.9, Theorem 7):

* ``current``: epsilon = 1 total, m = 5, Laplace at epsilon (not epsilon/2) under truncation,
  the sanitized variance bounded to [0, n (c1-c0)^2 / (4 (n-1))];
* ``eps<e>_m<m>``: other total budgets (0.5, 1, 10, 100) and m (3, 5, 10, 20);
  epsilon per set = e / m, so a per-set reading of epsilon = e at m sets is ``eps<e*m>_m<m>``;
* ``strict_truncation``: truncated statistics drawn at epsilon/2 (the library's default for
  releases; the simulations follow the paper with epsilon);
* ``no_var_upper``: the sanitized variance only bounded below by 0 (the paper's text lost the
  bound), patched at run time into the simulator's namespace (no library file changes).

Writes ``benchmarks/results/investigations/liu_figures_6_8.csv`` (one row per figure, candidate,
setting, m or w, metric: ``value`` and ``mc_se``) and prints the summary tables of
``liu_figures_6_8.md``. About a minute on one core.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/investigations/liu_figures_6_8.py
"""

from __future__ import annotations

import argparse
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

import dpsynth.studies.modips_simulation as sim

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results" / "investigations" / "liu_figures_6_8.csv"
MASTER_SEED = 20240608
METRICS = ("bias", "sd_estimate", "empirical_sd", "coverage", "ci_half_width")
W_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def seed_for(*key: object) -> np.random.SeedSequence:
    """A seed that depends on the setting ``key`` only (same for every candidate)."""
    return np.random.SeedSequence([MASTER_SEED, zlib.crc32(repr(key).encode())])


@contextmanager
def variance_upper(unbounded: bool):
    """Run with the sanitized variance bounded above (library) or only below by 0."""
    original = sim.variance_upper_bound
    if unbounded:
        sim.variance_upper_bound = lambda lo, hi, n: np.inf
    try:
        yield
    finally:
        sim.variance_upper_bound = original


def batched(setting_key: tuple, batches: int, reps: int, **kw: object) -> pd.DataFrame:
    """simulate_sbs over ``batches`` seeded batches; mean and MC SE of each metric per (m, rule)."""
    seeds = seed_for(*setting_key).spawn(batches)
    frames = []
    for b, s in enumerate(seeds):
        d = sim.simulate_sbs(reps=reps, rng=np.random.default_rng(s), **kw)
        frames.append(d.assign(batch=b))
    d = pd.concat(frames, ignore_index=True)
    g = d.groupby(["m", "rule"])[list(METRICS)]
    mean, se = g.mean(), g.std(ddof=1) / np.sqrt(batches)
    out = mean.stack().rename("value").to_frame().join(se.stack().rename("mc_se"))
    return out.reset_index().rename(columns={"level_2": "metric"})


def figure6(batches: int, reps: int) -> pd.DataFrame:
    """Candidates for Figure 6(a): binary data, BIT, Theorem 7 over the m grid."""
    runs: list[tuple[str, int, float, float, bool]] = [("current", 100, 0.1, 1.0, False)]
    runs += [(f"eps_total_{e:g}", 100, 0.1, e, False) for e in (2, 5, 10, 20, 50, 100)]
    runs += [("eps_per_set_1", 100, 0.1, 1.0, True), ("n1000_eps1", 1000, 0.1, 1.0, False)]
    for e in (1.0, 10.0):  # the other three panels, to see which epsilon fits them all
        runs += [(f"panel_eps_total_{e:g}", n, p, e, False) for n, p in ((100, 0.5), (1000, 0.5))]
    runs += [("panel_eps_total_10", 1000, 0.1, 10.0, False)]
    frames = []
    for cand, n, p, eps, per_set in runs:
        key = ("fig6", n, p)
        common = dict(
            data_type="binary", n=n, p=p, bounding="bit", rules=("thm7",), include_single=False
        )
        if per_set:  # epsilon per set: one call per m with total m * eps
            parts = []
            for m in sim.M_GRID:
                r = batched(key + (m,), batches, reps, epsilon=eps * m, m_values=(m,), **common)
                parts.append(r[r["rule"] == "thm7"])
            res = pd.concat(parts, ignore_index=True)
        else:
            res = batched(key, batches, reps, epsilon=eps, m_values=sim.M_GRID, **common)
        frames.append(
            res.assign(
                figure="6a",
                candidate=cand,
                n=n,
                p=p,
                epsilon_total=np.nan if per_set else eps,
                epsilon_per_set=eps if per_set else np.nan,
                bounds="[0, 1]",
                bounding="bit",
                w=np.nan,
            )
        )
    return pd.concat(frames, ignore_index=True)


def figure8(batches: int, reps: int) -> pd.DataFrame:
    """Candidates for Figure 8: Gaussian, unknown variance, share w of epsilon on the mean."""
    runs = [("current", 1.0, 5, False, False)]
    runs += [
        (f"eps{e:g}_m{m}", e, m, False, False)
        for e in (0.5, 1.0, 10.0, 100.0)
        for m in (3, 5, 10, 20)
        if (e, m) != (1.0, 5)
    ]
    runs += [("strict_truncation", 1.0, 5, True, False), ("no_var_upper", 1.0, 5, False, True)]
    frames = []
    for cand, eps, m, strict, unbounded in runs:
        for n in (100, 1000):
            for lo, hi in ((-4.0, 4.0), (-4.0, 5.0)):
                for bnd in ("bit", "truncation"):
                    if strict and bnd == "bit":
                        continue  # strict truncation changes nothing under BIT
                    for w in W_GRID:
                        key = ("fig8", n, lo, hi, bnd, w)
                        with variance_upper(unbounded):
                            res = batched(
                                key,
                                batches,
                                reps,
                                data_type="gaussian",
                                n=n,
                                epsilon=eps,
                                m_values=(m,),
                                bounds=(lo, hi),
                                bounding=bnd,
                                known_sd=None,
                                allocation=w,
                                rules=("thm7",),
                                include_single=False,
                                strict_truncation=strict,
                            )
                        res = res[res["rule"].isin(["thm7", "original"])]
                        frames.append(
                            res.assign(
                                figure="8",
                                candidate=cand,
                                n=n,
                                p=np.nan,
                                epsilon_total=eps,
                                epsilon_per_set=eps / m,
                                bounds=f"[{lo:g}, {hi:g}]",
                                bounding=bnd,
                                w=w,
                            )
                        )
    return pd.concat(frames, ignore_index=True)


def summarize(df: pd.DataFrame) -> None:
    """Print the tables of the markdown summary."""
    pd.set_option("display.width", 250)
    f6 = df[(df["figure"] == "6a") & (df["rule"] == "thm7")]
    for (n, p), g in f6.groupby(["n", "p"]):
        print(f"\n== Figure 6(a), n = {n}, p = {p:g}, BIT: value (m grid) ==")
        t = g.pivot_table(index=["candidate", "metric"], columns="m", values="value")
        print(t.loc[(slice(None), ["bias", "sd_estimate", "coverage"]), :].round(4).to_string())
        sd = g[g["metric"] == "sd_estimate"]
        ext = sd.loc[sd.groupby("candidate")["value"].idxmin(), ["candidate", "m"]]
        print("m of the SD minimum:", dict(zip(ext["candidate"], ext["m"], strict=True)))
        mx = sd.loc[sd.groupby("candidate")["value"].idxmax(), ["candidate", "m"]]
        print("m of the SD maximum:", dict(zip(mx["candidate"], mx["m"], strict=True)))
    # bias against coverage over every (epsilon, m) of the n = 100, p = 0.1 panel
    pan = f6[(f6["n"] == 100) & (f6["p"] == 0.1)]
    wide = pan.pivot_table(index=["candidate", "m"], columns="metric", values="value")
    low = wide[wide["coverage"] < 0.9]
    print("\nn = 100, p = 0.1: smallest bias among (candidate, m) with coverage < 0.90:")
    print(low.sort_values("bias").head(3)[["bias", "coverage", "sd_estimate"]].round(4))
    small = wide[wide["bias"] <= 0.02]
    print("lowest coverage among (candidate, m) with bias <= 0.02:")
    print(small.sort_values("coverage").head(3)[["bias", "coverage", "sd_estimate"]].round(4))
    print(f"largest MC SE, Figure 6: {pan.groupby('metric')['mc_se'].max().round(4).to_dict()}")

    f8 = df[df["figure"] == "8"]
    orig = f8[(f8["rule"] == "original") & (f8["metric"] == "ci_half_width")]
    orig = orig.groupby(["n", "bounds", "bounding", "w"])["value"].mean().rename("hw0")
    t8 = f8[f8["rule"] == "thm7"].pivot_table(
        index=["candidate", "n", "bounds", "bounding", "w"], columns="metric", values="value"
    )
    t8 = t8.join(orig, on=["n", "bounds", "bounding", "w"])
    t8["ratio"] = t8["ci_half_width"] / t8["hw0"]
    print("\n== Figure 8: half-width ratio (thm7 / original), n = 1000, [-4, 4], BIT ==")
    r = t8.xs((1000, "[-4, 4]", "bit"), level=("n", "bounds", "bounding"))["ratio"]
    print(r.unstack("w").round(3).to_string())
    print("\n== Figure 8: coverage, truncation, n = 100 (both bounds) ==")
    c = t8.xs((100, "truncation"), level=("n", "bounding"))["coverage"]
    print(c.unstack("w").round(3).to_string())
    print("\n== Figure 8: coverage, truncation, n = 1000 ==")
    c = t8.xs((1000, "truncation"), level=("n", "bounding"))["coverage"]
    print(c.unstack("w").round(3).to_string())
    print("\n== Figure 8: coverage, BIT, n = 100 and 1000 ==")
    c = t8.xs("bit", level="bounding")["coverage"]
    print(c.unstack("w").round(3).to_string())
    print("\n== Figure 8: bias, [-4, 5], n = 100 ==")
    c = t8.xs((100, "[-4, 5]"), level=("n", "bounds"))["bias"]
    print(c.unstack("w").round(3).to_string())
    se = f8[f8["rule"] == "thm7"].groupby("metric")["mc_se"].median().round(4).to_dict()
    print(f"median MC SE, Figure 8: {se}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--reps", type=int, default=1000, help="repetitions per batch")
    args = ap.parse_args()
    start = time.perf_counter()
    df = pd.concat([figure6(args.batches, args.reps), figure8(args.batches, args.reps)])
    df["reps"] = args.batches * args.reps
    cols = [
        "figure",
        "candidate",
        "n",
        "p",
        "bounds",
        "bounding",
        "epsilon_total",
        "epsilon_per_set",
        "w",
        "m",
        "rule",
        "metric",
        "value",
        "mc_se",
        "reps",
    ]
    # keep the CSV small: Figure 8 without the empirical SD, original-data rows only where used
    keep = (df["figure"] == "6a") | (df["metric"] != "empirical_sd")
    keep &= (df["rule"] != "original") | df["metric"].isin(["sd_estimate", "ci_half_width"])
    df = df.loc[keep, cols].sort_values(cols[:12]).reset_index(drop=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT, index=False, float_format="%.6g", lineterminator="\n")
    summarize(df)
    print(f"\nwrote {OUT.relative_to(ROOT)} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
