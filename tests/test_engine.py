"""The Stan engine against a closed-form posterior; backend choice; includes; seeds."""

from pathlib import Path

import numpy as np
import pytest

from dpsynth import engine
from dpsynth.errors import InputError

HERE = Path(__file__).parent
NORMAL = HERE / "stan" / "normal_known_sd.stan"


def _normal_data(y, alpha, sigma=2.0, mu0=0.0, tau0=10.0, censor=None):
    return {
        "n": len(y),
        "alpha": alpha,
        "censor": int(censor is not None),
        "M": censor or 0.0,
        "want_log_lik": 1,
        "want_rep": 0,
        "y": y,
        "sigma": sigma,
        "mu0": mu0,
        "tau0": tau0,
    }


@pytest.mark.slow
def test_weighted_fit_matches_closed_form_posterior():
    rng = np.random.default_rng(11)
    y = rng.normal(3.0, 2.0, 200)
    alpha = rng.uniform(0.2, 1.0, 200)
    data = _normal_data(y, alpha)
    fit = engine.fit(NORMAL, data, seed=5, chains=4, iter_warmup=500, iter_sampling=1000)
    # closed form: precision = 1/tau0^2 + sum(alpha)/sigma^2
    prec = 1 / 10.0**2 + alpha.sum() / 2.0**2
    mean = (0.0 / 10.0**2 + (alpha * y).sum() / 2.0**2) / prec
    sd = prec**-0.5
    mu = fit.draws["mu"]
    assert mu.shape == (4000,)
    # Monte Carlo error of the mean is about sd / sqrt(ESS); 5 sd/sqrt(ESS) is generous
    ess = fit.diagnostics["ess_bulk_min"]
    assert abs(mu.mean() - mean) < 5 * sd / np.sqrt(ess)
    assert abs(mu.std() / sd - 1) < 0.1
    assert fit.diagnostics["rhat_max"] < 1.01
    assert fit.diagnostics["divergences"] == 0
    # the S x n log-likelihood matrix is the weighted contribution alpha_i * log N(y_i | mu_s, sigma)
    assert fit.log_lik.shape == (4000, 200)
    s = 17
    expected = alpha * (-0.5 * ((y - mu[s]) / 2.0) ** 2 - np.log(2.0) - 0.5 * np.log(2 * np.pi))
    assert np.allclose(fit.log_lik[s], expected, rtol=1e-6, atol=1e-8)


@pytest.mark.slow
def test_same_seed_same_draws_and_censoring_in_stan():
    rng = np.random.default_rng(2)
    y = rng.standard_t(1, 50) * 3
    data = _normal_data(y, np.ones(50), sigma=1.0, censor=1.0)
    a = engine.fit(NORMAL, data, seed=9, chains=2, iter_warmup=200, iter_sampling=200)
    b = engine.fit(NORMAL, data, seed=9, chains=2, iter_warmup=200, iter_sampling=200)
    assert np.array_equal(a.draws["mu"], b.draws["mu"])
    # Stan's own censored contributions never leave [-M, M] and the raw ones do
    assert np.all(np.abs(a.log_lik) <= 1.0)
    assert np.abs(a.log_lik_raw).max() > 1.0
    assert np.allclose(a.log_lik, np.clip(a.log_lik_raw, -1.0, 1.0))


def test_backend_choice(monkeypatch):
    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "pystan")
    assert engine.choose_backend() == "pystan"
    assert engine.choose_backend("pystan") == "pystan"
    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "nonsense")
    with pytest.raises(InputError, match="^backend:"):
        engine.choose_backend()
    monkeypatch.setattr(engine, "cmdstan_available", lambda: False)
    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "auto")
    assert engine.choose_backend() == "pystan"
    with pytest.raises(InputError, match="cmdstanpy"):
        engine.choose_backend("cmdstanpy")


def test_program_code_inlines_shared_functions(tmp_path):
    code = engine.program_code(engine.STAN_DIR / "beta.stan")
    assert not any(line.lstrip().startswith("#include") for line in code.splitlines())
    assert "dpsynth_target" in code and "real dpsynth_target(" in code
    bad = tmp_path / "bad.stan"
    bad.write_text("functions {\n#include nowhere.stan\n}\n")
    with pytest.raises(InputError, match="nowhere.stan"):
        engine.program_code(bad)
    with pytest.raises(InputError, match="^stan_file:"):
        engine.program_code(tmp_path / "missing.stan")


def test_parameters_block_names():
    code = engine.program_code(engine.STAN_DIR / "poisson.stan")
    names = ("beta", "sigma_beta", "L_beta", "log_lik", "y_rep")
    assert engine._parameters_block_names(code, names) == ("beta", "sigma_beta", "L_beta")
    code = engine.program_code(engine.STAN_DIR / "beta.stan")
    assert engine._parameters_block_names(code, ("phi", "lambda", "beta1", "beta2")) == (
        "phi",
        "lambda",
    )


def pystan_replicate(params: dict, replicate: int, seed: int) -> float:
    """A runner replicate that samples with PyStan (module level so workers can import it)."""
    from dpsynth.models import get_model, stan_data

    model = get_model("beta")
    y = np.random.default_rng(seed).beta(2, 3, 20)
    fit = engine.fit(
        model.stan_file,
        stan_data(model, y, np.ones(20)),
        seed=seed,
        chains=1,
        iter_warmup=50,
        iter_sampling=50,
        backend="pystan",
    )
    return float(fit.draws["phi"].mean())


def test_pystan_in_parallel_runner_workers_equals_serial_and_exits():
    """httpstan's fork pool inside runner workers: same draws as serial, and the pool exits
    (it used to hang at worker exit). Runs in a child interpreter so a hang is a failure."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from dpsynth.studies.runner import run_replicates

    script = (
        "import json; from dpsynth.studies.runner import run_replicates; "
        "from tests.test_engine import pystan_replicate; "
        "print(json.dumps(run_replicates(pystan_replicate, {}, 3, seed=1, cache_dir=None, "
        "n_jobs=2, progress=False)))"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("runner workers running PyStan did not exit within 300 s")
    assert proc.returncode == 0
    parallel = json.loads(out.strip().splitlines()[-1])
    serial = run_replicates(
        pystan_replicate, {}, 3, seed=1, cache_dir=None, n_jobs=1, progress=False
    )
    assert parallel == pytest.approx(serial, rel=0, abs=0)
    assert len(set(parallel)) == 3  # distinct replicate seeds give distinct fits
