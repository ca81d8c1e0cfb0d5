"""The PyStan 3 backend: httpstan's compiled models, run in this process's sampler pool.

What is written to disk, and where (httpstan 4.13). The cache root is
``httpstan.cache.cache_directory()``, ``$XDG_CACHE_HOME/httpstan/4.13.0``
(``~/.cache/httpstan/4.13.0`` by default); one folder ``models/<model_id>/`` per program
(the id hashes the program code and the Python build):

- compiled model, kept (depends on the program code only): ``model_<id>.cpp`` (stanc's
  C++), ``stanc.log`` (stanc warnings), ``stderr.log`` (compiler output, written last: it
  marks a finished build) and ``stan_services_model_<id>.cpython-*.so``; beside the
  folder, an empty ``models/<id>.lock`` (the build lock, :func:`~dpsynth.engine.common.build_lock`);
- fits, never in that shared cache: httpstan writes every chain's output (all draws,
  including the per-record ``contrib`` / ``record_log_lik`` terms, and Stan's messages)
  to a fit file when the chain ends. Its ``cache.fit_path`` is replaced
  (:func:`_private_fits`), so the file is
  ``$TMPDIR/dpsynth-pystan-<pid>-*/models/<id>/fits/<fit_id>.jsonlines.gz``, in this
  process's private folder (mode 0700, ``dpsynth.engine.private_dir``, with an empty
  ``.owner.lock`` and ``.workers/`` naming the sampler processes). :func:`sample` and
  :func:`generate` read the files and delete them before returning, also on error and
  on interruption; the folder is removed when the process exits. If the process is
  killed (SIGKILL), the sampler processes die with it (:func:`bind_to_parent`) and a
  watcher process kills any left and removes the folder at once; a folder left anyway
  is removed by the next fit of any process (its lock is free).
- elsewhere: ``stanc`` reads the program from a temporary folder
  ``$TMPDIR/httpstan_*/`` that httpstan removes; the C++ compiler's object files go to a
  private temporary working folder removed after the build (httpstan would otherwise
  write ``./build/temp.*/`` under the current directory); every chain's Unix socket
  ``$TMPDIR/httpstan_*.sock`` (no content), which httpstan never removes, is removed by
  :func:`_sockets_removed` when the fit ends, also on error and on interruption, and by
  the fit folder's watcher if the process is killed.

How it runs. Chains are requests to httpstan's REST API served in this process; httpstan
samples each chain in a forked worker of a process pool (bound to this process's life,
:func:`bind_to_parent`) and ships the draws back as JSON lines. Progress comes from
httpstan's operation records; fixed-parameter generation is the same request with
Stan's ``fixed_param`` service; :func:`log_density` and :func:`outputs_at` call the
compiled extension module directly, in this process.

The interface every backend module has: :func:`build`, :func:`sample`, :func:`generate`,
:func:`log_density` and :func:`outputs_at`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsynth.engine import private_dir
from dpsynth.engine.common import (
    Run,
    Sample,
    StanFailure,
    build_lock,
    chain_arrays,
    exception_lines,
    parameters_block_names,
    report_messages,
    sampler_effort,
    shape_key,
)
from dpsynth.errors import InputError
from dpsynth.io import jsonable

if TYPE_CHECKING:
    import stan.fit

NAME = "pystan"
_NUTS = "stan::services::sample::hmc_nuts_diag_e_adapt"
_FIXED_PARAM = "stan::services::sample::fixed_param"


def _models_folder() -> Path:
    import httpstan.cache

    return httpstan.cache.cache_directory() / "models"


def sample(run: Run) -> Sample:
    code, data, seed, chains, iter_warmup, iter_sampling, inits, quiet, adapt_delta = run
    out, messages = _run_httpstan(
        code,
        data,
        _NUTS,
        seed=seed,
        inits=inits or [{} for _ in range(chains)],
        quiet=quiet,
        num_warmup=iter_warmup,
        num_samples=iter_sampling,
        delta=adapt_delta,
        refresh=progress_refresh(iter_warmup + iter_sampling),
    )
    draws = {
        name: _chains_stacked(out[name], dims, chains)
        for name, dims in zip(out.param_names, out.dims, strict=True)
    }
    divergences = int(np.sum(out["divergent__"]))
    params = parameters_block_names(code, out.param_names)
    texts = [text for chain in messages for text in chain]
    effort = sampler_effort(out["n_leapfrog__"], out["stepsize__"], out["treedepth__"])
    return Sample(
        draws, params, chain_arrays(draws, chains), divergences, exception_lines(texts), effort
    )


def progress_refresh(iterations: int) -> int:
    """Iterations between Stan's progress messages: 20 per chain, never more often than
    every 100 iterations (Stan's default).

    httpstan reads a chain's messages in a loop that yields to its event loop only when
    no message arrived for a short while: a message every 100 iterations of a fast program
    kept it busy, so the next chain's request, and every progress poll, waited until the
    chain ended (no progress line until the end, and the chains ran one after the other).
    """
    return max(100, int(iterations) // 20)


def generate(code: str, data: dict, params: dict, seed: int, quiet: bool) -> np.ndarray:
    out, _ = _run_httpstan(
        code, data, _FIXED_PARAM, seed=seed, inits=[params], quiet=quiet, num_samples=1
    )
    return np.asarray(out["y_rep"])[..., 0]


STANC_TIMEOUT_S = 600.0
"""Seconds stanc may take (httpstan's own limit is one second, which a busy machine exceeds)."""


def stanc(program_code: str, stan_model_name: str) -> tuple[str, str]:
    """``httpstan.compile.compile`` with :data:`STANC_TIMEOUT_S` instead of one second: (C++, warnings).

    The same stanc binary (httpstan's), arguments and errors (``ValueError`` with stanc's
    text); installed in place of httpstan's by :func:`_patient_stanc`, so httpstan's own
    build steps use it too.
    """
    import importlib.resources
    import warnings

    import httpstan

    with warnings.catch_warnings():  # importlib.resources.path's deprecation
        warnings.simplefilter("ignore", DeprecationWarning)
        with importlib.resources.path(httpstan, "stanc") as binary:
            with tempfile.TemporaryDirectory(prefix="httpstan_") as tmpdir:
                path = Path(tmpdir) / f"{stan_model_name}.stan"
                path.write_text(program_code)
                args = [binary, "--name", stan_model_name, "--warn-pedantic", "--print-cpp"]
                done = subprocess.run(
                    [*args, str(path)], capture_output=True, timeout=STANC_TIMEOUT_S
                )
    stderr = done.stderr.decode().strip()
    if done.returncode != 0:
        raise ValueError(stderr)
    return done.stdout.decode().strip(), stderr


def _patient_stanc() -> None:
    """Make httpstan call :func:`stanc` (looked up as ``httpstan.compile.compile`` at call time)."""
    import httpstan.compile

    httpstan.compile.compile = stanc


def stanc_errors(code: str) -> str | None:
    """stanc's error text for ``code`` (httpstan's stanc, no C++ build), or None."""
    try:
        stanc(code, "model_dpsynth_scope")
    except ValueError as exc:
        return str(exc)
    return None


def _services_module(code: str) -> Any:
    """The compiled program's ``stan::services`` extension module, loaded in this process."""
    import httpstan.models

    return httpstan.models.import_services_extension_module(build(code, True))


def log_density(code: str, data: dict, params: list[dict]) -> np.ndarray:
    module = _services_module(code)
    jdata = jsonable(data, finite=False)
    out = []
    for p in params:
        try:
            unconstrained = module.transform_inits(jdata, jsonable(p, finite=False))
            out.append(module.log_prob(jdata, unconstrained, False))
        except (RuntimeError, ValueError, IndexError) as exc:
            raise StanFailure(str(exc), "data") from None
    return np.asarray(out, dtype=float)


def outputs_at(code: str, data: dict, params: list[dict]) -> list[dict[str, np.ndarray]]:
    module = _services_module(code)
    jdata = jsonable(data, finite=False)
    try:
        names, dims = module.get_param_names(jdata), module.get_dims(jdata)
    except (RuntimeError, ValueError, IndexError) as exc:
        raise StanFailure(str(exc), "data") from None
    params_block = set(parameters_block_names(code, tuple(names)))
    out = []
    for p in params:
        try:
            unconstrained = module.transform_inits(jdata, jsonable(p, finite=False))
            flat = np.asarray(module.write_array(jdata, unconstrained, True, True), dtype=float)
        except (RuntimeError, ValueError, IndexError) as exc:
            raise StanFailure(str(exc), "data") from None
        values, start = {}, 0
        for name, dim in zip(names, dims, strict=True):
            size = int(np.prod(dim)) if dim else 1
            if name not in params_block:  # Stan writes arrays column-major
                values[name] = flat[start : start + size].reshape(tuple(dim), order="F")
            start += size
        out.append(values)
    return out


def _chains_stacked(values: np.ndarray, dims: Sequence[int], chains: int) -> np.ndarray:
    """PyStan's ``fit[name]`` ``(*dims, draws * chains)`` -> ``(chains * draws, *dims)``.

    PyStan interleaves the chains along the last axis (draw 1 of every chain, then draw 2
    of every chain, ...); the result stacks them: chain 1's draws, then chain 2's, ...
    """
    arr = np.asarray(values)
    n_draws = arr.shape[-1] // chains
    arr = arr.reshape(*dims, n_draws, chains)
    arr = np.moveaxis(arr, (-1, -2), (0, 1))  # (chains, draws, *dims)
    return arr.reshape(chains * n_draws, *dims)


_PARAMS: dict[tuple[str, str], tuple[tuple, tuple, tuple]] = {}
"""Output names, flat names and dims per (model, :func:`shape_key`)."""
_PARAMS_MAX = 64


def _run_httpstan(
    code: str,
    data: Mapping[str, Any],
    function: str,
    *,
    seed: int,
    inits: list[dict],
    quiet: bool,
    **kwargs: float,
) -> tuple[stan.fit.Fit, list[list[str]]]:
    """Run ``function`` once per init (one chain each) through httpstan; return a
    ``stan.fit.Fit`` and each chain's Stan messages (:func:`_logger_texts`).

    A small client of httpstan's REST API (what ``stan.build`` + ``Model.sample`` do, minus
    their printing): it keeps the fits' names, deletes their cache files once read (also
    on error or interruption), withholds Stan's messages and stops httpstan's sampler
    processes when interrupted. Output names and dims are asked once per program and
    :func:`shape_key` (each request is a round trip to httpstan).
    """
    import stan.fit

    model_name = build(code, quiet)
    jdata = jsonable(data, finite=False)
    key = (model_name, shape_key(data))
    payloads = [
        {
            **kwargs,
            "function": function,
            "chain": chain,
            "data": jdata,
            "init": jsonable(init, finite=False),
            # httpstan's services take a signed 32-bit seed (as CmdStan)
            "random_seed": int(seed) % (2**31),
        }
        for chain, init in enumerate(inits, start=1)
    ]
    # known before the chains start: a chain's fit can be written while this process
    # waits for httpstan's answer (see _immediate_keyboard_interrupt)
    fit_names = [_expected_fit_name(model_name, payload) for payload in payloads]
    _private_fits()
    _ensure_event_loop_ok()
    _bind_sampler_pool()
    try:
        with _logger_disabled("httpstan"), _immediate_keyboard_interrupt(), _sockets_removed():
            params, outputs = asyncio.run(
                _httpstan_session(model_name, jdata, _PARAMS.get(key), payloads, fit_names, quiet)
            )
    except StanFailure as failure:
        if failure.stage != "data":  # other chains of this fit may still be sampling
            _stop_sampler_pool()
        raise
    except BaseException:  # KeyboardInterrupt, SystemExit, ...
        _stop_sampler_pool()
        raise
    finally:
        _delete_fits(fit_names)
    if len(_PARAMS) >= _PARAMS_MAX:
        _PARAMS.pop(next(iter(_PARAMS)))
    _PARAMS[key] = params
    messages = _logger_texts(outputs)  # read once: counted, and summarised unless quiet
    if not quiet:
        report_messages(messages)
    param_names, constrained_names, dims = params
    fit = stan.fit.Fit(
        tuple(outputs),
        len(payloads),
        param_names,
        constrained_names,
        dims,
        kwargs.get("num_warmup", 0),
        kwargs["num_samples"],
        1,
        False,
    )
    return fit, messages


async def _httpstan_session(
    model_name: str,
    jdata: dict,
    params: tuple | None,
    payloads: list[dict],
    fit_names: list[str],
    quiet: bool,
) -> tuple[tuple, list[bytes]]:
    """Ask httpstan for the output names (unless known), start the chains, wait, read them.

    Names of fits that httpstan reports and ``fit_names`` lacks are added to it, so that
    the caller can delete their files whatever happens next.
    """
    import stan.common

    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    # httpstan's task callbacks log cancelled chains (after an interruption) through the
    # loop's handler; failures reach the caller through the operations instead
    loop.set_exception_handler(lambda _loop, _context: None)
    try:
        async with stan.common.HttpstanClient() as client:
            encoded = _JsonWithData(jdata)  # the data encoded once, for every request
            if params is None:
                params = await _httpstan_params(client, model_name, encoded)
            operations = []
            for payload in payloads:
                resp = await _post_encoded(client, f"/{model_name}/fits", encoded.body(payload))
                if resp.status != 201:
                    raise StanFailure(resp.content.decode(errors="replace"), "sampling")
                operations.append(resp.json())
                if (name := operations[-1]["metadata"]["fit"]["name"]) not in fit_names:
                    fit_names.append(name)
            await _wait_for(client, operations, quiet)
            outputs = []
            for operation in operations:
                if "name" not in operation["result"]:
                    raise StanFailure(str(operation["result"].get("message", "")), "sampling")
                resp = await client.get(f"/{operation['result']['name']}")
                if resp.status != 200:
                    raise RuntimeError(f"httpstan lost a fit of {model_name} before it was read")
                outputs.append(resp.content)
    finally:
        loop.set_exception_handler(_InterruptsDropped.around(handler))
    return params, outputs


class _InterruptsDropped:
    """A loop exception handler that drops a task's never-retrieved ``KeyboardInterrupt``.

    A Ctrl-C raised while httpstan's server task runs (see
    :func:`_immediate_keyboard_interrupt`) is also stored in that task; when the task is
    collected, after the interrupt has reached the CLI, asyncio would log it with a
    traceback. Every other context goes to the handler it wraps (or the loop's default).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @classmethod
    def around(cls, handler: Any) -> Any:
        """``handler`` wrapped once (a loop reused by Jupyter is not wrapped again)."""
        return handler if isinstance(handler, cls) else cls(handler)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if isinstance(context.get("exception"), (KeyboardInterrupt, SystemExit)):
            return
        if self.inner is None:
            loop.default_exception_handler(context)
        else:
            self.inner(loop, context)


class _JsonWithData:
    """A request body ``{...payload, "data": data}`` whose (large) data part is encoded once.

    httpstan takes the data with every chain's request; encoding it once per fit instead of
    once per chain saves the encoding of every chain but the first (seconds per chain at a
    million records).
    """

    def __init__(self, jdata: Mapping[str, Any]) -> None:
        self._data = json.dumps(jdata)

    def body(self, payload: Mapping[str, Any]) -> bytes:
        rest = {k: v for k, v in payload.items() if k != "data"}
        head = json.dumps(rest)[:-1]
        sep = ", " if rest else ""
        return f'{head}{sep}"data": {self._data}}}'.encode()


async def _post_encoded(client: Any, path: str, body: bytes) -> Any:
    """POST a ready JSON body to httpstan (``HttpstanClient.post`` re-encodes a dict)."""
    import stan.common

    headers = {"Content-Type": "application/json"}
    async with client.session.post(f"{client.base_url}{path}", data=body, headers=headers) as r:
        return stan.common.HTTPResponse(status=r.status, content=await r.read())


async def _httpstan_params(
    client: Any, model_name: str, encoded: _JsonWithData
) -> tuple[tuple, tuple, tuple]:
    """Output names, flat (constrained) names and dims, as ``stan.build`` gets them."""
    resp = await _post_encoded(client, f"/{model_name}/params", encoded.body({}))
    if resp.status != 200:
        raise StanFailure(resp.content.decode(errors="replace"), "data")
    items = resp.json()["params"]
    names = tuple(p["name"] for p in items)
    constrained = tuple(n for p in items for n in p["constrained_names"])
    dims = tuple(list(p["dims"]) for p in items)  # lists, as stan.fit.Fit expects
    return names, constrained, dims


async def _wait_for(client: Any, operations: list[dict], quiet: bool) -> None:
    """Poll the operations until all are done; report progress in tenths unless quiet."""
    iteration = re.compile(r"Iteration:\s+(\d+)\s+/\s+(\d+)")
    shown = -1
    while not all(op["done"] for op in operations):
        await asyncio.sleep(0.05)
        for op in operations:
            if not op["done"]:
                op.update((await client.get(f"/{op['name']}")).json())
        if quiet:
            continue
        done = total = 0
        for op in operations:
            match = iteration.search(op.get("metadata", {}).get("progress") or "")
            current, last = (int(match[1]), int(match[2])) if match else (0, 1)
            done, total = done + (last if op["done"] else current), total + last
        tenth = 10 * done // max(total, 1)
        if tenth > shown:
            shown = tenth
            print(f"Sampling: {10 * tenth:3d}%", file=sys.stderr, flush=True)


def _logger_texts(outputs: Sequence[bytes]) -> list[list[str]]:
    """Each chain's logger messages (Stan's text: never shown, only counted)."""
    return [
        [json.loads(line)["values"][0] for line in output.splitlines() if b'"logger"' in line]
        for output in outputs
    ]


def _expected_fit_name(model_name: str, payload: dict) -> str:
    """The name httpstan gives the fit of ``payload`` (a hash of the parsed request)."""
    import httpstan.fits
    import httpstan.schemas

    args = httpstan.schemas.CreateFitRequest().load(json.loads(json.dumps(payload)))
    function = args.pop("function")
    return httpstan.fits.calculate_fit_name(function, model_name, args)


def _delete_fits(fit_names: Sequence[str]) -> None:
    """Delete the cached fit files (all draws and messages) of these chains."""
    import httpstan.cache

    for fit_name in fit_names:
        with contextlib.suppress(KeyError):
            httpstan.cache.delete_fit(fit_name)


_FITS_PREFIX = private_dir.PREFIXES[1]  # "dpsynth-pystan-"
_FITS: private_dir.PrivateFolder | None = None
_FITS_LOCK = threading.Lock()


def _fits_folder() -> Path:
    """This process's private folder for httpstan's fit files, made at first use and
    removed at exit (a forked child makes its own: the parent's goes with the parent)."""
    global _FITS
    with _FITS_LOCK:
        if _FITS is None or _FITS.owner != os.getpid() or not os.path.isdir(_FITS.path):
            if _FITS is not None:
                _FITS.close()  # nothing if it is the parent's
            else:  # once: a forked child inherits the registration
                atexit.register(_close_fits_folder)
            _FITS = private_dir.PrivateFolder(_FITS_PREFIX)
        return Path(_FITS.path)


def _close_fits_folder() -> None:
    """Remove this process's fit folder (at exit)."""
    if _FITS is not None:
        _FITS.close()


def _private_fit_path(fit_name: str) -> Path:
    """``httpstan.cache.fit_path``, in :func:`_fits_folder` instead of httpstan's cache."""
    fit_directory, fit_id = fit_name.rsplit("/", maxsplit=1)
    return _fits_folder() / fit_directory / f"{fit_id}.jsonlines.gz"


def _private_fits() -> None:
    """Make httpstan dump, load and delete fits in :func:`_fits_folder` (its ``dump_fit``,
    ``load_fit`` and ``delete_fit`` look ``fit_path`` up at call time); make the folder now,
    so that the sampler workers forked later know it (:func:`_init_sampler_worker`)."""
    import httpstan.cache

    httpstan.cache.fit_path = _private_fit_path
    _fits_folder()


def _sampler_pool(stub: Any) -> Any:
    """httpstan's sampler pool ("fork" workers), each worker bound to this process's life.

    If dpsynth is killed, even with SIGKILL, no sampler process lives on holding the data
    (:func:`bind_to_parent`). The pool forks its workers from the thread that first
    submits a chain: the one running :func:`_run_httpstan`'s event loop.
    """
    import concurrent.futures
    import multiprocessing

    main = threading.current_thread() is threading.main_thread()
    pool = concurrent.futures.ProcessPoolExecutor(
        mp_context=multiprocessing.get_context("fork"),
        initializer=_init_sampler_worker,
        initargs=(os.getpid(), main, stub.init_worker),
    )
    pool._dpsynth_bound = True  # type: ignore[attr-defined]
    return pool


def _init_sampler_worker(parent: int, kernel_signal: bool, init_worker: Callable[[], None]) -> None:
    """Die with the parent (see :func:`bind_to_parent`), be recorded in the parent's fit
    folder (its watcher kills the recorded workers), then httpstan's own initializer.

    The worker's stdout and stderr go to the null device: a worker samples fits to
    confidential data, and what Stan writes there (a program's ``print`` in transformed
    data, for one) must never reach a terminal, whatever the file descriptors were when
    the pool forked it. Draws and messages come back through httpstan's socket instead.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    bind_to_parent(parent, kernel_signal=kernel_signal)
    if _FITS is not None and _FITS.owner == parent:  # the parent's, copied by fork
        private_dir.register_worker(_FITS.path)
    init_worker()


def bind_to_parent(parent: int, *, kernel_signal: bool = True, poll: float = 0.2) -> None:
    """End this (forked) process when ``parent`` ends, however it ends.

    Two guards: on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill this
    process the moment the thread that forked it ends (only asked for when that thread
    is the parent's main thread, ``kernel_signal``); and a daemon thread that checks
    every ``poll`` seconds whether the parent is still this process's parent (Stan's
    sampler releases the GIL, so the check runs while a chain samples).
    """
    import ctypes

    if kernel_signal:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the thread remains
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, name="dpsynth-parent-watch", daemon=True).start()


def _bind_sampler_pool() -> None:
    """Put a :func:`_sampler_pool` in place of httpstan's own before any chain starts."""
    import httpstan.services_stub as stub

    if not getattr(stub.executor, "_dpsynth_bound", False):
        old, stub.executor = stub.executor, _sampler_pool(stub)
        old.shutdown(wait=False)


def _stop_sampler_pool() -> None:
    """Kill httpstan's sampler processes (a chain keeps running after its caller is gone).

    httpstan samples in a module-level "fork" process pool whose workers ignore SIGINT;
    they are killed and waited for, and a fresh pool is put in place for later fits.
    """
    stub = sys.modules.get("httpstan.services_stub")
    if stub is None:
        return
    old = stub.executor
    processes = list((getattr(old, "_processes", None) or {}).values())
    stub.executor = _sampler_pool(stub)
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=5)
    with contextlib.suppress(Exception):
        old.shutdown(wait=False, cancel_futures=True)


def build(code: str, quiet: bool) -> str:
    """Build the program's httpstan model unless a finished build is cached; return its name."""
    import httpstan.models

    model_name = httpstan.models.calculate_model_name(code)
    if _httpstan_model_ready(model_name):
        return model_name
    with build_lock(_models_folder(), model_name.split("/")[1]):
        if not _httpstan_model_ready(model_name):
            if not quiet:
                print(f"Compiling the Stan program ({model_name}; about a minute)", file=sys.stderr)
            _build_httpstan_model(code, model_name)
    return model_name


def _httpstan_model_ready(model_name: str) -> bool:
    """A finished build has its extension module and ``stderr.log`` (written last)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    import httpstan.cache

    folder = httpstan.cache.model_directory(model_name)
    if not (folder / "stderr.log").is_file():
        return False
    return any(p.suffix in EXTENSION_SUFFIXES for p in folder.iterdir())


def _build_httpstan_model(code: str, model_name: str, attempts: int = 3) -> None:
    """What httpstan's ``POST /models`` does, in this process and without a client timeout.

    A ``TimeoutError`` restarts the build, at most ``attempts`` times; any other failure
    removes the partial model folder. stanc runs with :data:`STANC_TIMEOUT_S`.
    """
    import httpstan.cache
    import httpstan.models

    _patient_stanc()

    stan_name = f"model_{model_name.split('/')[1]}"
    for attempt in range(1, attempts + 1):
        httpstan.cache.delete_model_directory(model_name)
        try:
            try:
                _, warnings = stanc(code, stan_name)
            except ValueError as exc:
                raise InputError("stan_file", f"stanc rejected the program:\n{exc}") from None
            httpstan.cache.dump_stanc_warnings(warnings, model_name)
            _ensure_event_loop_ok()
            with tempfile.TemporaryDirectory(prefix="dpsynth-build-") as cwd, contextlib.chdir(cwd):
                output = asyncio.run(httpstan.models.build_services_extension_module(code))
            httpstan.cache.dump_services_extension_module_compiler_output(output, model_name)
            return
        except (TimeoutError, subprocess.TimeoutExpired):
            httpstan.cache.delete_model_directory(model_name)
            if attempt == attempts:
                raise
        except BaseException:
            httpstan.cache.delete_model_directory(model_name)
            raise


def _ensure_event_loop_ok() -> None:
    """PyStan runs its own asyncio loop; inside Jupyter one is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    import nest_asyncio

    nest_asyncio.apply()


@contextlib.contextmanager
def _immediate_keyboard_interrupt() -> Iterator[None]:
    """Let Ctrl-C raise ``KeyboardInterrupt`` at once inside ``asyncio.run``.

    ``asyncio.run`` replaces Python's SIGINT handler by one that cancels the main task,
    which takes effect only when the event loop gets to it; httpstan's task that reads
    the chains' output does not yield while draws keep coming, so the interrupt would
    wait for the end of sampling. A handler that raises is restored to the default after.
    """
    in_main = threading.current_thread() is threading.main_thread()
    if not in_main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def _sockets_removed() -> Iterator[None]:
    """Remove the Unix socket files httpstan makes for each chain, once the block ends.

    ``httpstan.services_stub`` names each socket with ``tempfile.mkstemp`` and never
    unlinks it; a recording stand-in for its ``tempfile`` keeps the names this process
    made, so exactly those are removed (never another process's sockets). They are also
    linked from the fit folder's ``.outside/``, so its watcher removes them if this
    process is killed (:func:`~dpsynth.engine.private_dir.register_outside`).
    """
    import httpstan.services_stub as stub

    made: list[str] = []
    real = stub.tempfile
    folder = str(_fits_folder())

    class _Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def mkstemp(self, *args: Any, **kwargs: Any) -> tuple[int, str]:
            fd, name = real.mkstemp(*args, **kwargs)
            made.append(name)
            private_dir.register_outside(folder, name)
            return fd, name

    stub.tempfile = _Recording()  # type: ignore[assignment]
    try:
        yield
    finally:
        stub.tempfile = real
        for name in made:
            private_dir.forget_outside(folder, name)


@contextlib.contextmanager
def _logger_disabled(name: str) -> Iterator[None]:
    """Switch a library's logger off (httpstan logs Stan's error text, data values included)."""
    logger = logging.getLogger(name)
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


def purge_fit_cache() -> int:
    """Delete every fit file left in httpstan's cache (for example by older versions).

    Compiled models stay. Do not call it while another process samples with PyStan:
    that process's fit files would go too. Returns the number of files deleted.
    """
    import httpstan.cache

    count = 0
    for path in (httpstan.cache.cache_directory() / "models").glob("*/fits/*"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            count += 1
    return count
