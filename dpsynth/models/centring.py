"""Public centring values checked against a model: by name (what its mirror reads) and shape.

Centring is dpsynth's extension of the censored mechanisms (:func:`dpsynth.models.catalogue.record_centre`):
each record's contribution is taken relative to a public reference value of the parameters
before it is clamped (censoring paper, Eq. 3.5). This module holds the check of such
values, beside the models and program checks it reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsynth.errors import InputError

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
