"""Reproduction checks: does a number of this run agree with the paper's, and if not, why?

(A notebook's reproduction check, not the curator's utility verdict of a release,
:mod:`dpsynth.curator.column_verdict`. The comparison table keeps its column name "verdict".)

Each notebook ends with a comparison of its numbers with the paper's. This module turns a
(paper value, run value, Monte Carlo standard error) triple into a sentence, so that the
book's conclusions are computed from the numbers rather than written by hand:

* "agrees within Monte Carlo error (difference 0.012, 0.8 standard errors)";
* "differs by -324 (26.3 standard errors); likely cause: ..." where the cause comes from
  :data:`CAUSES`, a small table keyed by (study, quantity) holding what dpsynth found when it
  investigated the difference (the evidence is on the book's "Where the papers leave a
  choice" page).

**The criterion** (one, for every closing table; :func:`reproduction_check` applies it, the
book's page "How a reproduction is judged" states it). With d = run - paper,

    SE_d = sqrt(SE_run^2 + SE_paper^2),   the cell agrees if |d| <= K SE_d + r,

with K = :data:`CRITERION_K` = 2. SE_run is the Monte Carlo standard error of dpsynth's
estimate over its replicates (sd / sqrt(R) for a mean; a bootstrap of the replicates for a
quantile; for a minimum or maximum the larger of the bootstrap and an order-statistic SE,
:func:`extreme_se`, because a bootstrap understates an extreme's error). SE_paper is the
paper's own Monte Carlo error: stated where the paper gives its design (e.g. a coverage over
5,000 repetitions), else the paper's number is taken to be an estimate of the same design as
dpsynth's (the default, :data:`SAME_DESIGN`), so SE_paper = SE_run and SE_d = sqrt(2) SE_run.
r is the precision of the paper's number itself: 0 for a printed table cell, a stated
reading precision (``abs_tol`` or ``rel_tol`` x |paper|) for a number the paper only gives
approximately ("about 2 to 3.5", a value read off a figure). A cell with no SE and no reading
precision cannot be judged within error and is shown, not counted.

Cells equal **by construction** (e.g. a censored synthesizer's epsilon = 2M, a stand-in's
calibrated data summaries), **tuned** to the paper (a setting chosen so that this cell
matches), or that **repeat** a cell already counted elsewhere, are shown with their check
but counted in no tally (spec key ``counted``: a reason, see :data:`NOT_COUNTED`).

``paper`` may be a number, an interval (lo, hi) (the paper gives a range; agreement if the run
lies within it, widened by the tolerance), a label (categorical: the name of the best
synthesizer), or missing (None or NaN: the paper has no such number, "not in the paper").

:func:`compare` builds the comparison table a notebook prints: one row per quantity, the
paper's value, the committed paper-scale value (:mod:`dpsynth.studies.results`) when there is
one, this run's value, where a reading of the paper was chosen the literal reading's value and
its check, and the reproduction check (column "verdict") on the best evidence available
(paper scale if committed, else this run).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CAUSES",
    "CRITERION_K",
    "NOT_COUNTED",
    "SAME_DESIGN",
    "extreme_se",
    "NOT_IN_PAPER",
    "NOT_RUN",
    "ReproductionCheck",
    "compare",
    "estimate",
    "tally",
    "verdict_kind",
    "quantile_estimate",
    "statistic_estimate",
    "paper_value",
    "summary_frame",
    "reproduction_check",
]

NOT_IN_PAPER = "not in the paper"
"""What a comparison shows where the paper has no number (e.g. an epsilon off its grid)."""

NOT_RUN = "not run"
"""What a comparison shows where this run has no number (e.g. an epsilon left out)."""

CRITERION_K = 2.0
"""The criterion's multiple: a cell agrees if |run - paper| <= K SE_d + r (module docstring)."""

SAME_DESIGN = "same design"
"""``paper_se`` default: the paper's number is a Monte Carlo estimate of the same design as
dpsynth's, so its SE is taken equal to dpsynth's (SE_d = sqrt(2) SE_run)."""

NOT_COUNTED: dict[str, str] = {
    "construction": "equal by construction",
    "tuned": "tuned to the paper",
    "repeat": "repeats a cell counted elsewhere",
    "no_se": "no Monte Carlo error to judge it by",
}
"""Why a cell is shown but counted in no tally (spec key ``counted``)."""

NOT_COUNTED_PREFIX = "not counted"

UNKNOWN_CAUSE = "not known (see the book's page 'Where the papers leave a choice')"

CAUSES: dict[tuple[str, str], str] = {
    # Censoring paper, Section 4 (notebook 01).
    ("beta", "censor_w_count"): (
        "Monte Carlo error and the number of retained draws S (a record counts if clamped "
        "in any draw; S is not stated): under the reading that fits (Censor_w censors the "
        "re-weighted LW weights, k = 0.95; profile key censor_w_reweight) a database "
        "censors about every record with |l_i| > eps/2 when 0.95 Delta_W exceeds eps/2 and "
        "none otherwise, so the counts are all or nothing at eps = 5 and their quartiles "
        "move with a few databases; the paper does not state the re-weighting"
    ),
    ("beta", "censor_w_count_downscaled"): (
        "not reproduced: no single downscaling factor fits both downscaled rows of Table S4 "
        "(0.9 fits Weighted-e; Censor_w's share of censoring databases needs a smaller one "
        "with re-weighted weights, and plain weights censor far too few at any factor)"
    ),
    ("beta", "weighted_e_count_downscaled"): (
        "the downscaling factor, lost from the text: 0.9 (dpsynth's paper profile) is the "
        "factor that gives the paper's mean under the lw-bound rule"
    ),
    ("beta", "weighted_e_count"): (
        "Monte Carlo error (the counts are skewed, the paper's own SE is about sd/10) and the "
        "truncation rule, lost from the text (alpha_i f_i > eps/2, profile key "
        "weighted_e_rule)"
    ),
    ("beta", "censor_uw_count"): "Monte Carlo error and MCMC run length (S is not stated)",
    ("beta", "best_dp"): (
        "the PH bin rule: with ceil(sqrt(n)) bins PH beats the censored synthesizers; the "
        "paper's PH numbers are those of ceil(ln(n)) bins (profile key ph_bin_rule)"
    ),
    ("beta", "weighted_bound"): "Monte Carlo error and the number of retained draws S",
    # Censoring paper, Section 5 (notebook 02).
    ("sdr", "weighted_epsilon"): (
        "the LW tuning (c, g): with c = 1, g = 0 the Weighted epsilon is about 12; the paper "
        "evidently scaled the weights (Section 4.5), which profile key sdr_weighted_epsilon "
        "reproduces"
    ),
    ("sdr", "weighted_e_epsilon"): (
        "the LW tuning (c, g) and the data: the SIMULATED stand-in is not the SDR file"
    ),
    ("sdr", "ph_max_ecdf"): (
        "the PH bin rule (ceil(ln(n)) bins give the paper's PH quantiles; ceil(sqrt(n)) "
        "bins give a far better PH) and the SIMULATED stand-in"
    ),
    ("sdr", "utility"): (
        "the SIMULATED stand-in (its salaries match the paper's four Data summaries, not "
        "their relation to the predictors) and one synthetic dataset per synthesizer"
    ),
    ("sdr", "best_dp"): "the PH bin rule and the SIMULATED stand-in",
    # Vector-weighted paper (notebooks 03-06).
    ("reweighting", "k"): (
        "the acceptance rule of Algorithm 3: at k = 0.95 the re-weighted bound is 4-5% "
        "below the original, which the paper calls equivalent; a 1% two-sided tolerance "
        "pushes k to 0.99-1 (profile key k_rule)"
    ),
    ("reweighting", "utility"): (
        "the simulated database (the paper's is not published) and the m synthetic sets "
        "behind each interval"
    ),
    ("reweighting", "table1_data"): (
        "the simulated database: the paper's is another, unpublished draw of the same "
        "negative binomial mixture, and the Data intervals (bootstrap over records) move with it"
    ),
    ("reweighting", "data_mean"): "a subsample of the stand-in (calibrated on all records)",
    ("reweighting", "data_median"): "a subsample of the stand-in (calibrated on all records)",
    ("reweighting", "data_sd"): "a subsample of the stand-in (calibrated on all records)",
    ("vector", "sw_alpha"): (
        "the Lipschitz bounds depend on the simulated database and the retained draws"
    ),
    ("vector", "global_bound"): (
        "a reading of the paper's number: its global value sits at the centre of dpsynth's "
        "local LW bounds (their median), not at their maximum; neither the R script's "
        "quantile over draws nor re-weighting brings the maximum down to it "
        "(benchmarks/investigations/local_bound_tail.py); the paper does not state the LW "
        "tuning (c, g) or the run length behind it, and dpsynth uses c = 1, g = 0"
    ),
    ("reweighting", "cw_direction"): (
        "Algorithm 2's weights as printed fall with y on this right-skewed mixture, so the "
        "NB synthesizer's mean (the weighted mean) moves down at every radius; the paper's "
        "upward CW bias needs weights it does not describe "
        "(benchmarks/investigations/cw_direction.py)"
    ),
    ("vector", "utility"): "the simulated database (the paper's is not published)",
    ("vector", "ratio_CW"): (
        "CW's radius is matched to LW's bound in at most cw_fits fits (ci 2, paper 3), "
        "stopping within 5%; the paper does not say how it matched them"
    ),
    ("vector", "ratio_SW"): (
        "SW's rule alpha = Delta_LW / Delta_Unweighted lands above LW's bound because the "
        "down-weighted posterior is wider (the paper matches the bounds 'by design')"
    ),
    # Liu, modips (notebook 07).
    ("modips", "table1"): "Monte Carlo error",
    ("modips", "sd_peak"): (
        "the SD curve is flat near its peak, so its argmax moves with Monte Carlo error, "
        "and the paper does not state Figure 6's epsilon (dpsynth uses 1)"
    ),
    ("modips", "binary_bias"): (
        "the paper does not state Figure 6's epsilon: at epsilon = 1 the per-set "
        "budget at m = 500 clamps p* to 0 or 1; a larger epsilon is closer to the paper"
    ),
    ("modips", "allocation"): "the paper does not state Figure 8's epsilon and m",
}
"""Known causes of differences, keyed by (study, quantity); filled from dpsynth's findings."""


@dataclass(frozen=True)
class ReproductionCheck:
    """Does one number of this run reproduce the paper's? (Not the curator's utility verdict.)"""

    status: str  # "agrees", "differs", "not in the paper", "not run"
    sentence: str
    difference: float = math.nan
    z: float = math.nan

    def __str__(self) -> str:
        return self.sentence

    @property
    def agrees(self) -> bool:
        return self.status == "agrees"


def estimate(values: Any) -> tuple[float, float, int]:
    """(mean, Monte Carlo standard error, count) of replicate values; SE is NaN for one value.

    NaN values are dropped; an empty input gives (NaN, NaN, 0).
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, 0
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan
    return float(x.mean()), se, int(x.size)


_STATISTICS = {
    "min": np.min,
    "q1": lambda x: np.quantile(x, 0.25),
    "median": np.median,
    "mean": np.mean,
    "q3": lambda x: np.quantile(x, 0.75),
    "max": np.max,
    "sd": lambda x: np.std(x, ddof=1),
}


def statistic_estimate(
    values: Any, statistic: str, *, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, int]:
    """(value, Monte Carlo standard error, count) of one summary of replicate values.

    ``statistic``: min, q1, median, mean, q3, max or sd (the censoring paper's Table 1; the
    quartiles as R's ``summary``, type 7). The SE of the mean is sd / sqrt(R); the others
    are bootstrap SEs (``n_boot`` resamples of the R values, a fixed ``seed`` so a table is
    reproducible). A bootstrap SE of an extreme (min, max) understates its error; one of 0
    means every resample gave the same value. NaN values are dropped.
    """
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(_STATISTICS)}")
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0 or (statistic == "sd" and x.size < 2):
        return math.nan, math.nan, int(x.size)
    fn = _STATISTICS[statistic]
    value = float(fn(x))
    if x.size < 2:
        return value, math.nan, 1
    if np.ptp(x) == 0:  # every replicate the same: no Monte Carlo spread (exactly 0)
        return value, 0.0, int(x.size)
    if statistic == "mean":
        return value, float(x.std(ddof=1) / math.sqrt(x.size)), int(x.size)
    rng = np.random.default_rng(seed)
    boot = [fn(x[rng.integers(0, x.size, x.size)]) for _ in range(n_boot)]
    se = float(np.std(boot, ddof=1))
    if statistic in ("min", "max"):
        se = max(se, extreme_se(x, statistic))
    return value, se, int(x.size)


def extreme_se(values: Any, which: str = "max", top: int = 5) -> float:
    """An order-statistic standard error of the sample maximum (or minimum) of ``values``.

    Near an extreme, the spacings i (x_(i) - x_(i+1)) of the ``top`` largest order statistics
    (x_(1) the largest) are about independent exponentials with mean the Gumbel scale s of
    the maximum (Weissman's estimator), whose standard deviation is pi s / sqrt(6). A bootstrap
    of the replicates cannot see past the largest value it resamples and so understates this
    (it is 0 whenever the largest value repeats). NaN values are dropped; fewer than two
    values give NaN.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if which not in ("max", "min"):
        raise ValueError("which must be 'max' or 'min'")
    if x.size < 2:
        return math.nan
    x = np.sort(x)[::-1] if which == "max" else np.sort(x)
    j = min(int(top), x.size - 1)
    spacings = np.abs(np.diff(x[: j + 1])) * np.arange(1, j + 1)
    return float(math.pi / math.sqrt(6.0) * spacings.mean())


def quantile_estimate(
    values: Any, q: float, *, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, int]:
    """(the q-quantile (type 7), its bootstrap standard error, count) of replicate values.

    For the endpoints of an empirical interval (e.g. the vector-weighted paper's appendix
    Table 1, q = 0.025 and 0.975 over m synthetic sets); SE 0 when all values are equal.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, 0
    value = float(np.quantile(x, q))
    if x.size < 2:
        return value, math.nan, 1
    if np.ptp(x) == 0:
        return value, 0.0, int(x.size)
    rng = np.random.default_rng(seed)
    boot = [np.quantile(x[rng.integers(0, x.size, x.size)], q) for _ in range(n_boot)]
    return value, float(np.std(boot, ddof=1)), int(x.size)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, str):
        return v in ("", NOT_IN_PAPER, NOT_RUN)
    if isinstance(v, tuple):
        return False
    try:
        return not math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _fmt(v: float, fmt: str) -> str:
    return fmt.format(v)


def _cause(study: str | None, quantity: str | None, cause: str | None) -> str:
    if cause:
        return cause
    return CAUSES.get((str(study), str(quantity)), UNKNOWN_CAUSE)


def reproduction_check(
    paper: Any,
    run: Any,
    *,
    se: float | None = None,
    paper_se: float | str = SAME_DESIGN,
    study: str | None = None,
    quantity: str | None = None,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    fmt: str = "{:.3g}",
    cause: str | None = None,
) -> ReproductionCheck:
    """Judge ``run`` against ``paper`` by the one criterion (module docstring).

    ``run``: a number (its Monte Carlo standard error in ``se``), an array of replicate values
    (mean and SE from :func:`estimate`), or a label (when ``paper`` is a label). ``paper``: a
    number, an interval ``(lo, hi)``, a label, or missing (None, NaN, :data:`NOT_IN_PAPER`).
    With SE_d = sqrt(se^2 + paper_se^2) (``paper_se`` :data:`SAME_DESIGN`: equal to ``se``),
    the run agrees if |run - paper| <= :data:`CRITERION_K` SE_d + r (for an interval: the
    distance to it), where r = max(``rel_tol`` |paper|, ``abs_tol``) is the precision of a
    paper number given only approximately (0 for a printed table cell). Without an SE and
    without r a single paper number cannot be judged: status "not counted" (an interval
    still can: the run lies in it or not). The sentence gives the
    difference, its size in SE_d and, for a difference, the likely cause: ``cause``, else
    ``CAUSES[(study, quantity)]``.
    """
    if _missing(paper):
        return ReproductionCheck(NOT_IN_PAPER, NOT_IN_PAPER)
    why = _cause(study, quantity, cause)
    if isinstance(paper, str):  # categorical, e.g. the best synthesizer's name
        return _label_check(paper, run, why)
    value, se = _run_estimate(run, se)
    if not math.isfinite(value):
        return ReproductionCheck(NOT_RUN, NOT_RUN)
    pse = se if isinstance(paper_se, str) else float(paper_se)
    se_d = math.hypot(se, pse) if math.isfinite(se) and math.isfinite(pse) else math.nan
    diff, scale = _difference(paper, value)
    if isinstance(paper, tuple) and diff == 0.0:
        return ReproductionCheck("agrees", "agrees (within the paper's range)", 0.0, 0.0)
    reading = max(rel_tol * scale, abs_tol)
    z = abs(diff) / se_d if math.isfinite(se_d) and se_d > 0 else math.nan
    z_text = _z_text(z, se_d)
    if not math.isfinite(se_d) and reading == 0 and not isinstance(paper, tuple):
        text = (
            f"{NOT_COUNTED_PREFIX} ({NOT_COUNTED['no_se']}): difference {_fmt(diff, fmt)} "
            f"({z_text})"
        )
        return ReproductionCheck(NOT_COUNTED_PREFIX, text, diff, z)
    mc = CRITERION_K * se_d if math.isfinite(se_d) else 0.0
    tol = mc + reading
    if abs(diff) > tol:
        text = f"differs by {_fmt(diff, fmt)} ({z_text}); likely cause: {why}"
        return ReproductionCheck("differs", text, diff, z)
    if reading == 0:
        text = f"agrees within Monte Carlo error (difference {_fmt(diff, fmt)}, {z_text})"
    else:
        text = f"agrees within the stated tolerance ±{_fmt(tol, fmt)} ({z_text})"
    return ReproductionCheck("agrees", text, diff, z)


def _label_check(paper: str, run: Any, why: str) -> ReproductionCheck:
    """A categorical quantity (e.g. the best synthesizer's name): equal or not."""
    if _missing(run):
        return ReproductionCheck(NOT_RUN, NOT_RUN)
    if str(run) == paper:
        return ReproductionCheck("agrees", f"agrees ({paper})")
    return ReproductionCheck(
        "differs", f"differs: paper {paper}, this run {run}; likely cause: {why}"
    )


def _run_estimate(run: Any, se: float | None) -> tuple[float, float]:
    """(value, SE) of the run: a number with ``se``, or replicate values (:func:`estimate`).

    A label where a number is expected, or no value, gives NaN (the row says "not run").
    """
    if isinstance(run, str):
        return math.nan, math.nan
    if run is not None and np.ndim(run) > 0:
        value, se_est, _ = estimate(run)
        se = se_est if se is None else se
    else:
        value = math.nan if run is None else float(run)
    return value, (math.nan if se is None else float(se))


def _difference(paper: Any, value: float) -> tuple[float, float]:
    """(run - paper, |paper|); for an interval, the distance to it and |its centre|."""
    if isinstance(paper, tuple):
        lo, hi = (float(p) for p in paper)
        diff = 0.0 if lo <= value <= hi else (value - hi if value > hi else value - lo)
        return diff, abs(0.5 * (lo + hi))
    return value - float(paper), abs(float(paper))


def _z_text(z: float, se: float) -> str:
    """The difference's size in standard errors, in words."""
    if math.isfinite(z):
        return f"{z:.1f} standard errors"
    if se == 0:
        return "every replicate gave the same value"
    return "standard error unknown"


def summary_frame(values: Mapping[str, Any]) -> pd.DataFrame:
    """A run's numbers as the frame :func:`compare` reads and ``results`` commits.

    ``values``: key -> an array of replicate values (mean, SE and count by :func:`estimate`),
    a ``(mean, se, count)`` tuple, a single number (SE unknown), or a label (text). Returns
    a frame indexed by ``quantity`` with columns value, se, n, text.
    """
    rows = []
    for key, v in values.items():
        row: dict[str, Any] = {"quantity": key, "value": math.nan, "se": math.nan, "n": 1}
        row["text"] = ""
        if isinstance(v, str):
            row["text"] = v
        elif isinstance(v, tuple):
            row["value"], row["se"], row["n"] = float(v[0]), float(v[1]), int(v[2])
        elif np.ndim(v) > 0:
            row["value"], row["se"], row["n"] = estimate(v)
        else:
            row["value"] = math.nan if v is None else float(v)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["quantity", "value", "se", "n", "text"])
    return frame.set_index("quantity")


def paper_value(values: Mapping[Any, Any], key: Any) -> Any:
    """``values[key]``, or :data:`NOT_IN_PAPER` where the paper has no such number."""
    v = values.get(key)
    return NOT_IN_PAPER if _missing(v) else v


def _show(v: Any, fmt: str, se: float = math.nan) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return NOT_RUN
    if isinstance(v, tuple):
        return f"{_fmt(v[0], fmt)} to {_fmt(v[1], fmt)}"
    v = float(v)
    if not math.isfinite(v):
        return NOT_RUN
    text = _fmt(v, fmt)
    if math.isfinite(se) and se > 0:
        text += f" ± {_fmt(se, fmt)}"
    return text


def _lookup(summary: pd.DataFrame | None, key: str) -> tuple[Any, float]:
    """(value, se) of quantity ``key`` in a summary frame (index key; columns value, se, text)."""
    if summary is None or key not in summary.index:
        return None, math.nan
    row = summary.loc[key]
    text = row.get("text") if "text" in row.index else None
    if isinstance(text, str) and text:
        return text, math.nan
    se = row.get("se", math.nan)
    se = float(se) if se is not None and se == se else math.nan
    value = float(row["value"])
    return (value if math.isfinite(value) else None), se


SPEC_KEYS = frozenset(
    {
        "key",
        "label",
        "paper",
        "fmt",
        "rel_tol",
        "abs_tol",
        "paper_se",
        "cause",
        "counted",
        "literal",
    }
)
"""What a comparison spec may hold; a per-row multiple ``k`` is refused (one criterion)."""


def compare(
    specs: Sequence[Mapping[str, Any]],
    run: pd.DataFrame,
    *,
    study: str,
    committed: pd.DataFrame | None = None,
    run_label: str = "this run",
    committed_label: str = "dpsynth at paper scale (committed)",
    run_is_paper_scale: bool = False,
    literal: pd.DataFrame | None = None,
    literal_label: str = "literal reading",
) -> pd.DataFrame:
    """The comparison table a notebook prints: one row per spec, judged by one criterion.

    ``specs``: dicts with ``key`` (the quantity's name in the summaries), ``label`` (what the
    row says), ``paper`` (number, (lo, hi), label, or None), and optionally ``fmt``,
    ``rel_tol`` / ``abs_tol`` (the precision of a paper number given only approximately),
    ``paper_se`` (the paper's own Monte Carlo SE; default :data:`SAME_DESIGN`), ``cause``
    (the key of :data:`CAUSES`, default ``key``), ``counted`` (a key of :data:`NOT_COUNTED`:
    the row is shown with its check but counted in no tally) and ``literal`` (the key of this
    quantity in ``literal``, the summary of a run under the paper's literal reading where
    dpsynth chose another; True for the same key).
    ``run`` / ``committed`` / ``literal``: summary frames indexed by key with columns
    ``value``, ``se`` and optionally ``text`` (labels). Columns of the result: quantity,
    paper, the committed column (only when ``committed`` is given), ``run_label``, the
    literal column (only when ``literal`` is given: its value and check, "-" where no reading
    was chosen), verdict. The verdict judges the committed paper-scale value when there is
    one, else this run's, and says which ("paper scale", "this run at paper scale", or "this
    run, smaller than the paper's", whose differences may come from its size alone).
    """
    run_basis = (
        "this run at paper scale" if run_is_paper_scale else "this run, smaller than the paper's"
    )
    rows = []
    for spec in specs:
        unknown = set(spec) - SPEC_KEYS
        if unknown:
            raise ValueError(f"comparison spec {spec.get('key')!r}: unknown keys {sorted(unknown)}")
        key, fmt = spec["key"], spec.get("fmt", "{:.3g}")
        paper = spec.get("paper")
        paper = NOT_IN_PAPER if _missing(paper) else paper
        rv, rse = _lookup(run, key)
        row = {"quantity": spec["label"], "paper": _show(paper, fmt)}
        judged, jse, basis = rv, rse, run_basis
        if committed is not None:
            cv, cse = _lookup(committed, key)
            row[committed_label] = _show(cv, fmt, cse) if cv is not None else NOT_RUN
            if cv is not None:
                judged, jse, basis = cv, cse, "paper scale"
        row[run_label] = _show(rv, fmt, rse) if rv is not None else NOT_RUN

        check = functools.partial(
            _check_spec, spec, paper, study=study, quantity=spec.get("cause", key), fmt=fmt
        )
        if literal is not None:
            row[literal_label] = _literal_cell(spec, literal, check, fmt)
        v = check(judged, jse)
        if v.status in (NOT_IN_PAPER, NOT_RUN):
            row["verdict"] = v.sentence
        elif spec.get("counted") and v.status != NOT_COUNTED_PREFIX:
            reason = NOT_COUNTED[spec["counted"]]
            row["verdict"] = f"{basis}: {NOT_COUNTED_PREFIX} ({reason}): {v}"
        else:
            row["verdict"] = f"{basis}: {v}"
        rows.append(row)
    return pd.DataFrame(rows)


def _check_spec(
    spec: Mapping[str, Any],
    paper: Any,
    value: Any,
    value_se: float,
    *,
    study: str,
    quantity: str,
    fmt: str,
) -> ReproductionCheck:
    """:func:`reproduction_check` of one value against one spec's paper value."""
    return reproduction_check(
        paper,
        value,
        se=value_se,
        paper_se=spec.get("paper_se", SAME_DESIGN),
        study=study,
        quantity=quantity,
        rel_tol=spec.get("rel_tol", 0.0),
        abs_tol=spec.get("abs_tol", 0.0),
        fmt=fmt,
    )


def _literal_cell(spec: Mapping[str, Any], literal: pd.DataFrame, check: Any, fmt: str) -> str:
    """The literal reading's value and its check under the same criterion, or "-"."""
    name = spec.get("literal")
    if not name:
        return "-"
    lv, lse = _lookup(literal, spec["key"] if name is True else str(name))
    if lv is None:
        return NOT_RUN
    v = check(lv, lse)
    z = f", {v.z:.1f} SE" if math.isfinite(v.z) else ""
    return f"{_show(lv, fmt, lse)} ({v.status}{z})"


def tally(table: pd.DataFrame) -> dict[str, int]:
    """Counts of a comparison's verdicts by kind: agrees, differs (counted cells only),
    not counted, not in the paper, not run (:func:`verdict_kind` of each row)."""
    kinds = [verdict_kind(v) for v in table["verdict"]]
    return {
        k: kinds.count(k) for k in ("agrees", "differs", NOT_COUNTED_PREFIX, NOT_IN_PAPER, NOT_RUN)
    }


def verdict_kind(text: str) -> str:
    """The kind of a verdict sentence: agrees, differs, not counted, not in the paper, not run."""
    text = str(text).strip()
    if text in (NOT_IN_PAPER, NOT_RUN):
        return text
    _, sep, rest = text.partition(": ")
    body = rest if sep and not text.startswith(("agrees", "differs", NOT_COUNTED_PREFIX)) else text
    for kind in (NOT_COUNTED_PREFIX, "agrees", "differs"):
        if body.startswith(kind):
            return kind
    return "differs"
