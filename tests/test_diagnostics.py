"""Rank-normalized split R-hat and bulk ESS in numpy against ArviZ 0.22."""

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpsynth.engine import diagnostics

az = pytest.importorskip("arviz")
logging.getLogger("arviz").setLevel(logging.ERROR)  # its shape warnings on 1-chain input


def _ar1(rng, chains, draws, phi, means=0.0):
    """AR(1) chains x_t = phi x_{t-1} + e_t, shifted by per-chain ``means``."""
    e = rng.normal(size=(chains, draws))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / np.sqrt(1 - phi**2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x + np.reshape(means, (-1, 1))


def _cases():
    rng = np.random.default_rng(20240607)
    yield "iid", rng.normal(size=(4, 1000))
    yield "ar1 0.9", _ar1(rng, 4, 500, 0.9)
    yield "ar1 0.99 short", _ar1(rng, 2, 101, 0.99)  # odd length: the middle draw is dropped
    yield "ar1 -0.5 (antithetic)", _ar1(rng, 3, 300, -0.5)
    yield "different means", rng.normal(size=(4, 400)) + np.array([[0.0], [0.0], [1.5], [3.0]])
    yield "ar1, one chain off", _ar1(rng, 4, 250, 0.7, means=[0, 0, 0, 4])
    yield "different scales", rng.normal(size=(3, 200)) * np.array([[1.0], [1.0], [5.0]])
    yield "heavy tails", rng.standard_t(1.5, size=(4, 300))
    yield "ties (rounded)", np.round(rng.normal(size=(4, 200)), 1)
    yield "discrete", rng.poisson(2.0, size=(2, 150)).astype(float)
    yield "minimal", rng.normal(size=(2, 4))
    for i in range(6):
        chains, draws = rng.integers(2, 6), rng.integers(8, 700)
        x = _ar1(rng, chains, draws, rng.uniform(0, 0.98), rng.normal(0, 0.5, chains))
        yield f"random {i}", x * rng.uniform(0.1, 10) + rng.normal(0, 100)


CASES = list(_cases())


@pytest.mark.parametrize(("label", "x"), CASES, ids=[c[0] for c in CASES])
def test_rhat_and_bulk_ess_equal_arviz(label, x):
    assert diagnostics.rhat(x) == pytest.approx(float(az.rhat(x)), rel=1e-8)
    assert diagnostics.ess_bulk(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-8)


def test_the_cases_cover_good_and_bad_mixing():
    rhats = [diagnostics.rhat(x) for _, x in CASES]
    esss = [diagnostics.ess_bulk(x) / x.size for _, x in CASES]
    assert min(rhats) < 1.01 and max(rhats) > 1.5
    assert min(esss) < 0.05 and max(esss) > 1.0  # strongly autocorrelated and antithetic


def test_one_chain_nan_and_constant_input():
    rng = np.random.default_rng(1)
    one = rng.normal(size=(1, 100))
    assert np.isnan(diagnostics.rhat(one)) and np.isnan(az.rhat(one))
    assert diagnostics.ess_bulk(one) == pytest.approx(float(az.ess(one, method="bulk")), rel=1e-8)
    assert diagnostics.ess_bulk(one[0]) == diagnostics.ess_bulk(one)  # 1-D is one chain
    with_nan = rng.normal(size=(2, 50))
    with_nan[1, 7] = np.nan
    assert np.isnan(diagnostics.rhat(with_nan)) and np.isnan(diagnostics.ess_bulk(with_nan))
    assert np.isnan(diagnostics.rhat(rng.normal(size=(2, 3))))  # fewer than 4 draws
    assert diagnostics.ess_bulk(np.ones((2, 50))) == 100.0
    with pytest.raises(ValueError, match="chains, draws"):
        diagnostics.rhat(np.zeros((2, 3, 4)))


def test_average_ranks_match_scipy():
    from scipy.stats import rankdata

    x = np.round(np.random.default_rng(3).normal(size=(3, 40)), 1)
    assert np.array_equal(diagnostics._average_ranks(x), rankdata(x).reshape(x.shape))


def test_engine_does_not_import_arviz():
    script = (
        "import sys, numpy as np; from dpsynth import engine; "
        "d = engine.convergence_diagnostics({'a': np.random.default_rng(0).normal(size=(2, 50))}); "
        "assert 0.9 < d['rhat_max'] < 1.2, d; print('arviz' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
