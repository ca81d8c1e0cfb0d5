"""A release's and a plan's settings, checked without the data and without numpy.

:class:`ScalarSettings` holds every rule of a single-column release that needs no record:
the budget (:class:`BudgetSettings`), the neighbour relation and the public size, the
options and public inputs the mechanism takes (:func:`applies`), missing values and bounds.
:func:`dpsynth.release.single.synthesize` checks them before it charges the budget; the
command line makes the same object before it charges the budget or reads a file.
:class:`PlanSettings` holds the plan's. Import-light on purpose: the standard library,
:mod:`dpsynth.errors` and the declarations (:mod:`dpsynth.mechanisms.registry`).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpsynth.errors import (
    EPSILON_SANITY_LIMIT,
    InputError,
    require_choice,
    require_clip_bounds,
    require_downscale,
    require_drop_missing_usage,
    require_epsilon,
    require_finite_positive,
    require_in_range,
    require_m,
    require_public_size,
    require_sane_epsilon,
)
from dpsynth.mechanisms import registry
from dpsynth.privacy import relations

M_RANGE = (1, 10_000)
"""Accepted numbers of synthetic sets m in one release."""
SEED_RANGE = (0, 2**63 - 1)
"""Accepted seeds (research runs only: a known seed makes a release not private)."""
N_SYNTHETIC_RANGE = (1, 100_000_000)
"""Accepted public numbers of synthetic records."""
N_CONFIDENTIAL_RANGE = (2, 100_000_000)
"""Accepted stated sizes of the confidential file (:class:`PlanSettings`)."""
OPTION_RANGES: dict[str, tuple[int, int]] = {"n_bins": (1, 10_000_000)}
"""Accepted ranges of a mechanism's integer options."""

MODEL_INPUTS = ("model", "stan_file", "pieces", "covariates")
"""Public inputs only a mechanism that fits a model takes (a model, covariates)."""
INPUTS = (*MODEL_INPUTS, "reference", "centring_from")
"""Every public input :class:`ScalarSettings` refuses where the mechanism would ignore it."""


def applies(param: str, mechanism: registry.Mechanism) -> bool:
    """Whether ``mechanism`` takes the option or public input ``param`` (its declaration:
    ``options``, ``reference``, ``fits_model``; ``centring_from`` goes with ``centring``)."""
    if param in MODEL_INPUTS:
        return mechanism.fits_model
    if param == "reference":
        return mechanism.reference
    if param == "centring_from":
        return "centring" in mechanism.options
    return param in mechanism.options


def _require_applies(param: str, mechanism: registry.Mechanism) -> None:
    """Refuse an option or input the mechanism would ignore, naming those that take it."""
    if not applies(param, mechanism):
        users = ", ".join(n for n, m in registry.MECHANISMS.items() if applies(param, m))
        raise InputError(
            param, f"does not apply to the {mechanism.name} mechanism (only to {users})"
        )


def require_utility_slice(
    eps: float | None, epsilon: float, bounds: tuple[float, float] | None, neighbours: str
) -> float:
    """The epsilon slice of the public utility figures checked against the release's total
    ``epsilon``, its public ``bounds`` and ``neighbours`` (0.0: no figures)."""
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


def _count(param: str, value: Any, limits: tuple[int, int]) -> int:
    """A count in ``limits``; an integral float (``2.0``) is accepted as the integer."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, numbers.Integral):
        value = require_m(value, param)
    return require_in_range(param, value, *limits)


@dataclass(frozen=True)
class BudgetSettings:
    """What every release states about its budget: the total ``epsilon`` (in
    :data:`dpsynth.errors.EPSILON_RANGE`, at most the sanity limit unless
    ``allow_large_epsilon``), the ``m`` sets that share it and a research ``seed``."""

    epsilon: float
    m: int = 1
    seed: int | None = None
    allow_large_epsilon: bool = False

    def validate(self) -> BudgetSettings:
        """The checked settings (a copy), or the first problem as an InputError."""
        epsilon = require_epsilon("epsilon", self.epsilon)
        require_sane_epsilon("epsilon", epsilon, self.allow_large_epsilon)
        m = _count("m", self.m, M_RANGE)
        if self.seed is not None:
            require_in_range("seed", self.seed, *SEED_RANGE)
        return dataclasses.replace(self, epsilon=epsilon, m=m)


@dataclass(frozen=True)
class ScalarSettings:
    """The settings of a single-column release that need no record.

    The keywords of :func:`dpsynth.release.single.synthesize` of the same names (which says
    what each means), and two of their own: ``regression`` (covariates are given) and
    ``inputs``, the public inputs given beside the data by library name (``model``,
    ``stan_file``, ``pieces``, ``covariates``, ``reference``, ``centring_from``), each
    refused where the mechanism would ignore it. :meth:`validate` checks them in a fixed
    order (the first problem is the one refused) and fills in what follows from them:
    the default ``neighbours`` and ``eps_utility``, the public utility figures' slice.
    """

    mechanism: str
    epsilon: float
    m: int = 1
    neighbours: str | None = None
    n_synthetic: int | None = None
    seed: int | None = None
    bounds: tuple[float, float] | None = None
    clip_to_bounds: bool = False
    public_utility: float | None = None
    allow_large_epsilon: bool = False
    drop_missing: bool = False
    regression: bool = False
    inputs: tuple[str, ...] = ()
    tuning: Mapping[str, Any] = field(default_factory=dict)
    eps_utility: float = 0.0

    def validate(self) -> ScalarSettings:
        """The checked settings (a copy), or the first problem as an InputError."""
        require_choice("mechanism", self.mechanism, tuple(registry.MECHANISMS))
        spec = registry.get(self.mechanism)
        budget = BudgetSettings(self.epsilon, self.m, self.seed, self.allow_large_epsilon)
        budget = budget.validate()
        neighbours = self.neighbours or spec.default_neighbours
        require_choice("neighbours", neighbours, relations.NEIGHBOURS)
        n_synthetic = self.n_synthetic
        if n_synthetic is not None:
            n_synthetic = _count("n_synthetic", n_synthetic, N_SYNTHETIC_RANGE)
        n_synthetic = require_public_size(neighbours, n_synthetic, self.regression)
        self._check_options(spec)
        eps_utility = require_utility_slice(
            self.public_utility, budget.epsilon, self.bounds, neighbours
        )
        require_drop_missing_usage(
            self.drop_missing, self.mechanism, self.regression, n_synthetic, spec.public_n
        )
        require_clip_bounds(self.clip_to_bounds, self.bounds)
        return dataclasses.replace(
            self, epsilon=budget.epsilon, m=budget.m, neighbours=neighbours,
            n_synthetic=n_synthetic, eps_utility=eps_utility,
        )  # fmt: skip

    def _check_options(self, spec: registry.Mechanism) -> None:
        """The public inputs and options the mechanism takes, in their ranges."""
        for param in self.inputs:
            _require_applies(param, spec)
        for key, value in self.tuning.items():
            if value is None or value is False:
                continue
            _require_applies(key, spec)
            if key in OPTION_RANGES:
                require_in_range(key, value, *OPTION_RANGES[key])
        if self.tuning.get("downscale") is not None:
            require_downscale(self.tuning["downscale"])
        if "centring_from" in self.inputs and self.tuning.get("centring") is not None:
            raise InputError("centring_from", "give the centring or centring_from, not both")


CANDIDATES: dict[str, tuple[str, str]] = {
    "ph": ("ph", "none"),
    "censor-uw": ("censor-uw", "none"),
    "censor-uw+reference": ("censor-uw", "reference"),
    "censor-w": ("censor-w", "none"),
    "censor-w+reference": ("censor-w", "reference"),
    "unweighted": ("unweighted", "none"),
    "lw": ("lw", "none"),
    "weighted-e": ("weighted-e", "none"),
}
"""A plan's candidate name -> (mechanism, centring). "+reference" centres the censored
likelihood at the reference half's posterior mean
(:func:`dpsynth.release.reference.reference_point`); Censor_w always takes its weights from
the reference half (strict DP). The last three have no strict guarantee."""

DEFAULT_CANDIDATES = ("ph", "censor-uw", "censor-uw+reference", "censor-w", "censor-w+reference")


@dataclass(frozen=True)
class PlanSettings:
    """The settings of ``dpsynth.release.plan.plan`` that need no record (its keywords of
    the same names): candidates of :data:`CANDIDATES`, a total ``epsilon`` up to the sanity
    limit (a plan compares releases; it has no ``allow_large_epsilon``), ``m`` sets, public
    ``bounds`` and ``neighbours`` (a candidate the release refuses for them is a row
    "refused") and the stated ``n_confidential``."""

    epsilon: float
    m: int = 1
    mechanisms: tuple[str, ...] = DEFAULT_CANDIDATES
    bounds: tuple[float, float] | None = None
    n_confidential: int | None = None
    neighbours: str = relations.DEFAULT_NEIGHBOURS

    def validate(self) -> PlanSettings:
        """The checked settings (a copy), or the first problem as an InputError."""
        mechanisms = tuple(self.mechanisms)
        unknown = [c for c in mechanisms if c not in CANDIDATES]
        if unknown or not mechanisms:
            raise InputError(
                "mechanisms", f"choose among {', '.join(CANDIDATES)} (got {', '.join(unknown)})"
            )
        epsilon = require_epsilon("epsilon", self.epsilon)
        if epsilon > EPSILON_SANITY_LIMIT:
            raise InputError(
                "epsilon",
                f"plan compares releases up to the sanity limit ({EPSILON_SANITY_LIMIT:g}); a "
                "release above it protects almost nothing",
            )
        m = _count("m", self.m, M_RANGE)
        if self.n_confidential is not None:
            require_in_range("n_confidential", self.n_confidential, *N_CONFIDENTIAL_RANGE)
        return dataclasses.replace(self, mechanisms=mechanisms, epsilon=epsilon, m=m)


__all__ = [
    "CANDIDATES",
    "DEFAULT_CANDIDATES",
    "INPUTS",
    "BudgetSettings",
    "PlanSettings",
    "ScalarSettings",
    "applies",
    "require_utility_slice",
]
