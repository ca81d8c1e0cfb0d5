"""Errors that name the offending parameter (the CLI turns them into exit status 2)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where it is used: the CLI checks arguments without it
    import numpy as np

EPSILON_RANGE = (1e-6, 1e3)
"""Accepted total budgets: below 1e-6 the noise scales overflow; above 1e3 no privacy is left."""


SWITCHES: tuple[str, ...] = ("allow_large_epsilon", "clip_to_bounds", "drop_missing")
"""The library's on/off settings: a message names one as ``name=True`` (a mention)."""


class InputError(ValueError):
    """Bad user input; ``param`` names the parameter at fault.

    The message always starts with the parameter name so that a one-line CLI
    error tells the user what to fix, e.g. ``--epsilon: must be > 0 and finite (got -1)``.
    ``mentions`` are the other parameters the message names (a switch of :data:`SWITCHES`
    written ``name=True`` is one whether listed or not): :meth:`render` spells the
    parameter and each mention as a caller's interface names them (the CLI: its flags).
    """

    def __init__(self, param: str, message: str, *, mentions: Sequence[str] = ()) -> None:
        self.param = param
        self.message = message
        found = [s for s in SWITCHES if f"{s}=True" in message and s not in mentions]
        self.mentions: tuple[str, ...] = (*mentions, *found)
        super().__init__(f"{param}: {message}")

    def render(self, name: Callable[[str], str]) -> str:
        """The message with ``param`` and every mention spelled by ``name`` (library name
        -> the caller's word); a switch's ``name=True`` becomes that word alone."""
        body = self.message
        for mention in self.mentions:
            word = name(mention)
            if word != mention:  # a caller without a word of its own keeps the library's
                spelled = f"{mention}=True" if mention in SWITCHES else mention
                body = body.replace(spelled, word)
        return f"{name(self.param)}: {body}"


def require_in_range(param: str, value: Any, lo: int, hi: int) -> int:
    """An integer setting in ``[lo, hi]`` (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(param, f"must be an integer (got {value!r})")
    if not lo <= value <= hi:
        raise InputError(param, f"must lie in [{lo}, {hi:,}] (got {value})")
    return int(value)


def require_finite_positive(param: str, value: float) -> float:
    """Return ``value`` as float if it is finite and > 0, else raise InputError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(param, f"must be a number (got {value!r})") from None
    if not (v > 0 and v < float("inf")):
        raise InputError(param, f"must be > 0 and finite (got {value!r})")
    return v


EPSILON_SANITY_LIMIT = 20.0
"""The largest total epsilon of one release accepted without ``allow_large_epsilon``.

epsilon bounds the factor e^epsilon by which a release can change anyone's odds about one
record: e^20 is about 4.9e8, so above 20 the guarantee protects nothing worth the name.
20 is also about the largest total a statistical agency has published for a whole product
(the 2020 US Census redistricting data: 17.14 for persons plus 2.47 for housing units).
"""


def require_adapt_delta(param: str, value: float) -> None:
    """Stan's step-size target must lie in [0.5, 1) (:class:`dpsynth.sampler.Sampler`'s rule)."""
    if not 0.5 <= float(value) < 1:
        raise InputError(param, f"must lie in [0.5, 1) (got {value!r})")


def require_sane_epsilon(param: str, epsilon: float, allow_large: bool) -> None:
    """Refuse a total epsilon above :data:`EPSILON_SANITY_LIMIT` unless explicitly allowed."""
    if epsilon > EPSILON_SANITY_LIMIT and not allow_large:
        raise InputError(
            param,
            f"{epsilon:g} is above dpsynth's sanity limit of {EPSILON_SANITY_LIMIT:g} per "
            f"release (e^epsilon = {math.exp(min(epsilon, 700)):.3g}: the guarantee then "
            "protects almost nothing); pass allow_large_epsilon=True if you mean it",
            mentions=("allow_large_epsilon",),
        )


def require_epsilon(param: str, value: Any) -> float:
    """A privacy budget: a finite number in :data:`EPSILON_RANGE`."""
    eps = require_finite_positive(param, value)
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        raise InputError(param, f"must lie in [{lo:g}, {hi:g}] (got {value!r})")
    return eps


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


FROM_DATA = "CONFIDENTIAL, from the data"
"""The banner of a refusal's words read from the confidential data."""


def from_data(text: str) -> str:
    """A refusal's words read from the data (a count, a record's position), under the
    CONFIDENTIAL banner: the only way such a value reaches the terminal in an error."""
    return f"[{FROM_DATA}: {text}]"


def count_first(mask: Any, noun: str) -> str:
    """How many of ``mask`` are true and the first one's record number (1-based), for
    :func:`from_data`: "3 value(s), the first at record 7"."""
    import numpy as np

    hits = np.flatnonzero(np.asarray(mask))
    return f"{hits.size} {noun}(s), the first at record {int(hits[0]) + 1}"


class DataRefusal(InputError):
    """A refusal of some records of the data: ``head``, then under the CONFIDENTIAL banner
    how many (``hits``, None: not counted) and the first one's record number (1-based),
    then ``tail``. Made from a part of a table (:meth:`at` its place, :meth:`merged` a later
    part's count), it reads as the whole table's refusal."""

    def __init__(
        self, param: str, head: str, noun: str, hits: int | None, first: int, tail: str = ""
    ) -> None:
        self.head, self.noun, self.hits, self.first, self.tail = head, noun, hits, first, tail
        where = f"record {first}"
        text = where if hits is None else f"{hits} {noun}(s), the first at {where}"
        super().__init__(param, f"{head}{from_data(text)}{tail}")

    def at(self, offset: int) -> DataRefusal:
        """This refusal of a part whose first record is the table's record ``offset + 1``."""
        return DataRefusal(
            self.param, self.head, self.noun, self.hits, self.first + offset, self.tail
        )

    def merged(self, later: DataRefusal) -> DataRefusal:
        """This refusal with a later part's records of the same kind added to its count."""
        hits = None if self.hits is None or later.hits is None else self.hits + later.hits
        return DataRefusal(self.param, self.head, self.noun, hits, self.first, self.tail)


def refuse_records(param: str, head: str, mask: Any, noun: str, tail: str = "") -> None:
    """Raise :class:`DataRefusal` for the records where ``mask`` is true, if any (the
    refusal reads as :func:`count_first`'s: "3 value(s), the first at record 7")."""
    import numpy as np

    hits = np.flatnonzero(np.asarray(mask))
    if hits.size:
        raise DataRefusal(param, head, noun, int(hits.size), int(hits[0]) + 1, tail)


def require_data(x: Any, param: str = "x", min_n: int = 1) -> np.ndarray:
    """Return ``x`` as a finite 1-D float array of length >= ``min_n`` or raise InputError."""
    import numpy as np

    arr = np.asarray(x, dtype=float).reshape(-1)
    if arr.size == 0:
        raise InputError(param, "data are empty")
    if np.isnan(arr).any():
        n_nan = int(np.isnan(arr).sum())
        raise InputError(param, f"data contain NaN values {from_data(f'{n_nan} value(s)')}")
    if not np.isfinite(arr).all():
        raise InputError(param, "data contain infinite values")
    if arr.size < min_n:
        raise InputError(param, f"need at least {min_n} records (got {arr.size})")
    return arr


def require_m(m: Any, param: str = "m") -> int:
    """Number of synthetic datasets: an integer >= 1."""
    if isinstance(m, bool) or not float(m).is_integer() or int(m) < 1:
        raise InputError(param, f"must be an integer >= 1 (got {m!r})")
    return int(m)


def require_downscale(value: Any, column: str | None = None) -> float:
    """``downscale`` (Censor_w's Section 4.4, Censor_uw's constant weight), checked before
    any data is read: a number in (0, 1]. ``column``: a table column's, which may also be
    "auto" (handled by the spec before this check)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not (ok and 0 < value <= 1):
        where = "" if column is None else f"column {column!r}: "
        either = "" if column is None else ' or be "auto"'
        raise InputError("downscale", f"{where}must lie in (0, 1]{either} (got {value!r})")
    return float(value)


def require_choice(param: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise InputError(param, f"must be one of {', '.join(choices)} (got {value!r})")
    return value


# Data-independent rules of a release's settings: the library's settings and the command line
# call the same functions (the command line before any budget is charged).


def require_public_size(neighbours: str, n_synthetic: Any, has_covariates: bool) -> int | None:
    """``n_synthetic`` a public count; add-remove needs it (n is private) and refuses covariates;
    a regression writes one record per covariate row, so it takes no ``n_synthetic``."""
    n = None if n_synthetic is None else require_m(n_synthetic, "n_synthetic")
    if n is not None and has_covariates and neighbours != "add-remove":
        raise InputError(
            "n_synthetic",
            "a regression synthesizes one record per (public) covariate row: leave n_synthetic out",
        )
    if neighbours != "add-remove":
        return n
    if n is None:
        raise InputError(
            "n_synthetic",
            "add-remove neighbours make n private: give the number of synthetic records as a "
            "public number",
        )
    if has_covariates:
        raise InputError(
            "neighbours", "a regression's covariates are public, so n is public: use substitution"
        )
    return n


def require_drop_missing_usage(
    drop: bool, mechanism: str, has_covariates: bool, n_synthetic: Any, needs_public_n: bool
) -> None:
    """Where dropping records with a missing value would leak or break a bound: refused.

    Without covariates, dropping records with a missing outcome makes the number kept
    private, so the number of synthetic records must be public. In a regression only records
    with a missing (public) covariate are dropped, a public selection: n stays public (a
    missing outcome there is refused when the data are read).
    """
    if not drop or has_covariates:
        return
    if n_synthetic is None:
        raise InputError(
            "n_synthetic",
            "with drop_missing=True the number of records kept is private: give the number "
            "of synthetic records as a public number",
        )
    if needs_public_n:  # the declaration's capability (registry.needs_public_n)
        raise InputError(
            "drop_missing", f"does not apply to {mechanism} (its sensitivities need n public)"
        )


def require_clip_bounds(clip: bool, bounds: Any) -> None:
    """Clipping to the bounds needs public bounds."""
    if clip and bounds is None:
        raise InputError("clip_to_bounds", "needs public bounds")
