"""Profiles and summaries of the Liu (modips) Section 5 studies for notebook 07.

The simulations themselves are :mod:`dpsynth.studies.modips_simulation` (Sections 5.1-5.3, vectorized);
this module holds what the notebook needs around them: named settings (``PROFILES``,
:func:`settings`), one call per paper section from a settings dict (:func:`section51`,
:func:`section52`, :func:`section53`), the numbers the paper prints (``PAPER``) and the
side-by-side summaries (:func:`table1`, :func:`sd_extremes`, :func:`run_summary`).

Choices where the paper is silent (the library's, repeated here for the notebook):

* Figure 6 and Figure 8's ε are not in the extracted text; both profiles use ε = 1 (total,
  split equally over the m sets). ``epsilon_check`` re-runs Figure 6(a)'s n = 100, p = 0.1 case
  at a larger ε, at which the paper's binary description fits better.
* Section 5.3 does not state m; both profiles use m = 5 (the value later work used with Thm 7).
* Seeds: Section 5.1 uses ``seed``, 5.2 ``seed + 1``, 5.3 ``seed + 2``, the ε check ``seed + 3``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dpsynth.privacy.accounting import sensitivity_mean, sensitivity_variance
from dpsynth.studies.modips_simulation import (
    M_GRID,
    study_allocation,
    study_combination_rules,
    study_m_effect,
)
from dpsynth.studies.profiles import Setting, derive_profiles, integer, profile_settings
from dpsynth.studies.reproduction import NOT_IN_PAPER, reproduction_check
from dpsynth.studies.runner import ProgressLog

__all__ = [
    "PAPER",
    "PROFILES",
    "TABLE1_BINARY_N",
    "TABLE1_RULES",
    "communal_share",
    "comparison_specs",
    "comparison_values",
    "table1_agreement",
    "run_summary",
    "scenario",
    "sd_extremes",
    "section51",
    "section52",
    "section52_literal",
    "section53",
    "settings",
    "table1",
]

PAPER: dict[str, Any] = {
    # As published: 5,000 repetitions, m over the full grid 2..500 (Section 5.1).
    "reps": 5000,
    "m_grid": M_GRID,
    "epsilon": 1.0,
    "table_m": 10,
    "table_epsilons": (100.0, 10.0, 1.0, 0.5),
    "allocations": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "allocation_m": 5,
    "epsilon_check": 10.0,
    "seed": 2016,
    "workers": 2,
}
PROFILES: dict[str, dict[str, Any]] = derive_profiles(
    PAPER,
    # Small: the notebook runs in well under a minute on one core.
    ci={"reps": 1000, "m_grid": (2, 3, 5, 10, 20, 40, 100, 200, 500), "workers": 1},
)
"""Named settings. ``reps`` repetitions per setting; ``m_grid`` the m values of Section 5.1;
``epsilon`` the total budget of Sections 5.1 and 5.3; ``table_m`` and ``table_epsilons`` the m
and ε grid of Table 1 (Section 5.2); ``allocations`` the shares w of ε spent on x̄ and
``allocation_m`` the m of Section 5.3; ``epsilon_check`` the ε of the Figure 6(a) check;
``workers`` processes (results do not depend on it)."""

TABLE1_RULES: tuple[str, ...] = ("original", "thm7", "raab", "raghunathan", "rubin", "single")
"""Table 1's columns, in the paper's order."""

TABLE1_BINARY_N: dict[int, int] = {10: 100, 100: 1000}
"""Table 1(a)'s printed n -> the n that reproduces its numbers (see ``study_combination_rules``)."""

PAPER: dict[str, Any] = {
    # Table 1(a), binary: (epsilon, printed n, p) -> coverage in TABLE1_RULES order.
    "table1_binary": {
        (100.0, 10, 0.5): (0.946, 0.948, 0.948, 0.798, 0.999, 0.736),
        (100.0, 10, 0.1): (0.935, 0.950, 0.949, 0.793, 0.996, 0.738),
        (100.0, 100, 0.5): (0.945, 0.952, 0.952, 0.797, 0.999, 0.747),
        (100.0, 100, 0.1): (0.949, 0.949, 0.950, 0.791, 0.998, 0.743),
        (10.0, 10, 0.5): (0.942, 0.945, 0.945, 0.814, 0.998, 0.723),
        (10.0, 10, 0.1): (0.930, 0.946, 0.946, 0.835, 0.997, 0.732),
        (10.0, 100, 0.5): (0.946, 0.947, 0.947, 0.792, 1.000, 0.738),
        (10.0, 100, 0.1): (0.952, 0.948, 0.950, 0.795, 0.998, 0.747),
        (1.0, 10, 0.5): (0.938, 0.947, 0.865, 0.994, 1.000, 0.730),
        (1.0, 10, 0.1): (0.936, 0.961, 0.840, 0.994, 0.999, 0.726),
        (1.0, 100, 0.5): (0.948, 0.946, 0.938, 0.898, 0.999, 0.746),
        (1.0, 100, 0.1): (0.950, 0.952, 0.931, 0.958, 1.000, 0.749),
        (0.5, 10, 0.5): (0.942, 0.941, 0.707, 0.999, 1.000, 0.715),
        (0.5, 10, 0.1): (0.928, 0.946, 0.532, 0.998, 0.999, 0.686),
        (0.5, 100, 0.5): (0.955, 0.953, 0.924, 0.972, 1.000, 0.730),
        (0.5, 100, 0.1): (0.949, 0.949, 0.869, 0.992, 1.000, 0.756),
    },
    # Table 1(b), Gaussian, bounds (-4, 4), BIT: (epsilon, n) -> coverage in TABLE1_RULES order.
    "table1_gaussian": {
        (100.0, 10): (0.951, 0.953, 0.946, 0.825, 0.997, 0.743),
        (100.0, 100): (0.949, 0.952, 0.952, 0.795, 0.997, 0.741),
        (10.0, 10): (0.951, 0.952, 0.836, 0.999, 1.000, 0.720),
        (10.0, 100): (0.948, 0.946, 0.933, 0.924, 0.998, 0.739),
        (1.0, 10): (0.948, 0.951, 0.392, 0.998, 0.999, 0.450),
        (1.0, 100): (0.953, 0.956, 0.454, 1.000, 1.000, 0.674),
        (0.5, 10): (0.951, 0.954, 0.334, 0.997, 0.998, 0.275),
        (0.5, 100): (0.950, 0.951, 0.274, 1.000, 1.000, 0.551),
    },
    # Section 5.1 text (Figure 6).
    "cp_m2_binary": 0.925,
    "cp_m2_gaussian": 0.91,
    "binary_n100_sd_min_m": (30, 40),
    "gaussian_n100_sd_peak_m": {"truncation": 20, "bit": 40},
    "gaussian_n1000_sd_peak_m": {"truncation": 50, "bit": 150},
    "binary_n100_p01_large_m_bias": 0.01,
}
"""Numbers the paper reports (Table 1; Section 5.1's text on Figure 6)."""


def settings(profile: str = "ci", **overrides: Any) -> dict[str, Any]:
    """The settings of ``profile`` ("ci" or "paper") with ``overrides`` applied.

    An override of ``None`` keeps the profile's value (the notebook's parameters cell passes
    ``None`` for "take the profile's value"). Returns a new JSON-serializable dict with
    ``profile`` added; grids come back as sorted tuples. Raises InputError naming the parameter
    for an unknown profile or key, a non-integer or too small count, an m below 2, a budget
    that is not finite and positive, or an allocation outside (0, 1).
    """
    return profile_settings(PROFILES, profile, overrides, SETTINGS)


_POSITIVE = Setting("float", "be > 0 and finite", lambda v: v > 0)
SETTINGS: dict[str, Setting] = {
    "reps": integer(2),
    "table_m": integer(2),
    "allocation_m": integer(2),
    "seed": integer(0),
    "workers": integer(1),
    "m_grid": Setting("list", item=integer(2), order="ascending"),
    "epsilon": _POSITIVE,
    "epsilon_check": _POSITIVE,
    "table_epsilons": Setting("list", item=_POSITIVE, order="descending"),
    "allocations": Setting(
        "list",
        item=Setting("float", "be a share in (0, 1)", lambda v: 0 < v < 1),
        order="ascending",
    ),
}
"""What each setting must be (:func:`dpsynth.studies.profiles.check_settings`)."""


# ------------------------------------------------------------------------------ the studies


def _announced(name: str, run: Any) -> pd.DataFrame:
    """Run one section's study, with a line on the ``make book`` terminal when it ends."""
    log = ProgressLog(name, 1, 0)
    out = run()
    log.update()
    return out


def section51(cfg: dict[str, Any]) -> pd.DataFrame:
    """Section 5.1 (Figure 6): Theorem 7 inference against m, binary and Gaussian, BIT/truncation.

    One row per (setting, m, rule) with a ``scenario`` label; see ``study_m_effect``.
    """
    out = _announced(
        "section51",
        lambda: study_m_effect(
            m_values=cfg["m_grid"],
            reps=cfg["reps"],
            seed=cfg["seed"],
            epsilon=cfg["epsilon"],
            workers=cfg["workers"],
        ),
    )
    return out.assign(scenario=scenario(out))


def epsilon_check(cfg: dict[str, Any]) -> pd.DataFrame:
    """Figure 6(a)'s binary n = 100, p = 0.1 case at ε = ``cfg["epsilon_check"]`` (both boundings)."""
    out = _announced(
        "epsilon_check",
        lambda: study_m_effect(
            m_values=cfg["m_grid"],
            reps=cfg["reps"],
            seed=cfg["seed"] + 3,
            epsilon=cfg["epsilon_check"],
            ns_binary=(100,),
            ps=(0.1,),
            data_types=("binary",),
            workers=cfg["workers"],
        ),
    )
    return out.assign(scenario=scenario(out))


def section52(cfg: dict[str, Any]) -> pd.DataFrame:
    """Section 5.2 (Table 1, Figure 7): Thm 7 vs Rubin, Raghunathan, Raab, single; BIT, m fixed."""
    out = _announced(
        "section52",
        lambda: study_combination_rules(
            m_values=(cfg["table_m"],),
            reps=cfg["reps"],
            seed=cfg["seed"] + 1,
            epsilons=cfg["table_epsilons"],
            workers=cfg["workers"],
        ),
    )
    return out.assign(scenario=scenario(out))


def section52_literal(cfg: dict[str, Any]) -> pd.DataFrame:
    """Table 1(a) under its literal reading: the binary rows at the printed n = 10 and 100.

    The same designs, seed and repetitions as :func:`section52`'s binary rows, which run at
    n = 100 and 1000 (``TABLE1_BINARY_N``), the n that reproduces the printed numbers. Read
    with ``table1(frame, literal=True)``.
    """
    out = _announced(
        "section52_literal",
        lambda: study_combination_rules(
            m_values=(cfg["table_m"],),
            reps=cfg["reps"],
            seed=cfg["seed"] + 1,
            epsilons=cfg["table_epsilons"],
            ns_binary=tuple(TABLE1_BINARY_N),
            data_types=("binary",),
            workers=cfg["workers"],
        ),
    )
    return out.assign(scenario=scenario(out))


def section53(cfg: dict[str, Any]) -> pd.DataFrame:
    """Section 5.3 (Figure 8): share w of ε on x̄ vs bias, coverage, CI half width of μ.

    Communal rows get ``w`` = :func:`communal_share` (the individualized w they equal).
    """
    out = _announced(
        "section53",
        lambda: study_allocation(
            allocations=cfg["allocations"],
            m=cfg["allocation_m"],
            reps=cfg["reps"],
            seed=cfg["seed"] + 2,
            epsilon=cfg["epsilon"],
            workers=cfg["workers"],
        ),
    )
    w = out["allocation"].where(
        out["sanitization"] != "communal", communal_share(out["lower"], out["upper"])
    )
    return out.assign(w=w, scenario=scenario(out))


def communal_share(lower: Any, upper: Any) -> Any:
    """Share w of ε on x̄ that makes individualized sanitization communal (Liu Definitions 5-6).

    w = Δ_x̄ / (Δ_x̄ + Δ_s²) = 1 / (1 + c1 - c0) for data in [c0, c1] (n cancels).
    """
    d_m, d_v = sensitivity_mean(lower, upper, 1), sensitivity_variance(lower, upper, 1)
    return d_m / (d_m + d_v)


def scenario(frame: pd.DataFrame) -> pd.Series:
    """Panel label per row: "n = 100, p = 0.1" (binary) or "n = 100, [-4, 5]" (Gaussian)."""

    def label(row: pd.Series) -> str:
        if row["data_type"] == "binary":
            return f"n = {row['n']}, p = {row['p']:g}"
        return f"n = {row['n']}, [{row['lower']:g}, {row['upper']:g}]"

    return frame.apply(label, axis=1)


# ------------------------------------------------------------------------------ summaries


def table1(frame: pd.DataFrame, *, literal: bool = False) -> pd.DataFrame:
    """Table 1 side by side: coverage per rule, paper and this run, BIT, m = ``table_m``.

    ``frame`` is :func:`section52`'s output. One row per (data, ε, n as printed, p); columns a
    (rule, source) MultiIndex with source "paper" / "run". Rows the paper does not print (an
    epsilon off its grid) are kept, their paper values saying "not in the paper"; the binary
    n is the printed one (see ``TABLE1_BINARY_N``). ``literal``: ``frame`` ran the binary rows
    at the printed n (:func:`section52_literal`), so n is not mapped.
    """
    to_printed = {} if literal else {v: k for k, v in TABLE1_BINARY_N.items()}
    df = frame[frame["bounding"] == "bit"].copy()
    df["n_paper"] = np.where(
        (df["data_type"] == "binary") & bool(to_printed),
        df["n"].map(to_printed).fillna(-1),
        df["n"],
    ).astype(int)
    run = df.pivot_table(
        index=["data_type", "epsilon", "n_paper", "p"],
        columns="rule",
        values="coverage",
        dropna=False,
    )
    run = run.dropna(how="all")[[r for r in TABLE1_RULES if r in run.columns]]
    paper = pd.DataFrame(np.nan, index=run.index, columns=run.columns)
    for key in run.index:
        dt, eps, n, p = key
        vals = (
            PAPER["table1_binary"].get((eps, n, p))
            if dt == "binary"
            else PAPER["table1_gaussian"].get((eps, n))
        )
        if vals is not None:
            paper.loc[key] = [dict(zip(TABLE1_RULES, vals))[r] for r in run.columns]
    if paper.isna().to_numpy().any():  # a grid point off the paper's grid (e.g. another epsilon)
        paper = paper.astype(object).where(paper.notna(), NOT_IN_PAPER)
    both = pd.concat({"paper": paper, "run": run}, axis=1).swaplevel(axis=1)
    both = both[[(r, s) for r in run.columns for s in ("paper", "run")]]
    both.index = both.index.set_names(["data", "epsilon", "n", "p"])
    both = both.sort_index(ascending=[True, False, True, False])
    # The Gaussian rows have no p: a dash, not NaN, in the printed table.
    keys = both.index.to_frame(index=False)
    keys["p"] = keys["p"].astype(object).where(keys["p"].notna(), NO_P)
    both.index = pd.MultiIndex.from_frame(keys)
    return both


NO_P = "\u2013"
"""Table 1's p for the Gaussian rows (an en dash: the Gaussian data have no p)."""


def sd_extremes(frame: pd.DataFrame, rule: str = "thm7") -> pd.DataFrame:
    """Per setting, the m with the largest and the smallest mean SD estimate (Figure 6's peaks).

    ``frame`` is :func:`section51`'s output; one row per (data, scenario, bounding).
    """
    sub = frame[frame["rule"] == rule]
    rows = []
    for (dt, sc, bnd), g in sub.groupby(["data_type", "scenario", "bounding"], sort=False):
        sd = g.set_index("m")["sd_estimate"]
        rows.append(
            {
                "data": dt,
                "scenario": sc,
                "bounding": bnd,
                "m_sd_max": int(sd.idxmax()),
                "m_sd_min": int(sd.idxmin()),
            }
        )
    return pd.DataFrame(rows)


def _value(frame: pd.DataFrame, col: str, **where: Any) -> float:
    mask = np.ones(len(frame), dtype=bool)
    for k, v in where.items():
        mask &= (frame[k] == v).to_numpy()
    vals = frame.loc[mask, col]
    if len(vals) == 0:
        return float("nan")
    return float(vals.mean())


def run_summary(
    s51: pd.DataFrame, s52: pd.DataFrame, s53: pd.DataFrame, check: pd.DataFrame
) -> dict[str, float]:
    """This run's numbers for the notebook's "What the paper reports / what this run got" table.

    Keys: Table 1 cells ``t1_<data>_eps<ε>_n<n>[_p<p>]_<rule>`` (dots dropped) for a few rows,
    ``thm7_cov_min`` / ``_max`` over Table 1, Figure 6 summaries at the smallest and largest m of
    the grid, and Figure 8 summaries. Values are floats (m values as floats too) for ``glue``; NaN where the
    run does not include the setting (e.g. an ε of Table 1 left out of ``table_epsilons``).
    """
    out: dict[str, float] = {}
    t1 = table1(s52)
    picks = {
        "bin_eps05_n10_p01": ("binary", 0.5, 10, 0.1),
        "bin_eps100_n100_p05": ("binary", 100.0, 100, 0.5),
        "gau_eps05_n10": ("gaussian", 0.5, 10, np.nan),
        "gau_eps1_n100": ("gaussian", 1.0, 100, np.nan),
    }
    for name, (dt, eps, n, p) in picks.items():
        try:
            sub = t1.xs((dt, eps, n), level=("data", "epsilon", "n"))
            row = sub.iloc[0] if np.isnan(p) else sub.loc[p]
        except KeyError:  # a Table 1 row this run's epsilon grid does not include
            row = None
        for rule in TABLE1_RULES:
            out[f"t1_{name}_{rule}"] = float("nan") if row is None else float(row[(rule, "run")])
    thm7 = s52[s52["rule"] == "thm7"]["coverage"]
    out["thm7_cov_min"], out["thm7_cov_max"] = float(thm7.min()), float(thm7.max())

    t = s51[s51["rule"] == "thm7"]
    m_lo, m_hi = int(t["m"].min()), int(t["m"].max())
    out["m_lo"], out["m_hi"] = float(m_lo), float(m_hi)
    out["cp_mlo_binary"] = _value(t, "coverage", m=m_lo, data_type="binary")
    out["cp_mlo_gaussian"] = _value(t, "coverage", m=m_lo, data_type="gaussian")
    ext = sd_extremes(s51).set_index(["scenario", "bounding"])
    for bnd in ("bit", "truncation"):
        out[f"bin_n100_p01_sdmin_m_{bnd}"] = float(ext.loc[("n = 100, p = 0.1", bnd), "m_sd_min"])
        for n in (100, 1000):
            out[f"gau_n{n}_sdpeak_m_{bnd}"] = float(ext.loc[(f"n = {n}, [-4, 4]", bnd), "m_sd_max"])
    ck = sd_extremes(check).set_index("bounding")
    out["check_bin_sdmin_m_bit"] = float(ck.loc["bit", "m_sd_min"])
    sc = "n = 100, p = 0.1"
    for label, frame in (("", t), ("check_", check[check["rule"] == "thm7"])):
        out[f"{label}bin_p01_mhi_bias"] = _value(frame, "bias", m=m_hi, scenario=sc, bounding="bit")
        out[f"{label}bin_p01_mhi_cp"] = _value(
            frame, "coverage", m=m_hi, scenario=sc, bounding="bit"
        )

    a = s53[(s53["rule"] == "thm7") & (s53["sanitization"] == "individualized")]
    w_lo, w_hi = float(a["w"].min()), float(a["w"].max())
    out["w_lo"], out["w_hi"] = w_lo, w_hi
    asym = {"scenario": "n = 100, [-4, 5]", "bounding": "bit"}
    out["alloc_asym_bias_wlo"] = _value(a, "bias", w=w_lo, **asym)
    out["alloc_asym_bias_whi"] = _value(a, "bias", w=w_hi, **asym)
    trunc = a[(a["n"] == 100) & (a["bounding"] == "truncation")]["coverage"]
    out["alloc_trunc_n100_cp_min"] = float(trunc.min())
    out["alloc_trunc_n100_cp_max"] = float(trunc.max())
    sym = {"scenario": "n = 1000, [-4, 4]", "bounding": "bit"}
    out["alloc_n1000_hw_whi"] = _value(a, "ci_half_width", w=w_hi, **sym)
    orig = s53[s53["rule"] == "original"]
    out["alloc_n1000_hw_original"] = _value(orig, "ci_half_width", **sym)
    comm = s53[(s53["rule"] == "thm7") & (s53["sanitization"] == "communal")]
    out["alloc_n100_hw_communal"] = _value(
        comm, "ci_half_width", scenario="n = 100, [-4, 4]", bounding="bit"
    )
    out["alloc_n100_hw_w05"] = _value(
        a, "ci_half_width", w=0.5, scenario="n = 100, [-4, 4]", bounding="bit"
    )
    return out


# ------------------------------------------------------------------------------ comparison


def _coverage(value: float, reps: int) -> tuple[float, float, int]:
    """(coverage, binomial standard error, repetitions).

    The variance uses the adjusted share (x + 2) / (reps + 4) (Agresti-Coull), so that a
    coverage of exactly 0 or 1 does not get a standard error of 0.
    """
    p = float(value)
    if not np.isfinite(p):
        return p, float("nan"), int(reps)
    q = (p * reps + 2) / (reps + 4)
    return p, float(np.sqrt(q * (1 - q) / reps)), int(reps)


def table1_agreement(t1: pd.DataFrame, reps: int) -> float:
    """Share of Table 1's printed cells that agree with the paper under the one criterion.

    ``t1`` is :func:`table1`'s output. Each cell is judged by
    :func:`dpsynth.studies.reproduction.reproduction_check`: this run's binomial SE
    (``reps`` repetitions) combined with the paper's (5,000 repetitions), within
    :data:`~dpsynth.studies.reproduction.CRITERION_K` of them. dpsynth's own tally, not a
    number of the paper.
    """
    hits, total = 0, 0
    for rule in {r for r, _ in t1.columns}:
        paper = pd.to_numeric(t1[(rule, "paper")], errors="coerce")
        run = t1[(rule, "run")].astype(float)
        ok = paper.notna() & run.notna()
        for pv, rv in zip(paper[ok], run[ok], strict=True):
            check = reproduction_check(
                float(pv),
                float(rv),
                se=_coverage(rv, reps)[1],
                paper_se=_coverage(pv, PAPER_REPS)[1],
            )
            hits += int(check.agrees)
            total += 1
    return hits / total if total else float("nan")


PAPER_REPS = 5000
"""Repetitions behind the paper's Section 5 numbers."""


def comparison_values(
    s51: pd.DataFrame,
    s52: pd.DataFrame,
    s53: pd.DataFrame,
    check: pd.DataFrame,
    reps: int,
    literal: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Notebook 07's numbers for the closing comparison: :func:`run_summary` with standard
    errors on the coverages (binomial, ``reps`` repetitions), the share of Table 1's cells
    that agree under the one criterion (``table1_agreeing``) and, given ``literal``
    (:func:`section52_literal`), the binary picks at the printed n (``<key>_literal``) and
    that share over Table 1(a) under both readings (``table1a_agreeing``,
    ``table1a_agreeing_literal``)."""
    raw = run_summary(s51, s52, s53, check)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        is_cov = key.startswith("t1_") or "_cp" in key or key.startswith(("cp_", "thm7_cov"))
        out[key] = _coverage(value, reps) if is_cov and np.isfinite(value) else value
    t1 = table1(s52)
    out["table1_agreeing"] = table1_agreement(t1, reps)
    if literal is not None:
        lit = table1(literal, literal=True)
        binary = t1.xs("binary", level="data", drop_level=False)
        out["table1a_agreeing"] = table1_agreement(binary, reps)
        out["table1a_agreeing_literal"] = table1_agreement(lit, reps)
        for name, (eps, n, p) in BINARY_PICKS.items():
            for rule in TABLE1_RULES:
                try:
                    value = float(lit.loc[("binary", eps, n, p), (rule, "run")])
                except KeyError:
                    value = float("nan")
                key = f"t1_{name}_{rule}_literal"
                out[key] = _coverage(value, reps) if np.isfinite(value) else value
    out["alloc_bias_decreasing"] = (
        "yes" if raw["alloc_asym_bias_wlo"] > raw["alloc_asym_bias_whi"] else "no"
    )
    out["alloc_trunc_undercovers"] = "yes" if raw["alloc_trunc_n100_cp_max"] < 0.94 else "no"
    out["alloc_hw_ratio"] = raw["alloc_n1000_hw_whi"] / raw["alloc_n1000_hw_original"]
    out["alloc_communal_vs_w05"] = raw["alloc_n100_hw_communal"] / raw["alloc_n100_hw_w05"]
    return out


def comparison_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of notebook 07's comparison: the paper's Table 1 picks and Section 5.1 numbers.

    Rows whose setting this run's grid does not contain (e.g. m = 2 left out) get no paper
    value ("not in the paper" for this run's grid).
    """
    return _table1_specs(cfg) + _section51_specs(cfg)


def _table1_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Table 1's coverage picks (per combining rule) and the share of cells within 4 SE."""
    names = {
        "thm7": "Theorem 7",
        "raab": "Raab",
        "raghunathan": "Raghunathan",
        "rubin": "Rubin",
        "single": "single synthesis",
    }
    picks = {
        "bin_eps05_n10_p01": ("binary, eps 0.5, n 10, p 0.1", "table1_binary", (0.5, 10, 0.1)),
        "bin_eps100_n100_p05": (
            "binary, eps 100, n 100, p 0.5",
            "table1_binary",
            (100.0, 100, 0.5),
        ),
        "gau_eps05_n10": ("Gaussian, eps 0.5, n 10", "table1_gaussian", (0.5, 10)),
        "gau_eps1_n100": ("Gaussian, eps 1, n 100", "table1_gaussian", (1.0, 100)),
    }
    rows: list[dict[str, Any]] = []
    in_grid = set(cfg["table_epsilons"])
    for key, (label, table, cell) in picks.items():
        values = PAPER[table].get(cell) if cell[0] in in_grid else None
        for rule, name in names.items():
            paper = None if values is None else values[TABLE1_RULES.index(rule)]
            rows.append(
                {
                    "key": f"t1_{key}_{rule}",
                    "label": f"Table 1 coverage, {label}: {name}",
                    "paper": paper,
                    "paper_se": 0.0 if paper is None else _coverage(paper, PAPER_REPS)[1],
                    "fmt": "{:.3f}",
                    "cause": "table1",
                    **({"literal": f"t1_{key}_{rule}_literal"} if key in BINARY_PICKS else {}),
                }
            )
    for key, label in (
        ("table1_agreeing", "share of Table 1's printed cells that agree (dpsynth's tally)"),
        ("table1a_agreeing", "the same share, Table 1(a) (binary), n = 100 / 1000"),
        ("table1a_agreeing_literal", "the same share, Table 1(a), n as printed (10 / 100)"),
    ):
        rows.append({"key": key, "label": label, "paper": None, "fmt": "{:.3f}"})
    return rows


BINARY_PICKS: dict[str, tuple[float, int, float]] = {
    "bin_eps05_n10_p01": (0.5, 10, 0.1),
    "bin_eps100_n100_p05": (100.0, 100, 0.5),
}
"""The binary rows of Table 1 the closing comparison shows: name -> (epsilon, printed n, p)."""


def _section51_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Section 5.1's numbers (coverage and SD along the m grid, binary bias, Figure 8)."""
    return _m_grid_specs(cfg) + _binary_bias_specs(cfg) + _allocation_specs()


def _m_grid_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Coverage at m = 2 and the m of the Gaussian SD peak (Section 5.1)."""
    rows: list[dict[str, Any]] = []
    at2 = min(cfg["m_grid"]) == 2
    rows += [
        {
            "key": "cp_mlo_binary",
            "label": "coverage at m = 2, binary (mean over settings)",
            "paper": PAPER["cp_m2_binary"] if at2 else None,
            "abs_tol": 0.01,
            "fmt": "{:.3f}",
            "cause": "sd_peak",
        },
        {
            "key": "cp_mlo_gaussian",
            "label": "coverage at m = 2, Gaussian (mean over settings)",
            "paper": PAPER["cp_m2_gaussian"] if at2 else None,
            "abs_tol": 0.01,
            "fmt": "{:.3f}",
            "cause": "sd_peak",
        },
    ]
    for n, peaks in (
        (100, PAPER["gaussian_n100_sd_peak_m"]),
        (1000, PAPER["gaussian_n1000_sd_peak_m"]),
    ):
        for bnd, m in peaks.items():
            rows.append(
                {
                    "key": f"gau_n{n}_sdpeak_m_{bnd}",
                    "label": f"Gaussian [-4, 4], n = {n}: m of the SD peak, {bnd}",
                    "paper": m,
                    "rel_tol": 0.25,
                    "fmt": "{:.0f}",
                    "cause": "sd_peak",
                }
            )
    return rows


def _binary_bias_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Binary n = 100, p = 0.1: the m of the SD minimum and the bias at large m (Section 5.1)."""
    rows: list[dict[str, Any]] = []
    m_hi = max(cfg["m_grid"])
    rows.append(
        {
            "key": "bin_n100_p01_sdmin_m_bit",
            "label": f"binary n = 100, p = 0.1: m of the SD minimum, BIT, eps {cfg['epsilon']:g}",
            "paper": tuple(PAPER["binary_n100_sd_min_m"]),
            "rel_tol": 0.25,
            "fmt": "{:.0f}",
            "cause": "binary_bias",
        }
    )
    rows.append(
        {
            "key": "check_bin_sdmin_m_bit",
            "label": f"the same at eps {cfg['epsilon_check']:g}",
            "paper": tuple(PAPER["binary_n100_sd_min_m"]),
            "rel_tol": 0.25,
            "fmt": "{:.0f}",
            "cause": "binary_bias",
        }
    )
    big_m = m_hi > 200
    for prefix, eps in (("", cfg["epsilon"]), ("check_", cfg["epsilon_check"])):
        rows.append(
            {
                "key": f"{prefix}bin_p01_mhi_bias",
                "label": f"binary n = 100, p = 0.1, m = {m_hi}, BIT: bias, eps {eps:g}",
                "paper": PAPER["binary_n100_p01_large_m_bias"] if big_m else None,
                "abs_tol": 0.005,
                "fmt": "{:.3f}",
                "cause": "binary_bias",
            }
        )
    return rows


def _allocation_specs() -> list[dict[str, Any]]:
    """Figure 8's findings on the budget allocation w (Section 5.3)."""
    return [
        {
            "key": "alloc_bias_decreasing",
            "label": "Figure 8: bias of mu, [-4, 5], BIT, decreasing in w",
            "paper": "yes",
            "cause": "allocation",
        },
        {
            "key": "alloc_trunc_undercovers",
            "label": "Figure 8: truncation, n = 100, under-covers for every w",
            "paper": "yes",
            "cause": "allocation",
        },
        {
            "key": "alloc_hw_ratio",
            "label": "Figure 8: half width at the largest w / original, n = 1000",
            "paper": 1.0,
            "rel_tol": 0.1,
            "fmt": "{:.2f}",
            "cause": "allocation",
        },
        {
            "key": "alloc_communal_vs_w05",
            "label": "Figure 8: half width, communal / w = 0.5, n = 100 (paper: 'might not' be best)",
            "paper": None,
            "fmt": "{:.2f}",
        },
    ]
