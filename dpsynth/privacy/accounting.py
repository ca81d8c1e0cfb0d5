"""Privacy: DP primitives, sensitivities, the budget ledger and Lipschitz accounting.

Everything that turns a privacy budget into noise or a bound lives here:

* the Laplace and exponential mechanisms (Liu, Definitions 2 and 4), the budget ledger
  (sequential and parallel composition, McSherry and Talwar 2007);
* the global sensitivities of the modips statistics (Liu, Sections 5.1 and 5.3) and the
  bounding of sanitized statistics (BIT or truncation);
* the Lipschitz accounting of the pseudo posterior mechanism: record bounds
  Delta_i = max_s |alpha_i f_theta_s(x_i)|, Delta = max_i Delta_i and epsilon = 2 Delta
  (Savitsky, Hu & Williams, Algorithm 1; Hu, Williams & Savitsky, Eq. 2.3 and 3.5).

Knows nothing of Stan. All randomness comes from an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from dpsynth.errors import (  # noqa: F401 - require_epsilon is privacy's API too
    EPSILON_RANGE,
    InputError,
    require_choice,
    require_epsilon,
    require_finite_positive,
)
from dpsynth.privacy import relations

Bounding = Literal["bit", "truncation"]
BOUNDINGS: tuple[str, ...] = ("bit", "truncation")

# ----------------------------------------------------------------------------- Lipschitz accounting

GUARANTEES = {
    "DP": "strict epsilon-DP under the stated neighbour definition",
    "aDP": (
        "asymptotic DP only: the local Lipschitz bound is computed from the posterior draws "
        "of the confidential data, so no finite-sample epsilon is established (the local "
        "epsilon is in the confidential diagnostics file)"
    ),
    "none": "no differential privacy guarantee",
    "not private (known seed)": (
        "no privacy: the release was made with a user-supplied seed, so anyone who has the "
        "seed can reproduce its noise and draws; the same mechanism with seeds from the "
        "operating system gives the guarantee stated under if_unseeded"
    ),
    "not established": (
        "strict DP not established: the mechanism clamps every contribution, but a premise "
        "of the proof is not established (the caveats say which: the MCMC diagnostics "
        "failed, and the proof assumes exact posterior draws; or the model is a whole user "
        "Stan program, tested but not proved to be the mechanism)"
    ),
}

NEIGHBOURS: tuple[str, ...] = relations.NEIGHBOURS
NEIGHBOUR_MEANING = {
    "substitution": (
        "bounded DP: neighbouring databases have the same number of records n (public) "
        "and differ in one record's values"
    ),
    "add-remove": (
        "unbounded DP: neighbouring databases differ by adding or removing one record; "
        "n is private, and the number of synthetic records is a public setting"
    ),
}

DROPPED_RECORDS_MAP = {
    "substitution": (
        "records with a missing value are dropped: substituting one record of the file "
        "changes the records kept by at most one substitution (a value present before and "
        "after) or one addition or removal (a value that becomes missing or present); the "
        "mechanism's bound is set for substitution, which covers both (censoring: epsilon "
        "= 4M for a substitution, 2M for an addition or removal; histogram: l1 sensitivity "
        "2 against 1), and the number of records kept stays private (the number of "
        "synthetic records is the public n_synthetic)"
    ),
    "add-remove": (
        "records with a missing value are dropped: adding or removing one record of the "
        "file adds or removes at most one record kept, so the add-remove bound holds for "
        "the records kept"
    ),
}
"""The neighbour map of a release that drops records with a missing value, per relation on
the file (the relation the mechanism's internal bound is set for is the same one; the
substitution bound covers an addition or removal, tested in ``tests/test_privacy.py``)."""


def require_public_bounds(bounds: Any, param: str = "bounds") -> tuple[float, float]:
    """Public bounds (lo, hi): two finite numbers with lo < hi (never read from the data)."""
    from dpsynth.errors import require_bounds

    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise InputError(param, "give exactly two numbers LO HI") from None
    return require_bounds(param, lo, hi)


def censor_bound(
    epsilon: float, neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS
) -> float:
    """Censoring bound M for one posterior draw at budget epsilon (censoring paper, Eq. 3.5).

    Every clamped contribution lies in [-M, M]: epsilon = 2M under add/remove (the paper's
    M = epsilon / 2), 4M under substitution. The map is stated once, in the censoring
    mechanisms' declaration (:func:`dpsynth.privacy.relations.censoring_map`).
    """
    require_choice("neighbours", neighbours, NEIGHBOURS)
    return relations.censoring_map(epsilon, neighbours)


def histogram_sensitivity(neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS) -> float:
    """l1 sensitivity of a count vector: 2 under substitution (a record moves), 1 add/remove.

    The Laplace scale at epsilon = 1 of PH's declared map (:func:`dpsynth.privacy.relations.histogram_map`).
    """
    require_choice("neighbours", neighbours, NEIGHBOURS)
    return relations.histogram_map(1.0, neighbours)


def weighted_contributions(
    log_lik: np.ndarray, alpha: np.ndarray, censor_bound: float | None = None
) -> np.ndarray:
    """alpha_i f_theta_s(x_i), clamped to [-M, M] when ``censor_bound`` M is given (Eq. 3.5).

    ``log_lik`` is the unweighted ``S x n`` matrix; records with alpha_i = 0
    contribute exactly 0 even where their log-likelihood is not finite.
    """
    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(alpha[None, :] > 0, alpha[None, :] * log_lik, 0.0)
    if censor_bound is not None:
        out = np.clip(out, -censor_bound, censor_bound)
    return out


def record_bounds(contributions: np.ndarray) -> np.ndarray:
    """Record-level bounds Delta_i = max_s |alpha_i f_theta_s(x_i)|, shape (n,)."""
    return np.max(np.abs(contributions), axis=0)


def lipschitz_bound(contributions: np.ndarray) -> float:
    """Database bound Delta = max_i Delta_i (Algorithm 1 step 7)."""
    return float(np.max(np.abs(contributions)))


def epsilon_of(
    lipschitz: float, neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS
) -> float:
    """epsilon of one draw with Lipschitz bound Delta: 2 Delta (add/remove, the papers), 4 Delta
    (substitution); the inverse of :func:`censor_bound`."""
    return float(lipschitz) * float(epsilon_of_unit(neighbours))


def epsilon_of_unit(neighbours: str) -> float:
    """epsilon per unit of Lipschitz bound under ``neighbours`` (2 or 4)."""
    return 1.0 / censor_bound(1.0, neighbours)


def censored_records(raw_contributions: np.ndarray, censor_bound: float) -> np.ndarray:
    """Mask (n,): records whose weighted contribution is clamped in any retained draw."""
    return np.any(np.abs(raw_contributions) > censor_bound, axis=0)


# ----------------------------------------------------------------------------- primitives

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


class SecureGenerator(np.random.Generator):
    """A generator seeded from the operating system whose Laplace noise comes from OpenDP.

    Everything that is not privacy noise (posterior draws, bin choices, uniform positions)
    uses the OS-seeded PCG64 stream as usual. Laplace noise is drawn by OpenDP's
    floating-point-safe sampler (the release is rounded to a lattice and the noise sampled
    exactly, so the low-order bits of a noisy value carry nothing: Mironov 2012's attack on
    naive floating-point Laplace does not apply). Use :func:`secure_generator`.
    """

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        """Laplace(loc, scale) draws through OpenDP (``loc`` is the value being released)."""
        shape = np.broadcast_shapes(
            np.shape(loc),
            np.shape(scale),
            () if size is None else ((size,) if isinstance(size, int) else tuple(size)),
        )
        locs = np.broadcast_to(np.asarray(loc, dtype=float), shape)
        scales = np.broadcast_to(np.asarray(scale, dtype=float), shape)
        out = np.empty(shape)
        for b in np.unique(scales):
            mask = scales == b
            out[mask] = opendp_laplace(locs[mask], float(b))
        return out.item() if size is None and out.ndim == 0 else out


def secure_generator() -> SecureGenerator:
    """A :class:`SecureGenerator` seeded from the operating system's entropy."""
    return SecureGenerator(np.random.PCG64(np.random.SeedSequence()))


def opendp_laplace(values: np.ndarray, scale: float) -> np.ndarray:
    """``values`` + Laplace(0, scale) noise, element-wise, by OpenDP's vetted sampler.

    OpenDP's ``make_laplace`` on a vector of floats with the l1 metric: its privacy map at
    input distance d is d / scale, which is how :func:`laplace_scale` chooses ``scale``.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        return arr.copy()
    if not (np.isfinite(scale) and scale > 0):
        raise InputError("epsilon", "gives a noise scale that is not a finite positive number")
    meas = _opendp_measurement(float(scale))
    return np.asarray(meas(arr.tolist()), dtype=float).reshape(np.shape(values))


@functools.lru_cache(maxsize=64)
def _opendp_measurement(scale: float) -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    return dp.m.make_laplace(*space, scale=scale)


def laplace_mechanism(
    value: float | np.ndarray,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> float | np.ndarray:
    """Release ``value + Laplace(0, sensitivity/epsilon)`` noise, one independent draw per element.

    Liu, Definition 2. ``sensitivity`` is the l1 global sensitivity of the whole (vector) statistic,
    so the release of an r-vector is ε-DP. Scalar in, float out; array in, same-shape array out.
    With ``rng`` None or a :class:`SecureGenerator` the noise comes from OpenDP; a plain
    numpy generator (seeded simulations, not private releases) uses numpy's sampler.
    """
    b = laplace_scale(sensitivity, epsilon)
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        raise InputError("value", "must not be empty")
    if not np.all(np.isfinite(arr)):
        raise InputError("value", "must be finite (got NaN or inf)")
    if rng is None or isinstance(rng, SecureGenerator):
        noisy = opendp_laplace(arr, b)
    else:
        require_generator(rng)
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


@dataclass
class BudgetLedger:
    """Privacy-budget ledger of one run: records every spend and refuses to overspend.

    Sequential composition: spends on the same data add up. Parallel composition: a group of
    spends on disjoint subsets of the data costs the maximum of its ε's (Liu, Section 2.1).
    ``param`` is the library's name of the budget (e.g. ``"epsilon"``) used in errors.
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
        return [asdict(s) for s in self._spends]

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


# ----------------------------------------------------------------------------- sensitivities


def sensitivity_proportion(n: int) -> float:
    """GS of a sample proportion under substitution: 1/n (Liu, Section 5.1)."""
    return 1.0 / n


def sensitivity_mean(lower: float, upper: float, n: int) -> float:
    """GS of the sample mean of data in [c0, c1]: (c1 - c0)/n (Liu, Section 5.1; Liu 2019b)."""
    return (upper - lower) / n


def sensitivity_variance(lower: float, upper: float, n: int) -> float:
    """GS of the sample variance (divisor n-1) of data in [c0, c1]: (c1 - c0)^2/n (Liu, Sec 5.3)."""
    return (upper - lower) ** 2 / n


def variance_upper_bound(lower: float, upper: float, n: int) -> float:
    """Largest sample variance (divisor n-1) of n values in [c0, c1]: n (c1-c0)^2 / (4(n-1))."""
    return n * (upper - lower) ** 2 / (4.0 * (n - 1))


# ----------------------------------------------------------------------------- bounding


def truncated_laplace(
    loc: np.ndarray | float,
    scale: float,
    lower: float,
    upper: float,
    rng: np.random.Generator,
) -> np.ndarray | float:
    """Draw Laplace(loc, scale) conditioned on [lower, upper] (draws out of bounds dropped).

    Equivalent to rejection sampling: in-bound draws are kept, rejected ones are redrawn
    exactly from the conditional law by inverse CDF (no loop).

    ``loc`` scalar or array (each must lie in [lower, upper]); output has the shape of ``loc``.
    """
    mu = np.asarray(loc, dtype=float)
    if rng is None or isinstance(rng, SecureGenerator):
        return _truncated_by_rejection(mu, scale, lower, upper, np.ndim(loc) == 0)
    y = mu + rng.laplace(0.0, scale, size=mu.shape)
    bad = (y < lower) | (y > upper)
    if np.any(bad):  # rejected draws: redraw from the conditional law exactly, by inverse CDF
        mb = np.broadcast_to(mu, y.shape)[bad]

        def cdf(v: float) -> np.ndarray:
            z = (v - mb) / scale
            return np.where(
                z < 0,
                0.5 * np.exp(np.minimum(z, 0)),
                1 - 0.5 * np.exp(-np.maximum(z, 0)),
            )

        lo_p, hi_p = cdf(lower), cdf(upper)
        u = np.clip(lo_p + (hi_p - lo_p) * rng.random(mb.shape), 1e-300, 1 - 1e-16)
        y = np.array(y, dtype=float)
        y[bad] = np.where(u < 0.5, mb + scale * np.log(2 * u), mb - scale * np.log(2 * (1 - u)))
    y = np.clip(y, lower, upper)
    return float(y) if np.ndim(loc) == 0 else y


def _truncated_by_rejection(
    mu: np.ndarray, scale: float, lower: float, upper: float, scalar: bool, rounds: int = 10_000
) -> np.ndarray | float:
    """Rejection sampling with OpenDP's sampler: redraw out-of-bound releases until in bounds."""
    y = np.array(opendp_laplace(mu, scale), dtype=float).reshape(mu.shape)
    for _ in range(rounds):
        bad = (y < lower) | (y > upper)
        if not np.any(bad):
            break
        y[bad] = opendp_laplace(np.broadcast_to(mu, y.shape)[bad], scale)
    else:
        raise InputError("bounds", "truncated Laplace: no in-bound draw after 10,000 rounds")
    return float(y) if scalar else y


def sanitize_bounded(
    value: np.ndarray | float,
    sensitivity: float,
    epsilon: float,
    lower: float,
    upper: float,
    bounding: Bounding,
    rng: np.random.Generator,
    strict_truncation: bool = True,
) -> np.ndarray | float:
    """Laplace-sanitize a statistic, then legitimize it to [lower, upper] (Liu, Sec 5.1; Liu 2019b).

    BIT: out-of-bound releases are set to the nearest bound (post-processing, ε-DP).
    Truncation: out-of-bound releases are thrown away and redrawn, i.e. a draw from the
    Laplace law conditioned on the bounds. Its normalizing constant depends on the data, so a
    truncated release at Laplace budget ε is only 2ε-DP; with ``strict_truncation`` (default)
    the Laplace noise is drawn at ε/2 so that the release is ε-DP. ``False`` replicates the paper.
    """
    require_choice("bounding", bounding, BOUNDINGS)
    if bounding == "bit":
        return np.clip(laplace_mechanism(value, sensitivity, epsilon, rng), lower, upper)
    eps_noise = epsilon / 2.0 if strict_truncation else epsilon
    return truncated_laplace(value, laplace_scale(sensitivity, eps_noise), lower, upper, rng)
