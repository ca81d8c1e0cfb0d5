"""The two kinds of table column, each as a fit and a draw.

A model column (a censored regression) and a histogram column (PH) each have one function
that reads the confidential values and returns its fit (:class:`ModelFit`,
:class:`HistogramFit`), from its :class:`ConfidentialInputs` (a subsample's rows of a few
columns, a histogram's counts: gathered as the table is read, :mod:`dpsynth.table.gather`)
and the public inputs at those rows (``reads``, :func:`fit_inputs`). And one function that
draws m synthetic sets from that fit and :class:`PublicInputs` (the public columns, the
synthetic predecessors, public settings): neither type has a field through which a
confidential value could be reached. A model fit keeps only the m draws its release
publishes (the ones its epsilon covers), not the posterior sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from dpsynth import entropy, formats
from dpsynth.errors import (
    EPSILON_RANGE,
    DataRefusal,
)
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.histogram import CellCounts, ph_bins, ph_edges
from dpsynth.models import debias, synthesis
from dpsynth.models.catalogue import (
    Model,
    PublicDesign,
)
from dpsynth.privacy import accounting, relations
from dpsynth.sampler import Sampler
from dpsynth.table import steps
from dpsynth.table.design import (
    PublicFeatures,
    column_design,
    column_model,
    features,
    from_outcome,
    own_codes,
    parent_cell_codes,
    stan_outcome,
)
from dpsynth.table.spec import (
    CALIBRATE_BINS_DEFAULT,
    DOWNSCALE_NATS,
    MISSING_SUFFIX,
    ConfidentialColumn,
    PublicColumn,
    n_cells,
    own_size,
    ph_parents,
)
from dpsynth.table.steps import TABLE_PH


@dataclass(frozen=True)
class PublicInputs:
    """What a column's draw reads: the public columns' features (kept encoded: a PH
    column's public parents' codes are made from them) and spec entries, the synthetic sets
    of the columns before it and their (public) spec entries. No field holds, or leads to, a
    confidential value: the draw of a column cannot see the data."""

    public: np.ndarray | PublicFeatures  # n x p: the public columns' features
    synthetic: Mapping[str, tuple[np.ndarray, ...]]  # each predecessor's m synthetic sets
    done: tuple[ConfidentialColumn, ...]  # the predecessors, in synthesis order
    m: int
    public_columns: tuple[PublicColumn, ...] = ()  # the spec's public columns
    records: int | None = None  # n, where ``public`` holds a fit's records only (fit_inputs)
    centre: CentreRows | None = None  # a marginal centre's public pseudo-design (fit_inputs)

    @property
    def n(self) -> int:
        """The table's public record count (public under the substitution relation)."""
        return int(self.public.shape[0]) if self.records is None else self.records

    def parent_values(self, parents: Sequence[Any], k: int) -> dict[str, np.ndarray]:
        """A PH column's parents' values in set k: a public column's codes (copied), a
        confidential predecessor's k-th synthetic set."""
        return {p.name: self._parent(p.name, k) for p in parents}

    def _parent(self, name: str, k: int) -> np.ndarray:
        """A parent's values in set k: a public column's codes (made from the public
        features), a confidential predecessor's k-th synthetic set."""
        codes = self.public.level_codes(name) if isinstance(self.public, PublicFeatures) else None
        return self.synthetic[name][k] if codes is None else codes

    def with_column(self, col: ConfidentialColumn, sets: list[np.ndarray]) -> PublicInputs:
        """These inputs with ``col``'s m synthetic sets added (the next column's)."""
        return replace(
            self, synthetic={**self.synthetic, col.name: tuple(sets)}, done=(*self.done, col)
        )


def pilot_inputs(pub: PublicInputs, rows: np.ndarray) -> PublicInputs:
    """The public inputs at the table's records ``rows`` (positions): a pilot's, whose draw
    fixes the steps the table's partitions are drawn at."""
    return replace(pub, public=_public_at(pub.public, rows), records=None)


def partition_inputs(pub: PublicInputs, rows: slice) -> PublicInputs:
    """The public inputs of one set at the records ``rows`` of a partition (its synthetic
    predecessors added as they are drawn, :meth:`PublicInputs.with_column`)."""
    return PublicInputs(_public_at(pub.public, rows), {}, (), 1, pub.public_columns)


def _public_at(
    public: np.ndarray | PublicFeatures, rows: slice | np.ndarray
) -> np.ndarray | PublicFeatures:
    """The public features at the records ``rows``: kept encoded (:class:`PublicFeatures`:
    a PH column's public parents' codes are made from them), or an array's rows."""
    return public.take(rows) if isinstance(public, PublicFeatures) else public[rows]


@dataclass(frozen=True)
class CentreRows:
    """A marginal centre's public pseudo-design (``centring = "marginal"``): the public
    columns and set 1's SYNTHETIC predecessors at its rows, chosen where the draws run, and
    the generator that chose them (it goes on to draw the centre's pseudo-outcomes)."""

    public: np.ndarray
    synthetic: tuple[tuple[ConfidentialColumn, np.ndarray], ...]
    rng: np.random.Generator


@dataclass(frozen=True)
class ConfidentialInputs:
    """What a column's fit reads beyond the public inputs: the confidential columns' values
    (codes on the outcome's scale) at the fit's records (``rows``: None, every record), what
    its histograms read of every record (``histograms``: "ph", a PH column's; "marginal", a
    calibrated column's marginal's: :func:`histogram_records`, integer records as their
    counts), and the public reference file's values, encoded alike: one column's, made as
    the table is read (:func:`dpsynth.table.gather.gathered`)."""

    values: Mapping[str, np.ndarray]  # the confidential columns, by name
    ref_public: np.ndarray | None = None
    ref: Mapping[str, np.ndarray] = field(default_factory=dict)
    fit_records: int | None = None  # the spec's subsample size for model columns
    rows: np.ndarray | None = None  # the records ``values`` hold (positions; None: all)
    histograms: Mapping[str, CellCounts | np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelFit:
    """What a model column's draw needs: the m draws its release publishes (the ones its
    epsilon covers, not the posterior sample), the generator that simulates them (seeded by
    the release, no data), the column's public settings and its post-processing steps."""

    col: ConfidentialColumn
    model: Model
    draws: tuple[dict[str, Any], ...]
    rng: np.random.Generator
    steps: tuple[steps.DrawStep, ...]
    targets: np.ndarray | None  # the marginal histogram's m samples (DP), or None
    col_seed: int | None


@dataclass(frozen=True)
class HistogramFit:
    """What a histogram (PH) column's draw needs: its m PH samples (its values), or given
    parents their joint cells' counts and the marginal histogram's samples' own cells'
    counts (what the conditional draw reads of them: a few numbers a cell, not a sample of
    :func:`ph_joint_draws`), and its seed."""

    col: ConfidentialColumn
    parents: tuple[ConfidentialColumn | PublicColumn, ...]
    sets: tuple[np.ndarray, ...]
    targets: np.ndarray | None
    col_seed: int | None


@dataclass(frozen=True)
class ColumnTask:
    """A column's fit, as public settings: its spec entry, its position j in the synthesis
    order, its epsilon, the m sets, the table's seed (None: from the OS), the sampler and
    the progress switch."""

    col: ConfidentialColumn
    j: int
    epsilon: float
    m: int
    seed: int | None
    sampler: Sampler
    run: dict[str, bool]

    @property
    def col_seed(self) -> int | None:
        """The column's own seed (``dpsynth.entropy.column_seed``), None when unseeded."""
        return None if self.seed is None else entropy.column_seed(self.seed, self.j)


class ColumnFit(NamedTuple):
    """A column's fit: its release (report, confidential diagnostics), its marginal
    histogram's release or None, and what its draw reads (:class:`ModelFit` or
    :class:`HistogramFit`)."""

    release: Any
    marginal: Any
    fit: ModelFit | HistogramFit


def _marginal(
    col: ConfidentialColumn,
    col_seed: int | None,
    conf: ConfidentialInputs,
    n: int,
    epsilon: float,
    m: int,
    run: dict[str, bool],
) -> tuple[Any, np.ndarray | None]:
    """A calibrated column's marginal histogram release and its m samples (None, None
    for a column without calibration)."""
    if col.calibrate_share <= 0:
        return None, None
    records = conf.histograms["marginal"]
    marg = _marginal_histogram(col, col_seed, records, n, col.calibrate_share * epsilon, m, run)
    return marg, marg.data[col.name].to_numpy(dtype=float).reshape(m, -1)


def _column_release(outcome: np.ndarray, task: ColumnTask, epsilon: float, kw: dict[str, Any]):
    """The column's one dpsynth release (:func:`dpsynth.release.single.synthesize`) at the
    ``epsilon`` its fit spends, with the mechanism's inputs ``kw``."""
    from dpsynth.release.single import synthesize

    return synthesize(
        outcome,
        mechanism=task.col.mechanism,
        column=task.col.name,
        epsilon=epsilon,
        m=task.m,
        seed=task.col_seed,
        sampler=task.sampler,
        allow_large_epsilon=True,  # the table's total was checked
        **task.run,  # progress
        **kw,
    )


def fit_histogram_column(
    task: ColumnTask, conf: ConfidentialInputs, pub: PublicInputs
) -> ColumnFit:
    """A PH column's fit: the perturbed histogram of its values, or given parents of its
    joint cells with them (integer ones as their counts, :func:`histogram_records`), at its
    epsilon."""
    col, epsilon, m, col_seed = task.col, task.epsilon, task.m, task.col_seed
    marg, targets = _marginal(col, col_seed, conf, pub.n, epsilon, m, task.run)
    parents = ph_parents(col, list(pub.done), pub.public_columns)
    outcome, kw = conf.histograms["ph"], _ph_settings(col, parents)
    if parents:  # a large joint sample: the conditional draw then adds little noise
        kw["n_synthetic"] = ph_joint_draws(pub.n)
    eps_fit = fit_epsilon(col, epsilon, conf.fit_records, pub.n)
    rel = _column_release(outcome, task, eps_fit, kw)
    sets = tuple(rel.data[col.name].to_numpy(dtype=float).reshape(m, -1))
    if parents:  # the joint sample's cells' counts, and the marginal's own cells'
        sets = tuple(CellCounts.of_codes(s, kw["bounds"][1] + 1).counts for s in sets)
        if targets is not None:
            targets = np.stack([CellCounts.of_codes(t, own_size(col)).counts for t in targets])
    return ColumnFit(rel, marg, HistogramFit(col, tuple(parents), sets, targets, col_seed))


HistogramPlan = tuple[np.ndarray, ...] | tuple[steps.DealtSample, ...] | None
"""What a PH column's partitions read of its pilot: given parents, each set's shares of its
own cells in each parent cell; without, each set's sample dealt to the partitions (None:
drawn whole)."""


def draw_histogram_column(fit: HistogramFit, pub: PublicInputs) -> list[np.ndarray]:
    """A PH column's m sets: its PH samples, or given parents each record's own cell drawn
    in its SYNTHETIC parent cell (:func:`dpsynth.table.steps.conditional_shares`,
    :func:`dpsynth.table.steps.values_in_cells`)."""
    return pilot_histogram_column(fit, pub, slice(None))[0]


def pilot_histogram_column(
    fit: HistogramFit, pub: PublicInputs, rows: slice | np.ndarray
) -> tuple[list[np.ndarray], HistogramPlan]:
    """A PH column's m sets at the table's records ``rows`` (``pub`` holds those), and what
    its partitions' draws then read (:func:`part_histogram_column`): given parents, each
    set's shares of its own cells in each parent cell, as the pilot drew them; without, of a
    pilot, each set's PH sample dealt to the partitions (:class:`~dpsynth.table.steps.DealtSample`)."""
    if not fit.parents:
        dealt = None
        if not isinstance(rows, slice):  # a pilot: its partitions deal the sample
            rng = entropy.stream(fit.col_seed, "ph-deal")
            dealt = _dealt(fit.sets, ph_sample_bins(fit.col, fit.sets[0].size), rng)
        return [s[rows] for s in fit.sets], dealt
    rng = entropy.stream(fit.col_seed, "ph-conditional")
    own = [None] * pub.m if fit.targets is None else list(fit.targets)
    sets, shares = [], []
    for k, joint in enumerate(fit.sets):
        cells = parent_cell_codes(fit.col, list(fit.parents), pub.parent_values(fit.parents, k))
        shares.append(steps.conditional_shares(fit.col, list(fit.parents), cells, joint, own[k]))
        sets.append(steps.values_in_cells(fit.col, shares[-1], cells, rng))
    return sets, tuple(shares)


def part_histogram_column(
    fit: HistogramFit,
    plan: HistogramPlan,
    pub: PublicInputs,
    k: int,
    rows: slice,
    rng: np.random.Generator,
) -> np.ndarray:
    """Set k of a PH column at the records ``rows`` of a partition (``pub``, one set: its
    synthetic predecessors there): the values its PH sample dealt there (``plan``), or given
    parents each record's own cell drawn from the pilot's shares (``plan``) in its SYNTHETIC
    parent cell."""
    if not fit.parents:
        return plan[k].at(rows, rng)
    cells = parent_cell_codes(fit.col, list(fit.parents), pub.parent_values(fit.parents, 0))
    return steps.values_in_cells(fit.col, plan[k], cells, rng)


def _dealt(
    samples: Iterable[np.ndarray], bins: tuple[np.ndarray, bool], rng: np.random.Generator
) -> tuple[steps.DealtSample, ...]:
    """Each set's histogram sample on ``bins`` (edges, unit bins or not) dealt to the
    table's partitions of ``dpsynth.formats.PARTITION_RECORDS`` records
    (:class:`~dpsynth.table.steps.DealtSample`), as :class:`~dpsynth.table.published.PartitionDraw`
    draws them."""
    edges, integer = bins
    size = formats.PARTITION_RECORDS
    return tuple(steps.DealtSample.of(s, edges, integer, size, rng) for s in samples)


def ph_sample_bins(col: ConfidentialColumn, n: int) -> tuple[np.ndarray, bool]:
    """The public bins of a parentless PH column's sample of n values (:func:`_ph_settings`,
    as the release made them: :func:`dpsynth.mechanisms.histogram.ph_edges`) and whether
    they are unit bins."""
    kw = _ph_settings(col, [])
    k = kw.get("n_bins") or ph_bins(n, kw["bounds"], kw["integer"])
    return ph_edges(kw["bounds"], k, kw["integer"]), kw["integer"]


def fit_model_column(task: ColumnTask, conf: ConfidentialInputs, pub: PublicInputs) -> ColumnFit:
    """A model column's fit: its censored regression on the public columns and the
    CONFIDENTIAL predecessors (a k-of-n subsample with ``fit_records``), at its epsilon."""
    col, epsilon, m, col_seed, sampler = task.col, task.epsilon, task.m, task.col_seed, task.sampler
    n = pub.n
    marg, targets = _marginal(col, col_seed, conf, n, epsilon, m, task.run)
    k = subsample_size(col, conf.fit_records, n)
    _require_fit_records(conf, k, n)
    y = conf.values[col.name]  # at the fit's records (fit_inputs)
    rows = np.isfinite(y)
    parts = [features(p, conf.values[p.name]) for p in pub.done]
    X = column_design(pub.public, parts, rows if not rows.all() else None)
    eps_fit = fit_epsilon(col, epsilon, conf.fit_records, n)
    kw: dict[str, Any] = {"model": column_model(col), "X": X}
    kw.update(_reference_inputs(col, conf, pub.done, X is not None, sampler))
    if col.centring == "marginal":
        kw["centring"] = _marginal_centre(col, pub.centre, targets[0], sampler)
    kw["model"] = fit_model(col, kw.get("centring"))
    d = downscale_of(col, eps_fit / m)  # each of the m sets' draws: its own bound
    kw["downscale"] = d if d < 1 else None  # 1: the paper's Censor_uw, as before
    if col.bounds is not None:
        kw["bounds"] = col.bounds
    rel = _column_release(stan_outcome(col, y[rows]), task, eps_fit, kw)
    censoring = _censoring(col, rel, kw, n if k is None else k)
    return ColumnFit(rel, marg, _model_fit(col, rel, m, targets, censoring, col_seed))


def _require_fit_records(conf: ConfidentialInputs, k: int | None, n: int) -> None:
    """A model fit reads exactly the records its epsilon is amplified for: k drawn by
    :func:`fit_rows` (``conf.rows``, gathered by :func:`dpsynth.table.gather.gathered`), or
    every one of the n. Anything else (inputs not gathered so) is refused before a value is
    used."""
    size = n if k is None else k
    rows_ok = conf.rows is None if k is None else conf.rows is not None and conf.rows.size == k
    if not rows_ok or any(v.size != size for v in conf.values.values()):
        raise ValueError("a model column's fit reads what the table's gathering gives it, only")


def _model_fit(
    col: ConfidentialColumn,
    rel: Any,
    m: int,
    targets: np.ndarray | None,
    censoring: debias.Censoring | None,
    col_seed: int | None,
) -> ModelFit:
    """The m published draws of ``rel`` (:func:`dpsynth.models.synthesis.published_draws`:
    the draws and generator its own synthetic sets use) and the column's draw steps."""
    model = column_model(col)
    seed = rel.diagnostics["seed"]
    stan_fit = rel.confidential.fit.stan_fit
    draws, rng = synthesis.published_draws(stan_fit.draws, stan_fit.n_draws, seed, m)
    shares, variances, means = steps.calibration_targets(col, model, targets)
    chain: list[steps.DrawStep] = []
    if censoring is not None:
        chain.append(steps.Debiased(model, censoring, seed, variances, means))
    if shares is not None:
        chain.append(steps.CalibratedIntercepts(shares))
    if variances is not None:
        chain.append(steps.MatchedDispersion(model, variances, means))
    return ModelFit(col, model, draws, rng, tuple(chain), targets, col_seed)


def draw_model_column(fit: ModelFit, pub: PublicInputs) -> list[np.ndarray]:
    """A model column's m sets: set k from published draw k at the design of the public
    columns and the SYNTHETIC predecessors of set k (NaN where the synthetic indicator says
    missing), through the column's steps, then rank-mapped onto its histogram sample."""
    return pilot_model_column(fit, pub, slice(None))[0]


@dataclass(frozen=True)
class ModelPlan:
    """What a model column's partitions read of its pilot (:func:`pilot_model_column`): each
    set's draw after its steps, and each set's histogram sample dealt to the partitions
    (:class:`~dpsynth.table.steps.DealtSample`), or None."""

    draws: tuple[dict[str, Any], ...]
    targets: tuple[steps.DealtSample, ...] | None


def pilot_model_column(
    fit: ModelFit, pub: PublicInputs, rows: slice | np.ndarray
) -> tuple[list[np.ndarray], ModelPlan]:
    """:func:`draw_model_column` at the table's records ``rows`` (``pub`` holds those), and
    what its partitions' draws read then (:class:`ModelPlan`)."""
    col, n = fit.col, pub.n
    keep = [np.ones(n, bool)] * pub.m
    if col.missing == "indicator":
        keep = [pub.synthetic[col.name + MISSING_SUFFIX][k] == 0 for k in range(pub.m)]
    designs = (SetDesign(pub, k, np.flatnonzero(rows)) for k, rows in enumerate(keep))  # in turn
    drawn, stepped = synthesis.sets_at_designs(
        fit.model, fit.draws, fit.rng, designs, col.bounds, fit.steps
    )
    sets = []
    for rows_k, y in zip(keep, drawn, strict=True):
        full = np.full(n, np.nan)
        full[rows_k] = from_outcome(col, y)
        sets.append(full)
    targets = None
    if col.calibrate_bins is not None:  # each set mapped by rank onto its histogram sample
        rng = entropy.stream(fit.col_seed, "rank-map")
        sets = [steps.rank_mapped(s, t, rng) for s, t in zip(sets, fit.targets, strict=True)]
        if not isinstance(rows, slice):  # a pilot: its partitions deal the sample
            targets = _dealt(fit.targets, marginal_edges(col), rng)
    return sets, ModelPlan(tuple(stepped), targets)


def part_model_column(
    fit: ModelFit, plan: ModelPlan, pub: PublicInputs, k: int, rows: slice, rng: np.random.Generator
) -> np.ndarray:
    """Set k of a model column at the records ``rows`` of a partition (``pub``, one set: its
    synthetic predecessors there): from set k's draw after the steps its pilot took, at the
    partition's design (NaN where the synthetic indicator says missing), rank-mapped onto
    the partition's share of the set's histogram sample."""
    col, n = fit.col, pub.n
    keep = np.ones(n, bool)
    if col.missing == "indicator":
        keep = pub.synthetic[col.name + MISSING_SUFFIX][0] == 0
    X = SetDesign(pub, 0, np.flatnonzero(keep)).at(slice(None))
    full = np.full(n, np.nan)
    full[keep] = from_outcome(col, synthesis.set_at(fit.model, plan.draws[k], rng, X, col.bounds))
    if plan.targets is not None:
        full = steps.rank_mapped(full, plan.targets[k].at(rows, rng), rng)
    return full


@dataclass(frozen=True)
class SetDesign:
    """Set k's design for a column (a :class:`dpsynth.models.synthesis.RowDesign`): the public
    columns and set k's SYNTHETIC predecessors at the records ``rows`` (positions), made a
    few rows at a time when drawn, so that a release holds at most
    :data:`dpsynth.models.synthesis.DRAW_ROWS` rows of one set's design (intercept only,
    an empty design, when there are no columns)."""

    pub: PublicInputs
    k: int
    rows: np.ndarray

    @property
    def n(self) -> int:
        return int(self.rows.size)

    def at(self, part: slice | np.ndarray) -> np.ndarray:
        """The design at ``rows[part]``."""
        rows = self.rows[part]
        parts = [features(p, self.pub.synthetic[p.name][self.k][rows]) for p in self.pub.done]
        X = column_design(self.pub.public[rows], parts, None)
        return np.empty((rows.size, 0)).view(PublicDesign) if X is None else X


ColumnPlan = tuple[ModelFit | HistogramFit, ModelPlan | HistogramPlan]
"""A column's fit and what its pilot fixed (:class:`ModelPlan`, :data:`HistogramPlan`):
all that drawing its partitions reads (:class:`dpsynth.table.published.PartitionDraw`)."""


@dataclass(frozen=True)
class ColumnKind:
    """One of the two kinds of table column: the function that fits it (the only one that
    reads confidential values) and the one that draws its sets from the fit and public inputs."""

    name: str
    fit: Callable[[ColumnTask, ConfidentialInputs, PublicInputs], ColumnFit]
    draw: Callable[[Any, PublicInputs], list[np.ndarray]]
    reads: Callable[[ColumnTask, ConfidentialInputs, PublicInputs], FitInputs]
    pilot: Callable[[Any, PublicInputs, Any], tuple[list[np.ndarray], Any]]
    part: Callable[[Any, Any, PublicInputs, int, slice, np.random.Generator], np.ndarray]


class FitInputs(NamedTuple):
    """What one column's fit reads (:func:`fit_inputs`): its confidential and public inputs."""

    conf: ConfidentialInputs
    pub: PublicInputs


def histogram_reads(task: ColumnTask, conf: ConfidentialInputs, pub: PublicInputs) -> FitInputs:
    """A PH column's fit reads its histograms' records (``conf``, gathered as the table was
    read: :func:`histogram_records`, integer ones as their counts) and no public feature:
    those, and the count n."""
    public = pub.public[:0]  # no row: the count is kept in ``records``
    return FitInputs(conf, replace(pub, public=public, synthetic={}, records=pub.n))


def model_reads(task: ColumnTask, conf: ConfidentialInputs, pub: PublicInputs) -> FitInputs:
    """A model column's fit reads its own values and its predecessors' at its records
    (``conf``, gathered as the table was read: a k-of-n subsample with ``fit_records``,
    :func:`fit_rows`), the public features there, its marginal histogram's records, and for
    a marginal centre the public pseudo-design chosen where the draws run (``pub.centre``:
    a pilot's rows), else here (:func:`centre_rows`)."""
    rows, n = conf.rows, pub.n
    centre = pub.centre
    if centre is None and task.col.centring == "marginal":
        centre = centre_rows(task.col, pub, task.col_seed)
    return FitInputs(
        conf,
        replace(
            pub,
            public=pub.public[slice(None) if rows is None else rows],  # made at the fit's rows
            synthetic={},
            records=n,
            centre=centre,
        ),
    )


HISTOGRAM_COLUMN = ColumnKind(
    "histogram", fit_histogram_column, draw_histogram_column, histogram_reads,
    pilot_histogram_column, part_histogram_column,
)  # fmt: skip
MODEL_COLUMN = ColumnKind(
    "model", fit_model_column, draw_model_column, model_reads, pilot_model_column,
    part_model_column,
)  # fmt: skip


def fit_inputs(task: ColumnTask, conf: ConfidentialInputs, pub: PublicInputs) -> FitInputs:
    """What ``task``'s fit reads: its column's confidential inputs ``conf`` (gathered as the
    table was read, :func:`dpsynth.table.gather.gathered`) and of the public ones what it
    reads there (``pub.done``: its predecessors), and nothing more: sent to the fit's worker
    (a cluster's memory and traffic then grow with the records one fit reads, not with the
    table's), the same inputs wherever the fit runs."""
    return kind_of(task.col).reads(task, conf, pub)


def kind_of(col: ConfidentialColumn) -> ColumnKind:
    """A column's kind, from its mechanism's declaration (a mechanism that fits no model
    makes a histogram column)."""
    return HISTOGRAM_COLUMN if registry.model_free(col.mechanism) else MODEL_COLUMN


def _censoring(
    col: ConfidentialColumn, rel: Any, kw: dict[str, Any], records: int
) -> debias.Censoring | None:
    """A ``debias`` column's public censoring settings (its centre, bound M, weight d and
    ``records``: the spec's ``fit_records`` or n, public counts, never the number of
    non-missing values), for :func:`dpsynth.models.debias.corrected`; None for any other column."""
    if not col.debias:
        return None
    return debias.Censoring(
        centring=kw.get("centring", "none"),
        bound=float(rel.confidential.fit.censor_bound),
        downscale=float(kw.get("downscale") or 1.0),
        fit_records=int(records),
        clamp=col.clamp,
    )


def fit_epsilon(col: ConfidentialColumn, epsilon: float, fit_records: int | None, n: int) -> float:
    """The epsilon a column's fit spends of its ``epsilon`` (eps_j): its part
    (``fit_share``), amplified when it reads a subsample (``fit_subsample``)."""
    epsilon = col.fit_share * epsilon  # a calibrated column's fit: its part
    k = subsample_size(col, fit_records, n)
    return epsilon if k is None else fit_subsample(k, n, epsilon)["epsilon_of_the_fit"]


def draw_bound(col: ConfidentialColumn, epsilon: float) -> float:
    """The censoring bound M of one draw of a column's fit at ``epsilon`` (one set's, after
    amplification), under the neighbours its mechanism declares."""
    return accounting.censor_bound(epsilon, registry.get(col.mechanism).default_neighbours)


def downscale_of(col: ConfidentialColumn, epsilon: float) -> float:
    """A censored column's weight d (``downscale``): the spec's number, or for "auto"
    min(1, M / ``DOWNSCALE_NATS`` (:mod:`dpsynth.table.spec`)) with M the censoring bound of one
    draw at ``epsilon`` (the fit's own per set, after amplification): public inputs only."""
    if col.downscale != "auto":
        return float(col.downscale)
    return min(1.0, draw_bound(col, epsilon) / DOWNSCALE_NATS)


def fit_model(col: ConfidentialColumn, centring: Any) -> Model:
    """A model column's model for its censored fit: with ``calibrate_dispersion`` and a
    centre (a fit to public inputs only: the marginal's or the reference's), its dispersion
    fixed at the centre's value, so the fit draws the coefficients alone (the synthetic sets
    get the matched dispersion anyway, :func:`matched_dispersion`). A fitted dispersion is
    what lets a censored fit at a small bound concentrate on one group of records, each chain
    on another (``dpsynth.table.spec.DISPERSION_MATCHED_MODELS``; evidence: book/choices.md,
    section choices-table-models)."""
    model = column_model(col).with_clamp(col.clamp)
    if not _fixes_dispersion(col) or not isinstance(centring, dict):
        return model
    return model.with_known_dispersion(float(np.asarray(centring[model.dispersion], float)))


def _fixes_dispersion(col: ConfidentialColumn) -> bool:
    """Whether a column's fit takes its centre's dispersion as known (:func:`fit_model`): a
    ``calibrate_dispersion`` column whose model has one, centred at a public fit."""
    return (
        col.calibrate_dispersion
        and column_model(col).dispersion is not None
        and col.centring in ("marginal", "reference")
    )


def marginal_records(col: ConfidentialColumn, y: np.ndarray) -> CellCounts | np.ndarray:
    """What a column's marginal histogram reads of its values ``y`` (every record): a PH
    column's own cells' counts; a model column's values with one (those on integer cells,
    :func:`marginal_cells`, as their counts)."""
    if registry.model_free(col.mechanism):
        return CellCounts.of_codes(own_codes(col, y), own_size(col))
    cells = marginal_cells(col)
    return _counted(y, cells["bounds"]) if cells.get("integer") else y[np.isfinite(y)]


def _counted(y: np.ndarray, bounds: tuple[float, float]) -> CellCounts:
    """The counts of ``y``'s present values on public ``bounds``; a refusal names the
    record's place in ``y`` (not among the present values)."""
    present = np.isfinite(y)
    try:
        return CellCounts.of(y[present], bounds)
    except DataRefusal as exc:
        place = int(np.flatnonzero(present)[exc.first - 1]) + 1
        raise exc.at(place - exc.first) from None


def _marginal_histogram(
    col: ConfidentialColumn,
    col_seed: int | None,
    records: CellCounts | np.ndarray,
    n: int,
    epsilon: float,
    m: int,
    run: dict[str, bool],
) -> Any:
    """A column's perturbed histogram of its marginal, m samples. A model column's: on its
    public cells (:func:`marginal_cells`; epsilon on every record with a value), n values
    each (n the table's public record count, never the count of values): a calibrated
    column's target, and a marginal centring's pseudo-data. A PH column's given parents: on
    its own cells (its levels or public bins, as in its joint cells), :func:`ph_joint_draws`
    cells each: the marginal its draw is raked to (``table_spec.PH_CALIBRATION``)."""
    from dpsynth.release.single import synthesize

    if registry.model_free(col.mechanism):
        cells = {
            "integer": True,
            "bounds": (0, own_size(col) - 1),
            "n_synthetic": ph_joint_draws(n),
        }
    else:
        cells = {**marginal_cells(col), "n_synthetic": n}
    return synthesize(
        records,
        mechanism="ph",
        epsilon=epsilon,
        m=m,
        seed=None if col_seed is None else entropy.derived_seed(col_seed, "marginal-histogram"),
        column=col.name,
        allow_large_epsilon=True,  # the table's total was checked
        **cells,
        **TABLE_PH,
        **run,
    )


MARGINAL_UNIT_BINS = 200
"""A count column's marginal histogram has one bin per integer of its public bounds when
they hold at most this many, else ``calibrate_bins`` (default 20) equal-width bins."""


def marginal_cells(col: ConfidentialColumn) -> dict[str, Any]:
    """The public cells of a column's marginal histogram, as keyword arguments of
    :func:`dpsynth.release.single.synthesize`: one per level (codes), one per integer of a count's
    bounds (up to :data:`MARGINAL_UNIT_BINS`), else ``calibrate_bins`` equal-width bins."""
    if col.levels is not None:
        return {"integer": True, "bounds": (0, len(col.levels) - 1)}
    lo, hi = col.bounds
    if col.type == "count" and hi - lo < MARGINAL_UNIT_BINS:
        return {"integer": True, "bounds": (int(lo), int(hi))}
    return {"bounds": col.bounds, "n_bins": col.calibrate_bins or CALIBRATE_BINS_DEFAULT}


def marginal_edges(col: ConfidentialColumn) -> tuple[np.ndarray, bool]:
    """The edges of a model column's marginal histogram's bins (:func:`marginal_cells`) and
    whether they are unit bins."""
    cells = marginal_cells(col)
    integer = bool(cells.get("integer"))
    return ph_edges(cells["bounds"], cells.get("n_bins", 0), integer), integer


MARGINAL_CENTRE_ROWS = 2000
"""The rows of the public pseudo-reference a marginal centring fits (``centring =
"marginal"``): enough to pin an intercept and a dispersion, and a fit of seconds."""


def centre_rows(col: ConfidentialColumn, pub: PublicInputs, col_seed: int | None) -> CentreRows:
    """A marginal centre's rows (:data:`MARGINAL_CENTRE_ROWS` of the records, those whose
    synthetic indicator says present), from the public columns and the synthetic predecessors
    of set 1 only, with the generator that chose them."""
    rng = entropy.stream(col_seed, "marginal-centre")
    rows = np.arange(pub.n)
    if col.missing == "indicator":
        rows = np.flatnonzero(pub.synthetic[col.name + MISSING_SUFFIX][0] == 0)
    rows = np.sort(rng.permutation(rows)[:MARGINAL_CENTRE_ROWS])
    synthetic = tuple((p, pub.synthetic[p.name][0][rows]) for p in pub.done)
    return CentreRows(pub.public[rows], synthetic, rng)


def _marginal_centre(
    col: ConfidentialColumn, centre: CentreRows, sample: np.ndarray, sampler: Sampler
) -> dict[str, Any]:
    """``centring = "marginal"``: the column's model fitted, uncensored, to PUBLIC inputs
    only (no confidential value reaches this function): its histogram's sample (shuffled,
    so unrelated to the rows) beside the public columns and the synthetic predecessors of
    set 1 at the centre's rows (:func:`centre_rows`). Intercept and dispersion from the
    marginal, slopes near 0: a centre that needs no reference file."""
    from dpsynth.release.plan import reference_point

    y = centre.rng.choice(sample, size=centre.public.shape[0], replace=False)
    if col.type != "continuous":  # codes, or a count's equal-width bin values rounded
        y = np.rint(y)
    parts = [features(p, v) for p, v in centre.synthetic]
    X = column_design(centre.public, parts, None)
    return reference_point(
        stan_outcome(col, y), column_model(col), bounds=col.bounds, reference_X=X,
        sampler=centre_sampler(sampler),
    )  # fmt: skip


MARGINAL_CENTRE_DRAWS = 500
"""Warmup and retained draws per chain (at most) of a marginal centre's fit: it is an uncensored
fit to public pseudo-data, well identified, and only its posterior mean is used, whose Monte
Carlo error at about 1,000 draws is a few percent of its posterior sd. Internal (not in
``__all__``); dpsynth's extension (a shorter run than the table's own, ``TABLE_SAMPLER``).
Evidence: book/choices.md, section choices-table-models."""


def centre_sampler(sampler: Sampler) -> Sampler:
    """``sampler`` with at most :data:`MARGINAL_CENTRE_DRAWS` warmup and retained draws."""
    n = MARGINAL_CENTRE_DRAWS
    return replace(
        sampler,
        iter_warmup=min(sampler.iter_warmup, n),
        iter_sampling=min(sampler.iter_sampling, n),
    )


def subsample_size(col: ConfidentialColumn, fit_records: int | None, n: int) -> int | None:
    """k when the column's model is fitted to a k-of-n subsample (the spec's ``fit_records``),
    else None: PH columns, and k >= n, take every record."""
    if fit_records is None or fit_records >= n or registry.model_free(col.mechanism):
        return None
    return fit_records


def fit_subsample(k: int, n: int, epsilon: float) -> dict[str, Any]:
    """What the public report says of a column fitted to k of n records at ``epsilon``: the
    epsilon its fit may spend, the one that subsampling amplifies to ``epsilon``
    (:func:`dpsynth.privacy.relations.subsampling_map`), capped at the largest epsilon dpsynth takes
    (a fit may always spend less than it could)."""
    inner = min(relations.subsampling_map(epsilon, k, n), EPSILON_RANGE[1])
    return {
        "fit_records": k,
        "of_records": n,
        "epsilon_of_the_fit": inner,
        "meaning": relations.SUBSAMPLING_MEANING,
    }


def fit_rows(k: int | None, n: int, seed: int | None) -> np.ndarray | None:
    """The records a model column is fitted to: all (None), or a uniform random k of the n,
    drawn without replacement independently of every value (never published)."""
    if k is None:
        return None
    rng = entropy.stream(seed, "fit-rows")
    return np.sort(rng.choice(n, size=k, replace=False))


def histogram_records(
    col: ConfidentialColumn,
    parents: list[ConfidentialColumn],
    values: Mapping[str, np.ndarray],
    y: np.ndarray,
) -> CellCounts | np.ndarray:
    """What PH reads of a column (:func:`_ph_settings`): a continuous column's values, the
    counts of its 0-based level codes or integers, or, given parents, the counts of each
    record's joint cell: parent cell x own cells + own cell (``design.parent_cell_codes``,
    ``design.own_codes``). Counts add: they may be made a partition at a time."""
    if parents:
        cells = parent_cell_codes(col, parents, values) * own_size(col) + own_codes(col, y)
        return CellCounts.of_codes(cells, own_size(col) * n_cells(col, parents))
    if col.type == "continuous":
        return y[np.isfinite(y)]
    return _counted(y, _ph_settings(col, [])["bounds"])


def _ph_settings(col: ConfidentialColumn, parents: list[ConfidentialColumn]) -> dict[str, Any]:
    """How PH releases a column (public, from the spec): given parents, one unit bin per
    public joint cell; else one per public level or integer, or a continuous column's
    ``bins`` on its public bounds."""
    if parents:
        bounds = (0, own_size(col) * n_cells(col, parents) - 1)
        return {"integer": True, "bounds": bounds, **TABLE_PH}
    kw: dict[str, Any] = {"integer": col.type != "continuous", **TABLE_PH}
    if col.levels is not None:
        kw["bounds"] = (0, len(col.levels) - 1)
    else:
        kw["bounds"] = col.bounds
        if col.bins is not None:
            kw["n_bins"] = col.bins
    return kw


PH_JOINT_DRAWS = 20
"""A PH column given parents draws its joint-cell sample at this many cells per record (at
most :data:`PH_JOINT_DRAWS_CAP`, at least n; a public number): each record's own cell is
then drawn from the sample's cells in its synthetic parent cell, so this second draw adds
little to the noise (with a sample of n it doubled the sampling variance: double sampling)."""
PH_JOINT_DRAWS_CAP = 2_000_000
"""The largest joint-cell sample a PH column draws (:data:`PH_JOINT_DRAWS`), a public number."""


def ph_joint_draws(n: int) -> int:
    """The size of a PH column's joint-cell sample (:data:`PH_JOINT_DRAWS`): public, from n."""
    return max(n, min(PH_JOINT_DRAWS * n, PH_JOINT_DRAWS_CAP))


def _reference_inputs(
    col: ConfidentialColumn,
    conf: ConfidentialInputs,
    done: tuple[ConfidentialColumn, ...],
    has_X: bool,
    sampler: Sampler,
) -> dict[str, Any]:
    """Censor_w's reference weights and reference centring, from the public reference only."""
    kw: dict[str, Any] = {}
    if col.centring == "saturated":
        kw["centring"] = "saturated"
    if conf.ref_public is None or (
        not registry.takes_reference(col.mechanism) and col.centring != "reference"
    ):
        return kw
    y = conf.ref[col.name]
    rows = np.isfinite(y)
    parts = [features(p, conf.ref[p.name]) for p in done]
    ref_X = column_design(conf.ref_public, parts, rows) if has_X else None
    ref_y = stan_outcome(col, y[rows])
    if registry.takes_reference(col.mechanism):
        kw.update(reference=ref_y, reference_X=ref_X)
    if col.centring == "reference":
        from dpsynth.release.plan import reference_point

        kw["centring"] = reference_point(
            ref_y, column_model(col), bounds=col.bounds, reference_X=ref_X, X=None, sampler=sampler
        )
    return kw
