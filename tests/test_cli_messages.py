"""The CLI's last words in three corners the fault and fuzz tests found: an echoed argument
with a line break, an operating-system error during the run, and a column whose share of
epsilon is out of range (refused before any budget is charged)."""

from __future__ import annotations

import errno

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import commands
from dpsynth.cli.commands import main


def test_an_unknown_argument_with_a_line_break_is_refused_in_one_line(capsys):
    for extra in ("a\nb", "x\u2028y", ""):
        with pytest.raises(SystemExit) as exit_:
            main(["combine", "s.csv", "--column", "v", "--estimand", "mean", extra])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("dpsynth: error: ") and err.count("\n") == 1, repr(err)
        assert not err.rstrip("\n").endswith(":")


def test_an_os_error_during_the_run_is_one_line_naming_the_path(monkeypatch, capsys):
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "out.csv")

    monkeypatch.setitem(commands._RUNNERS, "combine", full)
    assert main(["combine", "s.csv", "--column", "v", "--estimand", "mean"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device (out.csv)" in err
    assert "whole or absent" in err and "nothing was written" not in err


def test_a_share_too_small_for_its_column_is_refused_before_the_charge(tmp_path, capsys):
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": np.linspace(0, 1, 20), "b": ["x", "y"] * 10}).to_csv(data, index=False)
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[[confidential]]\nname = "a"\ntype = "continuous"\nmechanism = "ph"\nbounds = [0, 1]\n'
        "share = 1\n\n"
        '[[confidential]]\nname = "b"\ntype = "binary"\nmechanism = "ph"\nlevels = ["x", "y"]\n'
        "share = 1e12\n"
    )
    ledger = tmp_path / "budget.jsonl"
    argv = ["synthesize-table", str(data), "--spec", str(spec), "--epsilon", "1"]
    argv += ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    argv += ["--budget-file", str(ledger), "--budget-total", "5", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpsynth: error: --epsilon: column 'a': its share of epsilon")
    assert not ledger.exists() and not (tmp_path / "o.csv").exists()
