"""The preflight of a table release: the spec run on public data before any budget is spent.

:func:`preflight` runs the whole table release (:func:`dpsynth.table.pipeline.synthesize_table`,
the same spec, epsilon, m and sampler settings, seeds from the operating system) on public
data only, so that a spec whose columns would not converge, or would be rated poor, is
refused in minutes, before the confidential data are read or the budget charged. The data:

* the spec's public **reference** file when it names one (as ``plan-table`` does): a column
  whose fit misses the convergence policy, or a table verdict of ``poor`` there, refuses,
  unless the reference is too small to judge the verdict: most of its ideal syntheses (one
  bootstrap sample of it against another, :func:`ideal_poor_share`) are rated poor too. A
  censored model column whose fit missed the convergence policy there is first tried again
  with ``downscale = "auto"`` (:func:`remedied`): where every fit then converges, the
  release uses it and the line says so, else the first run's refusal stands;
* else a **stand-in** simulated from the spec alone (:func:`stand_in`), of the confidential
  file's record count: every column drawn independently within its public bounds or on its
  public levels. Its values mean nothing, so only convergence is looked at there, and a
  column whose fit did not converge is told in the preflight's line, not refused: the
  stand-in's columns are independent, so a fit's signal there is weaker than on the data,
  and specs that converged on a reference failed on the stand-in (book, A whole table). The
  run still shows how long a release takes.

Everything here is public (the spec, epsilon, m, the sampler, the reference file and, for
the stand-in, the confidential file's record count, which the substitution relation keeps
public), so its figures may be shown without a confidential banner, and whether it refuses
reveals nothing about a record. The refusal is one line naming the first failing column and
what to change (the table's advice: :func:`dpsynth.table.pipeline.table_convergence_note`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import formats
from dpsynth.engine.diagnostics import converged
from dpsynth.errors import InputError
from dpsynth.sampler import Sampler
from dpsynth.table.pipeline import DOWNSCALE_ADVICE, TABLE_SAMPLER, synthesize_table
from dpsynth.table.spec import ConfidentialColumn, PublicColumn, TableSpec, load_spec

STAND_IN_RECORDS = 1000
"""The stand-in's record count when the confidential file's is not given."""
STAND_IN_MAX_RECORDS = 20_000
"""At most this many stand-in records: a model column's fit reads at most ``fit_records`` of
them (default 2,000) whatever n is, but the draws and checks grow with n. Up to this the
stand-in has the confidential file's record count, so each fit's subsample, its amplified
epsilon and every ``centring = "auto"`` resolve as in the release."""
LOG_SCALE_MODELS = ("lognormal-regression", "gamma-regression")
"""Models of a positive column's logarithm: their stand-in is drawn on the log scale."""
STAND_IN_SPREAD = 8.0
"""A confidential number's stand-in is normal about the middle of its public bounds with
standard deviation (hi - lo) / STAND_IN_SPREAD (on the log scale for a log model), clipped
to them (a count's rounded). Not uniform: curators' bounds are wide, the data concentrated
inside them, and a lognormal column uniform on [100, 50000] (or on its logs) made the
censored fit's chains settle in different modes at epsilon 6 and 12 where a public file like
the data converged (tests/test_table.py's spec, 300 records)."""
IDEAL_TRIALS = 8
"""Ideal syntheses of the reference the preflight judges before it refuses a poor verdict
there (:func:`ideal_poor_share`): each a bootstrap sample of the reference judged by the table
verdict against another, as a second sample of the population would be against the first."""
IDEAL_POOR_LIMIT = 0.5
"""A poor verdict on the reference refuses only where fewer than this share of its ideal
syntheses (:data:`IDEAL_TRIALS`) were rated poor too: where more were, the reference is too
small for the verdict to tell a spec's fault from its own size (how often an ideal synthesis
of a small table is rated poor: book, A whole table, What the verdict means), and the
preflight says so instead of refusing."""
SOURCES = ("reference", "stand-in")
"""Where a preflight ran: the spec's public reference file, or a stand-in from the spec."""


@dataclass(frozen=True)
class Preflight:
    """The outcome of :func:`preflight` (public figures only).

    ``source``: one of :data:`SOURCES`; ``n_records``: the records it ran on; ``seconds``: its
    wall time; ``verdict``: the table verdict there (``None`` on the stand-in, whose values
    mean nothing); ``converged``: per confidential column (synthesis order), whether its fit
    met the convergence policy (``None``: no MCMC fit, e.g. a histogram column);
    ``refusal``: ``None``, or one line naming the first failing column and what to change;
    ``warning``: on the stand-in, the first unconverged column's note (a stand-in's columns
    are independent and their fits weaker than on real data, so its failures are told, not
    refused: book, A whole table); ``ideal_poor``: after a poor verdict on the reference, the
    share of its ideal syntheses rated poor too (:func:`ideal_poor_share`); ``remedies``: the
    columns the remedy gave ``downscale = "auto"`` (:func:`remedied`), ``tried``: the columns
    it was tried on (a refusal after a tried remedy says it did not converge either).
    """

    source: str
    n_records: int
    seconds: float
    verdict: str | None
    converged: dict[str, bool | None] = field(default_factory=dict)
    refusal: str | None = None
    warning: str | None = None
    ideal_poor: float | None = None
    remedies: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the release may go ahead."""
        return self.refusal is None

    @property
    def where(self) -> str:
        """What it ran on, in words: ``the public reference (300 records)``."""
        what = "the public reference" if self.source == "reference" else "a public stand-in"
        return f"{what} ({self.n_records} records)"

    def summary(self) -> str:
        """One line for the curator: where it ran, the outcome, and its time."""
        if not self.ok:
            told = f"preflight on {self.where}, {self.seconds:.1f} s: {self.refusal}"
            if self.tried and not self.remedies:
                told += (
                    f'; a second run with downscale = "auto" on {_names(self.tried)} did not '
                    "bring every fit to converge either"
                )
            if self.ideal_poor is None:
                return told
            return (
                f"{told} (an ideal synthesis of the reference was rated poor in "
                f"{self.ideal_poor:.0%} of {IDEAL_TRIALS} trials: at its size most "
                "ideal syntheses are not)"
            )
        fits = [c for c in self.converged.values() if c is not None]
        what = f"{sum(fits)} of {len(fits)} fit(s) converged" if fits else "no MCMC fit"
        if self.verdict is not None:
            what += f", table verdict {self.verdict} there"
            if self.ideal_poor is not None and self.ideal_poor >= IDEAL_POOR_LIMIT:
                what += (
                    f", as was an ideal synthesis of it in {self.ideal_poor:.0%} of "
                    f"{IDEAL_TRIALS} trials: the reference is too small to judge the verdict, "
                    "so only convergence was checked"
                )
        else:
            what += " (a stand-in's verdict is not judged)"
        if self.warning is not None:
            what = f"{what}; but on the stand-in {self.warning} (a stand-in's columns are "
            what += "independent, so this may not happen on the data; a public reference "
            what += "file in the spec tells more)"
        if self.remedies:
            what += (
                f"; {_names(self.remedies)} did not converge with the spec's weights and "
                'converged with downscale = "auto", which the release uses (write it in the '
                "spec to skip the second run)"
            )
        return f"preflight on {self.where}: ok in {self.seconds:.1f} s; {what}"

    def applied_to(self, spec: TableSpec) -> TableSpec:
        """``spec`` as the release runs it: with the remedy (:func:`remedied`), if any."""
        return remedied(spec, self.remedies) if self.remedies else spec


def _names(columns: tuple[str, ...]) -> str:
    return f"column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)}"


def remedied(spec: TableSpec, names: tuple[str, ...]) -> TableSpec:
    """``spec`` with ``downscale = "auto"`` on the columns ``names`` (the preflight's remedy
    for a fit that missed the convergence policy: every record's weight d = min(1, M / 1.5),
    so that fewer terms sit at the clamp and the posterior is smoother, if wider). Evidence:
    book/whole_table.md, section "Will it work?"."""
    columns = tuple(
        replace(c, downscale="auto", downscale_by_preflight=True) if c.name in names else c
        for c in spec.confidential
    )
    return replace(spec, confidential=columns)


def unconverged_columns(diagnostics: dict[str, Any], spec: TableSpec) -> tuple[str, ...]:
    """The censored model columns of a public run whose fit missed the convergence policy
    and whose weights are not ``"auto"`` already: those :func:`remedied` may help."""
    by_name = {c.name: c for c in spec.confidential}
    return tuple(
        name
        for name, diag in diagnostics.get("columns", {}).items()
        if name in by_name
        and by_name[name].downscale not in (None, "auto")
        and diag.get("mcmc") is not None
        and not converged(diag["mcmc"])
    )


def stand_in_records(n: int | None) -> int:
    """The stand-in's record count: the confidential file's (public under substitution),
    at most :data:`STAND_IN_MAX_RECORDS`; :data:`STAND_IN_RECORDS` when not given."""
    if n is None:
        return STAND_IN_RECORDS
    return max(1, min(int(n), STAND_IN_MAX_RECORDS))


def stand_in(spec: TableSpec, n: int, rng: np.random.Generator | None = None) -> pd.DataFrame:
    """A public table of ``n`` records simulated from the spec alone (never from the data).

    Each column independently: a confidential number normal about the middle of its public
    bounds (:data:`STAND_IN_SPREAD`; a log model's, :data:`LOG_SCALE_MODELS`, on the log
    scale; a count's rounded), a public one uniform within its bounds (without bounds:
    standard normal, a count on 0..9), a binary or categorical one uniform on its public
    levels (a public one without levels on two placeholder levels); no missing values.
    """
    rng = np.random.default_rng() if rng is None else rng
    columns = [*spec.public, *(c for c in spec.confidential if c.indicator_of is None)]
    return pd.DataFrame({c.name: _simulated(c, n, rng) for c in columns})


def _simulated(col: PublicColumn | ConfidentialColumn, n: int, rng: np.random.Generator) -> Any:
    """One stand-in column (see :func:`stand_in`)."""
    levels = getattr(col, "public_levels", col.levels)
    if col.type in ("binary", "categorical"):
        levels = levels or ("stand-in 1", "stand-in 2")
        return pd.Series([levels[i] for i in rng.integers(len(levels), size=n)], dtype=object)
    if col.bounds is None:  # a public column (a confidential number has bounds)
        return rng.integers(0, 10, size=n) if col.type == "count" else rng.standard_normal(n)
    lo, hi = col.bounds
    if isinstance(col, PublicColumn):
        return (
            rng.uniform(lo, hi, size=n).round()
            if col.type == "count"
            else rng.uniform(lo, hi, size=n)
        )
    log = col.model in LOG_SCALE_MODELS and lo > 0
    a, b = (np.log(lo), np.log(hi)) if log else (lo, hi)
    z = np.clip(rng.normal((a + b) / 2, (b - a) / STAND_IN_SPREAD, size=n), a, b)
    z = np.clip(np.exp(z), lo, hi) if log else z  # exp(log hi) may exceed hi by a rounding
    if col.type == "count":  # the nearest integer within the bounds (lo where none is)
        z = np.clip(np.round(z), np.ceil(lo), np.floor(hi)) if np.ceil(lo) <= hi else np.full(n, lo)
    return z


def preflight(
    spec: Any,
    epsilon: float,
    m: int = 1,
    sampler: Sampler | None = None,
    n: int | None = None,
    reference: pd.DataFrame | None = None,
    *,
    allow_large_epsilon: bool = False,
) -> Preflight:
    """Run the table release on public data first (see the module docstring).

    ``spec``: a path, mapping or :class:`TableSpec`; ``epsilon``, ``m``, ``sampler``,
    ``allow_large_epsilon``: the release's (``sampler`` None: the table's default); ``n``: the
    confidential file's record count, the stand-in's size (public under substitution: counting
    rows reads no value); ``reference``: the spec's reference file, already read (else read
    from its path). The release runs unseeded (seeds from the OS), quietly, and writes nothing;
    an input error on the reference (a value outside its bounds) is raised naming it.
    """
    spec = load_spec(spec)
    sampler = replace(sampler or TABLE_SAMPLER, quiet=True)
    if spec.reference is not None:
        source = "reference"
        if reference is None:
            reference = formats.read_table(Path(spec.reference), "reference")
        frame = reference
    else:
        source, frame = "stand-in", stand_in(spec, stand_in_records(n))
    start = time.perf_counter()
    run = (frame, epsilon, m, sampler, reference, allow_large_epsilon)
    release = _public_release(spec, *run)
    outcome = _outcome(release.diagnostics, source, frame.shape[0], 0.0)
    names = unconverged_columns(release.diagnostics, spec) if source == "reference" else ()
    if names:  # a fit that missed the policy: once more with the remedy
        fixed = remedied(spec, names)
        retry = _public_release(fixed, *run)
        if _converged(retry):
            release, spec = retry, fixed
            outcome = _outcome(release.diagnostics, source, frame.shape[0], 0.0)
            outcome = replace(outcome, remedies=names, tried=names)
        else:  # the first refusal stands, without advising what was just tried
            refusal = (outcome.refusal or "").replace(DOWNSCALE_ADVICE, "") or None
            outcome = replace(outcome, tried=names, refusal=refusal)
    converged = _converged(release)
    if source == "reference" and outcome.verdict == "poor" and converged:  # refused for it
        share = ideal_poor_share(frame, spec)
        refusal = outcome.refusal if share < IDEAL_POOR_LIMIT else None
        outcome = replace(outcome, refusal=refusal, ideal_poor=share)
    return replace(outcome, seconds=time.perf_counter() - start)


def _converged(release: Any) -> bool:
    """Whether every fit of a public run met the convergence policy (its table verdict)."""
    return release.diagnostics.get("verdict", {}).get("converged") is not False


def _public_release(
    spec: TableSpec,
    frame: pd.DataFrame,
    epsilon: float,
    m: int,
    sampler: Sampler,
    reference: pd.DataFrame | None,
    allow_large_epsilon: bool,
) -> Any:
    """The table release of ``spec`` on the public ``frame``, unseeded and quiet; an input
    error of the data is the reference's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the release's own warnings come with the release
        try:
            return synthesize_table(
                frame,
                spec,
                epsilon,
                m=m,
                sampler=sampler,
                reference=reference,
                allow_large_epsilon=allow_large_epsilon,
            )
        except InputError as exc:
            if exc.param != "data":
                raise
            raise InputError("reference", f"{spec.reference}: {exc.message}") from None


def ideal_poor_share(
    frame: pd.DataFrame, spec: TableSpec, rng: np.random.Generator | None = None
) -> float:
    """The share of :data:`IDEAL_TRIALS` ideal syntheses of the public ``frame`` that the
    table verdict rates poor: each trial judges one bootstrap sample of it against another
    (as far apart as two samples of the population the size of ``frame``). Public."""
    from dpsynth.table.pipeline import table_verdict_of

    rng = np.random.default_rng() if rng is None else rng
    n, poor = len(frame), 0
    for _ in range(IDEAL_TRIALS):
        a, b = (frame.iloc[rng.integers(n, size=n)].reset_index(drop=True) for _ in range(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            poor += table_verdict_of(a, b, spec).get("verdict") == "poor"
    return poor / IDEAL_TRIALS


def _outcome(diagnostics: dict[str, Any], source: str, n: int, seconds: float) -> Preflight:
    """The preflight's figures and refusal from the public run's diagnostics: the first
    unconverged column (the table's advice), else on the reference a poor table verdict."""
    verdict = diagnostics.get("verdict", {})
    fits = {
        name: None if diag.get("mcmc") is None else converged(diag["mcmc"])
        for name, diag in diagnostics.get("columns", {}).items()
    }
    refusal = warning = None
    if verdict.get("converged") is False and source == "stand-in":
        warning = public_figures(verdict["convergence"][0])
    elif verdict.get("converged") is False:
        refusal = public_figures(verdict["convergence"][0])
    elif source == "reference" and verdict.get("verdict") == "poor":
        refusal = poor_verdict_note(verdict)
    shown = verdict.get("verdict") if source == "reference" else None
    return Preflight(source, n, seconds, shown, fits, refusal, warning)


CONFIDENTIAL_MARKS = (
    "CONFIDENTIAL figures from the confidential fit, do not publish",
    "CONFIDENTIAL: from the confidential fit, do not publish",
)
"""How a convergence note (:func:`dpsynth.engine.diagnostics.convergence_note`) marks its
figures in a release on the confidential data; a preflight's come from public data."""


def public_figures(note: str) -> str:
    """A convergence note with its figures marked as the preflight's (public)."""
    for mark in CONFIDENTIAL_MARKS:
        note = note.replace(mark, "public figures, from the preflight's fit")
    return note


def poor_verdict_note(verdict: dict[str, Any]) -> str:
    """A poor table verdict on the reference in one line: the figure that drives it, on
    which columns, and the verdict's next step."""
    driven = verdict.get("driven_by", {})
    names = [repr(c) for c in driven.get("columns", [])]
    on = f"column{'s' if len(names) > 1 else ''} {', '.join(names)}" if names else "the table"
    figure = driven.get("figure", "a figure")
    value = driven.get("value")
    shown = f"{figure} {value:.3g}" if isinstance(value, int | float) else figure
    step = verdict.get("next_step") or verdict.get("reason", "")
    return f"{on}: the table verdict there is poor ({shown}); next: {step}"


__all__ = [
    "Preflight",
    "SOURCES",
    "ideal_poor_share",
    "preflight",
    "remedied",
    "unconverged_columns",
    "stand_in",
    "stand_in_records",
]
