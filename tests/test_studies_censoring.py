"""Tests of dpsynth.studies.censoring: profiles, settings validation, the tidy replicate frame."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.studies.censoring import (
    COLUMNS,
    PAPER_TABLE1,
    PROFILES,
    beta_params,
    beta_replicate,
    censoring_table,
    downscale_table,
    settings,
)

# The rows of one Beta replicate: the data and the six synthesizers of Section 4.
BETA_STUDY_MECHANISMS = {
    "Data",
    "Unweighted",
    "Weighted",
    "Weighted-e",
    "Censor_w",
    "Censor_uw",
    "PH",
}


def test_profiles_have_the_same_keys_and_validate() -> None:
    keys = set(PROFILES["paper"])
    for name, profile in PROFILES.items():
        assert set(profile) == keys, name
        s = settings(name)
        assert s["profile"] == name
        assert s["epsilons"] == [5.0, 4.0, 3.0]
        assert s["downscale_epsilon"] in s["epsilons"]


def test_paper_profile_matches_the_paper() -> None:
    s = settings("paper")
    assert (s["R"], s["n"]) == (100, 2000)  # Section 4's sizes
    # The paper does not state its MCMC run length; dpsynth's choice: S = 2000 draws from
    # 2 chains (R-hat needs at least 2).
    assert s["chains"] >= 2 and s["chains"] * s["iter_sampling"] == 2000
    assert s["sdr_epsilon"] == 5.0 and s["sdr_n"] is None and s["data_path"] is None


def test_settings_none_keeps_profile_value_and_returns_a_copy() -> None:
    s = settings("ci", n=None, R=3, epsilons=[2, 1])
    assert s["n"] == PROFILES["ci"]["n"] and s["R"] == 3 and s["epsilons"] == [2.0, 1.0]
    s["epsilons"].append(9.0)
    assert PROFILES["ci"]["epsilons"] == [5.0, 4.0, 3.0]


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"n": 5}, "n"),
        ({"R": 0}, "R"),
        ({"R": 2.5}, "R"),
        ({"epsilons": []}, "epsilons"),
        ({"epsilons": [5, -1]}, "epsilons"),
        ({"epsilons": [5, 5]}, "epsilons"),
        ({"epsilons": "abc"}, "epsilons"),
        ({"downscale": 1.5}, "downscale"),
        ({"downscale": 0}, "downscale"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"sdr_epsilon": float("inf")}, "sdr_epsilon"),
        ({"sdr_n": 3}, "sdr_n"),
        ({"seed": -1}, "seed"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_settings_reject_bad_values_naming_the_key(overrides: dict, param: str) -> None:
    with pytest.raises(InputError) as info:
        settings("ci", **overrides)
    assert info.value.param == param


def test_unknown_profile() -> None:
    with pytest.raises(InputError, match="profile"):
        settings("huge")


def test_beta_params_are_the_cache_key_parts_only() -> None:
    p = beta_params(settings("ci", R=7, n_jobs=2, seed=5))
    assert "R" not in p and "n_jobs" not in p and "seed" not in p
    assert p == beta_params(settings("ci"))
    json.dumps(p)


def test_paper_table1_is_monotone_in_epsilon() -> None:
    for mech in ("Weighted-e", "Censor_w", "Censor_uw"):
        assert PAPER_TABLE1[(5.0, mech)] < PAPER_TABLE1[(4.0, mech)] < PAPER_TABLE1[(3.0, mech)]


@pytest.fixture(scope="module")
def tiny_frame() -> pd.DataFrame:
    s = settings("ci", n=60, epsilons=[4.0, 3.0], chains=2, iter_warmup=100, iter_sampling=100)
    return beta_replicate(beta_params(s), replicate=0, seed=11)


def test_replicate_frame_layout(tiny_frame: pd.DataFrame) -> None:
    f = tiny_frame
    assert tuple(f.columns) == COLUMNS
    main = f[f.study == "main"]
    assert len(main) == 2 * 7  # Data, Unweighted, Weighted, Weighted-e, Censor_w, Censor_uw, PH
    assert set(main.mechanism) == BETA_STUDY_MECHANISMS
    assert (f.replicate == 0).all()
    fitted = f[~f.mechanism.isin(["Data", "PH"])]
    assert fitted[["lipschitz", "rhat_max", "max_ecdf", "mean"]].notna().all().all()
    assert np.allclose(fitted.epsilon_delivered, 2 * fitted.lipschitz)
    data = main[main.mechanism == "Data"]
    assert data.max_ecdf.isna().all() and data["median"].notna().all()
    ph = main[main.mechanism == "PH"]
    assert (ph.epsilon_delivered == ph.epsilon).all() and ph.lipschitz.isna().all()
    # epsilon-free synthesizers repeat the same values in every epsilon
    w = main[main.mechanism == "Weighted"]
    assert w.lipschitz.nunique() == 1 and w.max_ecdf.nunique() == 1


def test_censor_rows_never_exceed_half_epsilon(tiny_frame: pd.DataFrame) -> None:
    cens = tiny_frame[tiny_frame.mechanism.isin(["Censor_w", "Censor_uw"])]
    assert len(cens) > 0
    assert (cens.lipschitz <= cens.epsilon / 2 + 1e-12).all()
    assert (cens.guarantee == "DP").all()
    assert (cens.n_invoked == cens.n_censored).all()


def test_downscale_rows(tiny_frame: pd.DataFrame) -> None:
    ds = tiny_frame[tiny_frame.study == "downscale"]
    assert len(ds) == 6 and (ds.epsilon == 4.0).all()
    assert sorted(ds.downscale.unique()) == [PROFILES["ci"]["downscale"], 1.0]
    assert ds.groupby("mechanism").size().to_dict() == {
        "Censor_w": 2,
        "Weighted": 2,
        "Weighted-e": 2,
    }
    table = downscale_table(tiny_frame)
    assert len(table) == 4  # Weighted-e and Censor_w, without and with


def test_censoring_table_layout(tiny_frame: pd.DataFrame) -> None:
    t = censoring_table(pd.concat([tiny_frame, tiny_frame.assign(replicate=1)]))
    assert list(t.index.get_level_values(0).unique()) == [4.0, 3.0]
    assert list(t.columns) == ["min", "q1", "median", "mean", "q3", "max", "sd"]
    assert (t["sd"] == 0).all()


# ------------------------------------------------- where the paper leaves a choice (options)


def test_paper_profile_choices_and_validation_of_the_new_keys() -> None:
    s = settings("paper")
    assert s["ph_bin_rule"] == "log" and s["downscale"] == 0.9
    assert (s["lw_c"], s["lw_g"], s["lw_draw_quantile"]) == (1.0, 0.0, None)
    assert s["sdr_weighted_epsilon"] == 5.24 and s["sdr_tune_tol"] == 0.05
    # issue 20: the readings that reproduce Table 1, in both profiles and in the cache key
    for profile in ("paper", "ci"):
        t = settings(profile)
        assert (t["weighted_e_rule"], t["censor_w_reweight"], t["censor_w_k"]) == (
            "lw-bound",
            True,
            0.95,
        )
    plain = beta_params(settings("ci", weighted_e_rule="weighted-fit", censor_w_reweight=False))
    assert plain != beta_params(settings("ci"))
    assert settings("ci", sdr_weighted_epsilon=None)["sdr_weighted_epsilon"] == 5.24  # None keeps
    p = beta_params(settings("ci", lw_draw_quantile=0.9, lw_g=0.1))
    assert (p["lw_draw_quantile"], p["lw_g"], p["ph_bin_rule"]) == (0.9, 0.1, "log")
    for key, bad in (
        ("lw_c", float("nan")),
        ("lw_g", "x"),
        ("lw_draw_quantile", 0),
        ("lw_draw_quantile", 1.5),
        ("ph_bin_rule", "cube"),
        ("sdr_weighted_epsilon", -1.0),
        ("sdr_tune_tol", 1.5),
        ("weighted_e_rule", "draws"),
        ("censor_w_reweight", "yes"),
        ("censor_w_k", 0.0),
        ("censor_w_k", 1.2),
    ):
        with pytest.raises(InputError) as info:
            settings("ci", **{key: bad})
        assert info.value.param == key


def test_lw_record_bounds_follow_the_r_script() -> None:
    from dpsynth.mechanisms.weights import lw_record_bounds, lw_weights

    ll = np.array([[-1.0, 2.0, 0.5], [3.0, -0.5, 0.1], [0.2, 9.0, -0.3], [-0.4, 1.0, 4.0]])
    assert lw_record_bounds(ll).tolist() == [3.0, 9.0, 4.0]  # max |ll| over all draws
    # per-draw maxima 2, 3, 9, 4; the 0.5-quantile is 3.5: keep draws 0 and 1
    assert lw_record_bounds(ll, 0.5).tolist() == [3.0, 2.0, 0.5]
    assert lw_record_bounds(ll, 1.0).tolist() == [3.0, 9.0, 4.0]
    bad = ll.copy()
    bad[0, 2] = -np.inf
    out = lw_record_bounds(bad, 0.9)
    assert out[2] == np.inf and lw_weights(out)[2] == 0.0
    with pytest.raises(InputError) as info:
        lw_record_bounds(ll, 0.0)
    assert info.value.param == "draw_quantile"


def test_ph_bin_rules() -> None:
    from dpsynth.mechanisms.histogram import perturbed_histogram, ph_bins

    assert ph_bins(2000) == 45 and ph_bins(2000, rule="sqrt") == 45
    assert (ph_bins(2000, rule="log"), ph_bins(1000, rule="log"), ph_bins(400, rule="log")) == (
        8,
        7,
        6,
    )
    assert ph_bins(1, rule="log") == 1 and ph_bins(10, (0, 4), True, rule="log") == 5
    with pytest.raises(InputError) as info:
        ph_bins(100, rule="cube")
    assert info.value.param == "rule"
    y = np.random.default_rng(0).beta(0.5, 3, 500)
    a = perturbed_histogram(y, (0, 1), 5.0, np.random.default_rng(1), bin_rule="log")
    b = perturbed_histogram(y, (0, 1), 5.0, np.random.default_rng(1), n_bins=7)
    assert np.array_equal(a, b)  # ceil(ln 500) = 7 bins
    c = perturbed_histogram(y, (0, 1), 5.0, np.random.default_rng(1))
    d = perturbed_histogram(y, (0, 1), 5.0, np.random.default_rng(1), n_bins=23)
    assert np.array_equal(c, d)  # the default is unchanged: ceil(sqrt 500) = 23


def test_beta_summary_and_comparison(tiny_frame: pd.DataFrame) -> None:
    from dpsynth.studies.censoring import beta_comparison, beta_summary
    from dpsynth.studies.reproduction import compare, summary_frame

    frame = pd.concat([tiny_frame, tiny_frame.assign(replicate=1)])
    values = beta_summary(frame, 60)
    assert set(values) >= {"censor_w_count_4", "weighted_e_count_3", "best_dp_4", "censor_excess"}
    main = tiny_frame[(tiny_frame.study == "main") & (tiny_frame.epsilon == 4.0)]
    cw = main.loc[main.mechanism == "Censor_w", "n_invoked"].iloc[0]
    assert values["censor_w_count_4"].tolist() == [100 * cw / 60] * 2
    assert values["censor_excess"] <= 1e-12
    specs = beta_comparison([4.0, 3.0, 2.0], 4.0)
    by_key = {row["key"]: row for row in specs}
    assert by_key["t1_censor_w_mean_4"]["paper"] == 408.0
    assert by_key["t1_censor_w_mean_2"]["paper"] is None  # off the paper's grid
    assert by_key["t1_censor_w_mean_5"]["paper"] == 110.0  # not run here
    assert by_key["s4_censor_w_with_mean"]["paper"] == 144.0
    # each printed cell counted once: the mean counts are not repeated as shares, Table S4's
    # rows without downscaling repeat Table 1 at epsilon 4, 0.9 was fitted to Weighted-e's
    assert "censor_w_count_4" not in by_key
    assert by_key["s4_censor_w_without_q1"]["counted"] == "repeat"
    assert by_key["s4_weighted_e_with_mean"]["counted"] == "tuned"
    assert "counted" not in by_key["s4_censor_w_with_mean"]
    assert by_key["censor_excess"]["counted"] == "construction"
    assert by_key["t1_censor_w_mean_4"]["literal"] and "literal" not in by_key["t1_censor_uw_q1_4"]
    assert all("k" not in row for row in specs)  # one criterion, no per-row multiple
    table = compare(specs, summary_frame(values), study="beta").set_index("quantity")
    row = table.loc["Table 1, eps = 2, Censor_w: mean"]
    assert row["paper"] == "not in the paper" and row["verdict"] == "not in the paper"
    assert table.loc["Table 1, eps = 5, Censor_w: mean", "this run"] == "not run"
    assert by_key["best_dp_4"]["paper"] == "Censor_w (DP)"
    off = {r["key"]: r for r in beta_comparison([4.0], 2.0)}
    assert off["s4_censor_w_with_mean"]["paper"] is None  # downscaling off the paper's epsilon


def test_literal_summary_reads_the_plain_weights_run() -> None:
    from dpsynth.studies.censoring import literal_summary

    label, frame = literal_summary()
    assert label.startswith("literal reading: plain LW weights")
    value, se = frame.loc["t1_censor_w_mean_5", ["value", "se"]]
    assert value == pytest.approx(12.51) and se == pytest.approx(25.61584697 / 10)
    assert frame.loc["t1_censor_w_mean_4", "value"] == pytest.approx(98.84)
    assert np.isnan(frame.loc["t1_censor_w_q1_4", "se"])
    assert frame.loc["s4_censor_w_with_mean", "value"] == pytest.approx(43.31)


@pytest.mark.slow
def test_replicate_with_the_r_script_weights_and_a_shift() -> None:
    s = settings(
        "ci",
        n=60,
        epsilons=[4.0],
        chains=2,
        iter_warmup=100,
        iter_sampling=100,
        lw_draw_quantile=0.9,
        lw_g=0.1,
        downscale=None,
    )
    f = beta_replicate(beta_params(s), replicate=0, seed=11)
    assert set(f.mechanism) == BETA_STUDY_MECHANISMS
    cens = f[f.mechanism == "Censor_w"]
    assert (cens.lipschitz <= 2.0 + 1e-12).all()
    assert (f[f.mechanism == "Weighted"].n_zero_weight == 0).all()  # g = 0.1 > 0: no zero weight


@pytest.mark.slow
def test_tune_lw_weights_reaches_the_target() -> None:
    from dpsynth.mechanisms.posterior import Synthesizer
    from dpsynth.sampler import Sampler
    from dpsynth.studies.censoring import tune_lw_weights

    y = np.random.default_rng(5).beta(0.5, 3, 80)
    syn = Synthesizer(y, "beta", seed=3, sampler=Sampler(2, 150, 150))
    full = syn.lw(neighbours="add-remove").epsilon
    c, g, result, trace = tune_lw_weights(syn, 0.6 * full, tol=0.05, max_fits=6)
    assert trace["c"].iloc[0] == 1.0 and len(trace) <= 6 and g == 0.0
    assert 0 < c < 1 and abs(result.epsilon - 0.6 * full) <= 0.05 * 0.6 * full
    assert result.tuning == {"c": c, "g": 0.0}
    with pytest.raises(InputError):
        tune_lw_weights(syn, 0.0)


def test_sdr_summary_and_comparison() -> None:
    from dpsynth.studies.censoring import PAPER_TABLE2, sdr_comparison, sdr_summary
    from dpsynth.studies.reproduction import compare, summary_frame

    sd = PAPER_TABLE2.copy() * 0.0 + 1e-9  # the same values in every synthetic dataset
    trace = pd.DataFrame({"c": [1.0, 0.4], "epsilon": [12.16, 5.24], "lipschitz": [6.08, 2.62]})
    out = {"table": PAPER_TABLE2.copy(), "table_sd": sd, "tuning": {"c": 0.4, "g": 0.0}}
    out["tuning"]["trace"] = trace
    values = sdr_summary(out)
    assert values["weighted_epsilon"][0] == 5.24 and values["best_dp"] == "Censor_w"
    assert values["weighted_epsilon_literal"] == 12.16
    frame = summary_frame(values)
    table = compare(sdr_comparison(), frame, study="sdr", literal=frame, literal_label="lit")
    judged = table[table.paper != "not in the paper"]
    counted = judged[~judged.verdict.str.contains("not counted")]
    assert counted.verdict.str.contains("agrees").all()  # the paper agrees with itself
    # 11 cells built in: 4 Data, 5 epsilon / bound of Censor_w, Censor_uw and PH, 2 Weighted
    # (tuned); Weighted-e's epsilon and bound come from one fit, without an SE
    built_in = judged.verdict.str.contains("by construction|tuned")
    assert built_in.sum() == 11
    assert "differs" in table.loc[0, "lit"]  # the literal c = 1 misses 5.24
    out["table"].loc["max_ecdf", "Weighted"] = 0.2
    table = compare(sdr_comparison(), summary_frame(sdr_summary(out)), study="sdr")
    row = table[table.quantity == "max-ECDF: Weighted"].iloc[0]
    assert row.verdict.startswith("this run, smaller than the paper's: differs")
    # every numeric cell of Table 2 has a row (8 rows x 6 columns, minus the NAs)
    keys = {r["key"] for r in sdr_comparison() if r.get("paper") is not None}
    cells = PAPER_TABLE2.notna().sum().sum()
    assert len(keys - {"best_dp"}) == cells == 43


def test_table1_beside_paper_rescales_and_interleaves_the_paper() -> None:
    from dpsynth.studies.censoring import PAPER_TABLE1_FULL, table1_beside_paper

    table1 = pd.DataFrame(
        [[0, 10, 20, 30, 40, 50, 5.0], [1, 2, 3, 4, 5, 6, 1.0]],
        index=pd.MultiIndex.from_tuples([(4.0, "Censor_w"), (2.0, "Censor_w")]),
        columns=["min", "q1", "median", "mean", "q3", "max", "sd"],
    )
    out = table1_beside_paper(table1, n=1000)  # counts x 2000 / 1000
    assert out.loc[(4.0, "Censor_w", "dpsynth")].tolist() == [0, 20, 40, 60, 80, 100, 10]
    assert tuple(out.loc[(4.0, "Censor_w", "paper")]) == PAPER_TABLE1_FULL[(4.0, "Censor_w")]
    assert (2.0, "Censor_w", "paper") not in out.index  # off the paper's grid


def test_full_table1_rows_and_summaries(tiny_frame: pd.DataFrame) -> None:
    from dpsynth.studies.censoring import beta_comparison, beta_summary

    frame = pd.concat([tiny_frame, tiny_frame.assign(replicate=1)])
    values = beta_summary(frame, 60)
    main = tiny_frame[(tiny_frame.study == "main") & (tiny_frame.epsilon == 3.0)]
    cw = main.loc[main.mechanism == "Censor_w", "n_invoked"].iloc[0]
    value, se, r = values["t1_censor_w_median_3"]
    assert (value, se, r) == (cw * 2000 / 60, 0.0, 2)  # two equal replicates
    assert np.isnan(values["t1_censor_w_sd_3"][1]) or values["t1_censor_w_sd_3"][0] == 0
    assert values["censor_w_above_weighted_e_3"].shape == (2,)
    specs = {row["key"]: row for row in beta_comparison([4.0, 3.0], 4.0)}
    assert specs["t1_censor_w_q3_5"]["paper"] == 260.0
    assert specs["t1_weighted_e_sd_3"]["paper"] == 60.62
    assert specs["s4_censor_w_with_max"]["paper"] == 413.0
    assert "k" not in specs["t1_censor_uw_min_4"]  # the one criterion, no per-row multiple


def test_salaries_analogue_loads_real_data_and_compares() -> None:
    from dpsynth.models.catalogue import covariate_matrix
    from dpsynth.studies.censoring import PAPER_TABLE2, _sdr_covariates, sdr_analogue
    from dpsynth.studies.sdr_data import SALARIES_SOURCE, SALARY_BOUNDS, load_salaries

    frame = load_salaries()
    assert len(frame) == 397 and not frame.attrs["simulated"]
    assert frame.salary.between(*SALARY_BOUNDS).all()
    X = covariate_matrix(frame, *_sdr_covariates(SALARIES_SOURCE))
    assert X.shape == (397, 5)  # sex, two rank dummies, discipline, years since the PhD
    smaller = PAPER_TABLE2.copy()
    smaller.loc["max_ecdf"] = smaller.loc["max_ecdf"] / 2
    table, sentence = sdr_analogue({"table": smaller}, {"table": PAPER_TABLE2.copy()})
    assert table.loc["Censor_w", "max-ECDF, paper"] == "0.0968"
    assert table.loc["best strict-DP", "max-ECDF, Salaries"] == "Censor_w"
    assert "for 4 of the 4 on the stand-in and 0 of the 4 on the real Salaries" in sentence


def test_tune_lw_weights_searches_the_shift_when_c_1_falls_short() -> None:
    from types import SimpleNamespace

    from dpsynth.studies.censoring import tune_lw_weights

    class Stub:
        def lw(self, c=1.0, g=0.0, neighbours=None):
            eps = 4.0 * c + 4.0 * g  # c = 1: 4, below the target
            return SimpleNamespace(epsilon=eps, lipschitz=eps / 2)

    c, g, result, trace = tune_lw_weights(Stub(), 5.24, tol=0.05, max_fits=8)
    assert c == 1.0 and 0 < g < 1 and abs(result.epsilon - 5.24) <= 0.05 * 5.24
    assert trace["g"].iloc[0] == 0.0 and len(trace) <= 8


def test_sdr_summary_reads_the_literal_table() -> None:
    from dpsynth.studies.censoring import PAPER_TABLE2, sdr_comparison, sdr_summary
    from dpsynth.studies.reproduction import compare, summary_frame

    cols = ["Data", "Weighted", "Weighted-e", "Censor_w"]
    literal = PAPER_TABLE2[cols].copy()
    literal.loc["epsilon", "Weighted"] = 12.16
    out = {
        "table": PAPER_TABLE2.copy(),
        "tuning": {"c": 0.4, "g": 0.0},
        "literal_table": literal,
        "literal_table_sd": literal * 0.0 + 1e-3,
    }
    values = sdr_summary(out)
    assert values["weighted_epsilon_literal"][0] == 12.16
    assert values["censor_w_q90_literal"][0] == PAPER_TABLE2.loc["q90", "Censor_w"]
    frame = summary_frame(values)
    table = compare(sdr_comparison(), frame, study="sdr", literal=frame, literal_label="lit")
    by = dict(zip(table.quantity, table.lit, strict=True))
    assert by["epsilon: Weighted (aDP)"].startswith("12.16")
    assert "(agrees" in by["90th quantile ($): Censor_w"] and by["mean ($): PH"] == "-"
