"""Tests of dpsynth.studies.vector_weighted: profiles, settings validation and the fit-free parts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.studies import vector_weighted as sw
from dpsynth.weights import cw_weights


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
