"""Tests of dpsynth.studies.modips_sections: profiles, settings validation and the Section 5 summaries."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.studies import modips_sections as sm
from dpsynth.studies.modips_simulation import M_GRID


def test_profiles_have_the_same_keys_and_validate():
    assert set(sm.PROFILES) == {"ci", "paper"}
    assert set(sm.PROFILES["ci"]) == set(sm.PROFILES["paper"])
    for name in sm.PROFILES:
        cfg = sm.settings(name)
        assert cfg["profile"] == name
        json.dumps(cfg)


def test_paper_profile_is_as_published():
    cfg = sm.settings("paper")
    assert cfg["reps"] == 5000
    assert cfg["m_grid"] == tuple(M_GRID) and (min(M_GRID), max(M_GRID)) == (2, 500)
    assert cfg["table_m"] == 10 and cfg["table_epsilons"] == (100.0, 10.0, 1.0, 0.5)


def test_ci_profile_is_smaller_but_spans_the_same_m_range():
    ci, paper = sm.settings("ci"), sm.settings("paper")
    assert ci["reps"] < paper["reps"]
    assert len(ci["m_grid"]) < len(paper["m_grid"])
    assert (ci["m_grid"][0], ci["m_grid"][-1]) == (paper["m_grid"][0], paper["m_grid"][-1])


def test_none_keeps_the_profile_value_and_overrides_apply():
    base = sm.settings("ci")
    assert sm.settings("ci", reps=None, m_grid=None, epsilon=None, seed=None, workers=None) == base
    cfg = sm.settings("ci", reps=50, m_grid=[10, 2, 5, 5], epsilon=2, seed=7, workers=2)
    assert (cfg["reps"], cfg["epsilon"], cfg["seed"], cfg["workers"]) == (50, 2.0, 7, 2)
    assert cfg["m_grid"] == (2, 5, 10)  # sorted, deduplicated
    assert sm.PROFILES["ci"]["reps"] == base["reps"]  # profiles are not mutated


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"reps": 1}, "reps"),
        ({"reps": 10.5}, "reps"),
        ({"reps": True}, "reps"),
        ({"m_grid": [1, 2]}, "m_grid"),
        ({"m_grid": []}, "m_grid"),
        ({"m_grid": 10}, "m_grid"),
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": "big"}, "epsilon"),
        ({"table_epsilons": [1.0, -1.0]}, "table_epsilons"),
        ({"allocations": [0.5, 1.0]}, "allocations"),
        ({"seed": -1}, "seed"),
        ({"workers": 0}, "workers"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_settings_reject_bad_values_naming_the_parameter(kwargs, param):
    with pytest.raises(InputError) as err:
        sm.settings("ci", **kwargs)
    assert err.value.param == param


def test_unknown_profile():
    with pytest.raises(InputError) as err:
        sm.settings("huge")
    assert err.value.param == "profile"


def test_paper_table1_numbers_are_complete():
    assert len(sm.PAPER["table1_binary"]) == 16 and len(sm.PAPER["table1_gaussian"]) == 8
    for vals in [*sm.PAPER["table1_binary"].values(), *sm.PAPER["table1_gaussian"].values()]:
        assert len(vals) == len(sm.TABLE1_RULES)
        assert all(0 < v <= 1 for v in vals)
    # a few cells read off the paper
    assert sm.PAPER["table1_binary"][(0.5, 10, 0.1)][2] == 0.532  # Raab
    assert sm.PAPER["table1_gaussian"][(0.5, 10)][-1] == 0.275  # single synthesis


def test_communal_share_is_delta_mean_over_total():
    assert sm.communal_share(-4.0, 4.0) == pytest.approx(1 / 9)
    assert sm.communal_share(-4.0, 5.0) == pytest.approx(1 / 10)


@pytest.fixture(scope="module")
def tiny_runs():
    cfg = sm.settings("ci", reps=40, m_grid=[2, 5], seed=3)
    cfg.update(allocations=(0.3, 0.7), table_epsilons=(10.0, 1.0))
    s51, s52, s53 = sm.section51(cfg), sm.section52(cfg), sm.section53(cfg)
    return cfg, s51, s52, s53, sm.epsilon_check(cfg)


def test_sections_are_seeded_and_labelled(tiny_runs):
    cfg, s51, s52, s53, check = tiny_runs
    again = sm.section51(cfg)
    assert np.allclose(again["coverage"], s51["coverage"]) and np.allclose(
        again["bias"], s51["bias"]
    )
    assert set(s51["m"]) == {0, 1, 2, 5}
    assert "n = 100, p = 0.1" in set(s51["scenario"])
    assert "n = 100, [-4, 5]" in set(s51["scenario"])
    assert set(check["data_type"]) == {"binary"} and set(check["epsilon"]) == {10.0}
    comm = s53[s53["sanitization"] == "communal"]
    assert np.allclose(comm["w"], 1 / (1 + comm["upper"] - comm["lower"]))
    assert set(s52["rule"]) == set(sm.TABLE1_RULES)


def test_table1_puts_paper_and_run_side_by_side(tiny_runs):
    _, _, s52, _, _ = tiny_runs
    t = sm.table1(s52)
    assert list(t.columns.get_level_values(1)[:2]) == ["paper", "run"]
    assert set(t.columns.get_level_values(0)) == set(sm.TABLE1_RULES)
    assert len(t) == 4 * 2 + 2 * 2  # binary: 2 n x 2 p per epsilon; Gaussian: 2 n
    row = t.loc[("binary", 1.0, 10, 0.1)]
    assert row[("raab", "paper")] == 0.840
    assert 0 <= row[("thm7", "run")] <= 1


def test_run_summary_and_sd_extremes(tiny_runs):
    _, s51, s52, s53, check = tiny_runs
    ext = sm.sd_extremes(s51)
    assert len(ext) == 16 and set(ext["m_sd_max"]) <= {2, 5}
    summary = sm.run_summary(s51, s52, s53, check)
    assert all(isinstance(v, float) for v in summary.values())
    assert (summary["m_lo"], summary["m_hi"]) == (2.0, 5.0)
    assert 0 <= summary["thm7_cov_min"] <= summary["thm7_cov_max"] <= 1
    assert np.isnan(summary["t1_bin_eps05_n10_p01_raab"])  # ε = 0.5 is not in this run
    assert summary["alloc_n1000_hw_whi"] > 0


def test_comparison_values_carry_binomial_errors(tiny_runs):
    cfg, s51, s52, s53, check = tiny_runs
    values = sm.comparison_values(s51, s52, s53, check, cfg["reps"])
    cov, se, n = values["t1_gau_eps1_n100_thm7"]
    q = (cov * 40 + 2) / 44
    assert n == 40 and se == pytest.approx(np.sqrt(q * (1 - q) / 40))
    assert np.isnan(values["t1_bin_eps05_n10_p01_raab"])  # epsilon 0.5 not in this run
    assert 0 <= values["table1_agreeing"] <= 1
    assert values["alloc_bias_decreasing"] in ("yes", "no")


def test_comparison_specs_follow_the_runs_grid(tiny_runs):
    cfg = tiny_runs[0]
    specs = {row["key"]: row for row in sm.comparison_specs(cfg)}
    assert specs["t1_bin_eps05_n10_p01_raab"]["paper"] is None  # 0.5 not in table_epsilons
    assert specs["t1_gau_eps1_n100_thm7"]["paper"] == 0.956
    assert specs["cp_mlo_binary"]["paper"] == 0.925  # the grid starts at m = 2
    assert specs["bin_p01_mhi_bias"]["paper"] is None  # largest m = 5, not above 200
    other = {r["key"]: r for r in sm.comparison_specs({**cfg, "m_grid": (5, 500)})}
    assert other["cp_mlo_binary"]["paper"] is None and other["bin_p01_mhi_bias"]["paper"] == 0.01


def test_table1_agreement_known_answer():
    idx = pd.MultiIndex.from_tuples([("binary", 1.0, 10, 0.1), ("gaussian", 1.0, 10, np.nan)])
    t = pd.DataFrame({("thm7", "paper"): [0.95, 0.95], ("thm7", "run"): [0.95, 0.80]}, index=idx)
    assert sm.table1_agreement(t, 5000) == 0.5
    # the one criterion: 0.95 vs 0.957, binomial SEs of 5,000 each (0.0031, 0.0029): 1.7 SE_d
    t = pd.DataFrame({("thm7", "paper"): [0.95], ("thm7", "run"): [0.957]}, index=idx[:1])
    assert sm.table1_agreement(t, 5000) == 1.0
    t = pd.DataFrame({("thm7", "paper"): [0.95], ("thm7", "run"): [0.962]}, index=idx[:1])
    assert sm.table1_agreement(t, 5000) == 0.0


def test_table1_literal_keeps_the_printed_binary_n(tiny_runs):
    cfg, s51, s52, s53, check = tiny_runs
    literal = sm.section52_literal(cfg)
    lit = sm.table1(literal, literal=True)
    assert set(lit.index.get_level_values("n")) == {10, 100}
    assert lit.loc[("binary", 1.0, 10, 0.1), ("thm7", "paper")] == 0.961
    values = sm.comparison_values(s51, s52, s53, check, cfg["reps"], literal=literal)
    assert 0 <= values["table1a_agreeing_literal"] <= 1
    assert values["t1_bin_eps100_n100_p05_raab_literal"] != values["t1_bin_eps100_n100_p05_raab"]
    specs = {row["key"]: row for row in sm.comparison_specs(cfg)}
    assert specs["t1_gau_eps1_n100_thm7"].get("literal") is None
    assert specs["t1_bin_eps100_n100_p05_raab"]["literal"] == "t1_bin_eps100_n100_p05_raab_literal"


def test_table1_marks_an_epsilon_off_the_papers_grid():
    cfg = sm.settings("ci", reps=20, table_epsilons=[2.0, 1.0])
    t = sm.table1(sm.section52(cfg))
    off = t.xs(2.0, level="epsilon")
    assert (off[("thm7", "paper")] == "not in the paper").all()
    assert t.xs(1.0, level="epsilon")[("thm7", "paper")].map(float).between(0.9, 1).all()
    assert off[("thm7", "run")].map(float).between(0, 1).all()
