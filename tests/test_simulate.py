"""Tests of dpsynth.studies.simulate: moments at fixed seeds and analytic references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.studies.simulate import (
    beta_data,
    beta_quantile,
    beta_reference,
    nb_mixture_cdf,
    nb_mixture_data,
    nb_mixture_quantile,
    nb_mixture_reference,
    nb_mixture_variance,
    poisson_data,
    poisson_reference,
)

N = 200_000  # large n so that sample moments are within a few standard errors


def test_beta_moments_and_support() -> None:
    x = beta_data(N, np.random.default_rng(1))
    # Beta(0.5, 3): mean = 0.5/3.5 = 1/7, var = ab/((a+b)^2 (a+b+1)) = 1.5/(12.25*4.5) = 0.027211
    assert x.shape == (N,)
    assert np.all((x > 0) & (x < 1))
    assert abs(x.mean() - 1 / 7) < 0.002  # se = sqrt(0.0272/2e5) = 3.7e-4
    assert abs(x.var() - 1.5 / (12.25 * 4.5)) < 0.001


def test_beta_reference_matches_scipy_and_sample() -> None:
    ref = beta_reference()
    assert ref["mean"] == pytest.approx(1 / 7)
    assert ref["median"] == pytest.approx(stats.beta(0.5, 3).median())
    assert float(beta_quantile(0.9)) == pytest.approx(stats.beta.ppf(0.9, 0.5, 3))
    x = beta_data(N, np.random.default_rng(2))
    for key, p in (("q15", 0.15), ("median", 0.5), ("q90", 0.9)):
        assert np.quantile(x, p) == pytest.approx(ref[key], rel=0.02)


def test_poisson_moments() -> None:
    x = poisson_data(N, np.random.default_rng(3))
    assert x.dtype == np.int64
    assert abs(x.mean() - 100) < 0.2  # se = 10/sqrt(2e5) = 0.022
    assert abs(x.var() - 100) < 2.0
    ref = poisson_reference()
    assert ref["median"] == 100.0
    assert np.quantile(x, 0.9) == pytest.approx(ref["q90"], abs=1)


def test_nb_mixture_moments() -> None:
    # mixture of equal-mean components: var = sum_k w_k (mu + mu^2/phi_k)
    # = 0.2 (100 + 10000/5) + 0.8 (100 + 10000/20) = 0.2*2100 + 0.8*600 = 420 + 480 = 900
    assert nb_mixture_variance() == pytest.approx(900.0)
    x = nb_mixture_data(N, np.random.default_rng(4))
    assert x.dtype == np.int64 and x.min() >= 0
    assert abs(x.mean() - 100) < 0.4  # se = 30/sqrt(2e5) = 0.067
    assert abs(x.var() / 900 - 1) < 0.03


def test_nb_single_component_matches_parameterization() -> None:
    # one component NB(mu=100, phi=5): var = 100 + 100^2/5 = 2100
    x = nb_mixture_data(N, np.random.default_rng(5), phi=(5,), weights=(1.0,))
    assert abs(x.mean() - 100) < 0.8
    assert abs(x.var() / 2100 - 1) < 0.03


def test_nb_mixture_quantile_is_cdf_inverse() -> None:
    for q in (0.15, 0.5, 0.9):
        k = float(nb_mixture_quantile(q))
        assert nb_mixture_cdf(k) >= q > nb_mixture_cdf(k - 1)
    x = nb_mixture_data(N, np.random.default_rng(6))
    ref = nb_mixture_reference()
    assert np.quantile(x, 0.15) == pytest.approx(ref["q15"], abs=1)
    assert np.quantile(x, 0.9) == pytest.approx(ref["q90"], abs=1)


def test_same_seed_same_data_and_bad_input() -> None:
    a = nb_mixture_data(50, np.random.default_rng(7))
    b = nb_mixture_data(50, np.random.default_rng(7))
    assert np.array_equal(a, b)
    with pytest.raises(InputError, match="^rng:"):
        beta_data(5, 7)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="^weights:"):
        nb_mixture_data(5, np.random.default_rng(0), weights=(0.5, 0.6))
    with pytest.raises(InputError, match="^n:"):
        poisson_data(-1, np.random.default_rng(0))
