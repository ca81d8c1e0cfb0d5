"""What both backends share: run settings and results, locks, interruption, withheld errors.

Nothing here imports PyStan, httpstan or cmdstanpy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import numpy as np

from dpsynth.errors import InputError

_T = TypeVar("_T")
RECORD_OUTPUTS = ("contrib", "contrib_uncensored", "record_log_lik")
"""Per-record ``S x n`` generated quantities (fields of :class:`~dpsynth.engine.StanFit`)."""
NON_DIAGNOSTIC = frozenset((*RECORD_OUTPUTS, "y_rep", "log_lik", "log_lik_raw"))
"""Outputs left out of the convergence diagnostics (per-record or predictive)."""


class Sample(NamedTuple):
    """What a backend returns: draws ``(S, *dims)``, parameter names, per-chain arrays."""

    draws: dict[str, np.ndarray]
    param_names: tuple[str, ...]
    chain_arrays: dict[str, np.ndarray]
    divergences: int
    exception_lines: Mapping[int, int] = MappingProxyType({})
    effort: Mapping[str, float] = MappingProxyType({})


def sampler_effort(leapfrog: Any, stepsize: Any, treedepth: Any) -> dict[str, float]:
    """What the sampler spent per retained iteration (from its own outputs ``n_leapfrog__``,
    ``stepsize__``, ``treedepth__``): the mean leapfrog steps, the mean adapted step size and
    the largest tree depth. Confidential diagnostics (they depend on the data)."""
    return {
        "leapfrog_mean": float(np.mean(leapfrog)),
        "stepsize": float(np.mean(stepsize)),
        "treedepth_max": int(np.max(treedepth)),
    }


class InitializationFailed(InputError):
    """Stan refused every initial value (a non-finite log density or gradient there)."""


class StanFailure(Exception):
    """Stan's or httpstan's raw error text; never shown (see :func:`withheld_error`)."""

    def __init__(self, text: str, stage: str) -> None:
        super().__init__(stage)
        self.text, self.stage = text, stage


class Run(NamedTuple):
    """One sampling run's settings, as :func:`~dpsynth.engine.fit` passes them to a backend."""

    code: str
    data: dict
    seed: int
    chains: int
    iter_warmup: int
    iter_sampling: int
    inits: list[dict] | None
    quiet: bool
    adapt_delta: float = 0.8


def chain_arrays(draws: Mapping[str, np.ndarray], chains: int) -> dict[str, np.ndarray]:
    """One ``(chains, draws)`` array per scalar component, per-record outputs left out."""
    out: dict[str, np.ndarray] = {}
    for name, values in draws.items():
        if name in NON_DIAGNOSTIC:
            continue
        flat = values.reshape(values.shape[0], -1)
        for j in range(flat.shape[1]):
            out[f"{name}[{j}]"] = flat[:, j].reshape(chains, -1)
    return out


MESSAGE_KINDS = (
    ("rejected proposals", "Informational Message", "usual during warm-up; harmless if rare"),
    ("warnings", "warn:", "often a parameter at the edge of its support"),
    ("errors", "error:", "the model failed to evaluate at some parameter values"),
)
"""How Stan's withheld messages are summarised: (kind, how the line starts or reads, hint)."""


def message_summary(texts: Sequence[str]) -> dict[str, int]:
    """Stan's messages counted by kind (:data:`MESSAGE_KINDS`); their text is dropped."""
    counts = {kind: 0 for kind, _, _ in MESSAGE_KINDS}
    for text in texts:
        for kind, marker, _ in MESSAGE_KINDS:
            if marker in text if kind == "rejected proposals" else text.startswith(marker):
                counts[kind] += 1
                break
    return counts


_LOCATION = re.compile(r"line (\d+), column")


def exception_lines(texts: Iterable[str]) -> dict[int, int]:
    """Stan exceptions counted by the outermost program line of their location trace.

    Stan appends ``(in '<file>', line L, column ...)`` for every frame an exception
    crosses, innermost first; the last is the statement of the model block (or of a
    block's declaration) that called into the failing code. Only line numbers are kept:
    the text, which can hold data values, is dropped.
    """
    counts: dict[int, int] = {}
    for text in texts:
        if "Exception" in text:
            lines = _LOCATION.findall(text)
            if lines:
                counts[int(lines[-1])] = counts.get(int(lines[-1]), 0) + 1
    return counts


def message_phase_counts(texts: Sequence[str]) -> dict[str, int]:
    """One chain's withheld messages (:data:`MESSAGE_KINDS`) counted by phase, in order.

    Stan's progress lines tell the phases apart: "Iteration: ... (Sampling)" starts the
    sampling phase (Stan prints it at the first sampling iteration); everything before is
    initialisation or warm-up. Progress and timing lines are not counted.
    """
    counts = {"before sampling": 0, "sampling": 0}
    phase = "before sampling"
    for text in texts:
        if "Iteration:" in text:
            phase = "sampling" if "(Sampling)" in text else phase
            continue
        if any(
            marker in text if kind == "rejected proposals" else text.startswith(marker)
            for kind, marker, _ in MESSAGE_KINDS
        ):
            counts[phase] += 1
    return counts


def message_phase_line(counts: dict[str, int]) -> str | None:
    """Whether Stan's rejections matter, in words (None when there were none)."""
    before, during = counts.get("before sampling", 0), counts.get("sampling", 0)
    if before + during == 0:
        return None
    parts = []
    if before:
        parts.append(
            f"{before} evaluation(s) rejected during initialisation and warm-up (normal "
            "while the sampler finds the posterior's bulk; they do not affect the release)"
        )
    if during:
        parts.append(
            f"{during} rejected during sampling (each keeps the previous draw, so the draws "
            "stay valid; many slow the chains down, which the convergence checks catch)"
        )
    else:
        parts.append("none during sampling")
    return "; ".join(parts)


def report_messages(chains: Sequence[Sequence[str]]) -> None:
    """Summarise Stan's rejections, warnings and errors while sampling; their text is withheld.

    ``chains``: each chain's messages (httpstan's logger values, CmdStan's console lines).
    Counted by kind and by phase (initialisation and warm-up, where rejections are normal,
    against sampling: :func:`message_phase_counts`, chain by chain). The counts come from
    the fit to the confidential data, so the line is marked confidential (it reaches the
    curator's terminal only, never a file).
    """
    texts, phases = [], {"before sampling": 0, "sampling": 0}
    for chain in chains:
        texts += chain
        for phase, c in message_phase_counts(chain).items():
            phases[phase] += c
    counts = message_summary(texts)
    if any(counts.values()):
        hints = {kind: hint for kind, _, hint in MESSAGE_KINDS}
        parts = [f"{c} {kind} ({hints[kind]})" for kind, c in counts.items() if c]
        print(
            "[dpsynth] CONFIDENTIAL (from the fit to the confidential data): Stan sent "
            + "; ".join(parts)
            + f". By phase: {message_phase_line(phases)}."
            + " Their text is withheld because it can contain data values.",
            file=sys.stderr,
        )


@contextlib.contextmanager
def build_lock(folder: Path, name: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder/<name>.lock``: one build of a program at a time.

    Both backends compile under it (the one compile path): processes building the same
    program wait for each other, then reuse the build; different programs build in
    parallel. The empty lock file stays (neither httpstan nor CmdStan looks at it).
    """
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a private ``.part`` file and a rename, so that no
    other process ever reads a half-written file."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        part.write_text(text)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def flock(fd: int, *, blocking: bool) -> bool:
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


def interruptible(call: Callable[[], _T], on_interrupt: Callable[[], None]) -> _T:
    """Run ``call`` in a worker thread while this thread waits in short joins.

    So a KeyboardInterrupt or SystemExit (from a SIGTERM handler) reaches this thread at
    once, even while ``call`` blocks (cmdstanpy waits for its CmdStan processes in a
    thread pool). Then ``on_interrupt`` runs (it should make ``call`` return, for example
    by killing child processes), the worker is given ten seconds to finish, and the exception
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


def withheld(call: Callable[[], _T]) -> _T:
    """Run a backend call; turn Stan's failures into an ``InputError`` without values.

    The error is raised outside the ``except`` block, so neither ``__cause__`` nor
    ``__context__`` refers to the original exception and its text.
    """
    try:
        return call()
    except StanFailure as exc:
        error = withheld_error(exc.text, exc.stage)
    raise error from None


_CONSTRAINT = re.compile(r"(?:^|[\s:])([A-Za-z]\w*)((?:\[[\d,\s]+\])*) is .*?, but must be")
_VARIABLE = re.compile(r"variable name=([A-Za-z]\w*)")


def withheld_error(text: str, stage: str) -> InputError:
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
        return InitializationFailed(
            "data",
            "Stan failed during sampling: initialization failed (Stan's message withheld: "
            "it can contain data values)",
        )
    what = "rejected the data" if stage == "data" else "failed during sampling"
    return InputError("data", f"Stan {what} (Stan's message withheld: it can contain data values)")


def shape_key(data: Mapping[str, Any]) -> str:
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


def parameters_block_names(code: str, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Names declared in the ``parameters`` block (used to start ``fixed_param``)."""
    match = re.search(r"\bparameters\s*\{(.*?)\}", strip_comments(code), re.DOTALL)
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


def strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.DOTALL)
    code = re.sub(r"//[^\n]*", "", code)
    # drop the 'transformed parameters' block header so the regex finds 'parameters'
    return re.sub(r"\btransformed\s+parameters\b", "transformed_parameters", code)


@contextlib.contextmanager
def silenced(quiet: bool, confidential: bool = False) -> Iterator[None]:
    """Keep compiler output and sampler progress off stdout (and off stderr if quiet).

    Works at the file-descriptor level because the C++ compiler bypasses
    ``sys.stdout``; inside Jupyter this keeps cell outputs clean. ``confidential`` (a fit
    to confidential data): file descriptors 1 and 2 go to the null device whatever
    ``quiet`` says, so nothing Stan or a sampler process writes (a program's ``print``
    included) reaches the terminal; unless ``quiet``, Python's ``sys.stderr`` still reaches
    it, for dpsynth's own progress lines and message counts.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    withhold = quiet or confidential
    with contextlib.ExitStack() as stack:
        devnull = stack.enter_context(open(os.devnull, "w"))
        try:
            os.dup2(devnull.fileno() if withhold else saved_err, 1)
            if withhold:
                os.dup2(devnull.fileno(), 2)
            if quiet:
                stack.enter_context(contextlib.redirect_stderr(devnull))
            elif confidential:
                terminal = stack.enter_context(open(os.dup(saved_err), "w", closefd=True))
                stack.enter_context(contextlib.redirect_stderr(terminal))
            stack.enter_context(contextlib.redirect_stdout(devnull if withhold else sys.stderr))
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
