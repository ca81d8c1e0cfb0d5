"""The per-dataset privacy-budget ledger (issue 27): charged before the data are read,
refused attempts recorded, the cap refused up front, concurrent appends kept."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import commands
from dpsynth.errors import InputError
from dpsynth.privacy import budget
from dpsynth.release.single import synthesize

Y = np.array([1.0, 2.0, 3.0, 50.0, 99.0])


def _ph(path: Path, **kw):
    args = {"mechanism": "ph", "epsilon": 1.0, "bounds": (0, 100), "budget_file": path, **kw}
    return synthesize(Y, **args)


def test_release_is_charged_and_cited_in_the_report(tmp_path):
    path = tmp_path / "budget.jsonl"
    rel = _ph(path, budget_total=3.0)
    assert rel.report["budget"]["epsilon_charged"] == 1.0
    # the place in the ledger counts earlier (possibly refused) attempts: confidential
    assert not {"entry", "spent_after", "total"} & set(rel.report["budget"])
    assert rel.diagnostics["budget"]["entry"] == 1
    assert rel.diagnostics["budget"]["spent_after"] == 1.0
    assert rel.diagnostics["budget"]["total"] == 3.0
    second = _ph(path)
    assert second.diagnostics["budget"]["entry"] == 2
    assert second.report["budget"] == rel.report["budget"]  # nothing counts attempts
    header, lines = budget.read_ledger(path)
    assert header["total_epsilon"] == 3.0 and "CONFIDENTIAL" in header["confidential"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [x.get("outcome") for x in lines][:2] == ["pending", "released"]
    # human-readable: JSON lines
    assert all(json.loads(t) for t in path.read_text().splitlines())


def test_cap_refused_before_the_data_and_nothing_written(tmp_path):
    path = tmp_path / "budget.jsonl"
    _ph(path, budget_total=1.5)
    before = path.read_bytes()
    with pytest.raises(InputError) as err:
        _ph(path)
    assert err.value.param == "budget_file" and "exceed" in str(err.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.jsonl"]


def test_refused_and_failed_attempts_cost_budget(tmp_path, monkeypatch):
    path = tmp_path / "budget.jsonl"
    with pytest.raises(InputError):  # a record above the bounds: refused after the charge
        synthesize(
            np.r_[Y, 104.0],
            mechanism="ph",
            epsilon=1.0,
            bounds=(0, 100),
            budget_file=path,
            budget_total=5.0,
            dataset_sha256="d" * 64,
        )
    import dpsynth.release.single as release

    def boom(*a, **k):
        raise RuntimeError("a failure inside the mechanism")

    monkeypatch.setattr(release, "_ph", boom)  # the runner PH's declaration names
    with pytest.raises(RuntimeError):
        synthesize(
            Y,
            mechanism="ph",
            epsilon=2.0,
            bounds=(0, 100),
            budget_file=path,
            dataset_sha256="d" * 64,
        )
    s = budget.summary(path)
    assert s["spent"] == 3.0
    assert [e["outcome"] for e in s["entries"]] == ["refused: y", "failed: RuntimeError"]


def test_cap_set_once_and_dataset_checked(tmp_path):
    path = tmp_path / "budget.jsonl"
    with pytest.raises(InputError) as err:
        _ph(path)  # a new file needs its cap
    assert err.value.param == "budget_total" and not path.exists()
    _ph(path, budget_total=4.0)
    with pytest.raises(InputError) as err:
        _ph(path, budget_total=9.0)
    assert err.value.param == "budget_total"
    with pytest.raises(InputError) as err:
        synthesize(Y[:3], mechanism="ph", epsilon=1.0, bounds=(0, 100), budget_file=path)
    assert "another dataset" in str(err.value)
    with pytest.raises(InputError):
        budget.read_ledger(Path(__file__))  # not a ledger


class _Watched:
    """An outcome that checks, when first read, that the ledger already holds its charge."""

    def __init__(self, values: np.ndarray, ledger: Path) -> None:
        self.values, self.ledger, self.charged_first = values, ledger, None

    def __array__(self, dtype=None, copy=None):
        if self.charged_first is None:
            lines = budget.read_ledger(self.ledger)[1] if self.ledger.exists() else []
            self.charged_first = any(x.get("outcome") == "pending" for x in lines)
        return self.values.astype(dtype or float)

    def __len__(self) -> int:
        return len(self.values)


def test_nothing_read_before_the_charge_library(tmp_path):
    path = tmp_path / "budget.jsonl"
    y = _Watched(Y, path)
    synthesize(
        y,
        mechanism="ph",
        epsilon=1.0,
        bounds=(0, 100),
        budget_file=path,
        budget_total=2.0,
        dataset_sha256="e" * 64,  # the caller's identity: y is not hashed
    )
    assert y.charged_first is True


def _release_files(tmp_path: Path) -> list[str]:
    """epsilon 1 and the two files every ``synthesize`` call here names."""
    return [
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "o.csv"),
        "--report",
        str(tmp_path / "r.json"),
    ]


def test_nothing_read_before_the_charge_cli(tmp_path, monkeypatch, capsys):
    inp, ledger = tmp_path / "in.csv", tmp_path / "budget.jsonl"
    pd.DataFrame({"y": [0.1, np.nan, 0.3]}).to_csv(inp, index=False)
    seen = []
    real = commands.read_input

    def watched(path, *a, **k):
        seen.append(budget.read_ledger(ledger)[1][-1]["outcome"])
        return real(path, *a, **k)

    monkeypatch.setattr(commands, "read_input", watched)
    argv = ["synthesize", str(inp), "--column", "y", "--mechanism", "ph", "--bounds", "0", "1"]
    argv += _release_files(tmp_path)
    argv += ["--budget-file", str(ledger), "--budget-total", "4"]
    assert commands.main(argv) == 2  # the missing value is refused after the charge
    assert seen == ["pending"]
    assert budget.summary(ledger)["entries"][0]["outcome"] == "refused: --column"
    header = budget.read_ledger(ledger)[0]
    assert header["dataset_sha256"] == budget.file_sha256(inp)
    assert not (tmp_path / "o.csv").exists()
    assert "error: --column" in capsys.readouterr().err


_CHARGER = """
import sys
from dpsynth.privacy import budget
for _ in range(int(sys.argv[2])):
    budget.charge(sys.argv[1], dataset_sha256="f" * 64, epsilon=0.01, what="p", total=100.0)
"""


def test_concurrent_charges_are_all_kept(tmp_path):
    path = tmp_path / "budget.jsonl"
    budget.charge(path, dataset_sha256="f" * 64, epsilon=0.01, what="first", total=100.0)
    procs = [subprocess.Popen([sys.executable, "-c", _CHARGER, str(path), "25"]) for _ in range(2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    header, lines = budget.read_ledger(path)
    entries = [x["entry"] for x in lines]
    assert sorted(entries) == list(range(1, 52))
    assert budget.summary(path)["spent"] == pytest.approx(0.51)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--drop-missing"], "--n-synthetic"),
        (["--neighbours", "add-remove"], "--n-synthetic"),
        (["--n-synthetic", "5", "--covariates", "x"], "--n-synthetic"),
    ],
)
def test_usage_errors_cost_no_budget(tmp_path, capsys, extra, named):
    """Settings the library refuses whatever the data are refused by the command line before
    the charge (the same functions, dpsynth.errors): no ledger line, no file."""
    inp, ledger = tmp_path / "in.csv", tmp_path / "budget.jsonl"
    pd.DataFrame({"y": [0.1, 0.2, 0.3], "x": [1.0, 2.0, 3.0]}).to_csv(inp, index=False)
    mechanism = ["--mechanism", "censor-uw", "--model", "beta"] if "--covariates" in extra else [
        "--mechanism", "ph"
    ]  # fmt: skip
    argv = ["synthesize", str(inp), "--column", "y", *mechanism, "--bounds", "0", "1"]
    argv += _release_files(tmp_path)
    argv += extra
    argv += ["--budget-file", str(ledger), "--budget-total", "4"]
    assert commands.main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {named}" in err and err.count("\n") == 1, err
    assert not ledger.exists() and not (tmp_path / "o.csv").exists()
