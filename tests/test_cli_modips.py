"""Tests of dpsynth.cli_modips: synthesize_sbs and the combine subcommand, via a local parser."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest
from dpsynth.cli_modips import add_combine_command, add_sbs_arguments, synthesize_sbs

from dpsynth.errors import InputError
from dpsynth.inference import combine_frame


def _synth_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpsynth synthesize")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--bounds", nargs=2, type=float, default=None)
    p.add_argument("--m", type=int, default=1)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--column", default="value")
    add_sbs_arguments(p)
    return p


def _combine_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpsynth")
    add_combine_command(p.add_subparsers(dest="command"))
    return p


def _args(*argv: str) -> argparse.Namespace:
    return _synth_parser().parse_args(list(argv))


@pytest.fixture
def gauss() -> np.ndarray:
    return np.random.default_rng(3).normal(1.0, 1.0, size=200)


def test_synthesize_sbs_gaussian_multiple_sets(gauss):
    args = _args(
        "--epsilon",
        "2",
        "--bounds",
        "-4",
        "4",
        "--m",
        "3",
        "--seed",
        "5",
        "--column",
        "y",
    )
    frame, report = synthesize_sbs(gauss, args)
    assert list(frame.columns) == ["y", "synthetic_set"]
    assert frame["synthetic_set"].dtype.kind == "i"
    assert frame.groupby("synthetic_set").size().to_dict() == {1: 200, 2: 200, 3: 200}
    assert frame["y"].between(-4, 4).all()
    json.dumps(report)
    for key, val in {
        "mechanism": "sbs",
        "guarantee": "DP",
        "epsilon_target": 2.0,
        "n_records": 200,
        "m": 3,
        "seed": 5,
        "bounding": "bit",
        "data_type": "gaussian",
    }.items():
        assert report[key] == val
    assert report["epsilon"] == pytest.approx(2.0)
    assert [s["epsilon"] for s in report["ledger"]["spends"]] == pytest.approx([2 / 3] * 3)
    # only sanitized statistics are reported, never the raw ones
    text = json.dumps(report)
    assert repr(float(gauss.mean())) not in text and repr(float(gauss.var(ddof=1))) not in text
    assert all(s["mean"] != gauss.mean() for s in report["sanitized_statistics"])


def test_synthesize_sbs_binary_single_set_and_reproducible():
    x = (np.random.default_rng(4).random(150) < 0.3).astype(float)
    args = _args("--epsilon", "1", "--seed", "9", "--data-type", "binary")
    f1, r1 = synthesize_sbs(x, args)
    f2, _ = synthesize_sbs(x, args)
    assert list(f1.columns) == ["value"] and len(f1) == 150
    assert set(f1["value"].unique()) <= {0, 1} and f1["value"].dtype.kind == "i"
    assert f1.equals(f2)
    assert r1["m"] == 1 and r1["data_type"] == "binary"


def test_synthesize_sbs_known_sd_and_truncation(gauss):
    args = _args(
        "--epsilon",
        "1",
        "--bounds",
        "-4",
        "4",
        "--known-sd",
        "1",
        "--m",
        "2",
        "--bounding",
        "truncation",
        "--seed",
        "1",
    )
    frame, report = synthesize_sbs(gauss, args)
    assert report["bounding"] == "truncation" and report["known_sd"] == 1.0
    assert frame["value"].between(-4, 4).all() and frame["synthetic_set"].nunique() == 2


def test_synthesize_sbs_individualized_allocation_in_ledger(gauss):
    args = _args("--epsilon", "1", "--bounds", "-4", "4", "--allocation", "0.8", "--seed", "2")
    _, report = synthesize_sbs(gauss, args)
    assert report["allocation"] == 0.8
    split = {s["statistic"]: s["epsilon"] for s in report["budget_split_per_set"]}
    assert split == {"mean": pytest.approx(0.8), "variance": pytest.approx(0.2)}


@pytest.mark.parametrize("eps", ["0", "-1", "nan", "inf"])
def test_bad_epsilon(gauss, eps):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", eps, "--bounds", "-4", "4"))
    assert exc.value.param == "--epsilon"


def test_missing_bounds(gauss):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1"))
    assert exc.value.param == "--bounds"


def test_inverted_bounds(gauss):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1", "--bounds", "4", "-4"))
    assert exc.value.param == "--bounds"


@pytest.mark.parametrize("m", ["0", "-3"])
def test_m_below_one(gauss, m):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1", "--bounds", "-4", "4", "--m", m))
    assert exc.value.param == "--m"


@pytest.mark.parametrize("w", ["0", "1", "1.5", "-0.1"])
def test_allocation_outside_unit_interval(gauss, w):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1", "--bounds", "-4", "4", "--allocation", w))
    assert exc.value.param == "--allocation"


def test_allocation_with_communal_is_rejected(gauss):
    args = _args(
        "--epsilon",
        "1",
        "--bounds",
        "-4",
        "4",
        "--allocation",
        "0.5",
        "--sanitization",
        "communal",
    )
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, args)
    assert exc.value.param == "--allocation"


def test_empty_data():
    with pytest.raises(InputError, match="empty") as exc:
        synthesize_sbs(np.array([]), _args("--epsilon", "1", "--bounds", "-4", "4"))
    assert exc.value.param == "--column"


def test_nan_values(gauss):
    x = gauss.copy()
    x[3] = np.nan
    with pytest.raises(InputError, match="NaN") as exc:
        synthesize_sbs(x, _args("--epsilon", "1", "--bounds", "-4", "4"))
    assert exc.value.param == "--column"


def test_binary_needs_zero_one_values(gauss):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1", "--data-type", "binary"))
    assert exc.value.param == "--column"


def test_bad_known_sd(gauss):
    with pytest.raises(InputError) as exc:
        synthesize_sbs(gauss, _args("--epsilon", "1", "--bounds", "-4", "4", "--known-sd", "-1"))
    assert exc.value.param == "--known-sd"


# ----------------------------------------------------------------- combine subcommand


@pytest.fixture
def synth_csv(tmp_path, gauss):
    args = _args(
        "--epsilon",
        "5",
        "--bounds",
        "-4",
        "4",
        "--m",
        "5",
        "--seed",
        "11",
        "--column",
        "y",
    )
    frame, _ = synthesize_sbs(gauss, args)
    path = tmp_path / "synth.csv"
    frame.to_csv(path, index=False)
    return path


def test_combine_json_matches_library(synth_csv, capsys):
    args = _combine_parser().parse_args(
        ["combine", str(synth_csv), "--column", "y", "--estimand", "mean", "--json"]
    )
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    ref = combine_frame(pd.read_csv(synth_csv), "y", "mean")
    assert out["m"] == 5 and out["rule"] == "thm7"
    assert out["estimate"] == pytest.approx(ref.estimate)
    assert out["variance"] == pytest.approx(ref.variance)
    assert out["lower"] < out["estimate"] < out["upper"]


def test_combine_human_readable(synth_csv, capsys):
    args = _combine_parser().parse_args(
        [
            "combine",
            str(synth_csv),
            "--column",
            "y",
            "--estimand",
            "mean",
            "--rule",
            "rubin",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "rule rubin" in out and "95% CI" in out and "df" in out


def test_combine_bad_column(synth_csv):
    args = _combine_parser().parse_args(
        ["combine", str(synth_csv), "--column", "nope", "--estimand", "mean"]
    )
    with pytest.raises(InputError) as exc:
        args.func(args)
    assert exc.value.param == "--column"


def test_combine_missing_set_column(synth_csv):
    args = _combine_parser().parse_args(
        [
            "combine",
            str(synth_csv),
            "--column",
            "y",
            "--estimand",
            "mean",
            "--set-column",
            "set",
        ]
    )
    with pytest.raises(InputError) as exc:
        args.func(args)
    assert exc.value.param == "--set-column"


def test_combine_missing_file(tmp_path):
    args = _combine_parser().parse_args(
        ["combine", str(tmp_path / "none.csv"), "--column", "y", "--estimand", "mean"]
    )
    with pytest.raises(InputError) as exc:
        args.func(args)
    assert exc.value.param == "SYNTH.csv"


def test_combine_proportion_needs_binary_values(synth_csv):
    args = _combine_parser().parse_args(
        ["combine", str(synth_csv), "--column", "y", "--estimand", "proportion"]
    )
    with pytest.raises(InputError) as exc:
        args.func(args)
    assert exc.value.param == "--column"
