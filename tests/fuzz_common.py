"""Shared parts of the fuzz and fault tests (issue 53): the Hypothesis profiles, a CLI run
in-process with its exit status and output, file fingerprints, and the checks every run of
the command line must pass (the contract of :mod:`dpsynth.cli.commands`).

Profiles: ``ci`` (the default: a fixed seed, ``derandomize=True``, and few examples per
property, so the fuzz files run in minutes) and ``long`` (``HYPOTHESIS_PROFILE=long``: a
random seed each run and :data:`LONG_FACTOR` times the examples), e.g.::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -p no:cacheprovider tests/test_fuzz.py

No example database is written (``database=None``): failures found are kept in the tests as
``@example(...)``; Hypothesis's own caches go to the system's temporary folder, not the tree. With ``DPSYNTH_FUZZ_TALLY=PATH`` every example and fault appends one JSON
line (property, outcome) to PATH: ``benchmarks/fuzz_faults.py`` counts them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "dpsynth-hypothesis")  # not in the tree
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
LONG_FACTOR = 25
"""How many times more examples each property tries under the ``long`` profile."""
_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", derandomize=True, deadline=None, database=None, suppress_health_check=_QUIET_CHECKS
)
settings.register_profile(
    "long", derandomize=False, deadline=None, database=None, suppress_health_check=_QUIET_CHECKS
)
settings.load_profile(PROFILE)


def examples(n: int) -> settings:
    """``n`` examples under the ``ci`` profile, :data:`LONG_FACTOR` times more under ``long``."""
    return settings(max_examples=n * (LONG_FACTOR if PROFILE == "long" else 1))


def tally(prop: str, outcome: str) -> None:
    """Count one example or fault (only when ``DPSYNTH_FUZZ_TALLY`` names a file)."""
    path = os.environ.get("DPSYNTH_FUZZ_TALLY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"property": prop, "outcome": outcome}) + "\n")


class WouldFit(BaseException):
    """Raised instead of compiling or sampling a Stan program: the run passed every check
    made before a fit (not an ``Exception``, so the CLI does not turn it into exit 1)."""


STAN_ENTRIES = ("fit", "generate", "compile_program", "log_density", "outputs_at", "stanc_errors")


@contextlib.contextmanager
def no_stan() -> Iterator[None]:
    """Every Stan entry point of :mod:`dpsynth.engine` raises :class:`WouldFit`."""
    from dpsynth import engine

    def refuse(*args: object, **kwargs: object) -> None:
        raise WouldFit

    saved = {name: getattr(engine, name) for name in STAN_ENTRIES}
    try:
        for name in STAN_ENTRIES:
            setattr(engine, name, refuse)
        yield
    finally:
        for name, value in saved.items():
            setattr(engine, name, value)


@dataclass
class Run:
    """A CLI run: exit status (None when it reached a Stan fit), stdout and stderr."""

    code: int | None
    out: str
    err: str
    argv: tuple[str, ...] = ()


def run_cli(argv: list[str], cwd: Path) -> Run:
    """``dpsynth.cli.commands.main(argv)`` in-process, in ``cwd``, with Stan switched off."""
    from dpsynth.cli.commands import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    code: int | None
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), no_stan():
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except WouldFit:
                code = None
    finally:
        os.chdir(here)
    return Run(code, out.getvalue(), err.getvalue(), tuple(argv))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (hidden ones included) with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): sha256(p)
        for p in sorted(folder.rglob("*"))
        if stat.S_ISREG(p.lstat().st_mode)
    }


ARGPARSE_NAMING = re.compile(
    r"^dpsynth: error: (argument \S+|the following arguments are required: \S+|"
    r"unrecognized arguments:.*|ambiguous option: \S+|\S+: \S)"
)
"""How a refusal line names its parameter: argparse's own words, or ``PARAM: message``."""


def refusal_line(err: str, argv: tuple[str, ...] = ()) -> str:
    """The one refusal line of a run with exit status 2 (asserts there is exactly one, that it
    names a parameter, and that every other line is a warning or progress)."""
    lines = [t for t in err.splitlines() if t.strip()]  # argv: kept for callers
    errors = [t for t in lines if t.startswith("dpsynth: error:")]
    assert len(errors) == 1, f"not one refusal line: {err!r}"
    assert ARGPARSE_NAMING.match(errors[0]), f"refusal names no parameter: {errors[0]!r}"
    others = [t for t in lines if not t.startswith("dpsynth: error:")]
    assert all(t.startswith(("dpsynth: warning:", "[dpsynth]")) for t in others), err
    return errors[0]


def named(line: str) -> str:
    """The parameter a refusal line names (argparse's usage errors as "usage")."""
    body = line.removeprefix("dpsynth: error: ")
    if body.startswith(("argument ", "the following", "unrecognized")):
        return "a flag (argparse usage)"
    return body.split(": ", 1)[0]


BANNER = re.compile(r"\[CONFIDENTIAL, from the data:[^\]]*\]")


def public_text(err: str) -> str:
    """stderr without what dpsynth marks confidential: a refusal's ``[CONFIDENTIAL, from the
    data: ...]`` words and a ``[dpsynth] CONFIDENTIAL`` block (that line and its indented
    continuation lines)."""
    kept, inside = [], False
    for line in err.splitlines():
        if line.startswith("[dpsynth]") and "CONFIDENTIAL" in line:
            inside = True
            continue
        if inside and line.startswith("[dpsynth]  "):
            continue
        inside = False
        kept.append(BANNER.sub("", line))
    return "\n".join(kept)


def assert_contract(run: Run, before: dict[str, str], after: dict[str, str], inputs: list[str],
                    ledger: str | None = None) -> str:  # fmt: skip
    """The CLI contract: exit 0 or 2 (or a Stan fit reached), never a traceback; on a refusal
    one line naming the parameter and nothing written (a budget ledger may only gain lines);
    the inputs untouched. Returns the outcome's name for the tally."""
    assert run.code in (0, 2, None), (run.code, run.err)
    assert "Traceback" not in run.err + run.out
    for name in inputs:
        if name in before:
            assert after.get(name) == before[name], f"input {name} was changed"
    if run.code == 2:
        line = refusal_line(run.err, run.argv)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        assert changed <= {ledger}, f"a refusal wrote {sorted(changed)}"
        return f"refused (2) naming {named(line)}"
    if run.code is None:
        return "passed every check before a Stan fit"
    wrote = any(before.get(k) != v for k, v in after.items() if k != ledger)
    return "released (0)" if wrote else "exit 0, nothing written (help or version)"


def leaked(text: str, secrets: list[str]) -> list[str]:
    """The ``secrets`` found in ``text``."""
    return [s for s in secrets if s and s in text]
