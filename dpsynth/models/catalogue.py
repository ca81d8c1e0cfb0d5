"""Which ``.stan`` program a model name means, how its data are built, scaled and checked.

The shipped synthesizers follow the dpsynth Stan convention (see
``book/stan_convention.md``); so can any user program (``Model.from_stan_file``).
The names are the same in Stan, Python and the book: ``record_log_lik`` is the
unweighted per-record log-likelihood ll_i, ``contrib_uncensored`` is alpha_i ll_i
and ``contrib`` is the term that enters the target (alpha_i ll_i, clamped to
[-M, M] when censored).

For the shipped models two numpy mirrors of the program stand in for Stan output:

- ``Model.record_log_lik(draws, data)`` evaluates the ``S x n`` matrix of
  ``record_log_lik`` at the retained draws: PyStan ships generated quantities as
  JSON, which for n = 2000 and S = 4000 is 560 MB and 20+ s, against milliseconds
  in numpy;
- ``Model.simulate(draw, public, n_out, rng)`` draws one synthetic dataset (the
  program's ``y_rep``) at one retained draw, without a ``fixed_param`` round trip;
  :mod:`dpsynth.models.synthesis` calls it with the public inputs only (``X``, never ``y``).

``tests/test_models.py`` checks each mirror against the program's own output
(``record_log_lik``, ``contrib``, ``contrib_uncensored``; ``y_rep`` in
distribution). User programs get both from Stan (the mirrors are ``None``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, gammaln, logsumexp, softmax

from dpsynth.engine import STAN_DIR, program_code
from dpsynth.errors import InputError, count_first, from_data, require_bounds
from dpsynth.models.mirrors import (
    Draw,
    Draws,
    _beta_ll,
    _beta_regression_ll,
    _beta_regression_sim,
    _beta_sim,
    _eta,
    _gamma_ll,
    _gamma_regression_ll,
    _gamma_regression_sim,
    _gamma_sim,
    _linear_predictor,
    _lognormal_ll,
    _lognormal_regression_ll,
    _lognormal_regression_sim,
    _lognormal_sim,
    _negbin_ll,
    _negbin_sim,
    _param,
    _poisson_ll,
    _poisson_sim,
    _records,
)
from dpsynth.privacy import relations

RecordLogLik = Callable[[Draws, dict[str, Any]], np.ndarray]
Simulate = Callable[[Draw, Mapping[str, Any], int, np.random.Generator], np.ndarray]

OUTCOMES = ("unit", "count", "real", "positive")


@dataclass(frozen=True)
class Model:
    """A synthesizer: its Stan program, outcome type and optional numpy mirrors.

    ``outcome`` is ``"unit"`` (0 < y < 1), ``"count"`` (non-negative integers),
    ``"positive"`` (y > 0, or y in public bounds [lo, hi]: the log-normal and gamma models)
    or ``"real"`` (any finite value; user programs).

    ``centred`` says the program declares the data vector ``centre`` (centred censoring,
    dpsynth's extension: see :func:`record_centre`); every shipped program does.
    ``saturated(y)`` is the record's saturated log-likelihood, the supremum of ll over the
    parameter space (``None`` where that supremum is not finite, e.g. the beta models).

    ``dispersion`` names the program's dispersion parameter that a public value may fix
    (``kappa`` of beta_regression.stan, ``phi`` of negbin_regression.stan: the data entries
    ``<name>_fixed``, 1 to fix it, and ``<name>_known``); ``known_dispersion`` is that value
    (:meth:`with_known_dispersion`), ``None`` to fit it.

    ``spread_by_design`` is None for a program without that data entry, else its value: the
    log-normal regression's spread one sigma (False) or log-linear in the design (True,
    :meth:`with_spread`; a whole table's outcome column, ``dpsynth.table.spec.SPREADS``).

    ``clamps`` are the clamps (``dpsynth.privacy.relations.CLAMPS``) its program accepts as
    ``censor`` and ``clamp`` the one a censored fit uses (:meth:`with_clamp`; "hard", the
    paper's, unless a table's column chooses "smooth").

    ``record_log_lik(draws, data)`` returns the ``S x n`` unweighted per-record
    log-likelihood (the program's ``record_log_lik``), or is ``None`` to take it
    from Stan. ``simulate(draw, public, n_out, rng)`` returns ``n_out`` synthetic
    records on the Stan scale drawn from the posterior predictive at one retained
    draw (the program's ``y_rep``), or is ``None`` to run the program's generated
    quantities instead. Both are ``None`` for user programs.
    """

    name: str
    stan_file: Path
    outcome: str
    covariates: bool
    record_log_lik: RecordLogLik | None = None
    simulate: Simulate | None = None
    centred: bool = False
    saturated: Callable[[np.ndarray], np.ndarray] | None = None
    dispersion: str | None = None
    known_dispersion: float | None = None
    clamps: tuple[str, ...] = ("hard",)
    clamp: str = "hard"
    spread_by_design: bool | None = None

    def with_clamp(self, clamp: str) -> Model:
        """The same model whose censored fit bounds each term by ``clamp``
        (``dpsynth.privacy.relations.CLAMPS``), one its program accepts (``clamps``)."""
        if clamp not in self.clamps:
            raise InputError(
                "clamp", f"model {self.name!r} accepts {', '.join(self.clamps)} (got {clamp!r})"
            )
        return replace(self, clamp=clamp)

    def with_known_dispersion(self, value: float) -> Model:
        """The same model with its dispersion fixed at the PUBLIC ``value`` (> 0, finite):
        the fit then draws the coefficients alone (dpsynth's extension; a whole table's
        calibrated column, ``dpsynth.table.spec.DISPERSION_MATCHED_MODELS``)."""
        if self.dispersion is None:
            raise InputError("model", f"model {self.name!r} has no dispersion a value can fix")
        v = float(value)
        if not (np.isfinite(v) and v > 0):
            raise InputError(self.dispersion, f"a known dispersion must be positive (got {v})")
        return replace(self, known_dispersion=v)

    def with_spread(self, by_design: bool) -> Model:
        """The same model whose spread varies with the design (``by_design``) or is one sigma;
        only a program that declares ``spread_by_design`` (lognormal_regression.stan)."""
        if self.spread_by_design is None:
            raise InputError("spread", f"model {self.name!r} has one spread parameter")
        return replace(self, spread_by_design=bool(by_design))

    @property
    def user_program(self) -> bool:
        """True for a whole user program (``from_stan_file``): tested, never proved DP."""
        return self.record_log_lik is None

    def for_domain(self, bounds: tuple[float, float] | None) -> Model:
        """This model on the public ``bounds`` of its outcome (a pieces model needs them for
        its public grid, :meth:`dpsynth.models.pieces.PiecesModel.for_domain`; others ignore them)."""
        return self

    def fit_inputs(
        self, data: Mapping[str, Any], bounds: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """The data the program declares, from the convention's data dict (the same here;
        a pieces model renames its confidential entries, :mod:`dpsynth.models.pieces`)."""
        return dict(data)

    def log_lik_mirror(self) -> RecordLogLik | None:
        """The record log-likelihood at any draws (numpy mirror; None for user programs)."""
        return self.record_log_lik

    @classmethod
    def from_stan_file(cls, path: str | Path, outcome: str = "real") -> Model:
        """A user model following the dpsynth convention (``y`` plus, if declared, ``K``/``X``)."""
        p = Path(path)
        if not p.is_file():
            raise InputError("stan_file", f"no such file: {p}")
        if outcome not in OUTCOMES:
            raise InputError("outcome", f"must be one of {', '.join(OUTCOMES)} (got {outcome!r})")
        text = p.read_text()
        return cls(
            p.stem,
            p,
            outcome,
            covariates="matrix[n, K] X" in text,
            centred=re.search(r"vector\[n\]\s+centre\s*;", text) is not None,
        )

    def program_hash(self) -> str:
        """SHA-256 (hex) of the program text with its ``#include`` files inlined.

        This is the text that is compiled, so equal hashes mean the same model.
        """
        return hashlib.sha256(program_code(self.stan_file).encode("utf-8")).hexdigest()

    def to_stan_scale(self, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """Validate the outcome against the model's support and map it to the Stan scale.

        ``unit`` outcomes must satisfy 0 < y < 1 unless public ``bounds`` (lo, hi)
        are given, in which case y must lie in [lo, hi] and is mapped to
        (y - lo + pad) / (hi - lo + 2 pad), pad = min(0.5, 1e-6 (hi - lo))
        (``dpsynth.models.scaling.scale_to_unit``; never bounds
        read from the data). ``positive`` outcomes (log-normal, gamma) with public bounds are
        divided by hi when lo > 0 (a change of units: the model is of y itself), and mapped as
        ``unit`` ones when lo <= 0, so a record at the lower bound (an income of 0 with bounds
        [0, hi]) lands at 0.5 / (hi - lo + 1) > 0 and its log is finite
        (``dpsynth.models.scaling.positive_to_scale``); without bounds they
        must satisfy y > 0 and are used as they are. Counts must be non-negative integers
        and come back as int64. ``bounds`` only apply to ``unit`` and ``positive`` outcomes
        (for counts and real outcomes they are checked, every record must lie within them,
        and the synthetic records are clipped to them). Raises
        :class:`~dpsynth.errors.InputError` naming ``"y"`` or ``"bounds"``.
        """
        try:
            arr = np.asarray(y, dtype=float).ravel()
        except (TypeError, ValueError):
            raise InputError("y", "must be numeric") from None
        if arr.size == 0:
            raise InputError("y", "the data are empty")
        _first_bad("y", ~np.isfinite(arr), "is missing or infinite")
        lohi = _check_bounds(bounds)
        if lohi is not None:  # every outcome type: the public bounds are a promise
            require_within_bounds("y", arr, lohi)
        if self.outcome in ("unit", "positive"):
            if lohi is not None:
                from dpsynth.models.scaling import positive_to_scale, scale_to_unit

                to_scale = positive_to_scale if self.outcome == "positive" else scale_to_unit
                return np.asarray(to_scale(arr, *lohi), float)
            if self.outcome == "positive":
                _first_bad(
                    "y",
                    arr <= 0,
                    f"is not positive, which model {self.name!r} needs; give public bounds "
                    "(a record at the lower bound is then modelled just above it)",
                )
                return arr
            _first_bad(
                "y",
                (arr <= 0) | (arr >= 1),
                f"is outside (0, 1), which model {self.name!r} needs; give public bounds to rescale",
            )
        elif self.outcome == "count":
            _first_bad(
                "y", (arr < 0) | (arr != np.round(arr)), "is not a non-negative integer count"
            )
            _first_bad("y", arr > STAN_INT_MAX, "exceeds Stan's 32-bit integers (2,147,483,647)")
            return arr.astype(np.int64)
        return arr

    def from_stan_scale(self, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """Inverse of :meth:`to_stan_scale` for synthetic records (same shape).

        ``unit`` outcomes with public ``bounds`` go back through
        ``dpsynth.models.scaling.unscale_from_unit`` (into (lo - pad, hi + pad)); ``positive``
        outcomes through ``dpsynth.models.scaling.positive_from_scale``, clipped to [lo, hi]
        (a log-normal or gamma draw has no upper limit; clipping to public bounds is
        post-processing); counts come back as int64;
        anything else is returned as floats unchanged.
        """
        arr = np.asarray(y, dtype=float)
        lohi = _check_bounds(bounds)
        if self.outcome == "positive" and lohi is not None:
            from dpsynth.models.scaling import positive_from_scale

            return positive_from_scale(arr, *lohi)
        if self.outcome == "unit" and lohi is not None:
            from dpsynth.models.scaling import unscale_from_unit

            return np.asarray(unscale_from_unit(arr, *lohi), dtype=float)
        if self.outcome == "count":
            return np.rint(arr).astype(np.int64)
        return arr


STAN_INT_MAX = 2**31 - 1


def require_within_bounds(param: str, y: Any, bounds: tuple[float, float]) -> None:
    """Refuse records outside the public ``bounds`` [lo, hi], naming the first's position
    and how many there are (never a value); :func:`dpsynth.release.single.synthesize`'s
    ``clip_to_bounds`` clamps them instead."""
    lo, hi = bounds
    arr = np.asarray(y, dtype=float).ravel()
    _first_bad(
        param,
        (arr < lo) | (arr > hi),
        f"lies outside the public bounds [{lo:g}, {hi:g}] (pass clip_to_bounds=True to "
        "clamp such records to the bounds instead)",
    )


def clip_to_public_bounds(y: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    """Synthetic records clamped to the public ``bounds`` (post-processing; None: as they are).

    ``unscale_from_unit`` maps (0, 1) into (lo - pad, hi + pad) (the pad of
    ``scale_to_unit``), so a beta draw near 1 lands up to ``pad`` above hi; a count or a
    real draw has no upper limit at all.
    """
    if bounds is None:
        return y
    clipped = np.clip(y, *bounds)
    return clipped.astype(y.dtype) if np.issubdtype(y.dtype, np.integer) else clipped


def _first_bad(param: str, mask: np.ndarray, what: str) -> None:
    """Raise InputError naming the first offending record's position (never its value)."""
    bad = np.flatnonzero(mask)
    if bad.size:
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise InputError(param, f"{from_data(f'record {int(bad[0]) + 1}{more}')} {what}")


def _check_bounds(bounds: Any) -> tuple[float, float] | None:
    if bounds is None:
        return None
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise InputError("bounds", f"give exactly two numbers (lo, hi), got {bounds!r}") from None
    return require_bounds("bounds", lo, hi)


# --- centred censoring (dpsynth's extension, beyond the papers) ----------------------


def poisson_saturated_log_lik(y: Any) -> np.ndarray:
    """The saturated log-likelihood of a count: sup over mu > 0 of log Poisson(y | mu).

    Attained at mu = y: y log y - y - lgamma(y + 1), and 0 for y = 0 (the limit mu -> 0).
    dpsynth's extension (centred censoring); a function of the record alone.
    """
    y = np.asarray(y, dtype=float)
    return y * np.log(np.where(y > 0, y, 1.0)) - y - gammaln(y + 1)


def negbin_saturated_log_lik(y: Any) -> np.ndarray:
    """The saturated log-likelihood of a count under NB2: sup over (mu, phi) of ll.

    Equal to the Poisson saturated value :func:`poisson_saturated_log_lik`. Proof: NB2(y |
    mu, phi) is the Poisson(y | lambda) mixed over lambda ~ Gamma(shape phi, rate phi / mu),
    so it is at most sup_lambda Poisson(y | lambda) = Poisson(y | y); and at mu = y it tends
    to Poisson(y | y) as phi -> infinity (the gamma mixing collapses onto lambda = y). The
    supremum is a limit, not attained for finite phi. dpsynth's extension.
    """
    return poisson_saturated_log_lik(y)


MODELS: dict[str, Model] = {
    "beta": Model("beta", STAN_DIR / "beta.stan", "unit", False, _beta_ll, _beta_sim, centred=True),
    "poisson": Model(
        "poisson",
        STAN_DIR / "poisson.stan",
        "count",
        True,
        _poisson_ll,
        _poisson_sim,
        centred=True,
        saturated=poisson_saturated_log_lik,
    ),
    "negbin": Model(
        "negbin",
        STAN_DIR / "negbin.stan",
        "count",
        True,
        _negbin_ll,
        _negbin_sim,
        centred=True,
        saturated=negbin_saturated_log_lik,
    ),
    "beta-regression": Model(
        "beta-regression",
        STAN_DIR / "beta_regression.stan",
        "unit",
        True,
        _beta_regression_ll,
        _beta_regression_sim,
        centred=True,
        dispersion="kappa",
        clamps=("hard", "smooth"),
    ),
    # Positive skewed outcomes (dpsynth's models): ll is the log density of log y, free of
    # the scale of y (the programs' headers); public bounds divide y by hi when lo > 0, and
    # map it into (0, 1) as for beta when lo <= 0 (dpsynth.models.scaling.positive_to_scale).
    "lognormal": Model(
        "lognormal",
        STAN_DIR / "lognormal.stan",
        "positive",
        False,
        _lognormal_ll,
        _lognormal_sim,
        centred=True,
    ),
    "gamma": Model(
        "gamma", STAN_DIR / "gamma.stan", "positive", False, _gamma_ll, _gamma_sim, centred=True
    ),
    "lognormal-regression": Model(
        "lognormal-regression",
        STAN_DIR / "lognormal_regression.stan",
        "positive",
        True,
        _lognormal_regression_ll,
        _lognormal_regression_sim,
        centred=True,
        clamps=("hard", "smooth"),
        spread_by_design=False,
    ),
    "gamma-regression": Model(
        "gamma-regression",
        STAN_DIR / "gamma_regression.stan",
        "positive",
        True,
        _gamma_regression_ll,
        _gamma_regression_sim,
        centred=True,
        clamps=("hard", "smooth"),
    ),
}


TABLE_COUNT_MODELS: dict[str, Model] = {
    f"{name}-regression": replace(
        MODELS[name],
        name=f"{name}-regression",
        stan_file=STAN_DIR / f"{name}_regression.stan",
        dispersion=dispersion,
        clamps=("hard", "smooth"),
    )
    for name, dispersion in (("poisson", None), ("negbin", "phi"))
}
"""A table's count-column models, found by :func:`get_model` beside :data:`MODELS`
(``poisson-regression``, ``negbin-regression``): the papers' count likelihoods, mirrors and
simulators in dpsynth's programs with independent weakly informative priors (the programs'
headers), for a column's weak censored likelihood. Not one-column ``--model`` choices."""


def get_model(model: str | Model) -> Model:
    """Look a model up by name (a key of :data:`MODELS`: ``beta``, ``poisson``, ``negbin``,
    ``beta-regression``, ``lognormal``, ``gamma``, ``lognormal-regression``,
    ``gamma-regression``; of :data:`TABLE_COUNT_MODELS`: ``poisson-regression``,
    ``negbin-regression``; or of :data:`OUTCOME_MODELS`: ``logistic``, ``categorical``)."""
    if isinstance(model, Model):
        return model
    if model in OUTCOME_MODELS:  # binary and categorical outcomes, below
        return OUTCOME_MODELS[model]
    if model in TABLE_COUNT_MODELS:
        return TABLE_COUNT_MODELS[model]
    if model not in MODELS:
        names = ", ".join([*MODELS, *TABLE_COUNT_MODELS, *OUTCOME_MODELS])
        raise InputError("model", f"unknown model {model!r}; choose one of {names}")
    return MODELS[model]


def check_outcome(model: Model, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
    """Former name of :meth:`Model.to_stan_scale` (kept for compatibility)."""
    return get_model(model).to_stan_scale(y, bounds)


class PublicDesign(np.ndarray):
    """Covariates already on public scales (a whole table's design, :mod:`dpsynth.table.pipeline`):
    :func:`design_matrix` adds the intercept and never standardizes them by their values
    (a confidential predecessor's mean and sd would make every record's term depend on all)."""


def design_matrix(n: int, X: np.ndarray | None) -> np.ndarray:
    """Covariate matrix with an intercept column first (intercept-only when X is None).

    Covariates with more than two distinct values are centred and scaled to unit
    standard deviation (dummies are left as 0/1). The covariates are public
    predictors in the papers; standardizing them only reparameterizes the
    regression (same fitted means, same synthetic data) and spares NUTS the
    badly conditioned posterior that raw scales such as weeks worked (2-52) give.
    """
    ones = np.ones((n, 1))
    if X is None:
        return ones
    public_scaled = isinstance(X, PublicDesign)  # dpsynth.table.pipeline: scaled by public bounds
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] != n:
        raise InputError("X", f"has {X.shape[0]} rows, the outcome has {n}")
    if not np.all(np.isfinite(X)):
        raise InputError("X", "contains NaN or infinite values")
    X = X.copy()
    for j in range(0 if public_scaled else X.shape[1]):
        col = X[:, j]
        if np.unique(col).size > 2 and col.std() > 0:
            X[:, j] = (col - col.mean()) / col.std()
    return np.hstack([ones, X])


def transfer_beta(
    beta: np.ndarray, X_from: np.ndarray | None, X_to: np.ndarray | None
) -> np.ndarray:
    """Coefficients on the design of ``X_from`` re-expressed on the design of ``X_to``.

    :func:`dpsynth.models.catalogue.design_matrix` standardizes each non-binary covariate by its own
    mean and sd, so the same linear predictor has different coefficients on two databases;
    this maps through the raw scale (exact: both designs span the same affine functions).
    """
    beta = np.asarray(beta, dtype=float).copy()
    if X_from is None or X_to is None:
        return beta
    raw = beta.copy()
    A, B = np.asarray(X_from, float), np.asarray(X_to, float)
    for j in range(A.shape[1]):
        if np.unique(A[:, j]).size > 2 and A[:, j].std() > 0:
            raw[j + 1] = beta[j + 1] / A[:, j].std()
            raw[0] -= raw[j + 1] * A[:, j].mean()
    out = raw.copy()
    for j in range(B.shape[1]):
        if np.unique(B[:, j]).size > 2 and B[:, j].std() > 0:
            out[0] += raw[j + 1] * B[:, j].mean()
            out[j + 1] = raw[j + 1] * B[:, j].std()
    return out


def stan_data(
    model: Model,
    y: np.ndarray,
    alpha: np.ndarray,
    *,
    X: np.ndarray | None = None,
    censor_bound: float | None = None,
    want_contrib: bool = False,
    centre: np.ndarray | None = None,
) -> dict[str, Any]:
    """The data dict of the dpsynth convention for one fit.

    ``want_contrib`` asks the program for its generated ``contrib``,
    ``contrib_uncensored`` and ``record_log_lik`` (``S x n`` each); ``want_rep`` is
    0 (``engine.generate`` switches it on). ``centre`` (one value per record,
    :func:`record_centre`) is passed to programs that declare it (zeros when ``None``:
    the paper's mechanism); a program without it refuses a non-zero centre. A model with a
    fixable ``dispersion`` gets ``<dispersion>_fixed`` and ``<dispersion>_known`` (its
    ``known_dispersion``; fixed 0 to fit it); one with ``spread_by_design`` gets that flag.
    """
    alpha = np.asarray(alpha, dtype=float)
    if alpha.shape != (len(y),):
        raise InputError("alpha", f"needs one weight per record ({len(y)}), got {alpha.shape}")
    if not np.all((alpha >= 0) & (alpha <= 1)):
        raise InputError("alpha", "weights must lie in [0, 1]")
    data: dict[str, Any] = {
        "n": len(y),
        "alpha": alpha,
        "censor": relations.CLAMPS[model.clamp] if censor_bound is not None else 0,
        "M": float(censor_bound) if censor_bound is not None else 0.0,
        "want_contrib": int(want_contrib),
        "want_rep": 0,
        "y": y,
    }
    if centre is not None:
        centre = np.asarray(centre, dtype=float)
        if centre.shape != (len(y),) or not np.all(np.isfinite(centre)):
            raise InputError("centring", f"needs one finite centre per record ({len(y)})")
        if not model.centred and np.any(centre != 0):
            raise InputError("centring", f"program {model.name!r} does not declare `centre`")
    if model.centred:
        data["centre"] = np.zeros(len(y)) if centre is None else centre
    if model.covariates:
        Xd = design_matrix(len(y), X)
        data["K"], data["X"] = Xd.shape[1], Xd
    if model.spread_by_design is not None:
        data["spread_by_design"] = int(model.spread_by_design)
    if model.dispersion is not None:  # fixed 0: fitted (the papers' models)
        known = model.known_dispersion
        data[f"{model.dispersion}_fixed"] = int(known is not None)
        data[f"{model.dispersion}_known"] = 0.0 if known is None else float(known)
    return data


def covariate_matrix(
    frame: pd.DataFrame,
    covariates: str | None,
    categorical: str | None,
    allow_missing: bool = False,
) -> np.ndarray | None:
    """Numeric covariates as they are; text and ``categorical`` columns dummy-coded (first
    level dropped). A missing value is refused, naming the covariate and the count, or with
    ``allow_missing`` (``--drop-missing``) gives its record a row of NaN (the design of the
    complete records, whose levels alone are coded), for the release to drop."""
    if not covariates:
        return None
    cols = [c.strip() for c in covariates.split(",") if c.strip()]
    cats = {c.strip() for c in (categorical or "").split(",") if c.strip()}
    missing = [c for c in cols + sorted(cats) if c not in frame.columns]
    if missing:
        raise InputError("covariates", f"no column(s) {', '.join(missing)} in the input")
    complete = ~frame[cols].isna().any(axis=1).to_numpy()
    if allow_missing and not complete.all():
        X = covariate_matrix(frame.loc[complete], covariates, categorical)
        full = np.full((len(frame), X.shape[1]), np.nan)
        full[complete] = X
        return full
    for c in cols:
        missing = frame[c].isna().to_numpy()
        if missing.any():  # never coded as a level or a number
            raise InputError(
                "covariates",
                f"covariate {c!r} has missing values {from_data(count_first(missing, 'value'))}; "
                "missing covariates are never recoded: "
                "complete or remove them in the file, or drop such records (drop_missing)",
            )
    parts = []
    for c in cols:
        col = frame[c]
        if c in cats or not pd.api.types.is_numeric_dtype(col):
            parts.append(pd.get_dummies(col.astype(str), prefix=c, drop_first=True, dtype=float))
        else:
            parts.append(col.astype(float).to_frame())
    X = pd.concat(parts, axis=1).to_numpy(dtype=float)
    if not np.all(np.isfinite(X)):
        raise InputError("covariates", "contain NaN or infinite values")
    return X


def require_reference_levels(
    frame: pd.DataFrame,
    reference: pd.DataFrame,
    covariates: str | None,
    categorical: str | None,
    param: str,
) -> None:
    """Refuse a public reference file whose categorical covariates lack a level of the
    data's (or have one the data lack): the two designs would not have the same columns.

    Names the reference's flag (``param``), the covariate and the level."""
    cols = [c.strip() for c in (covariates or "").split(",") if c.strip()]
    cats = {c.strip() for c in (categorical or "").split(",") if c.strip()}
    for c in cols:
        if c not in reference.columns:
            raise InputError(param, f"has no covariate column {c!r}")
        text = not pd.api.types.is_numeric_dtype(frame[c])
        if c not in cats and not text and pd.api.types.is_numeric_dtype(reference[c]):
            continue
        ours = set(frame[c].dropna().astype(str))
        theirs = set(reference[c].dropna().astype(str))
        for lacking, where, other in (
            (ours - theirs, "lacks", "the data have"),
            (theirs - ours, "has", "the data lack"),
        ):
            if lacking:
                more = f" (and {len(lacking) - 1} more)" if len(lacking) > 1 else ""
                raise InputError(
                    param,
                    f"{where} level {sorted(lacking)[0]!r}{more} of categorical covariate {c!r} "
                    f"that {other}: the reference and the data need the same levels",
                )


def compile_all(
    models: tuple[str, ...] | None = None, workers: int = 2, heartbeat: float = 30.0
) -> None:
    """Compile the shipped programs once, ``workers`` at a time, each in its own process.

    Separate interpreters, one per program: distinct programs build in parallel, so no two
    processes write the same cache entry. Progress goes to stderr: a line when a program
    starts and ends (with its time; "cached" when nothing had to be built), and every
    ``heartbeat`` seconds a line naming the programs still compiling, so that a compile
    slowed by a loaded machine is never silent.
    """
    import subprocess
    import sys
    import time

    def say(text: str) -> None:
        print(f"[dpsynth] {text}", file=sys.stderr, flush=True)

    if models is None:  # every shipped program but the level models (compiled on first use)
        models = (*MODELS, *TABLE_COUNT_MODELS)
    pending, total, done = list(models), len(models), 0
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    start = last_beat = time.monotonic()
    while pending or running:
        while pending and len(running) < workers:
            name = pending.pop(0)
            code = f"from dpsynth.models.catalogue import _compile_one; _compile_one({name!r})"
            running[name] = (subprocess.Popen([sys.executable, "-c", code]), time.monotonic())
        time.sleep(0.2)
        for name, (proc, began) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[name]
            if proc.returncode != 0:
                for other, _ in running.values():
                    other.kill()
                raise RuntimeError(f"compiling the {name} program failed (exit {proc.returncode})")
            done += 1
            took = time.monotonic() - began
            say(f"Stan program {name} ready in {took:.0f} s ({done}/{total})")
        now = time.monotonic()
        if running and now - last_beat >= heartbeat:
            last_beat = now
            say(
                f"still compiling {', '.join(running)} ({now - start:.0f} s so far; "
                f"{done}/{total} ready; a loaded machine takes several minutes a program)"
            )


def _compile_one(name: str) -> None:
    from dpsynth import engine

    engine.compile_program(get_model(name).stan_file)


# --- outcomes on public levels: binary and categorical ----------------------------


@dataclass(frozen=True)
class LevelModel(Model):
    """A regression for an outcome on public levels: binary (``logistic``, codes 0/1) or
    categorical (``categorical``, codes 1..levels, the first level the reference).

    ``outcome`` is ``"count"``: the codes are integers, so a synthetic column is written
    as integers and the one-column verdict reads it as such. ``levels`` is the number of
    public levels (2 for binary; ``None`` for the registered categorical model until
    :meth:`with_levels` gives it), never read from the data; ``levels_in_data`` says the
    program declares it (``n_levels``, categorical_regression.stan).
    """

    levels: int | None = None
    first_code: int = 0
    levels_in_data: bool = False

    def with_levels(self, levels: Any) -> LevelModel:
        """The same model on ``levels`` public levels (an integer >= 2; binary: 2)."""
        ok = not isinstance(levels, bool) and isinstance(levels, int | np.integer)
        if not ok or int(levels) < 2:
            raise InputError("levels", f"must be an integer of at least 2 (got {levels!r})")
        if not self.levels_in_data and int(levels) != 2:
            raise InputError("levels", f"model {self.name!r} has two levels (got {levels})")
        return replace(self, levels=int(levels))

    def require_levels(self) -> int:
        """The number of public levels; raises InputError('levels') when not given."""
        if self.levels is None:
            raise InputError(
                "levels",
                f"model {self.name!r} needs its number of public levels: "
                f"get_model({self.name!r}).with_levels(L) (never read from the data)",
            )
        return self.levels

    def fit_inputs(
        self, data: Mapping[str, Any], bounds: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """The convention's data dict, plus ``n_levels`` where the program declares it."""
        out = dict(data)
        if self.levels_in_data:
            out["n_levels"] = self.require_levels()
        return out

    def to_stan_scale(self, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
        """Integer codes on the public levels (int64), refused in one line naming ``y``
        (the first offending record's position, never its value) when outside them."""
        levels = self.require_levels()
        codes = super().to_stan_scale(y, bounds)  # finite, integer, within public bounds
        lo, hi = self.first_code, self.first_code + levels - 1
        _first_bad(
            "y", (codes < lo) | (codes > hi), f"is not a code of the public levels ({lo}..{hi})"
        )
        return codes


def encode_levels(values: Any, levels: Any, param: str = "y") -> np.ndarray:
    """Codes 1..L of ``values`` on the public ``levels`` (a sequence of L distinct labels, in
    order; the first is the categorical model's reference). A value that is not a public
    level, or missing, is refused naming ``param`` and the record's position."""
    labels = list(levels)
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise InputError("levels", "give at least two distinct public levels")
    index = pd.Index(labels)
    codes = index.get_indexer(pd.Series(values, dtype=object))
    _first_bad(param, codes < 0, "is not one of the public levels (or is missing)")
    return codes.astype(np.int64) + 1


def decode_levels(codes: Any, levels: Any) -> np.ndarray:
    """The public level labels of codes 1..L (inverse of :func:`encode_levels`)."""
    return np.asarray(list(levels), dtype=object)[np.asarray(codes, dtype=np.int64) - 1]


def level_saturated_log_lik(y: Any) -> np.ndarray:
    """The saturated log-likelihood of a record on levels: sup of its log mass, 0.

    A probability is at most 1 and tends to 1 as the linear predictor of the record's own
    level grows, so the supremum is 0 (not attained): centring ``"saturated"`` equals the
    paper's mechanism for these models.
    """
    return np.zeros(np.asarray(y).size)


def _logistic_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of logistic_regression.stan: y_i eta_i - log(1 + e^eta_i), S x n."""
    y = np.asarray(data["y"], float)
    eta = _eta(draws, data)
    return y * eta - np.logaddexp(0.0, eta)


def _categorical_eta(beta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """[0, X beta] for beta (..., K, L - 1): the linear predictors of the L levels (..., n, L)."""
    eta = np.einsum("nk,...kl->...nl", X, beta)
    return np.concatenate([np.zeros(eta.shape[:-1] + (1,)), eta], axis=-1)


def _categorical_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of categorical_regression.stan: eta_i[y_i] - log_sum_exp(eta_i), S x n."""
    y = np.asarray(data["y"], dtype=np.int64)
    eta = _categorical_eta(np.asarray(draws["beta"], float), np.asarray(data["X"], float))
    return eta[:, np.arange(y.size), y - 1] - logsumexp(eta, axis=-1)


def _logistic_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of logistic_regression.stan: y_i ~ Bernoulli(expit(X_i beta)), int64."""
    _records(data, n_out, covariates=True)
    p = expit(_linear_predictor(draw, data))
    return (rng.random(p.shape) < p).astype(np.int64)


def _categorical_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of categorical_regression.stan: y_i ~ Categorical(softmax([0, X_i beta])),
    codes 1..L (int64), by one uniform per record against the cumulative probabilities."""
    _records(data, n_out, covariates=True)
    X = np.asarray(data["X"], dtype=float)
    beta = _param(draw, "beta")
    if beta.ndim != 2 or beta.shape[0] != X.shape[1]:
        raise InputError("draw", f"'beta' must be K x (L - 1) with K = {X.shape[1]} rows")
    cum = np.cumsum(softmax(_categorical_eta(beta, X), axis=1), axis=1)
    u = rng.random(X.shape[0])
    return (1 + (u[:, None] >= cum[:, :-1]).sum(axis=1)).astype(np.int64)


OUTCOME_MODELS: dict[str, LevelModel] = {
    "logistic": LevelModel(
        "logistic",
        STAN_DIR / "logistic_regression.stan",
        "count",
        True,
        _logistic_ll,
        _logistic_sim,
        centred=True,
        saturated=level_saturated_log_lik,
        clamps=("hard", "smooth"),
        levels=2,
    ),
    "categorical": LevelModel(
        "categorical",
        STAN_DIR / "categorical_regression.stan",
        "count",
        True,
        _categorical_ll,
        _categorical_sim,
        centred=True,
        saturated=level_saturated_log_lik,
        clamps=("hard", "smooth"),
        first_code=1,
        levels_in_data=True,
    ),
}
"""Models of outcomes on public levels, found by :func:`get_model` beside
:data:`MODELS`: ``logistic`` (binary 0/1) and ``categorical`` (codes 1..L; give L with
``get_model("categorical").with_levels(L)``). The count models ``poisson`` and ``negbin``
are already regressions on the public design X."""
