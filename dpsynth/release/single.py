"""One release path: every mechanism -> synthetic frame + public report + confidential diagnostics.

:func:`synthesize` is the only way the library (and the CLI) makes a release. It fixes
the meaning of the privacy parameters for every mechanism:

* ``epsilon`` is the **total** budget of the whole release. The m synthetic sets each get
  ``epsilon / m`` (sequential composition over m posterior draws, m histograms, m SBS
  samples alike) and the budget ledger in the report lists every spend.
* ``neighbours`` is ``"substitution"`` (default: n is public, one record is replaced) or
  ``"add-remove"`` (one record is added or removed; n is then private, so the number of
  synthetic records ``n_synthetic`` must be given as a public number). Each mechanism
  derives its internal bound from the per-set budget under that definition
  (:func:`dpsynth.privacy.accounting.censor_bound`, :func:`dpsynth.privacy.accounting.histogram_sensitivity`).

A :class:`Release` keeps apart what may be published (``data``, ``report``) and what may
not (``diagnostics``: the seed, draws-based Lipschitz bounds, censored and zero-weight
counts, MCMC diagnostics, the local epsilon of the aDP mechanisms). :meth:`Release.write`
writes every file atomically: all of them or none (:func:`dpsynth.io.atomic_write_all`).

This module orchestrates only: the mechanisms are declared in :mod:`dpsynth.mechanisms.registry` (each
names its runner, a function here, by a lazy ``"module:function"`` reference), files and provenance are
:mod:`dpsynth.io`'s, the convergence policy :mod:`dpsynth.engine.diagnostics`', the centring check
:mod:`dpsynth.models.centring`'s, SBS's settings :mod:`dpsynth.mechanisms.modips`' and the noise of public
utility figures :mod:`dpsynth.privacy.accounting`'s.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from dpsynth import entropy, formats, io
from dpsynth.engine.diagnostics import (  # noqa: F401  (re-exported: the release policy lives there)
    CONVERGENCE,
    converged,
    convergence_failures,
    convergence_note,
)
from dpsynth.errors import InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.histogram import CellCounts, perturbed_histogram, ph_bins
from dpsynth.mechanisms.posterior import Result, Synthesizer
from dpsynth.models.catalogue import Model
from dpsynth.models.centring import check_centring
from dpsynth.privacy import accounting, budget
from dpsynth.release import public_utility, safeguards
from dpsynth.release.settings import ScalarSettings
from dpsynth.sampler import Sampler

SET_COLUMN = "synthetic_set"
ALL_MECHANISMS: tuple[str, ...] = registry.NAMES
"""Every mechanism :func:`synthesize` accepts, as declared in :mod:`dpsynth.mechanisms.registry`."""

CONFIDENTIAL_BANNER = (
    "CONFIDENTIAL: computed from the confidential data without noise. Do not publish."
)


class KnownSeedWarning(UserWarning):
    """A release made with a user-supplied seed is reproducible, hence not private."""


@dataclass
class Release:
    """Synthetic data, the public report, and the confidential diagnostics, kept apart.

    ``data`` holds synthetic records only (plus public covariates, when the model has
    them, as the report says). ``report`` is safe to publish. ``diagnostics`` is not: it
    is computed from the confidential data without noise. ``confidential`` keeps the
    fitted result in memory (weights, record bounds) for plots; it is never written. A whole
    table's release (:func:`dpsynth.table.pipeline.synthesize_table`) is of this type
    (:class:`dpsynth.table.published.TableRelease`: its ``data`` made from the synthetic sets
    when first read, and written a partition at a time), its ``confidential`` each column's
    result by name.
    """

    data: pd.DataFrame
    report: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    confidential: Result | dict[str, Result | None] | None = None

    def write(
        self,
        out_csv: str | Path,
        report_json: str | Path,
        diagnostics_json: str | Path | None = None,
    ) -> None:
        """Write the files atomically: every one of them, or (on any failure) none."""
        jobs: list[tuple[Path, Callable[[str], None]]] = [
            (
                Path(out_csv),
                lambda p: self.write_data(p, formats.output_format(out_csv)),
            ),
            (Path(report_json), lambda p: Path(p).write_text(io.to_json(self.report))),
        ]
        if diagnostics_json is not None:
            jobs.append(
                (Path(diagnostics_json), lambda p: Path(p).write_text(io.to_json(self.diagnostics)))
            )
        io.atomic_write_all(jobs)

    def write_data(self, path: str | Path, fmt: str) -> None:
        """The synthetic data to ``path`` as ``fmt`` (``"csv"`` or ``"parquet"``)."""
        formats.write_table(self.data, path, fmt)


# ----------------------------------------------------------------------------- settings


UNCONVERGED_DEPRECATION = (
    "allow_unconverged has no effect: once the confidential data are read, a release is never "
    "refused or relabelled for its fit's convergence (the convergence goes to the confidential "
    "diagnostics and the curator's verdict)"
)
"""Why ``allow_unconverged`` is accepted and ignored (kept so that old scripts run)."""


@dataclass
class ReleaseSettings:
    """One release's settings, as :func:`synthesize` received them (its keywords).

    :meth:`validate` checks every one that needs no data, once, in a fixed order (the first
    problem is the one refused), and fills in what follows from them. What they mean:

    * ``mechanism`` is one of :data:`ALL_MECHANISMS`; ``tuning`` holds its options (those
      its declaration in :mod:`dpsynth.mechanisms.registry` lists: ``c``, ``g``, ``radius``,
      ``reweight``, ``k``, ``downscale``, ``target_lipschitz``, ``n_bins``, ``centring`` for
      censor-w/censor-uw (dpsynth's extension, :func:`dpsynth.models.centring.record_centre`), the
      SBS options); any other option is refused, not ignored.
    * ``neighbours``: None means the mechanism's default relation
      (:data:`dpsynth.privacy.relations.DEFAULT_NEIGHBOURS`). Under ``"add-remove"`` n is private, so
      ``n_synthetic`` must be given as a public number, and a regression is refused.
    * ``X`` (numeric design, no intercept) and ``covariates`` (the same covariates as given,
      written beside the synthetic outcome) are public predictors. ``reference`` (and
      ``reference_X``) is a public or earlier-period database from which ``censor-w``
      computes its weights (censoring paper, Section 4.5); without it ``censor-w`` has no DP
      guarantee.
    * ``seed`` makes a research run reproducible and the release non-private (a warning
      says so); by default every seed comes from the operating system.
    * ``clip_to_bounds`` clamps records outside the public ``bounds`` to them (otherwise
      such records are refused; the count goes to the confidential diagnostics).
    * ``public_utility`` (an epsilon slice of the total) also publishes noised utility
      figures in the report (:func:`dpsynth.release.public_utility.public_utility_figures`); the sets then
      share ``epsilon - public_utility`` (``eps_utility`` once validated, 0.0 without).
    * ``epsilon`` above :data:`dpsynth.errors.EPSILON_SANITY_LIMIT` is refused unless
      ``allow_large_epsilon`` (the report then says what such an epsilon means).
    * ``allow_unconverged`` is deprecated and has no effect: once the data are read a
      release is never refused nor relabelled for its fit's convergence, which goes to the
      confidential diagnostics and the curator's verdict (``book/threat_model.md``).
    * ``budget_file`` (a path, or a :class:`dpsynth.privacy.budget.Charge` its caller made before
      reading the data) charges ``epsilon`` to the dataset's privacy-budget ledger BEFORE
      any record is looked at (:func:`dpsynth.privacy.budget.charge`; ``budget_total``: the cap of a
      new file; ``dataset_sha256``: the dataset's identity, by default a hash of ``y`` and
      ``X``) and records the outcome; the report states the charge, the diagnostics the
      entry and the totals.
    * ``drop_missing`` drops records with a missing outcome (needs the public
      ``n_synthetic``; the count goes to the diagnostics;
      :data:`dpsynth.privacy.accounting.DROPPED_RECORDS_MAP`); in a regression it drops records with
      a missing (public) covariate instead, a public selection stated in the report, and a
      missing outcome stays refused. ``public_files`` (name -> SHA-256 of a
      public file used, e.g. a reference) is stated in the report.
    * ``centring_from`` (and ``centring_from_X``, its design) is a public reference file's
      outcome: censor-w/censor-uw are then centred at the posterior mean of the model fitted
      to it (:func:`dpsynth.release.reference.reference_point`, the sampler's settings with
      its default step-size target), instead of at ``centring`` values given.

    :meth:`validate` checks what needs no record through :class:`ScalarSettings`, before
    :func:`synthesize` charges the budget.
    """

    model: str | Model
    mechanism: str
    epsilon: float
    m: int
    neighbours: str | None
    X: np.ndarray | None
    covariates: pd.DataFrame | None
    bounds: tuple[float, float] | None
    n_synthetic: int | None
    seed: int | None
    column: str
    sampler: Sampler | None
    reference: Any
    reference_X: np.ndarray | None
    allow_unconverged: bool
    progress: bool
    clip_to_bounds: bool
    public_utility: float | None
    allow_large_epsilon: bool
    budget_file: str | Path | budget.Charge | None
    budget_total: float | None
    dataset_sha256: str | None
    drop_missing: bool
    public_files: dict[str, str] | None
    centring_from: Any
    centring_from_X: np.ndarray | None
    tuning: dict[str, Any]
    eps_utility: float = 0.0

    def validate(self) -> ReleaseSettings:
        """Check the settings (no data needed), fill in their defaults; return ``self``."""
        checked = self.scalar().validate()
        self.neighbours, self.epsilon, self.m = checked.neighbours, checked.epsilon, checked.m
        self.n_synthetic, self.eps_utility = checked.n_synthetic, checked.eps_utility
        self.tuning = safeguards.check_drop_missing(
            self.drop_missing, self.mechanism, self.X, self.n_synthetic, self.bounds, self.tuning
        )
        if self.allow_unconverged:
            warnings.warn(UNCONVERGED_DEPRECATION, DeprecationWarning, stacklevel=4)
        return self

    def scalar(self) -> ScalarSettings:
        """The settings that need no record, as :class:`ScalarSettings` checks them."""
        given = (("reference", self.reference), ("centring_from", self.centring_from))
        return ScalarSettings(
            self.mechanism, self.epsilon, self.m, self.neighbours, self.n_synthetic, self.seed,
            self.bounds, self.clip_to_bounds, self.public_utility, self.allow_large_epsilon,
            self.drop_missing, regression=self.X is not None,
            inputs=tuple(name for name, value in given if value is not None),
            tuning=self.tuning,
        )  # fmt: skip


# ----------------------------------------------------------------------------- the release


def synthesize(
    y: Any,
    *,
    model: str | Model = "beta",
    mechanism: str = "censor-uw",
    epsilon: float = 5.0,
    m: int = 1,
    neighbours: str | None = None,
    X: np.ndarray | None = None,
    covariates: pd.DataFrame | None = None,
    bounds: tuple[float, float] | None = None,
    n_synthetic: int | None = None,
    seed: int | None = None,
    column: str = "y",
    sampler: Sampler | None = None,
    reference: Any = None,
    reference_X: np.ndarray | None = None,
    allow_unconverged: bool = False,
    progress: bool = False,
    clip_to_bounds: bool = False,
    public_utility: float | None = None,
    allow_large_epsilon: bool = False,
    budget_file: str | Path | budget.Charge | None = None,
    budget_total: float | None = None,
    dataset_sha256: str | None = None,
    drop_missing: bool = False,
    public_files: dict[str, str] | None = None,
    centring_from: Any = None,
    centring_from_X: np.ndarray | None = None,
    **tuning: Any,
) -> Release:
    """Release m synthetic sets of ``y`` under a total privacy budget ``epsilon``.

    The keywords are a :class:`ReleaseSettings` (which says what each means), validated
    before any record is read; then the budget is charged, the records are checked against
    the public bounds, the mechanism's runner (named by its declaration in
    :mod:`dpsynth.mechanisms.registry`, ``Mechanism.runner``) makes the sets, and the report, the ledger and the curator's
    utility verdict (:func:`dpsynth.curator.column_verdict.utility_verdict`: synthetic against
    confidential, in the confidential diagnostics) are assembled.
    """
    keywords = dict(locals())  # the first statement: exactly the keywords above
    del keywords["y"]
    s = ReleaseSettings(**keywords).validate()
    _require_counts_release(y, s)
    what = f"{s.mechanism} m={s.m}"
    records = y.counts if isinstance(y, CellCounts) else y
    charge = safeguards.charge_budget(
        s.budget_file, s.budget_total, s.dataset_sha256, s.epsilon, what, (records, s.X)
    )
    owned = charge if not isinstance(s.budget_file, budget.Charge) else None
    with budget.attempt(owned):  # the outcome is recorded, whatever happens next
        if isinstance(y, CellCounts):  # checked on their public bounds when made
            return _counts_release(y, s, charge)
        if s.centring_from is not None:  # a public file: fitted before any record is read
            s.tuning = {**s.tuning, "centring": _reference_centre(s)}
        regression = s.X is not None
        n_dropped = 0
        if s.drop_missing and regression:  # public covariates: a public selection
            y, s.X, s.covariates, n_dropped = safeguards.drop_incomplete_covariates(
                y, s.X, s.covariates
            )
        y, n_out = safeguards.missing_outcome(y, s.column, s.drop_missing, regression)
        n_dropped += n_out
        y, n_clipped = _clipped(y, s.bounds, s.clip_to_bounds)
        if s.bounds is not None:
            from dpsynth.models.catalogue import require_within_bounds

            require_within_bounds("y", y, accounting.require_public_bounds(s.bounds))
        safeguards.require_complete_covariates(s.X, s.covariates)
        with _centring_named_by_its_source(s):
            release = _release(y, settings=s, n_clipped=n_clipped)
        safeguards.add_fields(release, s.epsilon, charge, s.drop_missing, n_dropped, s.public_files)
    return release


def _require_counts_release(y: Any, s: ReleaseSettings) -> None:
    """Records given as :class:`CellCounts` are read by a mechanism declared to read counts
    (the perturbed histogram), with ``integer`` on their public bounds, and nothing that
    needs the records themselves."""
    if not isinstance(y, CellCounts):
        return
    if not registry.takes_counts(s.mechanism) or not s.tuning.get("integer"):
        raise InputError(
            "y", f"counts are released with integer=True by {_counts_mechanisms()} only"
        )
    if s.bounds is None or (float(s.bounds[0]), float(s.bounds[1])) != (y.lo, y.hi):
        raise InputError("bounds", f"must be the counts' own bounds ({y.lo}, {y.hi})")
    if s.eps_utility or s.clip_to_bounds or s.drop_missing:
        raise InputError("y", "counts take no public_utility, clip_to_bounds or drop_missing")


def _counts_mechanisms() -> str:
    return ", ".join(n for n in registry.MECHANISMS if registry.takes_counts(n))


def _counts_release(y: CellCounts, s: ReleaseSettings, charge: Any) -> Release:
    """The release of integer records given as their counts (no record to check or drop)."""
    release = _release(y, settings=s, n_clipped=0)
    safeguards.add_fields(release, s.epsilon, charge, s.drop_missing, 0, s.public_files)
    return release


def _reference_centre(s: ReleaseSettings) -> dict[str, Any]:
    """``centring_from``: the posterior mean of the model fitted to the public reference
    file, on the release's design (the sampler's settings, quiet, default step-size target)."""
    import sys

    from dpsynth.release.reference import reference_point

    if s.progress:
        print("[dpsynth] fitting the model to the public reference file", file=sys.stderr)
    sampler = dataclasses.replace(
        s.sampler or Sampler(), adapt_delta=Sampler.adapt_delta, quiet=True
    )
    return reference_point(
        s.centring_from, s.model, bounds=s.bounds, reference_X=s.centring_from_X, X=s.X,
        sampler=sampler,
    )  # fmt: skip


@contextlib.contextmanager
def _centring_named_by_its_source(s: ReleaseSettings) -> Iterator[None]:
    """A refusal of centring values fitted to ``centring_from`` names that parameter (the
    caller never gave ``centring``)."""
    try:
        yield
    except InputError as exc:
        if exc.param != "centring" or s.centring_from is None:
            raise
        raise InputError(
            "centring_from", f"the values fitted to the public reference file: {exc.message}"
        ) from None


@dataclass(frozen=True)
class Request:
    """What a mechanism's runner receives: the checked records and the release's settings.

    ``epsilon`` is the budget of the m sets (the total less the public utility slice).
    """

    y: Any
    model: str | Model
    mechanism: str
    epsilon: float
    m: int
    neighbours: str
    X: np.ndarray | None
    covariates: pd.DataFrame | None
    bounds: tuple[float, float] | None
    n_synthetic: int | None
    seed: int
    known_seed: bool
    column: str
    sampler: Sampler | None
    reference: Any
    reference_X: np.ndarray | None
    progress: bool
    tuning: dict[str, Any]
    drop_missing: bool = False  # records dropped: how many were kept is private

    @classmethod
    def of(cls, y: Any, s: ReleaseSettings, seed: int, known_seed: bool) -> Request:
        """The request of validated settings ``s`` for the records ``y``."""
        return cls(
            y, s.model, s.mechanism, s.epsilon - s.eps_utility, s.m, str(s.neighbours), s.X,
            s.covariates, s.bounds, s.n_synthetic, seed, known_seed, s.column, s.sampler,
            s.reference, s.reference_X, s.progress, s.tuning,
            s.drop_missing,
        )  # fmt: skip

    @property
    def eps_set(self) -> float:
        """The budget of each of the m synthetic sets."""
        return self.epsilon / self.m

    def noise_rng(self) -> np.random.Generator | None:
        """None (OpenDP noise from the OS) unless the user asked for a seed."""
        return np.random.default_rng(self.seed) if self.known_seed else None


class RunnerOutput(NamedTuple):
    """What a runner returns: the synthetic frame, its part of the public report, its part of
    the confidential diagnostics (its unpublished sets under ``EXTRA_SETS``) and, for a
    posterior fit, the fitted result (kept in memory, never written)."""

    frame: pd.DataFrame
    report: dict[str, Any]
    diagnostics: dict[str, Any]
    result: Result | None = None


def _seed(seed: int | None) -> tuple[int, bool]:
    """The seed of the release and whether the user gave it (a warning says what that means)."""
    if seed is None:
        return entropy.os_seed(), False
    warnings.warn(
        "a release made with a known seed is reproducible by anyone who has the seed "
        "and is therefore not private; omit the seed for a real release",
        KnownSeedWarning,
        stacklevel=4,
    )
    return int(seed), True


def _release(y: Any, *, settings: ReleaseSettings, n_clipped: int) -> Release:
    """The release itself, once the budget is charged and the records checked."""
    s = settings
    seed, known_seed = _seed(s.seed)
    req = Request.of(y, s, seed, known_seed)
    ledger = accounting.BudgetLedger(s.epsilon, param="epsilon")
    out = registry.get(s.mechanism).release_runner()(req, ledger)
    sets = out.frame[s.column].to_numpy(dtype=float).reshape(s.m, -1)
    extra = out.diagnostics.pop(EXTRA_SETS, None)  # confidential, for the verdict: never stored
    report = _public_report(req, s, out.report, sets, ledger)
    diagnostics = {"confidential": CONFIDENTIAL_BANNER, "seed": seed, **out.diagnostics}
    if s.clip_to_bounds:
        diagnostics["n_clipped_to_bounds"] = n_clipped
    diagnostics["utility"] = _verdict(req, sets, extra, report, out.diagnostics)
    return Release(out.frame, report, diagnostics, out.result)


def _public_report(
    req: Request,
    s: ReleaseSettings,
    report: dict[str, Any],
    sets: np.ndarray,
    ledger: accounting.BudgetLedger,
) -> dict[str, Any]:
    """The runner's report with the public utility figures, the seed's meaning, the public
    inputs, the neighbour relation, the ledger and the provenance."""
    if s.eps_utility:
        report["public_utility"] = public_utility.public_utility_figures(
            req.y, sets, s.bounds, s.eps_utility, ledger, req.noise_rng()
        )
        if report.get("epsilon") is not None:
            report["epsilon"] = s.epsilon
    if req.known_seed:
        report = _known_seed(report)
    return {
        **report,
        **safeguards.public_inputs(s.column, s.X, s.covariates, s.bounds),
        "neighbours": req.neighbours,
        "neighbours_meaning": accounting.NEIGHBOUR_MEANING[req.neighbours],
        "ledger": ledger.to_dict(),
        "seed": "user-supplied (release NOT private)" if req.known_seed else "operating system",
        **copy.deepcopy(io.provenance()),
    }


EXTRA_SETS = "_verdict_extra_sets"
"""Key under which a mechanism hands the release its extra, never published synthetic sets
(:data:`dpsynth.curator.column_verdict.EXTRA_DRAWS`); popped before the diagnostics are stored."""


def _verdict(
    req: Request, sets: np.ndarray, extra: np.ndarray | None, report: dict, diag: dict
) -> dict:
    """The curator's utility verdict (confidential), for every mechanism: the published
    sets plus the mechanism's extra unpublished draws."""
    from dpsynth.curator import column_verdict

    spec = registry.get(req.mechanism)
    if extra is not None and np.size(extra) and np.shape(extra)[1] == sets.shape[1]:
        sets = np.vstack([sets, extra])
    centring = req.tuning.get("centring")
    try:
        verdict = column_verdict.utility_verdict(
            req.y if isinstance(req.y, CellCounts) else np.asarray(req.y, dtype=float),
            sets,
            n_published=req.m,
            extra_source=spec.extra_source,
            centring="reference" if isinstance(centring, dict) else centring,
            reference_weights=spec.reference and req.reference is not None,
            outcome=_verdict_outcome(req, spec),
            X=req.X,
            n_censored=diag.get("n_censored"),
            n_zero_weight=diag.get("n_zero_weight"),
            mechanism=req.mechanism,
            model=report.get("model"),
            bounds=req.bounds,
            guarantee=report.get("guarantee"),
            epsilon=report.get("epsilon"),
            coef_names=None if req.X is None else safeguards.design_names(req.X, req.covariates),
        )
    except (InputError, ValueError) as exc:  # a verdict never blocks a release
        return {"verdict": "unavailable", "reason": str(exc)}
    mcmc = diag.get("mcmc")
    if mcmc is not None and not converged(mcmc):  # told to the curator, never a refusal
        note = convergence_note(mcmc, centred=isinstance(centring, dict))
        verdict = column_verdict.with_convergence(verdict, note)
    return verdict


def _verdict_outcome(req: Request, spec: registry.Mechanism) -> str:
    """The outcome type the verdict measures: the model's, or the noise mechanisms' options."""
    if spec.fits_model:
        return _model_outcome(req.model)
    integer = bool(req.tuning.get("integer")) or req.tuning.get("data_type") == "binary"
    return "count" if integer else "real"


def _extra_draws() -> int:
    from dpsynth.curator.column_verdict import EXTRA_DRAWS

    return EXTRA_DRAWS


def _model_outcome(model: str | Model) -> str:
    from dpsynth.models.catalogue import get_model

    return get_model(model).outcome


def _clipped(y: Any, bounds: tuple[float, float] | None, clip: bool) -> tuple[Any, int]:
    """``y`` clamped to the public bounds when asked (the count is confidential)."""
    if not clip:
        return y, 0
    if bounds is None:
        raise InputError("clip_to_bounds", "needs public bounds")
    lo, hi = accounting.require_public_bounds(bounds)
    arr = np.asarray(y, dtype=float)
    clipped = np.clip(arr, lo, hi)
    return clipped, int(np.sum(clipped != arr))


GUARANTEE_FIELDS = ("guarantee", "guarantee_meaning", "epsilon", "epsilon_per_set")


def _known_seed(report: dict[str, Any]) -> dict[str, Any]:
    """The report of a seeded (research) run: not private, whatever the mechanism.

    The mechanism's own guarantee fields move under ``if_unseeded``: what an
    operating-system-seeded run of the same settings would state.
    """
    out = dict(report)
    out["if_unseeded"] = {k: report[k] for k in GUARANTEE_FIELDS if k in report}
    out["guarantee"] = "not private (known seed)"
    out["guarantee_meaning"] = accounting.GUARANTEES["not private (known seed)"]
    out["epsilon"] = out["epsilon_per_set"] = None
    out["epsilon_budgeted"] = report.get("epsilon_budgeted", report.get("epsilon"))
    return out


# ----------------------------------------------------------------------------- posterior mechanisms


USER_PROGRAM_CAVEAT = (
    "a whole user Stan program: dpsynth tested it (program_checks) but cannot prove it is "
    "the mechanism it claims to be; write the model as pieces for a DP label"
)


@dataclass
class _Fitted:
    """A posterior mechanism's fit with the checks made before and after it."""

    syn: Synthesizer
    result: Result
    ref_alpha: np.ndarray | None
    pieces_checks: dict[str, Any] | None
    program_checks: dict[str, Any] | None


def _posterior(req: Request, ledger: accounting.BudgetLedger) -> RunnerOutput:
    """A posterior mechanism's release: fit, checks, guarantee, m draws, report."""
    f = _fit(req)
    syn, result, m = f.syn, f.result, req.m
    kind, caveats = _posterior_guarantee(req, f)
    for j in range(1, m + 1):
        what = f"synthetic set {j}/{m}: one posterior draw ({req.mechanism})"
        ledger.spend(what, req.eps_set, "all records")
    sets = syn.synthesize(result, m, n_synthetic=req.n_synthetic)
    extra = syn.verdict_sets(result, m, _extra_draws(), n_synthetic=req.n_synthetic)
    frame = synthetic_frame(sets, req.column, syn.model.outcome == "count")
    if req.covariates is not None or req.X is not None:
        frame = _with_covariates(frame, req.covariates, req.X, m)
        caveats.append(
            "covariates are treated as public: each synthetic outcome is written beside the "
            "covariates of the record it was generated for"
        )
    diag = {
        "lipschitz_bound_draws": result.fit.lipschitz,
        "epsilon_local_draws": accounting.epsilon_of(result.fit.lipschitz, req.neighbours) * m,
        "n_censored": result.fit.n_censored,
        "n_zero_weight": int(result.n_zero_weight),
        "mcmc": dict(result.fit.stan_fit.diagnostics),
        "stan_exceptions": int(sum(result.fit.stan_fit.exception_lines.values())),
        "tuning": result.tuning,
        EXTRA_SETS: extra,
    }
    return RunnerOutput(frame, _posterior_report(req, f, kind, caveats, sets), diag, result)


def _fit(req: Request) -> _Fitted:
    """The fit of a posterior mechanism, with the model's checks before and after it
    (centring values, pieces' public pre-check, a user program's convention and tests)."""
    tuning = req.tuning
    syn = Synthesizer(
        req.y,
        req.model,
        X=req.X,
        bounds=req.bounds,
        seed=req.seed,
        sampler=req.sampler,
        progress=req.progress,
    )
    check_centring(syn, tuning.get("centring"))
    pieces_checks = None
    if hasattr(syn.model, "public_precheck"):  # pieces (dpsynth.models.pieces): public inputs only
        # with records dropped, the number kept (n) is private whatever the relation
        scope = "add-remove" if req.drop_missing else req.neighbours
        pieces_checks = syn.model.public_precheck(syn, scope, req.seed)
    if syn.model.user_program:  # a whole user program: check its names before compiling
        from dpsynth.models.program_checks import check_convention

        check_convention(syn.model.stan_file)
    ref_alpha = None
    if registry.get(req.mechanism).reference and req.reference is not None:
        ref_alpha = syn.reference_lw_alpha(
            req.reference, req.reference_X, c=tuning.get("c", 1.0), g=tuning.get("g", 0.0)
        )
    result = syn.run(
        req.mechanism, req.eps_set, neighbours=req.neighbours, alpha=ref_alpha, **tuning
    )
    program_checks = None
    if syn.model.user_program:  # a whole user program: tested, a warning layer
        from dpsynth.models.program_checks import check_program

        fit = result.fit
        program_checks = check_program(
            syn, fit.data, fit.stan_fit, fit.censor_bound, seed=req.seed, neighbours=req.neighbours
        )
    return _Fitted(syn, result, ref_alpha, pieces_checks, program_checks)


def _posterior_guarantee(req: Request, f: _Fitted) -> tuple[str, list[str]]:
    """The guarantee a posterior release states, from public inputs only: its declaration's,
    less without reference weights or for a whole user program. The confidential fit's
    convergence never changes it and never refuses the release (its diagnostics go to the
    confidential diagnostics and the curator's verdict; ``book/threat_model.md``)."""
    kind = f.result.guarantee
    if registry.get(req.mechanism).reference and f.ref_alpha is None:
        kind = "none"
    caveats: list[str] = []
    if f.syn.model.user_program and kind == "DP":
        kind = "not established"
        caveats.append(USER_PROGRAM_CAVEAT)
    if kind == "DP":
        caveats.append(EXACT_DRAW_PREMISE)
    return kind, caveats


EXACT_DRAW_PREMISE = (
    "the guarantee is that of an exact draw from the censored posterior (the papers' "
    "premise); MCMC approximates it, and this release was made whatever its chains' "
    "convergence, which the curator was told confidentially"
)
"""The premise every posterior DP release states, whatever its data (a public constant)."""


def _posterior_report(
    req: Request, f: _Fitted, kind: str, caveats: list[str], sets: np.ndarray
) -> dict[str, Any]:
    """The public report of a posterior release."""
    syn, result = f.syn, f.result
    if registry.get(req.mechanism).bound_name == "censor_bound":
        internal = {"censor_bound_M": result.fit.censor_bound, "epsilon_per_draw": req.eps_set}
    else:
        internal = {"epsilon_target_per_set": result.epsilon_target}
    report = {
        "mechanism": req.mechanism,
        "model": syn.model.name,
        "model_program_sha256": syn.model.program_hash(),
        **_guarantee_fields(kind, req.mechanism, req.eps_set, req.m, f.ref_alpha is not None),
        "internal_bound": internal,
        "n_records": int(sets.shape[1]),
        "m": req.m,
        "tuning": _public_tuning(result.tuning),
        "sampler": {
            "chains": syn.sampler.chains,
            "iter_warmup": syn.sampler.iter_warmup,
            "iter_sampling": syn.sampler.iter_sampling,
            "adapt_delta": syn.sampler.adapt_delta,
        },
        "backend": result.fit.stan_fit.backend,
        "caveats": caveats,
    }
    if f.program_checks is not None:
        report["program_checks"] = f.program_checks
    if f.pieces_checks is not None:
        report["pieces_checks"] = f.pieces_checks
    return report


def _guarantee_fields(kind: str, mechanism: str, eps_set: float, m: int, reference: bool):
    """The guarantee, its meaning and the epsilon fields of a posterior release's report."""
    spec = registry.get(mechanism)
    meaning = accounting.GUARANTEES[kind]
    if spec.reference and kind == "none":
        meaning = (
            f"none: {spec.label} clamps every contribution, but its weights were computed "
            "from the confidential data, and the censoring proof holds only for weights "
            "fixed in advance; give a reference database (reference) for strict DP"
        )
    elif spec.reference and reference and kind == "DP":
        meaning += " (weights computed from the public reference database only)"
    if kind == "DP":
        return {
            "guarantee": "DP",
            "guarantee_meaning": meaning,
            "epsilon": eps_set * m,
            "epsilon_per_set": eps_set,
        }
    return {
        "guarantee": kind,
        "guarantee_meaning": meaning,
        "epsilon": None,
        "epsilon_per_set": None,
        "epsilon_budgeted": eps_set * m,
    }


def _public_tuning(tuning: dict[str, Any]) -> dict[str, Any]:
    """The user's settings only: anything searched on the data (the re-weighting k) is not."""
    return {k: v for k, v in tuning.items() if k in registry.PUBLIC_OPTIONS}


def _with_covariates(frame, covariates, X, m) -> pd.DataFrame:
    if covariates is None:
        Xa = np.asarray(X, dtype=float)
        Xa = Xa[:, None] if Xa.ndim == 1 else Xa
        covariates = pd.DataFrame(Xa, columns=[f"x{j + 1}" for j in range(Xa.shape[1])])
    cov = pd.concat([covariates.reset_index(drop=True)] * m, ignore_index=True)
    clash = [c for c in cov.columns if c in frame.columns]
    if clash:
        raise InputError("covariates", f"a covariate has the name of an output column: {clash}")
    return pd.concat([frame.reset_index(drop=True), cov], axis=1)


# ----------------------------------------------------------------------------- PH and SBS


def _ph(req: Request, ledger: accounting.BudgetLedger) -> RunnerOutput:
    """The perturbed histogram's release (censoring paper, supplement S1)."""
    n_bins = req.tuning.get("n_bins")
    integer = bool(req.tuning.get("integer", False))
    consistency = req.tuning.get("consistency", "clamp")
    draw = req.tuning.get("draw", "iid")
    rng = req.noise_rng()
    sets = perturbed_histogram(
        req.y,
        req.bounds,
        req.eps_set,
        rng,
        n_bins=n_bins,
        m=req.m,
        neighbours=req.neighbours,
        n_synthetic=req.n_synthetic,
        integer=integer,
        consistency=consistency,
        draw=draw,
    )
    for j in range(1, req.m + 1):
        what = f"synthetic set {j}/{req.m}: Laplace-noised histogram"
        ledger.spend(what, req.eps_set, "all records")
    extra = perturbed_histogram(  # unpublished fresh noise, for the confidential verdict only
        req.y,
        req.bounds,
        req.eps_set,
        np.random.default_rng([req.seed, 3]),
        n_bins=n_bins,
        m=_extra_draws(),
        neighbours=req.neighbours,
        n_synthetic=req.n_synthetic,
        integer=integer,
        consistency=consistency,
        draw=draw,
    )
    k = n_bins if n_bins is not None else ph_bins(sets.shape[1], req.bounds, integer)
    internal = {
        "count_sensitivity_l1": accounting.histogram_sensitivity(req.neighbours),
        "n_bins": int(k),
        "bounds": list(req.bounds),
        "integer": integer,
        "consistency": consistency,
        "draw": draw,
    }
    report = _strict_report(req, None, internal, rng, int(sets.shape[1]), [])
    return RunnerOutput(synthetic_frame(sets, req.column, integer), report, {EXTRA_SETS: extra})


def _strict_report(
    req: Request,
    model: str | None,
    internal: dict[str, Any],
    rng: np.random.Generator | None,
    n_records: int,
    caveats: list[str],
) -> dict[str, Any]:
    """The public report of a noise-based strict-DP release (PH, SBS)."""
    return {
        "mechanism": req.mechanism,
        "model": model,
        "guarantee": "DP",
        "guarantee_meaning": accounting.GUARANTEES["DP"],
        "epsilon": req.epsilon,
        "epsilon_per_set": req.eps_set,
        "internal_bound": internal,
        "noise": "OpenDP Laplace" if rng is None else "numpy Laplace (seeded, NOT private)",
        "n_records": n_records,
        "m": req.m,
        "caveats": caveats,
    }


def _sbs(req: Request, ledger: accounting.BudgetLedger) -> RunnerOutput:
    """modips.SBS's release (Liu, Algorithm 1 with Section 3.3's SBS)."""
    from dpsynth.mechanisms.modips import modips, sbs_settings

    arr, sbs = sbs_settings(req.y, req.bounds, req.neighbours, req.tuning)
    rng = req.noise_rng()
    model = sbs.model()
    result = modips(arr, model, req.m, req.epsilon, rng, ledger=ledger, data_label="all records")
    frame = result.to_frame(req.column, SET_COLUMN)
    if req.m > 1:
        frame = frame[[SET_COLUMN, req.column]]
    if sbs.data_type == "binary":
        frame[req.column] = frame[req.column].astype(int)
    internal = {
        "data_type": sbs.data_type,
        "bounds": list(sbs.bounds),
        "bounding": sbs.bounding,
        "known_sd": sbs.known_sd,
        "sanitization": sbs.sanitization if sbs.unknown_variance else None,
        "allocation": sbs.allocation if sbs.unknown_variance else None,
        "budget_split_per_set": [
            {"statistic": what, "epsilon": e} for what, e in result.thetas[0].spends
        ],
    }
    caveats = (
        ["truncated statistics use Laplace noise at half budget (strict eps-DP)"]
        if sbs.bounding == "truncation"
        else []
    )
    report = _strict_report(req, result.model, internal, rng, int(arr.size), caveats)
    report["sanitized_statistics"] = [
        {"set": i, **d.sanitized} for i, d in enumerate(result.thetas, start=1)
    ]
    k = _extra_draws()  # unpublished fresh noise, for the confidential verdict only
    extra = modips(arr, model, k, req.eps_set * k, np.random.default_rng([req.seed, 3]))
    return RunnerOutput(frame, report, {EXTRA_SETS: np.vstack(extra.datasets)})


# ----------------------------------------------------------------------------- helpers


def synthetic_frame(sets: np.ndarray, column: str, integer: bool) -> pd.DataFrame:
    """Long frame of m synthetic sets; ``synthetic_set`` (1..m) first when m > 1."""
    m, n = sets.shape
    values = np.rint(sets).astype(np.int64) if integer else sets
    frame = pd.DataFrame({column: values.ravel()})
    if m > 1:
        frame.insert(0, SET_COLUMN, np.repeat(np.arange(1, m + 1), n))
    return frame


__all__ = [
    "ALL_MECHANISMS",
    "CONVERGENCE",
    "KnownSeedWarning",
    "Release",
    "ReleaseSettings",
    "Request",
    "RunnerOutput",
    "SET_COLUMN",
    "converged",
    "synthesize",
    "synthetic_frame",
]
