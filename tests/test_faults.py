"""Faults injected into every file dpsynth writes (issue 53): the disk full mid-write, SIGKILL
at chosen and at random points of a single-column and of a table release, concurrent
releases charging one budget file, a budget file truncated or edited by hand, an unwritable
output folder and a read-only cache.

Properties: the budget file is never lost, never under-charged and never corrupted silently
(a damaged ledger is refused in one line, not reset); an output is complete or absent; no
temporary file derived from the data outlives the run that wrote it (a killed run's hidden
``.part`` files are mode 0600 and removed by the next write of the same files), and the
private temporary folder (TMPDIR) stays empty. Releases use PH (no Stan fit), so a fault
run takes about two seconds. Random points come from a fixed seed (:data:`SEED`).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fuzz_common import examples, run_cli, snapshot, tally
from hypothesis import example, given
from hypothesis import strategies as st

from dpsynth.errors import InputError
from dpsynth.privacy import budget

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().parent / "fault_driver.py"
SEED = 53
N = 400
SPEC = """[[public]]
name = "p"
type = "continuous"
bounds = [0, 1]

[[confidential]]
name = "g"
type = "categorical"
levels = ["a", "b", "c"]
mechanism = "ph"

[[confidential]]
name = "h"
type = "binary"
levels = [0, 1]
mechanism = "ph"

[[confidential]]
name = "k"
type = "categorical"
levels = ["x", "y"]
mechanism = "ph"
"""


def _folder(work: Path) -> None:
    """A confidential single column (in.csv), a table (table.csv) and its PH spec."""
    rng = np.random.default_rng(SEED)
    pd.DataFrame({"y": rng.uniform(0, 100, N).round(6)}).to_csv(work / "in.csv", index=False)
    table = pd.DataFrame(
        {
            "p": rng.uniform(0, 1, N).round(4),
            "g": rng.choice(list("abc"), N),
            "h": rng.integers(0, 2, N),
            "k": rng.choice(list("xy"), N),
        }
    )
    table.to_csv(work / "table.csv", index=False)
    (work / "spec.toml").write_text(SPEC)


def _column_args(budget_total: float | None = 10.0) -> list[str]:
    args = ["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--bounds", "0", "100",
            "--epsilon", "1", "--out", "out.csv", "--report", "report.json", "--diagnostics",
            "diag.json", "--budget-file", "budget.jsonl", "--quiet"]  # fmt: skip
    return args + (["--budget-total", str(budget_total)] if budget_total else [])


def _table_args(budget_total: float | None = 10.0) -> list[str]:
    args = ["synthesize-table", "table.csv", "--spec", "spec.toml", "--epsilon", "1", "--out",
            "out.csv", "--report", "report.json", "--diagnostics", "diag.json", "--budget-file",
            "budget.jsonl", "--skip-preflight"]  # fmt: skip
    return args + (["--budget-total", str(budget_total)] if budget_total else [])


def _env(work: Path) -> dict[str, str]:
    """A fresh TMPDIR, HOME and caches below ``work``, and this tree's dpsynth."""
    for name in ("tmp", "home", "cache"):
        (work / name).mkdir(exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(work / "tmp"),
        "HOME": str(work / "home"),
        "XDG_CACHE_HOME": str(work / "home" / ".cache"),
        "DPSYNTH_CACHE_DIR": str(work / "cache"),
    }


def _driver(
    work: Path, mode: str, arg: str, dpsynth_args: list[str]
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DRIVER), mode, arg, "--", *dpsynth_args],
        cwd=work, env=_env(work), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _charges(path: Path) -> list[dict[str, Any]]:
    """The ledger's charge lines (read_ledger refuses a damaged ledger)."""
    _, lines = budget.read_ledger(path)
    return [x for x in lines if "epsilon" in x]


def _outputs_complete_or_absent(work: Path, table: bool) -> str:
    """Each output is absent or complete (a whole CSV of N records, valid JSON)."""
    present = [n for n in ("out.csv", "report.json", "diag.json") if (work / n).exists()]
    if (work / "out.csv").exists():
        out = pd.read_csv(work / "out.csv")
        assert len(out) == N and (not table or {"g", "h", "k"} <= set(out.columns))
    for name in ("report.json", "diag.json"):
        if (work / name).exists():
            json.loads((work / name).read_text())
    if not present:
        return "no output"
    return (
        "all 3 outputs whole" if len(present) == 3 else f"{len(present)} of 3 outputs, each whole"
    )


def _no_residue(work: Path) -> None:
    """TMPDIR is empty; a hidden temporary left beside the outputs is private (0600)."""
    assert not list((work / "tmp").iterdir()), list((work / "tmp").iterdir())
    for part in work.glob(".*.part"):
        assert stat.S_IMODE(part.stat().st_mode) == 0o600, part


def _after_kill(work: Path, table: bool, charged_before: int) -> str:
    """What must hold after a SIGKILL: the ledger readable and never under-charged."""
    charges = _charges(work / "budget.jsonl")
    assert len(charges) in (charged_before, charged_before + 1)
    if (work / "out.csv").exists() or (work / "report.json").exists():
        assert len(charges) == charged_before + 1, "an output exists but its charge does not"
    outcome = _outputs_complete_or_absent(work, table)
    _no_residue(work)
    charged = "charged" if len(charges) > charged_before else "killed before the charge"
    return f"{charged}, {outcome}"


# ----------------------------------------------------------------------------- SIGKILL

NAMED_POINTS = [
    ("leave", "dpsynth.privacy.budget:charge"),  # between the budget charge and the release
    ("enter", "dpsynth.io:atomic_write_all"),  # before the outputs are written
    ("enter", "dpsynth.io:_fsync"),  # an output's temporary written, not yet renamed
    ("leave", "dpsynth.io:to_json"),  # the synthetic records' temporary whole, the report's not
    ("enter", "os:replace"),  # the first rename (the ledger's charge)
    ("enter", "dpsynth.privacy.budget:_write_private"),
]


def _kill_points(args: list[str], table: bool, count: int) -> list[tuple[str, str]]:
    """The named points and ``count`` random ones (fixed seed) over the run's calls."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _folder(work)
        done = _driver(work, "count", str(work / "calls"), args)
        assert done.returncode == 0, done.stderr
        calls = int((work / "calls").read_text())
    rng = random.Random(SEED + table)
    points = [*NAMED_POINTS, *[("enter", "dpsynth.cli.files:read_csv")] * (not table)]
    if table:  # before each column (the first: the data read and the budget charged)
        points += [("stderr", "column 1/"), ("stderr", "column 2/"), ("stderr", "column 3/")]
        points += [("enter", "dpsynth.table.source:spec_partitions")]  # the data read
    return points + [("calls", str(rng.randint(1, calls))) for _ in range(count)]


@pytest.mark.parametrize("table", [False, True], ids=["single-column", "table"])
def test_sigkill_at_chosen_and_random_points(table, tmp_path):
    """SIGKILL at named points (after the charge, between columns, before and during the
    writes) and at random calls: the ledger keeps every charge, an output is whole or
    absent, nothing is left in TMPDIR, and the next run leaves no temporary behind."""
    args = (_table_args if table else _column_args)()
    for mode, arg in _kill_points(args, table, count=3):
        work = tmp_path / f"{mode}-{arg.replace('/', '_').replace(':', '_')}"
        work.mkdir()
        _folder(work)
        data = work / ("table.csv" if table else "in.csv")
        first = budget.charge(work / "budget.jsonl", dataset_sha256=budget.file_sha256(data),
                              epsilon=1.0, what="an earlier release", total=10.0)  # fmt: skip
        first.settle("released")
        inputs = {
            k: v for k, v in snapshot(work).items() if k in ("in.csv", "table.csv", "spec.toml")
        }
        killed = _driver(work, mode, arg, args[:-2] if args[-2] == "--budget-total" else args)
        assert killed.returncode == -9, (mode, arg, killed.returncode, killed.stderr)
        outcome = _after_kill(work, table, charged_before=1)
        if arg.endswith(":charge") or mode == "stderr":  # after the charge, before the release
            assert outcome.startswith("charged"), (mode, arg, outcome)
        assert {k: v for k, v in snapshot(work).items() if k in inputs} == inputs
        if not list(work.glob(".*.part")):
            tally("SIGKILL " + ("table" if table else "single column"), outcome)
            continue
        outcome += ", a 0600 temporary left until the next run"
        again = subprocess.run(
            [sys.executable, "-m", "dpsynth", *args[:-2]], cwd=work, env=_env(work),
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert not list(work.glob(".*.part")), "a killed run's temporary outlived the next run"
        _charges(work / "budget.jsonl")
        tally("SIGKILL " + ("table" if table else "single column"), outcome)


# ----------------------------------------------------------------------------- disk full


def _dev_full_at(k: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ``k``-th temporary file dpsynth creates is /dev/full: every write to it fails with
    ENOSPC (the ledger's and the outputs' temporaries both come from tempfile.mkstemp)."""
    real = tempfile.mkstemp
    made: list[str] = []

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)
        made.append(name)
        if len(made) == k:
            os.close(fd)
            os.unlink(name)
            os.symlink("/dev/full", name)
            fd = os.open(name, os.O_WRONLY)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    return made


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_disk_full_at_each_write(k, tmp_path, monkeypatch):
    """ENOSPC on the k-th file written by a release with a budget (1 the charge, 2-4 the
    outputs, 5 the outcome): a one-line error, no output or every output, no temporary left,
    the ledger whole and charged whenever the data were read."""
    _folder(tmp_path)
    made = _dev_full_at(k, monkeypatch)
    run = run_cli(_column_args(), tmp_path)
    assert len(made) >= k, "fewer writes than expected: the injection did not happen"
    assert "Traceback" not in run.err and len(run.err.strip().splitlines()) == 1
    assert run.code in (0, 1), run.err
    outputs = [n for n in ("out.csv", "report.json", "diag.json") if (tmp_path / n).exists()]
    assert outputs in ([], ["out.csv", "report.json", "diag.json"])
    assert not list(tmp_path.glob(".*.part"))
    if k == 1:  # the charge could not be written: refused before the data were read
        assert not (tmp_path / "budget.jsonl").exists() and not outputs
    else:
        charges = _charges(tmp_path / "budget.jsonl")
        assert len(charges) == 1 and charges[0]["epsilon"] == 1.0
    said = (
        ", the message says nothing was written"
        if outputs and "nothing was written" in run.err
        else ""
    )
    tally("disk full (ENOSPC at the k-th file)", f"exit {run.code}, {len(outputs)} outputs{said}")


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


UNSHARE = _unshare_works()
needs_unshare = pytest.mark.skipif(
    not UNSHARE, reason="needs `unshare -rm` (user and mount namespaces) to mount a tmpfs"
)


def _in_namespace(work: Path, setup: str, args: list[str]) -> subprocess.CompletedProcess:
    """``python -m dpsynth ARGS`` in a private mount namespace after the shell ``setup``."""
    script = f'{setup} && exec "$@"'
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "dpsynth", *args],
        cwd=work, env=_env(work), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@needs_unshare
def test_filled_disk_leaves_whole_files(tmp_path):
    """The same full tmpfs, inspected before the namespace ends: each output whole or absent,
    no temporary left, and the ledger either absent (its charge could not be written: the
    data were not read) or readable with the charge."""
    rng = random.Random(SEED + 1)
    for fill in sorted(rng.sample(range(24_000, 64 * 1024, 256), 6)):
        work = tmp_path / f"fill-{fill}"
        (work / "disk").mkdir(parents=True)
        _folder(work)
        args = [a if a not in ("out.csv", "report.json", "diag.json", "budget.jsonl") else f"disk/{a}"
                for a in _column_args()]  # fmt: skip
        check = (
            "import json, pathlib, sys; d = pathlib.Path('disk'); "
            "print(json.dumps({p.name: p.read_text(errors='replace') for p in d.iterdir() "
            "if p.name != 'filler'}))"
        )
        script = (
            f"mount -t tmpfs -o size=64k tmpfs disk && head -c {fill} /dev/zero > disk/filler; "
            f'"$@"; echo "rc=$?" >&2; {sys.executable} -c "{check}"'
        )
        done = subprocess.run(
            ["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "dpsynth", *args],
            cwd=work, env=_env(work), capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        files = json.loads(done.stdout.strip().splitlines()[-1])
        assert "Traceback" not in done.stderr, done.stderr
        assert not [n for n in files if n.endswith(".part")], files
        outputs = [n for n in ("out.csv", "report.json", "diag.json") if n in files]
        assert outputs in ([], ["out.csv", "report.json", "diag.json"]), files.keys()
        if "out.csv" in files:
            assert len(files["out.csv"].splitlines()) == N + 1
            json.loads(files["report.json"]) and json.loads(files["diag.json"])
        if "budget.jsonl" in files:
            lines = [json.loads(t) for t in files["budget.jsonl"].splitlines()]
            assert lines[0]["format"] == budget.FORMAT and lines[1]["epsilon"] == 1.0
        else:
            assert not outputs, "outputs written without a charge"
        tally("disk full, files inspected on the full disk", f"{len(outputs)} of 3 outputs")


# ----------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("runs", [2, 8])
def test_concurrent_releases_charge_one_budget(runs, tmp_path):
    """``runs`` releases at once on one budget file whose cap admits ``runs - 1`` (or both):
    exactly as many releases as the cap admits, every charge kept, the cap never exceeded."""
    _folder(tmp_path)
    cap = 2.0 if runs == 2 else 5.0
    budget.charge(tmp_path / "budget.jsonl", dataset_sha256=budget.file_sha256(tmp_path / "in.csv"),
                  epsilon=0.5, what="an earlier release", total=cap + 0.5)  # fmt: skip
    procs = []
    for i in range(runs):
        args = [a.replace("out.csv", f"out{i}.csv").replace("report.json", f"report{i}.json")
                .replace("diag.json", f"diag{i}.json") for a in _column_args(None)]  # fmt: skip
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "dpsynth", *args], cwd=tmp_path, env=_env(tmp_path),
            stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    codes = [p.wait(timeout=600) for p in procs]
    errors = [p.stderr.read() for p in procs]
    released = codes.count(0)
    assert released == min(runs, int(cap)), (codes, errors)
    assert codes.count(2) == runs - released
    assert all("--budget-file" in e for c, e in zip(codes, errors) if c == 2)
    charges = _charges(tmp_path / "budget.jsonl")
    assert len(charges) == 1 + released
    assert math.fsum(c["epsilon"] for c in charges) <= cap + 0.5 + 1e-9
    assert sorted(c["entry"] for c in charges) == list(range(1, 2 + released))
    tally(
        f"{runs} concurrent releases, one budget", f"{released} released, {runs - released} refused"
    )


# ----------------------------------------------------------------------------- damaged ledger

EDITS = st.sampled_from(
    ["epsilon", "spent_after", "entry", "total_epsilon", "dataset_sha256", "outcome"]
)
HOSTILE = st.sampled_from([-1, 0, 1e-300, "1", None, True, [], {}, "NaN", "Infinity", 0.25, 99])


@st.composite
def damage(draw: Any) -> tuple[str, Any]:
    """A hand-made damage: bytes cut, a line deleted, duplicated, swapped or added, a field set."""
    kind = draw(
        st.sampled_from(["truncate", "delete", "duplicate", "swap", "garbage", "set", "empty"])
    )
    if kind == "truncate":
        return kind, draw(st.floats(0, 1))
    if kind in ("delete", "duplicate", "garbage"):
        return kind, (draw(st.integers(0, 20)), draw(st.text(max_size=20)))
    if kind == "swap":
        return kind, (draw(st.integers(1, 20)), draw(st.integers(1, 20)))
    if kind == "set":
        return kind, (draw(st.integers(0, 20)), draw(EDITS), draw(HOSTILE))
    return kind, None


def _damaged(text: str, kind: str, arg: Any) -> str:
    lines = text.splitlines(keepends=True)
    if kind == "truncate":
        return text[: int(arg * (len(text) - 1))]
    if kind == "empty":
        return ""
    if kind == "swap":
        i, j = (a % len(lines) for a in arg)
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "set":
        i, key, value = arg
        row = json.loads(lines[i % len(lines)])
        row[key] = value
        line = json.dumps(row).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity")
        lines[i % len(lines)] = line + "\n"
    else:
        i, junk = arg
        i %= len(lines)
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        else:
            lines.insert(i, junk + "\n")
    return "".join(lines)


def _figures(line: dict[str, Any]) -> tuple[Any, Any]:
    """What a charge line says of the spending: its epsilon and the total after it."""
    return line.get("epsilon"), line.get("spent_after")


def _ledger(path: Path, epsilons: list[float]) -> str:
    for i, eps in enumerate(epsilons):
        charge = budget.charge(path, dataset_sha256="d" * 64, epsilon=eps, what="x", total=100.0)
        if i % 2 == 0:
            charge.settle("released")
    return path.read_text()


@examples(200)
@given(st.lists(st.floats(0.01, 5), min_size=1, max_size=5), damage())
@example([1.0, 2.0, 3.0], ("set", (3, "epsilon", 0.25)))  # a charge lowered by hand
@example([1.0, 2.0, 3.0], ("delete", (1, "")))  # the first charge deleted
@example([1.0, 2.0], ("set", (1, "epsilon", "NaN")))  # NaN: every later cap check passed
@example([1.0], ("set", (0, "epsilon", "NaN")))  # a NaN key in the header: was written back
@example([1.0], ("set", (14, "spent_after", "NaN")))  # NaN on an outcome line: the same
@example([1.0, 2.0], ("set", (2, "epsilon", -1)))
def test_damaged_ledger_is_refused_not_reset(epsilons, hurt):
    """A ledger damaged by hand: refused in one line with the file left as it is, or (only a
    damage that keeps every remaining charge's figures) read with every remaining charge
    counted: the spent budget never goes down but by whole last lines cut off."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "budget.jsonl"
        original = _ledger(path, epsilons)
        text = _damaged(original, *hurt)
        path.write_bytes(text.encode())
        try:
            charge = budget.charge(path, dataset_sha256="d" * 64, epsilon=0.5, what="x")
        except InputError as exc:
            assert exc.param in ("budget_file", "budget_total") and "\n" not in str(exc)
            assert path.read_bytes() == text.encode(), "a refused ledger was changed"
            tally("damaged ledger", "refused")
            return
        kept = [json.loads(t) for t in text.splitlines()[1:] if t]
        kept_charges = [_figures(x) for x in kept if isinstance(x, dict) and "epsilon" in x]
        first = [_figures(json.loads(t)) for t in original.splitlines()[1:] if '"epsilon"' in t]
        assert kept_charges == first[: len(kept_charges)], "an edited charge was accepted"
        assert charge.spent_after >= math.fsum(x[0] for x in kept_charges) + 0.5 - 1e-9
        cut = len(kept_charges) < len(first)
        assert not cut or original.startswith(text), "a charge went missing mid-file unseen"
        tally("damaged ledger", "read (last lines cut)" if cut else "read (charges intact)")


# ----------------------------------------------------------------------------- permissions


@needs_unshare
def test_unwritable_output_folder(tmp_path):
    """An output folder mounted read-only: refused in one line before the budget is charged
    and before the data are read; nothing written, the ledger untouched."""
    _folder(tmp_path)
    (tmp_path / "ro").mkdir()
    budget.charge(tmp_path / "budget.jsonl", dataset_sha256=budget.file_sha256(tmp_path / "in.csv"),
                  epsilon=1.0, what="x", total=10.0)  # fmt: skip
    before = snapshot(tmp_path)
    args = [a if a not in ("out.csv", "report.json") else f"ro/{a}" for a in _column_args(None)]
    run = _in_namespace(tmp_path, "mount --bind ro ro && mount -o remount,bind,ro ro", args)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("dpsynth: error: --out:") and len(run.stderr.splitlines()) == 1
    assert snapshot(tmp_path) == before
    tally("unwritable output folder", "refused (2) before the charge")


def test_output_folder_unwritable_at_the_write(tmp_path, monkeypatch):
    """The folder becomes unwritable between the checks and the write (PermissionError on
    the outputs' temporaries): one line, no output, the charge recorded as failed."""
    _folder(tmp_path)
    real = tempfile.mkstemp

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        if ".budget.jsonl." not in kwargs.get("prefix", ""):
            raise PermissionError(13, "Permission denied")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    run = run_cli(_column_args(), tmp_path)
    assert run.code == 1 and len(run.err.strip().splitlines()) == 1 and "Traceback" not in run.err
    assert not [n for n in ("out.csv", "report.json", "diag.json") if (tmp_path / n).exists()]
    summary = budget.summary(tmp_path / "budget.jsonl")
    assert summary["spent"] == 1.0 and summary["entries"][0]["outcome"].startswith("failed")
    tally("output folder unwritable at the write", f"exit {run.code}, charged, no output")


@needs_unshare
def test_read_only_cache(tmp_path):
    """HOME, the XDG cache and DPSYNTH_CACHE_DIR mounted read-only: a PH release (no compiled
    program needed) is made and writes nothing there."""
    _folder(tmp_path)
    env = _env(tmp_path)
    cache_before = snapshot(tmp_path / "home") | snapshot(tmp_path / "cache")
    setup = " && ".join(
        f"mount --bind {d} {d} && mount -o remount,bind,ro {d}" for d in ("home", "cache")
    )
    run = _in_namespace(tmp_path, setup, _column_args())
    assert run.returncode == 0, run.stderr
    assert (snapshot(tmp_path / "home") | snapshot(tmp_path / "cache")) == cache_before
    assert env["DPSYNTH_CACHE_DIR"].endswith("cache")
    _outputs_complete_or_absent(tmp_path, table=False)
    tally("read-only cache", "released (0), cache untouched")
