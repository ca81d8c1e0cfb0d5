"""Tests of dpsynth.studies.vector_weighted: profiles, settings validation and the fit-free parts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.mechanisms.weights import cw_weights
from dpsynth.studies import vector_weighted as sw


def test_profiles_have_the_same_keys_and_validate():
    assert set(sw.PROFILES) == {"ci", "paper"}
    assert set(sw.PROFILES["ci"]) == set(sw.PROFILES["paper"])
    for name in sw.PROFILES:
        cfg = sw.settings(name)
        assert cfg["profile"] == name
        json.dumps(cfg)  # part of the runner's cache key


def test_paper_profile_is_as_published():
    cfg = sw.settings("paper")
    assert (cfg["n"], cfg["R"]) == (1000, 100)
    # Run length is dpsynth's choice (not in the paper): S = 1000 draws from 2 chains, enough
    # for the m = 100 synthetic sets drawn from distinct draws.
    assert cfg["chains"] >= 2 and cfg["chains"] * cfg["iter_sampling"] == 1000 >= cfg["m"]
    assert cfg["k"] == 0.95


def test_none_keeps_the_profile_value_and_overrides_apply():
    base = sw.settings("ci")
    assert sw.settings("ci", n=None, R=None, seed=None) == base
    cfg = sw.settings("ci", n=50, R=3, seed=7)
    assert (cfg["n"], cfg["R"], cfg["seed"]) == (50, 3, 7)
    assert sw.PROFILES["ci"]["n"] == base["n"]  # profiles are not mutated


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"n": 3}, "n"),
        ({"R": 0}, "R"),
        ({"m": 2.5}, "m"),
        ({"n_jobs": True}, "n_jobs"),
        ({"k": 1.5}, "k"),
        ({"k": 0}, "k"),
        ({"max_rhat": 1.0}, "max_rhat"),
        ({"m": 10_000}, "m"),
        ({"reweight_local": "yes"}, "reweight_local"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_settings_reject_bad_values_naming_the_parameter(kwargs, param):
    with pytest.raises(InputError) as err:
        sw.settings("ci", **kwargs)
    assert err.value.param == param


def test_unknown_profile():
    with pytest.raises(InputError) as err:
        sw.settings("huge")
    assert err.value.param == "profile"


def test_bootstrap_statistics_frame():
    rng = np.random.default_rng(0)
    y = rng.poisson(100, size=300)
    frame = sw.bootstrap_statistics(y, 50, np.random.default_rng(1))
    assert list(frame.columns) == ["set", "statistic", "value"]
    assert len(frame) == 50 * len(sw.STATISTICS)
    means = frame.loc[frame.statistic == "mean", "value"]
    assert abs(means.mean() - y.mean()) < 1.0


def test_predicted_cw_lipschitz_is_monotone_in_radius():
    rng = np.random.default_rng(2)
    y = rng.poisson(100, size=200).astype(float)
    f = np.abs(y - 100) / 10 + 3  # any positive record bounds
    values = [sw.predicted_cw_lipschitz(y, f, r) for r in np.linspace(0, 60, 25)]
    assert np.all(np.diff(values) >= -1e-12)
    assert values[-1] == pytest.approx(np.max(cw_weights(y, 60.0) * f))


def test_solve_radius_reaches_target():
    rng = np.random.default_rng(3)
    y = rng.poisson(100, size=200).astype(float)
    f = np.abs(y - 100) / 10 + 3
    target = 0.6 * f.max()
    r = sw._solve_radius(y, f, target, 1.0, 0.0)
    assert sw.predicted_cw_lipschitz(y, f, r) >= target
    assert sw.predicted_cw_lipschitz(y, f, max(r - 0.5, 0.0)) < target + 1e-9


def test_contraction_summary():
    bounds = pd.DataFrame(
        {
            "synthesizer": ["LW", "LW", "Unweighted", "Unweighted"],
            "lipschitz": [3.0, 4.0, 9.0, 12.0],
        }
    )
    out = sw.contraction_summary(bounds)
    assert list(out.index) == ["LW", "Unweighted"]
    assert out.loc["LW", "spread"] == pytest.approx(1.0)
    assert out.loc["Unweighted", "max"] == 12.0


def test_local_to_global_rejects_unknown_generator():
    with pytest.raises(InputError) as err:
        sw.local_to_global("beta", sw.settings("ci"))
    assert err.value.param == "generator"


@pytest.mark.slow
def test_section3_frames_on_a_tiny_run():
    cfg = sw.settings("ci", n=60, m=2, n_boot=20, iter_warmup=150, iter_sampling=150, cw_fits=1)
    study = sw.section3("poisson", cfg)
    assert study.order == ["Unweighted", "LW", "CW", "SW"]
    assert {"synthesizer", "record", "y", "alpha", "record_bound"} <= set(study.records.columns)
    assert len(study.records) == 4 * 60
    assert list(study.utility.columns) == ["synthesizer", "set", "statistic", "value"]
    assert set(study.utility.synthesizer) == {"Data", *study.order}
    assert study.synthetic["LW"].shape == (2, 60)
    s = study.summary.set_index("synthesizer")
    assert s.loc["LW", "lipschitz"] < s.loc["Unweighted", "lipschitz"]
    assert s.loc["SW", "sw_alpha"] == pytest.approx(
        s.loc["LW", "lipschitz"] / s.loc["Unweighted", "lipschitz"]
    )
    assert np.isfinite(sw.max_rhat(study))


# ------------------------------------------------------------- the re-weighting constant k


def test_k_rule_setting():
    assert sw.settings("paper")["k_rule"] == "no-increase"
    assert sw.settings("ci", k_rule="search")["k_rule"] == "search"
    with pytest.raises(InputError) as err:
        sw.settings("ci", k_rule="whatever")
    assert err.value.param == "k_rule"


@pytest.mark.slow
def test_reweight_no_increase_keeps_the_papers_k():
    from dpsynth.mechanisms.posterior import Synthesizer

    y = np.random.default_rng(4).poisson(100, size=80)
    cfg = sw.settings("ci", iter_warmup=150, iter_sampling=150)
    syn = Synthesizer(y, "poisson", seed=2, sampler=sw.sampler_of(cfg))
    lw = syn.lw(neighbours="add-remove")
    final = sw.reweight_no_increase(syn, lw, 0.95, "lw")
    assert final.mechanism == "lw" and final.tuning["k_rule"] == "no-increase"
    assert final.lipschitz <= lw.lipschitz
    assert final.tuning["k"] <= 0.95 and final.fit.alpha.mean() >= lw.fit.alpha.mean()
    # a k far above 1 would raise the bound: the rule lowers it until the bound does not grow
    high = sw.reweight_no_increase(syn, lw, 1.0, "lw", max_refits=4)
    assert high.tuning["k"] <= 1.0


def _study(summary: pd.DataFrame, utility: pd.DataFrame, order: list[str]):
    return sw.WeightingStudy(
        label="x",
        y=np.array([90.0, 100.0, 110.0]),
        synthesizer=None,
        results={name: None for name in order},
        synthetic={},
        records=pd.DataFrame(),
        summary=summary,
        utility=utility,
        mu=pd.DataFrame(),
        cw_search=pd.DataFrame(),
    )


def test_reweighting_summary_and_comparison():
    from dpsynth.studies.reproduction import compare, summary_frame

    order = ["LW", "LW_final", "CW", "CW_final"]
    summary = pd.DataFrame(
        {
            "synthesizer": order,
            "lipschitz": [5.0, 4.8, 5.0, 4.0],
            "alpha_mean": [0.90, 0.92, 0.80, 0.85],
            "k": [None, 0.95, None, 0.95],
        }
    )
    rows = []
    for name, med, q90 in (
        ("Data", 98.5, 130.0),
        ("LW", 97.7, 128.0),
        ("LW_final", 98.0, 129.0),
        ("CW", 100.6, 120.0),
        ("CW_final", 98.1, 127.0),
    ):
        rows += [
            {"synthesizer": name, "set": j, "statistic": "median", "value": med} for j in range(3)
        ]
        rows += [
            {"synthesizer": name, "set": j, "statistic": "q90", "value": q90} for j in range(3)
        ]
    study = _study(summary, pd.DataFrame(rows), order)
    values = sw.reweighting_summary(study)
    assert values["k_LW"] == 0.95 and values["ratio_CW"] == pytest.approx(0.8)
    assert values["alpha_gain_CW"] == "increases" and values["cw_final_closer"] == "yes"
    assert values["median_mid_CW"] == pytest.approx(100.6)
    table = compare(sw.reweighting_comparison("4"), summary_frame(values), study="reweighting")
    verdicts = dict(zip(table.quantity, table.verdict, strict=True))
    assert "agrees" in verdicts["k kept, LW"]
    assert "differs by -0.1" in verdicts["bound CW_final / CW ('equivalent', read as 0.9-1)"]
    assert all("agrees" in v for q, v in verdicts.items() if q.startswith("median"))


def test_section3_and_contraction_comparisons_cover_both_generators():
    keys = {row["key"] for row in sw.section3_comparison()}
    assert {"poisson_sw_alpha", "poisson_lip_LW", "nb_mixture_lip_LW"} <= keys
    bounds = pd.DataFrame(
        {
            "synthesizer": ["Unweighted", "Unweighted", "LW", "LW"],
            "lipschitz": [8.0, 12.0, 3.4, 3.6],
        }
    )
    values = sw.contraction_values({"poisson": (bounds, None)})
    assert values["poisson_contracts"] == "yes" and values["poisson_LW_max"] == 3.6
    assert {row["key"] for row in sw.contraction_comparison()} >= {"poisson_LW_max"}


def test_appendix_table1_rows_cover_every_endpoint() -> None:
    from dpsynth.studies.vector_weighted import PAPER, appendix_table1_rows, reweighting_comparison

    rows = {r["key"]: r for r in appendix_table1_rows()}
    assert len(rows) == 40
    assert rows["t1_q15_CW_lo"]["paper"] == 77.2 and rows["t1_median_LW_final_hi"]["paper"] == 100.0
    assert rows["t1_mean_Data_hi"]["cause"] == "table1_data"
    assert PAPER["table1"]["q90"]["CW_final"] == (131.0, 137.7)
    keys = {r["key"] for r in reweighting_comparison("4")}
    assert set(rows) <= keys and not set(rows) & {r["key"] for r in reweighting_comparison("5")}
