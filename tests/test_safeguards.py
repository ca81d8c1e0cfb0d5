"""What a release promises the curator (issue 27): the public bounds on every model and
mechanism, the epsilon sanity limit, "NOT DP" verdicts, missing values, the report's
statement of its public inputs, and no file left in the temporary folder."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import commands
from dpsynth.curator import column_verdict
from dpsynth.errors import EPSILON_SANITY_LIMIT, InputError
from dpsynth.mechanisms.posterior import MECHANISMS, Synthesizer
from dpsynth.models import synthesis
from dpsynth.models.catalogue import (
    MODELS,
    clip_to_public_bounds,
    covariate_matrix,
    require_reference_levels,
)
from dpsynth.models.scaling import unscale_from_unit
from dpsynth.privacy import accounting
from dpsynth.release import safeguards, single
from dpsynth.release.single import synthesize
from dpsynth.sampler import Sampler

BOUNDS = (0.0, 100.0)
N = 40


def _valid_y(name: str) -> np.ndarray:
    """Records inside [0, 100] that the model accepts (counts for count models)."""
    rng = np.random.default_rng(1)
    if MODELS[name].outcome == "count":
        return rng.integers(0, 90, N).astype(float)
    return rng.uniform(1, 99, N)


def _X(name: str) -> np.ndarray | None:
    return np.random.default_rng(2).normal(size=(N, 1)) if MODELS[name].covariates else None


CASES = [(name, mech) for name in MODELS for mech in MECHANISMS] + [
    (None, "ph"),
    (None, "sbs"),
]


@pytest.mark.parametrize(("name", "mechanism"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_records_outside_the_bounds_are_refused_for_every_model_and_mechanism(name, mechanism):
    y = _valid_y(name or "beta")
    y[7] = 104.0  # the trial's record above --bounds 0 100
    kwargs = {} if name is None else {"model": name, "X": _X(name)}
    with pytest.raises(InputError) as err:
        synthesize(y, mechanism=mechanism, epsilon=3.0, bounds=BOUNDS, **kwargs)
    assert err.value.param == "y"
    assert "[CONFIDENTIAL, from the data: record 8] lies outside the public bounds" in str(
        err.value
    )
    assert "104" not in str(err.value)  # a position, never a value


@pytest.mark.parametrize(("name", "mechanism"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_clip_to_bounds_hands_the_mechanism_clipped_records(name, mechanism, monkeypatch):
    seen = {}

    def fake_release(y, **kw):
        seen.update(y=np.asarray(y, float), n_clipped=kw["n_clipped"])
        return single.Release(pd.DataFrame(), {}, {})

    monkeypatch.setattr(single, "_release", fake_release)
    y = _valid_y(name or "beta")
    y[[3, 7]] = [104.0, -2.0]
    kwargs = {} if name is None else {"model": name, "X": _X(name)}
    synthesize(y, mechanism=mechanism, epsilon=3.0, bounds=BOUNDS, clip_to_bounds=True, **kwargs)
    assert seen["n_clipped"] == 2
    assert seen["y"].min() >= 0.0 and seen["y"].max() <= 100.0


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_refuses_records_outside_bounds_itself(name):
    y = _valid_y(name)
    y[0] = 104.0
    with pytest.raises(InputError, match="outside the public bounds"):
        MODELS[name].to_stan_scale(y, BOUNDS)


@pytest.mark.parametrize("name", list(MODELS))
def test_synthetic_records_never_leave_the_bounds(name):
    """The unit scale's pad maps a draw near 1 up to pad above hi (beta regression on
    [0, 100]: 100.0001 in the trial); the one place records are made clips them."""
    assert unscale_from_unit(1 - 1e-12, *BOUNDS) > BOUNDS[1]  # the cause
    syn = Synthesizer(_valid_y(name), name, X=_X(name), bounds=BOUNDS)
    if MODELS[name].outcome == "count":
        draws = np.array([0.0, 5.0, 100.0, 101.0, 5000.0])
    else:
        draws = np.array([1e-300, 1e-9, 0.5, 1 - 1e-12, 1.0])
    out = synthesis.to_original_scale(syn.model, draws, syn.bounds)
    assert out.min() >= BOUNDS[0] and out.max() <= BOUNDS[1]


def test_clip_to_public_bounds_keeps_integers():
    out = clip_to_public_bounds(np.array([-3, 5, 120]), (0, 100))
    assert out.dtype.kind == "i" and out.tolist() == [0, 5, 100]


@pytest.mark.slow
def test_beta_regression_release_stays_inside_bounds():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(150, 1))
    y = np.clip(99.99 - rng.exponential(0.01, 150), 0, 100)  # records at the top bound
    rel = synthesize(
        y,
        model="beta-regression",
        mechanism="censor-uw",
        epsilon=8.0,
        X=X,
        bounds=BOUNDS,
        sampler=Sampler(chains=1, iter_warmup=150, iter_sampling=150),
    )
    values = rel.data["y"].to_numpy()
    assert values.max() <= 100.0 and values.min() >= 0.0


# ----------------------------------------------------------------------------- epsilon


def test_epsilon_above_the_sanity_limit_needs_the_explicit_flag():
    y = np.random.default_rng(2).uniform(0, 10, 200)
    kw = {"mechanism": "ph", "bounds": (0, 10)}
    assert "large_epsilon" not in synthesize(y, epsilon=EPSILON_SANITY_LIMIT, **kw).report
    with pytest.raises(InputError) as err:
        synthesize(y, epsilon=1000, **kw)
    assert err.value.param == "epsilon" and "allow_large_epsilon=True" in str(err.value)
    rel = synthesize(y, epsilon=25, allow_large_epsilon=True, **kw)
    assert "protects almost nothing" in rel.report["large_epsilon"]
    assert rel.report["large_epsilon"] in rel.report["caveats"]


def test_cli_refuses_large_epsilon_in_one_line_with_the_flag_to_pass(tmp_path, capsys):
    inp = tmp_path / "in.csv"
    pd.DataFrame({"y": np.linspace(0.1, 0.9, 20)}).to_csv(inp, index=False)
    argv = ["synthesize", str(inp), "--column", "y", "--mechanism", "ph", "--bounds", "0", "1"]
    argv += ["--epsilon", "1000", "--out", str(tmp_path / "o.csv")]
    argv += ["--report", str(tmp_path / "r.json")]
    assert commands.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dpsynth: error: --epsilon:") and "--allow-large-epsilon" in err
    assert "\n" not in err and not (tmp_path / "o.csv").exists()
    assert commands.main([*argv, "--allow-large-epsilon", "--quiet"]) == 0
    assert "large_epsilon" in (tmp_path / "r.json").read_text()


# ----------------------------------------------------------------------------- NOT DP


NOT_DP = ["aDP", "none", "not private (known seed)", "not established"]


def _good_verdict(guarantee: str | None) -> dict:
    y = np.random.default_rng(3).normal(5, 1, 400)
    sets = np.random.default_rng(4).normal(5, 1, (1, 400))
    return column_verdict.utility_verdict(y, sets, outcome="real", guarantee=guarantee)


@pytest.mark.parametrize("guarantee", NOT_DP)
def test_a_release_without_dp_is_never_called_publishable(guarantee):
    verdict = _good_verdict(guarantee)
    assert verdict["verdict"] == "good" and verdict["dp"] is False
    text = column_verdict.format_summary(verdict)
    assert text.split()[:2] == ["NOT", "DP:"]
    assert "verdict: NOT DP" in text
    assert "can be published" not in text and "published as it is" not in text
    assert "no DP guarantee" in verdict["next_step"]


def test_a_dp_release_keeps_its_verdict():
    verdict = _good_verdict("DP")
    text = column_verdict.format_summary(verdict)
    assert text.startswith("CONFIDENTIAL") and "NOT DP" not in text
    assert "can be published" in verdict["next_step"]


def test_a_dp_release_above_the_sanity_limit_is_never_called_publishable():
    """epsilon 1000 passed with allow_large_epsilon: still "DP" in the report, but a good
    verdict says the guarantee protects almost nothing, never "can be published"; at the
    limit (20) the usual good verdict stands."""
    y = np.random.default_rng(2).uniform(0, 10, 400)
    rel = synthesize(y, mechanism="ph", epsilon=1000, bounds=(0, 10), allow_large_epsilon=True)
    verdict = rel.diagnostics["utility"]
    assert rel.report["guarantee"] == "DP" and verdict["verdict"] == "good"
    assert verdict["rules"][0] == "good_large_epsilon"
    assert "epsilon 1000 is above the sanity limit (20)" in verdict["next_step"]
    assert "can be published" not in verdict["next_step"]
    y5 = np.random.default_rng(3).normal(5, 1, 400)
    sets = np.random.default_rng(4).normal(5, 1, (1, 400))
    at_limit = column_verdict.utility_verdict(
        y5, sets, outcome="real", guarantee="DP", epsilon=20.0
    )
    assert "can be published" in at_limit["next_step"]


def test_seeded_release_verdict_says_not_dp(capsys):
    y = np.random.default_rng(2).uniform(0, 10, 300)
    with pytest.warns(single.KnownSeedWarning):
        rel = synthesize(y, mechanism="ph", epsilon=3, bounds=(0, 10), seed=5)
    assert rel.diagnostics["utility"]["guarantee"] == "not private (known seed)"
    commands._print_verdict(rel.diagnostics["utility"], rel.report["guarantee"])
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("[dpsynth] NOT DP:")


@pytest.mark.parametrize("guarantee", NOT_DP)
def test_cli_unavailable_verdict_still_says_not_dp(guarantee, capsys):
    commands._print_verdict({"verdict": "unavailable", "reason": "x"}, guarantee)
    assert capsys.readouterr().err.startswith("[dpsynth] NOT DP:")


# ----------------------------------------------------------------------------- missing values


def test_missing_outcome_named_by_column_and_count():
    y = np.array([0.1, np.nan, 0.3, np.nan, 0.5])
    with pytest.raises(InputError) as err:
        synthesize(y, mechanism="ph", epsilon=1, bounds=(0, 1), column="income")
    text = str(err.value)
    assert (
        "'income'" in text
        and "[CONFIDENTIAL, from the data: 2 value(s), the first at record 2]" in text
    )


def test_drop_missing_needs_public_n_and_reports_the_map_not_the_count():
    y = np.r_[np.random.default_rng(5).uniform(0, 1, 100), [np.nan] * 7]
    with pytest.raises(InputError) as err:
        synthesize(y, mechanism="ph", epsilon=1, bounds=(0, 1), drop_missing=True)
    assert err.value.param == "n_synthetic"
    rel = synthesize(
        y, mechanism="ph", epsilon=1, bounds=(0, 1), drop_missing=True, n_synthetic=100
    )
    assert rel.diagnostics["n_dropped_missing"] == 7
    assert "7" not in str(rel.report["missing_values"])
    assert (
        rel.report["missing_values"]["neighbour_map"]
        == accounting.DROPPED_RECORDS_MAP["substitution"]
    )
    assert len(rel.data) == 100


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"mechanism": "sbs"}, "drop_missing"),
        # a regression keeps the covariate rows of the records kept: a missing outcome is
        # refused (dropping it would tell whose outcome was missing)
        ({"mechanism": "censor-uw", "X": np.ones((5, 1)), "n_synthetic": None}, "y"),
    ],
)
def test_drop_missing_refused_where_it_would_leak(kwargs, param):
    y = np.array([0.1, np.nan, 0.3, 0.4, 0.5])
    with pytest.raises(InputError) as err:
        synthesize(y, epsilon=1, bounds=(0, 1), drop_missing=True, **{"n_synthetic": 5, **kwargs})
    assert err.value.param == param


def test_dropping_map_covers_substitution_and_add_remove():
    """Under substitution on the file the records kept differ by a substitution OR an
    addition/removal: the substitution bound must cover both."""
    for eps in (0.5, 3.0):
        m_sub = accounting.censor_bound(eps, "substitution")
        assert accounting.epsilon_of(m_sub, "add-remove") <= eps
        assert accounting.epsilon_of(m_sub, "substitution") == pytest.approx(eps)
    sub, ar = (accounting.histogram_sensitivity(k) for k in ("substitution", "add-remove"))
    assert sub >= ar


def test_missing_covariates_named_never_recoded():
    frame = pd.DataFrame({"y": [0.1, 0.2, 0.3], "age": [1.0, np.nan, 3.0], "g": ["a", None, "b"]})
    with pytest.raises(
        InputError,
        match=r"covariate 'age' has missing values \[CONFIDENTIAL, from the data: 1 value",
    ):
        covariate_matrix(frame, "age", None)
    with pytest.raises(
        InputError, match=r"covariate 'g' has missing values \[CONFIDENTIAL, from the data: 1 value"
    ):
        covariate_matrix(frame, "g", None)
    with pytest.raises(
        InputError, match=r"covariate 'g' has missing values \[CONFIDENTIAL, from the data: 1 value"
    ):
        synthesize(
            frame["y"].to_numpy(),
            model="beta-regression",
            mechanism="censor-uw",
            epsilon=1,
            X=np.ones((3, 1)),
            covariates=frame[["g"]],
        )


def test_drop_missing_in_a_regression_drops_missing_covariates_publicly():
    """Covariates are public: records with a missing covariate are dropped from y, X and the
    covariates alike (the count is public); a missing outcome stays refused, pointing to
    synthesize-table."""
    from dpsynth.models.catalogue import covariate_matrix

    frame = pd.DataFrame(
        {"y": [0.1, 0.2, 0.3, 0.4, 0.5], "age": [30.0, np.nan, 50, 20, 40],
         "sex": ["f", "m", None, "m", "f"]}
    )  # fmt: skip
    with pytest.raises(
        InputError,
        match=r"covariate 'age' has missing values \[CONFIDENTIAL, from the data: 1 value",
    ):
        covariate_matrix(frame, "age,sex", None)
    X = covariate_matrix(frame, "age,sex", None, allow_missing=True)
    assert np.isnan(X[1]).all() and np.isnan(X[2]).all()
    np.testing.assert_array_equal(X[[0, 3, 4]], [[30, 0], [20, 1], [40, 0]])
    y, Xk, cov, dropped = safeguards.drop_incomplete_covariates(
        frame["y"].to_numpy(), X, frame[["age", "sex"]]
    )
    assert dropped == 2 and list(y) == [0.1, 0.4, 0.5]
    assert Xk.shape == (3, 2) and list(cov["age"]) == [30.0, 20.0, 40.0]
    with pytest.raises(InputError, match="synthesize-table"):
        safeguards.missing_outcome(np.array([0.1, np.nan]), "y", True, regression=True)
    assert safeguards.missing_outcome(np.array([0.1, 0.2]), "y", True, regression=True)[1] == 0


@pytest.mark.slow
def test_cli_regression_drops_records_with_a_missing_covariate(tmp_path):
    """--drop-missing with --covariates: the records with a missing covariate are left out
    of the release (its file lists only complete covariate rows) and the public report says
    how many (the covariates are public)."""
    rng = np.random.default_rng(4)
    n = 120
    x = rng.normal(size=n)
    frame = pd.DataFrame({"y": np.clip(50 + 10 * x + rng.normal(0, 5, n), 1, 99), "x": x})
    frame.loc[[3, 17, 40], "x"] = np.nan
    inp = tmp_path / "in.csv"
    frame.to_csv(inp, index=False)
    argv = [
        "synthesize", str(inp), "--column", "y", "--model", "beta-regression",
        "--covariates", "x", "--drop-missing", "--bounds", "0", "100", "--epsilon", "6",
        "--mechanism", "censor-uw",
        "--chains", "1", "--iter-warmup", "150", "--iter-sampling", "150",
        "--out", str(tmp_path / "o.csv"),
        "--report", str(tmp_path / "r.json"), "--quiet",
    ]  # fmt: skip
    assert commands.main(argv) == 0
    out = pd.read_csv(tmp_path / "o.csv")
    assert len(out) == n - 3 and out["x"].notna().all()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["missing_values"]["dropped"].startswith("3 record(s) with a missing covariate")


def test_missing_outcome_hint_offers_only_what_applies(tmp_path):
    """--drop-missing is offered for a single outcome; with covariates (where dropping is
    refused: the kept covariate rows would tell whose outcome was missing) the hint points
    to synthesize-table's missingness indicator instead."""
    from dpsynth.cli.files import read_input

    path = tmp_path / "in.csv"
    path.write_text("y,x\n0.1,1\n,2\n0.3,3\n")
    with pytest.raises(InputError) as single:
        read_input(str(path), "y", "IN.csv")
    assert "--drop-missing drops such records" in str(single.value)
    with pytest.raises(InputError) as regression:
        read_input(str(path), "y", "IN.csv", regression=True)
    assert "--drop-missing" not in str(regression.value)
    assert "synthesize-table" in str(regression.value) and "from the data: 1 value(s)" in str(
        regression.value
    )


def test_design_names_follow_the_covariates_and_their_dummies():
    """The verdict's coefficients are named after the covariates (a dummy by its level), as
    covariate_matrix codes them; a design that does not match falls back to x1 ... xp."""
    from dpsynth.models.catalogue import covariate_matrix

    frame = pd.DataFrame(
        {"age": [30.0, 41, 52, 23], "sex": ["f", "m", "m", "f"], "region": [1, 2, 3, 1]}
    )
    X = covariate_matrix(frame, "age,sex,region", "region")
    names = safeguards.design_names(X, frame[["age", "sex", "region"]])
    assert names == ["age", "sex_m", "region_2", "region_3"]
    assert safeguards.design_names(X[:, ::-1], frame[["age", "sex", "region"]]) == [
        "x1", "x2", "x3", "x4",
    ]  # fmt: skip
    assert safeguards.design_names(X, None) == ["x1", "x2", "x3", "x4"]


def test_reference_lacking_a_level_is_named():
    data = pd.DataFrame({"g": ["a", "b", "c"], "x": [1.0, 2, 3]})
    ref = pd.DataFrame({"g": ["a", "b"], "x": [1.0, 2]})
    with pytest.raises(InputError) as err:
        require_reference_levels(data, ref, "x,g", None, "--centring-from")
    assert err.value.param == "--centring-from"
    assert "'c'" in str(err.value) and "'g'" in str(err.value)
    assert "--centring:" not in str(err.value)
    require_reference_levels(data, data, "x,g", None, "--centring-from")  # same levels: fine


# ----------------------------------------------------------------------------- messages, report


def test_model_regression_names_get_a_hint(capsys):
    with pytest.raises(SystemExit):
        commands.main(
            ["synthesize", "x.csv", "--column", "y", "--mechanism", "ph"]
            + ["--epsilon", "1", "--out", "o", "--report", "r", "--model", "negbin-regression"]
        )
    err = capsys.readouterr().err
    assert "--model negbin --covariates" in err and err.count("\n") == 1
    help_text = (
        commands.build_parser()._subparsers._group_actions[0].choices["synthesize"].format_help()
    )
    assert "regression" in help_text.split("--covariates COVARIATES", 2)[-1][:300]


def test_report_names_outcome_covariates_bounds_and_public_files():
    y = np.random.default_rng(2).uniform(0, 10, 100)
    rel = synthesize(
        y, mechanism="ph", epsilon=1, bounds=(0, 10), column="wage", public_files={"ref": "ab"}
    )
    assert rel.report["outcome_column"] == "wage"
    assert rel.report["covariates"] == [] and rel.report["bounds"] == [0.0, 10.0]
    assert rel.report["public_files_sha256"] == {"ref": "ab"}
    names = safeguards.public_inputs("y", None, pd.DataFrame({"age": [1], "g": ["a"]}), None)
    assert names["covariates"] == ["age", "g"]


def test_cli_hashes_every_public_reference_file(tmp_path):
    from dpsynth.privacy.budget import file_sha256

    ref = tmp_path / "ref.csv"
    ref.write_text("y\n0.5\n")
    args = commands.build_parser().parse_args(
        ["synthesize", "in.csv", "--column", "y", "--mechanism", "censor-w", "--epsilon", "1"]
        + ["--out", "o", "--report", "r", "--weights-from", str(ref)]
    )
    assert commands._public_file_hashes(args) == {"--weights-from": file_sha256(ref)}


# ----------------------------------------------------------------------------- temp folder


@pytest.mark.slow
def test_pystan_release_leaves_no_socket_in_the_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DPSYNTH_STAN_BACKEND", "pystan")
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    y = np.random.default_rng(4).beta(2, 5, 100)
    synthesize(
        y,
        mechanism="censor-uw",
        epsilon=6,
        sampler=Sampler(chains=2, iter_warmup=50, iter_sampling=50, backend="pystan"),
    )
    # no socket anywhere; what may stay is this process's own private fit folder (0700,
    # removed when the process ends: dpsynth.engine.private_dir), created here when this
    # test is the process's first fit
    assert not [q for q in Path(folder).rglob("*") if q.is_socket()]
    for left in Path(folder).iterdir():
        assert left.name.startswith(f"dpsynth-pystan-{os.getpid()}-"), left.name
        assert stat.S_IMODE(left.stat().st_mode) == 0o700


def test_progress_never_prints_the_confidential_count_of_records_kept(capsys):
    """With drop_missing the number of records kept (137 of 150) is confidential: the
    progress lines on the terminal name the fit but not the count."""
    y = np.random.default_rng(5).beta(2, 5, 150)
    y[:13] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        synthesize(
            y, mechanism="censor-uw", epsilon=2.0, bounds=(0, 1), drop_missing=True,
            n_synthetic=150, progress=True, seed=3,
        )  # fmt: skip
    err = capsys.readouterr().err
    assert "fitting" in err
    public = [ln for ln in err.splitlines() if "CONFIDENTIAL" not in ln]
    assert not [ln for ln in public if "137" in ln], public
