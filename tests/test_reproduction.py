"""Known-answer tests of dpsynth.studies.reproduction: the sentences the notebooks print."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpsynth.studies import reproduction as v


def test_estimate_mean_se_count() -> None:
    mean, se, n = v.estimate([1.0, 2.0, 3.0, np.nan])
    assert (mean, n) == (2.0, 3) and se == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(v.estimate([4.0])[1]) and v.estimate([])[2] == 0


def test_agrees_within_monte_carlo_error() -> None:
    out = v.reproduction_check(0.95, 0.946, se=0.003)  # SE_d = sqrt(2) 0.003: 0.9 SE_d
    assert out.agrees and out.status == "agrees"
    assert (
        out.sentence == "agrees within Monte Carlo error (difference -0.004, 0.9 standard errors)"
    )
    out = v.reproduction_check(0.95, 0.946, se=0.003, paper_se=0.0)  # an exact paper value
    assert out.z == pytest.approx(4 / 3)


def test_one_criterion_k_times_the_se_of_the_difference() -> None:
    assert v.CRITERION_K == 2.0
    # SE_d = sqrt(2) for se 1 (same design): agrees up to 2.83, differs beyond
    assert v.reproduction_check(10.0, 12.8, se=1.0).agrees
    assert not v.reproduction_check(10.0, 12.9, se=1.0).agrees
    # a reading precision adds to the Monte Carlo allowance
    assert v.reproduction_check(10.0, 13.5, se=1.0, abs_tol=1.0).agrees
    # no SE and no reading precision: not judged, not counted
    out = v.reproduction_check(10.0, 11.0)
    assert out.status == "not counted" and "no Monte Carlo error" in out.sentence


def test_differs_gives_size_in_standard_errors_and_the_cause() -> None:
    out = v.reproduction_check(408, 84.0, se=10.0, study="beta", quantity="censor_w_count")
    assert out.status == "differs" and out.z == pytest.approx(324 / (10 * math.sqrt(2)))
    assert out.sentence.startswith("differs by -324 (22.9 standard errors); likely cause: ")
    assert out.sentence.endswith(v.CAUSES[("beta", "censor_w_count")])


def test_replicate_values_give_mean_and_se() -> None:
    # mean 10, sd 2, R = 4 -> SE 1, SE_d sqrt(2); paper 14.5 -> 3.2 SE_d
    values = np.array([8.0, 10.0, 12.0, 10.0])
    values = (values - values.mean()) / values.std(ddof=1) * 2 + 10
    out = v.reproduction_check(14.5, values, study="nowhere", quantity="x")
    assert out.z == pytest.approx(4.5 / math.sqrt(2))
    assert "differs by -4.5 (3.2 standard errors); likely cause: not known" in out.sentence
    assert v.reproduction_check(12.5, values).agrees  # 1.8 SE_d


def test_relative_and_absolute_tolerances() -> None:
    out = v.reproduction_check(5.24, 5.38, rel_tol=0.05, fmt="{:.2f}")  # no SE: one fit
    assert (
        out.agrees
        and out.sentence == "agrees within the stated tolerance ±0.26 (standard error unknown)"
    )
    assert not v.reproduction_check(5.24, 12.16, rel_tol=0.05).agrees
    assert v.reproduction_check(0.95, 0.955, abs_tol=0.01).agrees
    assert not v.reproduction_check(
        0.95, 0.997, abs_tol=0.01, study="reweighting", quantity="k"
    ).agrees


def test_interval_label_and_missing_values() -> None:
    assert v.reproduction_check((30, 40), 35).sentence == "agrees (within the paper's range)"
    out = v.reproduction_check((2.0, 3.5), 4.0, rel_tol=0.1)  # 0.5 above, tolerance 0.275
    assert out.status == "differs" and out.difference == pytest.approx(0.5)
    assert v.reproduction_check("Censor_w", "Censor_w").sentence == "agrees (Censor_w)"
    out = v.reproduction_check("Censor_w", "PH", study="beta", quantity="best_dp")
    assert out.sentence.startswith("differs: paper Censor_w, this run PH; likely cause: the PH bin")
    for missing in (None, float("nan"), v.NOT_IN_PAPER):
        assert v.reproduction_check(missing, 1.0).sentence == "not in the paper"
    assert v.reproduction_check(1.0, float("nan")).sentence == "not run"
    assert v.reproduction_check(1.0, None).status == "not run"


def test_zero_standard_error_is_said_plainly() -> None:
    out = v.reproduction_check(5.0, [0.0, 0.0, 0.0])
    assert out.status == "differs" and "every replicate gave the same value" in out.sentence


def test_paper_standard_error_widens_the_tolerance() -> None:
    assert not v.reproduction_check(0.95, 0.94, se=0.004, paper_se=0.0).agrees  # 2.5 SE
    assert v.reproduction_check(0.95, 0.94, se=0.004, paper_se=0.004).agrees  # 1.8 combined SE
    assert v.reproduction_check(0.95, 0.94, se=0.004).agrees  # same design by default


def test_paper_value_marks_points_off_the_grid() -> None:
    table = {(5.0, "Censor_w"): 110}
    assert v.paper_value(table, (5.0, "Censor_w")) == 110
    assert v.paper_value(table, (2.0, "Censor_w")) == "not in the paper"


def test_summary_frame_and_compare() -> None:
    summary = v.summary_frame(
        {"count_5": [1.0, 3.0], "best": "PH", "eps": 5.38, "cov": (0.95, 0.003, 5000)}
    )
    assert list(summary.columns) == ["value", "se", "n", "text"]
    assert summary.loc["count_5", "value"] == 2.0 and summary.loc["count_5", "n"] == 2
    assert summary.loc["best", "text"] == "PH" and math.isnan(summary.loc["eps", "se"])
    specs = [
        {"key": "count_5", "label": "count at 5", "paper": 2.5, "fmt": "{:.1f}"},
        {"key": "best", "label": "best", "paper": "Censor_w", "cause": "best_dp"},
        {"key": "eps", "label": "eps", "paper": 5.24, "rel_tol": 0.05, "fmt": "{:.2f}"},
        {"key": "off", "label": "eps = 2", "paper": None},
        {"key": "cov", "label": "coverage", "paper": 0.952, "fmt": "{:.3f}"},
    ]
    table = v.compare(specs, summary, study="beta", run_label="this run (ci)")
    assert list(table.columns) == ["quantity", "paper", "this run (ci)", "verdict"]
    assert table["paper"].tolist() == ["2.5", "Censor_w", "5.24", "not in the paper", "0.952"]
    assert table["this run (ci)"].tolist() == [
        "2.0 ± 1.0",
        "PH",
        "5.38",
        "not run",
        "0.950 ± 0.003",
    ]
    verdict = table["verdict"].tolist()
    assert verdict[0].startswith("this run, smaller than the paper's: agrees within Monte Carlo")
    assert "likely cause: the PH bin rule" in verdict[1]
    assert verdict[3] == "not in the paper"
    committed = v.summary_frame({"count_5": (2.4, 0.01, 100), "best": "Censor_w"})
    table = v.compare(specs[:2], summary, study="beta", committed=committed, committed_label="c")
    assert list(table.columns) == ["quantity", "paper", "c", "this run", "verdict"]
    assert table["c"].tolist() == ["2.4 ± 0.0", "Censor_w"]
    assert table["verdict"][0].startswith("paper scale: differs by -0.1 (7.1 standard errors)")
    assert table["verdict"][1] == "paper scale: agrees (Censor_w)"


def test_summary_frame_survives_a_csv_round_trip(tmp_path) -> None:
    summary = v.summary_frame({"a": [1.0, 2.0], "b": "Censor_w (DP)"})
    path = tmp_path / "s.csv"
    summary.to_csv(path)
    back = pd.read_csv(path, index_col=0)
    table = v.compare(
        [{"key": "a", "label": "a", "paper": 1.5}, {"key": "b", "label": "b", "paper": "x"}],
        back,
        study="s",
    )
    assert table["this run"].tolist() == ["1.5 ± 0.5", "Censor_w (DP)"]


def test_statistic_estimate_known_answers() -> None:
    x = [0.0, 0.0, 10.0, 20.0, 30.0]
    # R's summary (type 7): Q1 0, median 10, Q3 20; mean 12, sd sqrt(170)
    assert v.statistic_estimate(x, "q1")[0] == 0.0
    assert v.statistic_estimate(x, "median")[0] == 10.0
    assert v.statistic_estimate(x, "q3")[0] == 20.0
    value, se, n = v.statistic_estimate(x, "mean")
    assert (value, n) == (12.0, 5)
    assert se == pytest.approx(math.sqrt(170.0) / math.sqrt(5))
    assert v.statistic_estimate(x, "sd")[0] == pytest.approx(math.sqrt(170.0))
    # bootstrap: a constant sample has SE 0, a spread one a positive SE, reproducibly
    assert v.statistic_estimate([3.0] * 6, "median")[1] == 0.0
    a = v.statistic_estimate(x, "q3")
    assert a[1] > 0 and a == v.statistic_estimate(x, "q3")
    with pytest.raises(ValueError):
        v.statistic_estimate(x, "iqr")


def test_quantile_estimate_known_answers() -> None:
    x = np.arange(41.0)  # type-7 quantiles: 2.5% -> 1.0, 97.5% -> 39.0
    lo, se, n = v.quantile_estimate(x, 0.025)
    assert (lo, n) == (1.0, 41) and se > 0
    assert v.quantile_estimate(x, 0.975)[0] == 39.0
    assert v.quantile_estimate([2.0] * 5, 0.975) == (2.0, 0.0, 5)


def test_compare_shows_uncounted_cells_and_the_literal_reading() -> None:
    run = v.summary_frame({"a": (10.0, 1.0, 100), "b": (5.0, 0.0, 100), "a_lit": (20.0, 1.0, 100)})
    specs = [
        {"key": "a", "label": "a", "paper": 11.0, "literal": "a_lit"},
        {"key": "b", "label": "b", "paper": 5.0, "counted": "construction"},
    ]
    table = v.compare(specs, run, study="s", literal=run, literal_label="literal reading (x)")
    assert table["literal reading (x)"].tolist() == ["20 ± 1 (differs, 6.4 SE)", "-"]
    assert table["verdict"][1].startswith(
        "this run, smaller than the paper's: not counted (equal by construction): agrees"
    )
    assert v.tally(table) == {
        "agrees": 1,
        "differs": 0,
        "not counted": 1,
        "not in the paper": 0,
        "not run": 0,
    }
    with pytest.raises(ValueError, match="unknown keys"):
        v.compare([{"key": "a", "label": "a", "paper": 1.0, "k": 3.0}], run, study="s")


def test_extreme_se_sees_past_the_largest_value() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0, 10.0])  # the bootstrap of the max is often 10
    se = v.extreme_se(x, "max")
    assert se > 0 and se == pytest.approx(math.pi / math.sqrt(6) * np.mean([0, 12, 3, 4, 5]))
    assert v.statistic_estimate(x, "max")[1] >= se
    assert v.extreme_se(x, "min") == pytest.approx(
        math.pi / math.sqrt(6) * np.mean([1, 2, 3, 24, 0])
    )
