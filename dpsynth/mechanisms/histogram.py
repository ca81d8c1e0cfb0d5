"""Histogram synthesizers: the perturbed histogram (PH) and modips' model-free synthesis.

* :func:`perturbed_histogram`: the 1-D perturbed histogram of the censoring paper
  (Hu, Williams & Savitsky, supplement S1) on public bounds.
* :func:`histogram_synthesis`: Liu's model-free synthesis from a Laplace-sanitized
  histogram (Section 3.5, Figure 5), in any dimension.
* Data-independent bin edges shared by both and by modips' SDD / SDD.MC / SPHC.

Neighbours: substitution of one record (n public); a moved record changes two counts
by one, so the count vector's l1 sensitivity is 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dpsynth import errors
from dpsynth.errors import InputError
from dpsynth.mechanisms.registry import PH_CONSISTENCY, PH_DRAWS
from dpsynth.privacy import relations
from dpsynth.privacy.accounting import (
    histogram_sensitivity,
    laplace_mechanism,
    require_generator,
    secure_generator,
)

# ----------------------------------------------------------------------------- bin edges


# ------------------------------------------------------------------------- discretized posteriors


def make_edges(support: Any, bins: int | Sequence[int]) -> list[np.ndarray]:
    """Data-independent equal-width bin edges per dimension; support (p, 2), bins int or (p,)."""
    sup = np.atleast_2d(np.asarray(support, dtype=float))
    if sup.ndim != 2 or sup.shape[1] != 2:
        raise InputError("support", "must have shape (p, 2): one (lower, upper) per parameter")
    b = np.broadcast_to(np.asarray(bins), (sup.shape[0],))
    edges = []
    for (lo, hi), k in zip(sup, b, strict=True):
        errors.require_bounds("support", lo, hi)
        if int(k) < 1:
            raise InputError("bins", f"must be >= 1 (got {k})")
        edges.append(np.linspace(lo, hi, int(k) + 1))
    return edges


def bin_volumes(edges: list[np.ndarray]) -> np.ndarray:
    vol = np.diff(edges[0])
    for e in edges[1:]:
        vol = np.multiply.outer(vol, np.diff(e))
    return vol.reshape(-1)


def uniform_in_bin(edges: list[np.ndarray], flat: Any, rng: np.random.Generator) -> np.ndarray:
    """Uniform draw(s) inside the bin(s) with flat index ``flat``: shape (p,) or (len(flat), p)."""
    idx = np.unravel_index(np.asarray(flat), tuple(len(e) - 1 for e in edges))
    cols = [rng.uniform(e[i], e[i + 1]) for e, i in zip(edges, idx, strict=True)]
    return np.stack(cols, axis=-1)


# ----------------------------------------------------------------------------- PH (1-D)


MAX_BINS = 10_000_000
"""More bins than this would not fit in memory for the noisy counts of m sets."""


def _histogram_data(
    y: Any, lo: float, hi: float, integer: bool, first: int = 1, empty: bool = False
) -> np.ndarray:
    """``y`` as a float array, refused (naming a record's position, ``first`` the first's,
    under the CONFIDENTIAL banner, never a value) when empty (unless ``empty``), missing,
    infinite, outside [lo, hi] or, with ``integer``, not an integer."""
    x = np.asarray(y, dtype=float).ravel()
    if x.size == 0 and not empty:
        raise InputError("y", "the data are empty")
    bad = np.flatnonzero(~np.isfinite(x) | (x < lo) | (x > hi))
    if bad.size:
        head = "a record is missing, infinite or outside the public bounds "
        raise errors.DataRefusal("y", head, "record", None, int(bad[0]) + first)
    if integer and (lo != round(lo) or hi != round(hi)):
        raise InputError("bounds", "integer (count) data need integer bounds")
    fractional = np.flatnonzero(x != np.round(x)) if integer else np.array([], dtype=int)
    if fractional.size:
        head = "a record is not an integer "
        raise errors.DataRefusal("y", head, "record", None, int(fractional[0]) + first)
    return x


@dataclass(frozen=True)
class CellCounts:
    """Integer records held as their histogram: how many take each integer of the public
    bounds [lo, hi] (``counts[i]``: the value lo + i). What the perturbed histogram reads of
    integer records (its unit bins' counts), and what a curator's figures of them need; made
    a partition at a time and added (``+``), so that no record need be held."""

    lo: int
    counts: np.ndarray  # int64, one per integer of [lo, hi]

    @classmethod
    def of(cls, values: Any, bounds: tuple[float, float], first: int = 1) -> CellCounts:
        """The counts of integer ``values`` within public ``bounds`` (refused as
        :func:`perturbed_histogram` refuses them; ``first``: the first value's record)."""
        lo, hi = errors.require_bounds("bounds", *bounds)
        return cls(int(lo), np.zeros(int(hi - lo) + 1, np.int64)).alike(values, first)

    @classmethod
    def of_codes(cls, codes: np.ndarray, k: int) -> CellCounts:
        """The counts of 0-based codes of k public cells (codes the caller has checked)."""
        counts = np.bincount(np.asarray(codes).astype(np.int64), minlength=k)
        if counts.size != k:
            raise InputError("codes", f"a code outside the {k} public cells")
        return cls(0, counts)

    def alike(self, values: Any, first: int = 1) -> CellCounts:
        """Integer ``values`` (e.g. a synthetic set) counted on these counts' bounds
        (``first``: the first value's record, in a refusal)."""
        x = _histogram_data(values, self.lo, self.hi, True, first, empty=True)
        k = self.counts.size
        return CellCounts(self.lo, np.bincount((x - self.lo).astype(np.int64), minlength=k))

    @property
    def n(self) -> int:
        """The number of records."""
        return int(self.counts.sum())

    @property
    def hi(self) -> int:
        """The upper public bound."""
        return self.lo + self.counts.size - 1

    @property
    def support(self) -> np.ndarray:
        """The integers lo, ..., hi, as floats."""
        return np.arange(self.lo, self.hi + 1, dtype=float)

    def __add__(self, other: CellCounts) -> CellCounts:
        if (other.lo, other.hi) != (self.lo, self.hi):
            raise InputError("counts", "counts on different bounds cannot be added")
        return CellCounts(self.lo, self.counts + other.counts)

    def records(self) -> np.ndarray:
        """The records themselves, in ascending order (n values)."""
        return np.repeat(self.support, self.counts)


def _input_counts(
    y: Any, lo: float, hi: float, integer: bool, k: int | None
) -> tuple[CellCounts | np.ndarray, int]:
    """What :func:`perturbed_histogram` reads of ``y``: its checked values, or ``y`` itself
    when given as :class:`CellCounts` (integer records on the same bounds), and n."""
    if not isinstance(y, CellCounts):
        x = _histogram_data(y, lo, hi, integer)
        return x, x.size
    if not integer or (y.lo, y.hi) != (lo, hi) or (k is not None and k != y.counts.size):
        raise InputError("y", "counts are read with integer=True, on the same bounds")
    if y.n == 0:
        raise InputError("y", "the data are empty")
    return y, y.n


def perturbed_histogram(
    y: Any,
    bounds: tuple[float, float] | None,
    epsilon: float,
    rng: np.random.Generator | None = None,
    *,
    n_bins: int | None = None,
    m: int = 1,
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    n_synthetic: int | None = None,
    integer: bool = False,
    bin_rule: str = "sqrt",
    consistency: str = "clamp",
    draw: str = "iid",
) -> np.ndarray:
    """Perturbed histogram synthesizer (censoring paper, supplement S1); returns m x N values.

    ``y``: the records, or integer ones as their :class:`CellCounts` (the same release).
    Public ``bounds`` [LO, HI] are required (never read from the data). The number of bins
    is data-independent (``bin_rule``, :func:`ph_bins`); with ``integer`` (counts) one unit
    bin per integer in [LO, HI] and integer synthetic values. Counts get Laplace noise of
    scale sensitivity/epsilon (sensitivity 2 under substitution, a record moves between
    bins; 1 under add/remove), then made non-negative by ``consistency``
    (:func:`consistent_counts`: "clamp", the supplement's negatives set to 0, or "simplex"),
    and each synthetic value is drawn in a bin chosen with probability proportional to its
    count (uniformly within the bin; all bins equally if every noisy count is 0),
    independently (``draw`` "iid", the supplement's) or systematically
    (:func:`drawn_cells`). Each of the m sets is a fresh ``epsilon``-DP release. N is n
    under substitution and the public ``n_synthetic`` under add/remove (where n is private).
    ``rng`` None draws OpenDP noise from the OS.
    """
    if bounds is None:
        raise InputError("bounds", "the perturbed histogram needs public bounds LO HI")
    lo, hi = errors.require_bounds("bounds", *bounds)
    epsilon = errors.require_finite_positive("epsilon", epsilon)
    m = errors.require_m(m)
    errors.require_choice("consistency", consistency, PH_CONSISTENCY)
    errors.require_choice("draw", draw, PH_DRAWS)
    sens = histogram_sensitivity(neighbours)
    x, n = _input_counts(y, lo, hi, integer, n_bins)
    n_out = n if n_synthetic is None else errors.require_m(n_synthetic, "n_synthetic")
    if neighbours == "add-remove" and n_synthetic is None:
        raise InputError("n_synthetic", "add/remove neighbours need a public number of records")
    # The bin rule may only see public numbers: n under substitution, N under add/remove.
    n_public = n_out if neighbours == "add-remove" else n
    if n_bins is None:
        k = ph_bins(n_public, (lo, hi), integer, rule=bin_rule)
    else:
        k = errors.require_m(n_bins, "n_bins")
    if k > MAX_BINS:
        raise InputError("n_bins", f"at most {MAX_BINS:,} bins (got {k:,})")
    edges = ph_edges((lo, hi), k, integer)
    if integer:
        given = isinstance(x, CellCounts)
        counts = x.counts if given else np.bincount((x - lo).astype(np.int64), minlength=k)
        counts = counts.astype(float)
    else:
        counts = np.histogram(x, bins=edges)[0].astype(float)
    gen = secure_generator() if rng is None else require_generator(rng)
    sets = []
    for _ in range(m):
        noisy = laplace_mechanism(counts, sens, epsilon, gen)
        noisy = consistent_counts(noisy, consistency)
        p = noisy / noisy.sum() if noisy.sum() > 0 else np.full(k, 1.0 / k)
        bins = _drawn_bins(p, n_out, gen, draw)
        if integer:
            sets.append(lo + bins.astype(float))
        else:
            sets.append(gen.uniform(edges[bins], edges[bins + 1]))
    return np.vstack(sets)


def ph_edges(bounds: tuple[float, float], k: int, integer: bool) -> np.ndarray:
    """The edges of PH's k public bins on ``bounds`` [LO, HI]: unit bins centred on the
    integers with ``integer`` (a value is its bin's centre), else k equal-width bins (a value
    is uniform within its bin)."""
    lo, hi = bounds
    return np.arange(lo, hi + 2) - 0.5 if integer else np.linspace(lo, hi, k + 1)


def sample_bins(values: np.ndarray, edges: np.ndarray, integer: bool) -> np.ndarray:
    """The bin of each value of a PH sample on ``edges`` (:func:`ph_edges`)."""
    if integer:
        return np.rint(values - (edges[0] + 0.5)).astype(np.int64)
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, edges.size - 2)


def values_in_bins(
    bins: np.ndarray, edges: np.ndarray, integer: bool, rng: np.random.Generator
) -> np.ndarray:
    """A PH sample's values given their bins (:func:`sample_bins`): a unit bin's integer,
    else uniform within the bin, as :func:`perturbed_histogram` draws them."""
    if integer:
        return np.rint(edges[bins] + 0.5)
    return rng.uniform(edges[bins], edges[bins + 1])


def _drawn_bins(p: np.ndarray, n_out: int, gen: np.random.Generator, draw: str) -> np.ndarray:
    """n_out bins drawn with shares p: "iid" by ``choice`` (the supplement's draw, its
    random stream as before), "systematic" by :func:`drawn_cells`."""
    if draw == "iid":
        return gen.choice(p.size, size=n_out, p=p)
    return drawn_cells(p[None, :], np.zeros(n_out, np.int64), gen, draw)


def drawn_cells(
    shares: np.ndarray, rows: np.ndarray, rng: np.random.Generator, draw: str
) -> np.ndarray:
    """Each record's cell, from its row of ``shares`` (rows x cells, each row summing to 1).

    "iid": each record independently. "systematic" (Madow's systematic sampling, 1949): the
    n_r records of row r take evenly spaced points (i + U_r) / n_r of the cumulative shares,
    one uniform start U_r per row, in a random order; row r's count in cell c is then the
    floor or the ceiling of n_r * shares[r, c], with that expectation, as under "iid", and
    none of the independent draws' sampling noise. Post-processing: reads no data."""
    n_rows, k = shares.shape
    rows = np.asarray(rows, dtype=np.int64)
    n = rows.size
    if draw == "iid":
        u = rng.random(n)
    else:
        order = np.lexsort((rng.random(n), rows))  # grouped by row, random order within
        sizes = np.bincount(rows, minlength=n_rows)
        r = rows[order]
        rank = np.arange(n) - (np.cumsum(sizes) - sizes)[r]
        u = np.empty(n)
        u[order] = (rank + rng.random(n_rows)[r]) / sizes[r]
    ladder = (np.arange(n_rows)[:, None] + np.cumsum(shares, axis=1)).reshape(-1)
    index = np.searchsorted(ladder, rows + u, side="right") - rows * k
    return np.clip(index, 0, k - 1)


def consistent_counts(noisy: np.ndarray, consistency: str) -> np.ndarray:
    """Non-negative counts from Laplace-noised ones (post-processing: no data read).

    "clamp": negatives set to 0 (the censoring paper's supplement S1). "simplex": the
    nearest counts in Euclidean distance that are non-negative and keep the noisy counts'
    total: every count lowered by one common amount, negatives set to 0 (the sort-based
    projection of Duchi et al. 2008; "Norm-Sub" of Wang et al. 2020, there with a known
    total; the noisy total needs no public count). Clamping adds about half a noise scale to
    every empty bin; the projection takes that back, which matters where most bins are empty
    or small (a joint histogram of many cells). All zeros if the noisy total is not positive.
    """
    if consistency == "clamp":
        return np.maximum(noisy, 0.0)
    total = float(np.sum(noisy))
    if total <= 0:
        return np.zeros_like(noisy)
    u = np.sort(noisy)[::-1]
    excess = np.cumsum(u) - total
    rank = np.arange(1, u.size + 1)
    kept = np.flatnonzero(u - excess / rank > 0)[-1]
    return np.maximum(noisy - excess[kept] / (kept + 1), 0.0)


PH_BIN_RULES = ("sqrt", "log")
"""Bin rules of :func:`ph_bins`: the two examples of the censoring paper's supplement S1."""


def ph_bins(
    n: int, bounds: tuple[float, float] | None = None, integer: bool = False, rule: str = "sqrt"
) -> int:
    """Data-independent number of PH bins: one per integer in the bounds for counts, else
    ``rule`` of n (public under substitution): "sqrt" ceil(sqrt(n)) (the default, dpsynth's
    choice) or "log" max(1, ceil(ln(n))). Supplement S1 gives m = ln(n) and m = sqrt(n) as
    examples; the paper's own PH results (its Table 2 quantiles of the SDR application) are
    those of the ln(n) rule (book: "Where the papers leave a choice")."""
    errors.require_choice("rule", rule, PH_BIN_RULES)
    if integer and bounds is not None:
        return int(bounds[1] - bounds[0]) + 1
    if rule == "log":
        return max(1, int(math.ceil(math.log(max(int(n), 1)))))
    return int(math.ceil(math.sqrt(n)))


# ----------------------------------------------------------------------------- model-free (Liu, Sec 3.5)


@dataclass
class HistogramSynthesis:
    """Model-free synthesis: records (n_synthetic, p) and the sanitized counts (a DP output)."""

    records: np.ndarray
    sanitized_counts: np.ndarray
    edges: list[np.ndarray]
    sensitivity: float


def histogram_synthesis(
    x: Any,
    support: Any,
    bins: int | Sequence[int],
    epsilon: float,
    rng: np.random.Generator,
    n_synthetic: int | None = None,
    bootstrap: Literal["none", "data", "sanitized"] = "none",
    max_multiplicity: int = 3,
) -> HistogramSynthesis:
    """Model-free dips from a Laplace-sanitized histogram (Liu, Section 3.5, Figure 5).

    ``x`` shape (n,) or (n, p), clipped to the public ``support``. Count-vector GS is 2 under
    substitution. ``bootstrap``: ``"none"`` is Figure 5(a); ``"data"`` is Figure 5(b): a bootstrap
    resample of x is histogrammed and sanitized; one record then moves up to ``max_multiplicity``
    counts, so multiplicities are capped there and GS = 2 max_multiplicity; ``"sanitized"`` draws
    the bootstrap sample of size n from the sanitized histogram instead (post-processing, GS 2).
    Records are drawn uniformly within bins chosen ∝ max(count*, 0).
    """
    arr = np.asarray(x, dtype=float)
    arr = arr[:, None] if arr.ndim == 1 else arr
    errors.require_data(arr.reshape(-1))
    eps = errors.require_finite_positive("epsilon", epsilon)
    require_generator(rng)
    errors.require_choice("bootstrap", bootstrap, ("none", "data", "sanitized"))
    edges = make_edges(support, bins)
    if arr.shape[1] != len(edges):
        raise InputError("support", f"need one (lower, upper) per column ({arr.shape[1]})")
    n = arr.shape[0]
    n_out = n if n_synthetic is None else errors.require_m(n_synthetic, "n_synthetic")
    lo = np.array([e[0] for e in edges])
    hi = np.array([e[-1] for e in edges])
    arr = np.clip(arr, lo, hi)
    sens = 2.0
    if bootstrap == "data":
        cap = errors.require_m(max_multiplicity, "max_multiplicity")
        mult = np.minimum(rng.multinomial(n, np.full(n, 1.0 / n)), cap)
        arr = np.repeat(arr, mult, axis=0)
        sens = 2.0 * cap
    counts, _ = np.histogramdd(arr, bins=edges)
    noisy = laplace_mechanism(counts.reshape(-1), sens, eps, rng)

    def probs(c: np.ndarray) -> np.ndarray:
        w = np.maximum(c, 0.0)
        return w / w.sum() if w.sum() > 0 else np.full(w.size, 1.0 / w.size)

    p = probs(noisy)
    if bootstrap == "sanitized":
        p = probs(rng.multinomial(n, p).astype(float))
    chosen = rng.choice(p.size, size=n_out, p=p)
    records = uniform_in_bin(edges, chosen, rng)
    return HistogramSynthesis(records, noisy, edges, sens)
