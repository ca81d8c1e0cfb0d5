"""Tests of dpsynth.curator.utility: ECDF measures by hand, quantile summaries vs numpy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth.curator.utility import (
    REPLICATE_COLUMNS,
    ecdf_measures,
    interval_summary,
    interval_table,
    replicate_summary,
    replicate_table,
    summary_statistics,
    utility_table,
)
from dpsynth.errors import InputError


def test_ecdf_measures_hand_computed() -> None:
    # x = (1, 2, 3), y = (2, 4); pooled z = (1, 2, 3, 2, 4)
    # F_x(z) = (1/3, 2/3, 1, 2/3, 1); F_y(z) = (0, 1/2, 1/2, 1/2, 1)
    # diff = (1/3, 1/6, 1/2, 1/6, 0)
    # max |diff| = 1/2; mean diff^2 = (1/9 + 1/36 + 1/4 + 1/36 + 0)/5 = (15/36)/5 = 1/12
    out = ecdf_measures([3.0, 1.0, 2.0], [4.0, 2.0])
    assert out["max_ecdf"] == pytest.approx(0.5)
    assert out["avg_ecdf"] == pytest.approx(1 / 12)


def test_ecdf_measures_identical_and_disjoint() -> None:
    x = np.array([0.1, 0.5, 0.7, 0.7])
    assert ecdf_measures(x, x) == {"max_ecdf": 0.0, "avg_ecdf": 0.0}
    # disjoint: x = (0, 1), y = (2, 3); pooled F_x = (1/2, 1, 1, 1), F_y = (0, 0, 1/2, 1)
    # diff = (1/2, 1, 1/2, 0); max 1; avg (1/4 + 1 + 1/4 + 0)/4 = 3/8
    out = ecdf_measures([0, 1], [2, 3])
    assert out["max_ecdf"] == pytest.approx(1.0)
    assert out["avg_ecdf"] == pytest.approx(3 / 8)


def test_ecdf_measures_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="^synthetic:"):
        ecdf_measures([1, 2], [])
    with pytest.raises(InputError, match="^confidential:"):
        ecdf_measures([1, np.nan], [1])


def test_summary_statistics_vs_numpy() -> None:
    x = np.random.default_rng(0).gamma(2.0, 3.0, size=101)
    out = summary_statistics(x)
    assert out["mean"] == pytest.approx(np.mean(x))
    assert out["median"] == pytest.approx(np.median(x))
    assert out["q15"] == pytest.approx(np.quantile(x, 0.15))
    assert out["q90"] == pytest.approx(np.quantile(x, 0.90))
    # type-7 by hand on 1..10: q15 at h = 9*0.15 = 1.35 -> 2 + 0.35 = 2.35; q90 at 8.1 -> 9.1
    small = summary_statistics(np.arange(1, 11))
    assert small["q15"] == pytest.approx(2.35)
    assert small["q90"] == pytest.approx(9.1)
    assert small["median"] == pytest.approx(5.5)


def test_interval_summary() -> None:
    values = np.arange(0, 101, dtype=float)  # quantiles of 0..100 equal 100 p
    assert interval_summary(values) == pytest.approx((2.5, 97.5))
    assert interval_summary(values, level=0.5) == pytest.approx((25.0, 75.0))
    with pytest.raises(InputError, match="^level:"):
        interval_summary(values, level=1.5)


def test_replicate_summary_and_table() -> None:
    v = np.array([0, 0, 0, 10, 20, 30, 40], dtype=float)
    out = replicate_summary(v)
    assert list(out) == list(REPLICATE_COLUMNS)
    assert (out["min"], out["q1"], out["median"], out["q3"], out["max"]) == (
        0,
        0,
        10,
        25,
        40,
    )
    assert out["mean"] == pytest.approx(100 / 7)
    assert out["sd"] == pytest.approx(np.std(v, ddof=1))
    table = replicate_table({"Censor_w": v, "Censor_uw": v + 1})
    assert list(table.columns) == list(REPLICATE_COLUMNS)
    assert list(table.index) == ["Censor_w", "Censor_uw"]
    assert table.loc["Censor_uw", "median"] == 11
    frame = pd.DataFrame({"a": [1.0, 2.0, np.nan], "b": [3.0, 4.0, 5.0]})
    assert replicate_table(frame).loc["a", "max"] == 2.0
    intervals = interval_table(frame, level=0.5)
    assert intervals.loc["b"].tolist() == pytest.approx([3.5, 4.5])


def test_utility_table_layout() -> None:
    data = [1.0, 2.0, 3.0]
    table = utility_table(data, {"Weighted": [4.0, 2.0]})
    assert list(table.columns) == ["Data", "Weighted"]
    assert list(table.index) == ["max_ecdf", "avg_ecdf", "mean", "median", "q15", "q90"]
    assert np.isnan(table.loc["max_ecdf", "Data"])
    assert table.loc["avg_ecdf", "Weighted"] == pytest.approx(1 / 12)  # hand value above
    assert table.loc["mean", "Weighted"] == pytest.approx(3.0)
