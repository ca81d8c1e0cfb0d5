"""Utility figures a release may publish: Laplace-noised, charged to the release's ledger.

A release (``dpsynth.release.single``) may spend a slice of its epsilon on a noised
confidential mean and noised max-ECDF distances between each synthetic set and the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsynth.curator.utility import ecdf_measures
from dpsynth.privacy.accounting import BudgetLedger, laplace_mechanism


def public_utility_figures(
    y: Any,
    sets: np.ndarray,
    bounds: tuple[float, float],
    epsilon: float,
    ledger: BudgetLedger,
    rng: np.random.Generator | None,
) -> dict[str, Any]:
    """Noised utility figures a release may publish, at ``epsilon`` charged to the ledger.

    Half of ``epsilon`` noises the confidential mean (records clipped to the public
    ``bounds``; sensitivity (hi - lo)/n under substitution), half the m max-ECDF distances
    between each synthetic set (``sets``, m x N) and the confidential data (each changes by
    at most 1/n when one record is substituted, so the vector's l1 sensitivity is m/n).
    The synthetic sets are already public: given them, these are Laplace mechanisms on the
    data, and sequential composition charges ``epsilon`` on top of the sets'. Noise from
    OpenDP unless ``rng`` (seeded research runs).
    """
    lo, hi = bounds
    arr = np.clip(np.asarray(y, dtype=float), lo, hi)
    n, m = arr.size, sets.shape[0]
    half = epsilon / 2
    mean = laplace_mechanism(float(arr.mean()), (hi - lo) / n, half, rng)
    distances = np.array([ecdf_measures(arr, s)["max_ecdf"] for s in sets])
    noised = np.atleast_1d(laplace_mechanism(distances, m / n, half, rng))
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
