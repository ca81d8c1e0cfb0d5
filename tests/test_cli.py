"""The CLI end to end, and one test per bad-input case (exit 2, one line, nothing written)."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import main


@pytest.fixture()
def beta_csv(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "in.csv"
    pd.DataFrame(
        {"y": rng.beta(0.5, 3, 300).clip(1e-6, 1 - 1e-6), "x": rng.normal(size=300)}
    ).to_csv(path, index=False)
    return path


def _run_bad(tmp_path, capsys, argv, param):
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    code = main([*argv, "--out", str(out), "--report", str(rep), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and param in err[0], err
    assert not out.exists() and not rep.exists()
    assert list(tmp_path.glob(".out.csv*")) == []


def _csv(tmp_path, values, name="bad.csv"):
    path = tmp_path / name
    pd.DataFrame({"y": values}).to_csv(path, index=False)
    return str(path)


BASE = [
    "synthesize",
    "--column",
    "y",
    "--model",
    "beta",
    "--mechanism",
    "censor-w",
    "--epsilon",
    "4",
]


def test_missing_file(tmp_path, capsys):
    _run_bad(tmp_path, capsys, [*BASE, str(tmp_path / "nope.csv")], "IN.csv")


def test_missing_column(tmp_path, capsys, beta_csv):
    argv = [
        "synthesize",
        str(beta_csv),
        "--column",
        "salary",
        "--mechanism",
        "lw",
        "--epsilon",
        "4",
    ]
    _run_bad(tmp_path, capsys, argv, "--column")


def test_nan_values(tmp_path, capsys):
    _run_bad(tmp_path, capsys, [*BASE, _csv(tmp_path, [0.1, np.nan, 0.3])], "--column")


def test_infinite_values(tmp_path, capsys):
    _run_bad(tmp_path, capsys, [*BASE, _csv(tmp_path, [0.1, np.inf, 0.3])], "--column")


def test_beta_outside_support(tmp_path, capsys):
    _run_bad(tmp_path, capsys, [*BASE, _csv(tmp_path, [0.1, 1.5, 0.3])], "--column")


def test_counts_not_integers(tmp_path, capsys):
    argv = [
        "synthesize",
        _csv(tmp_path, [1, 2.5, 3]),
        "--column",
        "y",
        "--model",
        "poisson",
        "--mechanism",
        "lw",
        "--epsilon",
        "4",
    ]
    _run_bad(tmp_path, capsys, argv, "--column")


def test_counts_negative(tmp_path, capsys):
    argv = [
        "synthesize",
        _csv(tmp_path, [1, -2, 3]),
        "--column",
        "y",
        "--model",
        "negbin",
        "--mechanism",
        "lw",
        "--epsilon",
        "4",
    ]
    _run_bad(tmp_path, capsys, argv, "--column")


@pytest.mark.parametrize("eps", ["0", "-1", "inf", "nan", "abc"])
def test_bad_epsilon(tmp_path, capsys, beta_csv, eps):
    argv = [*BASE[:-1], eps, str(beta_csv)]
    _run_bad(tmp_path, capsys, argv, "--epsilon")


def test_ph_without_bounds(tmp_path, capsys, beta_csv):
    argv = ["synthesize", str(beta_csv), "--column", "y", "--mechanism", "ph", "--epsilon", "1"]
    _run_bad(tmp_path, capsys, argv, "--bounds")


def test_ph_inverted_bounds(tmp_path, capsys, beta_csv):
    argv = [
        "synthesize",
        str(beta_csv),
        "--column",
        "y",
        "--mechanism",
        "ph",
        "--epsilon",
        "1",
        "--bounds",
        "1",
        "0",
    ]
    _run_bad(tmp_path, capsys, argv, "--bounds")


def test_unknown_model(tmp_path, capsys, beta_csv):
    argv = [
        "synthesize",
        str(beta_csv),
        "--column",
        "y",
        "--model",
        "lognormal",
        "--mechanism",
        "lw",
        "--epsilon",
        "1",
    ]
    _run_bad(tmp_path, capsys, argv, "--model")


def test_unknown_mechanism(tmp_path, capsys, beta_csv):
    argv = ["synthesize", str(beta_csv), "--column", "y", "--mechanism", "magic", "--epsilon", "1"]
    _run_bad(tmp_path, capsys, argv, "--mechanism")


def test_m_below_one(tmp_path, capsys, beta_csv):
    _run_bad(tmp_path, capsys, [*BASE, str(beta_csv), "--m", "0"], "--m")


def test_empty_data(tmp_path, capsys):
    path = tmp_path / "empty.csv"
    path.write_text("y\n")
    _run_bad(tmp_path, capsys, [*BASE, str(path)], "--column")


def test_missing_stan_file(tmp_path, capsys, beta_csv):
    argv = [*BASE, str(beta_csv), "--stan-file", str(tmp_path / "mine.stan")]
    _run_bad(tmp_path, capsys, argv, "--stan-file")


def test_bad_input_exit_status_from_the_shell(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpsynth",
            *BASE,
            str(tmp_path / "none.csv"),
            "--out",
            str(tmp_path / "o.csv"),
            "--report",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("dpsynth: error: IN.csv")
    assert not (tmp_path / "o.csv").exists()


def test_ph_end_to_end(tmp_path, beta_csv):
    out, rep = tmp_path / "ph.csv", tmp_path / "ph.json"
    code = main(
        [
            "synthesize",
            str(beta_csv),
            "--column",
            "y",
            "--mechanism",
            "ph",
            "--epsilon",
            "1",
            "--bounds",
            "0",
            "1",
            "--m",
            "2",
            "--seed",
            "3",
            "--out",
            str(out),
            "--report",
            str(rep),
            "--quiet",
        ]
    )
    assert code == 0
    data = pd.read_csv(out)
    assert list(data.columns) == ["synthetic_set", "y"] and len(data) == 600
    assert json.loads(rep.read_text())["mechanism"] == "ph"


@pytest.mark.slow
def test_censor_w_end_to_end_subprocess(tmp_path, beta_csv):
    out, rep = tmp_path / "syn.csv", tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpsynth",
            "synthesize",
            str(beta_csv),
            "--column",
            "y",
            "--model",
            "beta",
            "--mechanism",
            "censor-w",
            "--epsilon",
            "4",
            "--seed",
            "11",
            "--iter-warmup",
            "300",
            "--iter-sampling",
            "300",
            "--out",
            str(out),
            "--report",
            str(rep),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # results go to files; progress to stderr
    assert "[dpsynth]" in proc.stderr
    report = json.loads(rep.read_text())
    assert report["guarantee"] == "DP" and report["lipschitz_bound"] <= 2.0
    assert report["epsilon"] <= 4.0 and report["epsilon_target"] == 4.0
    assert report["backend"] == "pystan"
    data = pd.read_csv(out)
    assert list(data.columns) == ["y"] and len(data) == 300
    assert data["y"].between(0, 1).all()


@pytest.mark.slow
def test_beta_regression_with_covariates_and_bounds(tmp_path):
    rng = np.random.default_rng(3)
    n = 200
    frame = pd.DataFrame(
        {
            "salary": rng.integers(20000, 300000, n),
            "gender": rng.choice(["F", "M"], n),
            "wkswk": rng.integers(2, 53, n),
        }
    )
    path = tmp_path / "sdr.csv"
    frame.to_csv(path, index=False)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    code = main(
        [
            "synthesize",
            str(path),
            "--column",
            "salary",
            "--model",
            "beta-regression",
            "--covariates",
            "gender,wkswk",
            "--bounds",
            "0",
            "509000",
            "--mechanism",
            "censor-uw",
            "--epsilon",
            "5",
            "--iter-warmup",
            "300",
            "--iter-sampling",
            "300",
            "--out",
            str(out),
            "--report",
            str(rep),
            "--quiet",
        ]
    )
    assert code == 0
    syn = pd.read_csv(out)["salary"]
    assert syn.between(0, 509000).all() and len(syn) == n
