"""One declaration per mechanism: name, label, guarantee, neighbour relations, privacy map.

Everything else derives from :data:`MECHANISMS`: the CLI's ``--mechanism`` choices and
option checks, the release's validation and dispatch, the studies' labels and the book's
mechanism tables. Like an OpenDP measurement, a declaration carries its own privacy map
(epsilon -> the internal bound the mechanism enforces, per neighbour relation) and
refuses a relation it does not support.

Import-light on purpose (the standard library and :mod:`dpsynth.privacy.relations` only): the CLI reads it to check arguments
before the scientific stack is imported. Adding a mechanism is one :class:`Mechanism`
entry here and one function named by its ``runner``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpsynth.privacy.relations import (
    DEFAULT_NEIGHBOURS,
    NEIGHBOURS,
    Neighbours,
    censoring_map,
    histogram_map,
)

GUARANTEE_KINDS: tuple[str, ...] = ("DP", "aDP", "none")
"""What a mechanism can promise before any run: strict epsilon-DP, asymptotic DP only (the
bound is computed from draws on the confidential data), or none."""

COLUMN_TYPES: tuple[str, ...] = ("continuous", "count", "binary", "categorical")
"""The types of a table column, and of the outcomes a mechanism declares it synthesizes:
one vocabulary (a model's outcome on its Stan scale is ``dpsynth.models.catalogue.OUTCOMES``)."""


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """A mechanism as one declaration (the way an OpenDP measurement carries its own map).

    Built with keywords only. ``privacy_map`` takes (epsilon per set, neighbour relation) to
    the internal bound the code enforces (``bound_name`` says which); ``None`` for mechanisms
    whose epsilon is computed after the fit from draws (asymptotic DP), and for SBS, whose
    map splits epsilon over several statistics (``modips``). ``options`` is the one set of
    options the mechanism takes (the release refuses any other).

    Behaviour is named, not dispatched on the name: ``runner`` is a lazy ``"module:function"``
    reference to the function that makes the release (``(Request, BudgetLedger) ->
    RunnerOutput``), and ``fit`` one to the function that runs a posterior mechanism on a
    :class:`dpsynth.mechanisms.posterior.Synthesizer` (``None``: the mechanism fits no model). Both are
    resolved on use (:func:`resolve`), so this module stays import-light.

    Capabilities (what the rest of the library asks instead of comparing names):
    ``reference`` (takes reference weights from a public file), ``weighted`` (weights
    records), ``censored`` (clamps each record's log-likelihood term: a censored fit),
    ``histogram`` (draws from a noisy histogram on public bins, ``n_bins``), ``public_n``
    (its sensitivities assume n public under every relation, so a private n, e.g. records
    dropped for a missing value, is refused), ``table`` (a whole-table column may use it),
    ``counts`` (reads integer records as their counts, ``histogram.CellCounts``, the same
    release).
    """

    name: str
    label: str
    paper: str
    guarantee: str
    summary: str
    runner: str
    fit: str | None = None
    neighbours: tuple[Neighbours, ...] = NEIGHBOURS
    privacy_map: Callable[[float, str], float] | None = None
    bound_name: str | None = None
    options: frozenset[str] = frozenset()
    outcomes: tuple[str, ...] = ("continuous", "count")
    default_neighbours: Neighbours = DEFAULT_NEIGHBOURS
    reference: bool = False
    weighted: bool = False
    censored: bool = False
    histogram: bool = False
    public_n: bool = False
    table: bool = False
    counts: bool = False
    extra_source: str = "other retained posterior draws"
    fit_purpose: str = "the weighted posterior"

    @property
    def fits_model(self) -> bool:
        """True for a (pseudo) posterior mechanism: it fits an outcome model."""
        return self.fit is not None

    def internal_bound(self, epsilon: float, neighbours: str) -> float:
        """The bound enforced at ``epsilon`` per set under ``neighbours``; refuses a relation
        the mechanism does not support, or a mechanism without an a-priori map."""
        if neighbours not in self.neighbours:
            raise ValueError(f"{self.name} supports neighbours {', '.join(self.neighbours)}")
        if self.privacy_map is None:
            raise ValueError(f"{self.name} has no a-priori privacy map ({self.guarantee})")
        return self.privacy_map(epsilon, neighbours)

    def release_runner(self) -> Callable[..., Any]:
        """The function that makes this mechanism's release (``runner``, resolved now)."""
        return resolve(self.runner)

    def fitter(self) -> Callable[..., Any]:
        """The function that runs this posterior mechanism on a synthesizer (``fit``)."""
        if self.fit is None:
            raise ValueError(f"{self.name} fits no model")
        return resolve(self.fit)


def resolve(reference: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` reference names, looked up at each call (so a
    test may replace it on its module)."""
    module, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module), attr)


_WEIGHTS = frozenset({"c", "g", "reweight", "k"})
SEARCHED_OPTIONS = frozenset({"k"})
"""Options whose value a fit may search on the data (the re-weighting k): never published."""
PH_CONSISTENCY = ("clamp", "simplex")
"""PH's ``consistency`` option, how its noisy counts are made non-negative (the first is the
default: the censoring paper's; ``histogram.consistent_counts``)."""
PH_DRAWS = ("iid", "systematic")
"""PH's ``draw`` option, how records are drawn from the noisy shares (the first is the
default: the censoring paper's independent draws; ``histogram.drawn_cells``)."""
_POSTERIOR = "dpsynth.release.single:_posterior"
_FRESH_NOISE = (
    "fresh {} on the confidential {}: published, they would spend budget; unpublished, they "
    "only make this confidential verdict steadier"
)

MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        Mechanism(
            name="unweighted", label="Unweighted", paper="Savitsky et al., Section 2",
            guarantee="aDP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_unweighted",
            fit_purpose="the unweighted posterior (each record's bound)",
            summary="the plain posterior: its local epsilon is only measured (the baseline)",
        ),
        Mechanism(
            name="lw", label="Weighted", paper="Savitsky et al., Algorithm 1 (LW)",
            guarantee="aDP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_lw",
            options=_WEIGHTS, weighted=True,
            summary="record-level weights from each record's own log-likelihood range",
        ),
        Mechanism(
            name="cw", label="CW", paper="Savitsky et al., Algorithm 2 (CW)",
            guarantee="aDP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_cw",
            options=_WEIGHTS | {"radius"}, weighted=True,
            summary="weights from a record's distance to the others (radius r)",
        ),
        Mechanism(
            name="sw", label="SW", paper="Savitsky et al., Algorithm 3 (SW)",
            guarantee="aDP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_sw",
            options=frozenset({"target_lipschitz"}), weighted=True,
            summary="one scalar weight that meets a target Lipschitz bound",
        ),
        Mechanism(
            name="weighted-e", label="Weighted-e", paper="Hu et al., Section 3.1 (Weighted-e)",
            guarantee="aDP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_weighted_e",
            options=frozenset({"c", "g", "truncation"}), weighted=True,
            fit_purpose="the Weighted-e posterior",
            summary="LW weights truncated so the local bound meets the target epsilon",
        ),
        Mechanism(
            name="censor-w", label="Censor_w", paper="Hu et al., Section 3.2 (Censor_w)",
            guarantee="DP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_censor_w",
            privacy_map=censoring_map, bound_name="censor_bound",
            options=_WEIGHTS | {"downscale", "centring"},
            reference=True, weighted=True, censored=True, table=True,
            fit_purpose="the censored posterior",
            summary="weighted, clamped log-likelihood; DP with weights from a public file",
        ),
        Mechanism(
            name="censor-uw", label="Censor_uw", paper="Hu et al., Section 3.2 (Censor_uw)",
            guarantee="DP", runner=_POSTERIOR, fit="dpsynth.mechanisms.posterior:fit_censor_uw",
            privacy_map=censoring_map, bound_name="censor_bound",
            options=frozenset({"centring", "downscale"}), censored=True, table=True,
            fit_purpose="the censored posterior",
            summary="clamped log-likelihood: strict DP by construction",
        ),
        Mechanism(
            name="ph", label="PH", paper="Hu et al., Section 4 (perturbed histogram)",
            guarantee="DP", runner="dpsynth.release.single:_ph",
            privacy_map=histogram_map, bound_name="laplace_scale",
            options=frozenset({"n_bins", "integer", "consistency", "draw"}),
            histogram=True, table=True, counts=True,
            extra_source=_FRESH_NOISE.format("Laplace noise", "histogram"),
            summary="Laplace-perturbed histogram on public bins, one column, no covariates",
        ),
        Mechanism(
            name="sbs", label="SBS", paper="Liu, Algorithm 1 (SBS)",
            guarantee="DP", runner="dpsynth.release.single:_sbs", neighbours=("substitution",),
            bound_name="laplace_scale",
            options=frozenset({"data_type", "known_sd", "sanitization", "allocation", "bounding"}),
            outcomes=("continuous", "binary"), public_n=True,
            extra_source=_FRESH_NOISE.format("noise", "statistics"),
            summary=(
                "sanitized sufficient statistics, then Bayesian synthesis (modips): its map "
                "splits epsilon over the statistics (modips.allocation_weights), n public"
            ),
        ),
    )
}  # fmt: skip
"""Every mechanism dpsynth offers, in the order the book and the CLI list them."""

NAMES: tuple[str, ...] = tuple(MECHANISMS)
POSTERIOR_NAMES: tuple[str, ...] = tuple(n for n, m in MECHANISMS.items() if m.fits_model)
"""The mechanisms made by a (pseudo) posterior fit (``mechanisms.Synthesizer.run``)."""


def get(name: str) -> Mechanism:
    """The declaration of ``name``; ``KeyError`` naming the choices otherwise."""
    try:
        return MECHANISMS[name]
    except KeyError:
        raise KeyError(f"unknown mechanism {name!r}: choose one of {', '.join(NAMES)}") from None


def labels() -> dict[str, str]:
    """The papers' names of the mechanisms, keyed by dpsynth's names."""
    return {n: m.label for n, m in MECHANISMS.items()}


def strict_names() -> tuple[str, ...]:
    """The mechanisms whose declaration promises strict epsilon-DP (guarantee ``"DP"``)."""
    return tuple(n for n, m in MECHANISMS.items() if m.guarantee == "DP")


def table() -> list[dict[str, str]]:
    """One row per mechanism for the book's tables (``book/_ext/mechanism_table.py``)."""
    return [
        {
            "mechanism": m.name,
            "paper's name": m.label,
            "paper": m.paper,
            "guarantee": m.guarantee,
            "neighbours": ", ".join(m.neighbours),
            "options": ", ".join(sorted(m.options)) or "none",
            "outcomes": ", ".join(m.outcomes),
            "what it does": m.summary,
        }
        for m in MECHANISMS.values()
    ]


def weighted_names() -> tuple[str, ...]:
    """The mechanisms that weight records (their weights cost utility; Censor_uw has none)."""
    return tuple(n for n, m in MECHANISMS.items() if m.weighted)


def _capability(name: str | None, field: str) -> bool:
    """The declared capability ``field`` of mechanism ``name`` (False for an unknown name)."""
    mechanism = MECHANISMS.get(name)  # type: ignore[arg-type]
    return mechanism is not None and bool(getattr(mechanism, field))


def model_free(name: str | None) -> bool:
    """True for a mechanism that fits no outcome model (a histogram, SBS's own model)."""
    return name in MECHANISMS and not _capability(name, "fits_model")


def censored(name: str | None) -> bool:
    """True for a mechanism that censors (clamps) each record's log-likelihood term."""
    return _capability(name, "censored")


def histogram(name: str | None) -> bool:
    """True for a mechanism that draws from a noisy histogram on public bins."""
    return _capability(name, "histogram")


def takes_counts(name: str | None) -> bool:
    """True for a mechanism that reads integer records as their counts (the same release)."""
    return _capability(name, "counts")


def needs_public_n(name: str | None) -> bool:
    """True for a mechanism whose sensitivities assume n public (a private n is refused)."""
    return _capability(name, "public_n")


def takes_reference(name: str | None) -> bool:
    """True for a mechanism that takes reference weights from a public file."""
    return _capability(name, "reference")


def table_names() -> tuple[str, ...]:
    """The mechanisms a whole-table column may use (``dpsynth.table.spec``): strict DP with an
    a-priori map, so a table's epsilon is the sum of its columns'."""
    return tuple(n for n, m in MECHANISMS.items() if m.table)


PUBLIC_OPTIONS: frozenset[str] = (
    frozenset().union(*(m.options for m in MECHANISMS.values())).difference(SEARCHED_OPTIONS)
)
"""Options set by the user (publishable in a report); values searched on the data are not."""
