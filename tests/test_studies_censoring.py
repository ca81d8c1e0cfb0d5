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
    assert set(main.mechanism) == {
        "Data",
        "Unweighted",
        "Weighted",
        "Weighted-e",
        "Censor_w",
        "Censor_uw",
        "PH",
    }
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
