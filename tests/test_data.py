"""Tests of dpsynth.studies.sdr_data and data/make_sdr_standin.py: stand-in, real-file loader, scaling."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.models.scaling import scale_to_unit, unscale_from_unit
from dpsynth.studies.sdr_data import (
    COLUMNS,
    SALARY_BOUNDS,
    STANDIN_PATH,
    STANDIN_TARGETS,
    SimulatedDataWarning,
    load_sdr_public_use,
    load_sdr_standin,
)

SCRIPT = Path(__file__).resolve().parent.parent / "data" / "make_sdr_standin.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sdr_standin", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(sample: str) -> pd.DataFrame:
    with pytest.warns(SimulatedDataWarning, match="SIMULATED"):
        return load_sdr_standin(sample)


def test_standin_reproduces_byte_for_byte(tmp_path: Path) -> None:
    out = _script().write_standin(tmp_path)
    assert out.read_bytes() == STANDIN_PATH.read_bytes()


def test_standin_censoring_sample_matches_table2() -> None:
    df = _load("censoring")
    t = STANDIN_TARGETS["censoring"]
    s = df["salary"].to_numpy(dtype=float)
    assert len(df) == 1000
    # tolerances: mean within 0.1%; quantiles within $500 (salaries are whole thousands)
    assert abs(s.mean() / t["mean"] - 1) < 0.001
    assert abs(np.median(s) - t["median"]) <= 500
    assert abs(np.quantile(s, 0.15) - t["q15"]) <= 500
    assert abs(np.quantile(s, 0.90) - t["q90"]) <= 500


def test_standin_reweighting_sample_matches_section5() -> None:
    df = _load("reweighting")
    t = STANDIN_TARGETS["reweighting"]
    s = df["salary"].to_numpy(dtype=float)
    assert len(df) == 1000
    # tolerances: mean and sd within 0.1%, median within $500, range exact
    assert abs(s.mean() / t["mean"] - 1) < 0.001
    assert abs(s.std(ddof=1) / t["sd"] - 1) < 0.001
    assert abs(np.median(s) - t["median"]) <= 500
    assert (s.min(), s.max()) == (t["min"], t["max"])


@pytest.mark.parametrize("sample", ["censoring", "reweighting"])
def test_standin_schema_and_flags(sample: str) -> None:
    df = _load(sample)
    assert tuple(df.columns) == COLUMNS
    assert df.attrs["simulated"] is True
    assert df["simulated"].all()
    assert set(df["gender"]) == {"F", "M"}
    assert df["agegrp"].nunique() == 9
    assert (df["wkswk"].min(), df["wkswk"].max()) == (2, 52)
    lo, hi = SALARY_BOUNDS
    assert df["salary"].between(lo, hi).all()
    # salary depends on the covariates (beta regression predictors): more weeks, more pay
    assert np.corrcoef(df["wkswk"], df["salary"])[0, 1] > 0.15


def test_standin_bad_sample_name() -> None:
    with pytest.raises(InputError, match="^sample:"):
        load_sdr_standin("math")


def _write_puf(path: Path) -> None:
    # mixed-case header as a user's export might have; extra variable NDGMED for filtering
    pd.DataFrame(
        {
            "SALARYP": [50000, 9999998, 509000, 0, 120000, 9999998],
            "Gender": ["F", "M", " m", "F", "M", "F"],
            "AGEGRP": [30, 40, 60, 25, 45, 70],
            "WKSWK": [52, 98, 52, 10, 40, 98],
            "NDGMED": [1, 1, 1, 2, 1, 1],
        }
    ).to_csv(path, index=False)


def test_public_use_loader(tmp_path: Path) -> None:
    path = tmp_path / "sdr2017.csv"
    _write_puf(path)
    df = load_sdr_public_use(path)
    assert tuple(df.columns) == COLUMNS
    assert df["salary"].tolist() == [50000, 509000, 0, 120000]  # 9999998 rows dropped
    assert df["gender"].tolist() == ["F", "M", "F", "M"]
    assert df["wkswk"].tolist() == [52, 52, 10, 40]
    assert not df["simulated"].any() and df.attrs["simulated"] is False
    sub = load_sdr_public_use(path, filters={"ndgmed": [1]})
    assert sub["salary"].tolist() == [50000, 509000, 120000]


def test_public_use_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="^path:.*not found"):
        load_sdr_public_use(tmp_path / "absent.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"SALARYP": [1], "GENDER": ["F"]}).to_csv(bad, index=False)
    with pytest.raises(InputError, match="^path:.*AGEGRP, WKSWK"):
        load_sdr_public_use(bad)


def test_scale_round_trip_and_open_interval() -> None:
    lo, hi = SALARY_BOUNDS
    x = np.array([0.0, 1.0, 80_000.0, 508_999.0, 509_000.0])
    u = scale_to_unit(x, lo, hi)
    assert u.shape == x.shape
    assert np.all((u > 0) & (u < 1))
    # (x - lo + 0.5) / (hi - lo + 1): exact bounds land half a dollar inside
    assert u[0] == pytest.approx(0.5 / 509_001)
    assert u[-1] == pytest.approx(1 - 0.5 / 509_001)
    assert np.allclose(unscale_from_unit(u, lo, hi), x, rtol=0, atol=1e-6)
    with pytest.raises(InputError, match="^x:"):
        scale_to_unit([509_001.0], lo, hi)
    with pytest.raises(InputError, match="^bounds:"):
        scale_to_unit([1.0], hi, lo)


def test_unit_scaling_pads_narrow_ranges_by_a_millionth():
    x = np.array([0.0, 0.25, 1.0])
    u = scale_to_unit(x, 0.0, 1.0)  # data already in [0, 1] are not squeezed
    np.testing.assert_allclose(u, (x + 1e-6) / (1 + 2e-6))
    assert np.all((u > 0) & (u < 1))
    np.testing.assert_allclose(unscale_from_unit(u, 0.0, 1.0), x, atol=1e-15)
    # wide ranges keep half a unit (half a dollar of salary)
    np.testing.assert_allclose(scale_to_unit([0.0], 0, 509_000), [0.5 / 509_001])
