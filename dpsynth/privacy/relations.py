"""Neighbour relations and the privacy maps they imply: the one home of the relation type, its
default, and the maps a mechanism's declaration (``dpsynth.mechanisms.registry``) names.

Imports nothing from dpsynth: the CLI reads it before numpy is imported.
"""

from __future__ import annotations

import math
from typing import Any, Literal

Neighbours = Literal["substitution", "add-remove"]
"""A neighbour relation: the one type every function taking ``neighbours`` uses."""

NEIGHBOURS: tuple[Neighbours, ...] = ("substitution", "add-remove")
"""The neighbour relations dpsynth states guarantees under (``privacy.NEIGHBOUR_MEANING``)."""

DEFAULT_NEIGHBOURS: Neighbours = "substitution"
"""A release's relation unless the user names one: n public, one record replaced."""

PAPER_NEIGHBOURS: Neighbours = "add-remove"
"""The papers' relation (censoring paper Eq. 3.5: epsilon = 2M); the studies reproducing
them state it explicitly."""


def censoring_map(epsilon: float, neighbours: str) -> float:
    """Censoring bound M per draw (censoring paper, Eq. 3.5): every clamped contribution lies
    in [-M, M]; adding or removing a record moves the log pseudo likelihood by M and its
    normaliser by e^M (epsilon = 2M); a substitution moves it by 2M (epsilon = 4M)."""
    return float(epsilon) / (2.0 if neighbours == "add-remove" else 4.0)


CLAMPS: dict[str, int] = {"hard": 1, "smooth": 2}
"""How a censored fit bounds each record's term t_i = alpha_i (ll_i - c_i) by M, with the
code its Stan program reads as ``censor`` (``dpsynth/stan/dpsynth_functions.stan``): "hard" clamps
t_i to [-M, M] (censoring paper, Eq. 3.5); "smooth" (dpsynth's extension) maps it to
M tanh(t_i / M), in (-M, M), which equals t_i to first order near 0 and has no kink where a
record meets the bound. :func:`censoring_map` holds for both: its proof uses only that
every record's term lies in [-M, M]. A program accepts "smooth" where it declares censor's upper
bound 2 (``dpsynth.models.catalogue.Model.clamps``)."""


def clamped(terms: Any, bound: float, clamp: str) -> Any:
    """Each record's term bounded by M = ``bound`` as ``clamp`` (:data:`CLAMPS`) bounds it in the
    programs (``dpsynth_contrib`` of ``dpsynth/stan/dpsynth_functions.stan``), in numpy: clipped
    to [-M, M] ("hard") or M tanh(term / M) ("smooth")."""
    import numpy as np  # here, not above: the CLI reads this module before numpy is imported

    terms = np.asarray(terms, dtype=float)
    if clamp == "smooth":
        return bound * np.tanh(terms / bound)
    return np.clip(terms, -bound, bound)


CLAMP_MEANING: dict[str, str] = {
    "hard": "each record's term alpha (ll - centre) clamped to [-M, M] (Eq. 3.5)",
    "smooth": (
        "each record's term alpha (ll - centre) mapped to M tanh(term / M), within (-M, M): "
        "the same bound, hence the same epsilon, without the kinks that slow the sampler"
    ),
}
"""The report's words for each clamp (:data:`CLAMPS`)."""


def histogram_map(epsilon: float, neighbours: str) -> float:
    """Laplace scale b = sensitivity / epsilon of the bin counts (censoring paper, PH): the l1
    sensitivity of a count vector is 2 under substitution (a record moves), 1 add/remove."""
    return (2.0 if neighbours == "substitution" else 1.0) / float(epsilon)


def subsampling_map(epsilon: float, k: int, n: int) -> float:
    """The epsilon a mechanism may spend on a uniform random k-of-n subsample (drawn without
    replacement, independently of the values) so that the whole is ``epsilon``-DP under
    substitution: epsilon' = log(1 + (n/k)(e^epsilon - 1)), the inverse of the amplification
    epsilon = log(1 + (k/n)(e^epsilon' - 1)) of Balle, Barthe and Gaboardi (2018; their bound
    for sampling without replacement under the substitution relation). k >= n: no subsample, epsilon."""
    eps = float(epsilon)
    if k >= n:
        return eps
    # = log(1 + (n/k)(e^eps - 1)), written so that a large epsilon cannot overflow
    return eps + math.log(n / k * -math.expm1(-eps) + math.exp(-eps))


SUBSAMPLING_MEANING = (
    "the column's model is fitted to a uniform random subsample of fit_records of the n "
    "records, drawn without replacement independently of the values and never published; "
    "the fit spends epsilon_of_the_fit = log(1 + (n / fit_records)(e^epsilon - 1)), which "
    "the subsampling amplifies to the column's epsilon under substitution (Balle, Barthe "
    "and Gaboardi 2018: sampling without replacement); synthesis then covers all n records"
)
