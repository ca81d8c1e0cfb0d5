"""Errors that name the offending parameter (the CLI turns them into exit status 2)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input; ``param`` names the parameter at fault.

    The message always starts with the parameter name so that a one-line CLI
    error tells the user what to fix, e.g. ``--epsilon: must be > 0 and finite (got -1)``.
    """

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(f"{param}: {message}")


def require_finite_positive(param: str, value: float) -> float:
    """Return ``value`` as float if it is finite and > 0, else raise InputError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(param, f"must be a number (got {value!r})") from None
    if not (v > 0 and v < float("inf")):
        raise InputError(param, f"must be > 0 and finite (got {value!r})")
    return v


def require_bounds(param: str, lower: float, upper: float) -> tuple[float, float]:
    """Validate public bounds: both finite and lower < upper."""
    try:
        lo, hi = float(lower), float(upper)
    except (TypeError, ValueError):
        raise InputError(param, f"bounds must be numbers (got {lower!r}, {upper!r})") from None
    if not (abs(lo) < float("inf") and abs(hi) < float("inf")):
        raise InputError(param, f"bounds must be finite (got {lo}, {hi})")
    if not lo < hi:
        raise InputError(param, f"lower bound must be < upper bound (got {lo} >= {hi})")
    return lo, hi
