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
  (:func:`dpsynth.privacy.censor_bound`, :func:`dpsynth.privacy.histogram_sensitivity`).

A :class:`Release` keeps apart what may be published (``data``, ``report``) and what may
not (``diagnostics``: the seed, draws-based Lipschitz bounds, censored and zero-weight
counts, MCMC diagnostics, the local epsilon of the aDP mechanisms). :meth:`Release.write`
writes every file atomically: all of them or none.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import json
import math
import os
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import __version__, budget, privacy, safeguards
from dpsynth.diagnostics import (  # noqa: F401  (re-exported: the release policy lives there)
    CONVERGENCE,
    converged,
    convergence_failures,
    convergence_refusal,
)
from dpsynth.errors import (
    InputError,
    require_choice,
    require_finite_positive,
    require_m,
    require_sane_epsilon,
)
from dpsynth.histogram import perturbed_histogram, ph_bins
from dpsynth.mechanisms import (
    GUARANTEE,
    MECHANISMS,
    Result,
    Sampler,
    Synthesizer,
)
from dpsynth.models import Model

SET_COLUMN = "synthetic_set"
ALL_MECHANISMS = (*MECHANISMS, "ph", "sbs")
"""A strict-DP posterior release needs max R-hat <= 1.01, min bulk ESS >= 100 and no
divergent transitions (dpsynth's thresholds; the proofs assume exact posterior draws)."""

CONFIDENTIAL_BANNER = (
    "CONFIDENTIAL: computed from the confidential data without noise. Do not publish."
)


class KnownSeedWarning(UserWarning):
    """A release made with a user-supplied seed is reproducible, hence not private."""


class ConvergenceError(InputError):
    """A strict-DP release whose MCMC diagnostics do not meet :data:`CONVERGENCE`."""


@dataclass
class Release:
    """Synthetic data, the public report, and the confidential diagnostics, kept apart.

    ``data`` holds synthetic records only (plus public covariates, when the model has
    them, as the report says). ``report`` is safe to publish. ``diagnostics`` is not: it
    is computed from the confidential data without noise. ``confidential`` keeps the
    fitted result in memory (weights, record bounds) for plots; it is never written.
    """

    data: pd.DataFrame
    report: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    confidential: Result | None = None

    def write(
        self,
        out_csv: str | Path,
        report_json: str | Path,
        diagnostics_json: str | Path | None = None,
    ) -> None:
        """Write the files atomically: every one of them, or (on any failure) none."""
        jobs: list[tuple[Path, Callable[[str], None]]] = [
            (Path(out_csv), lambda p: self.data.to_csv(p, index=False)),
            (Path(report_json), lambda p: Path(p).write_text(to_json(self.report))),
        ]
        if diagnostics_json is not None:
            jobs.append(
                (Path(diagnostics_json), lambda p: Path(p).write_text(to_json(self.diagnostics)))
            )
        atomic_write_all(jobs)


def to_json(obj: Any) -> str:
    """Strict JSON (no NaN or Infinity: they become null)."""
    return json.dumps(_finite(obj), indent=2, allow_nan=False) + "\n"


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    return obj


def atomic_write_all(jobs: list[tuple[Path, Callable[[str], None]]]) -> None:
    """Write each file to a hidden temporary beside it, then rename all; clean up on failure.

    Signals (Ctrl-C, SIGTERM turned into SystemExit by the CLI) also remove the temporaries.
    """
    for path, _ in jobs:
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory: nothing was written")
    temps: list[tuple[str, Path]] = []
    try:
        for path, writer in jobs:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
            os.close(fd)
            temps.append((tmp, path))
            writer(tmp)
        for tmp, path in temps:
            os.replace(tmp, path)
        temps = []
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)


def os_seed() -> int:
    """A fresh seed from the operating system's entropy (never published)."""
    return secrets.randbits(63)


def synthesize(
    y: Any,
    *,
    model: str | Model = "beta",
    mechanism: str = "censor-uw",
    epsilon: float = 5.0,
    m: int = 1,
    neighbours: str = "substitution",
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
    **tuning: Any,
) -> Release:
    """Release m synthetic sets of ``y`` under a total privacy budget ``epsilon``.

    ``mechanism`` is one of :data:`ALL_MECHANISMS`. ``X`` (numeric design, no intercept)
    and ``covariates`` (the same covariates as given, written beside the synthetic
    outcome) are public predictors. ``reference`` (and ``reference_X``) is a public or
    earlier-period database from which ``censor-w`` computes its weights (censoring
    paper, Section 4.5); without it ``censor-w`` has no DP guarantee. ``seed`` makes a
    research run reproducible and the release non-private (a warning says so); by
    default every seed comes from the operating system. ``tuning`` passes mechanism
    knobs (``c``, ``g``, ``radius``, ``reweight``, ``k``, ``downscale``,
    ``target_lipschitz``, ``n_bins``, ``centring`` for censor-w/censor-uw (dpsynth's
    extension, :func:`dpsynth.models.record_centre`), and the SBS options).

    ``clip_to_bounds`` clamps records outside the public ``bounds`` to them (otherwise
    such records are refused); how many were clamped goes to the confidential
    diagnostics. Every release's diagnostics hold the curator's utility verdict
    (:func:`dpsynth.curator.utility_verdict`: synthetic against confidential, never
    published). ``public_utility`` (an epsilon slice of the total) also publishes noised
    utility figures in the report (:func:`public_utility_figures`); the sets then share
    ``epsilon - public_utility``.

    ``epsilon`` above :data:`dpsynth.errors.EPSILON_SANITY_LIMIT` is refused unless
    ``allow_large_epsilon`` (the report then says what such an epsilon means).
    ``budget_file`` (a path, or a :class:`dpsynth.budget.Charge` its caller made before
    reading the data) charges ``epsilon`` to the dataset's privacy-budget ledger BEFORE any
    record is looked at (:func:`dpsynth.budget.charge`; ``budget_total``: the cap of a new
    file; ``dataset_sha256``: the dataset's identity, by default a hash of ``y`` and ``X``)
    and records the outcome; the report cites the entry. ``drop_missing`` drops records
    with a missing outcome (needs the public ``n_synthetic``, no covariates; the count goes
    to the diagnostics; :data:`dpsynth.privacy.DROPPED_RECORDS_MAP`). ``public_files``
    (name -> SHA-256 of a public file used, e.g. a reference) is stated in the report.
    """
    require_choice("mechanism", mechanism, ALL_MECHANISMS)
    epsilon = privacy.require_epsilon("epsilon", epsilon)
    require_sane_epsilon("epsilon", epsilon, allow_large_epsilon)
    eps_utility = _utility_slice(public_utility, epsilon, bounds, neighbours)
    m = require_m(m)
    require_choice("neighbours", neighbours, privacy.NEIGHBOURS)
    if n_synthetic is not None:
        n_synthetic = require_m(n_synthetic, "n_synthetic")
    if neighbours == "add-remove":
        if n_synthetic is None:
            raise InputError(
                "n_synthetic",
                "add-remove neighbours make n private: give the number of synthetic "
                "records as a public number",
            )
        if X is not None:
            raise InputError(
                "neighbours",
                "a regression's covariates are public, so n is public: use substitution",
            )
    _check_unused_tuning(mechanism, tuning, reference)
    tuning = safeguards.check_drop_missing(drop_missing, mechanism, X, n_synthetic, bounds, tuning)
    if clip_to_bounds and bounds is None:
        raise InputError("clip_to_bounds", "needs public bounds")
    charge = safeguards.charge_budget(
        budget_file, budget_total, dataset_sha256, epsilon, f"{mechanism} m={m}", (y, X)
    )
    owned = charge if not isinstance(budget_file, budget.Charge) else None
    with budget.attempt(owned):  # the outcome is recorded, whatever happens next
        y, n_dropped = safeguards.missing_outcome(y, column, drop_missing)
        y, n_clipped = _clipped(y, bounds, clip_to_bounds)
        if bounds is not None:
            from dpsynth.models import require_within_bounds

            require_within_bounds("y", y, privacy.require_public_bounds(bounds))
        safeguards.require_complete_covariates(X, covariates)
        release = _release(
            y,
            model=model,
            mechanism=mechanism,
            epsilon=epsilon,
            eps_utility=eps_utility,
            m=m,
            neighbours=neighbours,
            X=X,
            covariates=covariates,
            bounds=bounds,
            n_synthetic=n_synthetic,
            seed=seed,
            column=column,
            sampler=sampler,
            reference=reference,
            reference_X=reference_X,
            allow_unconverged=allow_unconverged,
            progress=progress,
            clip_to_bounds=clip_to_bounds,
            n_clipped=n_clipped,
            public_utility=public_utility,
            tuning=tuning,
        )
        safeguards.add_fields(release, epsilon, charge, drop_missing, n_dropped, public_files)
    return release


def _release(
    y: Any,
    *,
    model: str | Model,
    mechanism: str,
    epsilon: float,
    eps_utility: float,
    m: int,
    neighbours: str,
    X: np.ndarray | None,
    covariates: pd.DataFrame | None,
    bounds: tuple[float, float] | None,
    n_synthetic: int | None,
    seed: int | None,
    column: str,
    sampler: Sampler | None,
    reference: Any,
    reference_X: np.ndarray | None,
    allow_unconverged: bool,
    progress: bool,
    clip_to_bounds: bool,
    n_clipped: int,
    public_utility: float | None,
    tuning: dict[str, Any],
) -> Release:
    """The release itself, once the budget is charged and the records checked."""
    known_seed = seed is not None
    if known_seed:
        warnings.warn(
            "a release made with a known seed is reproducible by anyone who has the seed "
            "and is therefore not private; omit the seed for a real release",
            KnownSeedWarning,
            stacklevel=3,
        )
        seed = int(seed)
    else:
        seed = os_seed()
    req = _Request(
        y,
        model,
        mechanism,
        epsilon - eps_utility,
        m,
        neighbours,
        X,
        covariates,
        bounds,
        n_synthetic,
        seed,
        known_seed,
        column,
        sampler,
        reference,
        reference_X,
        allow_unconverged,
        progress,
        tuning,
    )
    ledger = privacy.BudgetLedger(epsilon, param="epsilon")
    result = None
    if mechanism == "ph":
        frame, report, diag = _ph(req, ledger)
    elif mechanism == "sbs":
        frame, report, diag = _sbs(req, ledger)
    else:
        frame, report, diag, result = _posterior(req, ledger)
    sets = frame[column].to_numpy(dtype=float).reshape(m, -1)
    extra = diag.pop(EXTRA_SETS, None)  # confidential, for the verdict only: never stored
    if eps_utility:
        report["public_utility"] = public_utility_figures(
            req.y, sets, bounds, eps_utility, ledger, req.noise_rng()
        )
        if report.get("epsilon") is not None:
            report["epsilon"] = epsilon
    if known_seed:
        report = _known_seed(report)
    report = {
        **report,
        **safeguards.public_inputs(column, X, covariates, bounds),
        "neighbours": neighbours,
        "neighbours_meaning": privacy.NEIGHBOUR_MEANING[neighbours],
        "ledger": ledger.to_dict(),
        "seed": "user-supplied (release NOT private)" if known_seed else "operating system",
        **copy.deepcopy(_provenance()),
    }
    diagnostics = {"confidential": CONFIDENTIAL_BANNER, "seed": seed, **diag}
    if clip_to_bounds:
        diagnostics["n_clipped_to_bounds"] = n_clipped
    diagnostics["utility"] = _verdict(req, sets, extra, report, diag)
    return Release(frame, report, diagnostics, result)


EXTRA_SETS = "_verdict_extra_sets"
"""Key under which a mechanism hands the release its extra, never published synthetic sets
(:data:`dpsynth.curator.EXTRA_DRAWS`); popped before the diagnostics are stored."""

_EXTRA_SOURCE = {
    "ph": "fresh Laplace noise on the confidential histogram: published, they would spend "
    "budget; unpublished, they only make this confidential verdict steadier",
    "sbs": "fresh noise on the confidential statistics: published, they would spend "
    "budget; unpublished, they only make this confidential verdict steadier",
}


def _verdict(
    req: _Request, sets: np.ndarray, extra: np.ndarray | None, report: dict, diag: dict
) -> dict:
    """The curator's utility verdict (confidential), for every mechanism: the published
    sets plus the mechanism's extra unpublished draws."""
    from dpsynth import curator

    if req.mechanism in ("ph", "sbs"):
        integer = bool(req.tuning.get("integer")) or req.tuning.get("data_type") == "binary"
        outcome = "count" if integer else "real"
    else:
        outcome = _model_outcome(req.model)
    if extra is not None and np.size(extra) and np.shape(extra)[1] == sets.shape[1]:
        sets = np.vstack([sets, extra])
    centring = req.tuning.get("centring")
    try:
        return curator.utility_verdict(
            np.asarray(req.y, dtype=float),
            sets,
            n_published=req.m,
            extra_source=_EXTRA_SOURCE.get(req.mechanism, "other retained posterior draws"),
            centring="reference" if isinstance(centring, dict) else centring,
            reference_weights=req.mechanism == "censor-w" and req.reference is not None,
            outcome=outcome,
            X=req.X,
            n_censored=diag.get("n_censored"),
            n_zero_weight=diag.get("n_zero_weight"),
            mechanism=req.mechanism,
            model=report.get("model"),
            bounds=req.bounds,
            guarantee=report.get("guarantee"),
        )
    except (InputError, ValueError) as exc:  # a verdict never blocks a release
        return {"verdict": "unavailable", "reason": str(exc)}


def _extra_draws() -> int:
    from dpsynth.curator import EXTRA_DRAWS

    return EXTRA_DRAWS


def _model_outcome(model: str | Model) -> str:
    from dpsynth.models import get_model

    return get_model(model).outcome


def _clipped(y: Any, bounds: tuple[float, float] | None, clip: bool) -> tuple[Any, int]:
    """``y`` clamped to the public bounds when asked (the count is confidential)."""
    if not clip:
        return y, 0
    if bounds is None:
        raise InputError("clip_to_bounds", "needs public bounds")
    lo, hi = privacy.require_public_bounds(bounds)
    arr = np.asarray(y, dtype=float)
    clipped = np.clip(arr, lo, hi)
    return clipped, int(np.sum(clipped != arr))


def _utility_slice(
    eps: float | None, epsilon: float, bounds: tuple[float, float] | None, neighbours: str
) -> float:
    """Validate the epsilon slice of :func:`public_utility_figures` (0: none)."""
    if eps is None:
        return 0.0
    eps = require_finite_positive("public_utility", eps)
    if not eps < epsilon:
        raise InputError("public_utility", f"must be below the total epsilon {epsilon:g}")
    if bounds is None:
        raise InputError("public_utility", "needs public bounds (the mean's sensitivity)")
    if neighbours != "substitution":
        raise InputError("public_utility", "is defined for substitution neighbours only")
    return eps


def public_utility_figures(
    y: Any,
    sets: np.ndarray,
    bounds: tuple[float, float],
    epsilon: float,
    ledger: privacy.BudgetLedger,
    rng: np.random.Generator | None,
) -> dict[str, Any]:
    """Noised utility figures a release may publish, at ``epsilon`` charged to the ledger.

    Half of ``epsilon`` noises the confidential mean (records clipped to the public
    ``bounds``; sensitivity (hi - lo)/n under substitution), half the m max-ECDF distances
    between each synthetic set and the confidential data (each changes by at most 1/n
    when one record is substituted, so the vector's l1 sensitivity is m/n). The synthetic
    sets are already public: given them, these are Laplace mechanisms on the data, and
    sequential composition charges ``epsilon`` on top of the sets'. Noise from OpenDP.
    """
    from dpsynth.utility import ecdf_measures

    lo, hi = bounds
    arr = np.clip(np.asarray(y, dtype=float), lo, hi)
    n, m = arr.size, sets.shape[0]
    half = epsilon / 2
    mean = privacy.laplace_mechanism(float(arr.mean()), (hi - lo) / n, half, rng)
    distances = np.array([ecdf_measures(arr, s)["max_ecdf"] for s in sets])
    noised = np.atleast_1d(privacy.laplace_mechanism(distances, m / n, half, rng))
    noised = np.clip(noised, 0.0, 1.0)  # a distance lies in [0, 1]: post-processing
    ledger.spend("public utility figures: noised mean", half, "all records")
    ledger.spend("public utility figures: noised max-ECDF per set", half, "all records")
    return {
        "epsilon": epsilon,
        "confidential_mean_noised": mean,
        "synthetic_mean_per_set": [float(np.mean(s)) for s in sets],
        "max_ecdf_noised_per_set": [float(v) for v in noised],
        "noise": "Laplace (OpenDP)" if rng is None else "numpy Laplace (seeded, NOT private)",
        "meaning": (
            "utility figures with Laplace noise, covered by the report's epsilon: the "
            "confidential mean (records clipped to the public bounds) and each set's largest "
            "ECDF distance to the confidential data"
        ),
    }


GUARANTEE_FIELDS = ("guarantee", "guarantee_meaning", "epsilon", "epsilon_per_set")


def _known_seed(report: dict[str, Any]) -> dict[str, Any]:
    """The report of a seeded (research) run: not private, whatever the mechanism.

    The mechanism's own guarantee fields move under ``if_unseeded``: what an
    operating-system-seeded run of the same settings would state.
    """
    out = dict(report)
    out["if_unseeded"] = {k: report[k] for k in GUARANTEE_FIELDS if k in report}
    out["guarantee"] = "not private (known seed)"
    out["guarantee_meaning"] = privacy.GUARANTEES["not private (known seed)"]
    out["epsilon"] = out["epsilon_per_set"] = None
    out["epsilon_budgeted"] = report.get("epsilon_budgeted", report.get("epsilon"))
    return out


@dataclass(frozen=True)
class _Request:
    """One release's validated settings, as :func:`synthesize` received them."""

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
    allow_unconverged: bool
    progress: bool
    tuning: dict[str, Any]

    @property
    def eps_set(self) -> float:
        """The budget of each of the m synthetic sets."""
        return self.epsilon / self.m

    def noise_rng(self) -> np.random.Generator | None:
        """None (OpenDP noise from the OS) unless the user asked for a seed."""
        return np.random.default_rng(self.seed) if self.known_seed else None


# ----------------------------------------------------------------------------- posterior mechanisms


def _posterior(req: _Request, ledger: privacy.BudgetLedger):
    """A posterior mechanism's release: fit, checks, guarantee, m draws, report."""
    mechanism, eps_set, m, neighbours, tuning = (
        req.mechanism,
        req.eps_set,
        req.m,
        req.neighbours,
        req.tuning,
    )
    syn = Synthesizer(
        req.y,
        req.model,
        X=req.X,
        bounds=req.bounds,
        seed=req.seed,
        sampler=req.sampler,
        progress=req.progress,
    )
    _check_centring(syn, tuning.get("centring"))
    pieces_checks = None
    if hasattr(syn.model, "public_precheck"):  # pieces (dpsynth.pieces): public inputs only
        pieces_checks = syn.model.public_precheck(syn, neighbours, req.seed)
    if syn.model.user_program:  # a whole user program: check its names before compiling
        from dpsynth.program_checks import check_convention

        check_convention(syn.model.stan_file)
    ref_alpha = None
    if mechanism == "censor-w" and req.reference is not None:
        ref_alpha = syn.reference_lw_alpha(
            req.reference, req.reference_X, c=tuning.get("c", 1.0), g=tuning.get("g", 0.0)
        )
    result = syn.run(mechanism, eps_set, neighbours=neighbours, alpha=ref_alpha, **tuning)
    program_checks = None
    if syn.model.user_program:  # a whole user program: tested, a warning layer
        from dpsynth.program_checks import check_program

        program_checks = check_program(
            syn,
            result.fit.data,
            result.fit.stan_fit,
            result.fit.censor_bound,
            seed=req.seed,
            neighbours=neighbours,
        )
    diag_fit = result.fit.stan_fit.diagnostics
    kind = result.guarantee
    if mechanism == "censor-w" and ref_alpha is None:
        kind = "none"
    caveats: list[str] = []
    if syn.model.user_program and kind == "DP":
        kind = "not established"
        caveats.append(USER_PROGRAM_CAVEAT)
    if kind == "DP" and not converged(diag_fit):
        if not req.allow_unconverged:
            centred = isinstance(tuning.get("centring"), dict)
            raise ConvergenceError("sampler", convergence_refusal(diag_fit, centred=centred))
        kind = "not established"
        caveats.append("MCMC convergence checks failed: the DP proof assumes exact draws")
    for j in range(1, m + 1):
        what = f"synthetic set {j}/{m}: one posterior draw ({mechanism})"
        ledger.spend(what, eps_set, "all records")
    sets = syn.synthesize(result, m, n_synthetic=req.n_synthetic)
    extra = syn.verdict_sets(result, m, _extra_draws(), n_synthetic=req.n_synthetic)
    frame = synthetic_frame(sets, req.column, syn.model.outcome == "count")
    if req.covariates is not None or req.X is not None:
        frame = _with_covariates(frame, req.covariates, req.X, m)
        caveats.append(
            "covariates are treated as public: each synthetic outcome is written beside the "
            "covariates of the record it was generated for"
        )
    if mechanism in ("censor-w", "censor-uw"):
        internal = {"censor_bound_M": result.fit.censor_bound, "epsilon_per_draw": eps_set}
    else:
        internal = {"epsilon_target_per_set": result.epsilon_target}
    report = {
        "mechanism": mechanism,
        "model": syn.model.name,
        "model_program_sha256": syn.model.program_hash(),
        **_guarantee_fields(kind, mechanism, eps_set, m, ref_alpha is not None),
        "internal_bound": internal,
        "n_records": int(sets.shape[1]),
        "m": m,
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
    if program_checks is not None:
        report["program_checks"] = program_checks
    if pieces_checks is not None:
        report["pieces_checks"] = pieces_checks
    diag = {
        "lipschitz_bound_draws": result.fit.lipschitz,
        "epsilon_local_draws": privacy.epsilon_of(result.fit.lipschitz, neighbours) * m,
        "n_censored": result.fit.n_censored,
        "n_zero_weight": int(result.n_zero_weight),
        "mcmc": dict(diag_fit),
        "tuning": result.tuning,
        EXTRA_SETS: extra,
    }
    return frame, report, diag, result


USER_PROGRAM_CAVEAT = (
    "a whole user Stan program: dpsynth tested it (program_checks) but cannot prove it is "
    "the mechanism it claims to be; write the model as pieces for a DP label"
)


class _Reads(dict):
    """A dict that records which keys were read (the names a model's mirror needs)."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.read.append(key)
        return super().__getitem__(key)


DESIGN_ORDER = (
    "the intercept first, then the covariates in the order given (--covariates), a "
    "categorical or text covariate as one 0/1 column per level but its first (levels "
    "sorted as text)"
)
"""The column order of a regression's design (``models.covariate_matrix`` and
``models.design_matrix``): the order of the coefficients ``beta``."""


def _check_centring(syn: Synthesizer, centring: Any) -> None:
    """Public reference values for centring, checked by name and shape against the model.

    The names are those the model's numpy mirror reads (for example ``beta1, beta2`` for
    the beta model, ``beta, kappa`` for beta regression); a regression's ``beta`` has one
    value per design column, in :data:`DESIGN_ORDER`.
    """
    if not isinstance(centring, dict) or syn.model.record_log_lik is None:
        return
    from dpsynth.models import design_matrix, stan_data

    data = stan_data(syn.model, syn.y, np.ones(syn.n), X=syn.X)
    try:
        values = {k: np.asarray(v, dtype=float)[None, ...] for k, v in centring.items()}
    except (TypeError, ValueError):
        raise InputError("centring", "every value must be a number or a list of numbers") from None
    reads = _Reads(values)
    try:
        syn.model.record_log_lik(reads, data)
    except KeyError as exc:
        raise InputError(
            "centring",
            f"needs a value for {exc.args[0]!r} (model {syn.model.name!r} reads "
            f"{', '.join(dict.fromkeys(reads.read))})",
        ) from None
    except (ValueError, IndexError):
        K = design_matrix(syn.n, syn.X).shape[1]
        raise InputError(
            "centring",
            f"the values do not fit model {syn.model.name!r}: a regression's beta needs "
            f"{K} values, {DESIGN_ORDER}",
        ) from None
    from dpsynth.engine import program_code
    from dpsynth.program_checks import declared_names, program_blocks

    blocks = program_blocks(program_code(syn.model.stan_file))
    declared = {
        name
        for block in ("parameters", "transformed parameters")
        for name in declared_names(blocks.get(block, ""))
    }
    extra = [k for k in centring if k not in reads.read and k not in declared]
    if extra:
        raise InputError(
            "centring",
            f"names no parameter of model {syn.model.name!r}: {', '.join(extra)} (it reads "
            f"{', '.join(dict.fromkeys(reads.read))})",
        )


def _guarantee_fields(kind: str, mechanism: str, eps_set: float, m: int, reference: bool):
    meaning = privacy.GUARANTEES[kind]
    if mechanism == "censor-w" and kind == "none":
        meaning = (
            "none: Censor_w clamps every contribution, but its weights were computed from "
            "the confidential data, and the censoring proof holds only for weights fixed "
            "in advance; give a reference database (--weights-from) for strict DP"
        )
    elif mechanism == "censor-w" and reference and kind == "DP":
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
    return {k: v for k, v in tuning.items() if k in privacy.PUBLIC_TUNING}


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


def _ph(req: _Request, ledger: privacy.BudgetLedger):
    """The perturbed histogram's release (censoring paper, supplement S1)."""
    n_bins = req.tuning.get("n_bins")
    integer = bool(req.tuning.get("integer", False))
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
    )
    k = n_bins if n_bins is not None else ph_bins(sets.shape[1], req.bounds, integer)
    internal = {
        "count_sensitivity_l1": privacy.histogram_sensitivity(req.neighbours),
        "n_bins": int(k),
        "bounds": list(req.bounds),
        "integer": integer,
    }
    report = _strict_report(req, "ph", None, internal, rng, int(sets.shape[1]), [])
    return synthetic_frame(sets, req.column, integer), report, {EXTRA_SETS: extra}


def _strict_report(
    req: _Request,
    mechanism: str,
    model: str | None,
    internal: dict[str, Any],
    rng: np.random.Generator | None,
    n_records: int,
    caveats: list[str],
) -> dict[str, Any]:
    """The public report of a noise-based strict-DP release (PH, SBS)."""
    return {
        "mechanism": mechanism,
        "model": model,
        "guarantee": "DP",
        "guarantee_meaning": privacy.GUARANTEES["DP"],
        "epsilon": req.epsilon,
        "epsilon_per_set": req.eps_set,
        "internal_bound": internal,
        "noise": "OpenDP Laplace" if rng is None else "numpy Laplace (seeded, NOT private)",
        "n_records": n_records,
        "m": req.m,
        "caveats": caveats,
    }


def _sbs(req: _Request, ledger: privacy.BudgetLedger):
    """modips.SBS's release (Liu, Algorithm 1 with Section 3.3's SBS)."""
    from dpsynth.modips import DATA_TYPES, modips, sbs_model

    y, bounds, m, tuning, column = req.y, req.bounds, req.m, req.tuning, req.column
    if req.neighbours != "substitution":
        raise InputError(
            "neighbours", "modips' sensitivities (1/n, (c1-c0)/n) assume n public: use substitution"
        )
    data_type = require_choice("data_type", tuning.get("data_type", "gaussian"), DATA_TYPES)
    known_sd = tuning.get("known_sd")
    sanitization = tuning.get("sanitization", "individualized")
    allocation = tuning.get("allocation")
    bounding = tuning.get("bounding", "bit")
    arr = np.asarray(y, dtype=float).ravel()
    if not np.all(np.isfinite(arr)) or arr.size == 0:
        raise InputError("y", "must be a non-empty column of finite numbers")
    if data_type == "binary":
        if not np.isin(arr, (0.0, 1.0)).all():
            raise InputError("y", "data_type binary needs 0/1 values")
        lo, hi = 0.0, 1.0
    else:
        if bounds is None:
            raise InputError("bounds", "public bounds LO HI are required for Gaussian data")
        lo, hi = privacy.require_public_bounds(bounds)
        if arr.size < 2:
            raise InputError("y", "Gaussian SBS needs at least 2 records")
        if known_sd is not None:
            known_sd = require_finite_positive("known_sd", known_sd)
    if allocation is not None:
        if data_type != "gaussian" or known_sd is not None or sanitization != "individualized":
            raise InputError(
                "allocation",
                "only applies to Gaussian data with unknown variance and individualized "
                "sanitization",
            )
        allocation = float(allocation)
        if not 0.0 < allocation < 1.0:
            raise InputError("allocation", f"must lie in (0, 1) (got {allocation!r})")
    w = 0.5 if allocation is None else allocation
    rng = req.noise_rng()
    model = sbs_model(
        data_type,
        bounds=(lo, hi),
        known_sd=known_sd,
        bounding=bounding,
        sanitization=sanitization,
        allocation=w,
        strict_truncation=True,
    )
    result = modips(arr, model, m, req.epsilon, rng, ledger=ledger, data_label="all records")
    frame = result.to_frame(column, SET_COLUMN)
    if m > 1:
        frame = frame[[SET_COLUMN, column]]
    if data_type == "binary":
        frame[column] = frame[column].astype(int)
    sanitized = [{"set": i, **d.sanitized} for i, d in enumerate(result.thetas, start=1)]
    internal = {
        "data_type": data_type,
        "bounds": [lo, hi],
        "bounding": bounding,
        "known_sd": known_sd,
        "sanitization": sanitization if data_type == "gaussian" and known_sd is None else None,
        "allocation": w if data_type == "gaussian" and known_sd is None else None,
        "budget_split_per_set": [
            {"statistic": what, "epsilon": e} for what, e in result.thetas[0].spends
        ],
    }
    caveats = (
        ["truncated statistics use Laplace noise at half budget (strict eps-DP)"]
        if bounding == "truncation"
        else []
    )
    report = _strict_report(req, "sbs", result.model, internal, rng, int(arr.size), caveats)
    report["sanitized_statistics"] = sanitized
    k = _extra_draws()  # unpublished fresh noise, for the confidential verdict only
    extra = modips(arr, model, k, req.eps_set * k, np.random.default_rng([req.seed, 3]))
    return frame, report, {EXTRA_SETS: np.vstack(extra.datasets)}


# ----------------------------------------------------------------------------- helpers


_MECHANISM_TUNING = {
    "unweighted": set(),
    "lw": {"c", "g", "reweight", "k"},
    "cw": {"radius", "c", "g", "reweight", "k"},
    "sw": {"target_lipschitz"},
    "weighted-e": {"c", "g", "truncation"},
    "censor-w": {"c", "g", "downscale", "centring", "reweight", "k"},
    "censor-uw": {"centring"},
    "ph": {"n_bins", "integer"},
    "sbs": {"data_type", "known_sd", "sanitization", "allocation", "bounding"},
}


def _check_unused_tuning(mechanism: str, tuning: dict[str, Any], reference: Any) -> None:
    """Refuse options the chosen mechanism would silently ignore."""
    for key, value in tuning.items():
        if value is None or value is False:
            continue
        if key not in _MECHANISM_TUNING[mechanism]:
            raise InputError(key, f"does not apply to the {mechanism} mechanism")
    if reference is not None and mechanism != "censor-w":
        raise InputError("reference", f"does not apply to the {mechanism} mechanism")


def synthetic_frame(sets: np.ndarray, column: str, integer: bool) -> pd.DataFrame:
    """Long frame of m synthetic sets; ``synthetic_set`` (1..m) first when m > 1."""
    m, n = sets.shape
    values = np.rint(sets).astype(np.int64) if integer else sets
    frame = pd.DataFrame({column: values.ravel()})
    if m > 1:
        frame.insert(0, SET_COLUMN, np.repeat(np.arange(1, m + 1), n))
    return frame


@functools.lru_cache(maxsize=1)
def _provenance() -> dict[str, Any]:
    return {
        "dpsynth_version": __version__,
        "versions": {
            p: _version(p) for p in ("numpy", "opendp", "pystan", "httpstan", "cmdstanpy")
        },
        "python": sys.version.split()[0],
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


__all__ = [
    "ALL_MECHANISMS",
    "CONVERGENCE",
    "GUARANTEE",
    "ConvergenceError",
    "KnownSeedWarning",
    "Release",
    "SET_COLUMN",
    "atomic_write_all",
    "converged",
    "synthesize",
    "synthetic_frame",
    "to_json",
]
