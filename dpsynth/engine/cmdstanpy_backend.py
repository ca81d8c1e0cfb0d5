"""The cmdstanpy backend: CmdStan executables, each chain a CmdStan process.

What is written to disk, and where. Programs and executables live in
``$DPSYNTH_CACHE_DIR/cmdstan`` (``~/.cache/dpsynth/cmdstan``): ``model_<hash>.stan`` (the
hash covers the program and the CmdStan path), its executable and an empty
``model_<hash>.lock`` (the build lock). Each run gets a private temporary folder
``$TMPDIR/dpsynth-cmdstan-<pid>-*/`` (mode 0700) holding the data JSON, the inits or
``log_prob`` parameters, CmdStan's CSV output (``sig_figs=18``, full double precision),
console logs and an empty ``.owner.lock``; it is removed once the draws are read, also on
error and on interruption. If the Python process is killed (SIGKILL), a watcher process
kills the chains and removes the folder at once; a folder left anyway is removed by the
next run (its lock is free). Different inits per chain go through cmdstanpy's own
temporary folder for the run's duration.

How it runs. cmdstanpy starts one CmdStan process per chain, which reads the data JSON
and writes a CSV file; the draws are read back from the CSV. cmdstanpy's progress bars
stay off: progress is read from the chains' console files (:func:`_cmdstan_progress`).
Fixed-parameter generation is CmdStan's ``fixed_param`` sampler started at the draw;
:func:`log_density` runs the executable's ``log_prob`` method (``jacobian=0``,
18 significant digits: CmdStan's default of 6 would break exact comparisons).

The interface every backend module has: :func:`build`, :func:`sample`, :func:`generate`,
:func:`log_density` and :func:`outputs_at`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dpsynth.engine import private_dir
from dpsynth.engine.common import (
    Run,
    Sample,
    StanFailure,
    build_lock,
    chain_arrays,
    exception_lines,
    interruptible,
    parameters_block_names,
    report_messages,
    sampler_effort,
    write_atomically,
)
from dpsynth.errors import InputError
from dpsynth.io import jsonable

NAME = "cmdstanpy"
_T = TypeVar("_T")


def build(code: str, quiet: bool) -> str:  # pragma: no cover - needs a CmdStan installation
    """Compile ``code`` unless its executable is cached; return the executable's path."""
    return str(_cmdstan_model(code, quiet).exe_file)


def sample(run: Run) -> Sample:  # pragma: no cover - needs a CmdStan installation
    code, data, seed, chains, iter_warmup, iter_sampling, inits, quiet, adapt_delta = run
    sampling = {"chains": chains, "iter_warmup": iter_warmup, "iter_sampling": iter_sampling}
    sampling["adapt_delta"] = adapt_delta
    out = _cmdstan_sample(code, data, seed, inits, quiet, **sampling)
    draws = _cmdstan_draws(code, out)  # chains stacked
    names = tuple(draws)
    method = out.method_variables()
    divergences = int(np.sum(method["divergent__"]))
    effort = sampler_effort(method["n_leapfrog__"], method["stepsize__"], method["treedepth__"])
    return Sample(
        draws,
        parameters_block_names(code, names),
        chain_arrays(draws, chains),
        divergences,
        getattr(out, "dpsynth_exception_lines", {}),
        effort,
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


def generate(  # pragma: no cover - needs a CmdStan installation
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
        return _sample_in(model, data_file, output_dir, seed, inits, quiet, **sampling)


def _sample_in(  # pragma: no cover - needs a CmdStan installation
    model: Any, data_file: str, output_dir: str, seed: int, inits: Any, quiet: bool, **sampling: Any
) -> Any:
    """:func:`_cmdstan_sample`'s body, in a run folder that is already there (so several
    calls on the same data share one folder, one data file and one watcher)."""
    if isinstance(inits, list):
        inits = [jsonable(i, finite=False) for i in inits]  # arrays to lists: comparable, writable
        if all(i == inits[0] for i in inits[1:]):
            inits = inits[0] if inits else None
    if isinstance(inits, Mapping):
        import cmdstanpy

        inits_file = os.path.join(output_dir, "inits.json")
        cmdstanpy.write_stan_json(inits_file, jsonable(inits, finite=False))
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
    # and the console files: Stan's messages counted (text dropped), as the PyStan path does
    chains = [
        Path(path).read_text(errors="replace").splitlines()
        for path in out.runset.stdout_files
        if os.path.exists(path)
    ]
    out.dpsynth_exception_lines = exception_lines(line for chain in chains for line in chain)
    if not quiet and not sampling.get("fixed_param"):
        report_messages(chains)
    return out


@contextlib.contextmanager
def _cmdstan_progress(folder: str, total: int, quiet: bool) -> Iterator[None]:
    """Print ``Sampling: N%`` in tenths to stderr (unless quiet), as the PyStan path does.

    A daemon thread reads the chains' console files (``*-stdout.txt``, CmdStan's
    ``Iteration: i / n`` lines) five times a second; cmdstanpy's own progress bars stay off.
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


def log_density(  # pragma: no cover - needs a CmdStan installation
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
            cmdstanpy.write_stan_json(params_file, jsonable(p, finite=False))
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

            proc = interruptible(run, lambda: _kill_run_processes(folder))
            if proc.returncode:
                raise StanFailure(proc.stdout + proc.stderr, "data")
            with open(output) as fh:
                rows = [line for line in fh if line.strip() and not line.startswith("#")]
            values.append(float(rows[1].split(",")[0]))  # header, then lp__,gradient...
    return np.asarray(values, dtype=float)


def outputs_at(  # pragma: no cover - needs a CmdStan installation
    code: str, data: dict, params: list[dict]
) -> list[dict[str, np.ndarray]]:
    model = _cmdstan_model(code)
    out = []
    with _cmdstan_run(model, data, True) as (data_file, folder):
        for p in params:
            fit = _sample_in(
                model,
                data_file,
                folder,
                1,
                jsonable(p, finite=False),
                True,
                fixed_param=True,
                iter_sampling=1,
            )
            draws = _cmdstan_draws(code, fit)
            names = set(parameters_block_names(code, tuple(draws)))
            out.append({k: v[0] for k, v in draws.items() if k not in names})
    return out


_RUN_PREFIX = private_dir.PREFIXES[0]  # "dpsynth-cmdstan-"
_RUN_LOCK = private_dir.LOCK_NAME
_kill_run_processes = private_dir.kill_descendants_naming


@contextlib.contextmanager
def _cmdstan_run(  # pragma: no cover - needs a CmdStan installation
    model: Any, data: Mapping[str, Any], quiet: bool
) -> Iterator[tuple[str, str]]:
    """A private temporary folder (mode 0700) with the data JSON, for CmdStan's files.

    A :class:`~dpsynth.engine.private_dir.PrivateFolder`: removed when the run ends, also
    on error and on interruption; if this process dies without cleaning up (SIGKILL, out
    of memory), its watcher process kills the CmdStan processes still working in the
    folder and removes it; folders left anyway are removed by the next run in any process
    (:func:`_sweep_stale_runs`).
    """
    import cmdstanpy

    with private_dir.private_folder(_RUN_PREFIX) as folder:
        data_file = os.path.join(folder, "data.json")
        cmdstanpy.write_stan_json(data_file, jsonable(data, finite=False))
        with _cmdstanpy_logging(quiet):
            yield data_file, folder


def _sweep_stale_runs(max_unlocked_age: float = 60.0) -> int:
    """Remove the private folders of processes that died without cleaning up; return how
    many (:func:`~dpsynth.engine.private_dir.sweep_stale`, both backends' folders)."""
    return private_dir.sweep_stale(max_unlocked_age=max_unlocked_age)


def _cmdstan_interruptible(folder: str, call: Callable[[], _T]) -> _T:  # pragma: no cover
    """Run cmdstanpy in a worker thread; failures become ``StanFailure`` (text withheld).

    Interrupted, it kills the CmdStan processes of this run (those working in ``folder``).
    """
    try:
        return interruptible(call, lambda: _kill_run_processes(folder))
    except (RuntimeError, ValueError) as exc:
        failure = StanFailure(str(exc), "sampling")
    raise failure from None


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
the executable to ask for their info, a fraction of a second)."""


def stanc_errors(code: str) -> str | None:  # pragma: no cover - needs a CmdStan installation
    """stanc's error text for ``code`` (CmdStan's ``bin/stanc``, no C++ build), or None."""
    import cmdstanpy

    stanc = Path(cmdstanpy.cmdstan_path()) / "bin" / ("stanc.exe" if os.name == "nt" else "stanc")
    with tempfile.TemporaryDirectory(prefix="dpsynth-stanc-") as folder:
        source = Path(folder) / "scope.stan"
        source.write_text(code)
        done = subprocess.run(
            [str(stanc), "--o", str(Path(folder) / "scope.hpp"), str(source)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()


def _cmdstan_model(code: str, quiet: bool = True):  # pragma: no cover - needs CmdStan
    """The program's ``CmdStanModel``, compiled once into ``$DPSYNTH_CACHE_DIR/cmdstan``.

    The file names hash the program and the CmdStan installation's path, so another
    CmdStan gets its own executable. Processes compiling the same program wait on an
    exclusive lock (``model_<hash>.lock``, :func:`~dpsynth.engine.common.build_lock`) and
    reuse the executable; the program file is written atomically. A program CmdStan cannot
    compile raises ``InputError`` (program text only, no data are involved) and leaves
    nothing of itself in the cache.
    """
    import cmdstanpy

    digest = hashlib.sha256(f"{cmdstanpy.cmdstan_path()}\0{code}".encode()).hexdigest()[:16]
    folder = _models_folder()
    source = folder / f"model_{digest}.stan"
    exe = source.with_suffix(".exe" if os.name == "nt" else "")
    cached = _CMDSTAN_MODELS.get(str(exe))
    if cached is not None and exe.is_file():
        return cached
    with build_lock(folder, f"model_{digest}"):
        if not source.is_file() or source.read_text() != code:
            write_atomically(source, code)
        if not quiet and not exe.is_file():
            print("Compiling the Stan program with CmdStan (about a minute)", file=sys.stderr)
        try:
            with _cmdstanpy_logging(quiet):
                model = cmdstanpy.CmdStanModel(stan_file=str(source))
        except (RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
            for path in folder.glob(f"model_{digest}*"):
                if path.suffix != ".lock":
                    path.unlink(missing_ok=True)
            error = InputError("stan_file", f"CmdStan could not compile the program:\n{exc}")
        else:
            error = None
    if error is not None:
        raise error from None
    _CMDSTAN_MODELS[str(exe)] = model
    return model


def _models_folder() -> Path:
    """``$DPSYNTH_CACHE_DIR/cmdstan`` (``~/.cache/dpsynth/cmdstan``): programs, executables."""
    root = Path(os.environ.get("DPSYNTH_CACHE_DIR", Path.home() / ".cache" / "dpsynth"))
    folder = root / "cmdstan"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
