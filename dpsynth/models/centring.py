"""Centred censoring (dpsynth's extension of the censored mechanisms): each record's
contribution is taken relative to a centre before it is clamped (censoring paper, Eq. 3.5).

This module is its home at the model level: the centre of each record
(:func:`record_centre`) and the check of public centring values against a model, by name
(what its mirror reads) and shape. Where public centring values come from: a public file's
fit (:mod:`dpsynth.release.reference`), a table column's marginal histogram
(:mod:`dpsynth.table.columns`), the table spec's ``auto`` rule (:mod:`dpsynth.table.spec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsynth.errors import InputError

if TYPE_CHECKING:
    from dpsynth.models.catalogue import Model

DESIGN_ORDER = (
    "the intercept first, then the covariates in the order given (covariates), a "
    "categorical or text covariate as one 0/1 column per level but its first (levels "
    "sorted as text)"
)
"""The column order of a regression's design (``models.covariate_matrix`` and
``models.design_matrix``): the order of the coefficients ``beta``."""


class _Reads(dict):
    """A dict that records which keys were read (the names a model's mirror needs)."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(values)
        self.read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.read.append(key)
        return super().__getitem__(key)


def check_centring(syn: Any, centring: Any) -> None:
    """Public reference values for centring, checked by name and shape against the model.

    ``syn`` is a :class:`dpsynth.mechanisms.posterior.Synthesizer`. The names are those the model's
    numpy mirror reads (for example ``beta1, beta2`` for the beta model, ``beta, kappa`` for
    beta regression); a regression's ``beta`` has one value per design column, in
    :data:`DESIGN_ORDER`. Names the mirror does not read must be parameters of the program.
    """
    if not isinstance(centring, dict) or syn.model.record_log_lik is None:
        return
    reads = _mirror_reads(syn, centring)
    declared = _declared_parameters(syn)
    extra = [k for k in centring if k not in reads and k not in declared]
    if extra:
        raise InputError(
            "centring",
            f"names no parameter of model {syn.model.name!r}: {', '.join(extra)} (it reads "
            f"{', '.join(reads)})",
        )


def _mirror_reads(syn: Any, centring: dict[str, Any]) -> list[str]:
    """The names the model's numpy mirror reads, running it on the centring values."""
    from dpsynth.models.catalogue import design_matrix, stan_data

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
    return list(dict.fromkeys(reads.read))


def _declared_parameters(syn: Any) -> set[str]:
    """The names declared in the program's parameters and transformed parameters blocks."""
    from dpsynth.engine import program_code
    from dpsynth.models.program_checks import declared_names, program_blocks

    blocks = program_blocks(program_code(syn.model.stan_file))
    return {
        name
        for block in ("parameters", "transformed parameters")
        for name in declared_names(blocks.get(block, ""))
    }


def record_centre(model: Model, data: Mapping[str, Any], centring: Any = "none") -> np.ndarray:
    """The centre c(x_i) of each record for centred censoring (dpsynth's extension).

    The censored term becomes clamp(alpha_i (ll(x_i | theta) - c(x_i)), -M, M). Any c that
    is a function of record i and public quantities only keeps the censoring guarantee of
    Hu, Williams & Savitsky (Eq. 3.5): neighbours still differ in one clamped term
    (``book/which_mechanism.md``, "Centred censoring"). ``centring`` is

    * ``"none"``: c = 0, the paper's mechanism;
    * ``"saturated"``: c(x_i) = sup_theta ll(x_i | theta), the record's saturated
      log-likelihood (``Model.saturated``; Poisson and negbin only, where it is finite);
    * a mapping of **public** parameter values, e.g. ``{"beta": [1.1], "phi": 0.4}``
      (an earlier period's fit, a published estimate): c(x_i) = ll(x_i | theta_ref), so the
      clamped term is a log-likelihood ratio against theta_ref (0 where that is not
      finite). Never estimate theta_ref from the confidential data.

    ``data`` is the Stan data dict (``y`` and ``X`` on the Stan scale). Raises
    :class:`~dpsynth.errors.InputError` naming ``"centring"``.
    """
    y = np.asarray(data["y"], dtype=float)
    if isinstance(centring, str):
        if centring == "none":
            return np.zeros(y.size)
        if centring == "saturated":
            if model.saturated is None:
                raise InputError(
                    "centring",
                    f"model {model.name!r} has no finite saturated log-likelihood; give public "
                    "reference parameter values instead",
                )
            return np.asarray(model.saturated(y), dtype=float)
        raise InputError(
            "centring", f"must be none, saturated or public parameter values (got {centring!r})"
        )
    if not isinstance(centring, Mapping):
        raise InputError("centring", f"must be none, saturated or a mapping (got {centring!r})")
    mirror = model.log_lik_mirror()
    if mirror is None:
        raise InputError("centring", "reference centring needs a shipped or pieces model")
    draws = {k: np.asarray(v, dtype=float)[None, ...] for k, v in centring.items()}
    try:
        with np.errstate(divide="ignore", invalid="ignore"):  # not finite: centred at 0
            centre = np.asarray(mirror(draws, dict(data)), dtype=float)[0]
    except (KeyError, ValueError) as exc:
        raise InputError("centring", f"cannot evaluate the model at {centring!r}: {exc}") from None
    if centre.shape != y.shape:
        raise InputError("centring", f"the model's mirror gave {centre.size} values for {y.size}")
    # a record whose reference log-likelihood is not finite is centred at 0: a rule of the
    # record alone, so whether a release happens never depends on such a record
    return np.where(np.isfinite(centre), centre, 0.0)
