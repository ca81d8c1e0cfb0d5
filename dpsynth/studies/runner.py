"""Monte Carlo over replicates: seeds, worker processes or Dask, and an on-disk cache.

The papers' simulation studies repeat "draw a database, fit, synthesize, measure" R times
(censoring paper section 4: R = 100 Beta(0.5, 3) databases; vector-weighted paper appendix 6:
R = 100 Poisson / NB-mixture databases). ``run_replicates`` runs
``func(params, replicate, seed)`` for replicate = 0..R-1 and returns the results in
replicate order.

* Seeds: replicate r gets ``replicate_seed(seed, r)``, an integer in [0, 2**32) drawn from
  the r-th child of ``np.random.SeedSequence(seed)`` (``.spawn``), so replicate r can be rerun
  alone and results do not depend on scheduling (serial = parallel = Dask). The range suits
  Stan's ``seed`` argument too.
* Processes: a ``concurrent.futures.ProcessPoolExecutor`` with the "spawn" start method.
  Its workers are not daemonic, so ``func`` may start its own processes (PyStan / httpstan
  does); "spawn" also avoids forking a parent that already runs threads (Dask, tqdm, Stan
  servers). ``func`` must therefore be a module-level function of an importable module.
* Dask: with ``client``, the same calls go through ``client.map`` / ``as_completed``. Dask's
  nanny-managed worker processes are daemonic by default and then cannot start children, so
  for PyStan on a process-based cluster set ``distributed.worker.daemon: False`` (Dask config)
  before the workers start; thread-based clusters (``processes=False``) need nothing.
* Cache: one pickle per replicate under ``cache_dir``, keyed by a SHA-256 of the function's
  qualified name, ``params`` as canonical JSON, ``seed`` and the replicate index, so a rerun
  computes only the missing replicates. Results are written by the parent as they arrive.
  The cache is not invalidated when ``func``'s code changes: bump a ``params`` entry (e.g. a
  version) or delete the directory.
* Progress: when the environment variable ``DPSYNTH_PROGRESS_LOG`` names a file, each study
  appends "replicates done / total, time left" lines to it (at most one every
  ``PROGRESS_INTERVAL`` seconds, and when it finishes). ``make book`` sets it for every notebook
  and prints the file as it grows, so the terminal shows a Monte Carlo study's progress while
  papermill's kernel runs it (the kernel's own stderr goes into the notebook, not to the
  terminal); the tqdm bar in the notebook is then left out.
"""

from __future__ import annotations

import ast
import hashlib
import json
import multiprocessing
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Final

import numpy as np
from tqdm import tqdm

from dpsynth.errors import InputError
from dpsynth.io import jsonable

__all__ = [
    "CACHE_ENV_VAR",
    "DEFAULT_CACHE",
    "PROGRESS_ENV_VAR",
    "ProgressLog",
    "START_METHOD",
    "cache_key",
    "default_cache_dir",
    "replicate_seed",
    "run_replicate",
    "run_replicates",
]

CACHE_ENV_VAR: Final = "DPSYNTH_CACHE_DIR"
"""Environment variable naming the dpsynth cache root (default ``./.dpsynth-cache``)."""

START_METHOD: Final = "spawn"
"""multiprocessing start method of the worker pool (see module docstring)."""

PROGRESS_ENV_VAR: Final = "DPSYNTH_PROGRESS_LOG"
"""Environment variable naming a file to which studies append progress lines."""

PROGRESS_LABEL_ENV_VAR: Final = "DPSYNTH_PROGRESS_LABEL"
"""Optional prefix of those lines (``make book`` sets the notebook's name)."""

PROGRESS_INTERVAL: Final = 20.0
"""Seconds between two progress lines of one study (the first and last are always written)."""


def _duration(seconds: float) -> str:
    """``seconds`` as "42 s", "3 min 5 s" or "1 h 02 min"."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLog:
    """Progress lines "name: done/total replicates, elapsed, about T left" for a terminal.

    Writes to the file named by :data:`PROGRESS_ENV_VAR` (nothing when it is unset). The time
    left is extrapolated from the replicates computed so far in this call (cached ones cost
    nothing and are counted as done from the start).
    """

    def __init__(self, name: str, total: int, cached: int, *, clock=time.monotonic) -> None:
        self.path = os.environ.get(PROGRESS_ENV_VAR) or None
        label = os.environ.get(PROGRESS_LABEL_ENV_VAR)
        self.name = f"{label}: {name}" if label else name
        self.total, self.cached, self.done = total, cached, cached
        self.clock = clock
        self.started = self.last = clock()
        if cached:
            self._write(f"{cached} of {total} replicates from the cache, {total - cached} to run")
        else:
            self._write(f"{total} replicates to run")

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def line(self) -> str:
        """The current progress line (without the name)."""
        elapsed = self.clock() - self.started
        text = f"{self.done}/{self.total} replicates done, {_duration(elapsed)} elapsed"
        computed = self.done - self.cached
        if self.done >= self.total:
            return text
        if computed > 0:
            left = elapsed / computed * (self.total - self.done)
            text += f", about {_duration(left)} left"
        return text

    def update(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        if self.done >= self.total or now - self.last >= PROGRESS_INTERVAL:
            self.last = now
            self._write(self.line())

    def _write(self, text: str) -> None:
        if self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(f"[progress] {self.name}: {text}\n")
        except OSError:
            self.path = None  # the terminal is a courtesy: never fail a study over it


class _DefaultCache:
    """Sentinel type: "use ``default_cache_dir()``"."""

    def __repr__(self) -> str:
        return "DEFAULT_CACHE"


DEFAULT_CACHE: Final = _DefaultCache()
"""Default of ``cache_dir``: resolve ``default_cache_dir()`` at call time."""

ReplicateFunc = Callable[[dict, int, int], Any]
CacheDir = str | Path | None | _DefaultCache


def replicate_seed(seed: int, replicate: int) -> int:
    """Integer seed in [0, 2**32) of replicate ``replicate`` under master ``seed``.

    Equals ``np.random.SeedSequence(seed).spawn(replicate + 1)[replicate]`` reduced to one
    uint32 word via ``generate_state(1)``; computed directly from the spawn key.
    """
    seed = _require_int("seed", seed)
    replicate = _require_int("replicate", replicate)
    child = np.random.SeedSequence(seed, spawn_key=(replicate,))
    return int(child.generate_state(1, dtype=np.uint32)[0])


def default_cache_dir() -> Path:
    """``$DPSYNTH_CACHE_DIR/runner`` if that variable is set, else ``./.dpsynth-cache/runner``."""
    root = os.environ.get(CACHE_ENV_VAR)
    return (Path(root) if root else Path.cwd() / ".dpsynth-cache") / "runner"


def _require_int(param: str, value: int) -> int:
    """A non-negative Python int, else InputError(param)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise InputError(param, f"must be a non-negative integer (got {value!r})")
    return int(value)


def _qualified_name(func: ReplicateFunc) -> str:
    """``module.qualname`` of a module-level function, else InputError("func")."""
    if not callable(func):
        raise InputError("func", f"must be callable (got {func!r})")
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise InputError(
            "func",
            f"must be a module-level function so worker processes can import it ({func!r})",
        )
    return f"{module}.{qualname}"


def _canonical_params(params: Mapping[str, Any]) -> str:
    """``params`` as canonical JSON (sorted keys, no whitespace), else InputError("params")."""
    if not isinstance(params, Mapping):
        raise InputError("params", f"must be a dict (got {type(params).__name__})")
    try:
        text = json.dumps(
            jsonable(params, finite=False),
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=True,
        )
    except (TypeError, ValueError) as exc:
        raise InputError("params", f"must be JSON-serializable for the cache key: {exc}") from None
    return text


def imported_modules(module: str) -> list[Path]:
    """Files of ``module`` and every ``dpsynth`` module it imports, transitively.

    Read from the source with :mod:`ast` (imports inside functions count too), so the
    set is exactly the code a study can run: no hand-kept list of what to leave out.
    """
    package = Path(__file__).resolve().parents[1]
    seen: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        path = _module_path(package, name)
        if name in seen or path is None:
            continue
        seen[name] = path
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                pending += [a.name for a in node.names if a.name.startswith("dpsynth")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpsynth"):
                pending.append(node.module)
                pending += [f"{node.module}.{a.name}" for a in node.names]
    return sorted(set(seen.values()))


def _module_path(package: Path, name: str) -> Path | None:
    parts = name.split(".")[1:]
    base = package.joinpath(*parts) if parts else package
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def code_fingerprint(func: ReplicateFunc | None = None) -> str:
    """SHA-256 of the code a replicate function runs: its dpsynth imports and dpsynth/stan/.

    Part of every cache key, so a change to a mechanism, a model or a study function
    invalidates cached replicates instead of silently reusing stale ones; a change to a
    module the study does not import (plots, the CLI) does not.
    """
    module = getattr(func, "__module__", None) or "dpsynth"
    if not module.startswith("dpsynth"):
        module = "dpsynth"
    return module_fingerprint(module)


def module_fingerprint(*modules: str) -> str:
    """SHA-256 of ``modules``, every dpsynth module they import (:func:`imported_modules`)
    and the Stan programs of dpsynth/stan/: what :func:`code_fingerprint` hashes for one
    module, and what committed results record (:mod:`dpsynth.studies.results`)."""
    stan = Path(__file__).resolve().parents[1] / "stan"  # dpsynth/stan/
    found = sorted({path for module in modules for path in imported_modules(module)})
    files = found + sorted(stan.glob("*.stan"))
    digest = hashlib.sha256()
    root = stan.parent.parent
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(func: ReplicateFunc, params: Mapping[str, Any], seed: int, replicate: int) -> str:
    """SHA-256 of (qualified name of func, canonical params, seed, replicate, code fingerprint)."""
    payload = json.dumps(
        {
            "code": code_fingerprint(func),
            "func": _qualified_name(func),
            "params": _canonical_params(params),
            "seed": _require_int("seed", seed),
            "replicate": _require_int("replicate", replicate),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _resolve_cache_dir(cache_dir: CacheDir) -> Path | None:
    """Resolve the ``cache_dir`` argument: sentinel -> default, None -> disabled."""
    if isinstance(cache_dir, _DefaultCache):
        return default_cache_dir()
    if cache_dir is None:
        return None
    if not isinstance(cache_dir, str | Path):
        raise InputError("cache_dir", f"must be a path or None (got {cache_dir!r})")
    return Path(cache_dir)


def _cache_path(root: Path, func: ReplicateFunc, key: str) -> Path:
    """One pickle per replicate: ``root/<func name>/<key>.pkl``."""
    return root / _qualified_name(func) / f"{key}.pkl"


def _read_cache(path: Path) -> tuple[bool, Any]:
    """(True, result) if a readable pickle is at ``path``, else (False, None)."""
    try:
        with path.open("rb") as fh:
            return True, pickle.load(fh)
    except FileNotFoundError:
        return False, None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError):
        return False, None  # corrupt or stale entry: recompute and overwrite


def _write_cache(path: Path, result: Any) -> None:
    """Atomically write ``result`` as a pickle at ``path`` (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pkl")
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _call(func: ReplicateFunc, params: dict, replicate: int, seed: int) -> Any:
    """Run one replicate (top-level so process pools and Dask can pickle it)."""
    return func(params, replicate, seed)


def _run_serial(
    func: ReplicateFunc, params: dict, todo: dict[int, int]
) -> Iterator[tuple[int, Any]]:
    """Yield (replicate, result) in order, in this process."""
    for r, s in todo.items():
        yield r, _call(func, params, r, s)


WORKER_ENV_VAR = "DPSYNTH_RUNNER_WORKER"


def _mark_worker() -> None:
    """Initializer of pool workers: mark the process and register :func:`_stop_httpstan_pool`.

    A worker that ran PyStan owns httpstan's module-level "fork" process pool. Child
    processes of ``multiprocessing`` skip ``atexit``, so that pool is never shut down and the
    worker's exit waits for its idle children for ever (the runner hung after the last
    replicate). A ``multiprocessing`` finalizer, which does run, stops them first.
    """
    from multiprocessing.util import Finalize

    os.environ[WORKER_ENV_VAR] = "1"
    Finalize(None, _stop_httpstan_pool, args=(os.getpid(),), exitpriority=10)


def _stop_httpstan_pool(worker_pid: int) -> None:
    """Kill httpstan's idle sampler processes at worker exit (all results are sent by then).

    Its forked children inherit this finalizer; they skip it (``worker_pid`` check).
    """
    if os.getpid() != worker_pid:
        return
    stub = sys.modules.get("httpstan.services_stub")
    if stub is None:
        return
    for proc in list((getattr(stub.executor, "_processes", None) or {}).values()):
        proc.kill()


def _run_processes(
    func: ReplicateFunc, params: dict, todo: dict[int, int], n_jobs: int
) -> Iterator[tuple[int, Any]]:
    """Yield (replicate, result) as they finish in a spawn-context process pool."""
    ctx = multiprocessing.get_context(START_METHOD)
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx, initializer=_mark_worker) as pool:
        futures = {pool.submit(_call, func, params, r, s): r for r, s in todo.items()}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=futures.__getitem__):
                    yield futures[fut], fut.result()
        finally:
            for fut in pending:
                fut.cancel()


def _run_dask(
    func: ReplicateFunc, params: dict, todo: dict[int, int], client: Any
) -> Iterator[tuple[int, Any]]:
    """Yield (replicate, result) as they finish on a Dask cluster (Client or address)."""
    from distributed import Client, as_completed

    own = not isinstance(client, Client)
    if own and not isinstance(client, str):
        raise InputError("client", f"must be a distributed.Client or an address (got {client!r})")
    dask_client = Client(client) if own else client
    try:
        reps, seeds = list(todo), list(todo.values())
        futures = dask_client.map(
            _call, [func] * len(reps), [params] * len(reps), reps, seeds, pure=False
        )
        index = {f.key: r for f, r in zip(futures, reps)}
        try:
            for fut in as_completed(futures):
                yield index[fut.key], fut.result()
        finally:
            dask_client.cancel([f for f in futures if not f.done()])
    finally:
        if own:
            dask_client.close()


def run_replicates(
    func: ReplicateFunc,
    params: dict,
    n_replicates: int,
    *,
    seed: int,
    cache_dir: CacheDir = DEFAULT_CACHE,
    n_jobs: int | None = None,
    client: Any = None,
    progress: bool = True,
) -> list:
    """Run ``func(params, r, replicate_seed(seed, r))`` for r = 0..n_replicates-1.

    ``func`` is a module-level function returning a picklable result; ``params`` must be
    JSON-serializable (it is part of the cache key). Returns the R results in replicate
    order. ``cache_dir`` (default ``default_cache_dir()``, None disables caching) holds one
    pickle per replicate; cached replicates are not recomputed. ``n_jobs`` worker processes
    (default ``os.cpu_count()``; 1 runs serially in this process); with ``client`` (a
    ``distributed.Client`` or scheduler address) replicates run on Dask instead. A tqdm bar on
    stderr counts replicates (cached ones included) unless ``progress`` is False; with
    ``DPSYNTH_PROGRESS_LOG`` set, :class:`ProgressLog` lines go to that file instead.

    Replicates may sample with PyStan in worker processes: httpstan's own sampler pool is
    stopped when a worker exits (see ``_mark_worker``). With 2 chains per fit on 2 cores,
    2 workers run faster than 1: the per-fit overhead of httpstan's round trips overlaps
    with the other worker's sampling.
    """
    name = _qualified_name(func)
    _canonical_params(params)
    n_replicates = _require_int("n_replicates", n_replicates)
    seed = _require_int("seed", seed)
    if n_jobs is None:
        n_jobs = os.cpu_count() or 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InputError("n_jobs", f"must be a positive integer or None (got {n_jobs!r})")
    root = _resolve_cache_dir(cache_dir)
    params = dict(params)

    results: list[Any] = [None] * n_replicates
    todo: dict[int, int] = {}
    paths: dict[int, Path] = {}
    for r in range(n_replicates):
        if root is not None:
            paths[r] = _cache_path(root, func, cache_key(func, params, seed, r))
            hit, value = _read_cache(paths[r])
            if hit:
                results[r] = value
                continue
        todo[r] = replicate_seed(seed, r)

    if todo:
        if client is not None:
            stream = _run_dask(func, params, todo, client)
        elif n_jobs == 1 or len(todo) == 1:
            stream = _run_serial(func, params, todo)
        else:
            stream = _run_processes(func, params, todo, min(n_jobs, len(todo)))
        log = ProgressLog(name.rsplit(".", 1)[-1], n_replicates, n_replicates - len(todo))
        bar = tqdm(
            total=n_replicates,
            initial=n_replicates - len(todo),
            desc=name.rsplit(".", 1)[-1],
            unit="rep",
            file=sys.stderr,
            disable=not progress or log.enabled,
            dynamic_ncols=True,
        )
        with bar:
            for r, value in stream:
                results[r] = value
                if root is not None:
                    _write_cache(paths[r], value)
                bar.update(1)
                log.update(1)
    return results


def run_replicate(
    func: ReplicateFunc,
    params: dict,
    replicate: int,
    *,
    seed: int,
    cache_dir: CacheDir = DEFAULT_CACHE,
) -> Any:
    """Run (or load from cache) replicate ``replicate`` alone, in this process.

    Same seed and cache entry as replicate ``replicate`` of ``run_replicates(..., seed=seed)``.
    """
    replicate = _require_int("replicate", replicate)
    _qualified_name(func)
    root = _resolve_cache_dir(cache_dir)
    path = _cache_path(root, func, cache_key(func, params, seed, replicate)) if root else None
    if path is not None:
        hit, value = _read_cache(path)
        if hit:
            return value
    value = _call(func, dict(params), replicate, replicate_seed(seed, replicate))
    if path is not None:
        _write_cache(path, value)
    return value
