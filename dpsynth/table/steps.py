"""Post-processing of a column's draw, each step a small named unit: debiasing the
censored shrinkage, intercepts calibrated to a perturbed histogram's shares, a dispersion
matched to its variance, rank mapping onto its sample, and a PH column's conditional draw.

Every step reads a published draw, the public design of a synthetic set and DP outputs (the
perturbed histograms' samples): post-processing, no epsilon spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpsynth.mechanisms.histogram import drawn_cells, sample_bins, values_in_bins
from dpsynth.models import debias
from dpsynth.models.catalogue import (
    Model,
)
from dpsynth.table.spec import (
    ConfidentialColumn,
    n_cells,
    own_size,
)


def _debiased(
    model: Model,
    draw: dict[str, Any],
    Xd: np.ndarray,
    censoring: debias.Censoring,
    seed: int,
    k: int,
    variances: list[float] | None,
    means: list[float] | None,
) -> dict[str, Any]:
    """Set k's draw after :func:`dpsynth.models.debias.corrected`, its simulated data drawn as
    set k's values will be (with the matched dispersion where the column has one), from a
    generator of its own (the sets' values keep theirs)."""
    source = draw
    if variances is not None:
        source = matched_dispersion(
            model, draw, Xd, variances[k], None if means is None else means[k]
        )
    rng = np.random.default_rng([seed % (2**63), 2, k])
    return debias.corrected(model, draw, Xd, censoring, rng, simulate_draw=source)


def matched_dispersion(
    model: Model, draw: dict[str, Any], X: np.ndarray, variance: float, mean: float | None
) -> dict[str, Any]:
    """A calibrated column's draw with its dispersion matched to its histogram's sample
    (``calibrate_dispersion``): a beta regression's precision (:func:`matched_kappa`), a
    negative binomial's intercept and dispersion (:func:`matched_phi`). Post-processing."""
    if model.dispersion == "phi":
        beta, phi = matched_phi(draw["beta"], X, float(mean), variance, draw["phi"])
        return {**draw, "beta": beta, "phi": phi}
    return {**draw, "kappa": matched_kappa(draw["beta"], X, variance, draw["kappa"])}


def matched_phi(
    beta: np.ndarray, X: np.ndarray, mean: float, variance: float, phi: float
) -> tuple[np.ndarray, float]:
    """A negative binomial regression's intercept (``X``'s first column is 1) moved so that
    mu = exp(X beta) averages ``mean`` over the rows, and the dispersion whose counts at the
    design then have the variance ``variance``: Var(mu) + mean(mu) + mean(mu^2) / phi, solved
    for phi (at least ``MIN_MATCHED_KAPPA``). Where the means and their Poisson noise alone
    vary more (or ``mean`` is not positive), the draw's phi is kept. Post-processing of a
    draw and a perturbed histogram (dpsynth's choice, as :func:`matched_kappa`): the censored
    fit's level and dispersion are the parts a small bound distorts, its slopes less so."""
    from scipy.special import logsumexp

    beta, X = np.array(beta, dtype=float), np.asarray(X, dtype=float)
    if not mean > 0:
        return beta, float(phi)
    eta = X @ beta
    beta[0] += math.log(mean) - (logsumexp(eta) - math.log(eta.size))
    mu = np.exp(X @ beta)
    excess = variance - float(mu.var()) - float(mu.mean())
    if not excess > 0:
        return beta, float(phi)
    return beta, max(float(np.mean(mu**2)) / excess, MIN_MATCHED_KAPPA)


def matched_kappa(beta: np.ndarray, X: np.ndarray, variance: float, kappa: float) -> float:
    """A beta regression's precision whose synthetic values at the design X have the
    variance ``variance`` (on the Stan scale): with mu = expit(X beta), the mixture's
    variance is Var(mu) + mean(mu (1 - mu)) / (1 + kappa), solved for kappa (at least
    ``MIN_MATCHED_KAPPA``). Where the means alone vary more than ``variance``, the draw's
    ``kappa`` is kept. Post-processing of a draw and a perturbed histogram (dpsynth's choice,
    ``dpsynth.table.spec.DISPERSION_MATCHED_MODELS``)."""
    from scipy.special import expit

    mu = expit(np.asarray(X, float) @ np.asarray(beta, float))
    spread = float(mu.var())
    if not variance > spread:
        return float(kappa)
    return max(float(np.mean(mu * (1 - mu))) / (variance - spread) - 1.0, MIN_MATCHED_KAPPA)


MIN_MATCHED_KAPPA = 1e-3
"""The smallest precision :func:`matched_kappa` returns (a beta distribution needs > 0)."""


def calibrated_intercepts(beta: np.ndarray, X: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """A level model's coefficients with the intercepts (row 0; ``X``'s first column is 1)
    moved so that the mean level probabilities over the rows of X equal ``shares`` (levels
    in order; each kept at least 1e-6): the slopes, so the dependence on the design, stay.
    Logistic (beta of K): the shift solving mean expit(X beta + c) = shares[1] by bisection;
    categorical (beta K x (L - 1), level 1 the reference): iterative proportional fitting of
    the L - 1 intercepts. Post-processing of a draw and public shares (dpsynth's choice: a
    censored level fit at a small bound favours the majority level, its slopes less so)."""
    from scipy.special import expit, softmax

    q = np.clip(np.asarray(shares, float), 1e-6, None)
    q = q / q.sum()
    beta = np.array(beta, dtype=float)
    if beta.ndim == 1:  # logistic: one intercept, monotone in it
        lo, hi = -40.0, 40.0
        eta = X @ beta
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if expit(eta + mid).mean() < q[1] else (lo, mid)
        beta[0] += (lo + hi) / 2
        return beta
    for _ in range(200):  # categorical: rake the non-reference intercepts
        eta = np.column_stack([np.zeros(X.shape[0]), X @ beta])
        mean = softmax(eta, axis=1).mean(axis=0)
        step = np.log(q[1:] / mean[1:]) - np.log(q[0] / mean[0])
        beta[0] += step
        if np.max(np.abs(step)) < 1e-8:
            break
    return beta


def rank_mapped(values: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` (NaN kept) with the i-th smallest replaced by the target sample's quantile
    at (i + 1/2) / n, ties broken at random: the marginal of ``target``, the order of
    ``values``."""
    out = values.copy()
    ok = np.isfinite(values)
    v = values[ok]
    order = np.lexsort((rng.random(v.size), v))
    mapped = np.empty(v.size)
    mapped[order] = sorted_quantiles(np.sort(target), (np.arange(v.size) + 0.5) / v.size)
    out[ok] = mapped
    return out


@dataclass(frozen=True)
class DealtSample:
    """A PH sample (each value its bin's integer, or uniform within its bin) held as its
    bins' counts, dealt to a table's partitions without replacement: partition p's counts
    a multivariate hypergeometric draw of those the partitions before it left. The
    partitions' values together are then the sample's bins, and each partition's a uniformly
    random subset of them, as the sample in a random order cut at the partitions' bounds
    (what the draw held before: n values a set), in a few numbers a partition and bin."""

    edges: np.ndarray
    integer: bool
    starts: tuple[int, ...]  # each partition's first record
    counts: np.ndarray  # partitions x bins

    @classmethod
    def of(
        cls, sample: np.ndarray, edges: np.ndarray, integer: bool, size: int,
        rng: np.random.Generator,
    ) -> DealtSample:  # fmt: skip
        """``sample`` (on the bins ``edges``) dealt to partitions of ``size`` records."""
        left = np.bincount(sample_bins(sample, edges, integer), minlength=edges.size - 1)
        starts = tuple(range(0, sample.size, size))
        counts = np.zeros((len(starts), left.size), np.int64)
        for p, start in enumerate(starts):
            take = min(size, sample.size - start)
            counts[p] = left if take == left.sum() else rng.multivariate_hypergeometric(left, take)
            left = left - counts[p]
        return cls(edges, integer, starts, counts)

    def at(self, rows: slice, rng: np.random.Generator) -> np.ndarray:
        """The values dealt to the partition of the records ``rows``, in a random order."""
        p = self.starts.index(rows.start) if rows.start in self.starts else -1
        if p < 0 or self.counts[p].sum() != rows.stop - rows.start:
            raise ValueError(f"no partition of the dealt sample holds records {rows}")
        bins = rng.permutation(np.repeat(np.arange(self.counts.shape[1]), self.counts[p]))
        return values_in_bins(bins, self.edges, self.integer, rng)


def sorted_quantiles(ordered: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(ordered, q)`` (its default "linear" method, bit for bit) of an ascending
    array, by indexing: numpy partitions once per quantile asked, which took minutes for the
    10^6 quantiles of a 10^6-record column."""
    ordered = np.asarray(ordered, dtype=float)
    if ordered.size == 0 or np.isnan(ordered[-1]):
        return np.quantile(ordered, q)  # numpy's own answer: an error, or NaN throughout
    virtual = (ordered.size - 1) * np.asarray(q, dtype=float)
    before = np.clip(np.floor(virtual).astype(np.intp), 0, ordered.size - 1)
    after = np.minimum(before + 1, ordered.size - 1)
    gamma = virtual - before
    a, b = ordered[before], ordered[after]
    diff = b - a
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out


def conditional_shares(
    col: ConfidentialColumn,
    parents: list[ConfidentialColumn],
    cells: np.ndarray,
    joint: np.ndarray,
    own: np.ndarray | None = None,
) -> np.ndarray:
    """The own cells' shares in each parent cell (parent cells x own cells) that a PH
    column given parents draws a set's levels (or public bins) from
    (:func:`values_in_cells`): the PH joint sample's own cells in each parent cell (the
    sample's overall cells where that cell is empty; the sample has
    :func:`dpsynth.table.columns.ph_joint_draws` cells, so the draw adds little noise),
    raked to a calibrated marginal where ``own`` (the own histogram's sample) is given, with
    the parent cells' weights of ``cells`` (the set's SYNTHETIC parent cells): post-processing
    of the ε_j-DP joint histogram sample (and the own histogram's), each read as its cells'
    counts (``joint``: parent cell x own cells + own cell; ``own``: own cell), which is all
    the draw uses of them."""
    L, P = own_size(col), n_cells(col, parents)
    counts = np.asarray(joint, dtype=float).reshape(P, L).copy()
    empty = counts.sum(axis=1) == 0
    counts[empty] = counts.sum(axis=0)
    shares = counts / counts.sum(axis=1, keepdims=True)
    if own is not None:
        q = np.bincount(cells, minlength=P) / len(cells)
        mine = np.asarray(own, dtype=float) / np.sum(own)
        weight = ph_calibration_weight(P, col.calibrate_share)
        shares = raked(shares, q, weight * mine + (1 - weight) * (q @ shares))
    return shares


def values_in_cells(
    col: ConfidentialColumn, shares: np.ndarray, cells: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Each record's own cell drawn from its parent cell's row of ``shares``
    (``TABLE_PH["draw"]``), as a level code, or a continuous column's value uniform within
    the drawn bin."""
    L = own_size(col)
    codes = drawn_cells(shares, cells, rng, TABLE_PH["draw"]).astype(float)
    if col.levels is not None:
        return codes
    lo, hi = col.bounds
    return lo + (codes + rng.random(len(codes))) * (hi - lo) / L


def ph_calibration_weight(parent_cells: int, share: float) -> float:
    """The weight of a calibrated PH column's own histogram in its marginal
    (``table_spec.PH_CALIBRATION``): inverse noise variances, the joint's marginal summing
    ``parent_cells`` cells' noise at 1 - ``share`` of the column's epsilon, the own
    histogram one cell's at ``share``. Public: from the spec alone."""
    joint = parent_cells / (1.0 - share) ** 2
    return joint / (joint + 1.0 / share**2)


RAKE_ITERATIONS = 200
"""Sweeps of iterative proportional fitting in :func:`raked` (a two-way table converges
geometrically; a public number, not a tolerance read from the data)."""


def raked(shares: np.ndarray, q: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Conditional shares (parent cells x own cells, rows summing to 1) raked by iterative
    proportional fitting (Deming and Stephan 1940) so that the parent cells' weights ``q``
    give the own marginal ``target``: each row keeps its weight, zeros stay zero. A row of
    weight 0 keeps its shares. Post-processing of its three (DP or synthetic) inputs."""
    joint = q[:, None] * shares
    for _ in range(RAKE_ITERATIONS):
        mass = joint.sum(axis=0)
        joint *= np.divide(target, mass, out=np.zeros_like(mass), where=mass > 0)[None, :]
        rows = joint.sum(axis=1)
        joint *= np.divide(q, rows, out=np.zeros_like(rows), where=rows > 0)[:, None]
    out = shares.copy()
    live = joint.sum(axis=1) > 0
    out[live] = joint[live] / joint[live].sum(axis=1, keepdims=True)
    return out


TABLE_PH = {"consistency": "simplex", "draw": "systematic"}
"""A table's PH histograms (its PH columns' and its model columns' marginals) make their
noisy counts non-negative by the simplex projection
(:func:`dpsynth.mechanisms.histogram.consistent_counts`), not by clamping: a joint histogram's cells
are mostly small, and clamping would add about half a noise scale to each empty one. Their
records are drawn systematically (:func:`dpsynth.mechanisms.histogram.drawn_cells`), as is a PH column's
own cell given its synthetic parent cell: a synthetic set's shares are then the noisy
histogram's to within one record per cell, with none of independent draws' sampling noise
(a floor under a set's one-way and two-way TVD, whatever its ε)."""


class DrawStep(Protocol):
    """A post-processing step of a model column's draw: (set k's draw, its design matrix, k)
    -> the draw set k's values are simulated from."""

    name: str

    def __call__(self, draw: dict[str, Any], Xd: np.ndarray, k: int) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Debiased:
    """``debias``: the draw's coefficients corrected for the censored fit's shrinkage by one
    parametric-bootstrap step at set k's design (:func:`dpsynth.models.debias.corrected`)."""

    model: Model
    censoring: debias.Censoring
    seed: int
    variances: list[float] | None
    means: list[float] | None
    name: str = "debias"

    def __call__(self, draw: dict[str, Any], Xd: np.ndarray, k: int) -> dict[str, Any]:
        return _debiased(
            self.model, draw, Xd, self.censoring, self.seed, k, self.variances, self.means
        )


@dataclass(frozen=True)
class CalibratedIntercepts:
    """A level column's intercepts moved so that its mean level probabilities at set k's
    design are the shares of its marginal histogram's sample k (:func:`calibrated_intercepts`)."""

    shares: list[np.ndarray]
    name: str = "calibrated intercepts"

    def __call__(self, draw: dict[str, Any], Xd: np.ndarray, k: int) -> dict[str, Any]:
        return {**draw, "beta": calibrated_intercepts(draw["beta"], Xd, self.shares[k])}


@dataclass(frozen=True)
class MatchedDispersion:
    """The dispersion matched to the variance (and mean) of the marginal histogram's sample
    k on the Stan scale (:func:`matched_dispersion`)."""

    model: Model
    variances: list[float]
    means: list[float] | None
    name: str = "matched dispersion"

    def __call__(self, draw: dict[str, Any], Xd: np.ndarray, k: int) -> dict[str, Any]:
        mean = None if self.means is None else self.means[k]
        return matched_dispersion(self.model, draw, Xd, self.variances[k], mean)


def calibration_targets(
    col: ConfidentialColumn, model: Model, targets: np.ndarray | None
) -> tuple[list[np.ndarray] | None, list[float] | None, list[float] | None]:
    """What a calibrated column's steps read from its marginal histogram's m samples: a
    level column's shares, and with ``calibrate_dispersion`` the samples' variances and means
    on the Stan scale (None where they do not apply)."""
    shares, variances, means = None, None, None
    if col.levels is not None and targets is not None:
        k = len(col.levels)
        shares = [np.bincount(t.astype(np.int64), minlength=k) / t.size for t in targets]
    if col.calibrate_dispersion and targets is not None:
        # a count's histogram on equal-width bins samples bin values: its counts are integers
        samples = [np.rint(t) if col.type == "count" else t for t in targets]
        scaled = [np.asarray(model.to_stan_scale(t, col.bounds), float) for t in samples]
        variances, means = [float(t.var()) for t in scaled], [float(t.mean()) for t in scaled]
    return shares, variances, means
