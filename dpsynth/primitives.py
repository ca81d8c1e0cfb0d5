"""DP primitives: Laplace and exponential mechanisms, and the privacy-budget ledger.

Liu (modips), Section 2.1: Definition 2 (Laplace mechanism), Definition 4 (exponential
mechanism), sequential and parallel composition (McSherry and Talwar, 2007).
All randomness comes from an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpsynth.errors import InputError, require_finite_positive

__all__ = [
    "BudgetExceededError",
    "BudgetLedger",
    "exponential_mechanism",
    "exponential_probabilities",
    "laplace_mechanism",
    "laplace_scale",
    "require_generator",
]

#: Relative slack when comparing sums of floating-point budgets (e.g. m * (eps / m) vs eps).
_BUDGET_RTOL = 1e-9


def require_generator(rng: Any, param: str = "rng") -> np.random.Generator:
    """Return ``rng`` if it is a ``numpy.random.Generator``, else raise InputError."""
    if not isinstance(rng, np.random.Generator):
        raise InputError(param, f"must be a numpy.random.Generator (got {type(rng).__name__})")
    return rng


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale b = Δ / ε of the Laplace mechanism (Liu, Definition 2); same units as the statistic."""
    d = require_finite_positive("sensitivity", sensitivity)
    e = require_finite_positive("epsilon", epsilon)
    return d / e


def laplace_mechanism(
    value: float | np.ndarray,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> float | np.ndarray:
    """Release ``value + Laplace(0, sensitivity/epsilon)`` noise, one independent draw per element.

    Liu, Definition 2. ``sensitivity`` is the l1 global sensitivity of the whole (vector) statistic,
    so the release of an r-vector is ε-DP. Scalar in, float out; array in, same-shape array out.
    """
    b = laplace_scale(sensitivity, epsilon)
    require_generator(rng)
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        raise InputError("value", "must not be empty")
    if not np.all(np.isfinite(arr)):
        raise InputError("value", "must be finite (got NaN or inf)")
    noisy = arr + rng.laplace(0.0, b, size=arr.shape)
    if np.ndim(value) == 0:
        return float(noisy)
    return noisy


def _check_utilities(utilities: np.ndarray) -> np.ndarray:
    u = np.asarray(utilities, dtype=float)
    if u.ndim != 1 or u.size == 0:
        raise InputError("utilities", "must be a non-empty 1-D array")
    if not np.all(np.isfinite(u)):
        raise InputError("utilities", "must be finite (got NaN or inf)")
    return u


def exponential_probabilities(
    utilities: np.ndarray, sensitivity: float, epsilon: float
) -> np.ndarray:
    """Selection probabilities ∝ exp(ε u_k / (2 Δu)) of the exponential mechanism (Liu, Def 4).

    ``utilities`` shape (K,); returns shape (K,), summing to 1 (computed stably, max-shifted).
    """
    u = _check_utilities(utilities)
    d = require_finite_positive("sensitivity", sensitivity)
    e = require_finite_positive("epsilon", epsilon)
    logits = e * u / (2.0 * d)
    logits -= logits.max()
    w = np.exp(logits)
    return w / w.sum()


def exponential_mechanism(
    utilities: np.ndarray,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> int:
    """Select index k with probability ∝ exp(ε u_k / (2 Δu)) (Liu, Definition 4); ε-DP.

    ``utilities`` shape (K,): scores u(s_k | x) of the K candidates; ``sensitivity`` is Δu.
    """
    p = exponential_probabilities(utilities, sensitivity, epsilon)
    require_generator(rng)
    return int(rng.choice(p.size, p=p))


class BudgetExceededError(InputError):
    """A spend would take the ledger past its total budget; ``param`` names the budget parameter."""


@dataclass
class _Spend:
    what: str
    epsilon: float
    data: str
    composition: str
    group: int
    charged: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "epsilon": self.epsilon,
            "data": self.data,
            "composition": self.composition,
            "group": self.group,
            "charged": self.charged,
        }


@dataclass
class BudgetLedger:
    """Privacy-budget ledger of one run: records every spend and refuses to overspend.

    Sequential composition: spends on the same data add up. Parallel composition: a group of
    spends on disjoint subsets of the data costs the maximum of its ε's (Liu, Section 2.1).
    ``param`` is the user-facing name of the budget (e.g. ``"--epsilon"``) used in errors.
    """

    total: float
    param: str = "epsilon"
    _spends: list[_Spend] = field(default_factory=list, repr=False)
    _groups: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.total = require_finite_positive(self.param, self.total)

    @property
    def spent(self) -> float:
        """Total ε charged so far under sequential + parallel composition."""
        return math.fsum(s.charged for s in self._spends)

    @property
    def remaining(self) -> float:
        """Budget left (never negative)."""
        return max(self.total - self.spent, 0.0)

    @property
    def spends(self) -> list[dict[str, Any]]:
        """Copy of the recorded spends, in order."""
        return [s.as_dict() for s in self._spends]

    def _check(self, cost: float, what: str) -> None:
        if self.spent + cost > self.total * (1.0 + _BUDGET_RTOL):
            raise BudgetExceededError(
                self.param,
                f"privacy budget exceeded by {what!r}: spent {self.spent:.6g} + {cost:.6g} "
                f"> total {self.total:.6g}",
            )

    def spend(self, what: str, epsilon: float, data: str = "all") -> float:
        """Record one ε spend on ``data`` (sequential composition); return ε; no overspend."""
        e = require_finite_positive(self.param, epsilon)
        self._check(e, what)
        self._groups += 1
        self._spends.append(_Spend(what, e, str(data), "sequential", self._groups, e))
        return e

    def spend_parallel(self, what: str, epsilons: dict[str, float]) -> float:
        """Record spends on disjoint subsets ``{name: ε}``; charge max ε (parallel composition)."""
        if not epsilons:
            raise InputError(self.param, "parallel spend needs at least one subset")
        eps = {k: require_finite_positive(self.param, v) for k, v in epsilons.items()}
        cost = max(eps.values())
        self._check(cost, what)
        self._groups += 1
        first = True
        for data, e in eps.items():
            self._spends.append(
                _Spend(what, e, str(data), "parallel", self._groups, cost if first else 0.0)
            )
            first = False
        return cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable summary: every spend plus totals (for release reports)."""
        return {
            "total": self.total,
            "spent": self.spent,
            "remaining": self.remaining,
            "spends": self.spends,
        }
