"""Reference centring: public parameter values fitted to a public reference file.

:func:`reference_point` is the one fit of a public file whose posterior mean centres a
censored release (``centring=`` of :func:`dpsynth.release.single.synthesize`, dpsynth's
extension, :func:`dpsynth.models.centring.record_centre`); ``synthesize``'s
``centring_from`` runs it on the public file a caller gives, and a plan on its reference
half (``dpsynth.release.plan.plan``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpsynth.errors import InputError
from dpsynth.mechanisms.posterior import Synthesizer
from dpsynth.models.catalogue import get_model
from dpsynth.sampler import Sampler

__all__ = ["reference_point"]


def reference_point(
    reference_y: Any,
    model: str,
    *,
    bounds: tuple[float, float] | None = None,
    reference_X: Any = None,
    X: Any = None,
    sampler: Sampler | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Public parameter values for reference centring: the posterior mean of the model's
    unweighted fit to the public ``reference_y`` (on the Stan scale given by ``bounds``).

    Regression coefficients are moved onto the design of ``X`` (the data the centring will
    be used with), since :func:`dpsynth.models.catalogue.design_matrix` standardizes each database by
    its own covariate means and sds. The result is a mapping for ``centring=`` of
    :func:`dpsynth.release.single.synthesize` (dpsynth's extension,
    :func:`dpsynth.models.centring.record_centre`). Never pass confidential data here.
    """
    from dpsynth.models.catalogue import transfer_beta

    fit = Synthesizer(
        reference_y, model, X=reference_X, bounds=bounds, seed=seed, sampler=sampler
    ).unweighted_fit()
    means = {
        name: np.asarray(values, dtype=float).mean(axis=0)
        for name, values in fit.stan_fit.draws.items()
        if np.size(values) > 0  # not a switched-off generated quantity (y_rep, contrib)
    }
    point: dict[str, Any] = {}
    for name in _names_read(get_model(model), means, fit.data):
        mean = transfer_beta(means[name], reference_X, X) if name == "beta" else means[name]
        point[name] = float(mean) if np.ndim(mean) == 0 else np.asarray(mean).tolist()
    return point


def _names_read(model: Any, means: Mapping[str, np.ndarray], data: Mapping[str, Any]) -> list[str]:
    """The parameters the model's mirror reads (the names a centring mapping may give):
    those without which it fails (e.g. beta1, beta2 of the beta model, not phi, lambda)."""
    if model.record_log_lik is None:
        raise InputError("model", "reference centring needs a shipped model (numpy mirror)")
    needed = []
    for name in means:
        rest = {k: np.asarray(v)[None, ...] for k, v in means.items() if k != name}
        try:
            model.record_log_lik(rest, dict(data))
        except KeyError:
            needed.append(name)
    return needed
