"""Stan engine: compile, cache and sample the programs in ``stan/`` under one interface.

Two backends run the same ``.stan`` files: cmdstanpy when a CmdStan installation
is present, PyStan 3 (httpstan ships Stan 2.35) otherwise. The choice comes from
the ``backend`` argument, else ``DPSYNTH_STAN_BACKEND=auto|cmdstanpy|pystan``.
Only this module knows which backend runs (``StanFit.backend`` says which one did).
Every fit takes a seed and is reproducible with it.

What is written to disk, and where
----------------------------------
PyStan backend (httpstan 4.13). The cache root is ``httpstan.cache.cache_directory()``,
``$XDG_CACHE_HOME/httpstan/4.13.0`` (``~/.cache/httpstan/4.13.0`` by default); one folder
``models/<model_id>/`` per program (the id hashes the program code and the Python build):

- compiled model, kept (depends on the program code only): ``model_<id>.cpp`` (stanc's
  C++), ``stanc.log`` (stanc warnings), ``stderr.log`` (compiler output, written last: it
  marks a finished build) and ``stan_services_model_<id>.cpython-*.so``; beside the
  folder, an empty ``models/<id>.lock`` (the build lock of :func:`compile_program`);
- fits, deleted: httpstan writes every chain's output (all draws, including the
  per-record ``contrib`` / ``record_log_lik`` terms, and Stan's messages) to
  ``models/<id>/fits/<fit_id>.jsonlines.gz`` when the chain ends. :func:`fit` and
  :func:`generate` read them and delete them before returning, also on error and on
  interruption; an empty ``fits/`` folder may remain.
- elsewhere: ``stanc`` reads the program from a temporary folder
  ``$TMPDIR/httpstan_*/`` that httpstan removes; the C++ compiler's object files go to a
  private temporary working folder removed after the build (httpstan would otherwise
  write ``./build/temp.*/`` under the current directory); every chain leaves an empty
  Unix socket ``$TMPDIR/httpstan_*.sock`` (no content; httpstan never removes it).

cmdstanpy backend. Programs and executables live in ``$DPSYNTH_CACHE_DIR/cmdstan``
(``~/.cache/dpsynth/cmdstan``): ``model_<hash>.stan`` (the hash covers the program and
the CmdStan path), its executable and an empty ``model_<hash>.lock`` (the build lock).
Each run gets a private temporary folder ``$TMPDIR/dpsynth-cmdstan-<pid>-*/`` (mode
0700) holding the data JSON, the inits or ``log_prob`` parameters, CmdStan's CSV output
(``sig_figs=18``, full double precision), console logs and an empty ``.owner.lock``; it
is removed once the draws are read, also on error and on interruption. If the Python
process is killed (SIGKILL), a watcher process kills the chains and removes the folder
at once; a folder left anyway is removed by the next run (its lock is free). Different
inits per chain go through cmdstanpy's own temporary folder for the run's duration.

Messages never contain data values: Stan's error text (for example ``y[3] is -123.456,
but must be >= 0``) is replaced by an :class:`~dpsynth.errors.InputError` naming the
variable and index only, httpstan's own log is switched off during a run, and
Stan's informational messages during sampling are counted, not printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from dpsynth import diagnostics
from dpsynth.errors import InputError

if TYPE_CHECKING:
    import stan.fit

STAN_DIR = Path(__file__).resolve().parent.parent / "stan"
"""The folder of the shipped Stan programs and the shared functions file."""

SHARED_FUNCTIONS = "dpsynth_functions.stan"
BACKENDS = ("auto", "cmdstanpy", "pystan")
RECORD_OUTPUTS = ("contrib", "contrib_uncensored", "record_log_lik")
"""Per-record ``S x n`` generated quantities, returned as :class:`StanFit` fields."""
_NON_DIAGNOSTIC = frozenset((*RECORD_OUTPUTS, "y_rep", "log_lik", "log_lik_raw"))
_INCLUDE = re.compile(r"^\s*#include\s+[<\"]?([\w./-]+)[>\"]?\s*$", re.MULTILINE)
_NUTS = "stan::services::sample::hmc_nuts_diag_e_adapt"
_FIXED_PARAM = "stan::services::sample::fixed_param"
_T = TypeVar("_T")


@dataclass
class StanFit:
    """Draws and diagnostics of one fit.

    ``draws[name]`` has shape ``(S, *dims)`` with ``S = chains * iter_sampling``, chain 1's
    draws first, then chain 2's, and so on. The per-record generated quantities are kept
    out of ``draws``, each an ``S x n`` matrix when the program was asked for them
    (``want_contrib = 1``), else ``None``: ``contrib`` (alpha_i * ll_i, clamped to
    [-M, M] when censoring), ``contrib_uncensored`` (alpha_i * ll_i) and
    ``record_log_lik`` (the unweighted ll_i).
    """

    draws: dict[str, np.ndarray]
    chains: int
    diagnostics: dict[str, float]
    backend: str
    seed: int
    contrib: np.ndarray | None = None
    contrib_uncensored: np.ndarray | None = None
    record_log_lik: np.ndarray | None = None
    param_names: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n_draws(self) -> int:
        """Number of retained draws S over all chains."""
        first = next(iter(self.draws.values()))
        return int(first.shape[0])

    def draw(self, s: int) -> dict[str, Any]:
        """Parameter values of retained draw ``s`` (for posterior predictive synthesis)."""
        return {
            k: (v[s].tolist() if v[s].ndim else float(v[s]))
            for k, v in self.draws.items()
            if k in self.param_names
        }


class _Sample(NamedTuple):
    """What a backend returns: draws ``(S, *dims)``, parameter names, per-chain arrays."""

    draws: dict[str, np.ndarray]
    param_names: tuple[str, ...]
    chain_arrays: dict[str, np.ndarray]
    divergences: int


class _StanFailure(Exception):
    """Stan's or httpstan's raw error text; never shown (see :func:`_withheld_error`)."""

    def __init__(self, text: str, stage: str) -> None:
        super().__init__(stage)
        self.text, self.stage = text, stage


def program_code(stan_file: str | Path) -> str:
    """Return the program text with ``#include`` lines inlined.

    Includes are searched beside the program, then in the shipped ``stan/`` folder,
    so a user's program can ``#include dpsynth_functions.stan`` from anywhere.
    """
    path = Path(stan_file)
    if not path.is_file():
        raise InputError("stan_file", f"no such Stan program: {path}")
    text = path.read_text()

    def inline(match: re.Match[str]) -> str:
        name = match.group(1)
        for folder in (path.parent, STAN_DIR):
            candidate = folder / name
            if candidate.is_file():
                return candidate.read_text()
        raise InputError("stan_file", f"{path}: cannot find included file {name}")

    return _INCLUDE.sub(inline, text)


def choose_backend(backend: str | None = None) -> str:
    """Resolve the backend: argument, else ``DPSYNTH_STAN_BACKEND``, else auto-detect."""
    choice = (backend or os.environ.get("DPSYNTH_STAN_BACKEND") or "auto").lower()
    if choice not in BACKENDS:
        raise InputError("backend", f"must be one of {', '.join(BACKENDS)} (got {choice!r})")
    if choice == "auto":
        return "cmdstanpy" if cmdstan_available() else "pystan"
    if choice == "cmdstanpy" and not cmdstan_available():
        raise InputError("backend", "cmdstanpy was asked for but no CmdStan installation was found")
    return choice


def cmdstan_available() -> bool:
    """True when cmdstanpy is importable and finds a CmdStan installation.

    cmdstanpy imports ``tqdm.auto``, which warns inside a kernel without ipywidgets;
    the warning and cmdstanpy's log line about a missing installation are silenced.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import cmdstanpy
        except ImportError:
            return False
    logger = logging.getLogger("cmdstanpy")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError):
        return False
    finally:
        logger.setLevel(level)
    return True


def compile_program(
    stan_file: str | Path, *, backend: str | None = None, quiet: bool = True
) -> str:
    """Compile a program once (about a minute) and cache it; return the model's name.

    PyStan: the model is built in this process through httpstan's own functions
    (stanc, then ``httpstan.models.build_services_extension_module``), not through
    ``stan.build``'s HTTP request, whose 5-minute client timeout a first compile on a
    loaded machine can exceed (``TimeoutError``). A build that times out inside
    (``stanc`` has a 1 s limit) is retried; concurrent processes wait on a file lock and
    reuse the result. cmdstanpy: the executable path. :func:`fit` calls this first.
    """
    name = choose_backend(backend)
    code = program_code(stan_file)
    with _silenced(quiet):
        if name == "pystan":
            return _compile_httpstan(code, quiet)
        return str(_cmdstan_model(code, quiet).exe_file)


def fit(
    stan_file: str | Path,
    data: Mapping[str, Any],
    *,
    seed: int,
    chains: int = 4,
    iter_warmup: int = 1000,
    iter_sampling: int = 1000,
    backend: str | None = None,
    quiet: bool = True,
    inits: Sequence[Mapping[str, Any]] | None = None,
    adapt_delta: float = 0.8,
) -> StanFit:
    """Sample a program with NUTS and return draws, per-record terms and diagnostics.

    ``data`` follows the dpsynth convention (``n, alpha, censor, M, want_contrib,
    want_rep`` then the model's own data); see ``book/stan_convention.md``. ``inits``:
    one dict of initial parameter values per chain. ``adapt_delta``: the step-size
    adaptation's target acceptance rate (Stan's default 0.8; higher means smaller steps and
    fewer divergent transitions). ``quiet`` keeps compiler output and
    sampler progress off the terminal; otherwise they go to stderr (never stdout).
    Stan's rejections of the data and failures while sampling raise ``InputError``
    without any data value; Ctrl-C (or a ``SystemExit`` from a SIGTERM handler) stops
    the sampler processes, deletes the run's files and is re-raised.
    """
    name = choose_backend(backend)
    code = program_code(stan_file)
    if inits is not None and len(inits) != chains:
        raise InputError("inits", f"needs one dict per chain ({chains}), got {len(inits)}")
    init_list = [dict(i) for i in inits] if inits is not None else None
    settings = _Run(
        code, dict(data), seed, chains, iter_warmup, iter_sampling, init_list, quiet, adapt_delta
    )
    sample = _sample_pystan if name == "pystan" else _sample_cmdstanpy
    with _silenced(quiet):
        run = _withheld(lambda: sample(settings))
    return StanFit(
        draws={k: v for k, v in run.draws.items() if k not in RECORD_OUTPUTS},
        chains=chains,
        diagnostics=convergence_diagnostics(run.chain_arrays, divergences=run.divergences),
        backend=name,
        seed=int(seed),
        contrib=_nonempty(run.draws.get("contrib")),
        contrib_uncensored=_nonempty(run.draws.get("contrib_uncensored")),
        record_log_lik=_nonempty(run.draws.get("record_log_lik")),
        param_names=run.param_names,
    )


def generate(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Mapping[str, Any],
    *,
    seed: int,
    backend: str | None = None,
    quiet: bool = True,
) -> np.ndarray:
    """Run the program's generated quantities once at fixed ``params``; return ``y_rep``.

    This is the posterior predictive step (synthesis as post-processing): the
    sampler is Stan's ``fixed_param`` started at one retained posterior draw. ``data``
    is passed through with ``want_rep = 1`` and ``want_contrib = 0``.
    """
    if not params:
        raise ValueError("generate() needs the values of the parameters block (got none)")
    name = choose_backend(backend)
    code = program_code(stan_file)
    gq_data = dict(data, want_rep=1, want_contrib=0)
    with _silenced(quiet):
        if name == "pystan":
            return _withheld(lambda: _generate_pystan(code, gq_data, dict(params), seed, quiet))
        return _withheld(lambda: _generate_cmdstanpy(code, gq_data, dict(params), seed, quiet))


def log_density(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Sequence[Mapping[str, Any]],
    *,
    backend: str | None = None,
) -> np.ndarray:
    """The program's target log p(theta | data), without the Jacobian, at each of ``params``.

    ``params`` are constrained values of the parameters block (as :meth:`StanFit.draw`
    gives them). PyStan: the compiled model's own ``log_prob`` in this process; cmdstanpy:
    CmdStan's ``log_prob`` method at 18 significant digits. Output the program prints is
    discarded; Stan's errors are withheld as in :func:`fit`.
    """
    return _at_params(stan_file, data, params, backend, _log_density_pystan, _log_density_cmdstanpy)


def outputs_at(
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Sequence[Mapping[str, Any]],
    *,
    backend: str | None = None,
) -> list[dict[str, np.ndarray]]:
    """Transformed parameters and generated quantities at each of ``params``, one dict each.

    The random number generator of the generated quantities starts from the same fixed
    seed for every call, so two calls that differ only in ``data`` differ only where the
    program's outputs depend on those data (what :mod:`dpsynth.program_checks` tests).
    Not for synthesis (use :func:`generate`, which takes a fresh seed).
    """
    return _at_params(stan_file, data, params, backend, _outputs_pystan, _outputs_cmdstanpy)


def _at_params(stan_file, data, params, backend, pystan_call, cmdstanpy_call) -> Any:
    """Evaluate a program at fixed parameter values on the chosen backend, silently, with
    Stan's errors withheld (:func:`log_density`, :func:`outputs_at`)."""
    call = pystan_call if choose_backend(backend) == "pystan" else cmdstanpy_call
    code = program_code(stan_file)
    with _silenced(True):
        return _withheld(lambda: call(code, dict(data), list(params)))


def convergence_diagnostics(
    chain_arrays: Mapping[str, np.ndarray], *, divergences: int | None = None
) -> dict[str, float]:
    """Max rank-normalized R-hat and min bulk ESS over scalar quantities.

    ``chain_arrays[name]`` has shape ``(chains, draws)``; constant or non-finite
    columns (for example a parameter fixed by its constraint) are skipped. Computed by
    :mod:`dpsynth.diagnostics` (the same numbers as ArviZ 0.22). ``divergences``, when
    given, is added under that key.
    """
    rhats, esss = [], []
    for values in chain_arrays.values():
        if not np.all(np.isfinite(values)) or np.ptp(values) == 0:
            continue
        rhats.append(diagnostics.rhat(values))
        esss.append(diagnostics.ess_bulk(values))
    out: dict[str, float] = {
        "rhat_max": max(rhats) if rhats else float("nan"),
        "ess_bulk_min": min(esss) if esss else float("nan"),
    }
    if divergences is not None:
        out["divergences"] = int(divergences)
    return out


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


# --- PyStan (httpstan) ----------------------------------------------------------


class _Run(NamedTuple):
    """One sampling run's settings, as :func:`fit` passes them to a backend."""

    code: str
    data: dict
    seed: int
    chains: int
    iter_warmup: int
    iter_sampling: int
    inits: list[dict] | None
    quiet: bool
    adapt_delta: float = 0.8


def _sample_pystan(run: _Run) -> _Sample:
    code, data, seed, chains, iter_warmup, iter_sampling, inits, quiet, adapt_delta = run
    out = _run_httpstan(
        code,
        data,
        _NUTS,
        seed=seed,
        inits=inits or [{} for _ in range(chains)],
        quiet=quiet,
        num_warmup=iter_warmup,
        num_samples=iter_sampling,
        delta=adapt_delta,
    )
    draws = {
        name: _chains_stacked(out[name], dims, chains)
        for name, dims in zip(out.param_names, out.dims, strict=True)
    }
    divergences = int(np.sum(out["divergent__"]))
    params = _parameters_block_names(code, out.param_names)
    return _Sample(draws, params, _chain_arrays(draws, chains), divergences)


def _generate_pystan(code: str, data: dict, params: dict, seed: int, quiet: bool) -> np.ndarray:
    out = _run_httpstan(
        code, data, _FIXED_PARAM, seed=seed, inits=[params], quiet=quiet, num_samples=1
    )
    return np.asarray(out["y_rep"])[..., 0]


def _services_module(code: str) -> Any:
    """The compiled program's ``stan::services`` extension module, loaded in this process."""
    import httpstan.models

    return httpstan.models.import_services_extension_module(_compile_httpstan(code, True))


def _log_density_pystan(code: str, data: dict, params: list[dict]) -> np.ndarray:
    module = _services_module(code)
    jdata = _jsonable(data)
    out = []
    for p in params:
        try:
            unconstrained = module.transform_inits(jdata, _jsonable(p))
            out.append(module.log_prob(jdata, unconstrained, False))
        except (RuntimeError, ValueError, IndexError) as exc:
            raise _StanFailure(str(exc), "data") from None
    return np.asarray(out, dtype=float)


def _outputs_pystan(code: str, data: dict, params: list[dict]) -> list[dict[str, np.ndarray]]:
    module = _services_module(code)
    jdata = _jsonable(data)
    try:
        names, dims = module.get_param_names(jdata), module.get_dims(jdata)
    except (RuntimeError, ValueError, IndexError) as exc:
        raise _StanFailure(str(exc), "data") from None
    params_block = set(_parameters_block_names(code, tuple(names)))
    out = []
    for p in params:
        try:
            unconstrained = module.transform_inits(jdata, _jsonable(p))
            flat = np.asarray(module.write_array(jdata, unconstrained, True, True), dtype=float)
        except (RuntimeError, ValueError, IndexError) as exc:
            raise _StanFailure(str(exc), "data") from None
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


def _chain_arrays(draws: Mapping[str, np.ndarray], chains: int) -> dict[str, np.ndarray]:
    """One ``(chains, draws)`` array per scalar component, per-record outputs left out."""
    out: dict[str, np.ndarray] = {}
    for name, values in draws.items():
        if name in _NON_DIAGNOSTIC:
            continue
        flat = values.reshape(values.shape[0], -1)
        for j in range(flat.shape[1]):
            out[f"{name}[{j}]"] = flat[:, j].reshape(chains, -1)
    return out


_PARAMS: dict[tuple[str, str], tuple[tuple, tuple, tuple]] = {}
"""Output names, flat names and dims per (model, :func:`_shape_key`)."""
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
) -> stan.fit.Fit:
    """Run ``function`` once per init (one chain each) through httpstan; return a ``stan.fit.Fit``.

    A small client of httpstan's REST API (what ``stan.build`` + ``Model.sample`` do, minus
    their printing): it keeps the fits' names, deletes their cache files once read (also
    on error or interruption), withholds Stan's messages and stops httpstan's sampler
    processes when interrupted. Output names and dims are asked once per program and
    :func:`_shape_key` (measured 0.15 s per request).
    """
    import stan.fit

    model_name = _compile_httpstan(code, quiet)
    jdata = _jsonable(data)
    key = (model_name, _shape_key(data))
    payloads = [
        {
            **kwargs,
            "function": function,
            "chain": chain,
            "data": jdata,
            "init": _jsonable(init),
            # httpstan's services take a signed 32-bit seed (as CmdStan)
            "random_seed": int(seed) % (2**31),
        }
        for chain, init in enumerate(inits, start=1)
    ]
    # known before the chains start: a chain's fit can be written while this process
    # waits for httpstan's answer (see _immediate_keyboard_interrupt)
    fit_names = [_expected_fit_name(model_name, payload) for payload in payloads]
    _ensure_event_loop_ok()
    _bind_sampler_pool()
    try:
        with _logger_disabled("httpstan"), _immediate_keyboard_interrupt():
            params, outputs = asyncio.run(
                _httpstan_session(model_name, jdata, _PARAMS.get(key), payloads, fit_names, quiet)
            )
    except _StanFailure as failure:
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
    if not quiet:
        _report_messages(outputs)
    param_names, constrained_names, dims = params
    return stan.fit.Fit(
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
                    raise _StanFailure(resp.content.decode(errors="replace"), "sampling")
                operations.append(resp.json())
                if (name := operations[-1]["metadata"]["fit"]["name"]) not in fit_names:
                    fit_names.append(name)
            await _wait_for(client, operations, quiet)
            outputs = []
            for operation in operations:
                if "name" not in operation["result"]:
                    raise _StanFailure(str(operation["result"].get("message", "")), "sampling")
                resp = await client.get(f"/{operation['result']['name']}")
                if resp.status != 200:
                    raise RuntimeError(f"httpstan lost a fit of {model_name} before it was read")
                outputs.append(resp.content)
    finally:
        loop.set_exception_handler(handler)
    return params, outputs


class _JsonWithData:
    """A request body ``{...payload, "data": data}`` whose (large) data part is encoded once.

    httpstan takes the data with every chain's request; encoding it once per fit instead of
    once per chain saves about 1.4 s per chain at 10^6 records (measured).
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
        raise _StanFailure(resp.content.decode(errors="replace"), "data")
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


_MESSAGE_KINDS = (
    ("rejected proposals", "Informational Message", "usual during warm-up; harmless if rare"),
    ("warnings", "warn:", "often a parameter at the edge of its support"),
    ("errors", "error:", "the model failed to evaluate at some parameter values"),
)
"""How Stan's withheld messages are summarised: (kind, how the line starts or reads, hint)."""


def message_summary(texts: Sequence[str]) -> dict[str, int]:
    """Stan's messages counted by kind (:data:`_MESSAGE_KINDS`); their text is dropped."""
    counts = {kind: 0 for kind, _, _ in _MESSAGE_KINDS}
    for text in texts:
        for kind, marker, _ in _MESSAGE_KINDS:
            if marker in text if kind == "rejected proposals" else text.startswith(marker):
                counts[kind] += 1
                break
    return counts


def _report_messages(outputs: Sequence[bytes]) -> None:
    """Summarise Stan's rejections, warnings and errors while sampling; their text is withheld.

    The counts come from the fit to the confidential data, so the line is marked
    confidential (it reaches the curator's terminal only, never a file).
    """
    texts = []
    for output in outputs:
        for line in output.splitlines():
            if b'"logger"' in line:
                texts.append(json.loads(line)["values"][0])
    counts = message_summary(texts)
    if any(counts.values()):
        hints = {kind: hint for kind, _, hint in _MESSAGE_KINDS}
        parts = [f"{c} {kind} ({hints[kind]})" for kind, c in counts.items() if c]
        print(
            "[dpsynth] CONFIDENTIAL (from the fit to the confidential data): Stan sent "
            + "; ".join(parts)
            + ". Their text is withheld because it can contain data values.",
            file=sys.stderr,
        )


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
    """Die with the parent (see :func:`bind_to_parent`), then httpstan's own initializer."""
    bind_to_parent(parent, kernel_signal=kernel_signal)
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


def _compile_httpstan(code: str, quiet: bool) -> str:
    """Build the program's httpstan model unless a finished build is cached; return its name."""
    import httpstan.models

    model_name = httpstan.models.calculate_model_name(code)
    if _httpstan_model_ready(model_name):
        return model_name
    with _compile_lock(model_name):
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

    A ``TimeoutError`` (``stanc`` is given 1 s) restarts the build, at most ``attempts``
    times; any other failure removes the partial model folder.
    """
    import httpstan.cache
    import httpstan.compile
    import httpstan.models

    stan_name = f"model_{model_name.split('/')[1]}"
    for attempt in range(1, attempts + 1):
        httpstan.cache.delete_model_directory(model_name)
        try:
            try:
                _, warnings = httpstan.compile.compile(code, stan_name)
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


@contextlib.contextmanager
def _compile_lock(model_name: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``models/<id>.lock`` in httpstan's cache: one build per model.

    Processes building the same program wait for each other (then reuse the build);
    different programs build in parallel. The empty lock file stays (httpstan ignores it).
    """
    import fcntl

    import httpstan.cache

    folder = httpstan.cache.cache_directory() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{model_name.split('/')[1]}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# --- cmdstanpy ------------------------------------------------------------------


def _sample_cmdstanpy(run: _Run) -> _Sample:  # pragma: no cover - needs a CmdStan installation
    code, data, seed, chains, iter_warmup, iter_sampling, inits, quiet, adapt_delta = run
    sampling = {"chains": chains, "iter_warmup": iter_warmup, "iter_sampling": iter_sampling}
    sampling["adapt_delta"] = adapt_delta
    out = _cmdstan_sample(code, data, seed, inits, quiet, **sampling)
    draws = _cmdstan_draws(code, out)  # chains stacked
    names = tuple(draws)
    divergences = int(np.sum(out.method_variables()["divergent__"]))
    return _Sample(
        draws, _parameters_block_names(code, names), _chain_arrays(draws, chains), divergences
    )


def _cmdstan_draws(code: str, out: Any) -> dict[str, np.ndarray]:  # pragma: no cover
    """Every output of the program, ``(draws, *dims)``, in declaration order (as PyStan).

    cmdstanpy leaves out variables of size zero (no CSV column: ``y_rep`` when
    ``want_rep = 0``); they are put back as empty arrays with one zero per declared
    dimension (exact for vectors and 1-d arrays), from stanc's ``--info``.
    """
    present = out.stan_variables()
    draws: dict[str, np.ndarray] = {}
    for name, dims in _cmdstan_declared_outputs(code).items():
        if name in present:
            draws[name] = np.asarray(present[name])
        else:
            draws[name] = np.zeros((out.draws(concat_chains=True).shape[0], *(0,) * dims))
    for name, values in present.items():  # not expected: stanc's info names them all
        draws.setdefault(name, np.asarray(values))
    return draws


_CMDSTAN_INFO: dict[str, dict[str, int]] = {}


def _cmdstan_declared_outputs(code: str) -> dict[str, int]:  # pragma: no cover - CmdStan
    """Parameters, transformed parameters and generated quantities: name -> dimensions."""
    model = _cmdstan_model(code)
    key = str(model.exe_file)
    if key not in _CMDSTAN_INFO:
        info = model.src_info()
        blocks = ("parameters", "transformed parameters", "generated quantities")
        _CMDSTAN_INFO[key] = {
            name: int(v.get("dimensions", 0)) + (v.get("type") == "complex")
            for block in blocks
            for name, v in info.get(block, {}).items()
        }
    return _CMDSTAN_INFO[key]


def _generate_cmdstanpy(  # pragma: no cover - needs a CmdStan installation
    code: str, data: dict, params: dict, seed: int, quiet: bool
) -> np.ndarray:
    out = _cmdstan_sample(code, data, seed, params, True, fixed_param=True, iter_sampling=1)
    return np.asarray(out.stan_variable("y_rep"))[0]


def _cmdstan_sample(  # pragma: no cover - needs a CmdStan installation
    code: str, data: dict, seed: int, inits: Any, quiet: bool, **sampling: Any
) -> Any:
    """One ``CmdStanModel.sample`` call in a private folder (18 significant digits), read
    back in full before the folder (data JSON, inits, CSV files) is removed.

    ``inits``: ``None``, one dict for every chain, or a list of one dict per chain. One
    dict (or a list of equal dicts) is written into the private folder; different dicts
    per chain go through cmdstanpy's own temporary folder, for the run's duration.
    """
    model = _cmdstan_model(code, quiet)
    with _cmdstan_run(model, data, quiet) as (data_file, output_dir):
        if isinstance(inits, list):
            inits = [_jsonable(i) for i in inits]  # arrays to lists: comparable, writable
            if all(i == inits[0] for i in inits[1:]):
                inits = inits[0] if inits else None
        if isinstance(inits, Mapping):
            import cmdstanpy

            inits_file = os.path.join(output_dir, "inits.json")
            cmdstanpy.write_stan_json(inits_file, _jsonable(inits))
            inits = inits_file
        sampling = {"chains": 1, **sampling}
        per_chain = sampling.get("iter_warmup", 1000) + sampling.get("iter_sampling", 1000)
        if sampling.get("fixed_param"):
            per_chain = sampling.get("iter_sampling", 1000)
        if not quiet:  # progress lines in tenths, as the PyStan path prints them
            sampling.setdefault("refresh", max(1, per_chain // 10))
        with _cmdstan_progress(output_dir, sampling["chains"] * per_chain, quiet):
            out = _cmdstan_interruptible(
                output_dir,
                lambda: model.sample(
                    data=data_file,
                    seed=int(seed) % (2**31),
                    inits=inits,
                    output_dir=output_dir,
                    sig_figs=18,
                    show_progress=False,
                    **sampling,
                ),
            )
        out.draws()  # read every CSV while the folder still exists
        return out


@contextlib.contextmanager
def _cmdstan_progress(folder: str, total: int, quiet: bool) -> Iterator[None]:
    """Print ``Sampling: N%`` in tenths to stderr (unless quiet), as the PyStan path does.

    A daemon thread reads the chains' console files (``*-stdout.txt``, CmdStan's
    ``Iteration: i / n`` lines) every 0.2 s; cmdstanpy's own progress bars stay off.
    """
    if quiet:
        yield
        return
    iteration = re.compile(r"Iteration:\s+(\d+)\s+/\s+(\d+)")
    stop = threading.Event()
    shown = [-1]

    def report(done: int) -> None:
        tenth = min(10, 10 * done // max(total, 1))
        if tenth > shown[0]:
            shown[0] = tenth
            print(f"Sampling: {10 * tenth:3d}%", file=sys.stderr, flush=True)

    def poll() -> None:
        while not stop.wait(0.2):
            done = 0
            for path in Path(folder).glob("*-stdout.txt"):
                with contextlib.suppress(OSError):
                    matches = iteration.findall(path.read_text(errors="replace"))
                    done += int(matches[-1][0]) if matches else 0
            report(done)

    thread = threading.Thread(target=poll, name="dpsynth-progress", daemon=True)
    thread.start()
    try:
        yield
        stop.set()
        thread.join(1)
        report(total)
    finally:
        stop.set()


def _log_density_cmdstanpy(  # pragma: no cover - needs a CmdStan installation
    code: str, data: dict, params: list[dict]
) -> np.ndarray:
    """CmdStan's ``log_prob`` method (``jacobian=0``), run here with every file in the
    run's private folder (cmdstanpy's ``log_prob`` keeps its output in its own temporary
    folder until Python exits, and drops Stan's message on failure)."""
    import cmdstanpy

    model = _cmdstan_model(code)
    with _cmdstan_run(model, data, True) as (data_file, folder):
        values = []
        for i, p in enumerate(params):
            params_file = os.path.join(folder, f"params_{i}.json")
            output = os.path.join(folder, f"log_prob_{i}.csv")
            cmdstanpy.write_stan_json(params_file, _jsonable(p))
            cmd = [
                str(model.exe_file),
                "log_prob",
                f"constrained_params={params_file}",
                "jacobian=0",
                "data",
                f"file={data_file}",
                "output",
                f"file={output}",
                "sig_figs=18",
            ]

            def run(cmd: list[str] = cmd) -> subprocess.CompletedProcess:
                return subprocess.run(
                    cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
                )

            proc = _interruptible(run, lambda: _kill_run_processes(folder))
            if proc.returncode:
                raise _StanFailure(proc.stdout + proc.stderr, "data")
            with open(output) as fh:
                rows = [line for line in fh if line.strip() and not line.startswith("#")]
            values.append(float(rows[1].split(",")[0]))  # header, then lp__,gradient...
    return np.asarray(values, dtype=float)


def _outputs_cmdstanpy(  # pragma: no cover - needs a CmdStan installation
    code: str, data: dict, params: list[dict]
) -> list[dict[str, np.ndarray]]:
    out = []
    for p in params:
        fit = _cmdstan_sample(code, data, 1, _jsonable(p), True, fixed_param=True, iter_sampling=1)
        draws = _cmdstan_draws(code, fit)
        names = set(_parameters_block_names(code, tuple(draws)))
        out.append({k: v[0] for k, v in draws.items() if k not in names})
    return out


_RUN_PREFIX = "dpsynth-cmdstan-"
_RUN_LOCK = ".owner.lock"


@contextlib.contextmanager
def _cmdstan_run(  # pragma: no cover - needs a CmdStan installation
    model: Any, data: Mapping[str, Any], quiet: bool
) -> Iterator[tuple[str, str]]:
    """A private temporary folder (mode 0700) with the data JSON, for CmdStan's files.

    Removed when the run ends, also on error and on interruption. If this process dies
    without cleaning up (SIGKILL, out of memory), a watcher process started here (it
    waits for the end of a pipe only this process holds) kills the CmdStan processes
    still working in the folder and removes it. Folders left anyway (the watcher killed
    too) are removed by the next run in any process: their owner's lock on
    ``.owner.lock`` is gone (:func:`_sweep_stale_runs`).
    """
    import cmdstanpy

    _sweep_stale_runs()
    folder = tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-")
    lock = os.open(os.path.join(folder, _RUN_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    watcher = None
    try:
        _flock(lock, blocking=True)
        watcher = _start_run_watcher(folder)
        data_file = os.path.join(folder, "data.json")
        cmdstanpy.write_stan_json(data_file, _jsonable(data))
        with _cmdstanpy_logging(quiet):
            yield data_file, folder
    finally:
        _kill_run_processes(folder)
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)
        if watcher is not None:
            with contextlib.suppress(OSError):
                watcher.stdin.close()  # the watcher finds the folder gone and exits
            # reaped without waiting here (it may still be starting up)
            threading.Thread(target=watcher.wait, name="dpsynth-watcher", daemon=True).start()


def _flock(fd: int, *, blocking: bool) -> bool:
    """An exclusive ``flock`` on ``fd``; False if another holds it (non-blocking)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, no sweep
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def _sweep_stale_runs(max_unlocked_age: float = 60.0) -> int:
    """Remove the run folders of processes that died without cleaning up; return how many.

    A live run holds an exclusive lock on its ``.owner.lock`` (the kernel drops it when
    the process dies, whatever kills it). A folder without that file (its owner died
    between creating the folder and the file) counts as stale after ``max_unlocked_age``
    seconds. Only this user's folders are considered.
    """
    import time

    count = 0
    base = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(_RUN_PREFIX)]
    except OSError:
        return 0
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                continue
            lock_path = os.path.join(entry.path, _RUN_LOCK)
            try:
                fd = os.open(lock_path, os.O_RDWR)
            except FileNotFoundError:
                if time.time() - entry.stat().st_mtime < max_unlocked_age:
                    continue
                fd = None
            try:
                if fd is not None and not _flock(fd, blocking=False):
                    continue  # its owner is alive
                _reap_run_folder(entry.path)
                count += 1
            finally:
                if fd is not None:
                    os.close(fd)
        except OSError:
            continue
    return count


def _reap_run_folder(folder: str) -> None:
    """Kill this user's processes working in ``folder`` (their arguments name it), remove it.

    Standard library only: it is also the body of the watcher process
    (:func:`_start_run_watcher`). Processes are found through ``/proc`` (Linux).
    """
    import os
    import shutil
    import signal

    marker = os.path.join(folder, "").encode()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
            if any(marker in arg for arg in args):
                os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    shutil.rmtree(folder, ignore_errors=True)


def _watcher_source() -> str | None:
    """The watcher's program: :func:`_reap_run_folder`'s source, then its main lines.

    Read once, when this module is imported (the file on disk may change later, for
    example when dpsynth is upgraded under a running kernel); ``None`` without source.
    """
    import inspect

    try:
        reaper = inspect.getsource(_reap_run_folder)
    except (OSError, TypeError):
        return None
    main = (
        "import os, sys\n"
        "sys.stdin.buffer.read()  # returns when the run ends or its process dies\n"
        "if os.path.isdir(sys.argv[1]):\n"
        "    _reap_run_folder(sys.argv[1])\n"
    )
    return reaper + "\n\n" + main


_WATCHER_SOURCE = _watcher_source()


def _start_run_watcher(folder: str) -> subprocess.Popen | None:
    """Start a process that reaps ``folder`` (:func:`_reap_run_folder`) if this one dies.

    It reads a pipe whose writing end only this process holds (close-on-exec, so CmdStan
    does not inherit it); the read returns at the end of the run or when this process
    dies, however. It runs in its own session, so a signal to this process group does not
    reach it. ``None`` if no Python interpreter can be started.
    """
    if not sys.executable or not os.path.isdir("/proc") or not _WATCHER_SOURCE:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER_SOURCE, folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def _kill_run_processes(folder: str) -> None:
    """Kill this process's descendants whose arguments name ``folder`` (CmdStan chains)."""
    try:
        import psutil
    except ImportError:
        return
    marker = os.path.join(folder, "")
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(marker in arg for arg in child.cmdline()):
                child.kill()


def _cmdstan_interruptible(folder: str, call: Callable[[], _T]) -> _T:  # pragma: no cover
    """Run cmdstanpy in a worker thread; failures become ``_StanFailure`` (text withheld).

    Interrupted, it kills the CmdStan processes of this run (those working in ``folder``).
    """
    try:
        return _interruptible(call, lambda: _kill_run_processes(folder))
    except (RuntimeError, ValueError) as exc:
        failure = _StanFailure(str(exc), "sampling")
    raise failure from None


def _interruptible(call: Callable[[], _T], on_interrupt: Callable[[], None]) -> _T:
    """Run ``call`` in a worker thread while this thread waits in short joins.

    So a KeyboardInterrupt or SystemExit (from a SIGTERM handler) reaches this thread at
    once, even while ``call`` blocks (cmdstanpy waits for its CmdStan processes in a
    thread pool). Then ``on_interrupt`` runs (it should make ``call`` return, for example
    by killing child processes), the worker is given 10 s to finish, and the exception
    is re-raised.

    The wait is on an event the worker sets when done, not on ``Thread.join``: a join
    that an exception interrupts can leave the thread marked finished while it still
    runs (CPython 3.11), and the caller would go on (removing the run's folder and the
    log filter) while cmdstanpy's threads are still reporting the killed chains.
    """
    result: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:  # handed to the calling thread
            result["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, name="dpsynth-stan", daemon=True)
    worker.start()
    try:
        while not done.wait(0.1):
            pass
    except BaseException:
        on_interrupt()
        done.wait(10)
        raise
    if "error" in result:
        raise result["error"]
    return result["value"]


@contextlib.contextmanager
def _cmdstanpy_logging(quiet: bool) -> Iterator[None]:
    """cmdstanpy's log: nothing when quiet; else INFO lines, warnings and errors withheld."""
    logger = logging.getLogger("cmdstanpy")

    def keep(record: logging.LogRecord) -> bool:
        if quiet or record.levelno < logging.INFO:
            return False
        if record.levelno > logging.INFO:  # CmdStan's console text, which can hold data
            record.msg, record.args = (
                "cmdstanpy: %s withheld (it can contain data values)",
                (record.levelname.lower(),),
            )
        return True

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


_CMDSTAN_MODELS: dict[str, Any] = {}
"""``CmdStanModel`` per executable path, for this process (creating one runs stanc and
the executable to ask for their info: about 0.1 s)."""


def _cmdstan_model(code: str, quiet: bool = True):  # pragma: no cover - needs CmdStan
    """The program's ``CmdStanModel``, compiled once into ``$DPSYNTH_CACHE_DIR/cmdstan``.

    The file names hash the program and the CmdStan installation's path, so another
    CmdStan gets its own executable. Processes compiling the same program wait on an
    exclusive lock (``model_<hash>.lock``) and reuse the executable; the program file is
    written atomically. A program CmdStan cannot compile raises ``InputError`` (program
    text only, no data are involved).
    """
    import fcntl

    import cmdstanpy

    digest = hashlib.sha256(f"{cmdstanpy.cmdstan_path()}\0{code}".encode()).hexdigest()[:16]
    root = Path(os.environ.get("DPSYNTH_CACHE_DIR", Path.home() / ".cache" / "dpsynth"))
    folder = root / "cmdstan"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"model_{digest}.stan"
    exe = source.with_suffix(".exe" if os.name == "nt" else "")
    cached = _CMDSTAN_MODELS.get(str(exe))
    if cached is not None and exe.is_file():
        return cached
    fd = os.open(folder / f"model_{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not source.is_file() or source.read_text() != code:
            part = source.with_name(f".{source.name}.{os.getpid()}.part")
            part.write_text(code)
            os.replace(part, source)
        if not quiet and not exe.is_file():
            print("Compiling the Stan program with CmdStan (about a minute)", file=sys.stderr)
        try:
            with _cmdstanpy_logging(quiet):
                model = cmdstanpy.CmdStanModel(stan_file=str(source))
        except (RuntimeError, ValueError) as exc:
            raise InputError(
                "stan_file", f"CmdStan could not compile the program:\n{exc}"
            ) from None
    finally:
        os.close(fd)
    _CMDSTAN_MODELS[str(exe)] = model
    return model


# --- messages without data values -----------------------------------------------


def _withheld(call: Callable[[], _T]) -> _T:
    """Run a backend call; turn Stan's failures into an ``InputError`` without values.

    The error is raised outside the ``except`` block, so neither ``__cause__`` nor
    ``__context__`` refers to the original exception and its text.
    """
    try:
        return call()
    except _StanFailure as exc:
        error = _withheld_error(exc.text, exc.stage)
    raise error from None


_CONSTRAINT = re.compile(r"(?:^|[\s:])([A-Za-z]\w*)((?:\[[\d,\s]+\])*) is .*?, but must be")
_VARIABLE = re.compile(r"variable name=([A-Za-z]\w*)")


def _withheld_error(text: str, stage: str) -> InputError:
    """An ``InputError`` naming the variable (and index) Stan complained about, no values."""
    declared = re.search(r"model_\w+_namespace::model_\w+: (.*)", text)
    if declared:
        match = _CONSTRAINT.search(" " + declared.group(1))
        if match:
            var = match.group(1)
            return InputError(
                var,
                f"Stan rejected the data: {var}{match.group(2)} violates its declared "
                "constraint (value withheld)",
            )
    variable = _VARIABLE.search(text)
    if variable and "mismatch in dimension" in text:
        var = variable.group(1)
        return InputError(var, f"Stan rejected the data: {var} has the wrong dimensions")
    if variable and "does not exist" in text:
        var = variable.group(1)
        return InputError(var, f"Stan rejected the data: {var} is missing")
    if "Initialization failed" in text or "Rejecting initial value" in text:
        return InputError(
            "data",
            "Stan failed during sampling: initialization failed (Stan's message withheld: "
            "it can contain data values)",
        )
    what = "rejected the data" if stage == "data" else "failed during sampling"
    return InputError("data", f"Stan {what} (Stan's message withheld: it can contain data values)")


# --- helpers --------------------------------------------------------------------


def _shape_key(data: Mapping[str, Any]) -> str:
    """What fixes a program's output dimensions: integer data in full, real data by shape.

    Stan sizes are integers, so two data sets with the same key give the same parameter
    names and dims (for example two fits that differ only in the weights ``alpha`` or the
    bound ``M``).
    """
    h = hashlib.sha256()
    for key in sorted(data):
        arr = np.asarray(data[key])
        h.update(key.encode())
        h.update(str(arr.shape).encode())
        if arr.dtype.kind in "biu":
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    return h.hexdigest()


def _parameters_block_names(code: str, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Names declared in the ``parameters`` block (used to start ``fixed_param``)."""
    match = re.search(r"\bparameters\s*\{(.*?)\}", _strip_comments(code), re.DOTALL)
    if not match:
        return ()
    declared = set()
    for stmt in match.group(1).split(";"):
        stmt = re.sub(r"<[^<>]*>", " ", stmt)  # constraints such as <lower=0, upper=1>
        while re.search(r"\[[^\[\]]*\]", stmt):
            stmt = re.sub(r"\[[^\[\]]*\]", " ", stmt)  # sizes such as [n] or [K, K]
        words = stmt.split("=")[0].split()
        if words:
            declared.add(words[-1])
    return tuple(n for n in names if n in declared)


def _strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.DOTALL)
    code = re.sub(r"//[^\n]*", "", code)
    # drop the 'transformed parameters' block header so the regex finds 'parameters'
    return re.sub(r"\btransformed\s+parameters\b", "transformed_parameters", code)


def _nonempty(arr: np.ndarray | None) -> np.ndarray | None:
    if arr is None or arr.size == 0:
        return None
    return arr


def _jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, np.integer):
            out[k] = int(v)
        elif isinstance(v, np.floating):
            out[k] = float(v)
        else:
            out[k] = v
    return out


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
def _logger_disabled(name: str) -> Iterator[None]:
    """Switch a library's logger off (httpstan logs Stan's error text, data values included)."""
    logger = logging.getLogger(name)
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


@contextlib.contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """Keep compiler output and sampler progress off stdout (and off stderr if quiet).

    Works at the file-descriptor level because the C++ compiler bypasses
    ``sys.stdout``; inside Jupyter this keeps cell outputs clean.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    with contextlib.ExitStack() as stack:
        devnull = stack.enter_context(open(os.devnull, "w"))
        try:
            os.dup2(devnull.fileno() if quiet else saved_err, 1)
            if quiet:
                os.dup2(devnull.fileno(), 2)
                stack.enter_context(contextlib.redirect_stderr(devnull))
            stack.enter_context(contextlib.redirect_stdout(devnull if quiet else sys.stderr))
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
