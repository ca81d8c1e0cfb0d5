"""The synthesizers as compositions: weights -> Stan fit -> bounds -> synthetic data + report.

Mechanisms (``MECHANISMS``):

* ``unweighted``  posterior mechanism, alpha = 1 (local Lipschitz bound, aDP).
* ``lw``          Lipschitz-weighted pseudo posterior, Algorithm 1 (vector-weighted paper);
                  the censoring paper's "Weighted" (aDP).
* ``cw``          count-weighted pseudo posterior, Algorithm 2 (aDP).
* ``sw``          one scalar weight reaching a target Delta: the exponential mechanism (aDP).
* ``weighted-e``  LW, then alpha_i = 0 where Delta_i > eps/2, then refit (censoring paper 2.2, aDP).
* ``censor-w``    LW weights (optionally downscaled, Section 4.4) in the censored likelihood
                  with M = eps/2 (Eq. 3.5): strict eps-DP.
* ``censor-uw``   alpha = 1 in the censored likelihood: strict eps-DP.
* ``ph``          perturbed histogram (censoring paper, supplement S1): strict eps-DP on
                  public bounds.

``lw`` and ``cw`` accept ``reweight=True`` for Algorithm 3 (re-weighting).
A :class:`Synthesizer` shares the fits that several mechanisms need (the unweighted
fit, the LW-weighted fit), which the Monte Carlo studies rely on.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import engine, privacy, weights
from dpsynth.errors import InputError, require_bounds, require_finite_positive
from dpsynth.models import Model, check_outcome, get_model, stan_data

MECHANISMS = ("unweighted", "lw", "cw", "sw", "weighted-e", "censor-w", "censor-uw", "ph")
GUARANTEE = {
    "unweighted": "aDP",
    "lw": "aDP",
    "cw": "aDP",
    "sw": "aDP",
    "weighted-e": "aDP",
    "censor-w": "DP",
    "censor-uw": "DP",
    "ph": "DP",
}
SET_COLUMN = "synthetic_set"


@dataclass(frozen=True)
class Sampler:
    """MCMC settings of every fit (the papers: 4 chains would be Stan's default)."""

    chains: int = 4
    iter_warmup: int = 1000
    iter_sampling: int = 1000
    backend: str | None = None
    quiet: bool = True


@dataclass
class WeightedFit:
    """One alpha-weighted (and optionally censored) pseudo posterior fit.

    Holds confidential quantities (weights, per-record bounds): they are used for
    accounting and plots and are never written to a release.
    """

    stan_fit: engine.StanFit
    alpha: np.ndarray
    log_lik: np.ndarray  # S x n unweighted
    censor_bound: float | None
    data: dict[str, Any]

    @property
    def contributions(self) -> np.ndarray:
        """S x n weighted (censored where asked) contributions."""
        return privacy.weighted_contributions(self.log_lik, self.alpha, self.censor_bound)

    @cached_property
    def record_bounds(self) -> np.ndarray:
        """Delta_i = max_s |alpha_i f_theta_s(x_i)| (after censoring, if any).

        Computed once per fit (the S x n matrix costs about 70 ms at S = 4000, n = 2000):
        ``alpha``, ``log_lik`` and ``censor_bound`` are not meant to change after the fit.
        """
        return privacy.record_bounds(self.contributions)

    @property
    def lipschitz(self) -> float:
        """Delta = max_i Delta_i."""
        return float(self.record_bounds.max())

    @cached_property
    def n_censored(self) -> int:
        """Records clamped in at least one retained draw (0 when not censored)."""
        if self.censor_bound is None:
            return 0
        raw = privacy.weighted_contributions(self.log_lik, self.alpha)
        return int(privacy.censored_records(raw, self.censor_bound).sum())


@dataclass
class Result:
    """A mechanism's final fit with its accounting (before synthesis)."""

    mechanism: str
    fit: WeightedFit | None
    epsilon_target: float | None
    tuning: dict[str, Any] = field(default_factory=dict)
    n_zero_weight: int = 0

    @property
    def guarantee(self) -> str:
        return GUARANTEE[self.mechanism]

    @property
    def lipschitz(self) -> float | None:
        return None if self.fit is None else self.fit.lipschitz

    @property
    def epsilon(self) -> float | None:
        """The guarantee delivered: 2 Delta for posterior mechanisms, the budget for PH."""
        if self.fit is None:
            return self.epsilon_target
        return privacy.epsilon_of(self.fit.lipschitz)


@dataclass
class Release:
    """Synthetic data (synthetic records only) and their JSON-able privacy report.

    ``confidential`` keeps the weights and record bounds for the notebooks' plots;
    :meth:`write` never writes it.
    """

    data: pd.DataFrame
    report: dict[str, Any]
    confidential: Result | None = None

    def write(self, out_csv: str | Path, report_json: str | Path) -> None:
        """Write both files atomically: nothing partial is left if anything fails."""
        _atomic_write(Path(out_csv), lambda p: self.data.to_csv(p, index=False))
        _atomic_write(
            Path(report_json), lambda p: Path(p).write_text(json.dumps(self.report, indent=2))
        )


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
        seed: int = 0,
        sampler: Sampler | None = None,
        progress: bool = False,
    ) -> None:
        self.model = get_model(model)
        self.bounds = None if bounds is None else require_bounds("--bounds", *bounds)
        self.y = check_outcome(self.model, y, self.bounds)
        self.X = X
        self.seed = int(seed)
        self.sampler = sampler or Sampler()
        self.progress = progress
        self._fits: dict[tuple, WeightedFit] = {}

    @property
    def n(self) -> int:
        return int(len(self.y))

    # -- fitting -----------------------------------------------------------

    def fit(
        self, alpha: np.ndarray, censor_bound: float | None = None, tag: str = ""
    ) -> WeightedFit:
        """Fit the alpha-weighted (censored if ``censor_bound``) pseudo posterior (Eq. 2.3 / 3.6)."""
        key = (tag, np.asarray(alpha).tobytes(), censor_bound)
        if key in self._fits:
            return self._fits[key]
        self._say(f"fitting {self.model.name} ({tag or 'weighted'}, n={self.n})")
        mirror = self.model.log_lik
        data = stan_data(
            self.model,
            self.y,
            alpha,
            X=self.X,
            censor_bound=censor_bound,
            want_log_lik=mirror is None,
        )
        s = self.sampler
        sf = engine.fit(
            self.model.stan_file,
            data,
            seed=self._seed(tag),
            chains=s.chains,
            iter_warmup=s.iter_warmup,
            iter_sampling=s.iter_sampling,
            backend=s.backend,
            quiet=s.quiet,
        )
        if mirror is not None:
            log_lik = mirror(sf.draws, data)
        else:
            a = np.asarray(alpha, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                log_lik = np.where(a > 0, sf.log_lik_raw / np.where(a > 0, a, 1.0), 0.0)
        wf = WeightedFit(sf, np.asarray(alpha, dtype=float), log_lik, censor_bound, data)
        self._fits[key] = wf
        return wf

    def unweighted_fit(self) -> WeightedFit:
        return self.fit(np.ones(self.n), tag="unweighted")

    def lw_alpha(self, c: float = 1.0, g: float = 0.0) -> np.ndarray:
        """LW weights from the unweighted fit (Algorithm 1, steps 1-4)."""
        return weights.lw_weights(self.unweighted_fit().record_bounds, c, g)

    # -- mechanisms ----------------------------------------------------------

    def unweighted(self) -> Result:
        return Result("unweighted", self.unweighted_fit(), None)

    def lw(self, c: float = 1.0, g: float = 0.0, reweight: bool = False, k: float = 0.95) -> Result:
        """LW synthesizer (Algorithm 1), optionally re-weighted (Algorithm 3)."""
        wf = self.fit(self.lw_alpha(c, g), tag="lw")
        tuning: dict[str, Any] = {"c": c, "g": g}
        if reweight:
            wf, tuning["k"] = self._reweight(wf, k, "lw")
        return Result("lw", wf, None, tuning, int((wf.alpha == 0).sum()))

    def cw(
        self, radius: float, c: float = 1.0, g: float = 0.0, reweight: bool = False, k: float = 0.95
    ) -> Result:
        """CW synthesizer (Algorithm 2), optionally re-weighted (Algorithm 3)."""
        wf = self.fit(weights.cw_weights(self.y, radius, c, g), tag="cw")
        tuning: dict[str, Any] = {"radius": radius, "c": c, "g": g}
        if reweight:
            wf, tuning["k"] = self._reweight(wf, k, "cw")
        return Result("cw", wf, None, tuning, int((wf.alpha == 0).sum()))

    def sw(self, target_lipschitz: float) -> Result:
        """SW: scalar alpha = Delta_target / Delta_x (exponential mechanism)."""
        a = weights.sw_weight(self.unweighted_fit().lipschitz, target_lipschitz)
        wf = self.fit(np.full(self.n, a), tag="sw")
        return Result(
            "sw", wf, 2 * target_lipschitz, {"alpha": a, "target_lipschitz": target_lipschitz}
        )

    def weighted_e(self, epsilon: float, c: float = 1.0, g: float = 0.0) -> Result:
        """Weighted-e: LW fit, zero the weights of records with Delta_i > eps/2, refit."""
        epsilon = require_finite_positive("--epsilon", epsilon)
        lw = self.fit(self.lw_alpha(c, g), tag="lw")
        alpha = weights.weighted_e_weights(lw.alpha, lw.record_bounds, epsilon)
        wf = self.fit(alpha, tag=f"weighted-e-{epsilon}")
        return Result("weighted-e", wf, epsilon, {"c": c, "g": g}, int((alpha == 0).sum()))

    def censor_w(
        self, epsilon: float, c: float = 1.0, g: float = 0.0, downscale: float | None = None
    ) -> Result:
        """Censor_w: LW weights (x ``downscale``) in the likelihood censored at M = eps/2."""
        epsilon = require_finite_positive("--epsilon", epsilon)
        alpha = self.lw_alpha(c, g)
        if downscale is not None:
            alpha = weights.downscaled(alpha, downscale)
        wf = self.fit(alpha, censor_bound=epsilon / 2, tag=f"censor-w-{downscale}")
        tuning = {"c": c, "g": g, "downscale": downscale}
        return Result("censor-w", wf, epsilon, tuning, int((alpha == 0).sum()))

    def censor_uw(self, epsilon: float) -> Result:
        """Censor_uw: alpha = 1 in the likelihood censored at M = eps/2."""
        epsilon = require_finite_positive("--epsilon", epsilon)
        wf = self.fit(np.ones(self.n), censor_bound=epsilon / 2, tag="censor-uw")
        return Result("censor-uw", wf, epsilon)

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

    def run(self, mechanism: str, epsilon: float | None = None, **tuning: Any) -> Result:
        """Dispatch by mechanism name (see ``MECHANISMS``)."""
        if mechanism not in MECHANISMS:
            raise InputError(
                "--mechanism",
                f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}",
            )
        if mechanism == "unweighted":
            return self.unweighted()
        if mechanism == "lw":
            return self.lw(**_pick(tuning, "c", "g", "reweight", "k"))
        if mechanism == "cw":
            if tuning.get("radius") is None:
                raise InputError("--radius", "the CW mechanism needs a radius r (Algorithm 2)")
            return self.cw(**_pick(tuning, "radius", "c", "g", "reweight", "k"))
        if mechanism == "sw":
            target = tuning.get("target_lipschitz")
            if target is None:
                target = require_finite_positive("--epsilon", epsilon) / 2
            return self.sw(target)
        if mechanism == "weighted-e":
            return self.weighted_e(epsilon, **_pick(tuning, "c", "g"))
        if mechanism == "censor-w":
            return self.censor_w(epsilon, **_pick(tuning, "c", "g", "downscale"))
        if mechanism == "censor-uw":
            return self.censor_uw(epsilon)
        raise InputError("--mechanism", "use perturbed_histogram() for 'ph'")

    def synthesize(self, result: Result, m: int = 1) -> np.ndarray:
        """m synthetic datasets (m x n) from m distinct retained draws (posterior predictive)."""
        m = _check_m(m)
        wf = result.fit
        S = wf.stan_fit.n_draws
        if m > S:
            raise InputError("--m", f"at most {S} synthetic datasets (one per retained draw)")
        rng = np.random.default_rng([self.seed, 1])
        picks = rng.choice(S, size=m, replace=False)
        sets = []
        for j, s in enumerate(picks):
            y_rep = engine.generate(
                self.model.stan_file,
                wf.data,
                wf.stan_fit.draw(int(s)),
                seed=self._seed(f"rep-{j}"),
                backend=self.sampler.backend,
                quiet=self.sampler.quiet,
            )
            sets.append(self._to_original_scale(np.asarray(y_rep, dtype=float)))
        return np.vstack(sets)

    def release(self, result: Result, m: int = 1, column: str = "y") -> Release:
        """Synthetic data frame plus report for a mechanism result."""
        sets = self.synthesize(result, m)
        frame = synthetic_frame(sets, column, self.model.outcome == "count")
        report = build_report(result, n=self.n, m=m, seed=self.seed, model=self.model.name)
        report["sampler"] = {
            "chains": self.sampler.chains,
            "iter_warmup": self.sampler.iter_warmup,
            "iter_sampling": self.sampler.iter_sampling,
        }
        return Release(frame, report, result)

    def _to_original_scale(self, y: np.ndarray) -> np.ndarray:
        if self.bounds is None or self.model.outcome != "unit":
            return y
        from dpsynth.data import unscale_from_unit

        return np.asarray(unscale_from_unit(y, *self.bounds), dtype=float)

    def _seed(self, tag: str) -> int:
        digest = np.random.SeedSequence([self.seed, *map(ord, tag)]).generate_state(1)[0]
        return int(digest % (2**31 - 1))

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"[dpsynth] {text}", file=sys.stderr, flush=True)


def perturbed_histogram(
    y: Any,
    bounds: tuple[float, float] | None,
    epsilon: float,
    rng: np.random.Generator,
    *,
    n_bins: int | None = None,
    m: int = 1,
) -> np.ndarray:
    """Perturbed histogram synthesizer (censoring paper, supplement S1); returns m x n values.

    Public ``bounds`` [LO, HI] are required (never read from the data). The number
    of bins is data-independent: by default ceil(sqrt(n)) (dpsynth's choice; the
    supplement's example formulas were lost in extraction). Counts get Laplace(0, 2/eps)
    noise (sensitivity 2: a unit moves between bins), negative counts are set to
    0, and each synthetic value is a uniform draw within a bin drawn with
    probability proportional to its noisy count. If every noisy count is 0, bins
    are drawn uniformly. Each of the m sets is a fresh eps-DP release.
    """
    from dpsynth.primitives import laplace_mechanism

    if bounds is None:
        raise InputError("--bounds", "the perturbed histogram needs public bounds LO HI")
    lo, hi = require_bounds("--bounds", *bounds)
    epsilon = require_finite_positive("--epsilon", epsilon)
    m = _check_m(m)
    x = np.asarray(y, dtype=float).ravel()
    if x.size == 0:
        raise InputError("--column", "the data are empty")
    if not np.all(np.isfinite(x)):
        raise InputError("--column", "contains NaN or infinite values")
    if np.any(x < lo) or np.any(x > hi):
        raise InputError("--bounds", f"values fall outside the public bounds [{lo}, {hi}]")
    n = x.size
    k = int(n_bins) if n_bins is not None else ph_bins(n)
    if k < 1:
        raise InputError("n_bins", f"must be >= 1 (got {k})")
    edges = np.linspace(lo, hi, k + 1)
    counts = np.histogram(x, bins=edges)[0].astype(float)
    sets = []
    for _ in range(m):
        noisy = np.maximum(laplace_mechanism(counts, 2.0, epsilon, rng), 0.0)
        p = noisy / noisy.sum() if noisy.sum() > 0 else np.full(k, 1.0 / k)
        bins = rng.choice(k, size=n, p=p)
        sets.append(rng.uniform(edges[bins], edges[bins + 1]))
    return np.vstack(sets)


def ph_bins(n: int) -> int:
    """Data-independent number of PH bins: ceil(sqrt(n)) (dpsynth's choice; n is public)."""
    return int(math.ceil(math.sqrt(n)))


def ph_release(
    y: Any,
    bounds: tuple[float, float] | None,
    epsilon: float,
    *,
    seed: int = 0,
    m: int = 1,
    n_bins: int | None = None,
    column: str = "y",
) -> Release:
    """PH synthetic data plus report; m sets compose sequentially (total eps * m)."""
    rng = np.random.default_rng(seed)
    sets = perturbed_histogram(y, bounds, epsilon, rng, n_bins=n_bins, m=m)
    result = Result("ph", None, epsilon, {"n_bins": n_bins or ph_bins(sets.shape[1])})
    report = build_report(result, n=sets.shape[1], m=m, seed=seed, model=None)
    report["epsilon"] = epsilon * m
    report["composition"] = "sequential over m sets" if m > 1 else "single release"
    return Release(synthetic_frame(sets, column, False), report, result)


def synthesize(
    y: Any,
    *,
    model: str | Model = "beta",
    mechanism: str = "censor-w",
    epsilon: float = 5.0,
    X: np.ndarray | None = None,
    bounds: tuple[float, float] | None = None,
    m: int = 1,
    seed: int = 0,
    column: str = "y",
    sampler: Sampler | None = None,
    progress: bool = False,
    **tuning: Any,
) -> Release:
    """One-call API: synthesize ``y`` with ``mechanism`` at target ``epsilon``.

    ``tuning`` passes mechanism knobs (``c``, ``g``, ``radius``, ``reweight``, ``k``,
    ``downscale``, ``target_lipschitz``, ``n_bins``).
    """
    epsilon = require_finite_positive("--epsilon", epsilon)
    _check_m(m)
    if mechanism == "ph":
        return ph_release(
            y, bounds, epsilon, seed=seed, m=m, n_bins=tuning.get("n_bins"), column=column
        )
    if mechanism not in MECHANISMS:
        raise InputError(
            "--mechanism", f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}"
        )
    syn = Synthesizer(y, model, X=X, bounds=bounds, seed=seed, sampler=sampler, progress=progress)
    result = syn.run(mechanism, epsilon, **tuning)
    release = syn.release(result, m=m, column=column)
    release.report["epsilon_target"] = epsilon
    return release


def build_report(result: Result, *, n: int, m: int, seed: int, model: str | None) -> dict[str, Any]:
    """The JSON report: mechanism, guarantee, eps, Lipschitz bound, counts, diagnostics, versions.

    Holds no record-level quantity: only database-level summaries.
    """
    fit = result.fit
    diag = fit.stan_fit.diagnostics if fit is not None else None
    lipschitz, epsilon = result.lipschitz, result.epsilon
    if fit is not None and fit.censor_bound is not None:
        # Censoring bounds every contribution for every theta: the strict bound is M and
        # eps = 2M (Table 2 of the censoring paper reports 2.50 / 5.00 at eps = 5).
        lipschitz, epsilon = fit.censor_bound, 2 * fit.censor_bound
    report = {
        "mechanism": result.mechanism,
        "guarantee": result.guarantee,
        "guarantee_meaning": privacy.GUARANTEES[result.guarantee],
        "model": model,
        "epsilon_target": result.epsilon_target,
        "lipschitz_bound": lipschitz,
        "epsilon": epsilon,
        "lipschitz_bound_draws": result.lipschitz,
        "n_records": int(n),
        "n_censored": fit.n_censored if fit is not None else 0,
        "n_zero_weight": int(result.n_zero_weight),
        "m": int(m),
        "seed": int(seed),
        "backend": fit.stan_fit.backend if fit is not None else None,
        "diagnostics": (
            {
                "rhat_max": diag["rhat_max"],
                "ess_bulk_min": diag["ess_bulk_min"],
                "divergences": diag["divergences"],
            }
            if diag is not None
            else None
        ),
        "tuning": {k: v for k, v in result.tuning.items()},
        "dpsynth_version": _version("dpsynth"),
        "versions": {p: _version(p) for p in ("numpy", "pystan", "httpstan", "cmdstanpy")},
        "python": sys.version.split()[0],
    }
    return report


def synthetic_frame(sets: np.ndarray, column: str, integer: bool) -> pd.DataFrame:
    """Long frame of m synthetic sets; adds ``synthetic_set`` (1..m) when m > 1."""
    m, n = sets.shape
    values = np.rint(sets).astype(np.int64) if integer else sets
    frame = pd.DataFrame({column: values.ravel()})
    if m > 1:
        frame.insert(0, SET_COLUMN, np.repeat(np.arange(1, m + 1), n))
    return frame


def _check_m(m: Any) -> int:
    try:
        mi = int(m)
    except (TypeError, ValueError):
        raise InputError("--m", f"must be an integer >= 1 (got {m!r})") from None
    if mi < 1 or mi != m:
        raise InputError("--m", f"must be an integer >= 1 (got {m!r})")
    return mi


def _pick(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: d[k] for k in keys if d.get(k) is not None}


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _atomic_write(path: Path, writer) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
