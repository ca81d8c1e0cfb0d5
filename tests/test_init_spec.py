"""``dpsynth init-spec``: a starter table spec from a public file that the spec parser
accepts, every guess marked for the curator, nothing written on refusal."""

from __future__ import annotations

import hashlib
import tomllib

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli.commands import main
from dpsynth.errors import InputError
from dpsynth.models.catalogue import get_model
from dpsynth.table import starter
from dpsynth.table.design import column_codes
from dpsynth.table.spec import parse_spec
from dpsynth.table.steps import calibration_targets


def _public(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.lognormal(10, 1, n).round(2),
            "share": rng.uniform(0, 1, n),
            "sex": rng.choice(["f", "m"], n),
            "region": rng.choice(["north", "south", "east"], n),
            "flag": rng.integers(0, 2, n).astype(float),
            "change": rng.normal(0, 1, n),
            "note": [f"free text {i}" for i in range(n)],
            "empty": np.nan,
        }
    )
    frame.loc[::7, "flag"] = np.nan  # a level column with missing values reads as float
    return frame


def test_the_starter_spec_parses_and_names_each_type_and_model():
    text = starter.starter_spec(_public(), "public.csv")
    spec = parse_spec(tomllib.loads(text))
    got = {c.name: (c.type, c.model, c.mechanism) for c in spec.order()}
    assert got == {
        "change": ("continuous", None, "ph"),  # negative values: a histogram, first
        "age": ("count", "negbin-regression", "censor-uw"),
        "income": ("continuous", "lognormal-regression", "censor-uw"),
        "share": ("continuous", "beta-regression", "censor-uw"),
        "sex": ("binary", None, "ph"),
        "region": ("categorical", None, "ph"),
        "flag": ("categorical", None, "ph"),  # missing values: one more public level
    }
    assert spec.order()[0].name == "change"
    assert "'note': left out" in text and "'empty': left out" in text


def test_every_guess_is_marked_and_the_levels_read_back():
    frame = _public()
    text = starter.starter_spec(frame, "public.csv")
    guesses = [
        ln
        for ln in text.splitlines()
        if ln.startswith(("model", "mechanism", "bounds", "levels", "missing"))
    ]
    assert guesses and all(starter.CONFIRM in ln for ln in guesses)
    spec = parse_spec(tomllib.loads(text))
    by_name = {c.name: c for c in spec.order()}
    assert by_name["region"].levels == ("east", "north", "south")
    assert by_name["age"].bounds == (float(frame["age"].min()), float(frame["age"].max()))
    codes, _ = column_codes(frame, by_name["flag"])  # 0.0 / 1.0 read as the levels "0", "1"
    assert set(np.unique(codes)) == {0.0, 1.0, 2.0}  # and a missing value as the third


def test_a_public_file_with_missing_values_gives_each_column_the_option_it_takes():
    """A model column gets ``missing = "indicator"``, a level column ``missing = "level"``, a
    histogram of numbers (which takes neither) a comment; the spec parses as written."""
    frame = _public(200)
    frame.loc[::4, "income"] = np.nan
    frame.loc[::5, "region"] = None
    frame.loc[::9, "change"] = np.nan
    text = starter.starter_spec(frame, "public.csv")
    assert 'missing = "indicator"  # confirm: 25% missing in the public file' in text
    assert 'missing = "level"  # confirm: 20% missing in the public file' in text
    assert "# 12% missing in the public file: a histogram of numbers has no missing cell" in text
    spec = parse_spec(tomllib.loads(text))
    names = [c.name for c in spec.order()]
    assert names.index("income_missing") == names.index("income") - 1
    by_name = {c.name: c for c in spec.order()}
    assert by_name["region"].missing == "level" and by_name["change"].missing == "refuse"
    assert "age_missing" not in names  # nothing where no value is missing


def test_a_count_histogram_on_wide_bins_calibrates_on_whole_counts():
    """A count column's marginal histogram on equal-width bins samples bin values; its
    dispersion target rounds them to counts (it refused every set before)."""
    spec = parse_spec({"confidential": [{"name": "k", "model": "negbin", "bounds": [0, 500]}]})
    col = spec.order()[0]
    targets = np.array([[12.5, 37.5, 262.5], [12.5, 12.5, 487.5]])
    shares, variances, means = calibration_targets(col, get_model(col.model), targets)
    assert shares is None
    assert variances is not None and np.all(np.isfinite(variances)) and len(means) == 2


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_cli_writes_prints_and_refuses_without_writing(tmp_path, capsys):
    public = tmp_path / "public.csv"
    _public(120).to_csv(public, index=False)
    before = _sha(public)
    out = tmp_path / "spec.toml"
    assert main(["init-spec", str(public), "--out", str(out)]) == 0
    assert "confirm" in capsys.readouterr().out
    written = out.read_text()
    parse_spec(tomllib.loads(written))
    assert main(["init-spec", str(public)]) == 0
    assert capsys.readouterr().out == written
    assert main(["init-spec", str(public), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpsynth: error: --out:") and err.count("\n") == 1
    assert out.read_text() == written and _sha(public) == before
    assert main(["init-spec", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "x.toml")]) == 2
    assert "PUBLIC.csv" in capsys.readouterr().err and not (tmp_path / "x.toml").exists()


def test_an_empty_public_file_is_refused():
    with pytest.raises(InputError) as exc:
        starter.starter_spec(pd.DataFrame(), "empty.csv")
    assert exc.value.param == "data"
