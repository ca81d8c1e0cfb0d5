"""A whole table in one release: a sequential synthesizer, each column censored or PH.

Column j (in the spec's synthesis order) is one existing dpsynth release
(:func:`dpsynth.release.single.synthesize`: Censor_uw, Censor_w with reference weights, or PH) at
budget eps_j = share_j * epsilon; a model column is fitted as a regression on the public
columns and the confidential columns before it (a PH column after others releases the
histogram of its joint cells with its parents, :func:`_ph_inputs`: the discrete
predecessors, or those its ``given`` names, a continuous one on public bins). A model
column's published values are drawn from the retained draws of that fit at the design
built from the public columns and the **synthetic** values of its predecessors
(:func:`draws_at_design`: post-processing). Predecessors enter the design scaled by their
public bounds, (v - lo) / (hi - lo) (and its centred square with ``design = "quadratic"``),
and categorical ones one-hot on their public levels, so record i's values enter row i of each
design only: one record changes one clamped term per column (censoring paper, Censor_uw,
Eq. 3.5; the book page "A whole table", Proposition 1). Total epsilon = sum_j eps_j
(sequential composition), m sets cost m times (inside each column's release).
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import entropy
from dpsynth.engine.diagnostics import MULTIMODAL_SAYS
from dpsynth.errors import (
    EPSILON_RANGE,
    InputError,
    count_first,
    from_data,
    require_m,
    require_sane_epsilon,
)
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.histogram import drawn_cells
from dpsynth.mechanisms.posterior import Result, Sampler
from dpsynth.models import debias
from dpsynth.models.catalogue import (
    Model,
    PublicDesign,
    clip_to_public_bounds,
    design_matrix,
    get_model,
)
from dpsynth.privacy import accounting, budget, relations
from dpsynth.release import safeguards
from dpsynth.table.spec import (
    AUTO_CENTRING_MEANING,
    CALIBRATE_BINS_DEFAULT,
    DOWNSCALE_NATS,
    MISSING_LEVEL,
    MISSING_SUFFIX,
    PH_CALIBRATION,
    TABLE_ADAPT_DELTA,
    TABLE_ITER_SAMPLING,
    ConfidentialColumn,
    PublicColumn,
    TableSpec,
    load_spec,
    n_cells,
    own_size,
    parent_size,
    ph_parents,
    require_columns,
    resolve_centring,
)

TABLE_SAMPLER = Sampler(iter_sampling=TABLE_ITER_SAMPLING, adapt_delta=TABLE_ADAPT_DELTA)
"""A table's default MCMC settings: 2 x (1000 + 4000) (``table_spec.TABLE_ITER_SAMPLING``) at a
step-size target of ``table_spec.TABLE_ADAPT_DELTA``. Public (in ``__all__``). Evidence:
book/choices.md, section choices-sampler."""

PUBLIC_COPIED = (
    "public columns are copied verbatim from the input (they are public: no privacy is "
    "claimed or needed for them); missing values in them stay missing"
)
MISSING_MEANING = (
    'a confidential column with missing values (missing = "indicator") gets a 0/1 column '
    "NAME_missing (1 = missing), synthesized right before it; its values are fitted on the "
    "records that have them and drawn for the synthetic records whose indicator is 0; a "
    'binary or categorical ph column with missing = "level" counts missing as one more '
    f"public level, {MISSING_LEVEL!r}, written back as missing"
)


@dataclass
class TableRelease:
    """The synthetic table, its public report and the confidential diagnostics, kept apart."""

    data: pd.DataFrame
    report: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Result | None] = field(default_factory=dict)  # never written

    def write(self, out_csv: str | Path, report_json: str | Path, diagnostics_json=None) -> None:
        """Write the files atomically: every one of them, or (on any failure) none."""
        from dpsynth.release.single import Release

        Release(self.data, self.report, self.diagnostics).write(
            out_csv, report_json, diagnostics_json
        )


# ----------------------------------------------------------------------------- designs


@dataclass(frozen=True)
class _PublicEncoder:
    """How a public column enters every design: scaled by its public bounds (or by its own
    public mean and sd when it has none), one-hot on its levels; NaN as 0 plus an indicator."""

    column: PublicColumn
    centre: float
    scale: float
    levels: tuple[Any, ...] | None
    has_missing: bool


def _public_encoder(frame: pd.DataFrame, col: PublicColumn) -> _PublicEncoder:
    """The encoder of a public column, from the spec and (public) values only."""
    s = frame[col.name]
    has_missing = bool(s.isna().any())
    if col.type in ("binary", "categorical"):
        levels = col.levels or tuple(sorted(s.dropna().astype(str).unique()))
        return _PublicEncoder(col, 0.0, 1.0, levels, has_missing)
    values = _numeric(s, col.name)
    if col.bounds is not None:
        lo, hi = col.bounds
        _refuse_outside(values, lo, hi, col.name)
        return _PublicEncoder(col, lo, hi - lo, None, has_missing)
    present = values[np.isfinite(values)]
    sd = float(present.std()) if present.size else 0.0
    centre = float(present.mean()) if present.size else 0.0
    return _PublicEncoder(col, centre, sd if sd > 0 else 1.0, None, has_missing)


def _encode_public(frame: pd.DataFrame, enc: _PublicEncoder) -> np.ndarray:
    """n x k features of one public column (its missing indicator last, if any)."""
    s = frame[enc.column.name]
    missing = s.isna().to_numpy()
    if enc.levels is not None:
        codes = level_codes(s, enc.levels, enc.column.name)
        feats = one_hot(codes, len(enc.levels))
    else:
        feats = ((_numeric(s, enc.column.name) - enc.centre) / enc.scale)[:, None]
    feats = np.where(missing[:, None], 0.0, feats)
    return np.hstack([feats, missing[:, None].astype(float)]) if enc.has_missing else feats


def level_codes(s: pd.Series, levels: tuple[Any, ...], name: str) -> np.ndarray:
    """0-based codes of ``s`` on its public ``levels`` (-1 for missing); a value outside is
    refused (names the column, the record; never the value)."""
    text = s.map(_level_text, na_action="ignore")
    codes = pd.Index([_level_text(v) for v in levels]).get_indexer(text.to_numpy(dtype=object))
    outside = (codes < 0) & s.notna().to_numpy()
    if outside.any():
        raise InputError(
            "levels",
            f"column {name!r} has a level outside the spec's public levels "
            f"{from_data(count_first(outside, 'record'))}",
        )
    return codes.astype(np.int64)


def _level_text(v: Any) -> str:
    """A level as text, 1.0 and 1 alike (a CSV column with missing values reads as float)."""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def one_hot(codes: np.ndarray, k: int) -> np.ndarray:
    """n x (k - 1) dummies of 0-based ``codes`` (first level dropped; code -1: all zeros)."""
    return (codes[:, None] == np.arange(1, k)[None, :]).astype(float)


def _numeric(s: pd.Series, name: str) -> np.ndarray:
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) & s.notna().to_numpy()
    if bad.any():
        raise InputError(
            "data",
            f"column {name!r} has a value that is not a finite number "
            f"{from_data(f'record {int(np.flatnonzero(bad)[0]) + 1}')}",
        )
    return values


def _refuse_outside(values: np.ndarray, lo: float, hi: float, name: str) -> None:
    outside = (values < lo) | (values > hi)
    if outside.any():
        raise InputError(
            "bounds",
            f"column {name!r} has values outside the spec's public bounds "
            f"{from_data(count_first(outside, 'record'))}; set clip = true in the spec to "
            "clip them (the count stays confidential)",
        )


def column_codes(frame: pd.DataFrame, col: ConfidentialColumn) -> tuple[np.ndarray, int]:
    """A confidential column's values (bounded numbers, or 0-based level codes as floats;
    NaN where missing) and how many were clipped to the public bounds (confidential)."""
    if col.indicator_of is not None:
        return frame[col.indicator_of].isna().to_numpy().astype(float), 0
    s = frame[col.name]
    missing = s.isna().to_numpy()
    if missing.any() and col.missing == "refuse":
        raise InputError(
            "missing",
            f"column {col.name!r} has missing values "
            f'{from_data(count_first(missing, "value"))}; set missing = "indicator" in the '
            'spec (or "level" for a ph binary or categorical column)',
        )
    if col.levels is not None:
        codes = level_codes(s, col.public_levels, col.name).astype(float)
        if col.missing == "level":  # the last level stands for missing
            return np.where(missing, len(col.levels) - 1, codes), 0
        return np.where(missing, np.nan, codes), 0
    values = _numeric(s, col.name)
    lo, hi = col.bounds
    if not col.clip:
        _refuse_outside(values, lo, hi, col.name)
        return values, 0
    clipped = np.clip(values, lo, hi)
    return clipped, int(np.sum((clipped != values) & ~missing))


def features(col: ConfidentialColumn, values: np.ndarray) -> np.ndarray:
    """n x k features of a predecessor on PUBLIC scales: u = (v - lo)/(hi - lo) (and, design
    "quadratic", 4 (u - 1/2)^2), 0/1 codes, or one-hot on the public levels; each in [0, 1];
    a missing value enters as 0 (its indicator carries it)."""
    present = np.isfinite(values)
    if col.type == "categorical" and col.design == "number":  # the level, scaled by its range
        lv = np.asarray(col.levels, dtype=float)
        scaled = (lv - lv.min()) / (lv.max() - lv.min())
        codes = np.where(present, values, 0).astype(np.int64)
        return np.where(present, scaled[codes], 0.0)[:, None]
    if col.type == "categorical":
        return one_hot(np.where(present, values, -1).astype(np.int64), len(col.levels))
    if col.type == "binary":
        return np.where(present, values, 0.0)[:, None]
    lo, hi = col.bounds
    u = np.where(present, (values - lo) / (hi - lo), 0.0)
    if col.design == "quadratic":
        return np.column_stack([u, np.where(present, 4.0 * (u - 0.5) ** 2, 0.0)])
    return u[:, None]


def _design(public: np.ndarray, parts: list[np.ndarray], rows: np.ndarray | None) -> Any:
    """The public design of a column (no intercept: :func:`design_matrix` adds it), marked
    :class:`PublicDesign` so that it is never standardized by the data; None when empty."""
    X = np.hstack([public, *parts]) if parts or public.shape[1] else None
    if X is None or X.shape[1] == 0:
        return None
    if rows is not None:
        X = X[rows]
    return np.ascontiguousarray(X, dtype=float).view(PublicDesign)


# ----------------------------------------------------------------------------- synthesis


def draws_at_design(
    model: Model,
    result: Result,
    designs: list[np.ndarray | None],
    seed: int,
    bounds: tuple[float, float] | None,
    shares: list[np.ndarray] | None = None,
    variances: list[float] | None = None,
    means: list[float] | None = None,
    censoring: debias.Censoring | None = None,
) -> list[np.ndarray]:
    """Synthetic set k from retained draw k of a column's fit, at the NEW public design
    ``designs[k]`` (the public columns and the synthetic predecessors): post-processing.

    The draws are the ones :meth:`dpsynth.mechanisms.posterior.Synthesizer.synthesize` publishes for
    ``seed`` (same picks, same generator), so at the fitted design it returns the same
    records. Records come from the draw and public inputs only (numpy ``Model.simulate``),
    on the outcome's scale, inside the public bounds. ``shares`` (a level column's, from its
    perturbed marginal histogram): set k's draw first gets the intercepts whose mean level
    probabilities at ``designs[k]`` are ``shares[k]`` (:func:`calibrated_intercepts`).
    ``variances`` (on the Stan scale, from the same histogram; ``means`` too for a negative
    binomial): set k's draw gets the dispersion of :func:`matched_dispersion`.
    ``censoring`` (a ``debias`` column's public censoring settings): set k's draw first
    gets its coefficients' shrinkage corrected (:func:`dpsynth.models.debias.corrected`, one
    bootstrap step at ``designs[k]``).
    """
    draws = result.fit.stan_fit.draws
    S = result.fit.stan_fit.n_draws
    rng = np.random.default_rng([seed % (2**63), 1])
    picks = rng.choice(S, size=len(designs), replace=False)
    out = []
    for s, X in zip(picks, designs, strict=True):
        n = 0 if X is None else X.shape[0]
        Xd = design_matrix(n, X)
        data = {"n": n, "K": Xd.shape[1], "X": Xd}
        draw = {k: v[int(s)] for k, v in draws.items()}
        if censoring is not None:
            draw = _debiased(model, draw, Xd, censoring, seed, len(out), variances, means)
        if shares is not None:
            draw = {**draw, "beta": calibrated_intercepts(draw["beta"], Xd, shares[len(out)])}
        if variances is not None:
            mean = None if means is None else means[len(out)]
            draw = matched_dispersion(model, draw, Xd, variances[len(out)], mean)
        y = np.asarray(model.simulate(draw, data, n, rng), dtype=float)
        out.append(
            clip_to_public_bounds(np.asarray(model.from_stan_scale(y, bounds), float), bounds)
        )
    return out


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


def _stan_outcome(col: ConfidentialColumn, values: np.ndarray) -> np.ndarray:
    """The outcome a column's model fits: values, 0/1 codes, or categories 1..K."""
    return values + 1 if col.type == "categorical" else values


def _from_outcome(col: ConfidentialColumn, y: np.ndarray) -> np.ndarray:
    """Synthetic outcomes back to the table's coding (0-based level codes for levels)."""
    return y - 1 if col.type == "categorical" else y


@dataclass
class _State:
    """What a table release carries from column to column."""

    public: np.ndarray  # n x p public features
    ref_public: np.ndarray | None
    real: dict[str, np.ndarray] = field(default_factory=dict)  # confidential values
    ref: dict[str, np.ndarray] = field(default_factory=dict)  # reference values
    synthetic: dict[str, list[np.ndarray]] = field(default_factory=dict)  # m sets
    done: list[ConfidentialColumn] = field(default_factory=list)
    fit_records: int | None = None  # the spec's subsample size for model columns


def _fit_column(
    col: ConfidentialColumn,
    j: int,
    state: _State,
    epsilon: float,
    m: int,
    seed: int | None,
    sampler: Sampler,
    run: dict[str, bool],
) -> tuple[Any, list[np.ndarray], Any]:
    """One column: its release (fit on the confidential predecessors), then its m sets at
    the synthetic predecessors. Returns (the column's :class:`Release`, m value arrays, the
    marginal histogram's release of a calibrated column or None)."""
    from dpsynth.release.single import synthesize

    n = state.public.shape[0]
    col_seed = None if seed is None else _column_seed(seed, j)
    marg, targets = None, None
    if col.calibrate_share > 0:  # first: a marginal centring reads it
        marg = _marginal_histogram(col, col_seed, state, col.calibrate_share * epsilon, m, run)
        targets = marg.data[col.name].to_numpy(dtype=float).reshape(m, -1)
    k = subsample_size(col, state.fit_records, n)
    sub = _subset(_fit_rows(k, n, col_seed))
    y = sub(state.real[col.name])
    rows = np.isfinite(y)
    parts = [features(p, sub(state.real[p.name])) for p in state.done]
    X = _design(sub(state.public), parts, rows if not rows.all() else None)
    epsilon = fit_epsilon(col, epsilon, state.fit_records, n)
    kw: dict[str, Any] = {}
    parents = ph_parents(col, state.done)
    if registry.model_free(col.mechanism):
        outcome, kw = _ph_inputs(col, parents, state.real, y)
        if parents:  # a large joint sample: the conditional draw then adds little noise
            kw["n_synthetic"] = ph_joint_draws(n)
    else:
        kw.update(model=column_model(col), X=X)
        kw.update(_reference_inputs(col, state, X is not None, sampler))
        if col.centring == "marginal":
            synthetic = [(p, state.synthetic[p.name][0]) for p in state.done]
            rng = entropy.stream(col_seed, 6)
            kw["centring"] = _marginal_centre(
                col, state.public, synthetic, targets[0], rng, sampler
            )
        kw["model"] = fit_model(col, kw.get("centring"))
        d = downscale_of(col, epsilon / m)  # each of the m sets' draws: its own bound
        kw["downscale"] = d if d < 1 else None  # 1: the paper's Censor_uw, as before
        outcome = _stan_outcome(col, y[rows])
        if col.bounds is not None:
            kw["bounds"] = col.bounds
    rel = synthesize(
        outcome,
        mechanism=col.mechanism,
        epsilon=epsilon,
        m=m,
        seed=col_seed,
        column=col.name,
        sampler=sampler,
        allow_large_epsilon=True,  # the table's total was checked
        **run,  # progress
        **kw,
    )
    if registry.model_free(col.mechanism):
        sets = rel.data[col.name].to_numpy(dtype=float).reshape(m, -1)
        if parents:
            rng = entropy.stream(col_seed, 2)
            own = [None] * m if targets is None else list(targets)
            sets = [
                _conditional_values(col, parents, state, s, k, rng, own[k])
                for k, s in enumerate(sets)
            ]
        return rel, list(sets), marg
    censoring = _censoring(col, rel, kw, n if k is None else k)
    sets = _column_sets(col, rel, state, m, targets, censoring)
    if col.calibrate_bins is not None:  # each set mapped by rank onto its histogram sample
        rng = entropy.stream(col_seed, 5)
        sets = [rank_mapped(s, t, rng) for s, t in zip(sets, targets, strict=True)]
    return rel, sets, marg


def _censoring(
    col: ConfidentialColumn, rel: Any, kw: dict[str, Any], records: int
) -> debias.Censoring | None:
    """A ``debias`` column's public censoring settings (its centre, bound M, weight d and
    ``records``: the spec's ``fit_records`` or n, public counts, never the number of
    non-missing values), for :func:`dpsynth.models.debias.corrected`; None for any other column."""
    if not col.debias:
        return None
    return debias.Censoring(
        centring=kw.get("centring", "none"),
        bound=float(rel.confidential.fit.censor_bound),
        downscale=float(kw.get("downscale") or 1.0),
        fit_records=int(records),
    )


def fit_epsilon(col: ConfidentialColumn, epsilon: float, fit_records: int | None, n: int) -> float:
    """The epsilon a column's fit spends of its ``epsilon`` (eps_j): its part
    (``fit_share``), amplified when it reads a subsample (``fit_subsample``)."""
    epsilon = col.fit_share * epsilon  # a calibrated column's fit: its part
    k = subsample_size(col, fit_records, n)
    return epsilon if k is None else fit_subsample(k, n, epsilon)["epsilon_of_the_fit"]


def resolved_spec(spec: TableSpec, epsilon: float, m: int, n: int) -> TableSpec:
    """``spec`` with every ``centring = "auto"`` resolved
    (:func:`dpsynth.table.spec.resolve_centring`) at the bound M of one set's draw of the
    column's centred fit: public inputs only (the spec, epsilon, m and the record count n,
    which the substitution relation keeps public)."""
    shares = {c.name: c.share for c in spec.order()}  # after its indicator: half its share
    out = []
    for col in spec.confidential:
        fit = fit_epsilon(col, shares[col.name] * epsilon, spec.fit_records, n)
        out.append(resolve_centring(col, draw_bound(col, fit / m)))
    return replace(spec, confidential=tuple(out))


def draw_bound(col: ConfidentialColumn, epsilon: float) -> float:
    """The censoring bound M of one draw of a column's fit at ``epsilon`` (one set's, after
    amplification), under the neighbours its mechanism declares."""
    return accounting.censor_bound(epsilon, registry.get(col.mechanism).default_neighbours)


def downscale_of(col: ConfidentialColumn, epsilon: float) -> float:
    """A censored column's weight d (``downscale``): the spec's number, or for "auto"
    min(1, M / :data:`~dpsynth.table.spec.DOWNSCALE_NATS`) with M the censoring bound of one
    draw at ``epsilon`` (the fit's own per set, after amplification): public inputs only."""
    if col.downscale != "auto":
        return float(col.downscale)
    return min(1.0, draw_bound(col, epsilon) / DOWNSCALE_NATS)


def fit_model(col: ConfidentialColumn, centring: Any) -> Model:
    """A model column's model for its censored fit: with ``calibrate_dispersion`` and a
    centre (a fit to public inputs only: the marginal's or the reference's), its dispersion
    fixed at the centre's value, so the fit draws the coefficients alone (the synthetic sets
    get the matched dispersion anyway, :func:`matched_dispersion`). A fitted dispersion is
    what lets a censored fit at a small bound concentrate on one group of records, each chain
    on another (``dpsynth.table.spec.DISPERSION_MATCHED_MODELS``; evidence: book/choices.md,
    section choices-table-models)."""
    model = column_model(col).with_clamp(col.clamp)
    if not _fixes_dispersion(col) or not isinstance(centring, dict):
        return model
    return model.with_known_dispersion(float(np.asarray(centring[model.dispersion], float)))


def _fixes_dispersion(col: ConfidentialColumn) -> bool:
    """Whether a column's fit takes its centre's dispersion as known (:func:`fit_model`): a
    ``calibrate_dispersion`` column whose model has one, centred at a public fit."""
    return (
        col.calibrate_dispersion
        and column_model(col).dispersion is not None
        and col.centring in ("marginal", "reference")
    )


def _marginal_histogram(
    col: ConfidentialColumn,
    col_seed: int | None,
    state: _State,
    epsilon: float,
    m: int,
    run: dict[str, bool],
) -> Any:
    """A column's perturbed histogram of its marginal, m samples. A model column's: on its
    public cells (:func:`marginal_cells`; epsilon on every record with a value), n values
    each (n the table's public record count, never the count of values): a calibrated
    column's target, and a marginal centring's pseudo-data. A PH column's given parents: on
    its own cells (its levels or public bins, as in its joint cells), :func:`ph_joint_draws`
    cells each: the marginal its draw is raked to (``table_spec.PH_CALIBRATION``)."""
    from dpsynth.release.single import synthesize

    n = state.public.shape[0]
    y = state.real[col.name]
    if registry.model_free(col.mechanism):
        values = _own_codes(col, y).astype(float)
        cells = {
            "integer": True,
            "bounds": (0, own_size(col) - 1),
            "n_synthetic": ph_joint_draws(n),
        }
    else:
        values, cells = y[np.isfinite(y)], {**marginal_cells(col), "n_synthetic": n}
    return synthesize(
        values,
        mechanism="ph",
        epsilon=epsilon,
        m=m,
        seed=None if col_seed is None else _column_seed(col_seed, 4),
        column=col.name,
        allow_large_epsilon=True,  # the table's total was checked
        **cells,
        **TABLE_PH,
        **run,
    )


MARGINAL_UNIT_BINS = 200
"""A count column's marginal histogram has one bin per integer of its public bounds when
they hold at most this many, else ``calibrate_bins`` (default 20) equal-width bins."""


def marginal_cells(col: ConfidentialColumn) -> dict[str, Any]:
    """The public cells of a column's marginal histogram, as keyword arguments of
    :func:`dpsynth.release.single.synthesize`: one per level (codes), one per integer of a count's
    bounds (up to :data:`MARGINAL_UNIT_BINS`), else ``calibrate_bins`` equal-width bins."""
    if col.levels is not None:
        return {"integer": True, "bounds": (0, len(col.levels) - 1)}
    lo, hi = col.bounds
    if col.type == "count" and hi - lo < MARGINAL_UNIT_BINS:
        return {"integer": True, "bounds": (int(lo), int(hi))}
    return {"bounds": col.bounds, "n_bins": col.calibrate_bins or CALIBRATE_BINS_DEFAULT}


MARGINAL_CENTRE_ROWS = 2000
"""The rows of the public pseudo-reference a marginal centring fits (``centring =
"marginal"``): enough to pin an intercept and a dispersion, and a fit of seconds."""


def _marginal_centre(
    col: ConfidentialColumn,
    public: np.ndarray,
    synthetic: list[tuple[ConfidentialColumn, np.ndarray]],
    sample: np.ndarray,
    rng: np.random.Generator,
    sampler: Sampler,
) -> dict[str, Any]:
    """``centring = "marginal"``: the column's model fitted, uncensored, to PUBLIC inputs
    only (no confidential value reaches this function): its histogram's sample (shuffled,
    so unrelated to the rows) beside the public columns and the synthetic predecessors of
    set 1. Intercept and dispersion from the marginal, slopes near 0: a centre that needs
    no reference file."""
    from dpsynth.release.plan import reference_point

    values = {p.name: v for p, v in synthetic}
    rows = np.arange(public.shape[0])
    if col.missing == "indicator":
        rows = np.flatnonzero(values[col.name + MISSING_SUFFIX] == 0)
    rows = np.sort(rng.permutation(rows)[:MARGINAL_CENTRE_ROWS])
    y = rng.choice(sample, size=rows.size, replace=False)
    if col.type != "continuous":  # codes, or a count's equal-width bin values rounded
        y = np.rint(y)
    parts = [features(p, v[rows]) for p, v in synthetic]
    X = _design(public[rows], parts, None)
    return reference_point(
        _stan_outcome(col, y), column_model(col), bounds=col.bounds, reference_X=X,
        sampler=centre_sampler(sampler),
    )  # fmt: skip


MARGINAL_CENTRE_DRAWS = 500
"""Warmup and retained draws per chain (at most) of a marginal centre's fit: it is an uncensored
fit to public pseudo-data, well identified, and only its posterior mean is used, whose Monte
Carlo error at about 1,000 draws is a few percent of its posterior sd. Internal (not in
``__all__``); dpsynth's extension (a shorter run than the table's own, ``TABLE_SAMPLER``).
Evidence: book/choices.md, section choices-table-models."""


def centre_sampler(sampler: Sampler) -> Sampler:
    """``sampler`` with at most :data:`MARGINAL_CENTRE_DRAWS` warmup and retained draws."""
    n = MARGINAL_CENTRE_DRAWS
    return replace(
        sampler,
        iter_warmup=min(sampler.iter_warmup, n),
        iter_sampling=min(sampler.iter_sampling, n),
    )


def rank_mapped(values: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` (NaN kept) with the i-th smallest replaced by the target sample's quantile
    at (i + 1/2) / n, ties broken at random: the marginal of ``target``, the order of
    ``values``."""
    out = values.copy()
    ok = np.isfinite(values)
    v = values[ok]
    order = np.lexsort((rng.random(v.size), v))
    mapped = np.empty(v.size)
    mapped[order] = np.quantile(target, (np.arange(v.size) + 0.5) / v.size)
    out[ok] = mapped
    return out


def subsample_size(col: ConfidentialColumn, fit_records: int | None, n: int) -> int | None:
    """k when the column's model is fitted to a k-of-n subsample (the spec's ``fit_records``),
    else None: PH columns, and k >= n, take every record."""
    if fit_records is None or fit_records >= n or registry.model_free(col.mechanism):
        return None
    return fit_records


def fit_subsample(k: int, n: int, epsilon: float) -> dict[str, Any]:
    """What the public report says of a column fitted to k of n records at ``epsilon``: the
    epsilon its fit may spend, the one that subsampling amplifies to ``epsilon``
    (:func:`dpsynth.privacy.relations.subsampling_map`), capped at the largest epsilon dpsynth takes
    (a fit may always spend less than it could)."""
    inner = min(relations.subsampling_map(epsilon, k, n), EPSILON_RANGE[1])
    return {
        "fit_records": k,
        "of_records": n,
        "epsilon_of_the_fit": inner,
        "meaning": relations.SUBSAMPLING_MEANING,
    }


def _fit_rows(k: int | None, n: int, seed: int | None) -> np.ndarray | None:
    """The records a model column is fitted to: all (None), or a uniform random k of the n,
    drawn without replacement independently of every value (never published)."""
    if k is None:
        return None
    rng = entropy.stream(seed, 3)
    return np.sort(rng.choice(n, size=k, replace=False))


def _subset(take: np.ndarray | None) -> Any:
    """Row selection by ``take`` (the identity when every record is taken)."""
    return (lambda a: a) if take is None else (lambda a: a[take])


def _parent_cells(
    col: ConfidentialColumn, parents: list[ConfidentialColumn], values: dict[str, np.ndarray]
) -> np.ndarray:
    """Each record's cell among the parents' public level and bin combinations (mixed radix;
    a continuous or count parent on ``col.given_bins`` equal-width bins of its public bounds);
    a missing value counts as the first (its indicator, if a parent, tells them apart)."""
    n = len(values[parents[0].name])
    cell = np.zeros(n, np.int64)
    for p in parents:
        v = values[p.name]
        size = parent_size(p, col.given_bins)
        if p.levels is None:  # the public bin of a bounded value
            code = bin_codes(v, p.bounds, size)
        else:
            code = np.where(np.isfinite(v), v, 0).astype(np.int64)
        cell = cell * size + code
    return cell


TABLE_PH = {"consistency": "simplex", "draw": "systematic"}
"""A table's PH histograms (its PH columns' and its model columns' marginals) make their
noisy counts non-negative by the simplex projection
(:func:`dpsynth.mechanisms.histogram.consistent_counts`), not by clamping: a joint histogram's cells
are mostly small, and clamping would add about half a noise scale to each empty one. Their
records are drawn systematically (:func:`dpsynth.mechanisms.histogram.drawn_cells`), as is a PH column's
own cell given its synthetic parent cell: a synthetic set's shares are then the noisy
histogram's to within one record per cell, with none of independent draws' sampling noise
(a floor under a set's one-way and two-way TVD, whatever its ε)."""


def _ph_inputs(
    col: ConfidentialColumn, parents: list[ConfidentialColumn], real: dict, y: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """What PH releases for a column: its values (a continuous column, on its public bounds
    and ``bins``), its 0-based level codes (one unit bin per public level), or, given
    parents, each record's joint cell: parent cell x own cells + own cell (one unit bin per
    public joint cell, :func:`_parent_cells`, :func:`_own_codes`)."""
    if parents:
        cells = _parent_cells(col, parents, real) * own_size(col) + _own_codes(col, y)
        bounds = (0, own_size(col) * n_cells(col, parents) - 1)
        return cells.astype(float), {"integer": True, "bounds": bounds, **TABLE_PH}
    kw: dict[str, Any] = {"integer": col.type != "continuous", **TABLE_PH}
    if col.levels is not None:
        kw["bounds"] = (0, len(col.levels) - 1)
    else:
        kw["bounds"] = col.bounds
        if col.bins is not None:
            kw["n_bins"] = col.bins
    return y[np.isfinite(y)], kw


PH_JOINT_DRAWS = 20
"""A PH column given parents draws its joint-cell sample at this many cells per record (at
most :data:`PH_JOINT_DRAWS_CAP`, at least n; a public number): each record's own cell is
then drawn from the sample's cells in its synthetic parent cell, so this second draw adds
little to the noise (with a sample of n it doubled the sampling variance: double sampling)."""
PH_JOINT_DRAWS_CAP = 2_000_000


def ph_joint_draws(n: int) -> int:
    """The size of a PH column's joint-cell sample (:data:`PH_JOINT_DRAWS`): public, from n."""
    return max(n, min(PH_JOINT_DRAWS * n, PH_JOINT_DRAWS_CAP))


def _own_codes(col: ConfidentialColumn, y: np.ndarray) -> np.ndarray:
    """A PH column's own cell: its level code, or its public equal-width bin (``bins``)."""
    if col.levels is not None:
        return y.astype(np.int64)
    return bin_codes(y, col.bounds, own_size(col))


def bin_codes(values: np.ndarray, bounds: tuple[float, float], k: int) -> np.ndarray:
    """0-based codes of ``values`` on k equal-width bins of the PUBLIC ``bounds`` (the upper
    bound in the last bin; a missing value in the first)."""
    lo, hi = bounds
    codes = np.floor((values - lo) / (hi - lo) * k)
    return np.clip(np.where(np.isfinite(codes), codes, 0), 0, k - 1).astype(np.int64)


def _conditional_values(
    col: ConfidentialColumn,
    parents: list[ConfidentialColumn],
    state: _State,
    joint: np.ndarray,
    k: int,
    rng: np.random.Generator,
    own: np.ndarray | None = None,
) -> np.ndarray:
    """Set k's levels (or public bins), each drawn (``TABLE_PH["draw"]``) from the PH
    sample's own cells in the record's SYNTHETIC parent cell (the sample's overall cells
    where that cell is empty; the sample has :func:`ph_joint_draws` cells, so this draw
    adds little noise), the shares raked to a calibrated marginal where ``own`` (the own
    histogram's sample) is given; a continuous column's value uniform within its drawn bin:
    post-processing of the ε_j-DP joint histogram sample (and the own histogram's)."""
    L, P = own_size(col), n_cells(col, parents)
    counts = np.bincount(joint.astype(np.int64), minlength=P * L).reshape(P, L).astype(float)
    empty = counts.sum(axis=1) == 0
    counts[empty] = counts.sum(axis=0)
    shares = counts / counts.sum(axis=1, keepdims=True)
    cells = _parent_cells(col, parents, {p.name: state.synthetic[p.name][k] for p in parents})
    if own is not None:
        q = np.bincount(cells, minlength=P) / len(cells)
        mine = np.bincount(own.astype(np.int64), minlength=L) / own.size
        weight = ph_calibration_weight(P, col.calibrate_share)
        shares = raked(shares, q, weight * mine + (1 - weight) * (q @ shares))
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


def _column_sets(
    col: ConfidentialColumn,
    rel: Any,
    state: _State,
    m: int,
    targets: np.ndarray | None,
    censoring: debias.Censoring | None = None,
) -> list[np.ndarray]:
    """m sets of a fitted column at the synthetic predecessors (NaN where the synthetic
    indicator says missing); a level column with a marginal histogram (``targets``: its m
    samples of codes) drawn at intercepts calibrated to the histogram's shares."""
    n = state.public.shape[0]
    designs, keep = [], []
    for k in range(m):
        parts = [features(p, state.synthetic[p.name][k]) for p in state.done]
        rows = np.ones(n, bool)
        if col.missing == "indicator":
            rows = state.synthetic[col.name + MISSING_SUFFIX][k] == 0
        designs.append(_design(state.public, parts, None if rows.all() else rows))
        keep.append(rows)
    if designs[0] is None:  # intercept-only: n records per set
        designs = [np.empty((int(r.sum()), 0)).view(PublicDesign) for r in keep]
    model = column_model(col)
    shares = None
    if col.levels is not None and targets is not None:
        k = len(col.levels)
        shares = [np.bincount(t.astype(np.int64), minlength=k) / t.size for t in targets]
    variances, means = None, None
    if col.calibrate_dispersion and targets is not None:
        scaled = [np.asarray(model.to_stan_scale(t, col.bounds), float) for t in targets]
        variances, means = [float(t.var()) for t in scaled], [float(t.mean()) for t in scaled]
    seed = rel.diagnostics["seed"]
    drawn = draws_at_design(
        model, rel.confidential, designs, seed, col.bounds, shares, variances, means, censoring
    )
    out = []
    for rows, y in zip(keep, drawn, strict=True):
        full = np.full(n, np.nan)
        full[rows] = _from_outcome(col, y)
        out.append(full)
    return out


def _column_seed(seed: int, j: int) -> int:
    return int(np.random.SeedSequence([int(seed), 29, j]).generate_state(1)[0])


def _reference_inputs(col: ConfidentialColumn, state: _State, has_X: bool, sampler: Sampler):
    """Censor_w's reference weights and reference centring, from the public reference only."""
    kw: dict[str, Any] = {}
    if col.centring == "saturated":
        kw["centring"] = "saturated"
    if state.ref_public is None or (
        not registry.takes_reference(col.mechanism) and col.centring != "reference"
    ):
        return kw
    y = state.ref[col.name]
    rows = np.isfinite(y)
    parts = [features(p, state.ref[p.name]) for p in state.done]
    ref_X = _design(state.ref_public, parts, rows) if has_X else None
    ref_y = _stan_outcome(col, y[rows])
    if registry.takes_reference(col.mechanism):
        kw.update(reference=ref_y, reference_X=ref_X)
    if col.centring == "reference":
        from dpsynth.release.plan import reference_point

        kw["centring"] = reference_point(
            ref_y, column_model(col), bounds=col.bounds, reference_X=ref_X, X=None, sampler=sampler
        )
    return kw


# ----------------------------------------------------------------------------- release


def synthesize_table(
    frame: pd.DataFrame,
    spec: str | Path | dict | TableSpec,
    epsilon: float,
    *,
    m: int = 1,
    seed: int | None = None,
    sampler: Sampler | None = None,
    neighbours: str | None = None,
    reference: pd.DataFrame | None = None,
    allow_large_epsilon: bool = False,
    budget_file: str | Path | budget.Charge | None = None,
    budget_total: float | None = None,
    dataset_sha256: str | None = None,
    progress: bool = False,
    allow_unconverged: bool = False,
) -> TableRelease:
    """Release m synthetic copies of a table under a total budget ``epsilon``.

    ``spec`` is checked first (a path, a mapping or a :class:`TableSpec`), then the data's
    header; the budget is charged (``budget_file``) before any value is read and the
    attempt's outcome recorded whatever happens. A refused or failed column refuses the
    whole table (a fit's convergence never does). ``reference``: the public reference file named by
    the spec (read from its path when not given). ``seed`` makes a research run
    reproducible and the release NOT private (the report says so). ``allow_unconverged`` is
    deprecated and ignored: a column whose fit misses the convergence policy is released
    all the same, and the table's confidential verdict is poor, naming it.
    """
    spec = load_spec(spec)
    epsilon = accounting.require_epsilon("epsilon", epsilon)
    require_sane_epsilon("epsilon", epsilon, allow_large_epsilon)
    m = require_m(m)
    if neighbours is not None and neighbours != spec.neighbours:
        raise InputError("neighbours", f"a table release supports {spec.neighbours} only")
    require_available_models(spec)
    if not isinstance(frame, pd.DataFrame):
        raise InputError("frame", "must be a pandas DataFrame of the confidential file")
    require_columns(spec, frame.columns, "data")
    ref = _reference_frame(spec, reference)
    spec = resolved_spec(spec, epsilon, m, frame.shape[0])  # public: no value is read
    identity = dataset_sha256
    if identity is None and budget_file is not None and not isinstance(budget_file, budget.Charge):
        identity = _frame_sha256(frame, spec)
    charge = safeguards.charge_budget(
        budget_file, budget_total, identity, epsilon, f"table m={m}", ()
    )
    owned = charge if not isinstance(budget_file, budget.Charge) else None
    with budget.attempt(owned):
        if allow_unconverged:
            from dpsynth.release.single import UNCONVERGED_DEPRECATION

            warnings.warn(UNCONVERGED_DEPRECATION, DeprecationWarning, stacklevel=2)
        run = {"progress": progress}
        out = _release_table(frame, spec, epsilon, m, seed, sampler or TABLE_SAMPLER, ref, run)
        if charge is not None:
            out.report["budget_ledger"] = charge.to_report()
            out.diagnostics["budget"] = charge.to_diagnostics()
    return out


def require_available_models(spec: TableSpec) -> None:
    """Every model the spec names is shipped by this dpsynth (binary and categorical
    columns need the ``logistic`` and ``categorical`` models: refused "not yet" without)."""
    from dpsynth.models.catalogue import MODELS

    for col in spec.order():
        if col.model is None:
            continue
        what = f"the indicator of {col.indicator_of!r}" if col.indicator_of else repr(col.name)
        try:
            model = get_model(col.model)
        except InputError:
            raise InputError(
                "model",
                f"column {what}: model {col.model!r} is not available in this dpsynth yet "
                f"({col.type} columns need it); available: {', '.join(MODELS)}",
            ) from None
        if col.clamp not in model.clamps:
            raise InputError(
                "clamp",
                f"column {what}: model {col.model!r} accepts clamp {', '.join(model.clamps)} "
                f"(got {col.clamp!r})",
            )


def column_model(col: ConfidentialColumn) -> Model:
    """A column's model; a categorical one on its number of public levels."""
    model = get_model(col.model)
    if col.type == "categorical":
        model = model.with_levels(len(col.levels))
    return model


def _frame_sha256(frame: pd.DataFrame, spec: TableSpec) -> str:
    """The dataset's identity for the budget file: a hash of the spec's columns' bytes."""
    return budget.array_sha256(
        *(pd.util.hash_pandas_object(frame[c], index=False).to_numpy() for c in spec.columns)
    )


def _reference_frame(spec: TableSpec, reference: pd.DataFrame | None) -> pd.DataFrame | None:
    if spec.reference is None:
        if reference is not None:
            raise InputError("reference", "the spec names no reference (reference = ...)")
        return None
    if reference is None:
        path = Path(spec.reference)
        if not path.is_file():
            raise InputError("reference", f"no such file: {spec.reference}")
        reference = pd.read_csv(path, encoding="utf-8-sig")
    require_columns(spec, reference.columns, "reference")
    return reference


def _release_table(
    frame: pd.DataFrame,
    spec: TableSpec,
    epsilon: float,
    m: int,
    seed: int | None,
    sampler: Sampler,
    ref: pd.DataFrame | None,
    run: dict[str, bool],
) -> TableRelease:
    """The release itself, once the budget is charged (column by column, in order)."""
    from dpsynth.release.single import KnownSeedWarning

    frame = frame.reset_index(drop=True)
    encoders = [_public_encoder(frame, c) for c in spec.public]
    state = _State(_public_matrix(frame, encoders), None, fit_records=spec.fit_records)
    if ref is not None:
        state.ref_public = _public_matrix(ref, encoders)
    clipped: dict[str, int] = {}
    for col in spec.order():
        state.real[col.name], clipped[col.name] = column_codes(frame, col)
        if ref is not None:
            state.ref[col.name] = _reference_codes(ref, col)
    releases: dict[str, Any] = {}
    marginals: dict[str, Any] = {}
    if seed is not None:
        warnings.warn(
            "a release made with a known seed is reproducible by anyone who has the seed "
            "and is therefore not private; omit the seed for a real release",
            KnownSeedWarning,
            stacklevel=3,
        )
    for j, col in enumerate(spec.order()):
        _announce(col, j, len(spec.order()), col.share * epsilon, run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KnownSeedWarning)
            try:
                rel, sets, marg = _fit_column(
                    col, j, state, col.share * epsilon, m, seed, sampler, run
                )
            except InputError as exc:
                raise _column_error(exc, col) from None
        releases[col.name] = rel
        if marg is not None:
            marginals[col.name] = marg
        state.synthetic[col.name] = sets
        state.done.append(col)
    data = _published_frame(frame, spec, state, m)
    report = _table_report(spec, releases, marginals, epsilon, m, seed, frame.shape[0])
    report["input_columns_not_released"] = [str(c) for c in frame.columns if c not in spec.columns]
    diagnostics = _table_diagnostics(spec, releases, marginals, clipped, seed)
    first = data if m == 1 else data[data[_set_column()] == 1]
    verdict = _with_guarantee(table_verdict_of(frame, first, spec), report)
    diagnostics["verdict"] = _with_convergence(verdict, releases)
    results = {k: r.confidential for k, r in releases.items()}
    return TableRelease(data, report, diagnostics, results)


def _announce(col: ConfidentialColumn, j: int, k: int, eps_j: float, run: dict) -> None:
    """A progress line per column: its name, mechanism and epsilon (all public, the spec's)."""
    if run.get("progress"):
        how = col.mechanism if col.model is None else f"{col.model}, {col.mechanism}"
        print(f"[dpsynth] column {j + 1}/{k} {col.name!r} ({how}; epsilon {eps_j:.4g})",
              file=sys.stderr, flush=True)  # fmt: skip


def _set_column() -> str:
    from dpsynth.release.single import SET_COLUMN

    return SET_COLUMN


def table_verdict_of(frame: pd.DataFrame, synthetic: pd.DataFrame, spec: TableSpec) -> dict:
    """The curator's table verdict (confidential) on the first synthetic set:
    :func:`dpsynth.curator.table_verdict.table_verdict` on the spec's columns that have public
    bounds or levels; "unavailable" (with the reason) when it cannot be computed."""
    try:
        from dpsynth.curator.table_verdict import table_verdict
    except ImportError:
        return {
            "verdict": "unavailable",
            "reason": "dpsynth.curator.table_verdict is not installed",
        }
    columns: dict[str, dict[str, Any]] = {}
    order = spec.order()
    for c in [*spec.public, *spec.confidential]:
        if c.type in ("continuous", "count") and c.bounds is None:
            continue  # a public column without public bounds has no public bins
        conf = isinstance(c, ConfidentialColumn) and registry.model_free(c.mechanism)
        columns[c.name] = {
            "type": c.type,
            "bounds": c.bounds,
            "levels": getattr(c, "public_levels", c.levels),
            "public": isinstance(c, PublicColumn),
            "mechanism": getattr(c, "mechanism", None),
            "given": [p.name for p in ph_parents(c, order[: order.index(c)])] if conf else None,
            "calibrated": conf and c.calibrate_share > 0,
            "fit_records": subsample_size(c, spec.fit_records, len(frame))
            if isinstance(c, ConfidentialColumn)
            else None,
        }
    analysis = None if spec.analysis is None else spec.analysis.formula
    try:
        return table_verdict(
            frame[list(columns)], synthetic.reset_index(drop=True)[list(columns)], columns, analysis
        )
    except (InputError, ValueError, KeyError) as exc:  # a verdict never blocks a release
        return {"verdict": "unavailable", "reason": str(exc)}


def _with_guarantee(verdict: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The table verdict with the table's guarantee; without DP, the NOT DP line (a release
    without a guarantee never reads as publishable, whatever its figures)."""
    from dpsynth.curator.column_verdict import not_dp_line

    guarantee = report["guarantee"]
    verdict = {**verdict, "guarantee": guarantee, "dp": guarantee == "DP"}
    if guarantee != "DP":
        verdict["not_dp"] = not_dp_line(guarantee)
    return verdict


TABLE_CONVERGENCE_ADVICE = (
    "give the column a larger share or the table a larger epsilon, a public reference "
    "(reference = ... in the spec), longer or more chains (iter_warmup, iter_sampling, "
    "chains), a higher step-size target (adapt_delta), another model (model in the spec) or "
    'mechanism = "ph" for a level column'
)
"""What a table's unconverged column may try: the table's own knobs, which the one-column
advice (its flags) does not name."""
TABLE_MULTIMODAL_ADVICE = (
    f"{MULTIMODAL_SAYS}, so longer or more chains will not help: give the column a larger "
    "share or the table a larger epsilon, a public reference (reference = ... in the spec), "
    "predecessors that explain it (its place in the order), another model (model in the "
    'spec), or mechanism = "ph" (a histogram on its public bounds or levels, no chains)'
)
"""The same for chains that settled in different modes (``diagnostics.multimodal``)."""


def _column_error(exc: InputError, col: ConfidentialColumn) -> InputError:
    """A column's refusal as the table's, naming the column (once)."""
    text = str(exc)
    body = text[len(exc.param) + 2 :] if text.startswith(f"{exc.param}: ") else text
    if f"column {col.name!r}" in body:
        return InputError(exc.param, body)
    return InputError(exc.param, f"column {col.name!r}: {body}")


def table_convergence_note(note: str, column: str) -> str:
    """A column's convergence note (:func:`dpsynth.engine.diagnostics.convergence_note`) in the
    table's terms: the column named, the advice :data:`TABLE_MULTIMODAL_ADVICE` for chains
    in different modes, else :data:`TABLE_CONVERGENCE_ADVICE`."""
    split = note.index("]: ") + 3 if "]: " in note else len(note)
    multimodal = note[split:].startswith(MULTIMODAL_SAYS)
    advice = TABLE_MULTIMODAL_ADVICE if multimodal else TABLE_CONVERGENCE_ADVICE
    return f"column {column!r}: {note[:split]}{advice}"


def _with_convergence(verdict: dict[str, Any], releases: dict[str, Any]) -> dict[str, Any]:
    """The table verdict, poor where a column's fit did not converge (the release is made
    all the same: its outcome must not depend on the data), naming the first such column."""
    notes = [
        table_convergence_note(r.diagnostics["utility"]["next_step"], name)
        for name, r in releases.items()
        if r.diagnostics.get("utility", {}).get("converged") is False
    ]
    if not notes:
        return verdict
    reasons = [n[: n.index(": ")] + ": the MCMC fit did not converge" for n in notes]
    return {
        **verdict,
        "verdict": "poor",
        "converged": False,
        "next_step": notes[0],
        "convergence": notes,
        "reasons": reasons + list(verdict.get("reasons", [])),
    }


def _public_matrix(frame: pd.DataFrame, encoders: list[_PublicEncoder]) -> np.ndarray:
    parts = [_encode_public(frame, e) for e in encoders]
    return np.hstack(parts) if parts else np.empty((len(frame), 0))


def _reference_codes(ref: pd.DataFrame, col: ConfidentialColumn) -> np.ndarray:
    """A reference column's values (public): clipped to the public bounds, NaN where missing."""
    if col.indicator_of is not None:
        return ref[col.indicator_of].isna().to_numpy().astype(float)
    if col.levels is not None:
        codes = level_codes(ref[col.name], col.levels, col.name).astype(float)
        return np.where(ref[col.name].isna().to_numpy(), np.nan, codes)
    return np.clip(_numeric(ref[col.name], col.name), *col.bounds)


def _published_frame(frame: pd.DataFrame, spec: TableSpec, state: _State, m: int) -> pd.DataFrame:
    """Public columns copied, confidential columns synthetic (levels restored), m sets long."""
    from dpsynth.release.single import SET_COLUMN

    sets = []
    for k in range(m):
        out = frame[[c.name for c in spec.public]].copy()
        for col in spec.order():
            out[col.name] = _decoded(col, state.synthetic[col.name][k])
        if m > 1:
            out.insert(0, SET_COLUMN, k + 1)
        sets.append(out)
    return pd.concat(sets, ignore_index=True)


def _decoded(col: ConfidentialColumn, values: np.ndarray) -> pd.Series:
    if col.levels is not None:
        codes = np.where(np.isfinite(values), values, -1).astype(np.int64)
        if col.missing == "level":  # its last level is written back as missing
            codes = np.where(codes == len(col.levels) - 1, -1, codes)
        levels = np.asarray(col.levels, dtype=object)
        return pd.Series(np.where(codes >= 0, levels[np.maximum(codes, 0)], None), dtype=object)
    if col.type == "count":
        return pd.Series(np.rint(values)).astype("Int64")
    return pd.Series(values)


# ----------------------------------------------------------------------------- report


_COLUMN_REPORT_KEYS = (
    "mechanism",
    "model",
    "model_program_sha256",
    "guarantee",
    "guarantee_meaning",
    "epsilon",
    "epsilon_per_set",
    "epsilon_budgeted",
    "if_unseeded",
    "internal_bound",
    "tuning",
    "sampler",
    "backend",
    "noise",
    "ledger",
)


def _table_report(
    spec: TableSpec,
    releases: dict[str, Any],
    marginals: dict[str, Any],
    epsilon: float,
    m: int,
    seed: Any,
    n: int,
) -> dict[str, Any]:
    """The public report: guarantee, epsilon in total and per column, neighbours, columns."""
    from dpsynth.io import provenance as _provenance

    columns = []
    order = spec.order()
    for j, col in enumerate(order):
        rep = releases[col.name].report
        entry = {k: rep[k] for k in _COLUMN_REPORT_KEYS if k in rep}
        parents = ph_parents(col, order[:j])
        entry.update(
            column=col.name,
            type=col.type,
            share=col.share,
            epsilon_allocated=col.share * epsilon,
            bounds=None if col.bounds is None else list(col.bounds),
            levels=None if col.levels is None else list(col.levels),
            predecessors=[c.name for c in order[:j]]
            if not registry.model_free(col.mechanism)
            else [p.name for p in parents],
            missingness_indicator_of=col.indicator_of,
        )
        if any(p.levels is None for p in parents):
            entry["given_bins"] = col.given_bins  # a continuous parent's public bins
        if parents and col.levels is None:
            entry["bins"] = own_size(col)  # a continuous PH column's own public bins
        k = subsample_size(col, spec.fit_records, n)
        if k is not None:  # the fit's own epsilon, amplified to its part of the column's
            entry["fit_subsample"] = fit_subsample(k, n, col.fit_share * col.share * epsilon)
        if col.name in marginals:
            marg = marginals[col.name]
            entry.update(_calibration_entry(col, marg, entry, col.share * epsilon, parents))
        entry.update(_column_choices(col))
        if (k is not None or col.name in marginals) and entry.get("epsilon") is not None:
            entry.update(epsilon=col.share * epsilon, epsilon_per_set=col.share * epsilon / m)
        columns.append(entry)
    unseeded = [
        r.report.get("if_unseeded", r.report) for r in [*releases.values(), *marginals.values()]
    ]
    all_dp = all(r.get("guarantee") == "DP" for r in unseeded)
    total = math.fsum(c["epsilon_allocated"] for c in columns)
    guarantee = "DP" if all_dp else "not established"
    report = {
        "release": "whole table (sequential synthesis: each column a censored pseudo "
        "posterior or a perturbed histogram, given the columns before it)",
        "guarantee": guarantee,
        "guarantee_meaning": _TABLE_MEANING if all_dp else "no DP statement: a column has none",
        "epsilon": total if all_dp else None,
        "epsilon_per_column": {c["column"]: c["epsilon_allocated"] for c in columns},
        "composition": "sequential: the table's epsilon is the sum of its columns' epsilons; "
        "each column's m sets cost m times its per-set epsilon",
        "neighbours": spec.neighbours,
        "neighbours_meaning": accounting.NEIGHBOUR_MEANING[spec.neighbours],
        "m": m,
        "n_records": n,
        "public_columns": [c.name for c in spec.public],
        "public_columns_meaning": PUBLIC_COPIED,
        "confidential_columns": columns,
        "missing_values": MISSING_MEANING,
        "analysis": None if spec.analysis is None else spec.analysis.formula,
        "seed": "user-supplied (release NOT private)" if seed is not None else "operating system",
        **_provenance(),
    }
    if seed is not None:
        report["if_unseeded"] = {k: report[k] for k in ("guarantee", "epsilon")}
        report.update(guarantee="not private (known seed)", epsilon=None, epsilon_budgeted=total)
        report["guarantee_meaning"] = accounting.GUARANTEES["not private (known seed)"]
    return report


DEBIAS_MEANING = (
    "each synthetic set's draw was moved by one parametric-bootstrap step: the shrinkage "
    "the same censored objective shows on data simulated from the draw at the set's public "
    "design was added back (dpsynth.models.debias; post-processing of the draw and public inputs, "
    "no epsilon spent)"
)


CALIBRATION_MEANING = (
    "the column's synthetic values, drawn from its model, were mapped by rank onto a sample "
    "of a Laplace-perturbed histogram of its marginal on the public bins (epsilon on all "
    "records with a value): the model's order, the histogram's marginal; the column's "
    "epsilon is the fit's plus the histogram's"
)


DISPERSION_MEANING = (
    "before the rank map, each synthetic set was drawn with the model's coefficients and the "
    "dispersion (a beta regression's precision; a negative binomial's, with its intercept "
    "moved to the histogram's mean) whose values at the set's design have the histogram "
    "sample's variance (calibrate_dispersion; post-processing)"
)
FIXED_DISPERSION_MEANING = (
    "the censored fit's dispersion was fixed at its centre's value (a fit to public inputs "
    "only), so the fit drew the coefficients alone; " + DISPERSION_MEANING
)


LEVEL_CALIBRATION_MEANING = (
    "the column's level model was centred at its fit to a sample of a Laplace-perturbed "
    "histogram of its levels (public inputs only), and each synthetic set was drawn at "
    "intercepts moved so that its mean level probabilities equal that histogram's shares (the "
    "model's slopes, the histogram's marginal); the column's epsilon is the fit's plus the "
    "histogram's"
)


def _column_choices(col: ConfidentialColumn) -> dict[str, str]:
    """A model column's public choices for the report: its centring (with the rule, where
    ``"auto"`` chose it) and its debias step."""
    out = {"debias": DEBIAS_MEANING} if col.debias else {}
    if not registry.model_free(col.mechanism):
        out["centring"] = col.centring
        out["clamp"] = f"{col.clamp}: {relations.CLAMP_MEANING[col.clamp]}"
    if col.centring_auto:
        out["centring_rule"] = AUTO_CENTRING_MEANING
    return out


def _marginal_meaning(col: ConfidentialColumn) -> str:
    if registry.model_free(col.mechanism):
        return PH_CALIBRATION
    if col.levels is not None:
        return LEVEL_CALIBRATION_MEANING
    return CALIBRATION_MEANING if col.calibrate_bins is not None else CENTRING_MEANING


CENTRING_MEANING = (
    "the column's censored fit was centred at its model fitted to a sample of a "
    "Laplace-perturbed histogram of its marginal on public cells (epsilon on all records with "
    "a value) beside the public and synthetic columns: public inputs only; the column's "
    "epsilon is the fit's plus the histogram's"
)


def _calibration_entry(
    col: ConfidentialColumn,
    marg: Any,
    entry: dict[str, Any],
    eps_j: float,
    parents: list[ConfidentialColumn],
) -> dict[str, Any]:
    """A calibrated column's report additions: the histogram's bins and epsilon, its ledger
    spends after the fit's (a PH column's: after its joint histogram's)."""
    fit_ledger, marg_ledger = entry.get("ledger") or {}, marg.report.get("ledger") or {}
    ledger = {
        key: math.fsum([fit_ledger.get(key, 0.0), marg_ledger.get(key, 0.0)])
        for key in ("total", "spent", "remaining")
    }
    ledger["spends"] = [*fit_ledger.get("spends", []), *marg_ledger.get("spends", [])]
    calibration = {
        "mechanism": "ph",
        "bins": _histogram_bins(col),
        "epsilon": col.calibrate_share * eps_j,
        "epsilon_of_the_fit": col.fit_share * eps_j,
        "used_for": _marginal_uses(col),
        "meaning": _marginal_meaning(col),
    }
    if registry.model_free(col.mechanism):  # public: the spec's share and the parents' cells
        calibration["weight_on_own_histogram"] = ph_calibration_weight(
            n_cells(col, parents), col.calibrate_share
        )
    if col.calibrate_dispersion:
        fixed = _fixes_dispersion(col)
        calibration["dispersion"] = FIXED_DISPERSION_MEANING if fixed else DISPERSION_MEANING
    return {"calibration": calibration, "ledger": ledger}


def _histogram_bins(col: ConfidentialColumn) -> int:
    """The cells of a column's marginal histogram: a PH column's own cells, else
    :func:`marginal_cells`."""
    if registry.model_free(col.mechanism):
        return own_size(col)
    cells = marginal_cells(col)
    return cells.get("n_bins") or int(cells["bounds"][1] - cells["bounds"][0]) + 1


def _marginal_uses(col: ConfidentialColumn) -> list[str]:
    """What a column's marginal histogram served: calibration (rank map; a level column's
    intercepts; a PH column's raking), centring, or both."""
    calibrated = (
        col.calibrate_bins is not None
        or col.levels is not None
        or registry.model_free(col.mechanism)
    )
    uses = ["calibration"] if calibrated else []
    return [*uses, "centring"] if col.centring == "marginal" else uses


_TABLE_MEANING = (
    "epsilon-DP for the whole table under substitution of one record: each confidential "
    "column is an epsilon_j-DP censored posterior draw (or a Laplace histogram) whose design "
    "holds record i's values in row i only, scaled by public bounds (a column with "
    "fit_subsample: its fit on a random subsample, amplified; a column with a marginal "
    "histogram (calibration or a marginal centring): its fit, or its joint histogram, and a "
    "Laplace histogram of its marginal, their epsilons summing to epsilon_j); synthesizing "
    "from the synthetic predecessors is post-processing; the epsilons add up (book: A "
    "whole table)"
)


def _table_diagnostics(
    spec: TableSpec,
    releases: dict[str, Any],
    marginals: dict[str, Any],
    clipped: dict[str, int],
    seed: Any,
) -> dict[str, Any]:
    """The confidential diagnostics: per column its release's diagnostics and clipped count."""
    from dpsynth.release.single import CONFIDENTIAL_BANNER

    def without_banner(release: Any) -> dict[str, Any]:
        return {k: v for k, v in release.diagnostics.items() if k != "confidential"}

    columns = {}
    for col in spec.order():
        diag = without_banner(releases[col.name])
        diag["n_clipped_to_bounds"] = clipped[col.name]
        if "utility" in diag:
            diag["column_verdict_at_confidential_predecessors"] = diag.pop("utility")
        if col.name in marginals:
            diag["calibration_histogram"] = without_banner(marginals[col.name])
        columns[col.name] = diag
    return {"confidential": CONFIDENTIAL_BANNER, "seed": seed, "columns": columns}


__all__ = [
    "TABLE_SAMPLER",
    "TableRelease",
    "calibrated_intercepts",
    "draws_at_design",
    "matched_kappa",
    "matched_phi",
    "matched_dispersion",
    "fit_epsilon",
    "fit_model",
    "ph_calibration_weight",
    "raked",
    "resolved_spec",
    "synthesize_table",
]
