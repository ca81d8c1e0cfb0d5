"""The command line's contract, table-driven over ``dpsynth.cli.commands.REFUSALS``.

For every bad input: exit status 2; stderr exactly one line, ``dpsynth: error: `` and the
flag to fix (the value of ``cli.FLAGS``); no traceback; no output and no hidden ``.part``
temporary created; the input (and every other file in the folder) byte-for-byte unchanged.
Most cases run in-process through ``dpsynth.cli.commands.main``; a few through ``python -m
dpsynth``. Signals: Ctrl-C exits 130 and SIGTERM 143, during sampling and during writing,
leaving no output, no temporary and no child process.
"""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth import engine
from dpsynth.cli import commands
from dpsynth.cli.commands import FLAGS, REFUSALS, main

REPO = Path(__file__).resolve().parent.parent
TEST_STAN = Path(__file__).resolve().parent / "stan"
PYTHON = sys.executable

BASES = {
    "ph": ["--mechanism", "ph", "--bounds", "0", "1", "--epsilon", "1"],
    "ph-nobounds": ["--mechanism", "ph", "--epsilon", "1"],
    "sbs": ["--mechanism", "sbs", "--bounds", "-4", "4", "--epsilon", "1"],
    # a Stan mechanism with a tiny sampler: used where the refusal comes before or
    # right after a fit of 1 chain x (20 + 20) iterations
    "stan": [
        "--mechanism",
        "censor-uw",
        "--epsilon",
        "3",
        "--chains",
        "1",
        "--iter-warmup",
        "20",
        "--iter-sampling",
        "20",
    ],
}

SYNTAX_ERROR_PROGRAM = (
    (TEST_STAN / "broken_contrib.stan")
    .read_text()
    .replace(
        "mu ~ normal(0, 10);",
        "mu ~ normal(0, 10)",  # a missing semicolon: stanc refuses it
    )
)


@dataclass
class Case:
    """One refusal: ``argv`` follows the base's arguments and the output flags, so a
    repeated flag overrides (argparse keeps the last); ``{in}`` and ``{tmp}`` are
    replaced by the input path and the test's folder. ``setup(tmp)`` writes the input
    (and anything else the case needs) and returns the input path."""

    id: str
    family: str
    flag: str
    argv: list[str] = field(default_factory=list)
    base: str = "ph"
    setup: Callable[[Path], Path] | None = None
    column: str = "y"
    extra_targets: list[str] = field(default_factory=list)  # outputs outside the folder


def _csv(text: str, encoding: str = "utf-8", name: str = "in.csv") -> Callable[[Path], Path]:
    def setup(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(text.encode(encoding))
        return path

    return setup


def _frame(values, name: str = "in.csv", **extra) -> Callable[[Path], Path]:
    def setup(tmp: Path) -> Path:
        path = tmp / name
        pd.DataFrame({"y": values, **extra}).to_csv(path, index=False)
        return path

    return setup


def _program(text: str) -> Callable[[Path], Path]:
    def setup(tmp: Path) -> Path:
        (tmp / "mine.stan").write_text(text)
        return _default_input(tmp)

    return setup


PIECES_PRIOR_READS_Y = """
functions {
  real record_lpdf(real y, row_vector x, real mu) { return normal_lpdf(y | mu, 1); }
  real record_rng(row_vector x, real mu) { return normal_rng(mu, 1); }
}
parameters { real mu; }
prior { mu ~ normal(mean(y), 1); }
"""


def _pieces(text: str) -> Callable[[Path], Path]:
    def setup(tmp: Path) -> Path:
        (tmp / "mine.pieces").write_text(text)
        return _default_input(tmp)

    return setup


def _mkdir(name: str) -> Callable[[Path], Path]:
    def setup(tmp: Path) -> Path:
        (tmp / name).mkdir()
        return _default_input(tmp)

    return setup


def _default_input(tmp: Path) -> Path:
    rng = np.random.default_rng(1)
    path = tmp / "in.csv"
    pd.DataFrame({"y": rng.beta(1.5, 1.5, 50), "x": rng.normal(size=50)}).to_csv(path, index=False)
    return path


def _normal_input(tmp: Path) -> Path:
    path = tmp / "in.csv"
    pd.DataFrame({"y": np.random.default_rng(7).normal(0.0, 1.0, 100)}).to_csv(path, index=False)
    return path


def _ledger_of_another_dataset(tmp: Path) -> Path:
    from dpsynth.privacy import budget

    budget.charge(tmp / "budget.jsonl", dataset_sha256="0" * 64, epsilon=1.0, what="x", total=9.0)
    return _default_input(tmp)


def _reference_lacking_a_level(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    g = np.array(["a", "b", "c"])[np.arange(60) % 3]
    pd.DataFrame({"y": rng.beta(2, 2, 60), "g": g}).to_csv(tmp / "in.csv", index=False)
    pd.DataFrame({"y": rng.beta(2, 2, 40), "g": g[:40] == "a"}).replace(
        {True: "a", False: "b"}
    ).to_csv(tmp / "ref.csv", index=False)
    return tmp / "in.csv"


def _unwritable_folder(tmp: Path) -> str:
    """A folder this process cannot write to (the test is skipped when there is none).

    As a normal user a chmod'ed folder; as root (tests in containers) chmod does not
    block writes, so /proc/sys, which refuses file creation even to root.
    """
    if os.geteuid() != 0:
        folder = tmp / "read-only"
        folder.mkdir()
        folder.chmod(0o500)
        return str(folder)
    if Path("/proc/sys").is_dir() and not os.access("/proc/sys", os.W_OK):
        return "/proc/sys"
    pytest.skip("running as root and /proc/sys is writable: no folder refuses writes")


CASES = [
    # input file
    Case("missing-input", "input file", "IN.csv", setup=lambda t: t / "nope.csv"),
    Case(
        "input-is-directory",
        "input file",
        "IN.csv",
        setup=lambda t: (t / "d.csv").mkdir() or t / "d.csv",
    ),
    Case("latin-1", "input file", "IN.csv", setup=_csv("größe,y\nklein,0.5\n", "latin-1")),
    Case("empty-file", "input file", "IN.csv", setup=_csv("")),
    Case("not-csv", "input file", "IN.csv", setup=_csv('y\n"0.5\n0.2\n')),
    # columns
    Case("duplicated-names", "columns", "IN.csv", setup=_csv("y,y\n0.1,0.2\n")),
    Case("empty-name", "columns", "IN.csv", setup=_csv("y,\n0.1,0.2\n")),
    Case("unknown-column", "columns", "--column", column="salary"),
    # outcome values
    Case("missing-value", "outcome values", "--column", setup=_csv("y,x\n0.1,1\n,2\n0.3,3\n")),
    Case("non-numeric", "outcome values", "--column", setup=_csv("y\n0.1\nabc\n")),
    Case("outside-bounds", "outcome values", "--column", setup=_frame([0.1, 7.123456, 0.3])),
    Case("outside-support", "outcome values", "--column", base="stan", setup=_frame([0.1, 1.5])),
    # counts
    Case(
        "counts-beyond-int32",
        "counts",
        "--column",
        ["--model", "poisson"],
        base="stan",
        setup=_frame([1, 2, 10**10]),
    ),
    # output paths
    Case(
        "out-is-directory", "output paths", "--out", ["--out", "{tmp}/adir"], setup=_mkdir("adir")
    ),
    Case("out-missing-folder", "output paths", "--out", ["--out", "{tmp}/nowhere/o.csv"]),
    Case("out-is-input", "output paths", "--out", ["--out", "{in}"]),
    Case("report-is-out", "output paths", "--report", ["--report", "{tmp}/o.csv"]),
    Case("diagnostics-is-input", "output paths", "--diagnostics", ["--diagnostics", "{in}"]),
    Case(
        "report-unwritable",
        "output paths",
        "--report",
        ["--report", "{unwritable}/dpsynth-report.json"],
        extra_targets=["{unwritable}/dpsynth-report.json"],
    ),
    # epsilon
    *[
        Case(f"epsilon-{v}", "epsilon", "--epsilon", ["--epsilon", v])
        for v in ("0", "-1", "nan", "inf", "1e-308", "1e308", "abc")
    ],
    Case("epsilon-above-sanity-limit", "epsilon", "--epsilon", ["--epsilon", "25"]),
    # budget (issue 27): refused before the data are read, the ledger untouched
    Case(
        "budget-over-cap",
        "budget",
        "--budget-file",
        ["--budget-file", "{tmp}/budget.jsonl", "--budget-total", "0.5"],
    ),
    Case("budget-new-without-cap", "budget", "--budget-total", ["--budget-file", "{tmp}/b.jsonl"]),
    Case(
        "budget-other-dataset",
        "budget",
        "--budget-file",
        ["--budget-file", "{tmp}/budget.jsonl"],
        setup=_ledger_of_another_dataset,
    ),
    # missing values (issue 27)
    Case(
        "missing-numeric-covariate",
        "missing values",
        "--covariates",
        ["--model", "beta-regression", "--covariates", "x"],
        base="stan",
        setup=_csv("y,x\n0.1,1\n0.2,\n0.3,3\n0.4,4\n"),
    ),
    Case(
        "missing-text-covariate",
        "missing values",
        "--covariates",
        ["--model", "beta-regression", "--covariates", "g"],
        base="stan",
        setup=_csv("y,g\n0.1,a\n0.2,\n0.3,b\n0.4,a\n"),
    ),
    Case(
        "drop-missing-without-n",
        "missing values",
        "--n-synthetic",
        ["--drop-missing"],
        setup=_csv("y\n0.1\n\n0.3\n"),
    ),
    Case(
        "drop-missing-outcome-in-a-regression",
        "missing values",
        "--column",
        ["--model", "beta-regression", "--covariates", "x", "--drop-missing"],
        base="stan",
        setup=_csv("y,x\n0.1,1\n,2\n0.3,3\n0.4,4\n"),
    ),
    # reference levels (issue 27)
    Case(
        "reference-lacks-level",
        "reference levels",
        "--weights-from",
        ["--mechanism", "censor-w", "--model", "beta-regression", "--covariates", "g"]
        + ["--weights-from", "{tmp}/ref.csv"],
        base="stan",
        setup=_reference_lacking_a_level,
    ),
    # m
    Case("m-zero", "m", "--m", ["--m", "0"]),
    Case("m-negative", "m", "--m", ["--m", "-2"]),
    pytest.param(
        Case(
            "m-more-than-draws", "m", "--m", ["--mechanism", "unweighted", "--m", "30"], base="stan"
        ),
        marks=pytest.mark.slow,
    ),
    # seed
    Case("seed-negative", "seed", "--seed", ["--seed", "-1"]),
    Case("seed-too-large", "seed", "--seed", ["--seed", str(2**63)]),
    # MCMC sizes
    Case("chains-zero", "MCMC sizes", "--chains", ["--chains", "0"], base="stan"),
    Case("chains-65", "MCMC sizes", "--chains", ["--chains", "65"], base="stan"),
    Case(
        "iter-sampling-zero", "MCMC sizes", "--iter-sampling", ["--iter-sampling", "0"], base="stan"
    ),
    Case(
        "iter-warmup-negative", "MCMC sizes", "--iter-warmup", ["--iter-warmup", "-1"], base="stan"
    ),
    # bins
    Case("n-bins-float", "bins", "--n-bins", ["--n-bins", "1e12"]),
    Case("n-bins-too-many", "bins", "--n-bins", ["--n-bins", "20000000"]),
    Case("n-bins-zero", "bins", "--n-bins", ["--n-bins", "0"]),
    # bounds
    Case("bounds-missing", "bounds", "--bounds", base="ph-nobounds"),
    Case("bounds-inverted", "bounds", "--bounds", ["--bounds", "1", "0"]),
    Case("bounds-infinite", "bounds", "--bounds", ["--bounds", "0", "inf"]),
    Case("sbs-bounds-missing", "bounds", "--bounds", ["--mechanism", "sbs"], base="ph-nobounds"),
    # options the mechanism would ignore
    Case("radius-with-censor-uw", "options", "--radius", ["--radius", "2"], base="stan"),
    Case("n-bins-with-censor-uw", "options", "--n-bins", ["--n-bins", "10"], base="stan"),
    Case("stan-file-with-ph", "options", "--stan-file", ["--stan-file", "{tmp}/x.stan"]),
    Case("model-with-ph", "options", "--model", ["--model", "beta"]),
    Case("known-sd-with-ph", "options", "--known-sd", ["--known-sd", "1"]),
    Case("outcome-without-stan-file", "options", "--outcome", ["--outcome", "real"], base="stan"),
    Case(
        "weights-from-with-censor-uw",
        "options",
        "--weights-from",
        ["--weights-from", "{in}"],
        base="stan",
    ),
    # neighbours
    Case("add-remove-without-n", "neighbours", "--n-synthetic", ["--neighbours", "add-remove"]),
    Case(
        "add-remove-with-sbs",
        "neighbours",
        "--neighbours",
        ["--neighbours", "add-remove", "--n-synthetic", "10"],
        base="sbs",
        setup=_frame(np.random.default_rng(3).normal(size=50)),
    ),
    Case(
        "add-remove-with-covariates",
        "neighbours",
        "--neighbours",
        [
            "--model",
            "beta-regression",
            "--covariates",
            "x",
            "--neighbours",
            "add-remove",
            "--n-synthetic",
            "10",
        ],
        base="stan",
    ),
    # user programs
    Case(
        "stan-file-missing",
        "user program",
        "--stan-file",
        ["--stan-file", "{tmp}/none.stan"],
        base="stan",
    ),
    Case(
        "stan-file-off-convention",
        "user program",
        "--stan-file",
        ["--stan-file", str(TEST_STAN / "normal_known_sd.stan")],
        base="stan",
    ),
    pytest.param(
        Case(
            "stan-file-does-not-parse",
            "user program",
            "--stan-file",
            ["--stan-file", "{tmp}/mine.stan", "--outcome", "real"],
            base="stan",
            setup=_program(SYNTAX_ERROR_PROGRAM),
        ),
        marks=pytest.mark.slow,
    ),
    *[
        pytest.param(
            Case(
                f"stan-file-{name}",
                "user program",
                "--stan-file",
                [
                    "--stan-file",
                    str(TEST_STAN / f"{name}.stan"),
                    "--outcome",
                    "real",
                    "--chains",
                    "2",
                    "--iter-warmup",
                    "200",
                    "--iter-sampling",
                    "200",
                ],
                base="stan",
                setup=_normal_input,
            ),
            marks=pytest.mark.slow,
        )
        for name in ("broken_target", "broken_contrib")
    ],
    # pieces (refused before any fit: a missing file, a piece naming confidential data)
    Case("pieces-missing", "pieces", "--pieces", ["--pieces", "{tmp}/none.pieces"], base="stan"),
    Case(
        "pieces-prior-reads-y",
        "pieces",
        "--pieces",
        ["--pieces", "{tmp}/mine.pieces"],
        base="stan",
        setup=_pieces(PIECES_PRIOR_READS_Y),
    ),
    Case(
        "pieces-with-stan-file",
        "pieces",
        "--pieces",
        ["--pieces", "{tmp}/x.pieces", "--stan-file", str(TEST_STAN / "honest_normal.stan")],
        base="stan",
    ),
]


CMDSTAN = engine.cmdstan_available()


def _case(c) -> Case:
    return c.values[0] if hasattr(c, "values") else c


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``folder`` with its bytes (None for folders)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = None if p.is_dir() else p.read_bytes()
    return out


def _argv(case: Case, tmp: Path, inp: Path, unwritable: str = "") -> list[str]:
    outputs = ["--out", "{tmp}/o.csv", "--report", "{tmp}/r.json", "--diagnostics", "{tmp}/d.json"]
    raw = [
        "synthesize",
        str(inp),
        "--column",
        case.column,
        *BASES[case.base],
        *outputs,
        "--quiet",
        *case.argv,
    ]
    return [
        a.replace("{in}", str(inp)).replace("{tmp}", str(tmp)).replace("{unwritable}", unwritable)
        for a in raw
    ]


def _assert_refused(case: Case, code, err: str, before, tmp: Path, unwritable: str = "") -> None:
    assert code == 2, (case.id, code, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, (case.id, err)
    assert lines[0].startswith("dpsynth: error: "), err
    assert case.flag in lines[0], (case.id, case.flag, err)
    # nothing created, nothing changed (the input included), no hidden temporary
    assert _snapshot(tmp) == before, case.id
    assert [p for p in tmp.rglob("*") if p.name.endswith(".part")] == []
    for target in case.extra_targets:
        assert not Path(target.replace("{unwritable}", unwritable)).exists()


def _run_in_process(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors exit from parse_args
        code = exc.code
    captured = capsys.readouterr()
    assert captured.out == "", captured.out  # results go to files, messages to stderr
    return code, captured.err


STAN_FAMILIES = ("user program", "pieces")
"""Refusals that come from Stan's side (compiling, checking, sampling): run on each backend."""


def _with_backends(cases: list) -> list:
    """``(case, backend)`` params: the Stan families once per backend (cmdstanpy skipped,
    visibly, without CmdStan), every other case once with the default backend (None)."""
    out = []
    for c in cases:
        marks = list(getattr(c, "marks", ()))
        case = _case(c)
        if case.family not in STAN_FAMILIES:
            out.append(pytest.param(case, None, marks=marks, id=case.id))
            continue
        for backend in ("pystan", "cmdstanpy"):
            extra = []
            if backend == "cmdstanpy" and not CMDSTAN:
                extra = [pytest.mark.skip(reason="CmdStan not installed: cmdstanpy case not run")]
            out.append(pytest.param(case, backend, marks=marks + extra, id=f"{case.id}-{backend}"))
    return out


@pytest.mark.parametrize(("case", "backend"), _with_backends(CASES))
def test_refusal_contract(case: Case, backend: str | None, tmp_path, capsys, monkeypatch):
    if backend is not None:
        monkeypatch.setenv("DPSYNTH_STAN_BACKEND", backend)
    unwritable = _unwritable_folder(tmp_path) if case.id == "report-unwritable" else ""
    inp = case.setup(tmp_path) if case.setup else _default_input(tmp_path)
    before = _snapshot(tmp_path)
    code, err = _run_in_process(_argv(case, tmp_path, inp, unwritable), capsys)
    _assert_refused(case, code, err, before, tmp_path, unwritable)


def test_refused_record_is_named_by_position_not_value(tmp_path, capsys):
    case = next(_case(c) for c in CASES if _case(c).id == "outside-bounds")
    inp = case.setup(tmp_path)
    code, err = _run_in_process(_argv(case, tmp_path, inp), capsys)
    assert code == 2 and "record 2" in err and "7.12" not in err


def _row_flags(family: str) -> list[str]:
    rows = [r for r in REFUSALS if r[0] == family]
    text = " ".join(f"{cases} {flags}" for _, cases, flags in rows)
    return re.findall(r"--[\w*-]+|IN\.csv", text)


def test_every_refusal_family_has_cases_naming_its_flags():
    cases = [_case(c) for c in CASES]
    families = {r[0] for r in REFUSALS}
    assert families == {c.family for c in cases}
    known = _options() | {"IN.csv"}
    for c in cases:
        assert c.flag in known, c.id
        if c.family == "options":  # "the option" itself
            assert c.argv and c.flag in c.argv, c.id
            continue
        assert any(fnmatch.fnmatch(c.flag, tok) for tok in _row_flags(c.family)), (
            c.id,
            c.flag,
            _row_flags(c.family),
        )
    for family, cases_text, flags in REFUSALS:
        assert family and cases_text and flags


def _options() -> set[str]:
    """Every option string of every subcommand."""
    parser = commands.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    return {o for p in sub.values() for a in p._actions for o in a.option_strings}


def test_flags_map_to_real_options():
    known = _options()
    for param, flag in FLAGS.items():
        if flag.startswith("--"):
            assert flag in known, (param, flag)


def test_utf8_with_bom_is_accepted(tmp_path, capsys, strict_json):
    inp = tmp_path / "in.csv"
    inp.write_bytes("\ufeffgröße,y\nklein,0.25\ngroß,0.75\n".encode())
    before = inp.read_bytes()
    code, err = _run_in_process(
        _argv(Case("bom", "input file", ""), tmp_path, inp) + ["--seed", "123456789"], capsys
    )
    assert code == 0, err
    assert err.startswith("dpsynth: warning: --seed:")  # the known-seed warning, one line
    assert len(err.splitlines()) == 1
    assert inp.read_bytes() == before
    report = strict_json((tmp_path / "r.json").read_text())
    assert report["mechanism"] == "ph" and "123456789" not in (tmp_path / "r.json").read_text()
    assert list(strict_json((tmp_path / "d.json").read_text()))[0] == "confidential"
    assert len(pd.read_csv(tmp_path / "o.csv")) == 2


# ----------------------------------------------------------------------------- via python -m


@pytest.mark.parametrize("case_id", ["latin-1", "epsilon-abc", "out-is-input"])
def test_refusal_contract_from_the_shell(case_id, tmp_path):
    case = next(_case(c) for c in CASES if _case(c).id == case_id)
    inp = case.setup(tmp_path) if case.setup else _default_input(tmp_path)
    before = _snapshot(tmp_path)
    proc = subprocess.run(
        [PYTHON, "-m", "dpsynth", *_argv(case, tmp_path, inp)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.stdout == ""
    _assert_refused(case, proc.returncode, proc.stderr, before, tmp_path)


# ----------------------------------------------------------------------------- signals


class _Child:
    """A ``python`` child whose stderr is read by a thread (so the pipe never fills)."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        # SIGINT at its default in the child, as in a terminal, even when this test runs in
        # a background job (which inherits SIGINT ignored, and so would the CLI)
        self.proc = subprocess.Popen(
            [PYTHON, *args],
            cwd=cwd,
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.err: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.err.append(line)

    def wait_for(self, text: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(text in line for line in self.err):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stderr(self) -> str:
        self._reader.join(timeout=5)
        return "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _descendants(pid: int):
    psutil = pytest.importorskip("psutil")
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(procs) -> list[int]:
    import psutil

    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


SIGNALS = [
    pytest.param(signal.SIGINT, 130, id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, id="SIGTERM"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "status"), [*SIGNALS, pytest.param(signal.SIGKILL, -signal.SIGKILL, id="SIGKILL")]
)
def test_signal_during_sampling_leaves_nothing(sig, status, tmp_path, stan_backend):
    # 2 chains x (1,000,000 + 100) iterations on 2,000 records: minutes of sampling
    # (measured about 3,500 iterations per second per chain); the signal comes 1 s after
    # the engine's first progress line ("Sampling:   0%")
    inp = tmp_path / "in.csv"
    pd.DataFrame({"y": np.random.default_rng(1).beta(1.5, 1.5, 2000)}).to_csv(inp, index=False)
    args = [
        "-m",
        "dpsynth",
        "synthesize",
        str(inp),
        "--column",
        "y",
        "--mechanism",
        "censor-uw",
        "--epsilon",
        "3",
        "--chains",
        "2",
        "--iter-warmup",
        "1000000",
        "--iter-sampling",
        "100",
        "--out",
        "o.csv",
        "--report",
        "r.json",
        "--diagnostics",
        "d.json",
    ]
    before = _snapshot(tmp_path)
    child = _Child(args, tmp_path)
    try:
        assert child.wait_for("[dpsynth] fitting", timeout=300), child.stderr()
        # PyStan's progress line says sampling has started (after any compile); a backend
        # without it gets 5 s, past the start of sampling of a compiled program
        started = child.wait_for("Sampling:", timeout=300)
        time.sleep(1.0 if started else 5.0)
        kids = _descendants(child.proc.pid)
        assert child.proc.poll() is None, child.stderr()
        assert kids, "no sampler process was running when the signal was sent"
        sent = time.monotonic()
        child.proc.send_signal(sig)
        code = child.proc.wait(timeout=10)
        assert time.monotonic() - sent < 10
    finally:
        child.kill()
    err = child.stderr()
    assert code == status, err
    assert "Traceback" not in err
    if sig != signal.SIGKILL:  # SIGKILL cannot be caught: no last word, but no orphan either
        assert "nothing was written" in err.splitlines()[-1]
    assert _snapshot(tmp_path) == before  # no output, no temporary
    deadline = time.monotonic() + 10.0  # the OS reaps killed children asynchronously
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(kids) == [], "child processes of the CLI outlived it by 10 s"

    # cmdstanpy's run folder (data JSON, CSV draws) went with the CLI, also after SIGKILL
    # (its watcher process removes it)
    def runs() -> list[Path]:
        return list(Path(tempfile.gettempdir()).glob(f"dpsynth-cmdstan-{child.proc.pid}-*"))

    deadline = time.monotonic() + 10.0
    while runs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runs() == []


WRITE_HOOK = """
import sys, time
import dpsynth.io as io

_atomic = io.atomic_write_all

def slow(jobs):
    def hold(writer):
        def run(tmp):
            writer(tmp)
            print("test-hook: temporary written", file=sys.stderr, flush=True)
            time.sleep(60)
        return run
    return _atomic([(path, hold(writer)) for path, writer in jobs])

io.atomic_write_all = slow
from dpsynth.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_signal_during_writing_leaves_no_partial_file(sig, status, tmp_path):
    # the writer is held after its first temporary is complete (a hook in the child)
    inp = _default_input(tmp_path)
    (tmp_path / "o.csv").write_text("an earlier release\n")
    before = _snapshot(tmp_path)
    args = [
        "-c",
        WRITE_HOOK,
        "synthesize",
        str(inp),
        "--column",
        "y",
        *BASES["ph"],
        "--out",
        "o.csv",
        "--report",
        "r.json",
        "--diagnostics",
        "d.json",
    ]
    child = _Child(args, tmp_path)
    try:
        assert child.wait_for("test-hook: temporary written", timeout=60), child.stderr()
        parts = [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]
        assert parts and all(p.startswith(".o.csv.") for p in parts)  # the hook is real
        child.proc.send_signal(sig)
        code = child.proc.wait(timeout=10)
    finally:
        child.kill()
    err = child.stderr()
    assert code == status, err
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before  # the earlier file intact, no temporary, no report


# ----------------------------------------------------------------------------- the book page


def test_refusals_page_is_up_to_date():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "refusals_page", REPO / "tools" / "refusals_page.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = tool.render()
    for family, _, _ in REFUSALS:  # every family is on the page
        assert f"| {family} |" in text
    assert (REPO / "book" / "cli_refusals.md").read_text() == text, (
        "book/cli_refusals.md is stale: run python tools/refusals_page.py"
    )


# ----------------------------------------------------------------------------- fast refusals


def _cpu_seconds_of(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "dpsynth", *args], cwd=cwd, capture_output=True, text=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, proc


@pytest.mark.parametrize(
    "args",
    [
        ["synthesize", "nosuch.csv", "--column", "y", "--mechanism", "ph", "--epsilon", "1",
         "--out", "o.csv", "--report", "r.json"],
        ["synthesize", "in.csv", "--column", "y", "--mechanism", "ph", "--epsilon", "-1",
         "--out", "o.csv", "--report", "r.json"],
        ["combine", "in.csv", "--column", "y", "--estimand", "median"],
    ],
    ids=["missing file", "bad epsilon", "bad estimand"],
)  # fmt: skip
def test_usage_errors_cost_well_under_a_cpu_second(tmp_path, args):
    """Arguments and files are checked before numpy, pandas and scipy are imported (which
    alone takes about 1.4 CPU-seconds)."""
    (tmp_path / "in.csv").write_text("y\n0.5\n")
    used, proc = _cpu_seconds_of(args, tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert used < 0.3, f"{used:.2f} CPU-s for a usage error"


def test_wrong_column_lists_the_columns_and_hints_at_the_delimiter(tmp_path):
    (tmp_path / "semi.csv").write_text("income;region\n1;2\n")
    args = ["synthesize", "semi.csv", "--column", "income", "--mechanism", "ph"]
    args += ["--epsilon", "1", "--out", "o.csv", "--report", "r.json"]
    _, proc = _cpu_seconds_of(args, tmp_path)
    assert proc.returncode == 2
    assert "--column: no column 'income'" in proc.stderr
    assert "'income;region'" in proc.stderr and "semicolons" in proc.stderr
    (tmp_path / "ok.csv").write_text("income,region\n1,2\n")
    args[1], args[3] = "ok.csv", "wage"
    _, proc = _cpu_seconds_of(args, tmp_path)
    assert "its columns are 'income', 'region'" in proc.stderr
    assert "semicolons" not in proc.stderr
