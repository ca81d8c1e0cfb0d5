"""Files in and out: the one JSON converter, strict JSON text, atomic writes, provenance."""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any, *, finite: bool = True) -> Any:
    """``obj`` as plain JSON values: mappings with string keys, lists, Python numbers.

    numpy scalars and arrays become Python numbers and lists, tuples lists, sets sorted
    lists, paths strings. With ``finite`` (the default), NaN and infinities become ``None``
    (strict JSON has no such numbers); without it they are kept as floats.
    """
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v, finite=finite) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v, finite=finite) for v in obj]
    if isinstance(obj, set | frozenset):
        return [jsonable(v, finite=finite) for v in sorted(obj, key=repr)]
    if isinstance(obj, np.ndarray):
        if _plain(obj, finite):
            return obj.tolist()  # the same values, at C speed (Stan data of 10^5 records)
        return jsonable(obj.tolist(), finite=finite)
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if (math.isfinite(v) or not finite) else None
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _plain(arr: np.ndarray, finite: bool) -> bool:
    """True if ``arr.tolist()`` is already plain JSON values (booleans, integers, floats that
    need no replacing)."""
    if arr.dtype.kind in "biu":
        return True
    return arr.dtype.kind == "f" and (not finite or bool(np.isfinite(arr).all()))


def to_json(obj: Any) -> str:
    """Strict, indented JSON text (no NaN or Infinity: they become null), newline-ended."""
    return json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n"


def atomic_write_all(jobs: list[tuple[Path, Callable[[str], None]]]) -> None:
    """Write each file to a hidden temporary beside it, then rename all; clean up on failure.

    ``jobs`` pairs each target path with a writer of a temporary path. Signals (Ctrl-C,
    SIGTERM turned into SystemExit by the CLI) also remove the temporaries; each temporary is
    flushed to disk (fsync) before the renames. A temporary is named after its target and
    its process (``.NAME.PID.XXXX.part``, mode 0600): one that a process killed mid-write
    (SIGKILL) left behind is removed by the next write of the same target
    (:func:`sweep_stale_temporaries`).
    """
    for path, _ in jobs:
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory: nothing was written")
    temps: list[tuple[str, Path]] = []
    try:
        for path, writer in jobs:
            sweep_stale_temporaries(path)
            prefix = f".{path.name}.{os.getpid()}."
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".part")
            os.close(fd)
            temps.append((tmp, path))
            writer(tmp)
            _fsync(tmp)
        for tmp, path in temps:
            os.replace(tmp, path)
        temps = []
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)


def _fsync(path: str) -> None:
    """Flush a written file to disk, so a rename never publishes a file the disk lacks."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries of ``path`` (``.NAME.PID.XXXX.part``) whose process has died;
    returns them. A live process's are kept (it may be writing), and so is any name this
    function did not make."""
    removed = []
    head = f".{path.name}."
    name = re.compile(rf"{re.escape(head)}(\d+)\.[a-z0-9_]+\.part")  # mkstemp's names
    for stale in path.parent.glob(f"{glob.escape(head)}*.part"):
        found = name.fullmatch(stale.name)
        pid = int(found[1]) if found else os.getpid()
        if pid != os.getpid() and not _alive(pid):
            stale.unlink(missing_ok=True)
            removed.append(stale)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


PROVENANCE_PACKAGES: tuple[str, ...] = ("numpy", "opendp", "pystan", "httpstan", "cmdstanpy")
"""The packages whose versions a release's report states."""


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, Any]:
    """dpsynth's, Python's and the numerical packages' versions, for a report (cached: copy
    before changing it)."""
    from dpsynth import __version__

    return {
        "dpsynth_version": __version__,
        "versions": {p: package_version(p) for p in PROVENANCE_PACKAGES},
        "python": sys.version.split()[0],
    }


def package_version(package: str) -> str | None:
    """The installed version of ``package``, or None when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
