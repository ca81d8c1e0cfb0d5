"""A privacy budget per dataset: a confidential ledger file that every release charges first.

Sequential composition: every release of the same confidential dataset spends its epsilon,
and so does every attempt that was refused or failed after it started, because whether a
release is refused (a record outside the bounds, a fit that did not converge, a missing
value) depends on the data. :func:`charge` therefore records the attempt's epsilon BEFORE
the confidential data are read, refuses an attempt that would exceed the cap without
reading them, and :meth:`Charge.settle` records afterwards what happened (``released``,
``refused: <parameter>``, ``failed``, ``interrupted``).

The file (JSON lines, human-readable) starts with a header holding the cap, set once when
the file is created, and the SHA-256 of the confidential dataset, so that two datasets never
share a ledger by accident; one line per charge and one per outcome follow. The file is
CONFIDENTIAL (the outcomes depend on the data): it is created with mode 0600 and rewritten
atomically (a private temporary file and a rename) under an exclusive lock on its folder,
so concurrent releases never lose or interleave a line.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth.errors import InputError, require_finite_positive

FORMAT = "dpsynth privacy budget ledger 1"
CONFIDENTIAL_NOTE = (
    "CONFIDENTIAL: the outcomes of the attempts below depend on the confidential data. "
    "Do not publish this file."
)
_RTOL = 1e-9


@dataclass(frozen=True)
class Charge:
    """One attempt's charge in a budget file: its entry number and the totals after it."""

    path: Path
    entry: int
    epsilon: float
    spent_after: float
    total: float

    def settle(self, outcome: str) -> None:
        """Record the attempt's outcome (``released``, ``refused: <param>``, ``failed``)."""
        with _locked(self.path):
            header, lines = _read(self.path)
            lines.append({"entry": self.entry, "outcome": outcome, "time": _now()})
            _write_private(self.path, header, lines)

    def to_report(self) -> dict[str, Any]:
        """What the public report says of the ledger: this release's charge only.

        The release's entry number and the totals spent and remaining count the earlier
        attempts, refused and failed ones included, and whether an attempt was refused can
        depend on the data (a convergence refusal), so they go to the confidential
        diagnostics (:meth:`to_diagnostics`)."""
        return {
            "epsilon_charged": self.epsilon,
            "meaning": (
                "this release is charged to the dataset's privacy-budget ledger, where the "
                "epsilon of every attempt on the dataset, refused and failed ones included, "
                "adds up (sequential composition); its place in the ledger and the totals are "
                "in the confidential diagnostics (earlier refusals can depend on the data)"
            ),
        }

    def to_diagnostics(self) -> dict[str, Any]:
        """The release's place in the ledger (confidential: counts earlier attempts)."""
        return {
            "file": str(self.path),
            "entry": self.entry,
            "epsilon_charged": self.epsilon,
            "spent_after": self.spent_after,
            "total": self.total,
            "remaining_after": max(self.total - self.spent_after, 0.0),
        }


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex), read in blocks; the file's values are not parsed."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def array_sha256(*arrays: Any) -> str:
    """SHA-256 of arrays as float64 bytes (the library's dataset identity without a file)."""
    digest = hashlib.sha256()
    for a in arrays:
        if a is not None:
            digest.update(np.ascontiguousarray(np.asarray(a, dtype=float)).tobytes())
    return digest.hexdigest()


def charge(
    path: str | Path,
    *,
    dataset_sha256: str,
    epsilon: float,
    what: str,
    total: float | None = None,
) -> Charge:
    """Charge ``epsilon`` to the ledger at ``path`` before the data are read; return the charge.

    A missing file is created with the cap ``total`` (required then, refused afterwards
    unless equal to the recorded cap). Refuses, writing nothing: a file of another dataset,
    a file that is not a ledger, and a charge that would take the spent epsilon above the cap.
    """
    path = Path(path)
    epsilon = require_finite_positive("epsilon", epsilon)
    if total is not None:
        total = require_finite_positive("budget_total", total)
    if path.is_dir() or not path.parent.is_dir():
        raise InputError("budget_file", f"{path} is a directory or its folder does not exist")
    with _locked(path):
        if path.exists():
            header, lines = _read(path)
            _check_header(header, dataset_sha256, total)
        else:
            if total is None:
                raise InputError(
                    "budget_total",
                    "a new budget file needs its cap: give budget_total once, when the "
                    "file is created (it is recorded in the file)",
                )
            header, lines = _new_header(dataset_sha256, total), []
        cap = float(header["total_epsilon"])
        spent = math.fsum(float(x["epsilon"]) for x in lines if "epsilon" in x)
        if spent + epsilon > cap * (1 + _RTOL):
            raise InputError(
                "budget_file",
                f"epsilon {epsilon:g} would exceed the dataset's cap: {spent:g} of {cap:g} "
                f"spent, {max(cap - spent, 0.0):g} left; refused before reading the data",
            )
        entry = 1 + max((int(x["entry"]) for x in lines), default=0)
        spent += epsilon
        line = {"entry": entry, "time": _now(), "epsilon": epsilon, "what": what}
        lines.append({**line, "spent_after": spent, "outcome": "pending"})
        _write_private(path, header, lines)
    return Charge(path, entry, epsilon, spent, cap)


def outcome_of(exc: BaseException | None) -> str:
    """How an attempt ended, in the ledger's words."""
    if exc is None:
        return "released"
    if isinstance(exc, InputError):
        return f"refused: {exc.param}"
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return "interrupted"
    return f"failed: {type(exc).__name__}"


@contextlib.contextmanager
def attempt(charge_: Charge | None) -> Iterator[Charge | None]:
    """Settle ``charge_`` with the outcome of the block (nothing to do when None)."""
    try:
        yield charge_
    except BaseException as exc:
        if charge_ is not None:
            charge_.settle(outcome_of(exc))
        raise
    if charge_ is not None:
        charge_.settle("released")


def read_ledger(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the lines of a budget file (refused if it is not one)."""
    return _read(Path(path))


def summary(path: str | Path) -> dict[str, Any]:
    """Cap, spent and the attempts with their outcomes (a charge line merged with its outcome)."""
    header, lines = _read(Path(path))
    entries: dict[int, dict[str, Any]] = {}
    for x in lines:
        entries.setdefault(int(x["entry"]), {}).update(x)
    spent = math.fsum(float(x["epsilon"]) for x in lines if "epsilon" in x)
    return {"total": header["total_epsilon"], "spent": spent, "entries": list(entries.values())}


# ----------------------------------------------------------------------------- file


HEADER_KEYS = frozenset(
    {"format", "confidential", "dataset_sha256", "total_epsilon", "created", "meaning"}
)
"""The keys a ledger's header line may hold (:func:`_new_header`): a header with any other
key was edited by hand and is refused."""


def _new_header(dataset_sha256: str, total: float) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "confidential": CONFIDENTIAL_NOTE,
        "dataset_sha256": dataset_sha256,
        "total_epsilon": total,
        "created": _now(),
        "meaning": (
            "one line per attempt to release the dataset (its epsilon, charged before the "
            "data were read) and one per outcome; the epsilons add up to the spent budget"
        ),
    }


def _check_header(header: dict[str, Any], dataset_sha256: str, total: float | None) -> None:
    if header.get("dataset_sha256") != dataset_sha256:
        raise InputError(
            "budget_file",
            "belongs to another dataset (the SHA-256 of the confidential data differs): "
            "one budget file per dataset",
        )
    cap = float(header["total_epsilon"])
    if total is not None and not math.isclose(total, cap, rel_tol=_RTOL):
        raise InputError(
            "budget_total",
            f"the cap is set once, when the budget file is created (it records {cap:g})",
        )


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        rows = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InputError("budget_file", f"{path} is not a dpsynth budget file") from None
    if not rows or not isinstance(rows[0], dict) or rows[0].get("format") != FORMAT:
        raise InputError("budget_file", f"{path} is not a dpsynth budget file")
    _check_ledger(path, rows[0], rows[1:])
    return rows[0], rows[1:]


def _check_ledger(path: Path, header: dict[str, Any], lines: list[Any]) -> None:
    """Refuse a ledger damaged or edited by hand instead of charging from it (a charge read
    from a damaged line could under-charge, and resetting it would lose the spent budget).

    Checks: a header with the dataset's hash and a finite positive cap; every line a JSON
    object with a positive entry number; a charge line's epsilon finite and positive, its
    entry new, and its ``spent_after`` the running sum of the epsilons up to it (so a charge
    deleted or lowered by hand is seen by every later charge); an outcome line's entry charged
    before it. Deleting the last lines whole cannot be seen from the file alone."""
    if not _positive(header.get("total_epsilon")) or not isinstance(
        header.get("dataset_sha256"), str
    ):
        raise _damaged(path, "line 1, the header: its cap or dataset hash")
    if not set(header) <= HEADER_KEYS or header.get("format") != FORMAT:
        raise _damaged(path, "line 1, the header: a key it never has, or its format")
    for number, row in enumerate([header, *lines], start=1):
        if not _json_finite(row):
            raise _damaged(path, f"line {number}: a number that is not finite")
    epsilons: list[float] = []
    charged: set[int] = set()
    for number, line in enumerate(lines, start=2):
        entry = line.get("entry") if isinstance(line, dict) else None
        if isinstance(entry, bool) or not isinstance(entry, int) or entry < 1:
            raise _damaged(path, f"line {number}: not an entry")
        if "epsilon" in line:
            if not _positive(line["epsilon"]) or entry in charged:
                raise _damaged(path, f"line {number}: its epsilon or entry number")
            epsilons.append(float(line["epsilon"]))
            spent = math.fsum(epsilons[:-1]) + epsilons[-1]
            recorded = line.get("spent_after")
            if not _finite(recorded) or not math.isclose(recorded, spent, rel_tol=_RTOL):
                raise _damaged(path, f"line {number}: spent_after is not the sum of the charges")
            charged.add(entry)
        elif entry not in charged or not isinstance(line.get("outcome"), str):
            raise _damaged(path, f"line {number}: an outcome of no charge before it")


def _json_finite(value: Any) -> bool:
    """No NaN or infinity anywhere in a JSON value (the ledger is written back as strict JSON)."""
    if isinstance(value, dict):
        return all(_json_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_json_finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def _finite(value: Any) -> bool:
    """A JSON number (not a boolean) that is finite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    """A finite JSON number above zero."""
    return _finite(value) and value > 0


def _damaged(path: Path, where: str) -> InputError:
    """The refusal of a damaged ledger: one line naming the file and the first bad line."""
    return InputError(
        "budget_file",
        f"{path} is damaged or was edited by hand ({where}); refused, not reset: restore it "
        "from a copy (every charge counts against the cap)",
    )


def _write_private(path: Path, header: dict[str, Any], lines: list[dict[str, Any]]) -> None:
    """Rewrite the ledger atomically: a 0600 temporary beside it, fsync, rename; first remove
    the temporaries a writer killed mid-write left (the lock is held: none is live)."""
    text = "".join(json.dumps(x, allow_nan=False) + "\n" for x in [header, *lines])
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.part"):
        stale.unlink(missing_ok=True)  # a killed writer's (every writer holds the lock)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the ledger's folder (the ledger itself is replaced by
    renames, and a lock file would be a file written by a refused attempt)."""
    from dpsynth.engine.common import flock

    fd = os.open(path.parent, os.O_RDONLY)
    try:
        flock(fd, blocking=True)
        yield
    finally:
        os.close(fd)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = [
    "Charge",
    "array_sha256",
    "attempt",
    "charge",
    "file_sha256",
    "outcome_of",
    "read_ledger",
    "summary",
]
