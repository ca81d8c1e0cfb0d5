"""Monte Carlo studies and the SDR application of the censoring paper (Hu, Williams & Savitsky).

* ``beta_replicate``: one replicate of Sections 4.1-4.4. Draw n records from Beta(0.5, 3),
  fit the Unweighted and Weighted (LW, c = 1, g = 0) synthesizers, then at every epsilon the
  Weighted-e, Censor_w and Censor_uw synthesizers and the perturbed histogram (PH, public
  bounds [0, 1]); one synthetic dataset per synthesizer; privacy and utility measures in a
  tidy frame. The same replicate also runs the downscaling study of Section 4.4 (Weighted,
  Weighted-e and Censor_w with weights x ``downscale`` at ``downscale_epsilon``), which reuses
  the replicate's database and fits.
* ``sdr_application``: Section 5. Beta regression of salary (scaled into (0, 1) by the public
  bounds) on gender, age group (9 levels) and weeks worked; the five synthesizers at
  epsilon = 5, one synthetic dataset each; Table 2 and the samples of Figure 9.
* ``settings`` / ``PROFILES``: the paper's settings and a small CI profile.

Choices where the paper is vague (its inline math was lost in extraction):

* n = 2000. The text's n was lost; Figure 1 uses 2000 records from the same Beta(0.5, 3), and
  at n = 2000 the Censor_uw censoring counts of one replicate (249, 422, 802 at epsilon 5, 4,
  3) match Table 1's means (247, 419, 809).
* Section 4.4: epsilon = 4. Supplement Table S4's rows "without downscaling" repeat Table 1's
  epsilon = 4 rows exactly (Weighted-e 0/130/219/195/272/364, Censor_w 0/404/425/408/440/549).
* Downscale factor 0.75 (weights alpha_i = c (1 - f~_i) with c = 0.75 instead of 1, i.e. the
  LW weights times 0.75): the text says the scaling "roughly targets" epsilon, i.e. c ~
  Delta_target / Delta_Weighted = 2 / (median Weighted bound), and the Weighted bounds at
  n = 2000 centre near 2.6-2.7 (the paper: "from around 2 to 3.5"), so c ~ 0.75. Table S4's
  downscaled Censor_w (median 0 censored, mean 144) says about half the replicates then need
  no censoring, which is what a factor placing the median Weighted bound at the target does.
* Weighted-e's count in Table 1 is the number of records whose weight the truncation sets to 0
  (``n_invoked``): records already at weight 0 under LW (the riskiest record, alpha = 0 when
  g = 0) are not counted.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import weights
from dpsynth.errors import InputError
from dpsynth.histogram import perturbed_histogram
from dpsynth.mechanisms import Result, Sampler, Synthesizer
from dpsynth.simulate import beta_data
from dpsynth.studies.profiles import apply_profile, derive_profiles
from dpsynth.studies.runner import DEFAULT_CACHE, run_replicates
from dpsynth.utility import ecdf_measures, replicate_table, summary_statistics, utility_table

__all__ = [
    "COLUMNS",
    "PAPER_TABLE1",
    "PAPER_TABLE2",
    "PROFILES",
    "SDR_COVARIATES",
    "beta_replicate",
    "censoring_table",
    "downscale_table",
    "run_beta_study",
    "run_sdr_study",
    "sdr_application",
    "settings",
]

STUDY_VERSION = 1
"""Part of every cache key: bump when a replicate function's output changes."""

PAPER: dict[str, Any] = {
    "n": 2000,
    "R": 100,
    "epsilons": [5.0, 4.0, 3.0],
    "a": 0.5,
    "b": 3.0,
    "chains": 2,
    "iter_warmup": 1000,
    "iter_sampling": 1000,
    "downscale": 0.75,
    "downscale_epsilon": 4.0,
    "seed": 20230,
    "n_jobs": 2,
    "sdr_epsilon": 5.0,
    "sdr_n": None,
    "data_path": None,
}
PROFILES: dict[str, dict[str, Any]] = derive_profiles(
    PAPER,
    ci={
        "n": 300,
        "R": 2,
        "chains": 4,
        "iter_warmup": 300,
        "iter_sampling": 300,
        "n_jobs": 1,
        "sdr_n": 400,
    },
)
"""Study settings. ``ci``: R = 2 small replicates (a notebook runs in about a minute);
``paper``: Section 4's R = 100 replicates of n = 2000 and Section 5's full sample. The paper
does not state its MCMC run length; ``paper`` keeps S = 2000 retained draws from 2 chains of
1000 warmup + 1000 sampling iterations (the Lipschitz bounds are maxima over these S draws),
which keeps the whole book within its time budget on 2 cores. With 500 + 500 the censored fits
at epsilon 3-4 mixed slowly (measured over R = 100: bulk ESS down to 30, max R-hat 1.061, above
the notebooks' asserted 1.05).
``n_jobs``: replicate worker processes. ``paper`` runs 2 (measured on 2 cores with 2 chains
per fit: 6.1 s per replicate against 10 s with 1, as httpstan's per-call overhead of one worker
overlaps the other's sampling); ``ci`` runs its 2 replicates in this process. ``sdr_n`` subsamples the SDR data (None:
all records); ``data_path`` None means the SIMULATED stand-in."""

LABELS = {
    "unweighted": "Unweighted",
    "lw": "Weighted",
    "weighted-e": "Weighted-e",
    "censor-w": "Censor_w",
    "censor-uw": "Censor_uw",
    "ph": "PH",
}
"""The paper's names of dpsynth's mechanisms."""

COLUMNS: tuple[str, ...] = (
    "replicate",
    "study",
    "epsilon",
    "mechanism",
    "label",
    "guarantee",
    "downscale",
    "lipschitz",
    "epsilon_delivered",
    "n_censored",
    "n_zero_weight",
    "n_invoked",
    "max_ecdf",
    "avg_ecdf",
    "mean",
    "median",
    "q15",
    "q90",
    "rhat_max",
    "ess_bulk_min",
    "divergences",
)
"""Columns of ``beta_replicate``'s tidy frame (one row per study x epsilon x synthesizer)."""

SDR_COVARIATES = "gender,agegrp,wkswk"
SDR_CATEGORICAL = "agegrp"

PAPER_TABLE1: dict[tuple[float, str], float] = {
    (5.0, "Weighted-e"): 29,
    (5.0, "Censor_w"): 110,
    (5.0, "Censor_uw"): 247,
    (4.0, "Weighted-e"): 195,
    (4.0, "Censor_w"): 408,
    (4.0, "Censor_uw"): 419,
    (3.0, "Weighted-e"): 573,
    (3.0, "Censor_w"): 741,
    (3.0, "Censor_uw"): 809,
}
"""Censoring paper Table 1: mean numbers of truncations (Weighted-e) and censorings over R = 100."""

PAPER_TABLE2: pd.DataFrame = pd.DataFrame(
    {
        "Data": [np.nan, np.nan, np.nan, np.nan, 91019, 80000, 51000, 150000],
        "Weighted": [2.62, 5.24, 0.0656, 0.0011, 92994, 80135, 44303, 162351],
        "Weighted-e": [2.61, 5.22, 0.1020, 0.0025, 89525, 76451, 40574, 158037],
        "Censor_w": [2.50, 5.00, 0.0968, 0.0026, 88581, 75642, 41142, 158426],
        "Censor_uw": [2.50, 5.00, 0.1350, 0.0039, 88840, 75211, 38107, 162686],
        "PH": [np.nan, 5.00, 0.1310, 0.0057, 93654, 91180, 30108, 163872],
    },
    index=["lipschitz", "epsilon", "max_ecdf", "avg_ecdf", "mean", "median", "q15", "q90"],
)
"""Censoring paper Table 2 (2017 SDR, epsilon = 5), in ``sdr_application``'s layout."""


# ----------------------------------------------------------------------------- settings


def settings(profile: str = "ci", **overrides: Any) -> dict[str, Any]:
    """The settings of ``profile`` ("ci" or "paper") with non-None ``overrides`` applied.

    Returns a new dict (keys as in ``PROFILES``); validates every value and raises
    ``InputError`` naming the offending key. ``None`` overrides keep the profile's value,
    so a notebook's parameters cell can pass its knobs unconditionally.
    """
    s = apply_profile(PROFILES, profile, overrides)
    s["profile"] = profile
    return _validate(s)


def _validate(s: dict[str, Any]) -> dict[str, Any]:
    for key in ("n", "R", "chains", "iter_warmup", "iter_sampling", "seed", "n_jobs"):
        v = s[key]
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise InputError(key, f"must be an integer (got {v!r})")
        s[key] = int(v)
    minimum = {"n": 10, "R": 1, "chains": 1, "iter_warmup": 1, "iter_sampling": 1, "n_jobs": 1}
    for key, lo in minimum.items():
        if s[key] < lo:
            raise InputError(key, f"must be >= {lo} (got {s[key]})")
    if s["seed"] < 0:
        raise InputError("seed", f"must be >= 0 (got {s['seed']})")
    eps = s["epsilons"]
    if isinstance(eps, int | float):
        eps = [eps]
    try:
        eps = [float(e) for e in eps]
    except (TypeError, ValueError):
        raise InputError("epsilons", f"must be a list of numbers (got {s['epsilons']!r})") from None
    if not eps or not all(np.isfinite(e) and e > 0 for e in eps):
        raise InputError("epsilons", f"must be a non-empty list of finite values > 0 (got {eps})")
    if len(set(eps)) != len(eps):
        raise InputError("epsilons", f"must not repeat a value (got {eps})")
    s["epsilons"] = eps
    for key in ("a", "b", "sdr_epsilon", "downscale_epsilon"):
        v = s[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not (np.isfinite(v) and v > 0):
            raise InputError(key, f"must be a finite number > 0 (got {v!r})")
        s[key] = float(v)
    ds = s["downscale"]
    if ds is not None:
        if isinstance(ds, bool) or not isinstance(ds, int | float) or not 0 < ds <= 1:
            raise InputError("downscale", f"must lie in (0, 1] or be None (got {ds!r})")
        s["downscale"] = float(ds)
    if s["sdr_n"] is not None:
        v = s["sdr_n"]
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 10:
            raise InputError("sdr_n", f"must be an integer >= 10 or None (got {v!r})")
        s["sdr_n"] = int(v)
    if s["data_path"] is not None:
        s["data_path"] = str(s["data_path"])
    return s


def _sampler(params: dict[str, Any]) -> Sampler:
    return Sampler(params["chains"], params["iter_warmup"], params["iter_sampling"])


def beta_params(s: dict[str, Any]) -> dict[str, Any]:
    """What one ``beta_replicate`` needs (the runner's cache key): no R, seed or n_jobs."""
    keys = ("n", "epsilons", "a", "b", "chains", "iter_warmup", "iter_sampling")
    out = {k: s[k] for k in keys}
    out.update(downscale=s["downscale"], downscale_epsilon=s["downscale_epsilon"])
    out["version"] = STUDY_VERSION
    return out


# ------------------------------------------------------------------ Section 4: Beta(0.5, 3)


def _label(mechanism: str, downscale: float | None = None) -> str:
    name = LABELS[mechanism]
    guarantee = "DP" if mechanism in ("censor-w", "censor-uw", "ph") else "aDP"
    text = f"{name} ({guarantee})"
    return text if downscale is None else f"{text}\ndownscaled"


def _fit_columns(result: Result) -> dict[str, Any]:
    fit = result.fit
    diag = fit.stan_fit.diagnostics
    return {
        "guarantee": result.guarantee,
        "lipschitz": result.lipschitz,
        "epsilon_delivered": result.epsilon,
        "n_censored": fit.n_censored,
        "n_zero_weight": result.n_zero_weight,
        "rhat_max": float(diag["rhat_max"]),
        "ess_bulk_min": float(diag["ess_bulk_min"]),
        "divergences": int(diag["divergences"]),
    }


def _utility_columns(confidential: np.ndarray, synthetic: np.ndarray) -> dict[str, float]:
    return {**ecdf_measures(confidential, synthetic), **summary_statistics(synthetic)}


def beta_replicate(params: dict[str, Any], replicate: int, seed: int) -> pd.DataFrame:
    """One Monte Carlo replicate of the censoring paper's Sections 4.1-4.4 (tidy frame).

    Draws n records from Beta(a, b), runs Unweighted, Weighted (LW, c = 1, g = 0), and at
    every epsilon Weighted-e, Censor_w, Censor_uw and PH (public bounds [0, 1]); each makes
    one synthetic dataset of n records. With ``params["downscale"]`` it adds the Section 4.4
    rows (``study == "downscale"``): Weighted, Weighted-e, Censor_w at ``downscale_epsilon``
    without (``downscale`` 1) and with the weights multiplied by the factor. Rows with
    mechanism "Data" carry the confidential sample's statistics (one per epsilon, for the
    plots); ε-free synthesizers (Unweighted, Weighted) repeat the same values in every
    epsilon. Columns ``COLUMNS``; ``n_invoked`` is Table 1's count (truncations for
    Weighted-e, censored records for Censor_w / Censor_uw). Module-level, so the runner's
    worker processes can import it.
    """
    y = beta_data(int(params["n"]), np.random.default_rng([seed, 0]), params["a"], params["b"])
    syn = Synthesizer(y, "beta", seed=seed, sampler=_sampler(params))
    synthetic: dict[int, np.ndarray] = {}

    def synth(result: Result) -> np.ndarray:
        key = id(result.fit)
        if key not in synthetic:
            synthetic[key] = syn.synthesize(result, 1)[0]
        return synthetic[key]

    rows: list[dict[str, Any]] = []

    def add(study: str, eps: float, result: Result, downscale: float | None = None, **extra):
        rows.append(
            {
                "study": study,
                "epsilon": eps,
                "mechanism": LABELS[result.mechanism],
                "label": _label(result.mechanism, downscale),
                "downscale": 1.0 if downscale is None else downscale,
                **_fit_columns(result),
                **_utility_columns(y, synth(result)),
                **extra,
            }
        )

    data_stats = summary_statistics(y)
    unweighted, lw = syn.unweighted(), syn.lw()
    lw_zero = lw.n_zero_weight
    for eps in params["epsilons"]:
        rows.append(
            {
                "study": "main",
                "epsilon": eps,
                "mechanism": "Data",
                "label": "Data",
                "guarantee": "none",
                "downscale": 1.0,
                **data_stats,
            }
        )
        add("main", eps, unweighted)
        add("main", eps, lw)
        we = syn.weighted_e(eps)
        add("main", eps, we, n_invoked=we.n_zero_weight - lw_zero)
        for censored in (syn.censor_w(eps), syn.censor_uw(eps)):
            add("main", eps, censored, n_invoked=censored.fit.n_censored)
        ph = perturbed_histogram(
            y, (0.0, 1.0), eps, np.random.default_rng([seed, 2, int(eps * 1e6)])
        )
        rows.append(
            {
                "study": "main",
                "epsilon": eps,
                "mechanism": "PH",
                "label": _label("ph"),
                "guarantee": "DP",
                "downscale": 1.0,
                "epsilon_delivered": eps,
                **_utility_columns(y, ph[0]),
            }
        )

    factor = params.get("downscale")
    if factor is not None:
        eps = float(params["downscale_epsilon"])
        we = syn.weighted_e(eps)
        add("downscale", eps, lw)
        add("downscale", eps, we, n_invoked=we.n_zero_weight - lw_zero)
        cw = syn.censor_w(eps)
        add("downscale", eps, cw, n_invoked=cw.fit.n_censored)
        lw_d, we_d = _downscaled_weighted(syn, eps, factor)
        add("downscale", eps, lw_d, factor)
        add("downscale", eps, we_d, factor, n_invoked=we_d.n_zero_weight - lw_d.n_zero_weight)
        cw_d = syn.censor_w(eps, downscale=factor)
        add("downscale", eps, cw_d, factor, n_invoked=cw_d.fit.n_censored)

    frame = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    frame["replicate"] = replicate
    return frame


def _downscaled_weighted(syn: Synthesizer, epsilon: float, factor: float) -> tuple[Result, Result]:
    """Weighted and Weighted-e with the LW weights multiplied by ``factor`` (Section 4.4)."""
    alpha = weights.downscaled(syn.lw_alpha(), factor)
    wf = syn.fit(alpha, tag=f"lw-downscaled-{factor}")
    lw_d = Result(
        "lw", wf, None, {"c": 1.0, "g": 0.0, "downscale": factor}, int((alpha == 0).sum())
    )
    alpha_e = weights.weighted_e_weights(alpha, wf.record_bounds, epsilon)
    wf_e = syn.fit(alpha_e, tag=f"weighted-e-{epsilon}-downscaled-{factor}")
    we_d = Result(
        "weighted-e",
        wf_e,
        epsilon,
        {"c": 1.0, "g": 0.0, "downscale": factor},
        int((alpha_e == 0).sum()),
    )
    return lw_d, we_d


def run_beta_study(
    s: dict[str, Any], *, cache_dir: Any = DEFAULT_CACHE, progress: bool = False
) -> pd.DataFrame:
    """All R replicates of ``beta_replicate`` under settings ``s`` (cached), as one tidy frame."""
    frames = run_replicates(
        beta_replicate,
        beta_params(s),
        s["R"],
        seed=s["seed"],
        n_jobs=s["n_jobs"],
        cache_dir=cache_dir,
        progress=progress,
    )
    return pd.concat(frames, ignore_index=True)


def censoring_table(results: pd.DataFrame) -> pd.DataFrame:
    """Table 1: summaries over replicates of truncations (Weighted-e) and censorings, per epsilon.

    Index (epsilon, synthesizer), descending epsilon; columns min, q1, median, mean, q3, max, sd.
    """
    main = results[(results.study == "main") & results.n_invoked.notna()]
    parts = {}
    for eps in sorted(main.epsilon.unique(), reverse=True):
        sub = main[main.epsilon == eps]
        groups = {
            m: sub.loc[sub.mechanism == m, "n_invoked"]
            for m in ("Weighted-e", "Censor_w", "Censor_uw")
        }
        parts[eps] = replicate_table(groups)
    return pd.concat(parts, names=["epsilon", "synthesizer"])


def downscale_table(results: pd.DataFrame) -> pd.DataFrame:
    """Supplement Table S4: truncations / censorings without and with downscaling (Section 4.4)."""
    sub = results[(results.study == "downscale") & results.n_invoked.notna()]
    groups = {lab.replace("\n", " "): g["n_invoked"] for lab, g in sub.groupby("label", sort=False)}
    return replicate_table(groups)


# ---------------------------------------------------------------- Section 5: SDR application


def _sdr_frame(data_path: str | None) -> tuple[pd.DataFrame, str]:
    from dpsynth.data import SimulatedDataWarning, load_sdr_public_use, load_sdr_standin

    if data_path is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SimulatedDataWarning)
            frame = load_sdr_standin("censoring")
    else:
        frame = load_sdr_public_use(Path(data_path))
    return frame, str(frame.attrs.get("source", data_path))


def sdr_application(params: dict[str, Any], replicate: int = 0, seed: int = 0) -> dict[str, Any]:
    """Censoring paper Section 5: Table 2 and Figure 9's samples for the SDR salary data.

    Beta regression of salary (scaled into (0, 1) by the public ``SALARY_BOUNDS``) on gender,
    age group (categorical, 9 levels, dummy-coded) and weeks worked; Weighted (LW), Weighted-e,
    Censor_w, Censor_uw at ``sdr_epsilon`` and PH on the public bounds; one synthetic dataset
    each. ``params["data_path"]`` None uses the SIMULATED stand-in; ``sdr_n`` subsamples rows.
    Returns a dict: ``table`` (rows lipschitz, epsilon, max_ecdf, avg_ecdf, mean, median,
    q15, q90; columns Data and the five synthesizers; salary in dollars), ``samples`` (name ->
    salary array (n,)), ``diagnostics`` (per fitted synthesizer), ``source``, ``simulated``, ``n``.
    Signature fits ``run_replicates`` (one "replicate").
    """
    from dpsynth.data import SALARY_BOUNDS
    from dpsynth.models import covariate_matrix

    frame, source = _sdr_frame(params.get("data_path"))
    simulated = bool(frame.attrs.get("simulated", False))
    n_sub = params.get("sdr_n")
    if n_sub is not None and n_sub < len(frame):
        keep = np.sort(np.random.default_rng([seed, 3]).choice(len(frame), n_sub, replace=False))
        frame = frame.iloc[keep].reset_index(drop=True)
    eps = float(params["sdr_epsilon"])
    salary = frame["salary"].to_numpy(dtype=float)
    X = covariate_matrix(frame, SDR_COVARIATES, SDR_CATEGORICAL)
    syn = Synthesizer(
        salary, "beta-regression", X=X, bounds=SALARY_BOUNDS, seed=seed, sampler=_sampler(params)
    )
    results = {
        "Weighted": syn.lw(),
        "Weighted-e": syn.weighted_e(eps),
        "Censor_w": syn.censor_w(eps),
        "Censor_uw": syn.censor_uw(eps),
    }
    samples = {"Data": salary}
    samples.update({name: syn.synthesize(r, 1)[0] for name, r in results.items()})
    samples["PH"] = perturbed_histogram(
        salary, SALARY_BOUNDS, eps, np.random.default_rng([seed, 2])
    )[0]
    table = utility_table(salary, {k: v for k, v in samples.items() if k != "Data"})
    privacy = pd.DataFrame(
        {name: [r.lipschitz, r.epsilon] for name, r in results.items()},
        index=["lipschitz", "epsilon"],
    )
    privacy["Data"] = np.nan
    privacy["PH"] = [np.nan, eps]
    table = pd.concat([privacy[table.columns], table])
    diagnostics = pd.DataFrame(
        {
            name: {"unweighted_lipschitz": syn.unweighted().lipschitz, **_fit_columns(r)}
            for name, r in results.items()
        }
    ).T
    return {
        "table": table,
        "samples": samples,
        "diagnostics": diagnostics,
        "source": source,
        "simulated": simulated,
        "n": int(len(salary)),
    }


def run_sdr_study(
    s: dict[str, Any], *, cache_dir: Any = DEFAULT_CACHE, progress: bool = False
) -> dict[str, Any]:
    """``sdr_application`` under settings ``s`` through the runner (so it is cached)."""
    keys = ("chains", "iter_warmup", "iter_sampling", "sdr_epsilon", "sdr_n", "data_path")
    params = {k: s[k] for k in keys}
    params["version"] = STUDY_VERSION
    return run_replicates(
        sdr_application,
        params,
        1,
        seed=s["seed"],
        n_jobs=1,
        cache_dir=cache_dir,
        progress=progress,
    )[0]
