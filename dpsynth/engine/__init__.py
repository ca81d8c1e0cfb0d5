"""Stan engine: compile, cache and sample the programs in ``dpsynth/stan/`` under one interface.

Two backends run the same ``.stan`` files, side by side in this package:

- :mod:`dpsynth.engine.cmdstanpy_backend`, used when a CmdStan installation is present:
  every chain a CmdStan process, data in and draws out through files;
- :mod:`dpsynth.engine.pystan_backend`, PyStan 3 otherwise (httpstan ships Stan 2.35):
  chains in forked workers of httpstan, draws back as JSON lines.

Each backend module has the same five functions: ``build`` (compile once, cached, under a
file lock), ``sample`` (NUTS), ``generate`` (Stan's fixed-parameter sampler at one draw),
``log_density`` and ``outputs_at``; what they share (run settings, locks, interruption,
errors without data values) is in :mod:`dpsynth.engine.common`. This module picks the
backend (the ``backend`` argument, else ``DPSYNTH_STAN_BACKEND=auto|cmdstanpy|pystan``) and
returns the same :class:`StanFit` from either (``StanFit.backend`` says which ran). With
the same program, data, seed and settings both give the same draws: the same Stan, seeded
per chain the same way. Every fit takes a seed and is reproducible with it.

Messages never contain data values: Stan's error text (for example ``y[3] is -123.456,
but must be >= 0``) is replaced by an :class:`~dpsynth.errors.InputError` naming the
variable and index only, the backends' own logs are switched off or filtered during a
run, and Stan's informational messages during sampling are counted, not printed.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from dpsynth.engine import cmdstanpy_backend, diagnostics, pystan_backend
from dpsynth.engine.common import (
    RECORD_OUTPUTS,
    InitializationFailed,
    Run,
    message_summary,
    silenced,
    withheld,
)
from dpsynth.engine.pystan_backend import bind_to_parent, purge_fit_cache
from dpsynth.errors import InputError
from dpsynth.sampler import BACKENDS

__all__ = [
    "BACKENDS",
    "InitializationFailed",
    "RECORD_OUTPUTS",
    "SHARED_FUNCTIONS",
    "STAN_DIR",
    "StanFit",
    "bind_to_parent",
    "choose_backend",
    "cmdstan_available",
    "compile_program",
    "convergence_diagnostics",
    "fit",
    "generate",
    "log_density",
    "message_summary",
    "outputs_at",
    "program_code",
    "purge_fit_cache",
    "stanc_errors",
]

STAN_DIR = Path(__file__).resolve().parents[1] / "stan"
"""The folder of the shipped Stan programs and the shared functions file: ``dpsynth/stan/``,
inside the package and installed with it as package data, so an installed copy finds them
wherever it runs (a ``pathlib.Path``, absolute on the machine that imports dpsynth)."""

SHARED_FUNCTIONS = "dpsynth_functions.stan"
_INCLUDE = re.compile(r"^\s*#include\s+[<\"]?([\w./-]+)[>\"]?\s*$", re.MULTILINE)


def _backend(name: str) -> ModuleType:
    """The backend module of a resolved backend name (see :func:`choose_backend`)."""
    return pystan_backend if name == "pystan" else cmdstanpy_backend


@dataclass
class StanFit:
    """Draws and diagnostics of one fit.

    ``draws[name]`` has shape ``(S, *dims)`` with ``S = chains * iter_sampling``, chain 1's
    draws first, then chain 2's, and so on. The per-record generated quantities are kept
    out of ``draws``, each an ``S x n`` matrix when the program was asked for them
    (``want_contrib = 1``), else ``None``: ``contrib`` (alpha_i * ll_i, clamped to
    [-M, M] when censoring), ``contrib_uncensored`` (alpha_i * ll_i) and
    ``record_log_lik`` (the unweighted ll_i). ``exception_lines``: Stan exceptions during
    the run (rejected proposals, rejected initial values), counted by the program line of
    the outermost statement they came through (confidential counts; no text is kept).
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
    exception_lines: dict[int, int] = field(default_factory=dict)

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

    Includes are searched beside the program, then in the shipped ``dpsynth/stan/`` folder,
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
    (``stanc`` has a one-second limit) is retried; concurrent processes wait on a file lock and
    reuse the result. cmdstanpy: the executable path. :func:`fit` calls this first.
    """
    name = choose_backend(backend)
    code = program_code(stan_file)
    with silenced(quiet):
        return _backend(name).build(code, quiet)


def stanc_errors(code: str) -> str | None:
    """Type-check a program with stanc alone (no C++ build, well under a second).

    Returns stanc's error text, or None if the program compiles. The text quotes the
    program, never data (there are none). Uses the stanc of the active backend.
    """
    return _backend(choose_backend()).stanc_errors(code)


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
    sampler progress off the terminal; otherwise dpsynth's progress lines and its count of
    Stan's messages (marked confidential) go to stderr. Whatever ``quiet`` says, Stan's own
    output (``print`` in a program, compiler and sampler text on the file descriptors) is
    withheld: a fit holds confidential data. Stan's rejections of the data and failures
    while sampling raise ``InputError``
    without any data value; Ctrl-C (or a ``SystemExit`` from a SIGTERM handler) stops
    the sampler processes, deletes the run's files and is re-raised.
    """
    name = choose_backend(backend)
    code = program_code(stan_file)
    if inits is not None and len(inits) != chains:
        raise InputError("inits", f"needs one dict per chain ({chains}), got {len(inits)}")
    init_list = [dict(i) for i in inits] if inits is not None else None
    settings = Run(
        code, dict(data), seed, chains, iter_warmup, iter_sampling, init_list, quiet, adapt_delta
    )
    with silenced(quiet, confidential=True):
        run = withheld(lambda: _backend(name).sample(settings))
    return StanFit(
        draws={k: v for k, v in run.draws.items() if k not in RECORD_OUTPUTS},
        chains=chains,
        diagnostics={
            **convergence_diagnostics(run.chain_arrays, divergences=run.divergences),
            **run.effort,
        },
        backend=name,
        seed=int(seed),
        contrib=_nonempty(run.draws.get("contrib")),
        contrib_uncensored=_nonempty(run.draws.get("contrib_uncensored")),
        record_log_lik=_nonempty(run.draws.get("record_log_lik")),
        param_names=run.param_names,
        exception_lines=dict(run.exception_lines),
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
    module = _backend(name)
    with silenced(quiet):
        return withheld(lambda: module.generate(code, gq_data, dict(params), seed, quiet))


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
    return _at_params("log_density", stan_file, data, params, backend)


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
    program's outputs depend on those data (what :mod:`dpsynth.models.program_checks` tests).
    Not for synthesis (use :func:`generate`, which takes a fresh seed).
    """
    return _at_params("outputs_at", stan_file, data, params, backend)


def _at_params(
    function: str,
    stan_file: str | Path,
    data: Mapping[str, Any],
    params: Sequence[Mapping[str, Any]],
    backend: str | None,
) -> Any:
    """Evaluate a program at fixed parameter values with the chosen backend's ``function``,
    silently, with Stan's errors withheld (:func:`log_density`, :func:`outputs_at`)."""
    call = getattr(_backend(choose_backend(backend)), function)
    code = program_code(stan_file)
    with silenced(True):
        return withheld(lambda: call(code, dict(data), list(params)))


def convergence_diagnostics(
    chain_arrays: Mapping[str, np.ndarray], *, divergences: int | None = None
) -> dict[str, float]:
    """Max rank-normalized R-hat and min bulk ESS over scalar quantities, and the R-hat rule's
    figures (``rhat_excess``, ``rhat_limit``: :func:`dpsynth.engine.diagnostics.rhat_excess`).

    ``chain_arrays[name]`` has shape ``(chains, draws)``; constant or non-finite
    columns (for example a parameter fixed by its constraint) are skipped. Computed by
    :mod:`dpsynth.engine.diagnostics` (the same numbers as ArviZ 0.22). ``divergences``, when
    given, is added under that key.
    """
    rhats, esss, within, chains = [], [], [], 1
    for values in chain_arrays.values():
        if not np.all(np.isfinite(values)) or np.ptp(values) == 0:
            continue
        rhats.append(diagnostics.rhat(values))
        esss.append(diagnostics.ess_bulk(values))
        within.append(diagnostics.ess_within(values))
        chains = np.shape(values)[0]
    out: dict[str, float] = {
        "rhat_max": max(rhats) if rhats else float("nan"),
        "ess_bulk_min": min(esss) if esss else float("nan"),
    }
    if rhats and all(np.isfinite(rhats)) and all(np.isfinite(within)):
        out["rhat_excess"], out["rhat_limit"] = diagnostics.rhat_excess(rhats, within, chains)
    if divergences is not None:
        out["divergences"] = int(divergences)
    return out


def _nonempty(arr: np.ndarray | None) -> np.ndarray | None:
    if arr is None or arr.size == 0:
        return None
    return arr
