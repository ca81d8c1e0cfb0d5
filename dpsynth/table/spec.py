"""A whole table's specification: parsed and checked before any record is read.

A spec is a TOML file (or the equivalent mapping) naming the public columns (copied to the
release, said so) and the confidential columns in synthesis order, each with its model,
its public bounds or levels, its mechanism and its share of epsilon. Nothing in a spec is
read from the data: bounds and levels are the curator's public promises, and a record
outside them is refused (or clipped where the spec asks, the count confidential).
See ``examples/table_spec.toml`` and the book page "A whole table".

Import-light (tomllib and the standard library only): the CLI refuses a bad spec in a
fraction of a second, before the scientific stack is loaded.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpsynth.errors import InputError, require_downscale
from dpsynth.mechanisms import registry
from dpsynth.privacy import relations

TABLE_MECHANISMS = registry.table_names()
MISSING = ("refuse", "indicator", "level")
"""How a confidential column's missing values are handled: refused (the default); a
missingness indicator synthesized before the column (``"indicator"``); or, for a binary or
categorical PH column, one more public level (``"level"``, ``MISSING_LEVEL``)."""
MISSING_LEVEL = "<missing>"
"""The public level a ``missing = "level"`` column's missing values take inside a release
(last among its levels; written back as missing)."""
CENTRINGS = ("none", "saturated", "reference", "marginal", "auto")
MARGINAL_CENTRED_TYPES = ("count", "binary", "categorical")
"""Column types whose model is centred at its marginal by default when the spec gives no public
reference (as is a calibrated continuous column): the censored fit is centred at the model
fitted to a sample of a perturbed histogram of the column's marginal (public inputs only; the
histogram spends ``calibrate_share`` of the column's share). Internal (not in ``__all__``).
Uncentred (``"none"``, the censoring paper's own Eq. 3.5), a discrete column's log-likelihoods
are all at most 0, a small bound M censors every record below -M, and the fit runs to where the
other records' terms are largest (a count column drawn all zeros, a binary or categorical one
all its majority level). An uncalibrated continuous column is centred ``"auto"``
(:data:`AUTO_CENTRE_BOUND`). Centring is dpsynth's extension. Evidence: book/choices.md, section
choices-table-models."""
AUTO_CENTRE_BOUND = 0.5
"""The censoring bound M, in nats, below which ``centring = "auto"`` resolves to ``"marginal"``
(and at or above which to ``"none"``, the column's whole share to the fit). Internal (not in
``__all__``); a constant, so the choice depends on epsilon, the spec and the record count only.
``"auto"`` is the default of an uncalibrated continuous model column with no public reference,
resolved when the release's epsilon is known (:func:`resolve_centring`); M is the bound of the
column's fit at the part of its share the fit would spend when centred (``1 - calibrate_share``,
amplified by its subsample, per set). dpsynth's extension (the papers' fits are uncentred).
Evidence: book/choices.md, sections choices-fit-records (a log-normal or gamma column's centre,
from ``benchmarks/investigations/table_auto_centring.py``) and choices-table-models."""
TABLE_NEIGHBOURS = ("substitution",)
MODEL_TYPES = {
    "beta-regression": "continuous",
    "lognormal-regression": "continuous",
    "gamma-regression": "continuous",
    "poisson-regression": "count",
    "negbin-regression": "count",
    "logistic": "binary",
    "categorical": "categorical",
}
"""The regression models a table column may use, by name, and the column type each fits."""
MODEL_ALIASES = {"poisson": "poisson-regression", "negbin": "negbin-regression"}
"""Names a spec may also give a count column's model: a table's count columns use the regression
programs with independent weakly informative priors, never the papers' ``poisson`` (hierarchical
prior: a funnel under a weak censored likelihood) or ``negbin`` (normal(0, 10): slow mixing)
programs. Internal (not in ``__all__``). Evidence: book/choices.md, section
choices-table-models."""
MISSING_SUFFIX = "_missing"
"""A confidential column ``c`` with ``missing = "indicator"`` gets the binary column
``c_missing`` (1 = missing), synthesized right before ``c``."""
INDICATOR_MECHANISM = "ph"
"""The mechanism of a missingness indicator column: PH given the level columns before it (a
censored logistic fit at an indicator's half share amplified the majority level). Internal (not
in ``__all__``); dpsynth's extension. Evidence: book/choices.md, section
choices-table-models."""
DEFAULT_PH_CELLS = 400
"""The most joint cells (its own levels x the levels of its parents: the binary and categorical
confidential columns before it, or those its ``given`` names) at which a binary or categorical
column whose spec names no ``mechanism`` is drawn by PH given its parents; with more, it is a
censored fit of its model (``mechanism = "censor-uw"``; ``logistic`` or ``categorical`` where the
spec names none). Internal (not in ``__all__``); a constant, so the choice depends on the spec
only (:data:`DEFAULT_MECHANISM_MEANING`). A censored logistic or categorical fit at a column's
share of epsilon has an almost flat likelihood whose chains settle in different modes; a
histogram needs no chains, and its noise grows with its cells. 400 is the largest joint the
measurement held (ISLR::Wage's last binary column, given four level columns), where PH still
did better than the censored fits on every figure; a cap of 100 (those two columns censored)
did worse. dpsynth's extension. Evidence: book/choices.md, section choices-default-mechanism,
from ``benchmarks/bench_defaults.py`` (``benchmarks/results/defaults.csv``)."""
PH_PUBLIC_PARENTS = True
"""Whether a PH level column whose spec names no ``given`` is also drawn given the public
columns with public levels (before the confidential level columns before it), where its joint
cells with them stay within :data:`DEFAULT_PH_CELLS` (past it, given the confidential ones
only: a public column never turns a PH column into a censored fit). The same mechanism on
finer cells: one record still moves between two cells (sensitivity 2, the column's epsilon
unchanged), and the draw reads the public values the release copies. Internal (not in ``__all__``). Evidence: book/choices.md, section choices-held-out
(the pMSE ratio and the two-way distances, from ``benchmarks/bench_defaults.py``)."""


CENSORED_ONLY_KEYS = ("centring", "clamp", "downscale", "debias", "calibrate_bins",
                      "calibrate_dispersion")  # fmt: skip
"""Keys only a censored model column takes: a level column that sets one, and names no
mechanism, is a censored fit of its model (the spec asked for one)."""
PH_ONLY_KEYS = ("given", "given_bins", "bins")
"""Keys only a PH column takes: a column that sets one, and names no mechanism, is PH."""
_PUBLIC_PARENTS_MEANING = (
    ", and with the public level columns as well where the cells stay within that number (their "
    "values copied)"
    if PH_PUBLIC_PARENTS
    else ""
)
DEFAULT_MECHANISM_MEANING = (
    "the spec names no mechanism for this column, so dpsynth chose it from the spec alone: a "
    "binary or categorical column is drawn by PH where its joint cells with the binary and "
    "categorical confidential columns before it (or those its given names) number at most "
    f"{DEFAULT_PH_CELLS} (a Laplace histogram of its joint cells with those columns"
    f"{_PUBLIC_PARENTS_MEANING}, then each record's level given its synthetic parents), else "
    "by a censored fit of its model (censor-uw; logistic or "
    "categorical where the spec names none); a model the spec names does not choose the "
    "mechanism (PH then draws the column without it); a continuous or count column is a "
    'censored fit of its model (censor-uw); a mechanism = "..." in the spec always wins'
)
"""What the report says of a column whose mechanism the default rule chose (:func:`_mechanism`)."""

SPREADS = ("constant", "by-parents")
"""``spread`` of a log-normal regression column (``lognormal-regression``, the one model whose
program declares it): one sigma for every record ("constant"), or log sigma_i linear in the
column's design ("by-parents": the public columns and the confidential ones before it, as its
mean), so that each group's dollar-scale mean exp(X_i beta + sigma_i^2 / 2) follows its own
spread. A record still changes its own term only; the censoring is the same."""
SPREAD_DEFAULT = "constant"
"""``spread`` of a log-normal regression column when the spec does not say. Internal (not in
``__all__``). Evidence: book/choices.md, section choices-held-out."""
SPREAD_MODELS = ("lognormal-regression",)
"""The models that take ``spread``: those whose declaration has ``spread_by_design``
(``dpsynth.models.catalogue.Model``; named here, not imported: a spec is parsed without
numpy, and ``tests/test_spread.py`` checks the two agree)."""

DEBIASED_TYPES = ("continuous", "count")
"""Column types whose censor-uw fit may be bias-corrected (``debias``)."""
CLAMP_DEFAULT: dict[str, str] = {
    "categorical": "smooth",
    "beta-regression": "smooth",
    "lognormal-regression": "smooth",
    "gamma-regression": "smooth",
    "negbin-regression": "smooth",
    "logistic": "smooth",
}
"""``clamp`` (``dpsynth.privacy.relations.CLAMPS``) of a censored model column when the spec does not
say, by model: "smooth" (M tanh(t / M), dpsynth's extension) for a categorical, beta, log-normal,
gamma, negative binomial or logistic regression column, "hard" (the censoring paper's clamp,
Eq. 3.5) for every other: a poisson-regression column, whose program accepts "smooth" but whose
table lost utility under it (the pMSE ratio and two-way TVD of its synthetic counts, in both
seeds). Internal (not in ``__all__``). A fit at a small bound meets the hard clamp's kinks at many
records, and its sampler shortens its steps to cross them. Evidence: book/choices.md, section
choices-clamp, from ``benchmarks/investigations/table_categorical_clamp.py``,
``benchmarks/bench_fit_speed.py`` and ``benchmarks/bench_clamp_models.py`` (fewer leapfrog steps
per iteration, every fit converged, utility within the replicates)."""
DEBIAS_DEFAULT = True
"""Whether ``debias`` (one parametric-bootstrap step against the censored fit's shrinkage,
:mod:`dpsynth.models.debias`; post-processing) is on where it applies when the spec does not say: yes.
Internal (not in ``__all__``); dpsynth's extension. Evidence: book/choices.md, section
choices-fit-records (one bootstrap step against the shrinkage), from
``benchmarks/results/table.csv`` (rows ``dpsynth-table-debiased`` against
``dpsynth-table-known-dispersion``)."""


_TOP_KEYS = {
    "neighbours",
    "reference",
    "clip",
    "fit_records",
    "public",
    "confidential",
    "analysis",
}
_PUBLIC_KEYS = {"name", "type", "bounds", "levels"}
_CONF_KEYS = {
    "name",
    "type",
    "model",
    "bounds",
    "levels",
    "mechanism",
    "share",
    "missing",
    "clip",
    "centring",
    "design",
    "calibrate_bins",
    "calibrate_share",
    "calibrate_dispersion",
    "given",
    "given_bins",
    "bins",
    "downscale",
    "debias",
    "clamp",
    "spread",
}
DESIGNS = {
    "one-hot": ("binary", "categorical"),
    "number": ("categorical",),
    "linear": ("continuous", "count"),
    "quadratic": ("continuous", "count"),
}
"""How a predecessor enters its successors' designs, and the column types each suits. A
binary or categorical column: one 0/1 column per public level but the first ("one-hot", the
default), or, levels that are numbers, one column, the level scaled by the levels' range
("number"). A continuous or count column: its value scaled by its public bounds,
u = (v - lo) / (hi - lo) ("linear", the default), or u and 4 (u - 1/2)^2 ("quadratic": a
relation that rises and falls, as a wage with experience). Every feature lies in [0, 1] and
is a function of the record's own value, so a record still changes its own row only."""
GIVEN_BINS_DEFAULT = 10
"""``given_bins`` (and a continuous PH column's own ``bins`` when it is drawn given others)
unless the spec sets it: the equal-width public bins on which a continuous or count column
enters a PH column's joint cells (the table verdict's ten bins,
``table_verdict.DEFAULT_BINS``)."""
GIVEN_BINS = (2, 1000)
"""The range of ``given_bins`` and ``bins``."""
CALIBRATE_SHARE = 0.3
"""The part of a calibrated column's share spent on its marginal histogram by default."""
PH_CALIBRATION = (
    "a PH column drawn given others with calibrate_share c spends c of its epsilon_j on a "
    "Laplace histogram of its own cells (levels or bins) and the rest on the joint one; its "
    "own marginal is the two histograms' estimates weighted by the inverse of their noise "
    "variances (public: P c^2 / (P c^2 + (1 - c)^2) on its own histogram's, P the parent "
    "cells, whose noise the joint's marginal sums), and each set's conditional shares are "
    "raked (iterative proportional fitting) to have that marginal at the set's synthetic "
    "parents: post-processing"
)
"""What ``calibrate_share`` does on a PH column given parents (off unless the spec sets it).
Report text; Internal (not in ``__all__``). The joint's marginal of a column sums the noise of
its P parent cells: P times the noise variance of an own histogram at the same epsilon. The
price is a noisier joint. dpsynth's extension. Evidence: book/choices.md, section
choices-ph-calibration."""
CALIBRATE_BINS_DEFAULT = 20
"""``calibrate_bins`` of a beta-regression column that does not set it (0 turns it off).
Internal (not in ``__all__``). Twenty equal-width bins nest the table verdict's ten public bins
(``table_verdict.DEFAULT_BINS``): a histogram whose bins straddle the bins a marginal is judged
on spreads heaped values (integer years, round amounts) across their edges. A curator who judges
on other public bins should give a multiple of them. dpsynth's extension. Evidence:
book/choices.md, section choices-table-models, from ``benchmarks/results/table.csv`` (rows
``dpsynth-table-marginal``)."""
DISPERSION_MATCHED_MODELS = ("beta-regression", "negbin-regression")
"""The models whose calibrated synthetic draws get their dispersion from the calibration
histogram (``calibrate_dispersion``, on by default where calibrated): each set's draw keeps its
coefficients, and its precision kappa is replaced by the one whose synthetic values' variance at
the set's design equals the histogram sample's (``table.matched_kappa``; a negative binomial's
intercept is first moved to the histogram's mean, then its phi matched, ``table.matched_phi``).
Internal (not in ``__all__``); dpsynth's extension (post-processing). At a small bound a
censored fit is too precise: the records far from their mean, which hold the precision down, are
the ones censored. Where the column is centred (at its marginal's fit, or the reference's), its
censored fit also takes the centre's precision as known and draws the coefficients alone
(``table.fit_model``): a fitted precision lets a censored fit at a small bound concentrate on
one group of records. Evidence: book/choices.md, sections choices-fit-records (from
``benchmarks/investigations/table_wage_overlap.py``) and choices-table-models."""
CALIBRATED_BY_DEFAULT = ("beta-regression", "poisson-regression", "negbin-regression")
"""The models calibrated unless the spec says otherwise: a bounded column, whose equal-width
public bins suit it, and a count column, on one bin per integer of its bounds (when they hold at
most ``table.MARGINAL_UNIT_BINS``, else on ``calibrate_bins``). Internal (not in ``__all__``);
dpsynth's extension. A count column's censored fit at a small share keeps the order of its
records better than their level; a log-normal or gamma column over wide bounds would put most of
its mass in one or two equal-width bins, so it is calibrated only where the spec asks. Evidence:
book/choices.md, section choices-table-models."""
CALIBRATE_BINS = (2, 1000)
"""The range of ``calibrate_bins``: the public equal-width bins of a calibrated column's
perturbed marginal histogram (its synthetic values are mapped onto that marginal by rank)."""


DOWNSCALE_NATS = 1.5
"""The threshold, in nats, of ``downscale = "auto"`` (a censored model column's option; the
default is d = 1, the paper's): every record's weight is d = min(1, M / DOWNSCALE_NATS), M the
column's censoring bound, so a record's term is clamped only where its log-likelihood moves this
many nats from its centre's, not M. Internal (not in ``__all__``); a constant, so d depends on
epsilon, the spec and the record count only. dpsynth's extension (the weights of the censoring
paper's Eq. 3.5, set from public inputs). It trades the shrinkage of a centred fit's slopes for
a tempered (wider) posterior, so "auto" is an option, not the default. Evidence:
book/choices.md, section choices-fit-records (downscaled weights)."""

TABLE_ADAPT_DELTA = 0.95
"""A table's default step-size target (Stan's adapt_delta; Stan's own default is 0.8). Internal
(not in ``__all__``). A censored likelihood has kinks where records meet the bound, and
divergent transitions count against a column's convergence. Evidence: ``tests/test_table.py``
and book/choices.md, section choices-sampler."""
TABLE_ITER_SAMPLING = 1000
"""A table's default retained draws per chain (2 chains after 1,000 warm-up iterations; the
library's one-column default is 2,000). Internal (not in ``__all__``). A column's regression can
have 25 parameters or more, and converged chains scatter above a fixed R-hat threshold of 1.01
the more, the more parameters and the fewer draws; the convergence policy's R-hat limit is tied
to each parameter's ESS (``dpsynth.engine.diagnostics.rhat_limit``), which keeps that false
refusal rate to a few per cent at this length (it was 4,000 under the fixed 1.01). Evidence:
book/choices.md, section choices-sampler, from ``benchmarks/investigations/rhat_ess_rule.py`` and
``benchmarks/bench_fit_speed.py``."""
FIT_RECORDS_DEFAULT = 2000
"""``fit_records`` when the spec omits it: a model column of a table with more records is fitted
to a random ``FIT_RECORDS_DEFAULT`` of them (a table of at most that many fits every record).
Internal (not in ``__all__``); dpsynth's extension (subsampling amplifies the fit's epsilon). A
censored fit's time grows with the records it reads, and a fit on all of a large file at a
column's share of epsilon is censored at a small bound. The table verdict proposes a larger
``fit_records`` when it matters. Evidence: book/choices.md, section choices-fit-records."""


@dataclass(frozen=True)
class PublicColumn:
    """A public column: copied to the release and used as a predictor of every column."""

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    levels: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class ConfidentialColumn:
    """A confidential column, fitted on the public columns and the columns before it."""

    name: str
    type: str
    model: str | None
    mechanism: str
    share: float
    bounds: tuple[float, float] | None = None
    levels: tuple[Any, ...] | None = None
    missing: str = "refuse"
    clip: bool = False
    centring: str = "none"
    indicator_of: str | None = None  # set on a synthesized missingness indicator
    design: str = "one-hot"  # how it enters its successors' designs (DESIGNS)
    calibrate_bins: int | None = None  # a continuous model column's marginal histogram bins
    calibrate_share: float = 0.0  # the part of its share that histogram spends
    calibrate_dispersion: bool = False  # a beta regression's kappa matched to that histogram
    given: tuple[str, ...] | None = None  # a PH column's parents (None: the level ones before)
    given_bins: int = GIVEN_BINS_DEFAULT  # public bins of a continuous parent in ``given``
    bins: int | None = None  # a continuous PH column's own public bins (None: PH's rule)
    downscale: float | str | None = None  # a censored column's weight or "auto" (None: PH)
    debias: bool = False  # a censor-uw continuous or count column's bootstrap correction
    clamp: str = "hard"  # how a censored fit bounds each term (relations.CLAMPS; PH: unused)
    spread: str | None = None  # a log-normal regression's spread (SPREADS; None: no such choice)
    centring_auto: bool = False  # centring resolved from "auto" (:func:`resolve_centring`)
    mechanism_auto: bool = False  # chosen by the default rule (:data:`DEFAULT_PH_CELLS`)
    downscale_by_preflight: bool = False  # "auto" set by the preflight's remedy (preflight.py)

    @property
    def fit_share(self) -> float:
        """The part of the column's epsilon its model's fit spends (the rest calibrates)."""
        return 1.0 - self.calibrate_share

    @property
    def public_levels(self) -> tuple[Any, ...] | None:
        """The spec's levels (without ``MISSING_LEVEL``, which stands for missing)."""
        if self.missing == "level" and self.levels is not None:
            return self.levels[:-1]
        return self.levels

    @property
    def n_features(self) -> int:
        """Columns this column adds to its successors' designs (one-hot but the first level,
        one number, or a bounded value and its centred square)."""
        if self.type == "categorical" and self.design == "one-hot":
            return len(self.levels) - 1
        return 2 if self.design == "quadratic" else 1


@dataclass(frozen=True)
class Analysis:
    """The analysis a verdict checks: ``outcome ~ predictor + ...`` (coefficient overlap)."""

    formula: str
    outcome: str
    predictors: tuple[str, ...]


@dataclass(frozen=True)
class TableSpec:
    """A validated table spec; ``confidential`` in synthesis order, shares normalised."""

    public: tuple[PublicColumn, ...]
    confidential: tuple[ConfidentialColumn, ...]
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS
    reference: str | None = None
    analysis: Analysis | None = None
    source: str | None = None
    fit_records: int | None = FIT_RECORDS_DEFAULT  # model columns' random subsample (None: all)

    @property
    def columns(self) -> list[str]:
        """Every column the data must have: public, then confidential (spec order)."""
        return [c.name for c in self.public] + [
            c.name for c in self.confidential if c.indicator_of is None
        ]

    def order(self) -> list[ConfidentialColumn]:
        """Synthesis order with each missingness indicator right before its column."""
        out: list[ConfidentialColumn] = []
        for col in self.confidential:
            if col.missing == "indicator":  # the column's share, split in half
                out.append(indicator_column(col))
                col = replace(col, share=col.share / 2)
            out.append(col)
        return out


def indicator_column(col: ConfidentialColumn) -> ConfidentialColumn:
    """The binary missingness indicator of ``col`` (synthesized before it, half its share)."""
    return ConfidentialColumn(
        name=col.name + MISSING_SUFFIX,
        type="binary",
        model=None,
        mechanism=INDICATOR_MECHANISM,
        share=col.share / 2,
        levels=(0, 1),
        indicator_of=col.name,
    )


def load_spec(spec: str | Path | Mapping[str, Any] | TableSpec) -> TableSpec:
    """A :class:`TableSpec` from a TOML path, a mapping or a spec (checked, never the data)."""
    if isinstance(spec, TableSpec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(spec)
    path = Path(spec)
    if not path.is_file():
        raise InputError("spec", f"no such file: {path}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError("spec", "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError("spec", f"is not valid TOML ({exc})") from None
    return parse_spec(raw, source=str(path))


def _normalisable(shares: list[float]) -> list[float]:
    """The shares as given, or scaled by the largest where their sum would overflow (shares
    near the largest float): the same proportions, a finite total."""
    try:
        if math.isfinite(math.fsum(shares)):
            return shares
    except OverflowError:
        pass
    top = max(shares)
    return [s / top for s in shares]


def parse_spec(raw: Mapping[str, Any], source: str | None = None) -> TableSpec:
    """Validate a spec mapping; every refusal names the key."""
    _unknown(raw, _TOP_KEYS, "spec")
    neighbours = raw.get("neighbours", "substitution")
    if neighbours not in TABLE_NEIGHBOURS:
        raise InputError(
            "neighbours",
            f"a table release supports substitution only (got {neighbours!r}): its columns "
            "are regressions on public columns, so n is public",
        )
    reference = raw.get("reference")
    if reference is not None and (not isinstance(reference, str) or not reference):
        raise InputError("reference", "must be the path of a public CSV file")
    clip = _bool(raw.get("clip", False), "clip")
    public = tuple(_public(e, i) for i, e in enumerate(_tables(raw, "public", required=False)))
    entries = _tables(raw, "confidential", required=True)
    shares = _normalisable([_share(e, i) for i, e in enumerate(entries)])
    total = math.fsum(shares)
    done: list[ConfidentialColumn] = []
    for i, (e, s) in enumerate(zip(entries, shares)):
        before = TableSpec((), tuple(done)).order()  # a default mechanism's parents
        done.append(_confidential(e, i, s / total, clip, reference, before))
    conf = tuple(done)
    _check_names(public, conf)
    analysis = _analysis(raw.get("analysis"), [c.name for c in public + conf])
    fit_records = _fit_records(raw.get("fit_records", FIT_RECORDS_DEFAULT))
    spec = TableSpec(public, conf, neighbours, reference, analysis, source, fit_records)
    order = spec.order()  # with the missingness indicators: a PH column's parents at run time
    for j, col in enumerate(order):
        _check_given(col, order[:j], public)
        if registry.model_free(col.mechanism) and (j > 0 or ph_parents(col, [], public)):
            _check_conditional_ph(col, order[:j], public)
        if (
            registry.model_free(col.mechanism)
            and col.calibrate_share > 0
            and not ph_parents(col, order[:j], public)
        ):
            raise InputError(
                "calibrate_share",
                f"column {col.name!r}: a ph column is calibrated only when drawn given others "
                "(alone, its histogram is its marginal)",
            )
    return spec


MAX_PH_CELLS = 100_000
"""At most this many cells (predecessor level combinations x levels) for a PH column drawn
given its parents (the discrete columns before it, or those its ``given`` names)."""


def ph_parents(
    col: ConfidentialColumn,
    before: Sequence[ConfidentialColumn],
    public: Sequence[PublicColumn] = (),
) -> list[Any]:
    """The columns a PH column is drawn given: those its ``given`` names (public columns with
    public levels first, then confidential ones in synthesis order), else (a level column)
    the binary and categorical ones before it, after the public level columns where
    :data:`PH_PUBLIC_PARENTS` says so and the joint cells stay within
    :data:`DEFAULT_PH_CELLS`. A public parent's values are copied, not drawn."""
    if not registry.model_free(col.mechanism):
        return []
    levelled = [p for p in public if p.levels is not None]
    if col.given is not None:
        return [p for p in levelled if p.name in col.given] + [
            p for p in before if p.name in col.given
        ]
    if col.levels is None:
        return []
    own = [p for p in before if p.levels is not None]
    both = levelled + own
    if PH_PUBLIC_PARENTS and len(col.levels) * n_cells(col, both) <= DEFAULT_PH_CELLS:
        return both
    return own


def own_size(col: ConfidentialColumn) -> int:
    """A PH column's own cells in its joint cells: its public levels, or its ``bins``."""
    if col.levels is not None:
        return len(col.levels)
    return col.bins or GIVEN_BINS_DEFAULT


def parent_size(parent: ConfidentialColumn, bins: int) -> int:
    """How many cells a parent has: its public levels, or ``bins`` equal-width public bins."""
    return len(parent.levels) if parent.levels is not None else bins


def n_cells(col: ConfidentialColumn, parents: Sequence[ConfidentialColumn]) -> int:
    """The number of combinations of the parents' public levels and bins (``col``'s
    ``given_bins`` for a continuous or count parent)."""
    return math.prod(parent_size(p, col.given_bins) for p in parents)


def _check_given(
    col: ConfidentialColumn,
    before: Sequence[ConfidentialColumn],
    public: Sequence[PublicColumn] = (),
) -> None:
    """``given``: public columns with public levels, or confidential columns before this
    one, each named once."""
    if col.given is None:
        return
    names = [p.name for p in public if p.levels is not None] + [p.name for p in before]
    for g in col.given:
        if g not in names:
            raise InputError(
                "given",
                f"column {col.name!r}: {g!r} is neither a public column with levels nor a "
                f"confidential column before it (these are: {', '.join(names) or 'none'})",
            )


def _check_conditional_ph(
    col: ConfidentialColumn,
    before: Sequence[ConfidentialColumn],
    public: Sequence[PublicColumn] = (),
) -> None:
    """PH after other columns: a level column, drawn given the discrete columns before it
    or those its ``given`` names, or a continuous column with ``given`` (the perturbed
    histogram of their joint cells, then post-processing)."""
    if col.levels is None and (col.type != "continuous" or col.given is None):
        raise InputError(
            "mechanism",
            f"column {col.name!r}: ph after other columns draws a level given the columns "
            "before it (a continuous column: with given); a count column there needs a model",
        )
    cells = own_size(col) * n_cells(col, ph_parents(col, before, public))
    if cells > MAX_PH_CELLS:
        raise InputError(
            "mechanism",
            f"column {col.name!r}: ph given the columns before it needs {cells:,} cells "
            f"(at most {MAX_PH_CELLS:,}); name fewer in given, put it earlier or give it a model",
        )


def _tables(raw: Mapping[str, Any], key: str, required: bool) -> list[Mapping[str, Any]]:
    entries = raw.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise InputError(key, f"must be a list of tables ([[{key}]] entries)")
    if required and not entries:
        raise InputError(key, "the spec names no confidential column ([[confidential]])")
    return entries


def _unknown(entry: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(entry) - allowed)
    if extra:
        raise InputError(
            where, f"unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})"
        )


def _name(entry: Mapping[str, Any], key: str, i: int) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(key, f"entry {i + 1} needs a non-empty name")
    return name.strip()


def _bool(value: Any, param: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(param, f"must be true or false (got {value!r})")
    return value


def _bounds(value: Any, name: str) -> tuple[float, float] | None:
    """Public bounds [lo, hi]: two finite numbers, lo < hi."""
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if not ok or not all(math.isfinite(float(v)) for v in value) or not value[0] < value[1]:
        raise InputError("bounds", f"column {name!r}: must be [lo, hi], finite, lo < hi")
    return float(value[0]), float(value[1])


READ_AS_MISSING = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
     "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)  # fmt: skip
"""Cell texts the CSV reader (pandas' defaults) reads as a missing value: a level spelt so
could never be matched in the data. Internal (not in ``__all__``); tests/test_fuzz.py checks
it against pandas'."""


def _levels(value: Any, name: str) -> tuple[Any, ...] | None:
    """Public levels: a list of at least two distinct numbers or strings, none of them a text
    the CSV reader takes for a missing value (:data:`READ_AS_MISSING`)."""
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) >= 2
    ok = ok and all(isinstance(v, int | str) and not isinstance(v, bool) for v in value)
    if not ok or len({str(v) for v in value}) != len(value):
        raise InputError(
            "levels", f"column {name!r}: must list at least two distinct numbers or strings"
        )
    missing = [v for v in value if isinstance(v, str) and v in READ_AS_MISSING]
    if missing:
        raise InputError(
            "levels",
            f"column {name!r}: the level {missing[0]!r} would be read from the data as a missing "
            'value: spell it otherwise (missing values: missing = "level" or "indicator")',
        )
    return tuple(value)


def _public(entry: Mapping[str, Any], i: int) -> PublicColumn:
    name = _name(entry, "public", i)
    _unknown(entry, _PUBLIC_KEYS, f"public column {name!r}")
    kind = entry.get("type", "continuous")
    if kind not in registry.COLUMN_TYPES:
        raise InputError(
            "type", f"column {name!r}: must be one of {', '.join(registry.COLUMN_TYPES)}"
        )
    levels = _levels(entry.get("levels"), name)
    if levels is not None and kind not in ("binary", "categorical"):
        raise InputError(
            "levels", f"column {name!r}: only binary and categorical columns have levels"
        )
    if kind == "binary":
        levels = levels or (0, 1)
        if len(levels) != 2:
            raise InputError("levels", f"column {name!r}: a binary column has two levels")
    return PublicColumn(name, kind, _bounds(entry.get("bounds"), name), levels)


def _fit_records(value: Any) -> int | None:
    """``fit_records``: fit each model column to a uniform random subsample of this many
    records (public; privacy amplified by subsampling, :func:`relations.subsampling_map`);
    :data:`FIT_RECORDS_DEFAULT` when the spec omits it, every record for ``"all"`` (None)."""
    if value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_FIT_RECORDS:
        raise InputError(
            "fit_records",
            f'must be a whole number of records, at least {MIN_FIT_RECORDS}, or "all" '
            f"(got {value!r})",
        )
    return value


MIN_FIT_RECORDS = 100
"""The smallest subsample a model column may be fitted to (``fit_records``)."""


def _share(entry: Mapping[str, Any], i: int) -> float:
    value = entry.get("share", 1.0)
    name = entry.get("name", f"entry {i + 1}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError("share", f"column {name!r}: must be a positive number (got {value!r})")
    if not (math.isfinite(value) and value > 0):
        raise InputError("share", f"column {name!r}: must be positive and finite (got {value!r})")
    return float(value)


def _confidential(
    entry: Mapping[str, Any],
    i: int,
    share: float,
    clip: bool,
    reference: str | None,
    before: Sequence[ConfidentialColumn] = (),
) -> ConfidentialColumn:
    name = _name(entry, "confidential", i)
    _unknown(entry, _CONF_KEYS, f"confidential column {name!r}")
    entry, mechanism, auto = _mechanism(entry, before)
    if mechanism not in TABLE_MECHANISMS:
        raise InputError(
            "mechanism", f"column {name!r}: must be one of {', '.join(TABLE_MECHANISMS)}"
        )
    kind, model = _type_and_model(entry, name, mechanism)
    bounds = _bounds(entry.get("bounds"), name)
    if kind in ("continuous", "count") and bounds is None:
        raise InputError("bounds", f"column {name!r}: a {kind} column needs public bounds [lo, hi]")
    if kind in ("binary", "categorical") and bounds is not None:
        raise InputError("bounds", f"column {name!r}: a {kind} column has levels, not bounds")
    levels = _levels(entry.get("levels"), name)
    if kind in ("continuous", "count") and levels is not None:
        raise InputError("levels", f"column {name!r}: a {kind} column has bounds, not levels")
    if kind == "binary":
        levels = levels or (0, 1)
        if len(levels) != 2:
            raise InputError("levels", f"column {name!r}: a binary column has two levels")
    if kind == "categorical" and levels is None:
        raise InputError("levels", f"column {name!r}: a categorical column needs its public levels")
    missing = entry.get("missing", "refuse")
    if missing not in MISSING:
        raise InputError("missing", f"column {name!r}: must be one of {', '.join(MISSING)}")
    if missing == "indicator" and registry.model_free(mechanism):
        raise InputError(
            "missing",
            f"column {name!r}: a ph column cannot follow its indicator (a binary or categorical "
            'one may take missing = "level")',
        )
    if missing == "level":
        kind, levels = _missing_level(entry, name, kind, levels, mechanism)
    calibration = _calibration(entry, name, kind, mechanism, model)
    centring = _centring(entry, name, mechanism, reference, kind, "calibrate_bins" in calibration)
    calibration = _marginal_share(entry, name, centring, calibration, mechanism)
    return ConfidentialColumn(
        name,
        kind,
        model,
        mechanism,
        share,
        bounds,
        levels,
        missing,
        _bool(entry.get("clip", clip), "clip"),
        centring,
        design=_design_kind(entry.get("design"), name, kind, levels),
        **calibration,
        **_given(entry, name, mechanism, kind),
        downscale=_downscale(entry, name, mechanism),
        debias=_debias(entry, name, mechanism, kind),
        clamp=_clamp(entry, name, mechanism, model),
        spread=_spread(entry, name, mechanism, model),
        mechanism_auto=auto,
    )


DEFAULT_LEVEL_MODELS = {"binary": "logistic", "categorical": "categorical"}
"""The model of a binary or categorical column the default rule fits censored when the spec
names none (:data:`DEFAULT_PH_CELLS`)."""


def _mechanism(
    entry: Mapping[str, Any], before: Sequence[ConfidentialColumn]
) -> tuple[Mapping[str, Any], str, bool]:
    """The column's entry, its mechanism and whether the default rule chose it: the spec's
    ``mechanism`` where it names one; else, for a binary or categorical column, PH given its
    parents where their joint cells number at most :data:`DEFAULT_PH_CELLS` (its model, if
    named, dropped: PH draws the column without it) and a censored fit of its model otherwise
    (:data:`DEFAULT_LEVEL_MODELS` where the spec names none); censor-uw for any other column.
    A key only one kind takes decides (:data:`CENSORED_ONLY_KEYS`, :data:`PH_ONLY_KEYS`,
    ``missing``). From the spec alone: no record, epsilon or n."""
    if "mechanism" in entry:
        return entry, entry["mechanism"], False
    kind = _level_type(entry)
    if kind is None or entry.get("missing") == "indicator":
        return entry, "censor-uw", True
    if any(k in entry for k in CENSORED_ONLY_KEYS):
        ph = False
    elif any(k in entry for k in PH_ONLY_KEYS) or entry.get("missing") == "level":
        ph = True
    else:
        ph = _default_cells(entry, kind, before) <= DEFAULT_PH_CELLS
    if ph:
        return {**{k: v for k, v in entry.items() if k != "model"}, "type": kind}, "ph", True
    if entry.get("model") is None:
        return {**entry, "model": DEFAULT_LEVEL_MODELS[kind]}, "censor-uw", True
    return entry, "censor-uw", True


def _level_type(entry: Mapping[str, Any]) -> str | None:
    """ "binary" or "categorical" where the entry's type, or its model's, says so (both
    agreeing where both are given), else None (a censored fit: any conflict is refused there)."""
    kind, model = entry.get("type"), entry.get("model")
    model = MODEL_ALIASES.get(model, model) if isinstance(model, str) else model
    by_model = MODEL_TYPES.get(model) if isinstance(model, str) else None
    if model is not None and by_model is None:
        return None
    if kind is not None and by_model is not None and kind != by_model:
        return None
    kind = kind if kind is not None else by_model
    return kind if kind in ("binary", "categorical") else None


def _default_cells(
    entry: Mapping[str, Any], kind: str, before: Sequence[ConfidentialColumn]
) -> int:
    """A level column's joint cells under PH given the level columns before it: its own
    public levels (a binary column's two) times theirs. The public level columns do not
    count: they join a PH column's parents only within the cap (:func:`ph_parents`)."""
    levels = entry.get("levels")
    own = len(levels) if isinstance(levels, list) else 2
    return own * math.prod(len(p.levels) for p in before if p.levels is not None)


def _clamp(entry: Mapping[str, Any], name: str, mechanism: str, model: str | None) -> str:
    """``clamp`` of a censored model column: one of ``relations.CLAMPS`` (default
    :data:`CLAMP_DEFAULT` by model, else "hard"); a PH column has no likelihood to clamp.
    Whether the model's program accepts it is checked with the models
    (``dpsynth.table.pipeline.require_available_models``), before any data are read."""
    value = entry.get("clamp")
    if registry.model_free(mechanism):
        if value is not None:
            raise InputError("clamp", f"column {name!r}: a ph column has no likelihood to clamp")
        return "hard"
    if value is None:
        return CLAMP_DEFAULT.get(model or "", "hard")
    if not isinstance(value, str) or value not in relations.CLAMPS:
        choices = ", ".join(relations.CLAMPS)
        raise InputError("clamp", f"column {name!r}: must be one of {choices} (got {value!r})")
    return value


def _spread(entry: Mapping[str, Any], name: str, mechanism: str, model: str | None) -> str | None:
    """``spread`` (:data:`SPREADS`) of a censored ``lognormal-regression`` column (default
    :data:`SPREAD_DEFAULT`); None for every other column, which refuses the key."""
    value = entry.get("spread")
    takes = model in SPREAD_MODELS and not registry.model_free(mechanism)
    if not takes:
        if value is not None:
            raise InputError(
                "spread",
                f"column {name!r}: only a censored {' or '.join(SPREAD_MODELS)} column takes it",
            )
        return None
    if value is None:
        return SPREAD_DEFAULT
    if value not in SPREADS:
        raise InputError(
            "spread", f"column {name!r}: must be one of {', '.join(SPREADS)} (got {value!r})"
        )
    return value


def _downscale(entry: Mapping[str, Any], name: str, mechanism: str) -> float | str | None:
    """``downscale`` of a censored model column: a number in (0, 1] (default 1, the paper's
    Censor_uw) or "auto" (:data:`DOWNSCALE_NATS`); a PH column has no likelihood to weight."""
    value = entry.get("downscale")
    if registry.model_free(mechanism):
        if value is not None:
            raise InputError("downscale", f"column {name!r}: a ph column has no weights")
        return None
    if value is None:
        return 1.0
    return "auto" if value == "auto" else require_downscale(value, name)


def _debiased(mechanism: str) -> bool:
    """Debiasing applies to an unweighted censored fit (Censor_uw; :mod:`dpsynth.models.debias`)."""
    return registry.censored(mechanism) and not registry.get(mechanism).weighted


def _debias(entry: Mapping[str, Any], name: str, mechanism: str, kind: str) -> bool:
    """``debias`` of a column: for a censor-uw continuous or count model column only (on
    by default, :data:`DEBIAS_DEFAULT`), refused for any other (:mod:`dpsynth.models.debias`)."""
    applies = _debiased(mechanism) and kind in DEBIASED_TYPES
    if "debias" not in entry:
        return applies and DEBIAS_DEFAULT
    value = entry["debias"]
    if not isinstance(value, bool):
        raise InputError("debias", f"column {name!r}: must be true or false (got {value!r})")
    if value and not applies:
        raise InputError(
            "debias",
            f"column {name!r}: only a censor-uw continuous or count model column has it",
        )
    return value


def _missing_level(
    entry: Mapping[str, Any], name: str, kind: str, levels: Any, mechanism: str
) -> tuple[str, tuple[Any, ...]]:
    """``missing = "level"``: a PH binary or categorical column with ``MISSING_LEVEL``
    as one more public level (a binary one becomes categorical: three cells)."""
    if not registry.model_free(mechanism) or kind not in ("binary", "categorical"):
        raise InputError(
            "missing",
            f'column {name!r}: missing = "level" is for a ph binary or categorical column '
            '(another column takes missing = "indicator")',
        )
    if entry.get("design") == "number":
        raise InputError("design", f'column {name!r}: a missing level has no number: use "one-hot"')
    if MISSING_LEVEL in [str(v) for v in levels]:
        raise InputError("levels", f"column {name!r}: {MISSING_LEVEL!r} is the missing level")
    return "categorical", (*levels, MISSING_LEVEL)


def _calibration(
    entry: Mapping[str, Any], name: str, kind: str, mechanism: str, model: str | None
) -> dict:
    """``calibrate_bins`` (and ``calibrate_share``): a continuous model column's synthetic
    values mapped by rank onto a perturbed histogram of its marginal."""
    model_column = kind in ("continuous", "count") and not registry.model_free(mechanism)
    default = CALIBRATE_BINS_DEFAULT if model in CALIBRATED_BY_DEFAULT else None
    bins, share = entry.get("calibrate_bins", default), entry.get("calibrate_share")
    if bins is None or (bins == 0 and not isinstance(bins, bool)):
        if "calibrate_dispersion" in entry:
            raise InputError("calibrate_dispersion", f"column {name!r}: needs calibrate_bins")
        return {}  # a marginal centring may still buy a histogram (_marginal_share)
    lo, hi = CALIBRATE_BINS
    if isinstance(bins, bool) or not isinstance(bins, int) or not lo <= bins <= hi:
        raise InputError(
            "calibrate_bins",
            f"column {name!r}: must be 0 (off) or an integer from {lo} to {hi} (got {bins!r})",
        )
    if not model_column:
        raise InputError(
            "calibrate_bins",
            f"column {name!r}: only a continuous or count column with a model is calibrated",
        )
    return {
        "calibrate_bins": bins,
        "calibrate_share": _share_part(share, name),
        "calibrate_dispersion": _dispersion(entry, name, model),
    }


def _dispersion(entry: Mapping[str, Any], name: str, model: str | None) -> bool:
    """``calibrate_dispersion`` of a calibrated column: true by default for the models of
    :data:`DISPERSION_MATCHED_MODELS`, refused for the others."""
    if model not in DISPERSION_MATCHED_MODELS:
        if "calibrate_dispersion" in entry:
            raise InputError(
                "calibrate_dispersion",
                f"column {name!r}: only a calibrated "
                f"{' or '.join(DISPERSION_MATCHED_MODELS)} column has it",
            )
        return False
    value = entry.get("calibrate_dispersion", True)
    if not isinstance(value, bool):
        raise InputError(
            "calibrate_dispersion", f"column {name!r}: must be true or false (got {value!r})"
        )
    return value


def _share_part(share: Any, name: str) -> float:
    """``calibrate_share``: the part of a column's share its marginal histogram spends."""
    share = CALIBRATE_SHARE if share is None else share
    ok = isinstance(share, int | float) and not isinstance(share, bool)
    if not (ok and math.isfinite(share) and 0 < share < 1):
        raise InputError(
            "calibrate_share", f"column {name!r}: must be a number between 0 and 1 (got {share!r})"
        )
    return float(share)


def _marginal_share(
    entry: Mapping[str, Any], name: str, centring: str, calibration: dict, mechanism: str
) -> dict:
    """A marginal centring without calibration still buys a histogram of the column's
    marginal on its public cells, at ``calibrate_share`` of its share; so does a PH column
    drawn given others that sets ``calibrate_share`` (:data:`PH_CALIBRATION`)."""
    if "calibrate_share" in calibration:
        return calibration
    if centring in ("marginal", "auto"):  # auto: spent only if resolved to marginal
        return {"calibrate_share": _share_part(entry.get("calibrate_share"), name)}
    if entry.get("calibrate_share") is not None:
        if registry.model_free(mechanism):
            return {"calibrate_share": _share_part(entry["calibrate_share"], name)}
        raise InputError(
            "calibrate_share",
            f'column {name!r}: needs calibrate_bins, centring = "marginal" or a ph mechanism',
        )
    return calibration


def _design_kind(value: Any, name: str, kind: str, levels: tuple[Any, ...] | None) -> str:
    """``design`` (DESIGNS): one the column's type suits; "number" only for public levels
    that are numbers. Default: "one-hot" for a level column, "linear" otherwise."""
    if value is None:
        return "one-hot" if levels is not None else "linear"
    suits = [d for d, kinds in DESIGNS.items() if kind in kinds]
    if value not in suits:
        raise InputError(
            "design", f"column {name!r}: a {kind} column's is one of {', '.join(suits)}"
        )
    if value == "number":
        numbers = levels is not None and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in levels
        )
        if kind != "categorical" or not numbers:
            raise InputError(
                "design",
                f'column {name!r}: design = "number" needs a categorical column '
                "whose levels are numbers",
            )
    return value


def _given(entry: Mapping[str, Any], name: str, mechanism: str, kind: str) -> dict:
    """``given`` (and ``given_bins``): the columns a PH column is drawn given; ``bins``: a
    continuous PH column's own public bins."""
    given, bins = entry.get("given"), entry.get("given_bins")
    out = _own_bins(entry.get("bins"), name, mechanism, kind)
    if given is None:
        if bins is not None:
            raise InputError("given_bins", f"column {name!r}: needs given")
        return out
    if not registry.model_free(mechanism) or kind == "count":
        raise InputError(
            "given",
            f"column {name!r}: only a ph level or continuous column is drawn given chosen "
            "columns (a model column is a regression on every column before it)",
        )
    ok = isinstance(given, list) and all(isinstance(g, str) and g for g in given)
    if not ok or len(set(given)) != len(given):
        raise InputError("given", f"column {name!r}: must be a list of distinct column names")
    bins = _bin_count(GIVEN_BINS_DEFAULT if bins is None else bins, "given_bins", name)
    return {**out, "given": tuple(given), "given_bins": bins}


def _own_bins(bins: Any, name: str, mechanism: str, kind: str) -> dict:
    """``bins``: a continuous PH column's own equal-width public bins."""
    if bins is None:
        return {}
    if not registry.model_free(mechanism) or kind != "continuous":
        raise InputError("bins", f"column {name!r}: only a continuous ph column has bins")
    return {"bins": _bin_count(bins, "bins", name)}


def _bin_count(value: Any, key: str, name: str) -> int:
    """``given_bins`` or ``bins``: a whole number of public bins in :data:`GIVEN_BINS`."""
    lo, hi = GIVEN_BINS
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(
            key, f"column {name!r}: must be an integer from {lo} to {hi} (got {value!r})"
        )
    return value


def _type_and_model(entry: Mapping[str, Any], name: str, mechanism: str) -> tuple[str, str | None]:
    """The column's type and model: the model names the type; ph has no model."""
    kind, model = entry.get("type"), entry.get("model")
    model = MODEL_ALIASES.get(model, model) if isinstance(model, str) else model
    if kind is not None and kind not in registry.COLUMN_TYPES:
        raise InputError(
            "type", f"column {name!r}: must be one of {', '.join(registry.COLUMN_TYPES)}"
        )
    if registry.model_free(mechanism):
        if model is not None:
            raise InputError("model", f"column {name!r}: ph is a histogram and takes no model")
        return kind or "continuous", None  # binary / categorical: a histogram on the levels
    if not isinstance(model, str) or model not in MODEL_TYPES:
        raise InputError(
            "model",
            f"column {name!r}: must be one of {', '.join([*MODEL_TYPES, *MODEL_ALIASES])} "
            f"(got {model!r})",
        )
    if kind is not None and kind != MODEL_TYPES[model]:
        raise InputError(
            "type",
            f"column {name!r}: model {model!r} fits {MODEL_TYPES[model]} columns, not {kind}",
        )
    return MODEL_TYPES[model], model


def _centring(
    entry: Mapping[str, Any],
    name: str,
    mechanism: str,
    reference: str | None,
    kind: str,
    calibrated: bool,
) -> str:
    """Centring: reference by default where a public reference is given, else marginal for
    a calibrated column and a discrete one (:data:`MARGINAL_CENTRED_TYPES`), else auto
    (:data:`AUTO_CENTRE_BOUND`); ph has none."""
    if registry.takes_reference(mechanism) and reference is None:
        raise InputError(
            "mechanism",
            f"column {name!r}: censor-w is DP only with weights from a public reference: "
            'give reference = "PUBLIC.csv"',
        )
    marginal = not registry.model_free(mechanism) and (calibrated or kind in MARGINAL_CENTRED_TYPES)
    default = "marginal" if marginal else "auto" if not registry.model_free(mechanism) else "none"
    if reference is not None and not registry.model_free(mechanism):
        default = "reference"
    centring = entry.get("centring", default)
    if centring not in CENTRINGS:
        raise InputError("centring", f"column {name!r}: must be one of {', '.join(CENTRINGS)}")
    if registry.model_free(mechanism) and centring != "none":
        raise InputError("centring", f"column {name!r}: does not apply to ph")
    if centring == "reference" and reference is None:
        raise InputError("centring", f"column {name!r}: reference centring needs reference = ...")
    return centring


def _check_names(public: Sequence[PublicColumn], conf: Sequence[ConfidentialColumn]) -> None:
    """No duplicate in the order, no column in two roles, no indicator name taken."""
    seen: dict[str, str] = {}
    for role, cols in (("public", public), ("confidential", conf)):
        for col in cols:
            if col.name in seen:
                if seen[col.name] == role:
                    where = "in the synthesis order" if role == "confidential" else "as public"
                    raise InputError(role, f"column {col.name!r} appears twice {where}")
                raise InputError(
                    role, f"column {col.name!r} is in two roles ({seen[col.name]} and {role})"
                )
            seen[col.name] = role
    for col in conf:
        if col.missing == "indicator" and col.name + MISSING_SUFFIX in seen:
            raise InputError(
                "missing",
                f"column {col.name!r}: its indicator {col.name + MISSING_SUFFIX!r} is "
                "already a column name",
            )


_FORMULA = re.compile(r"^\s*([^~\s][^~]*?)\s*~\s*(.+?)\s*$")


def _analysis(value: Any, names: list[str]) -> Analysis | None:
    """``[analysis] formula = "y ~ a + b"``: every name a column of the spec."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"formula"}:
        raise InputError("analysis", 'must be a table with one key: formula = "y ~ a + b"')
    formula = value["formula"]
    match = _FORMULA.match(formula) if isinstance(formula, str) else None
    if match is None:
        raise InputError("analysis", f'formula must read "outcome ~ a + b" (got {formula!r})')
    outcome = match[1].strip()
    predictors = tuple(p.strip() for p in match[2].split("+"))
    unknown = [p for p in (outcome, *predictors) if p not in names]
    if unknown or not all(predictors):
        raise InputError(
            "analysis",
            f"formula names {', '.join(map(repr, unknown)) or 'an empty term'}, not a column "
            f"of the spec ({', '.join(names)})",
        )
    return Analysis(formula, outcome, predictors)


def resolve_centring(col: ConfidentialColumn, bound: float) -> ConfidentialColumn:
    """``col`` with ``centring = "auto"`` resolved (``AUTO_CENTRE_BOUND``), given the
    bound M its fit would have centred (public: the spec, epsilon and the record count):
    ``"marginal"``, or ``"none"`` with its whole share to the fit. Any other col unchanged."""
    if col.centring != "auto":
        return col
    if bound < AUTO_CENTRE_BOUND:
        return replace(col, centring="marginal", centring_auto=True)
    return replace(col, centring="none", calibrate_share=0.0, centring_auto=True)


AUTO_CENTRING_MEANING = (
    f'centring = "auto": "marginal" where the centred fit\'s censoring bound M (per set) is '
    f'below {AUTO_CENTRE_BOUND} nats, else "none" with the whole share to the fit; chosen from '
    "the spec, epsilon, m and the record count only (all public)"
)


def require_columns(spec: TableSpec, columns: Sequence[str], param: str = "data") -> None:
    """Every spec column present in the data's header (its names only: no value is read)."""
    have = [str(c) for c in columns]
    missing = [c for c in spec.columns if c not in have]
    if missing:
        shown = ", ".join(repr(c) for c in have[:30]) + (" ..." if len(have) > 30 else "")
        raise InputError(
            param,
            f"no column(s) {', '.join(map(repr, missing))} named by the spec; its columns are "
            f"{shown}",
        )


__all__ = [
    "MODEL_TYPES",
    "Analysis",
    "ConfidentialColumn",
    "PublicColumn",
    "TableSpec",
    "load_spec",
    "parse_spec",
    "require_columns",
    "resolve_centring",
]
