"""A whole table in one release: a sequential synthesizer, each column censored or PH.

Column j (in the spec's synthesis order) is one existing dpsynth release
(:func:`dpsynth.release.single.synthesize`: Censor_uw, Censor_w with reference weights, or PH) at
budget eps_j = share_j * epsilon; a model column is fitted as a regression on the public
columns and the confidential columns before it (a PH column after others releases the
histogram of its joint cells with its parents: the discrete predecessors, or those its
``given`` names, a continuous one on public bins). Each column is fitted by its kind's fit
function (:mod:`dpsynth.table.columns`: the only code that reads confidential values) and
drawn by its kind's draw function from that fit and the public inputs only: a model
column's published values come from the m published draws of its fit at the design built
from the public columns and the **synthetic** values of its predecessors (post-processing,
through :func:`dpsynth.models.synthesis.sets_at_designs`). Predecessors enter the design scaled by their
public bounds, (v - lo) / (hi - lo) (and its centred square with ``design = "quadratic"``),
and categorical ones one-hot on their public levels, so record i's values enter row i of each
design only: one record changes one clamped term per column (censoring paper, Censor_uw,
Eq. 3.5; the book page "A whole table", Proposition 1). Total epsilon = sum_j eps_j
(sequential composition), m sets cost m times (inside each column's release).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from dpsynth import formats
from dpsynth.engine.diagnostics import MULTIMODAL_SAYS
from dpsynth.errors import (
    InputError,
    require_epsilon,
)
from dpsynth.mechanisms import registry
from dpsynth.models import synthesis
from dpsynth.models.catalogue import (
    get_model,
)
from dpsynth.privacy import accounting, budget, relations
from dpsynth.release import safeguards
from dpsynth.release.settings import BudgetSettings
from dpsynth.release.single import Release
from dpsynth.sampler import Sampler
from dpsynth.table import gather, schedule, source
from dpsynth.table.columns import (
    ColumnPlan,
    ColumnTask,
    ConfidentialInputs,
    ModelFit,
    PublicInputs,
    _fixes_dispersion,
    centre_rows,
    draw_bound,
    fit_epsilon,
    fit_inputs,
    fit_subsample,
    kind_of,
    marginal_cells,
    pilot_inputs,
    subsample_size,
)
from dpsynth.table.design import (
    public_encoder,
    public_features,
    public_matrix,
    reference_codes,
)
from dpsynth.table.published import PartitionDraw, SyntheticTable, TableRelease
from dpsynth.table.spec import (
    AUTO_CENTRING_MEANING,
    DEFAULT_MECHANISM_MEANING,
    MISSING_LEVEL,
    PH_CALIBRATION,
    TABLE_ADAPT_DELTA,
    TABLE_ITER_SAMPLING,
    ConfidentialColumn,
    PublicColumn,
    TableSpec,
    load_spec,
    n_cells,
    own_size,
    ph_parents,
    require_columns,
    resolve_centring,
)
from dpsynth.table.steps import ph_calibration_weight

TABLE_SAMPLER = Sampler(iter_sampling=TABLE_ITER_SAMPLING, adapt_delta=TABLE_ADAPT_DELTA)
"""A table's default MCMC settings: 2 x (1000 + 1000) (``table_spec.TABLE_ITER_SAMPLING``) at a
step-size target of ``table_spec.TABLE_ADAPT_DELTA``. Public (in ``__all__``). Evidence:
book/choices.md, section choices-sampler."""

PUBLIC_COPIED = (
    "public columns are copied verbatim from the input (they are public: no privacy is "
    "claimed or needed for them); missing values in them stay missing"
)
MISSING_MEANING = (
    'a confidential column with missing values (missing = "indicator") gets a 0/1 column '
    "NAME_missing (1 = missing), synthesized right before it; its values are fitted on the "
    "records that have them and drawn for the synthetic records whose indicator is 0; a "
    'binary or categorical ph column with missing = "level" counts missing as one more '
    f"public level, {MISSING_LEVEL!r}, written back as missing"
)


def resolved_spec(spec: TableSpec, epsilon: float, m: int, n: int) -> TableSpec:
    """``spec`` with every ``centring = "auto"`` resolved
    (:func:`dpsynth.table.spec.resolve_centring`) at the bound M of one set's draw of the
    column's centred fit: public inputs only (the spec, epsilon, m and the record count n,
    which the substitution relation keeps public)."""
    shares = {c.name: c.share for c in spec.order()}  # after its indicator: half its share
    out = []
    for col in spec.confidential:
        fit = fit_epsilon(col, shares[col.name] * epsilon, spec.fit_records, n)
        out.append(resolve_centring(col, draw_bound(col, fit / m)))
    return replace(spec, confidential=tuple(out))


def synthesize_table(
    frame: pd.DataFrame | str | Path,
    spec: str | Path | dict | TableSpec,
    epsilon: float,
    *,
    m: int = 1,
    seed: int | None = None,
    sampler: Sampler | None = None,
    neighbours: str | None = None,
    reference: pd.DataFrame | None = None,
    allow_large_epsilon: bool = False,
    budget_file: str | Path | budget.Charge | None = None,
    budget_total: float | None = None,
    dataset_sha256: str | None = None,
    progress: bool = False,
    allow_unconverged: bool = False,
    client: Any = None,
) -> Release:
    """Release m synthetic copies of a table under a total budget ``epsilon``.

    ``frame``: the confidential table, or its file's path (CSV, Parquet file or directory,
    Stata, SAS: read after the charge a partition at a time, only the spec's columns,
    :mod:`dpsynth.table.source`). ``spec`` is checked first (a path, a mapping or a
    :class:`TableSpec`), then the data's header; the budget is charged (``budget_file``) before any value is read and the
    attempt's outcome recorded whatever happens. A refused or failed column refuses the
    whole table (a fit's convergence never does). ``reference``: the public reference file named by
    the spec (read from its path when not given). ``seed`` makes a research run
    reproducible and the release NOT private (the report says so). ``allow_unconverged`` is
    deprecated and ignored: a column whose fit misses the convergence policy is released
    all the same, and the table's confidential verdict is poor, naming it. ``client``: a
    ``distributed.Client`` or a scheduler address to run the column fits on (the cluster
    sees the confidential records); without one they run on an in-process cluster sized to
    the cores and the chains, or in this process (:func:`dpsynth.table.schedule.fitter`).
    """
    spec = load_spec(spec)
    budget_settings = BudgetSettings(epsilon, m, seed, allow_large_epsilon).validate()
    epsilon, m = budget_settings.epsilon, budget_settings.m
    if neighbours is not None and neighbours != spec.neighbours:
        raise InputError("neighbours", f"a table release supports {spec.neighbours} only")
    require_available_models(spec)
    require_column_epsilons(spec, epsilon)
    path = Path(frame) if isinstance(frame, (str, Path)) else None
    if path is None and not isinstance(frame, pd.DataFrame):
        raise InputError("frame", "must be a pandas DataFrame or the path of the confidential file")
    if path is not None and not path.exists():
        raise InputError("data", f"no such file: {path}")
    names = formats.header_names(path, "data") if path is not None else list(frame.columns)
    require_columns(spec, names, "data")
    ref = _reference_frame(spec, reference)
    n = formats.record_count(path, "data", spec.columns) if path is not None else frame.shape[0]
    spec = resolved_spec(spec, epsilon, m, n)  # public: no value is read
    schedule.check_scheduler(client)  # an address that does not answer spends nothing
    identity = dataset_sha256
    if identity is None and budget_file is not None and not isinstance(budget_file, budget.Charge):
        identity = formats.sha256(path) if path is not None else _frame_sha256(frame, spec)
    charge = safeguards.charge_budget(
        budget_file, budget_total, identity, epsilon, f"table m={m}", ()
    )
    owned = charge if not isinstance(budget_file, budget.Charge) else None
    with budget.attempt(owned):
        if allow_unconverged:
            from dpsynth.release.single import UNCONVERGED_DEPRECATION

            warnings.warn(UNCONVERGED_DEPRECATION, DeprecationWarning, stacklevel=2)
        run = {"progress": progress}
        sampler = sampler or TABLE_SAMPLER
        parts = (  # after the charge: a value is read from here on, a partition at a time
            source.spec_partitions(path, spec, "data")
            if path is not None
            else gather.partitions(frame.reset_index(drop=True))
        )
        with threadpool_limits(1):  # the draws' small products: one BLAS thread (scaling page)
            out = _release_table(parts, n, spec, epsilon, m, seed, sampler, ref, run, client)
        out.report["input_columns_not_released"] = [str(c) for c in names if c not in spec.columns]
        if charge is not None:
            out.report["budget"] = charge.to_report()
            out.diagnostics["budget"] = charge.to_diagnostics()
    return out


def require_column_epsilons(spec: TableSpec, epsilon: float) -> None:
    """Each column's part of ``epsilon`` (its share) within the epsilons dpsynth takes: from
    the spec and epsilon alone, so it is refused before any budget is charged."""
    for col in spec.order():
        try:
            require_epsilon("epsilon", col.share * epsilon)
        except InputError as exc:
            what = f"column {col.name!r}: its share of epsilon, {col.share * epsilon:.3g},"
            raise InputError("epsilon", f"{what} {exc.message}") from None


def require_available_models(spec: TableSpec) -> None:
    """Every model the spec names is shipped by this dpsynth (binary and categorical
    columns need the ``logistic`` and ``categorical`` models: refused "not yet" without)."""
    from dpsynth.models.catalogue import MODELS

    for col in spec.order():
        if col.model is None:
            continue
        what = f"the indicator of {col.indicator_of!r}" if col.indicator_of else repr(col.name)
        try:
            model = get_model(col.model)
        except InputError:
            raise InputError(
                "model",
                f"column {what}: model {col.model!r} is not available in this dpsynth yet "
                f"({col.type} columns need it); available: {', '.join(MODELS)}",
            ) from None
        if col.clamp not in model.clamps:
            raise InputError(
                "clamp",
                f"column {what}: model {col.model!r} accepts clamp {', '.join(model.clamps)} "
                f"(got {col.clamp!r})",
            )


def _frame_sha256(frame: pd.DataFrame, spec: TableSpec) -> str:
    """The dataset's identity for the budget file: a hash of the spec's columns' bytes."""
    return budget.array_sha256(
        *(pd.util.hash_pandas_object(frame[c], index=False).to_numpy() for c in spec.columns)
    )


def _reference_frame(spec: TableSpec, reference: pd.DataFrame | None) -> pd.DataFrame | None:
    if spec.reference is None:
        if reference is not None:
            raise InputError("reference", "the spec names no reference (reference = ...)")
        return None
    if reference is None:
        path = Path(spec.reference)
        if not path.is_file():
            raise InputError("reference", f"no such file: {spec.reference}")
        reference = formats.read_table(path, "reference")
    require_columns(spec, reference.columns, "reference")
    return reference


def _release_table(
    parts: Iterable[pd.DataFrame],
    n: int,
    spec: TableSpec,
    epsilon: float,
    m: int,
    seed: int | None,
    sampler: Sampler,
    ref: pd.DataFrame | None,
    run: dict[str, bool],
    client: Any,
) -> Release:
    """The release itself, once the budget is charged: the table's n records read once, a
    partition at a time, for what the fits and the verdict read of them
    (:func:`dpsynth.table.gather.gathered`), the columns fitted and drawn
    (:func:`_fit_and_draw`), whose inputs are gone by the time the published table is made
    and judged (what the release holds from then on is that table and the public columns)."""
    from dpsynth.release.single import KnownSeedWarning

    if seed is not None:
        warnings.warn(
            "a release made with a known seed is reproducible by anyone who has the seed "
            "and is therefore not private; omit the seed for a real release",
            KnownSeedWarning,
            stacklevel=3,
        )
    tasks = [
        ColumnTask(c, j, c.share * epsilon, m, seed, sampler, run)
        for j, c in enumerate(spec.order())
    ]
    read = gather.gathered(parts, spec, n, tasks, _verdict_sums(spec, n))
    if read.records != n:  # counted by the same reader: only a changed file differs
        raise InputError("data", "the file changed while it was read")
    conf, pub = _inputs(read, spec, ref, m)
    drawn = _fit_and_draw(conf, pub, spec, tasks, client)
    del conf
    table = SyntheticTable(read.public, spec, drawn.synthetic, m, n, drawn.partitions)
    releases, marginals = drawn.releases, drawn.marginals
    report = _table_report(spec, releases, marginals, epsilon, m, seed, n)
    diagnostics = _table_diagnostics(spec, releases, marginals, read.clipped, seed)
    for name, secs in drawn.seconds.items():  # a fit's time depends on the data: confidential
        diagnostics["columns"][name]["fit_seconds"] = secs
    del drawn  # its synthetic sets are in ``table`` now
    verdict = _with_guarantee(_release_verdict(read, table), report)
    diagnostics["verdict"] = _with_convergence(verdict, releases, spec.reference is not None)
    results = {k: r.confidential for k, r in releases.items()}
    return TableRelease(table, report, diagnostics, results)


class Drawn(NamedTuple):
    """A table's columns fitted and drawn: each column's m synthetic sets (none where the
    table is drawn a partition at a time: ``partitions``), its release and marginal
    histogram's (report, diagnostics, result: their synthetic data dropped), and each fit's
    seconds (confidential)."""

    synthetic: Mapping[str, tuple[np.ndarray, ...]]
    releases: dict[str, Any]
    marginals: dict[str, Any]
    seconds: dict[str, float]
    partitions: PartitionDraw | None = None


def _fit_and_draw(
    conf: dict[str, ConfidentialInputs],
    pub: PublicInputs,
    spec: TableSpec,
    tasks: list[ColumnTask],
    client: Any,
) -> Drawn:
    """The columns' fits (``tasks``, one per column in synthesis order, the table's settings
    alike) submitted at once (:mod:`dpsynth.table.schedule`), each with what it reads
    (``conf``, its column's), their draws made in order as the fits arrive from the public
    inputs ``pub``: of every record, or of a table larger than
    :data:`~dpsynth.models.synthesis.DRAW_ROWS` a pilot at its public random
    :func:`~dpsynth.models.synthesis.step_rows`, whose steps its partitions are then drawn
    at (:class:`~dpsynth.table.published.PartitionDraw`)."""
    first = tasks[0]  # m, the sampler and the progress switch are the table's
    releases: dict[str, Any] = {}
    marginals: dict[str, Any] = {}
    plans: dict[str, ColumnPlan] = {}
    order, run = spec.order(), first.run
    rows = synthesis.step_rows(pub.n)  # public: from n alone
    drawn = pub if isinstance(rows, slice) else pilot_inputs(pub, rows)
    with schedule.fitter(client, first.sampler.chains, run["progress"]) as fits:
        handles = {  # a marginal centre waits: it reads its predecessors' synthetic sets
            t.col.name: _submit(fits, t, conf, replace(pub, done=tuple(order[: t.j])))
            for t in tasks
            if t.col.centring != "marginal"
        }
        try:
            for j, col in enumerate(order):
                _announce(col, j, len(order), tasks[j].epsilon, run)
                if col.name not in handles:  # after its predecessors' draws
                    centre = centre_rows(col, drawn, tasks[j].col_seed)
                    mine = replace(pub, done=drawn.done, centre=centre)
                    handles[col.name] = _submit(fits, tasks[j], conf, mine)
                fitted = _collected(fits, col, handles.pop(col.name))
                releases[col.name] = _without_data(fitted.release)
                if fitted.marginal is not None:
                    marginals[col.name] = _without_data(fitted.marginal)
                sets, plan = kind_of(col).pilot(fitted.fit, drawn, rows)  # public only
                drawn = drawn.with_column(col, sets)
                plans[col.name] = (_without_samples(fitted.fit), plan)
        finally:
            fits.cancel(list(handles.values()))
    seconds = dict(fits.seconds)
    if isinstance(rows, slice):
        return Drawn(drawn.synthetic, releases, marginals, seconds)
    partitions = PartitionDraw.of(spec, plans, pub, first.seed, run["progress"])
    return Drawn({}, releases, marginals, seconds, partitions)


def _without_samples(fit: Any) -> Any:
    """A column's fit without its histogram samples, n values a set: a model column's
    marginal's, a parentless PH column's own (its partitions read their pilot's dealing of
    them, :class:`~dpsynth.table.steps.DealtSample`)."""
    if isinstance(fit, ModelFit):
        return replace(fit, targets=None)
    return fit if fit.parents else replace(fit, sets=())


def _without_data(release: Release) -> Release:
    """A column's release without its synthetic data (drawn into the table's sets already):
    its report, diagnostics and result are what the table's report and verdict read. The
    empty frame is a copy: a slice would keep the sets' arrays alive (its columns' base)."""
    return replace(release, data=release.data.iloc[:0].copy())


def _submit(
    fits: schedule.Fitter,
    task: ColumnTask,
    conf: Mapping[str, ConfidentialInputs],
    pub: PublicInputs,
) -> Any:
    """Submit ``task``'s fit with what it reads (:func:`dpsynth.table.columns.fit_inputs`)
    of its column's confidential inputs (``conf``) and the public ones ``pub``
    (``pub.done``: its predecessors; a marginal centre's synthetic sets drawn by then), made
    where :meth:`schedule.Fitter.submit` says."""
    mine = conf[task.col.name]
    return fits.submit(
        task.col.name, kind_of(task.col).fit, task, lambda: fit_inputs(task, mine, pub)
    )


def _collected(fits: schedule.Fitter, col: ConfidentialColumn, handle: Any) -> Any:
    """Column ``col``'s fit (its refusal names the column), the seeded-release warning
    silenced (the table warns once)."""
    from dpsynth.release.single import KnownSeedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KnownSeedWarning)
        try:
            return fits.result(col.name, handle)
        except InputError as exc:
            raise gather.column_refusal(exc, col.name) from None


def _inputs(
    read: gather.Gathered, spec: TableSpec, ref: pd.DataFrame | None, m: int
) -> tuple[dict[str, ConfidentialInputs], PublicInputs]:
    """Each column's fit inputs (``read.fits``) with the reference file's codes, and the
    public inputs the first column's draw starts from (the public columns' features and
    level codes). A refusal of the data is raised here, in the order a whole table's
    checks take: the public columns' encoders, then per column (synthesis order) its values
    (:attr:`dpsynth.table.gather.Gathered.refusal`) and its reference values, then the
    public columns' values."""
    encoders = [public_encoder(read.public, c) for c in spec.public]
    ref_codes = {}
    for j, col in enumerate(spec.order()):
        read.refusal.raise_for(j)
        if ref is not None:
            ref_codes[col.name] = reference_codes(ref, col)
    ref_public = None if ref is None else public_matrix(ref, encoders)
    pub = PublicInputs(public_features(read.public, encoders), {}, (), m, spec.public)
    conf = {name: replace(c, ref_public=ref_public, ref=ref_codes) for name, c in read.fits.items()}
    read.fits = {}  # the fits' inputs live in ``conf`` only
    return conf, pub


def _announce(col: ConfidentialColumn, j: int, k: int, eps_j: float, run: dict) -> None:
    """A progress line per column: its name, mechanism and epsilon (all public, the spec's)."""
    if run.get("progress"):
        how = col.mechanism if col.model is None else f"{col.model}, {col.mechanism}"
        print(f"[dpsynth] column {j + 1}/{k} {col.name!r} ({how}; epsilon {eps_j:.4g})",
              file=sys.stderr, flush=True)  # fmt: skip


VERDICT_MISSING = "dpsynth.curator.table_verdict is not installed"


def table_verdict_of(frame: pd.DataFrame, synthetic: pd.DataFrame, spec: TableSpec) -> dict:
    """The curator's table verdict (confidential) on the first synthetic set:
    :func:`dpsynth.curator.table_verdict.table_verdict` on the spec's columns that have public
    bounds or levels (:func:`verdict_columns`); "unavailable" (with the reason) when it
    cannot be computed."""
    try:
        from dpsynth.curator.table_verdict import table_verdict
    except ImportError:
        return {"verdict": "unavailable", "reason": VERDICT_MISSING}
    columns = verdict_columns(spec, len(frame))
    analysis = None if spec.analysis is None else spec.analysis.formula
    try:
        return table_verdict(frame, synthetic, columns, analysis)  # a partition at a time
    except (InputError, ValueError, KeyError) as exc:  # a verdict never blocks a release
        return {"verdict": "unavailable", "reason": str(exc)}


def _verdict_sums(spec: TableSpec, n: int) -> Callable[[], Any] | None:
    """How the release makes the confidential table's verdict sums (None: the verdict's
    module is not installed)."""
    try:
        from dpsynth.curator.table_verdict import TableSums, describe
    except ImportError:
        return None
    analysis = None if spec.analysis is None else spec.analysis.formula
    return lambda: TableSums(describe(verdict_columns(spec, n)), n, "confidential", analysis)


def _release_verdict(read: gather.Gathered, table: SyntheticTable) -> dict:
    """:func:`table_verdict_of` from the confidential table's sums, gathered as it was read
    (:func:`dpsynth.table.gather.gathered`), and the first synthetic set's, added a partition
    at a time as it is published (:meth:`~dpsynth.table.published.SyntheticTable.set_parts`)."""
    if read.sums is None:
        return {"verdict": "unavailable", "reason": read.sums_reason or VERDICT_MISSING}
    from dpsynth.curator.table_verdict import summed_parts, verdict_of

    conf = read.sums
    try:
        parts = table.set_parts(0)
        return verdict_of(
            conf, summed_parts(conf.columns, parts, table.n, "synthetic", conf.formula)
        )
    except (InputError, ValueError, KeyError) as exc:  # a verdict never blocks a release
        return {"verdict": "unavailable", "reason": str(exc)}


def verdict_columns(spec: TableSpec, n: int) -> dict[str, dict[str, Any]]:
    """The table verdict's columns: the spec's with public bounds or levels, in synthesis
    order (public first), as :func:`dpsynth.curator.table_verdict.describe` reads them."""
    columns: dict[str, dict[str, Any]] = {}
    order = spec.order()
    for c in [*spec.public, *spec.confidential]:
        if c.type in ("continuous", "count") and c.bounds is None:
            continue  # a public column without public bounds has no public bins
        conf = isinstance(c, ConfidentialColumn) and registry.model_free(c.mechanism)
        columns[c.name] = {
            "type": c.type,
            "bounds": c.bounds,
            "levels": getattr(c, "public_levels", c.levels),
            "public": isinstance(c, PublicColumn),
            "mechanism": getattr(c, "mechanism", None),
            "given": [p.name for p in ph_parents(c, order[: order.index(c)], spec.public)]
            if conf
            else None,
            "calibrated": conf and c.calibrate_share > 0,
            "fit_records": subsample_size(c, spec.fit_records, n)
            if isinstance(c, ConfidentialColumn)
            else None,
        }
    return columns


def _with_guarantee(verdict: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The table verdict with the table's guarantee; without DP, the NOT DP line (a release
    without a guarantee never reads as publishable, whatever its figures)."""
    from dpsynth.curator.column_verdict import not_dp_line

    guarantee = report["guarantee"]
    verdict = {**verdict, "guarantee": guarantee, "dp": guarantee == "DP"}
    if guarantee != "DP":
        verdict["not_dp"] = not_dp_line(guarantee)
    return verdict


REFERENCE_ADVICE = "a public reference (reference = ... in the spec), "
"""The advice's clause that names a reference: left out where the spec names one."""
DOWNSCALE_ADVICE = 'downscale = "auto" (a censored column\'s weights: fewer records at the bound), '
"""The advice's clause that names ``downscale = "auto"``, the preflight's remedy
(:func:`dpsynth.table.preflight.remedied`)."""
TABLE_CONVERGENCE_ADVICE = (
    f"give the column {DOWNSCALE_ADVICE}a larger share or the table a larger epsilon, "
    f"{REFERENCE_ADVICE}longer or more chains (iter_warmup, iter_sampling, "
    "chains), a higher step-size target (adapt_delta), another model (model in the spec) or "
    'mechanism = "ph" for a level column'
)
"""What a table's unconverged column may try: the table's own knobs, which the one-column
advice (its flags) does not name."""
TABLE_MULTIMODAL_ADVICE = (
    f"{MULTIMODAL_SAYS}, so longer or more chains will not help: give the column "
    f"{DOWNSCALE_ADVICE}a larger share or the table a larger epsilon, {REFERENCE_ADVICE}"
    "predecessors that explain it (its place in the order), another model (model in the "
    'spec), or mechanism = "ph" (a histogram on its public bounds or levels, no chains)'
)
"""The same for chains that settled in different modes (``diagnostics.multimodal``)."""


def table_convergence_note(note: str, column: str, reference: bool = False) -> str:
    """A column's convergence note (:func:`dpsynth.engine.diagnostics.convergence_note`) in the
    table's terms: the column named, the advice :data:`TABLE_MULTIMODAL_ADVICE` for chains
    in different modes, else :data:`TABLE_CONVERGENCE_ADVICE`, without
    :data:`REFERENCE_ADVICE` where the spec names a ``reference`` already."""
    split = note.index("]: ") + 3 if "]: " in note else len(note)
    multimodal = note[split:].startswith(MULTIMODAL_SAYS)
    advice = TABLE_MULTIMODAL_ADVICE if multimodal else TABLE_CONVERGENCE_ADVICE
    if reference:
        advice = advice.replace(REFERENCE_ADVICE, "")
    return f"column {column!r}: {note[:split]}{advice}"


def _with_convergence(
    verdict: dict[str, Any], releases: dict[str, Any], reference: bool = False
) -> dict[str, Any]:
    """The table verdict, poor where a column's fit did not converge (the release is made
    all the same: its outcome must not depend on the data), naming the first such column
    (the advice without a reference where the spec names one)."""
    notes = [
        table_convergence_note(r.diagnostics["utility"]["next_step"], name, reference)
        for name, r in releases.items()
        if r.diagnostics.get("utility", {}).get("converged") is False
    ]
    if not notes:
        return verdict
    reasons = [n[: n.index(": ")] + ": the MCMC fit did not converge" for n in notes]
    return {
        **verdict,
        "verdict": "poor",
        "converged": False,
        "next_step": notes[0],
        "convergence": notes,
        "reasons": reasons + list(verdict.get("reasons", [])),
    }


_COLUMN_REPORT_KEYS = (
    "mechanism",
    "model",
    "model_program_sha256",
    "guarantee",
    "guarantee_meaning",
    "epsilon",
    "epsilon_per_set",
    "epsilon_budgeted",
    "if_unseeded",
    "internal_bound",
    "tuning",
    "sampler",
    "backend",
    "noise",
    "ledger",
)


def _table_report(
    spec: TableSpec,
    releases: dict[str, Any],
    marginals: dict[str, Any],
    epsilon: float,
    m: int,
    seed: Any,
    n: int,
) -> dict[str, Any]:
    """The public report: guarantee, epsilon in total and per column, neighbours, columns."""
    from dpsynth.io import provenance as _provenance

    columns = []
    order = spec.order()
    for j, col in enumerate(order):
        rep = releases[col.name].report
        entry = {k: rep[k] for k in _COLUMN_REPORT_KEYS if k in rep}
        parents = ph_parents(col, order[:j], spec.public)
        entry.update(
            column=col.name,
            type=col.type,
            share=col.share,
            epsilon_allocated=col.share * epsilon,
            bounds=None if col.bounds is None else list(col.bounds),
            levels=None if col.levels is None else list(col.levels),
            predecessors=[c.name for c in order[:j]]
            if not registry.model_free(col.mechanism)
            else [p.name for p in parents],
            missingness_indicator_of=col.indicator_of,
        )
        if any(p.levels is None for p in parents):
            entry["given_bins"] = col.given_bins  # a continuous parent's public bins
        if parents and col.levels is None:
            entry["bins"] = own_size(col)  # a continuous PH column's own public bins
        k = subsample_size(col, spec.fit_records, n)
        if k is not None:  # the fit's own epsilon, amplified to its part of the column's
            entry["fit_subsample"] = fit_subsample(k, n, col.fit_share * col.share * epsilon)
        if col.name in marginals:
            marg = marginals[col.name]
            entry.update(_calibration_entry(col, marg, entry, col.share * epsilon, parents))
        entry.update(_column_choices(col))
        if (k is not None or col.name in marginals) and entry.get("epsilon") is not None:
            entry.update(epsilon=col.share * epsilon, epsilon_per_set=col.share * epsilon / m)
        columns.append(entry)
    unseeded = [
        r.report.get("if_unseeded", r.report) for r in [*releases.values(), *marginals.values()]
    ]
    all_dp = all(r.get("guarantee") == "DP" for r in unseeded)
    total = math.fsum(c["epsilon_allocated"] for c in columns)
    guarantee = "DP" if all_dp else "not established"
    report = {
        "release": "whole table (sequential synthesis: each column a censored pseudo "
        "posterior or a perturbed histogram, given the columns before it)",
        "guarantee": guarantee,
        "guarantee_meaning": _TABLE_MEANING if all_dp else "no DP statement: a column has none",
        "epsilon": total if all_dp else None,
        "epsilon_per_column": {c["column"]: c["epsilon_allocated"] for c in columns},
        "composition": "sequential: the table's epsilon is the sum of its columns' epsilons; "
        "each column's m sets cost m times its per-set epsilon",
        "neighbours": spec.neighbours,
        "neighbours_meaning": accounting.NEIGHBOUR_MEANING[spec.neighbours],
        "m": m,
        "n_records": n,
        "public_columns": [c.name for c in spec.public],
        "public_columns_meaning": PUBLIC_COPIED,
        "confidential_columns": columns,
        "missing_values": MISSING_MEANING,
        "drawn": drawn_meaning(n),
        "analysis": None if spec.analysis is None else spec.analysis.formula,
        "seed": "user-supplied (release NOT private)" if seed is not None else "operating system",
        **_provenance(),
    }
    if seed is not None:
        report["if_unseeded"] = {k: report[k] for k in ("guarantee", "epsilon")}
        report.update(guarantee="not private (known seed)", epsilon=None, epsilon_budgeted=total)
        report["guarantee_meaning"] = accounting.GUARANTEES["not private (known seed)"]
    return report


def drawn_meaning(n: int) -> str:
    """How a table of n records is drawn (public: from n alone)."""
    if isinstance(synthesis.step_rows(n), slice):
        return "every set drawn whole, each column's post-processing steps at all its records"
    return (
        f"a pilot of {synthesis.DRAW_ROWS:,d} public random records (fixed by n alone) drawn "
        "first, every column's post-processing steps (calibration, matched dispersion, "
        "debias, a PH column's raked shares) taken there; then each partition of "
        f"{formats.PARTITION_RECORDS:,d} records drawn from the fits at those steps as it is "
        "published, a rank-mapped column onto its share of the histogram sample and a PH "
        "column without parents its share of its PH sample (each dealt without replacement): "
        "post-processing, no epsilon spent"
    )


DEBIAS_MEANING = (
    "each synthetic set's draw was moved by one parametric-bootstrap step: the shrinkage "
    "the same censored objective shows on data simulated from the draw at the set's public "
    "design was added back (dpsynth.models.debias; post-processing of the draw and public inputs, "
    "no epsilon spent)"
)


CALIBRATION_MEANING = (
    "the column's synthetic values, drawn from its model, were mapped by rank onto a sample "
    "of a Laplace-perturbed histogram of its marginal on the public bins (epsilon on all "
    "records with a value): the model's order, the histogram's marginal; the column's "
    "epsilon is the fit's plus the histogram's"
)


DISPERSION_MEANING = (
    "before the rank map, each synthetic set was drawn with the model's coefficients and the "
    "dispersion (a beta regression's precision; a negative binomial's, with its intercept "
    "moved to the histogram's mean) whose values at the set's design have the histogram "
    "sample's variance (calibrate_dispersion; post-processing)"
)
FIXED_DISPERSION_MEANING = (
    "the censored fit's dispersion was fixed at its centre's value (a fit to public inputs "
    "only), so the fit drew the coefficients alone; " + DISPERSION_MEANING
)


LEVEL_CALIBRATION_MEANING = (
    "the column's level model was centred at its fit to a sample of a Laplace-perturbed "
    "histogram of its levels (public inputs only), and each synthetic set was drawn at "
    "intercepts moved so that its mean level probabilities equal that histogram's shares (the "
    "model's slopes, the histogram's marginal); the column's epsilon is the fit's plus the "
    "histogram's"
)


PREFLIGHT_DOWNSCALE_MEANING = (
    'downscale = "auto", set by the preflight: on the public reference the column\'s fit did '
    "not converge with the spec's weights and converged with these (a choice from public data "
    "only)"
)
"""What the report says of a column the preflight's remedy gave ``downscale = "auto"``
(:func:`dpsynth.table.preflight.preflight`)."""


def _column_choices(col: ConfidentialColumn) -> dict[str, str]:
    """A column's public choices for the report: the rule that chose its mechanism (where the
    spec names none), a model column's centring (with the rule, where ``"auto"`` chose it)
    and its debias step."""
    out = {"debias": DEBIAS_MEANING} if col.debias else {}
    if col.mechanism_auto:
        out["mechanism_rule"] = DEFAULT_MECHANISM_MEANING
    if not registry.model_free(col.mechanism):
        out["centring"] = col.centring
        out["clamp"] = f"{col.clamp}: {relations.CLAMP_MEANING[col.clamp]}"
    if col.spread is not None:
        out["spread"] = col.spread
    if col.centring_auto:
        out["centring_rule"] = AUTO_CENTRING_MEANING
    if col.downscale_by_preflight:
        out["downscale_rule"] = PREFLIGHT_DOWNSCALE_MEANING
    return out


def _marginal_meaning(col: ConfidentialColumn) -> str:
    if registry.model_free(col.mechanism):
        return PH_CALIBRATION
    if col.levels is not None:
        return LEVEL_CALIBRATION_MEANING
    return CALIBRATION_MEANING if col.calibrate_bins is not None else CENTRING_MEANING


CENTRING_MEANING = (
    "the column's censored fit was centred at its model fitted to a sample of a "
    "Laplace-perturbed histogram of its marginal on public cells (epsilon on all records with "
    "a value) beside the public and synthetic columns: public inputs only; the column's "
    "epsilon is the fit's plus the histogram's"
)


def _calibration_entry(
    col: ConfidentialColumn,
    marg: Any,
    entry: dict[str, Any],
    eps_j: float,
    parents: list[ConfidentialColumn],
) -> dict[str, Any]:
    """A calibrated column's report additions: the histogram's bins and epsilon, its ledger
    spends after the fit's (a PH column's: after its joint histogram's)."""
    fit_ledger, marg_ledger = entry.get("ledger") or {}, marg.report.get("ledger") or {}
    ledger = {
        key: math.fsum([fit_ledger.get(key, 0.0), marg_ledger.get(key, 0.0)])
        for key in ("total", "spent", "remaining")
    }
    ledger["spends"] = [*fit_ledger.get("spends", []), *marg_ledger.get("spends", [])]
    calibration = {
        "mechanism": "ph",
        "bins": _histogram_bins(col),
        "epsilon": col.calibrate_share * eps_j,
        "epsilon_of_the_fit": col.fit_share * eps_j,
        "used_for": _marginal_uses(col),
        "meaning": _marginal_meaning(col),
    }
    if registry.model_free(col.mechanism):  # public: the spec's share and the parents' cells
        calibration["weight_on_own_histogram"] = ph_calibration_weight(
            n_cells(col, parents), col.calibrate_share
        )
    if col.calibrate_dispersion:
        fixed = _fixes_dispersion(col)
        calibration["dispersion"] = FIXED_DISPERSION_MEANING if fixed else DISPERSION_MEANING
    return {"calibration": calibration, "ledger": ledger}


def _histogram_bins(col: ConfidentialColumn) -> int:
    """The cells of a column's marginal histogram: a PH column's own cells, else
    :func:`marginal_cells`."""
    if registry.model_free(col.mechanism):
        return own_size(col)
    cells = marginal_cells(col)
    return cells.get("n_bins") or int(cells["bounds"][1] - cells["bounds"][0]) + 1


def _marginal_uses(col: ConfidentialColumn) -> list[str]:
    """What a column's marginal histogram served: calibration (rank map; a level column's
    intercepts; a PH column's raking), centring, or both."""
    calibrated = (
        col.calibrate_bins is not None
        or col.levels is not None
        or registry.model_free(col.mechanism)
    )
    uses = ["calibration"] if calibrated else []
    return [*uses, "centring"] if col.centring == "marginal" else uses


_TABLE_MEANING = (
    "epsilon-DP for the whole table under substitution of one record: each confidential "
    "column is an epsilon_j-DP censored posterior draw (or a Laplace histogram) whose design "
    "holds record i's values in row i only, scaled by public bounds (a column with "
    "fit_subsample: its fit on a random subsample, amplified; a column with a marginal "
    "histogram (calibration or a marginal centring): its fit, or its joint histogram, and a "
    "Laplace histogram of its marginal, their epsilons summing to epsilon_j); synthesizing "
    "from the synthetic predecessors is post-processing; the epsilons add up (book: A "
    "whole table)"
)


def _table_diagnostics(
    spec: TableSpec,
    releases: dict[str, Any],
    marginals: dict[str, Any],
    clipped: dict[str, int],
    seed: Any,
) -> dict[str, Any]:
    """The confidential diagnostics: per column its release's diagnostics and clipped count."""
    from dpsynth.release.single import CONFIDENTIAL_BANNER

    def without_banner(release: Any) -> dict[str, Any]:
        return {k: v for k, v in release.diagnostics.items() if k != "confidential"}

    columns = {}
    for col in spec.order():
        diag = without_banner(releases[col.name])
        diag["n_clipped_to_bounds"] = clipped[col.name]
        if "utility" in diag:
            diag["column_verdict_at_confidential_predecessors"] = diag.pop("utility")
        if col.name in marginals:
            diag["calibration_histogram"] = without_banner(marginals[col.name])
        columns[col.name] = diag
    return {"confidential": CONFIDENTIAL_BANNER, "seed": seed, "columns": columns}


__all__ = [
    "TABLE_SAMPLER",
    "resolved_spec",
    "synthesize_table",
]
