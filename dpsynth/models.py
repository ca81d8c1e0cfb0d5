"""Which ``.stan`` program a model name means, how its data are built and checked.

The four shipped synthesizers follow the dpsynth Stan convention (see
``book/stan_convention.md``); so can any user program (``Model.from_stan_file``).
For the shipped models a vectorized numpy mirror of the per-record log-likelihood
evaluates the ``S x n`` matrix at the retained draws: PyStan ships generated
quantities as JSON, which for n = 2000 and S = 4000 is 560 MB and 20+ s, against
milliseconds in numpy. ``tests/test_models.py`` checks each mirror against the
program's own ``log_lik`` output. User programs get their matrix from Stan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import betaln, expit, gammaln

from dpsynth.engine import STAN_DIR
from dpsynth.errors import InputError

Draws = dict[str, np.ndarray]
LogLik = Callable[[Draws, dict[str, Any]], np.ndarray]


@dataclass(frozen=True)
class Model:
    """A synthesizer: its Stan program, outcome type and optional numpy log-likelihood.

    ``outcome`` is ``"unit"`` (0 < y < 1), ``"count"`` (non-negative integers) or
    ``"real"`` (any finite value; user programs). ``log_lik(draws, data)`` returns
    the ``S x n`` unweighted per-record log-likelihood, or is ``None`` to take it
    from the program's ``log_lik_raw`` output.
    """

    name: str
    stan_file: Path
    outcome: str
    covariates: bool
    log_lik: LogLik | None = None

    @classmethod
    def from_stan_file(cls, path: str | Path, outcome: str = "real") -> Model:
        """A user model following the dpsynth convention (``y`` plus, if declared, ``K``/``X``)."""
        p = Path(path)
        if not p.is_file():
            raise InputError("--stan-file", f"no such file: {p}")
        if outcome not in ("unit", "count", "real"):
            raise InputError("outcome", f"must be unit, count or real (got {outcome!r})")
        text = p.read_text()
        return cls(p.stem, p, outcome, covariates="matrix[n, K] X" in text)


def _beta_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    y = np.asarray(data["y"], float)
    a, b = draws["beta1"][:, None], draws["beta2"][:, None]
    return (a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - betaln(a, b)


def _eta(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    return draws["beta"] @ np.asarray(data["X"], float).T  # (S, K) @ (K, n)


def _poisson_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    y = np.asarray(data["y"], float)
    eta = _eta(draws, data)
    return y * eta - np.exp(eta) - gammaln(y + 1)


def _negbin_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    y = np.asarray(data["y"], float)
    eta = _eta(draws, data)
    phi = draws["phi"][:, None]
    log_mu_phi = np.logaddexp(eta, np.log(phi))
    return (
        gammaln(y + phi)
        - gammaln(phi)
        - gammaln(y + 1)
        + y * (eta - log_mu_phi)
        + phi * (np.log(phi) - log_mu_phi)
    )


def _beta_regression_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    y = np.asarray(data["y"], float)
    mu = expit(_eta(draws, data))
    kappa = draws["kappa"][:, None]
    a, b = mu * kappa, (1 - mu) * kappa
    return (a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - betaln(a, b)


MODELS: dict[str, Model] = {
    "beta": Model("beta", STAN_DIR / "beta.stan", "unit", False, _beta_ll),
    "poisson": Model("poisson", STAN_DIR / "poisson.stan", "count", True, _poisson_ll),
    "negbin": Model("negbin", STAN_DIR / "negbin.stan", "count", True, _negbin_ll),
    "beta-regression": Model(
        "beta-regression", STAN_DIR / "beta_regression.stan", "unit", True, _beta_regression_ll
    ),
}


def get_model(model: str | Model) -> Model:
    """Look a model up by name (``beta``, ``poisson``, ``negbin``, ``beta-regression``)."""
    if isinstance(model, Model):
        return model
    if model not in MODELS:
        raise InputError("--model", f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    return MODELS[model]


def check_outcome(model: Model, y: Any, bounds: tuple[float, float] | None = None) -> np.ndarray:
    """Validate the outcome against the model's support; rescale by public bounds.

    ``unit`` outcomes must satisfy 0 < y < 1 unless public ``bounds`` are given,
    in which case y is mapped to (y - lo + 0.5) / (hi - lo + 1) (never bounds
    read from the data). Counts must be non-negative integers.
    """
    arr = np.asarray(y, dtype=float).ravel()
    if arr.size == 0:
        raise InputError("--column", "the data are empty")
    if not np.all(np.isfinite(arr)):
        raise InputError("--column", "contains NaN or infinite values")
    if model.outcome == "unit":
        if bounds is not None:
            from dpsynth.data import scale_to_unit

            lo, hi = bounds
            if np.any(arr < lo) or np.any(arr > hi):
                raise InputError("--bounds", f"values fall outside the public bounds [{lo}, {hi}]")
            return np.asarray(scale_to_unit(arr, lo, hi), float)
        if np.any(arr <= 0) or np.any(arr >= 1):
            raise InputError(
                "--column",
                f"model {model.name!r} needs 0 < y < 1; give public --bounds LO HI to rescale",
            )
    elif model.outcome == "count":
        if np.any(arr < 0) or np.any(arr != np.round(arr)):
            raise InputError("--column", f"model {model.name!r} needs non-negative integer counts")
        return arr.astype(np.int64)
    return arr


def design_matrix(n: int, X: np.ndarray | None) -> np.ndarray:
    """Covariate matrix with an intercept column first (intercept-only when X is None).

    Covariates with more than two distinct values are centred and scaled to unit
    standard deviation (dummies are left as 0/1). The covariates are public
    predictors in the papers; standardizing them only reparameterizes the
    regression (same fitted means, same synthetic data) and spares NUTS the
    badly conditioned posterior that raw scales such as weeks worked (2-52) give.
    """
    ones = np.ones((n, 1))
    if X is None:
        return ones
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] != n:
        raise InputError("--covariates", f"has {X.shape[0]} rows, the outcome has {n}")
    if not np.all(np.isfinite(X)):
        raise InputError("--covariates", "contain NaN or infinite values")
    X = X.copy()
    for j in range(X.shape[1]):
        col = X[:, j]
        if np.unique(col).size > 2 and col.std() > 0:
            X[:, j] = (col - col.mean()) / col.std()
    return np.hstack([ones, X])


def stan_data(
    model: Model,
    y: np.ndarray,
    alpha: np.ndarray,
    *,
    X: np.ndarray | None = None,
    censor_bound: float | None = None,
    want_log_lik: bool = False,
) -> dict[str, Any]:
    """The data dict of the dpsynth convention for one fit."""
    alpha = np.asarray(alpha, dtype=float)
    if alpha.shape != (len(y),):
        raise InputError("alpha", f"needs one weight per record ({len(y)}), got {alpha.shape}")
    if not np.all((alpha >= 0) & (alpha <= 1)):
        raise InputError("alpha", "weights must lie in [0, 1]")
    data: dict[str, Any] = {
        "n": len(y),
        "alpha": alpha,
        "censor": int(censor_bound is not None),
        "M": float(censor_bound) if censor_bound is not None else 0.0,
        "want_log_lik": int(want_log_lik),
        "want_rep": 0,
        "y": y,
    }
    if model.covariates:
        Xd = design_matrix(len(y), X)
        data["K"], data["X"] = Xd.shape[1], Xd
    return data


def covariate_matrix(
    frame: pd.DataFrame, covariates: str | None, categorical: str | None
) -> np.ndarray | None:
    """Numeric covariates as they are; text and ``--categorical`` columns dummy-coded (first level dropped)."""
    if not covariates:
        return None
    cols = [c.strip() for c in covariates.split(",") if c.strip()]
    cats = {c.strip() for c in (categorical or "").split(",") if c.strip()}
    missing = [c for c in cols + sorted(cats) if c not in frame.columns]
    if missing:
        raise InputError("--covariates", f"no column(s) {', '.join(missing)} in the input")
    parts = []
    for c in cols:
        col = frame[c]
        if c in cats or not pd.api.types.is_numeric_dtype(col):
            parts.append(pd.get_dummies(col.astype(str), prefix=c, drop_first=True, dtype=float))
        else:
            parts.append(col.astype(float).to_frame())
    X = pd.concat(parts, axis=1).to_numpy(dtype=float)
    if not np.all(np.isfinite(X)):
        raise InputError("--covariates", "contain NaN or infinite values")
    return X


def compile_all(models: tuple[str, ...] = tuple(MODELS), workers: int = 2) -> None:
    """Compile the shipped programs once, ``workers`` at a time, each in its own process.

    Separate interpreters, one per program: distinct programs build in parallel, so no two
    processes write the same cache entry.
    """
    import subprocess
    import sys

    pending = list(models)
    running: list[tuple[str, subprocess.Popen]] = []
    while pending or running:
        while pending and len(running) < workers:
            name = pending.pop(0)
            code = f"from dpsynth.models import _compile_one; _compile_one({name!r})"
            running.append((name, subprocess.Popen([sys.executable, "-c", code])))
        name, proc = running.pop(0)
        if proc.wait() != 0:
            raise RuntimeError(f"compiling the {name} program failed (exit {proc.returncode})")


def _compile_one(name: str) -> None:
    from dpsynth import engine

    model = MODELS[name]
    y = np.array([1, 2, 3]) if model.outcome == "count" else np.array([0.2, 0.4, 0.6])
    data = stan_data(model, y, np.ones(3), X=None)
    engine.fit(model.stan_file, data, seed=1, chains=2, iter_warmup=10, iter_sampling=10)
