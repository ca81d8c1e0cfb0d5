"""The command line end to end: synthesize (PH, counts, SBS, a Stan mechanism with
covariates) and combine. The refusals are tested in test_cli_contract.py."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from dpsynth import __version__
from dpsynth.cli.commands import main
from dpsynth.mechanisms.inference import combine_frame
from dpsynth.release.single import CONFIDENTIAL_BANNER


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture()
def beta_csv(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "in.csv"
    pd.DataFrame({"y": rng.beta(1.5, 1.5, 200), "x": rng.normal(size=200)}).to_csv(
        path, index=False
    )
    return path


def test_version(capsys):
    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.strip() == f"dpsynth {__version__}"


def test_ph_end_to_end(tmp_path, beta_csv, capsys, strict_json):
    out, rep, diag = tmp_path / "ph.csv", tmp_path / "ph.json", tmp_path / "diag.json"
    seed = "918273645"
    code, stdout, err = _run(
        [
            "synthesize",
            str(beta_csv),
            "--column",
            "y",
            "--mechanism",
            "ph",
            "--epsilon",
            "2",
            "--bounds",
            "0",
            "1",
            "--m",
            "2",
            "--seed",
            seed,
            "--out",
            str(out),
            "--report",
            str(rep),
            "--diagnostics",
            str(diag),
        ],
        capsys,
    )
    assert code == 0 and stdout == ""
    lines = err.splitlines()
    assert lines[0].startswith("dpsynth: warning: --seed:") and "not private" in lines[0]
    assert lines[-1].startswith("[dpsynth] wrote")
    data = pd.read_csv(out)
    assert list(data.columns) == ["synthetic_set", "y"] and len(data) == 400
    assert data["y"].between(0, 1).all()
    report = strict_json(rep.read_text())
    assert report["mechanism"] == "ph" and report["guarantee"] == "not private (known seed)"
    assert report["epsilon"] is None and report["epsilon_budgeted"] == 2.0
    assert report["if_unseeded"]["guarantee"] == "DP"
    assert report["if_unseeded"]["epsilon_per_set"] == 1.0
    assert report["seed"] == "user-supplied (release NOT private)"
    assert seed not in rep.read_text()
    diagnostics = strict_json(diag.read_text())
    assert list(diagnostics)[0] == "confidential"
    assert diagnostics["confidential"] == CONFIDENTIAL_BANNER
    assert diagnostics["seed"] == int(seed)
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_ph_counts_with_integer_bins(tmp_path, capsys, strict_json):
    inp = tmp_path / "counts.csv"
    pd.DataFrame({"n": np.random.default_rng(2).integers(0, 8, 150)}).to_csv(inp, index=False)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    code, _, err = _run(
        [
            "synthesize",
            str(inp),
            "--column",
            "n",
            "--mechanism",
            "ph",
            "--integer",
            "--consistency",
            "simplex",
            "--bounds",
            "0",
            "7",
            "--epsilon",
            "1",
            "--out",
            str(out),
            "--report",
            str(rep),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0 and err == ""  # --quiet, no seed: nothing on stderr
    syn = pd.read_csv(out)["n"]
    assert syn.dtype.kind == "i" and syn.between(0, 7).all() and len(syn) == 150
    bound = strict_json(rep.read_text())["internal_bound"]
    assert bound["n_bins"] == 8 and bound["integer"] is True
    assert bound["consistency"] == "simplex"
    args = ["synthesize", str(inp), "--column", "n", "--mechanism", "ph", "--bounds", "0", "7"]
    args += ["--epsilon", "1", "--out", str(tmp_path / "x.csv"), "--consistency", "round"]
    code, _, err = _run(args, capsys)
    assert code == 2 and "--consistency" in err and "simplex" in err
    assert not (tmp_path / "x.csv").exists()


def test_sbs_end_to_end(tmp_path, capsys, strict_json):
    inp = tmp_path / "g.csv"
    pd.DataFrame({"v": np.random.default_rng(3).normal(1.0, 1.0, 200)}).to_csv(inp, index=False)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    code, _, err = _run(
        [
            "synthesize",
            str(inp),
            "--column",
            "v",
            "--mechanism",
            "sbs",
            "--clip-to-bounds",  # N(1, 1) draws beyond [-4, 4] (issue 27)
            "--bounds",
            "-4",
            "4",
            "--epsilon",
            "3",
            "--m",
            "3",
            "--allocation",
            "0.7",
            "--out",
            str(out),
            "--report",
            str(rep),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    data = pd.read_csv(out)
    assert list(data.columns) == ["synthetic_set", "v"] and len(data) == 600
    report = strict_json(rep.read_text())
    assert report["epsilon"] == pytest.approx(3.0) and report["epsilon_per_set"] == 1.0
    assert len(report["ledger"]["spends"]) == 3
    assert report["internal_bound"]["allocation"] == 0.7


# ----------------------------------------------------------------------------- combine


@pytest.fixture
def synth_csv(tmp_path, capsys):
    inp = tmp_path / "g.csv"
    pd.DataFrame({"y": np.random.default_rng(3).normal(1.0, 1.0, 200)}).to_csv(inp, index=False)
    out = tmp_path / "synth.csv"
    code, _, err = _run(
        [
            "synthesize",
            str(inp),
            "--column",
            "y",
            "--mechanism",
            "sbs",
            "--clip-to-bounds",  # N(1, 1) draws beyond [-4, 4] (issue 27)
            "--bounds",
            "-4",
            "4",
            "--epsilon",
            "5",
            "--m",
            "5",
            "--out",
            str(out),
            "--report",
            str(tmp_path / "r.json"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    return out


def test_combine_json_matches_library(synth_csv, capsys, strict_json):
    code, out, _ = _run(
        ["combine", str(synth_csv), "--column", "y", "--estimand", "mean", "--json"], capsys
    )
    assert code == 0
    res = strict_json(out)
    ref = combine_frame(pd.read_csv(synth_csv), "y", "mean")
    assert res["m"] == 5 and res["rule"] == "thm7"
    assert res["estimate"] == pytest.approx(ref.estimate)
    assert res["variance"] == pytest.approx(ref.variance)
    assert res["lower"] < res["estimate"] < res["upper"]


def test_combine_human_readable(synth_csv, capsys):
    argv = ["combine", str(synth_csv), "--column", "y", "--estimand", "mean", "--rule", "rubin"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert "rule rubin" in out and "95% CI" in out and "df" in out


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--column", "nope", "--estimand", "mean"], "--column"),
        (["--column", "y", "--estimand", "mean", "--set-column", "set"], "--set-column"),
        (["--column", "y", "--estimand", "proportion"], "--column"),
        (["--column", "y", "--estimand", "mean", "--rule", "single"], "--rule"),
        (["--column", "y", "--estimand", "median"], "--estimand"),
    ],
)
def test_combine_refusals(synth_csv, capsys, extra, flag):
    code, out, err = _run(["combine", str(synth_csv), *extra], capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("dpsynth: error: ")
    assert flag in err


def test_combine_missing_file(tmp_path, capsys):
    code, _, err = _run(
        ["combine", str(tmp_path / "none.csv"), "--column", "y", "--estimand", "mean"], capsys
    )
    assert code == 2 and err.startswith("dpsynth: error: SYNTH.csv")


# ----------------------------------------------------------------------------- Stan


@pytest.mark.slow
def test_censor_uw_end_to_end_subprocess(tmp_path, beta_csv, strict_json):
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
            "--mechanism",
            "censor-uw",
            "--epsilon",
            "4",
            "--chains",
            "4",
            "--iter-warmup",
            "1000",
            "--iter-sampling",
            "1000",
            "--out",
            str(out),
            "--report",
            str(rep),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # results go to files; progress to stderr
    assert "[dpsynth] fitting" in proc.stderr
    report = strict_json(rep.read_text())
    assert report["guarantee"] == "DP" and report["epsilon"] == 4.0
    assert report["internal_bound"]["censor_bound_M"] == 1.0  # substitution: 4 / 4
    assert report["seed"] == "operating system"
    assert report["backend"] in ("pystan", "cmdstanpy")
    assert report["sampler"] == {
        "chains": 4,
        "iter_warmup": 1000,
        "iter_sampling": 1000,
        "adapt_delta": 0.8,
    }
    data = pd.read_csv(out)
    assert list(data.columns) == ["y"] and len(data) == 200
    assert data["y"].between(0, 1, inclusive="neither").all()


@pytest.mark.slow
def test_beta_regression_with_public_covariates_and_bounds(tmp_path, capsys, strict_json):
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
    code, _, err = _run(
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
            "unweighted",
            "--epsilon",
            "5",
            "--m",
            "2",
            "--chains",
            "2",
            "--iter-warmup",
            "300",
            "--iter-sampling",
            "300",
            "--out",
            str(out),
            "--report",
            str(rep),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    syn = pd.read_csv(out)
    assert list(syn.columns) == ["synthetic_set", "salary", "gender", "wkswk"]
    assert len(syn) == 2 * n
    # the public bounds map back to (lo - 0.5, hi + 0.5) (dpsynth.models.scaling.unscale_from_unit)
    assert syn["salary"].between(-0.5, 509000.5).all()
    for j in (1, 2):  # the covariates are written as given, beside each set
        part = syn[syn["synthetic_set"] == j].reset_index(drop=True)
        pd.testing.assert_frame_equal(part[["gender", "wkswk"]], frame[["gender", "wkswk"]])
    report = strict_json(rep.read_text())
    assert report["guarantee"] == "aDP" and report["epsilon"] is None
    assert any("public" in c for c in report["caveats"])


def test_plan_runs_candidates_on_a_public_file_and_writes_nothing(tmp_path, beta_csv, capsys):
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["plan", str(beta_csv), "--column", "y", "--model", "beta", "--epsilon", "4"]
    argv += ["--bounds", "0", "1", "--mechanisms", "ph", "--json"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["candidate"] for r in rows] == ["ph"]
    assert rows[0]["verdict"] in ("good", "fair", "poor") and rows[0]["guarantee"] == "DP"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_plan_refuses_epsilon_above_the_sanity_limit_in_one_line(tmp_path, beta_csv, capsys):
    """plan has no --allow-large-epsilon: above the limit it says so itself (before, each
    candidate was refused with advice to pass a flag plan does not accept)."""
    argv = ["plan", str(beta_csv), "--column", "y", "--model", "beta", "--epsilon", "25"]
    argv += ["--bounds", "0", "1", "--mechanisms", "ph"]
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("dpsynth: error: --epsilon: plan compares releases up to the sanity")
    assert err.count("\n") == 1 and "allow" not in err


def test_synthesize_prints_a_confidential_verdict_not_in_the_report(tmp_path, beta_csv, capsys):
    out, rep, diag = tmp_path / "o.csv", tmp_path / "r.json", tmp_path / "d.json"
    argv = ["synthesize", str(beta_csv), "--column", "y", "--mechanism", "ph"]
    argv += ["--epsilon", "3", "--bounds", "0", "1", "--out", str(out), "--report", str(rep)]
    argv += ["--diagnostics", str(diag)]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    assert "[dpsynth] CONFIDENTIAL" in err and "verdict:" in err and "next step:" in err
    assert "verdict" not in rep.read_text()
    assert json.loads(diag.read_text())["utility"]["verdict"] in ("good", "fair", "poor")
