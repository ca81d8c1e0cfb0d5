"""A censored fit's shrinkage, corrected by one parametric-bootstrap step (post-processing).

Censoring clamps each record's term clamp(d (ll(x_i | theta) - c(x_i)), -M, M) (censoring
paper, Eq. 3.5; c the public centre, d the public weight). At a small bound M the records a
coefficient explains best reach +M first and stop pulling, so the posterior sits between
the centre and the data's fit (slopes short of the data's where the centre's are 0).

The correction estimates that shrinkage where the answer is known: it simulates a data set
from the released draw theta_1 at the public design (the public columns and the synthetic
predecessors), finds the mode theta_sim of the same censored objective on it (same M, d,
centre, record count and the program's prior scale) and returns
theta_1 + (theta_1 - theta_sim), the one-step bootstrap bias correction. Its inputs are the
draw, public inputs and fresh randomness, never a confidential value, so the released
draw's guarantee covers the corrected one (post-processing); the function's signature
holds no confidential argument.

One step, not more: further steps let the simulation's own noise outweigh the bias left,
and one step corrects part of the shrinkage, less where it is strong
(``tests/test_table.py`` checks it on a simulated beta regression). dpsynth's extension (the
papers do not correct the shrinkage). Evidence: book/choices.md, section choices-fit-records
(one bootstrap step against the shrinkage).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsynth.models.catalogue import Model
from dpsynth.models.centring import record_centre
from dpsynth.privacy import relations

SIM_ROWS = 20_000
"""The rows of the public design that carry the simulated data set, drawn from fresh
randomness: a random subset of a larger design, a smaller design's rows drawn with
replacement. The censored objective's mode is a per-record average scaled to the fit's
records, so its shrinkage does not depend on the rows, but its noise, which the one step
adds to the released draw, falls with them; its value settles long before 10^5 rows, and the
optimizer's cost is linear in the rows. Evidence: book/choices.md, section
choices-positive-scale."""
PRIOR_SD = 2.5
"""The slopes' prior scale in the simulated objective: the table programs' normal(0, 2.5)
priors on the slopes (``dpsynth/stan/*_regression.stan``). The intercept is left unpenalised: its
prior differs by program and every record pins it."""


@dataclass(frozen=True)
class Censoring:
    """The public settings of one censored draw: its centring (``"none"``, ``"saturated"``
    or public parameter values), its bound M, its record weight d, the number of records
    its fit saw (the prior's weight against the likelihood's) and its clamp
    (``dpsynth.privacy.relations.CLAMPS``: "hard" clips each term, "smooth" maps it to
    M tanh(term / M))."""

    centring: Any
    bound: float
    downscale: float
    fit_records: int
    clamp: str = "hard"


def clamped_objective(
    model: Model,
    draw: Mapping[str, Any],
    data: dict[str, Any],
    centre: np.ndarray,
    censoring: Censoring,
) -> Any:
    """f(beta) = (k / n) sum_i clamp(d (ll_i(beta) - c_i), -M, M) - |slopes|^2 / (2 PRIOR_SD^2)
    (the smooth clamp: M tanh(d (ll_i - c_i) / M) in place of the clip),
    the censored log posterior of ``draw`` with its coefficients replaced (the other
    parameters, e.g. a known dispersion, kept), scaled to the fit's k records."""
    mirror = model.log_lik_mirror()
    shape = np.shape(draw["beta"])
    scale = censoring.fit_records / centre.size
    M, d = censoring.bound, censoring.downscale
    rest = {k: np.asarray(v, dtype=float)[None, ...] for k, v in draw.items() if k != "beta"}

    def f(beta: np.ndarray) -> float:
        trial = {**rest, "beta": beta.reshape(shape)[None, ...]}
        ll = np.asarray(mirror(trial, data), dtype=float)[0]
        terms = relations.clamped(d * (ll - centre), M, censoring.clamp)
        return float(scale * terms.sum() - 0.5 * np.sum(beta[1:] ** 2) / PRIOR_SD**2)

    return f


def clamped_mode(
    model: Model,
    draw: Mapping[str, Any],
    data: dict[str, Any],
    centre: np.ndarray,
    censoring: Censoring,
) -> np.ndarray:
    """The coefficients (flattened) maximising :func:`clamped_objective` on ``data``,
    searched by L-BFGS from ``draw``'s own: the censored fit's mode on a data set."""
    from scipy.optimize import minimize

    f = clamped_objective(model, draw, data, centre, censoring)
    start = np.asarray(draw["beta"], dtype=float).ravel()
    return minimize(lambda b: -f(b), start, method="L-BFGS-B").x


def corrected(
    model: Model,
    draw: Mapping[str, Any],
    X: np.ndarray,
    censoring: Censoring,
    rng: np.random.Generator,
    simulate_draw: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``draw`` with its coefficients moved by one bootstrap step (module docstring).

    ``X`` is the public design (intercept column first), ``simulate_draw`` the draw the
    simulated data come from (default ``draw``; a calibrated column's draw with its matched
    dispersion). Where the corrected coefficients are not finite or simulate values that
    are not (a count's rate overflowing), ``draw`` is returned unchanged."""
    X = np.asarray(X, dtype=float)
    rows = np.arange(X.shape[0])
    if rows.size != SIM_ROWS:  # a subset, or a few thousand rows drawn again
        rows = np.sort(rng.choice(rows, size=SIM_ROWS, replace=rows.size < SIM_ROWS))
    Xs = X[rows]
    data = {"n": Xs.shape[0], "K": Xs.shape[1], "X": Xs}
    source = dict(simulate_draw if simulate_draw is not None else draw)
    data["y"] = np.asarray(model.simulate(source, data, Xs.shape[0], rng), dtype=float)
    centre = record_centre(model, data, censoring.centring)
    beta = np.asarray(draw["beta"], dtype=float)
    mode = clamped_mode(model, draw, data, centre, censoring)
    out = {**draw, "beta": (2.0 * beta.ravel() - mode).reshape(beta.shape)}
    return out if _usable(model, out, data, rng) else dict(draw)


def _usable(model: Model, draw: Mapping[str, Any], data: dict[str, Any], rng: Any) -> bool:
    """Whether a corrected draw is finite and simulates finite values at the design (a
    count model's rate can overflow): otherwise the released draw is kept."""
    if not np.all(np.isfinite(np.asarray(draw["beta"], dtype=float))):
        return False
    try:
        y = np.asarray(model.simulate(dict(draw), data, data["n"], rng), dtype=float)
    except (ValueError, FloatingPointError, OverflowError):
        return False
    return bool(np.all(np.isfinite(y)))


__all__ = ["PRIOR_SD", "SIM_ROWS", "Censoring", "clamped_mode", "clamped_objective", "corrected"]
