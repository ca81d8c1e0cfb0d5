"""The synthesizers as compositions: weights -> Stan fit -> bounds -> synthetic data + report.

Mechanisms (``MECHANISMS``):

* ``unweighted``  posterior mechanism, alpha = 1 (local Lipschitz bound, aDP).
* ``lw``          Lipschitz-weighted pseudo posterior, Algorithm 1 (vector-weighted paper);
                  the censoring paper's "Weighted" (aDP).
* ``cw``          count-weighted pseudo posterior, Algorithm 2 (aDP).
* ``sw``          one scalar weight reaching a target Delta: the exponential mechanism (aDP).
* ``weighted-e``  LW, then alpha_i = 0 where Delta_i > eps/2, then refit (censoring paper 2.2, aDP);
                  Delta_i from the Weighted fit or alpha_i f_i (``truncation``).
* ``censor-w``    LW weights (optionally re-weighted by Eq. 6 of the vector-weighted paper,
                  optionally downscaled, Section 4.4) in the censored likelihood
                  with M = eps/2 (Eq. 3.5). Strict eps-DP only when the weights are fixed
                  without the confidential data (``alpha`` from a reference database,
                  Section 4.5); with weights from the confidential fit, no guarantee.
* ``censor-uw``   alpha = 1 in the censored likelihood: strict eps-DP.

The perturbed histogram lives in :mod:`dpsynth.mechanisms.histogram`, modips in :mod:`dpsynth.mechanisms.modips`;
:func:`dpsynth.release.single.synthesize` is the one release path for all of them.

Every ``epsilon`` here is the budget of **one posterior draw**, and ``neighbours``
defaults to :data:`dpsynth.privacy.relations.DEFAULT_NEIGHBOURS` like every function
taking one (the studies pass the papers' add/remove, M = eps/2); the release path passes
eps/m and the user's relation (:func:`dpsynth.privacy.accounting.censor_bound`).
``lw`` and ``cw`` accept ``reweight=True`` for Algorithm 3 (re-weighting, k searched);
``censor-w`` accepts it with a fixed k (Eq. 6 before censoring).
A :class:`Synthesizer` shares the fits that several mechanisms need (the unweighted
fit, the LW-weighted fit), which the Monte Carlo studies rely on. It keeps the fits,
weights and bounds; the synthetic records are made in :mod:`dpsynth.models.synthesis`, which
it hands the draws and the fit's public inputs only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dpsynth import engine, entropy
from dpsynth.errors import (
    InputError,
    require_bounds,
    require_choice,
    require_m,
)
from dpsynth.mechanisms import registry, weights
from dpsynth.models import synthesis
from dpsynth.models.catalogue import (
    Model,
    check_outcome,
    get_model,
    stan_data,
)
from dpsynth.models.centring import record_centre
from dpsynth.models.mirrors import LinearForm
from dpsynth.privacy import accounting, relations
from dpsynth.sampler import Sampler

MECHANISMS: tuple[str, ...] = registry.POSTERIOR_NAMES
"""The mechanisms :meth:`Synthesizer.run` makes (declared in :mod:`dpsynth.mechanisms.registry`)."""
GUARANTEE: dict[str, str] = {name: registry.get(name).guarantee for name in MECHANISMS}
"""What each mechanism promises before any run (its declaration's guarantee kind)."""


# Weights and centres are rounded to this many decimals before a fit (:func:`stable_input`).
STABLE_DECIMALS = 9


def stable_input(values: np.ndarray) -> np.ndarray:
    """Round a fit's derived real inputs (weights, centres) to ``STABLE_DECIMALS`` (9) decimals.

    They are computed in numpy from posterior draws (the record bounds behind LW weights,
    re-weighting, a reference fit's log-likelihood), and numpy's transcendental functions and
    BLAS kernels differ by an ulp or so between processors (SIMD and OpenBLAS dispatch).
    MCMC amplifies such a difference into other chains, so the same seed gave other numbers on
    another machine. Rounded to 1e-9, an ulp-sized difference (about 1e-16) changes the input
    only if it straddles a rounding boundary, about once in 10^7 values; the rounding moves
    each weight by at most 5e-10, far below anything the mechanisms' guarantees or the
    studies' figures resolve. Rounding keeps weights within [0, 1]. Exact data (outcomes,
    covariates, bounds) are not rounded.
    """
    return np.round(np.asarray(values, dtype=float), STABLE_DECIMALS)


CHUNK_ELEMENTS = 2**22
"""Draws x records evaluated at once when scanning a fit (32 MB of doubles per chunk)."""


def fit_description(tag: str) -> str:
    """A fit's purpose in a user's words, for progress lines (``tag`` is internal: a
    mechanism's name, possibly followed by ``-`` and details; its declaration's
    ``fit_purpose`` says what the fit is)."""
    if "-rw-" in tag:
        return "a re-weighted posterior (capped weights)"
    named = [
        m for m in registry.MECHANISMS.values() if tag == m.name or tag.startswith(f"{m.name}-")
    ]
    spec = max(named, key=lambda m: len(m.name), default=None)
    return "the weighted posterior" if spec is None else spec.fit_purpose


@dataclass
class WeightedFit:
    """One alpha-weighted (and optionally censored) pseudo posterior fit.

    Holds confidential quantities (weights, per-record bounds): they are used for
    accounting and plots and are never written to a release. The per-record bounds and
    the censored count come from one streaming pass over chunks of draws
    (:meth:`_scan`), so a release never holds the S x n matrix: its memory beyond the
    data and the draws is O(n) plus one chunk.
    """

    stan_fit: engine.StanFit
    alpha: np.ndarray
    log_lik_source: Any  # callable(draws, data) -> (s, n), or an S x n array (user programs)
    censor_bound: float | None
    data: dict[str, Any]

    def log_lik_rows(self, start: int, stop: int, data: dict[str, Any] | None = None) -> np.ndarray:
        """Unweighted log-likelihood of draws ``start:stop`` (rows) for every record of
        ``data`` (default: the fit's; a mirror may be given a subset of the records)."""
        if callable(self.log_lik_source):
            chunk = {k: v[start:stop] for k, v in self.stan_fit.draws.items()}
            return self.log_lik_source(chunk, self.data if data is None else data)
        return np.asarray(self.log_lik_source)[start:stop]

    @property
    def public_inputs(self) -> dict[str, Any]:
        """The fit's data without its confidential entries: all that synthesis may read
        (:func:`dpsynth.models.synthesis.public_only`)."""
        return synthesis.public_only(self.data)

    @property
    def log_lik(self) -> np.ndarray:
        """The whole S x n unweighted matrix (small fits and plots only)."""
        return self.log_lik_rows(0, self.stan_fit.n_draws)

    @property
    def contributions(self) -> np.ndarray:
        """S x n weighted (censored where asked) contributions (small fits and plots only)."""
        return accounting.weighted_contributions(self.log_lik, self.alpha, self.censor_bound)

    @cached_property
    def _scan(self) -> tuple[np.ndarray, np.ndarray]:
        """One pass over chunks of draws: (Delta_i after censoring, censored mask).

        Records whose data are identical (same outcome, covariates, weight and centre; e.g.
        counts under an intercept-only model) have identical terms, so a shipped model's
        mirror is evaluated once per distinct record and the result expanded (exact).
        """
        n = self.alpha.size
        if callable(self.log_lik_source):
            first, inverse = _distinct_records(self.data, n)
            if first.size < n:
                data = {k: _take(v, first, n) for k, v in self.data.items()}
                data["n"] = int(first.size)
                bounds, censored = self._scan_rows(data, self.alpha[first])
                return bounds[inverse], censored[inverse]
        return self._scan_rows(self.data, self.alpha)

    def _scan_rows(self, data: dict[str, Any], alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        linear = _linear_parts(self.log_lik_source, data)
        if linear is not None:
            return self._scan_linear(*linear, data, alpha)
        n, S = alpha.size, self.stan_fit.n_draws
        step = max(1, CHUNK_ELEMENTS // max(n, 1))
        bounds = np.zeros(n)
        censored = np.zeros(n, dtype=bool)
        for start in range(0, S, step):
            ll = self.log_lik_rows(start, start + step, data)
            absraw = np.abs(accounting.weighted_contributions(ll, alpha))
            if self.censor_bound is not None:
                censored |= np.any(absraw > self.censor_bound, axis=0)
                np.minimum(absraw, self.censor_bound, out=absraw)
            np.maximum(bounds, absraw.max(axis=0), out=bounds)
        return bounds, censored

    def _scan_linear(
        self, form: LinearForm, offset: Any, data: dict[str, Any], alpha: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The scan for a mirror linear in per-record statistics (:class:`LinearForm`):
        per chunk of records, all draws' terms alpha_i (W_s . Z_i - centre_i) by one matrix
        product, reduced to max_s |term| (faster than evaluating the mirror; same result up to
        rounding)."""
        W = form.coefficients(self.stan_fit.draws)
        Za = form.statistics(data) * alpha[:, None]
        shift = alpha * offset  # offset: 0 or the centres of these records
        n, step = alpha.size, max(1, CHUNK_ELEMENTS // max(W.shape[0], 1))
        top = np.zeros(n)
        for start in range(0, n, step):
            t = W @ Za[start : start + step].T - shift[start : start + step]
            top[start : start + step] = np.maximum(t.max(axis=0), -t.min(axis=0))
        if self.censor_bound is None:
            return top, np.zeros(n, dtype=bool)
        return np.minimum(top, self.censor_bound), top > self.censor_bound

    @property
    def record_bounds(self) -> np.ndarray:
        """Delta_i = max_s |alpha_i f_theta_s(x_i)| (after censoring, if any)."""
        return self._scan[0]

    @property
    def lipschitz(self) -> float:
        """Delta = max_i Delta_i."""
        return float(self.record_bounds.max())

    @property
    def n_censored(self) -> int:
        """Records clamped in at least one retained draw (0 when not censored)."""
        return int(self._scan[1].sum())


@dataclass
class Result:
    """A mechanism's final fit with its accounting (before synthesis)."""

    mechanism: str
    fit: WeightedFit | None
    epsilon_target: float | None
    tuning: dict[str, Any] = field(default_factory=dict)
    n_zero_weight: int = 0
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS

    @property
    def guarantee(self) -> str:
        return GUARANTEE[self.mechanism]

    @property
    def lipschitz(self) -> float | None:
        return None if self.fit is None else self.fit.lipschitz

    @property
    def epsilon(self) -> float | None:
        """Local epsilon of one draw from the draws-based bound: 2 Delta (add/remove) or 4 Delta."""
        if self.fit is None:
            return self.epsilon_target
        return accounting.epsilon_of(self.fit.lipschitz, self.neighbours)


class Synthesizer:
    """All mechanisms on one confidential outcome ``y`` (and covariates ``X``).

    Fits shared between mechanisms (unweighted, LW-weighted) are computed once.
    Every fit's seed derives from ``seed``, so a result is reproducible alone.
    """

    def __init__(
        self,
        y: Any,
        model: str | Model = "beta",
        *,
        X: np.ndarray | None = None,
        bounds: tuple[float, float] | None = None,
        seed: int | None = None,
        sampler: Sampler | None = None,
        progress: bool = False,
    ) -> None:
        self.bounds = None if bounds is None else require_bounds("bounds", *bounds)
        self.model = get_model(model).for_domain(self.bounds)
        self.y = check_outcome(self.model, y, self.bounds)
        self.X = X
        self.seed = entropy.os_seed() if seed is None else int(seed)
        self.sampler = sampler or Sampler()
        self.progress = progress
        self._fits: dict[tuple, WeightedFit] = {}
        self._reference: tuple[np.ndarray, Synthesizer, float, float] | None = None
        self._placeholder: float | None = None
        self.data_label = "the data"

    @property
    def n(self) -> int:
        return int(len(self.y))

    # -- fitting -----------------------------------------------------------

    def fit(
        self,
        alpha: np.ndarray,
        censor_bound: float | None = None,
        tag: str = "",
        centre: np.ndarray | None = None,
    ) -> WeightedFit:
        """Fit the alpha-weighted (censored if ``censor_bound``) pseudo posterior (Eq. 2.3 / 3.6).

        ``centre`` (dpsynth's extension, :func:`dpsynth.models.centring.record_centre`) centres each
        record's log-likelihood before weighting and clamping; the fit's ``log_lik`` and its
        bounds are then those of ll - centre, the quantity the program clamps.
        """
        alpha = stable_input(alpha)
        centre = None if centre is None else stable_input(centre)
        centre_key = None if centre is None else centre.tobytes()
        key = (tag, alpha.tobytes(), censor_bound, centre_key)
        if key in self._fits:
            return self._fits[key]
        self._say(f"fitting {fit_description(tag)} of {self.data_label}")  # no count: confidential
        mirror = self.model.record_log_lik
        data = stan_data(
            self.model,
            self.y,
            alpha,
            X=self.X,
            censor_bound=censor_bound,
            want_contrib=mirror is None,
            centre=centre,
        )
        sf = self._sample(self.model.fit_inputs(data, bounds=self.bounds), self._seed(tag))
        source = mirror if mirror is not None else sf.record_log_lik
        if centre is not None:
            source = _centred_source(source, centre)
        wf = WeightedFit(sf, alpha, source, censor_bound, data)
        self._fits[key] = wf
        return wf

    def _sample(self, inputs: dict[str, Any], seed: int) -> engine.StanFit:
        """NUTS on the fit program's ``inputs``. A pieces model's chains that Stan refuses to
        start stay at their public starting points (:func:`dpsynth.models.pieces.starting_fit`), so
        that whether a release happens never depends on the data."""
        s = self.sampler
        try:
            return engine.fit(
                self.model.stan_file,
                inputs,
                seed=seed,
                chains=s.chains,
                iter_warmup=s.iter_warmup,
                iter_sampling=s.iter_sampling,
                backend=s.backend,
                quiet=s.quiet,
                adapt_delta=s.adapt_delta,
            )
        except engine.InitializationFailed:
            start = getattr(self.model, "starting_fit", None)
            if start is None:
                raise
            return start(inputs, s.chains, s.iter_sampling, seed)

    def unweighted_fit(self) -> WeightedFit:
        return self.fit(np.ones(self.n), tag="unweighted")

    def lw_alpha(self, c: float = 1.0, g: float = 0.0) -> np.ndarray:
        """LW weights from the unweighted fit (Algorithm 1, steps 1-4)."""
        return weights.lw_weights(self.unweighted_fit().record_bounds, c, g)

    def reference_lw_alpha(
        self, reference: Any, reference_X: np.ndarray | None = None, c: float = 1.0, g: float = 0.0
    ) -> np.ndarray:
        """LW weights computed without the confidential data (censoring paper, Section 4.5).

        The unweighted model is fitted to the public ``reference`` database (an earlier
        period, or public data); each confidential record's bound is computed against the
        reference draws, and normalised by the reference records' own smallest and largest
        bounds (:func:`dpsynth.mechanisms.weights.reference_lw_weights`). Each weight is then a fixed
        function of its own record and public data, so the censoring proof holds.
        """
        ref = Synthesizer(
            reference,
            self.model,
            X=reference_X,
            bounds=self.bounds,
            seed=self.seed + 1,
            sampler=self.sampler,
            progress=self.progress,
        )
        ref.data_label = "the public reference database"
        ref_fit = ref.unweighted_fit()
        data = stan_data(self.model, self.y, np.ones(self.n), X=self.X)
        mirror = self.model.log_lik_mirror()
        if mirror is None:
            raise InputError(
                "reference",
                "reference weights need a shipped or pieces model (not a whole program)",
            )
        probe = WeightedFit(ref_fit.stan_fit, np.ones(self.n), mirror, None, data)
        alpha = weights.reference_lw_weights(probe.record_bounds, ref_fit.record_bounds, c, g)
        self._reference = (alpha, ref, c, g)
        return alpha

    def _reference_reweighted(self, alpha: np.ndarray, k: float) -> np.ndarray:
        """Re-weighting (Eq. 6) of reference weights on the reference only (Section 4.5).

        ``alpha`` must be the array :meth:`reference_lw_alpha` returned. The reference is
        fitted with its own LW weights; Delta is that fit's Weighted bound (over reference
        records) and each confidential record's Delta_i = max_s |alpha_i f_theta_s(x_i)| at
        that fit's draws, so alpha^w_i depends on record i and public data only.
        """
        if self._reference is None or self._reference[0] is not alpha:
            raise InputError(
                "reweight",
                "re-weighting given weights needs their reference database: "
                "compute them with reference_lw_alpha",
            )
        _, ref, c, g = self._reference
        ref_lw = ref.fit(ref.lw_alpha(c, g), tag="lw")
        data = stan_data(self.model, self.y, np.ones(self.n), X=self.X)
        probe = WeightedFit(ref_lw.stan_fit, alpha, self.model.log_lik_mirror(), None, data)
        return weights.reweighted(alpha, probe.record_bounds, k, delta=ref_lw.lipschitz)

    # -- mechanisms ----------------------------------------------------------

    def unweighted(self, neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS) -> Result:
        return Result("unweighted", self.unweighted_fit(), None, neighbours=neighbours)

    def lw(
        self,
        c: float = 1.0,
        g: float = 0.0,
        reweight: bool = False,
        k: float = 0.95,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    ) -> Result:
        """LW synthesizer (Algorithm 1), optionally re-weighted (Algorithm 3); ``neighbours``
        is the relation its local epsilon is stated under."""
        wf = self.fit(self.lw_alpha(c, g), tag="lw")
        tuning: dict[str, Any] = {"c": c, "g": g}
        if reweight:
            wf, tuning["k"] = self._reweight(wf, k, "lw")
        return Result("lw", wf, None, tuning, int((wf.alpha == 0).sum()), neighbours)

    def cw(
        self,
        radius: float,
        c: float = 1.0,
        g: float = 0.0,
        reweight: bool = False,
        k: float = 0.95,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    ) -> Result:
        """CW synthesizer (Algorithm 2), optionally re-weighted (Algorithm 3)."""
        wf = self.fit(weights.cw_weights(self.y, radius, c, g), tag="cw")
        tuning: dict[str, Any] = {"radius": radius, "c": c, "g": g}
        if reweight:
            wf, tuning["k"] = self._reweight(wf, k, "cw")
        return Result("cw", wf, None, tuning, int((wf.alpha == 0).sum()), neighbours)

    def sw(
        self,
        target_lipschitz: float,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    ) -> Result:
        """SW: scalar alpha = Delta_target / Delta_x (exponential mechanism)."""
        return self._sw(target_lipschitz, neighbours)

    def _sw(self, target_lipschitz: float, neighbours: relations.Neighbours) -> Result:
        a = weights.sw_weight(self.unweighted_fit().lipschitz, target_lipschitz)
        wf = self.fit(np.full(self.n, a), tag="sw")
        return Result(
            "sw",
            wf,
            accounting.epsilon_of(target_lipschitz, neighbours),
            {"alpha": a, "target_lipschitz": target_lipschitz},
            neighbours=neighbours,
        )

    def weighted_e(
        self,
        epsilon: float,
        c: float = 1.0,
        g: float = 0.0,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
        truncation: str = "lw-bound",
        downscale: float | None = None,
    ) -> Result:
        """Weighted-e (censoring paper, Section 2.2): zero the weights of records whose bound
        exceeds M (eps/2 under add/remove), refit.

        ``truncation`` (:data:`dpsynth.mechanisms.weights.WEIGHTED_E_RULES`) names the record bound:
        ``weighted-fit`` max_s |alpha_i f_theta_s(x_i)| over the Weighted fit's draws,
        ``lw-bound`` (default) alpha_i f_i with the Unweighted fit's f_i that built the LW
        weights (the reading that reproduces Table 1). ``downscale`` multiplies the LW weights first
        (Section 4.4); the ``weighted-fit`` rule then reads the downscaled Weighted fit.
        """
        epsilon = accounting.require_epsilon("epsilon", epsilon)
        require_choice("truncation", truncation, weights.WEIGHTED_E_RULES)
        alpha = self.lw_alpha(c, g)
        if downscale is not None:
            alpha = weights.downscaled(alpha, downscale)
        if truncation == "lw-bound":
            bounds = weights.lw_truncation_bounds(alpha, self.unweighted_fit().record_bounds)
        else:
            tag = "lw" if downscale is None else f"lw-downscaled-{downscale}"
            bounds = self.fit(alpha, tag=tag).record_bounds
        bound = accounting.censor_bound(epsilon, neighbours)
        alpha_e = weights.weighted_e_weights(alpha, bounds, 2 * bound)
        suffix = "" if downscale is None else f"-downscaled-{downscale}"
        wf = self.fit(alpha_e, tag=f"weighted-e-{bound}{suffix}")
        tuning = {"c": c, "g": g, "truncation": truncation}
        if downscale is not None:
            tuning["downscale"] = downscale
        return Result("weighted-e", wf, epsilon, tuning, int((alpha_e == 0).sum()), neighbours)

    def censor_w(
        self,
        epsilon: float,
        c: float = 1.0,
        g: float = 0.0,
        downscale: float | None = None,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
        alpha: np.ndarray | None = None,
        centring: Any = "none",
        reweight: bool = False,
        k: float = 0.95,
    ) -> Result:
        """Censor_w: LW weights (x ``downscale``) in the likelihood censored at M (Eq. 3.5).

        ``alpha`` given (e.g. :meth:`reference_lw_alpha`) replaces the weights computed
        from the confidential unweighted fit, which the DP proof does not cover.
        ``reweight``: the weights are first re-weighted by Eq. (6) of the vector-weighted
        paper with this fixed ``k`` (no search), alpha^w_i = k alpha_i Delta / Delta_i clipped
        to [0, 1], Delta_i and Delta from the Weighted (LW) fit; with reference weights, from
        the reference's own Weighted fit (:meth:`_reference_reweighted`). This is the reading
        that reproduces Table 1's Censor_w row (the censoring paper does not mention it).
        ``downscale`` then multiplies the (re-weighted) weights (Section 4.4).
        ``centring`` (dpsynth's extension): clamp alpha_i (ll_i - c(x_i)) instead, with c
        from :func:`dpsynth.models.centring.record_centre` (``"none"`` is the paper).
        """
        epsilon = accounting.require_epsilon("epsilon", epsilon)
        bound = accounting.censor_bound(epsilon, neighbours)
        if reweight and not (np.isfinite(k) and 0 < k <= 1):
            raise InputError("k", f"must lie in (0, 1] (got {k})")  # before any fit
        tag = "censor-w-ref" if alpha is not None else "censor-w"
        if alpha is None:
            alpha = self.lw_alpha(c, g)
            if reweight:
                lw = self.fit(alpha, tag="lw")
                alpha = weights.reweighted(alpha, lw.record_bounds, k)
        elif reweight:
            alpha = self._reference_reweighted(alpha, k)
        alpha = np.asarray(alpha, dtype=float)
        if downscale is not None:
            alpha = weights.downscaled(alpha, downscale)
        centre = self._centre(centring)
        wf = self.fit(alpha, censor_bound=bound, tag=f"{tag}-{downscale}", centre=centre)
        tuning = {"c": c, "g": g, "downscale": downscale, "centring": centring}
        if reweight:
            tuning.update(reweight=True, k=k)
        return Result("censor-w", wf, epsilon, tuning, int((alpha == 0).sum()), neighbours)

    def censor_uw(
        self,
        epsilon: float,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
        centring: Any = "none",
        downscale: float | None = None,
    ) -> Result:
        """Censor_uw: alpha = 1 in the likelihood censored at M (eps/2 under add/remove).

        ``centring`` as in :meth:`censor_w` (dpsynth's extension; ``"none"`` is the paper).
        ``downscale`` d: every weight is the public constant d instead of 1 (Section 4.4's
        downscaling of Censor_w applied to unit weights): each term d (ll_i - c_i) is still
        clamped to [-M, M], so the proof is unchanged; fewer terms reach the bound, and the
        posterior is tempered by d.
        """
        epsilon = accounting.require_epsilon("epsilon", epsilon)
        bound = accounting.censor_bound(epsilon, neighbours)
        centre = self._centre(centring)
        alpha = np.ones(self.n)
        tag = "censor-uw"
        if downscale is not None:
            alpha, tag = weights.downscaled(alpha, downscale), f"censor-uw-{downscale}"
        wf = self.fit(alpha, censor_bound=bound, tag=tag, centre=centre)
        tuning: dict[str, Any] = {} if centre is None else {"centring": centring}
        if downscale is not None:
            tuning["downscale"] = downscale
        return Result("censor-uw", wf, epsilon, tuning, neighbours=neighbours)

    def _centre(self, centring: Any) -> np.ndarray | None:
        """The record-only centres of ``centring`` (None for the paper's uncentred mechanism)."""
        if isinstance(centring, str) and centring == "none":
            return None
        data = stan_data(self.model, self.y, np.ones(self.n), X=self.X)
        return record_centre(self.model, data, centring)

    def _reweight(
        self, wf: WeightedFit, k0: float, tag: str, tol: float = 0.01, max_refits: int = 6
    ):
        """Algorithm 3: search k so that Delta after re-weighting is within ``tol`` of before.

        Starts at the paper's k = 0.95, then bisects on (0, 1): Delta grows with k.
        Returns the first fit within tolerance; failing that, the fit with the largest
        k whose Delta does not exceed (1 + tol) Delta, else the original fit.
        """
        target = wf.lipschitz
        lo, hi, k = 0.0, 1.0, k0
        best: tuple[WeightedFit, float] | None = None
        for _ in range(max_refits):
            cand = self.fit(weights.reweighted(wf.alpha, wf.record_bounds, k), tag=f"{tag}-rw-{k}")
            rel = (cand.lipschitz - target) / target
            if abs(rel) <= tol:
                return cand, k
            if rel > tol:
                hi = k
            else:
                lo = k
                best = (cand, k)
            k = (lo + hi) / 2
        return best if best is not None else (wf, None)

    # -- synthesis and reporting ---------------------------------------------

    def run(
        self,
        mechanism: str,
        epsilon: float | None = None,
        *,
        neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
        alpha: np.ndarray | None = None,
        centring: Any = "none",
        **tuning: Any,
    ) -> Result:
        """Run ``mechanism`` (see ``MECHANISMS``) by the function its declaration names
        (``registry.Mechanism.fit``) with its declared options; ``epsilon`` is per draw.

        ``centring`` applies to ``censor-w`` and ``censor-uw`` only (dpsynth's extension).
        """
        require_choice("mechanism", mechanism, MECHANISMS)
        require_choice("neighbours", neighbours, accounting.NEIGHBOURS)
        spec = registry.get(mechanism)
        options = _pick(tuning, *sorted(spec.options))
        return spec.fitter()(self, epsilon, neighbours, alpha, centring, options)

    def synthesize(self, result: Result, m: int = 1, n_synthetic: int | None = None) -> np.ndarray:
        """m synthetic datasets (m x N) from m distinct retained draws (posterior predictive).

        Shipped models draw in numpy (``Model.simulate``); user programs through Stan's
        ``y_rep``. ``n_synthetic`` (add/remove releases, intercept-only models) sets N;
        more records from the same draw are post-processing.
        """
        m = require_m(m)
        wf = result.fit
        S = wf.stan_fit.n_draws
        if m > S:
            raise InputError("m", f"at most {S} synthetic datasets (one per retained draw)")
        n_out = self.n if n_synthetic is None else require_m(n_synthetic, "n_synthetic")
        if n_out != self.n and self.X is not None:
            raise InputError("n_synthetic", "a regression synthesizes one record per covariate row")
        picks, rng = synthesis.published_picks(self.seed, S, m)
        return self._sets_at(wf, picks, n_out, rng)

    def verdict_sets(
        self, result: Result, m: int, extra: int, n_synthetic: int | None = None
    ) -> np.ndarray:
        """``extra`` synthetic sets (extra x N) from retained draws other than the m published
        ones, for the curator's confidential verdict only (never published). Empty (0 x N)
        for a user program (each set would cost a Stan run) or too few draws."""
        wf = result.fit
        S = wf.stan_fit.n_draws
        n_out = self.n if n_synthetic is None else int(n_synthetic)
        if getattr(self.model, "simulate", None) is None or S - m < 1 or extra < 1:
            return np.empty((0, n_out))
        picks, rng = synthesis.verdict_picks(self.seed, S, m, extra)
        return self._sets_at(wf, picks, n_out, rng)

    def _sets_at(
        self, wf: WeightedFit, picks: np.ndarray, n_out: int, rng: np.random.Generator
    ) -> np.ndarray:
        """One synthetic set per retained draw in ``picks`` (len(picks) x n_out), made by
        :func:`dpsynth.models.synthesis.sets_at` from the draws and the fit's public inputs."""
        public = wf.public_inputs
        value = None
        if self.model.simulate is None and len(picks):
            value = self.placeholder(public, wf.stan_fit.draw(int(picks[0])))
        return synthesis.sets_at(
            self.model,
            wf.stan_fit.draws,
            public,
            picks,
            n_out,
            rng,
            bounds=self.bounds,
            seed=self.seed,
            param_names=wf.stan_fit.param_names,
            stand_in=value,
            backend=self.sampler.backend,
            quiet=self.sampler.quiet,
        )

    def placeholder(self, data: dict[str, Any], draw: dict[str, Any]) -> float:
        """The public placeholder outcome of a user program's synthesis, found once at one draw
        (:func:`dpsynth.models.synthesis.placeholder`; only the public entries of ``data`` are read)."""
        if self._placeholder is None:
            public = synthesis.public_only(data)
            self._placeholder = synthesis.placeholder(
                self.model, public, draw, self.sampler.backend
            )
        return self._placeholder

    def _seed(self, tag: str) -> int:
        return synthesis.derived_seed(self.seed, tag)

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"[dpsynth] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Centred:
    """A mirror minus the record centres (dpsynth's extension).

    A mirror evaluated on a subset of the records (``WeightedFit._scan`` on distinct
    records, whose data then say fewer than ``centre.size`` records) subtracts that
    subset's ``centre`` from its data, which :meth:`Synthesizer.fit` fills with the same
    centres; on all records it subtracts ``centre``.
    """

    source: Any
    centre: np.ndarray

    def offset(self, data: dict[str, Any]) -> np.ndarray:
        full = int(data["n"]) == self.centre.size
        return self.centre if full else np.asarray(data["centre"], float)

    def __call__(self, draws: dict, data: dict) -> np.ndarray:
        return self.source(draws, data) - self.offset(data)


def _centred_source(source: Any, centre: np.ndarray) -> Any:
    """``source`` (mirror or S x n array) minus the record centres (:class:`_Centred`)."""
    if callable(source):
        return _Centred(source, centre)
    return np.asarray(source) - centre


def _linear_parts(source: Any, data: dict[str, Any]) -> tuple[LinearForm, Any] | None:
    """(linear form, per-record offset) when ``source`` is a :class:`LinearForm` mirror,
    centred or not; else None."""
    offset: Any = 0.0
    if isinstance(source, _Centred):
        source, offset = source.source, source.offset(data)
    return (source, offset) if isinstance(source, LinearForm) else None


def _distinct_records(data: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the first of each distinct record (all per-record data entries equal) and
    the map from every record to its distinct one."""
    columns = [
        np.asarray(v, dtype=float).reshape(n, -1)
        for v in data.values()
        if np.ndim(v) >= 1 and np.shape(v)[0] == n
    ]
    if not columns or n == 0:
        return np.arange(n), np.arange(n)
    _, first, inverse = np.unique(
        np.hstack(columns), axis=0, return_index=True, return_inverse=True
    )
    return first, inverse.ravel()


def _take(value: Any, rows: np.ndarray, n: int) -> Any:
    """``value`` restricted to ``rows`` if it holds one entry per record, else unchanged."""
    if np.ndim(value) >= 1 and np.shape(value)[0] == n:
        return np.asarray(value)[rows]
    return value


# -- the posterior mechanisms' fit functions (named by their declarations' ``fit``) ---------
# Each takes (synthesizer, epsilon per draw, neighbours, reference weights, centring, the
# declared options given) and returns the mechanism's Result.


def fit_unweighted(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    return syn.unweighted(neighbours)


def fit_lw(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    return syn.lw(**options, neighbours=neighbours)


def fit_cw(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    if options.get("radius") is None:
        raise InputError("radius", "the CW mechanism needs a radius r (Algorithm 2)")
    return syn.cw(**options, neighbours=neighbours)


def fit_sw(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    target = options.get("target_lipschitz")
    if target is None:
        target = accounting.censor_bound(accounting.require_epsilon("epsilon", epsilon), neighbours)
    return syn.sw(target, neighbours)


def fit_weighted_e(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    return syn.weighted_e(epsilon, neighbours=neighbours, **options)


def fit_censor_w(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    return syn.censor_w(epsilon, neighbours=neighbours, alpha=alpha, centring=centring, **options)


def fit_censor_uw(syn: Synthesizer, epsilon, neighbours, alpha, centring, options) -> Result:
    return syn.censor_uw(epsilon, neighbours=neighbours, centring=centring, **options)


def _pick(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: d[k] for k in keys if d.get(k) is not None}
