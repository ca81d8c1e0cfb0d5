"""Scaling between public bounds and the unit interval, the Stan scale of a bounded outcome.

The bounds are public (never read from the data); the padding keeps values at the bounds
inside the open interval (0, 1) that the beta models need.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dpsynth.errors import InputError, require_bounds

__all__ = [
    "PAD_FRACTION",
    "positive_from_scale",
    "positive_to_scale",
    "scale_to_unit",
    "unit_pad",
    "unscale_from_unit",
]

PAD_FRACTION = 1e-6
"""The padding of :func:`scale_to_unit` is at most this fraction of the range hi - lo."""


def unit_pad(lower: float, upper: float) -> float:
    """Default padding: half a unit (half a dollar of salary), or a millionth of the range if
    that is smaller, so that data on a narrow range such as [0, 1] are not squeezed."""
    return min(0.5, PAD_FRACTION * (float(upper) - float(lower)))


def scale_to_unit(x: ArrayLike, lower: float, upper: float, pad: float | None = None) -> np.ndarray:
    """Map values in public bounds [lower, upper] into the open interval (0, 1).

    u = (x - lower + pad) / (upper - lower + 2 pad); with the default pad (:func:`unit_pad`:
    0.5 on wide ranges, half a dollar for salary) this is (x - lo + 0.5) / (hi - lo + 1), so
    exact 0 and exact top-coded values land at 0.5/(hi - lo + 1) and 1 - 0.5/(hi - lo + 1),
    inside (0, 1) as the censoring paper's beta regression (section 5) needs; on [0, 1] the
    pad is 1e-6 and u is x to six digits. Shape preserved. Values outside the bounds raise
    InputError("x", ...): clip first if that is intended.
    """
    lo, hi = require_bounds("bounds", lower, upper)
    pad = unit_pad(lo, hi) if pad is None else pad
    if not (np.isfinite(pad) and pad > 0):
        raise InputError("pad", f"must be > 0 and finite (got {pad!r})")
    arr = np.asarray(x, dtype=float)
    _require_within(arr, lo, hi)
    return (arr - lo + pad) / (hi - lo + 2 * pad)


def _require_within(arr: np.ndarray, lo: float, hi: float) -> None:
    """Refuse values that are not finite or lie outside the public bounds [lo, hi]."""
    if np.any(~np.isfinite(arr)) or np.any(arr < lo) or np.any(arr > hi):
        raise InputError("x", f"values must be finite and within the public bounds [{lo}, {hi}]")


def unscale_from_unit(
    u: ArrayLike, lower: float, upper: float, pad: float | None = None
) -> np.ndarray:
    """Inverse of ``scale_to_unit``: x = lower - pad + u (upper - lower + 2 pad), same shape.

    Synthetic values in (0, 1) map back into (lower - pad, upper + pad); round or clip to the
    bounds afterwards if a release must lie within them.
    """
    lo, hi = require_bounds("bounds", lower, upper)
    pad = unit_pad(lo, hi) if pad is None else pad
    arr = np.asarray(u, dtype=float)
    return lo - pad + arr * (hi - lo + 2 * pad)


def positive_to_scale(x: ArrayLike, lower: float, upper: float) -> np.ndarray:
    """A positive outcome (log-normal, gamma) within public bounds [lower, upper] on its Stan
    scale: with lower > 0, x / upper (a change of units only: log x moves by a constant that
    the intercept absorbs, so a log-normal of x stays a log-normal); with lower <= 0,
    :func:`scale_to_unit`, whose pad keeps a record at the lower bound (an income of 0) finite.

    Dividing alone matters: (x - lower + pad) / (upper - lower + 2 pad) would model x - lower,
    not x, and stretch the records near a positive lower bound (a weekly wage of 51 dollars
    under a bound of 50 sits at log 1.5, not log 51). Evidence: book/choices.md, section
    choices-positive-scale.
    """
    lo, hi = require_bounds("bounds", lower, upper)
    if lo <= 0:
        return scale_to_unit(x, lo, hi)
    arr = np.asarray(x, dtype=float)
    _require_within(arr, lo, hi)
    return arr / hi


def positive_from_scale(u: ArrayLike, lower: float, upper: float) -> np.ndarray:
    """Inverse of :func:`positive_to_scale` for synthetic records, clipped to [lower, upper]
    (a log-normal or gamma draw has no upper limit, and with lower > 0 some mass below it:
    clipping to public bounds is post-processing)."""
    lo, hi = require_bounds("bounds", lower, upper)
    arr = np.asarray(u, dtype=float)
    x = unscale_from_unit(arr, lo, hi) if lo <= 0 else arr * hi
    return np.clip(x, lo, hi)
