"""The numpy mirrors of the shipped Stan programs: each model's per-record log-likelihood
(``record_log_lik``, S x n at the retained draws; a ``LinearForm`` where it is linear in
per-record statistics) and its posterior predictive (``y_rep`` at one draw). The catalogue
(:mod:`dpsynth.models.catalogue`) names them in each model's declaration;
``tests/test_models.py`` checks each against the program's own output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import betaln, expit, gammaln

from dpsynth.errors import InputError

Draws = dict[str, np.ndarray]
"""Retained draws: ``draws[name]`` has shape ``(S, *dims)``."""
Draw = Mapping[str, "np.ndarray | float"]
"""One retained draw: parameter name -> value (as ``StanFit.draw(s)`` returns it)."""

# Stan's poisson_rng (and so poisson_log_rng, neg_binomial_2_log_rng) rejects rates >= 2^30.
_POISSON_MAX_RATE = 2.0**30


# --- numpy mirrors of the shipped programs' record_log_lik ---------------------------


@dataclass(frozen=True)
class LinearForm:
    """A record log-likelihood linear in per-record statistics: ll_is = W_s . Z_i.

    ``statistics(data)`` gives Z, one row of k statistics per record (n, k);
    ``coefficients(draws)`` gives W, one row per draw (S, k). Calling it returns the
    S x n matrix W Z' (a mirror like any other); a scan over draws can instead take, per
    record, the largest and smallest W_s . Z_i by matrix products
    (:meth:`dpsynth.mechanisms.posterior.WeightedFit._scan`). Mirrors the Stan programs'
    ``beta_design`` / ``beta_coefficients`` pair.
    """

    statistics: Callable[[Mapping[str, Any]], np.ndarray]
    coefficients: Callable[[Draws], np.ndarray]

    def __call__(self, draws: Draws, data: dict[str, Any]) -> np.ndarray:
        return self.coefficients(draws) @ self.statistics(data).T


def _beta_statistics(data: Mapping[str, Any]) -> np.ndarray:
    """beta.stan's ``beta_design``: rows [log y_i, log1m(y_i), -1]."""
    y = np.asarray(data["y"], float)
    return np.stack([np.log(y), np.log1p(-y), -np.ones_like(y)], axis=1)


def _beta_coefficients(draws: Draws) -> np.ndarray:
    """beta.stan's ``beta_coefficients``: rows [beta1 - 1, beta2 - 1, lbeta(beta1, beta2)]."""
    a, b = np.asarray(draws["beta1"], float), np.asarray(draws["beta2"], float)
    return np.stack([a - 1, b - 1, betaln(a, b)], axis=1)


_beta_ll = LinearForm(_beta_statistics, _beta_coefficients)
"""``record_log_lik`` of beta.stan: beta_lpdf(y_i | beta1, beta2), S x n."""


def _eta(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    return draws["beta"] @ np.asarray(data["X"], float).T  # (S, K) @ (K, n)


def _poisson_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of poisson.stan: poisson_log_lpmf(y_i | X_i beta), S x n."""
    y = np.asarray(data["y"], float)
    eta = _eta(draws, data)
    return y * eta - np.exp(eta) - gammaln(y + 1)


def _negbin_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of negbin.stan: neg_binomial_2_log_lpmf(y_i | X_i beta, phi), S x n."""
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
    """``record_log_lik`` of beta_regression.stan: beta_lpdf(y_i | mu_i kappa, (1 - mu_i) kappa)."""
    y = np.asarray(data["y"], float)
    mu = expit(_eta(draws, data))
    kappa = draws["kappa"][:, None]
    a, b = mu * kappa, (1 - mu) * kappa
    return (a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - betaln(a, b)


def _lognormal_statistics(data: Mapping[str, Any]) -> np.ndarray:
    """lognormal.stan's ``lognormal_design``: rows [log(y_i)^2, log y_i, 1]."""
    u = np.log(np.asarray(data["y"], float))
    return np.stack([u**2, u, np.ones_like(u)], axis=1)


def _lognormal_coefficients(draws: Draws) -> np.ndarray:
    """lognormal.stan's ``lognormal_coefficients``, p = 1 / sigma^2:

    rows [-p / 2, mu p, -mu^2 p / 2 - log sigma - log(2 pi) / 2].
    """
    mu, sigma = np.asarray(draws["mu"], float), np.asarray(draws["sigma"], float)
    p = 1.0 / sigma**2
    const = -0.5 * mu**2 * p - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    return np.stack([-0.5 * p, mu * p, const], axis=1)


_lognormal_ll = LinearForm(_lognormal_statistics, _lognormal_coefficients)
"""``record_log_lik`` of lognormal.stan: normal_lpdf(log y_i | mu, sigma), S x n."""


def _gamma_statistics(data: Mapping[str, Any]) -> np.ndarray:
    """gamma.stan's ``gamma_design``: rows [log y_i, y_i, 1]."""
    y = np.asarray(data["y"], float)
    return np.stack([np.log(y), y, np.ones_like(y)], axis=1)


def _gamma_coefficients(draws: Draws) -> np.ndarray:
    """gamma.stan's ``gamma_coefficients``: rows [a, -b, a log b - lgamma(a)], b = a e^-log_mean."""
    a = np.asarray(draws["shape"], float)
    log_rate = np.log(a) - np.asarray(draws["log_mean"], float)
    return np.stack([a, -np.exp(log_rate), a * log_rate - gammaln(a)], axis=1)


_gamma_ll = LinearForm(_gamma_statistics, _gamma_coefficients)
"""``record_log_lik`` of gamma.stan: gamma_lpdf(y_i | a, b) + log y_i, S x n."""


def _spread_gamma(draws: Mapping[str, Any], rows: int) -> np.ndarray:
    """A draw set's ``gamma`` (S x (K - 1)), S x 0 where the spread is one sigma."""
    return np.asarray(draws.get("gamma", np.zeros((rows, 0))), float).reshape(rows, -1)


def _lognormal_regression_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of lognormal_regression.stan: normal_lpdf(log y_i | X_i beta, sigma_i),
    log sigma_i = log sigma + X_i[2:K] gamma (one sigma where ``gamma`` is empty)."""
    u = np.log(np.asarray(data["y"], float))
    sigma = np.asarray(draws["sigma"], float)[:, None]
    gamma = _spread_gamma(draws, sigma.shape[0])
    if gamma.shape[1] == 0:
        return (
            -0.5 * ((u - _eta(draws, data)) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
        )
    log_sigma = np.log(sigma) + gamma @ np.asarray(data["X"], float)[:, 1:].T
    z = (u - _eta(draws, data)) / np.exp(log_sigma)
    return -0.5 * z**2 - log_sigma - 0.5 * np.log(2 * np.pi)


def _gamma_regression_ll(draws: Draws, data: dict[str, Any]) -> np.ndarray:
    """``record_log_lik`` of gamma_regression.stan: gamma_lpdf(y_i | a, a / mu_i) + log y_i."""
    y = np.asarray(data["y"], float)
    eta = _eta(draws, data)
    a = np.asarray(draws["shape"], float)[:, None]
    return a * (np.log(a) - eta + np.log(y)) - gammaln(a) - a * y * np.exp(-eta)


# --- numpy mirrors of the shipped programs' y_rep -----------------------------------


def _param(draw: Draw, name: str) -> np.ndarray:
    if name not in draw:
        raise InputError("draw", f"needs the parameter {name!r} (got {', '.join(draw)})")
    return np.asarray(draw[name], dtype=float)


def _scalar(draw: Draw, name: str) -> float:
    value = _param(draw, name)
    if value.size != 1:
        raise InputError("draw", f"{name!r} must be a scalar (got shape {value.shape})")
    return float(value.reshape(()))


def _records(data: Mapping[str, Any], n_out: Any, covariates: bool) -> int:
    """Validate ``n_out``; a covariate model draws one record per row of ``X``."""
    try:
        ok = not isinstance(n_out, bool) and int(n_out) == n_out and int(n_out) >= 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError("n_out", f"must be a non-negative integer (got {n_out!r})")
    n_out = int(n_out)
    if covariates:
        rows = np.asarray(data["X"]).shape[0]
        if n_out != rows:
            raise InputError(
                "n_out", f"a covariate model draws one record per row of X ({rows}), got {n_out}"
            )
    return n_out


def _linear_predictor(draw: Draw, data: Mapping[str, Any]) -> np.ndarray:
    X = np.asarray(data["X"], dtype=float)
    beta = _param(draw, "beta").reshape(-1)
    if beta.size != X.shape[1]:
        raise InputError("draw", f"'beta' has {beta.size} entries, X has {X.shape[1]} columns")
    return X @ beta


def _beta_rng(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Beta(a, b) variates elementwise, by the algorithm of Stan's ``beta_rng``.

    For a, b > 1 the ratio of gamma variates; otherwise in log space,
    log G_a = log(U) / a + log(Gamma(a + 1)), which keeps small shapes (a, b < 1, where
    a plain ratio underflows to exactly 0 or 1) inside (0, 1) as far as doubles allow.
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    out = np.empty(a.shape)
    big = (a > 1) & (b > 1)
    ga, gb = rng.standard_gamma(a[big]), rng.standard_gamma(b[big])
    out[big] = ga / (ga + gb)
    small = ~big
    if np.any(small):
        a_s, b_s = a[small], b[small]
        log_a = np.log1p(-rng.random(a_s.shape)) / a_s + np.log(rng.standard_gamma(a_s + 1))
        log_b = np.log1p(-rng.random(b_s.shape)) / b_s + np.log(rng.standard_gamma(b_s + 1))
        out[small] = np.exp(log_a - np.logaddexp(log_a, log_b))
    return out


def _poisson_rng(rate: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if np.any(~np.isfinite(rate)) or np.any(rate >= _POISSON_MAX_RATE):
        raise ValueError(
            f"Poisson rate {np.max(rate):.3g} is not below 2^30 (Stan's poisson_rng rejects it)"
        )
    return rng.poisson(rate).astype(np.int64)


def _beta_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of beta.stan: y ~ Beta(beta1, beta2), ``n_out`` records."""
    n_out = _records(data, n_out, covariates=False)
    a, b = _scalar(draw, "beta1"), _scalar(draw, "beta2")
    return _beta_rng(np.full(n_out, a), np.full(n_out, b), rng)


def _poisson_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of poisson.stan: y_i ~ Poisson(exp(X_i beta)), one record per row of X."""
    _records(data, n_out, covariates=True)
    return _poisson_rng(np.exp(_linear_predictor(draw, data)), rng)


def _negbin_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of negbin.stan: NB2 with mean mu_i = exp(X_i beta), variance mu_i + mu_i^2 / phi.

    As Stan's ``neg_binomial_2_log_rng``: a gamma(shape phi, rate phi / mu_i) rate, then Poisson.
    """
    _records(data, n_out, covariates=True)
    mu = np.exp(_linear_predictor(draw, data))
    phi = _scalar(draw, "phi")
    return _poisson_rng(rng.gamma(phi, mu / phi), rng)


def _beta_regression_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of beta_regression.stan: y_i ~ Beta(mu_i kappa, (1 - mu_i) kappa), mu = expit(X beta)."""
    _records(data, n_out, covariates=True)
    mu = expit(_linear_predictor(draw, data))
    kappa = _scalar(draw, "kappa")
    return _beta_rng(mu * kappa, (1 - mu) * kappa, rng)


def _lognormal_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of lognormal.stan: y = exp(Normal(mu, sigma)), ``n_out`` records."""
    n_out = _records(data, n_out, covariates=False)
    return np.exp(rng.normal(_scalar(draw, "mu"), _scalar(draw, "sigma"), n_out))


def _gamma_sim(draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator):
    """``y_rep`` of gamma.stan: y ~ Gamma(shape, rate shape / exp(log_mean))."""
    n_out = _records(data, n_out, covariates=False)
    a = _scalar(draw, "shape")
    return rng.gamma(a, np.exp(_scalar(draw, "log_mean")) / a, n_out)


def _lognormal_regression_sim(
    draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator
):
    """``y_rep`` of lognormal_regression.stan: y_i = exp(Normal(X_i beta, sigma_i))."""
    _records(data, n_out, covariates=True)
    sd = _scalar(draw, "sigma")
    gamma = _spread_gamma(draw, 1)[0]
    if gamma.size:
        sd = sd * np.exp(np.asarray(data["X"], float)[:, 1:] @ gamma)
    return np.exp(rng.normal(_linear_predictor(draw, data), sd))


def _gamma_regression_sim(
    draw: Draw, data: Mapping[str, Any], n_out: int, rng: np.random.Generator
):
    """``y_rep`` of gamma_regression.stan: y_i ~ Gamma(shape, shape / mu_i), mu = exp(X beta)."""
    _records(data, n_out, covariates=True)
    a = _scalar(draw, "shape")
    return rng.gamma(a, np.exp(_linear_predictor(draw, data)) / a)
