"""Stan engine: compile, cache and sample the programs in ``stan/`` under one interface.

Two backends run the same ``.stan`` files: cmdstanpy when a CmdStan installation
is present, PyStan 3 (httpstan ships Stan 2.35) otherwise. The choice comes from
the ``backend`` argument, else ``DPSYNTH_STAN_BACKEND=auto|cmdstanpy|pystan``.
Only this module knows which backend runs.

Compiled models are cached (PyStan: ``~/.cache/httpstan``; cmdstanpy: one
executable per program hash under ``$DPSYNTH_CACHE_DIR/cmdstan``). Every fit takes
a seed and is reproducible with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth.errors import InputError

STAN_DIR = Path(__file__).resolve().parent.parent / "stan"
"""The folder of the shipped Stan programs and the shared functions file."""

SHARED_FUNCTIONS = "dpsynth_functions.stan"
BACKENDS = ("auto", "cmdstanpy", "pystan")
_INCLUDE = re.compile(r"^\s*#include\s+[<\"]?([\w./-]+)[>\"]?\s*$", re.MULTILINE)
_NON_DIAGNOSTIC = ("log_lik", "log_lik_raw", "y_rep")


@dataclass
class StanFit:
    """Draws and diagnostics of one fit.

    ``draws[name]`` has shape ``(S, *dims)`` with ``S = chains * iter_sampling``,
    chains stacked in order. ``log_lik`` is the ``S x n`` matrix of (weighted,
    censored where asked) log-likelihood contributions when the program was asked
    for it (``want_log_lik = 1``), else ``None``.
    """

    draws: dict[str, np.ndarray]
    chains: int
    diagnostics: dict[str, float]
    backend: str
    seed: int
    log_lik: np.ndarray | None = None
    log_lik_raw: np.ndarray | None = None
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
    import logging
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
) -> StanFit:
    """Sample a program with NUTS and return draws, log-likelihood and diagnostics.

    ``data`` follows the dpsynth convention (``n, alpha, censor, M, want_log_lik,
    want_rep`` then the model's own data); see ``book/stan_convention.md``.
    ``quiet`` keeps compiler output and sampler progress off the terminal;
    otherwise they go to stderr (never stdout).
    """
    name = choose_backend(backend)
    code = program_code(stan_file)
    with _silenced(quiet):
        if name == "pystan":
            draws, param_names, chain_arrays, divergences = _sample_pystan(
                code, dict(data), seed, chains, iter_warmup, iter_sampling
            )
        else:
            draws, param_names, chain_arrays, divergences = _sample_cmdstanpy(
                code, dict(data), seed, chains, iter_warmup, iter_sampling, quiet
            )
    diagnostics = convergence_diagnostics(chain_arrays)
    diagnostics["divergences"] = int(divergences)
    return StanFit(
        draws={k: v for k, v in draws.items() if k not in ("log_lik", "log_lik_raw")},
        chains=chains,
        diagnostics=diagnostics,
        backend=name,
        seed=int(seed),
        log_lik=_nonempty(draws.get("log_lik")),
        log_lik_raw=_nonempty(draws.get("log_lik_raw")),
        param_names=param_names,
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
    sampler is Stan's ``fixed_param`` started at one retained posterior draw.
    """
    if not params:
        raise ValueError("generate() needs the values of the parameters block (got none)")
    name = choose_backend(backend)
    code = program_code(stan_file)
    gq_data = dict(data, want_rep=1, want_log_lik=0)
    with _silenced(quiet):
        if name == "pystan":
            _ensure_event_loop_ok()
            model = _pystan_model(code, gq_data, seed)
            out = model.fixed_param(num_chains=1, num_samples=1, init=[dict(params)])
            y_rep = np.asarray(out["y_rep"])[..., 0]
        else:
            model = _cmdstan_model(code)
            out = model.sample(
                data=_jsonable(gq_data),
                fixed_param=True,
                chains=1,
                iter_sampling=1,
                seed=int(seed) % (2**31),
                inits=dict(params),
                show_progress=False,
            )
            y_rep = np.asarray(out.stan_variable("y_rep"))[0]
    return y_rep


def convergence_diagnostics(chain_arrays: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Max rank-normalized R-hat and min bulk ESS (ArviZ) over scalar parameters.

    ``chain_arrays[name]`` has shape ``(chains, draws)``; constant columns (for
    example a parameter fixed by its constraint) are skipped.
    """
    import arviz as az

    rhats, esss = [], []
    for values in chain_arrays.values():
        if not np.all(np.isfinite(values)) or np.ptp(values) == 0:
            continue
        rhats.append(float(az.rhat(values)))
        esss.append(float(az.ess(values, method="bulk")))
    return {
        "rhat_max": max(rhats) if rhats else float("nan"),
        "ess_bulk_min": min(esss) if esss else float("nan"),
    }


# --- backends -----------------------------------------------------------------


def _sample_pystan(
    code: str, data: dict, seed: int, chains: int, iter_warmup: int, iter_sampling: int
) -> tuple[dict[str, np.ndarray], tuple[str, ...], dict[str, np.ndarray], int]:

    _ensure_event_loop_ok()
    model = _pystan_model(code, data, seed)
    out = model.sample(num_chains=chains, num_samples=iter_sampling, num_warmup=iter_warmup)
    draws: dict[str, np.ndarray] = {}
    chain_arrays: dict[str, np.ndarray] = {}
    n_draws = chains * iter_sampling
    for name, dims in zip(out.param_names, out.dims, strict=True):
        arr = np.asarray(out[name]).reshape(*dims, n_draws)  # (*dims, S), chains concatenated
        draws[name] = np.moveaxis(arr, -1, 0)
        if name not in _NON_DIAGNOSTIC and name.split(".")[0] not in _NON_DIAGNOSTIC:
            flat = draws[name].reshape(draws[name].shape[0], -1)
            for j in range(flat.shape[1]):
                chain_arrays[f"{name}[{j}]"] = flat[:, j].reshape(chains, iter_sampling)
    divergences = int(np.sum(out["divergent__"]))
    params = _parameters_block_names(code, out.param_names)
    return draws, params, chain_arrays, divergences


_PYSTAN_MODELS: dict[tuple[str, str], Any] = {}
_PYSTAN_MODELS_MAX = 16


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


def _pystan_model(code: str, data: Mapping[str, Any], seed: int):
    """``stan.build`` with a cache of its per-build round trips (measured 0.15 s each).

    PyStan 3 sets data and seed at build time and asks httpstan for the output names and
    dims every time; a model of the same program and :func:`_shape_key` has the same
    names and dims, so later calls reuse them with the new data and seed.
    """
    import dataclasses

    import stan

    jdata = _jsonable(data)
    seed = int(seed) % (2**31)  # httpstan's services take a signed 32-bit seed (as CmdStan)
    key = (code, _shape_key(data))
    base = _PYSTAN_MODELS.get(key)
    if base is None:
        base = stan.build(code, data=jdata, random_seed=seed)
        if len(_PYSTAN_MODELS) >= _PYSTAN_MODELS_MAX:
            _PYSTAN_MODELS.pop(next(iter(_PYSTAN_MODELS)))
        _PYSTAN_MODELS[key] = base
        return base
    return dataclasses.replace(base, data=jdata, random_seed=seed)


def _sample_cmdstanpy(
    code: str,
    data: dict,
    seed: int,
    chains: int,
    iter_warmup: int,
    iter_sampling: int,
    quiet: bool,
) -> tuple[dict[str, np.ndarray], tuple[str, ...], dict[str, np.ndarray], int]:
    model = _cmdstan_model(code)
    out = model.sample(
        data=_jsonable(data),
        chains=chains,
        iter_warmup=iter_warmup,
        iter_sampling=iter_sampling,
        seed=int(seed) % (2**31),
        show_progress=not quiet,
    )
    names = tuple(out.stan_variables().keys())
    draws = {k: np.asarray(out.stan_variable(k)) for k in names}
    chain_arrays: dict[str, np.ndarray] = {}
    for name in names:
        if name in _NON_DIAGNOSTIC:
            continue
        flat = draws[name].reshape(draws[name].shape[0], -1)
        for j in range(flat.shape[1]):
            chain_arrays[f"{name}[{j}]"] = flat[:, j].reshape(chains, iter_sampling)
    divergences = int(np.sum(out.method_variables()["divergent__"]))
    return draws, _parameters_block_names(code, names), chain_arrays, divergences


def _cmdstan_model(code: str):  # pragma: no cover - needs a CmdStan installation
    import cmdstanpy

    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    root = Path(os.environ.get("DPSYNTH_CACHE_DIR", Path.home() / ".cache" / "dpsynth"))
    folder = root / "cmdstan"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"model_{digest}.stan"
    if not source.exists():
        source.write_text(code)
    return cmdstanpy.CmdStanModel(stan_file=str(source))


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
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    import nest_asyncio

    nest_asyncio.apply()


@contextlib.contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """Keep compiler output and sampler progress off stdout (and off stderr if quiet).

    Works at the file-descriptor level because httpstan's compiler and PyStan's
    progress bypass ``sys.stdout``; inside Jupyter this keeps cell outputs clean.
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
