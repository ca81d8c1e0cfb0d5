"""Shared by the clamp tests: a program's target is its prior plus the clamped terms' sum."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsynth import engine
from dpsynth.models.catalogue import stan_data


def target_minus_prior(model: Any, y: Any, alpha: np.ndarray, x: Any, centre: Any,
                       bound: float, params: Any) -> float:  # fmt: skip
    """The program's log density at ``params`` with weights ``alpha`` and bound ``bound``, less
    its log density with every weight 0 (the prior alone)."""

    def log_density(alpha_: np.ndarray, m: float | None) -> float:
        d = stan_data(model, y, alpha_, X=x, censor_bound=m, centre=centre)
        return float(engine.log_density(model.stan_file, model.fit_inputs(d), [params])[0])

    return log_density(alpha, bound) - log_density(np.zeros(len(y)), None)
