"""The one release path, dpsynth.release.single.synthesize, and Release.write.

Public report vs confidential diagnostics, the total budget over m sets, the censoring
bound per neighbour definition, the guarantee of each mechanism, the known-seed warning,
convergence, covariates, user programs (convention and censoring checks), SBS, and the
all-or-nothing writer. Stan-using tests are marked slow and kept small (n = 200).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth import engine, io
from dpsynth.engine import STAN_DIR
from dpsynth.errors import InputError
from dpsynth.io import to_json
from dpsynth.models.catalogue import MODELS, Model, covariate_matrix
from dpsynth.models.program_checks import check_censored, check_convention
from dpsynth.release import single
from dpsynth.release.single import (
    CONFIDENTIAL_BANNER,
    CONVERGENCE,
    EXACT_DRAW_PREMISE,
    KnownSeedWarning,
    Release,
    converged,
    synthesize,
)
from dpsynth.sampler import Sampler

TEST_STAN = Path(__file__).resolve().parent / "stan"
SEED = 424242421  # a seed long enough that finding it in a report cannot be a coincidence


@pytest.fixture(scope="module")
def uniform_data() -> np.ndarray:
    """500 records uniform on the public bounds [0, 10], seed 2."""
    return np.random.default_rng(2).uniform(0, 10, 500)


@pytest.fixture(scope="module")
def gauss() -> np.ndarray:
    """200 records from N(1, 1), seed 3, clipped to the public bounds [-4, 4] of the SBS
    tests (records outside the bounds are refused since issue 27; SBS clipped them)."""
    return np.clip(np.random.default_rng(3).normal(1.0, 1.0, size=200), -4, 4)


def _quiet_seeded(**kwargs):
    """synthesize() with a known seed, asserting the KnownSeedWarning it must emit and the
    report's label (not private, no epsilon). The release comes back with the report's
    ``if_unseeded`` fields in place: what the mechanism gives with seeds from the OS."""
    with pytest.warns(KnownSeedWarning, match="not private"):
        rel = synthesize(**kwargs)
    report = rel.report
    assert report["guarantee"] == "not private (known seed)"
    assert report["epsilon"] is None and report["epsilon_per_set"] is None
    assert report["seed"] == "user-supplied (release NOT private)"
    rel.report = {**report, **report["if_unseeded"]}
    return rel


def _assert_total_budget(report, epsilon, m):
    assert report["epsilon"] == pytest.approx(epsilon)
    assert report["epsilon_per_set"] == pytest.approx(epsilon / m)
    assert report["m"] == m
    ledger = report["ledger"]
    assert ledger["total"] == pytest.approx(epsilon)
    assert ledger["spent"] == pytest.approx(epsilon)
    assert [s["epsilon"] for s in ledger["spends"]] == pytest.approx([epsilon / m] * m)
    assert all(s["composition"] == "sequential" for s in ledger["spends"])


def _assert_public_report(rel: Release, strict_json) -> dict:
    """The report names no seed value, parses as strict JSON; diagnostics start with the banner."""
    text = to_json(rel.report)
    seed = rel.diagnostics["seed"]
    assert isinstance(seed, int) and seed >= 10**8  # long enough to search for
    assert str(seed) not in text
    assert rel.report["seed"] in ("operating system", "user-supplied (release NOT private)")
    assert list(rel.diagnostics)[0] == "confidential"
    assert rel.diagnostics["confidential"] == CONFIDENTIAL_BANNER
    return strict_json(text)


# ----------------------------------------------------------------------------- seeds


def test_report_never_contains_the_seed(uniform_data, strict_json):
    rel = _quiet_seeded(y=uniform_data, mechanism="ph", epsilon=1.0, bounds=(0, 10), seed=SEED)
    _assert_public_report(rel, strict_json)
    assert rel.report["seed"] == "user-supplied (release NOT private)"
    assert rel.diagnostics["seed"] == SEED
    assert rel.report["noise"] == "numpy Laplace (seeded, NOT private)"
    # an OS seed is not published either
    os_rel = synthesize(uniform_data, mechanism="ph", epsilon=1.0, bounds=(0, 10))
    _assert_public_report(os_rel, strict_json)
    assert os_rel.report["seed"] == "operating system"
    assert os_rel.report["noise"] == "OpenDP Laplace"


def test_unseeded_runs_differ_and_do_not_warn(uniform_data):
    with warnings.catch_warnings():
        warnings.simplefilter("error", KnownSeedWarning)
        a = synthesize(uniform_data, mechanism="ph", epsilon=1.0, bounds=(0, 10))
        b = synthesize(uniform_data, mechanism="ph", epsilon=1.0, bounds=(0, 10))
    assert a.diagnostics["seed"] != b.diagnostics["seed"]
    assert not np.array_equal(a.data["y"], b.data["y"])  # continuous draws: equal w.p. 0


@pytest.mark.parametrize("mechanism", ["ph", "sbs"])
def test_seeded_runs_warn_and_agree(uniform_data, mechanism):
    kw = dict(y=uniform_data, mechanism=mechanism, epsilon=1.0, bounds=(0, 10), m=2, seed=7)
    a, b = _quiet_seeded(**kw), _quiet_seeded(**kw)
    assert a.data.equals(b.data)
    assert a.report["ledger"] == b.report["ledger"]


# ----------------------------------------------------------------------------- the total budget


def test_ph_total_budget_over_m_sets(uniform_data, strict_json):
    rel = synthesize(uniform_data, mechanism="ph", epsilon=3.0, m=3, bounds=(0, 10))
    _assert_total_budget(rel.report, 3.0, 3)
    assert rel.report["guarantee"] == "DP"
    assert rel.report["internal_bound"]["count_sensitivity_l1"] == 2.0
    assert list(rel.data.columns) == ["synthetic_set", "y"] and len(rel.data) == 1500
    assert rel.data["y"].between(0, 10).all()
    _assert_public_report(rel, strict_json)


def test_ph_add_remove_uses_sensitivity_one_and_public_n(uniform_data):
    rel = synthesize(
        uniform_data,
        mechanism="ph",
        epsilon=3.0,
        m=3,
        bounds=(0, 10),
        neighbours="add-remove",
        n_synthetic=120,
    )
    _assert_total_budget(rel.report, 3.0, 3)
    assert rel.report["internal_bound"]["count_sensitivity_l1"] == 1.0
    assert rel.report["neighbours"] == "add-remove"
    assert rel.report["n_records"] == 120 and len(rel.data) == 360


def test_sbs_total_budget_over_m_sets(gauss, strict_json):
    rel = synthesize(gauss, mechanism="sbs", epsilon=3.0, m=3, bounds=(-4, 4))
    _assert_total_budget(rel.report, 3.0, 3)
    assert rel.report["guarantee"] == "DP" and rel.report["model"] == "sbs_gaussian"
    _assert_public_report(rel, strict_json)


@pytest.mark.slow
def test_censor_uw_total_budget_substitution_bound(beta_data, converging_sampler, strict_json):
    rel = _quiet_seeded(
        y=beta_data,
        mechanism="censor-uw",
        epsilon=3.0,
        m=3,
        seed=SEED,
        sampler=converging_sampler,
    )
    report = _assert_public_report(rel, strict_json)
    _assert_total_budget(report, 3.0, 3)
    assert report["guarantee"] == "DP" and report["neighbours"] == "substitution"
    # substitution: epsilon = 4M per draw, so M = (3 / 3) / 4
    assert report["internal_bound"]["censor_bound_M"] == pytest.approx(0.25)
    assert report["internal_bound"]["epsilon_per_draw"] == pytest.approx(1.0)
    assert converged(rel.diagnostics["mcmc"]), rel.diagnostics["mcmc"]
    # confidential: the draws-based bound (never above M) and the censored count
    assert 0 < rel.diagnostics["lipschitz_bound_draws"] <= 0.25 + 1e-12
    assert rel.diagnostics["n_censored"] > 0
    for key in ("lipschitz", "n_censored", "rhat", "ess_bulk", "mcmc"):
        assert key not in to_json(report)
    data = rel.data
    assert list(data.columns) == ["synthetic_set", "y"] and len(data) == 600
    assert data["y"].between(0, 1, inclusive="neither").all()
    assert not np.isin(data["y"].to_numpy(), beta_data).any()  # no record copied


@pytest.mark.slow
def test_censor_uw_add_remove_bound_is_half_the_budget(beta_data, converging_sampler):
    rel = _quiet_seeded(
        y=beta_data,
        mechanism="censor-uw",
        epsilon=3.0,
        m=3,
        seed=SEED + 1,
        neighbours="add-remove",
        n_synthetic=150,
        sampler=converging_sampler,
    )
    # add/remove: epsilon = 2M per draw, the papers' M = (3 / 3) / 2
    assert rel.report["internal_bound"]["censor_bound_M"] == pytest.approx(0.5)
    assert rel.report["guarantee"] == "DP"
    _assert_total_budget(rel.report, 3.0, 3)
    assert len(rel.data) == 450 and rel.report["n_records"] == 150


# ----------------------------------------------------------------------------- guarantees


@pytest.mark.slow
def test_censor_w_without_reference_has_no_guarantee(beta_data, small_sampler):
    rel = _quiet_seeded(
        y=beta_data, mechanism="censor-w", epsilon=3.0, seed=SEED, sampler=small_sampler
    )
    report = rel.report
    assert report["guarantee"] == "none"
    assert report["epsilon"] is None and report["epsilon_per_set"] is None
    assert report["epsilon_budgeted"] == pytest.approx(3.0)
    assert "reference" in report["guarantee_meaning"]


@pytest.mark.slow
def test_censor_w_with_reference_is_dp(beta_data, converging_sampler, strict_json):
    reference = np.random.default_rng(2).beta(1.5, 1.5, 200)  # a public, earlier database
    rel = _quiet_seeded(
        y=beta_data,
        mechanism="censor-w",
        epsilon=3.0,
        seed=SEED,
        sampler=converging_sampler,
        reference=reference,
    )
    report = _assert_public_report(rel, strict_json)
    assert report["guarantee"] == "DP", rel.diagnostics["mcmc"]
    assert report["epsilon"] == pytest.approx(3.0)
    assert "reference" in report["guarantee_meaning"]
    assert report["internal_bound"]["censor_bound_M"] == pytest.approx(0.75)


@pytest.mark.slow
def test_adp_release_with_public_covariates(beta_data, small_sampler, strict_json):
    # beta regression, unweighted (aDP): no epsilon published, the local epsilon only in
    # the diagnostics; the covariates are written beside the synthetic outcome
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    X = covariate_matrix(frame, "x,g", None)
    rel = _quiet_seeded(
        y=beta_data,
        model="beta-regression",
        mechanism="unweighted",
        epsilon=3.0,
        m=2,
        seed=SEED,
        sampler=small_sampler,
        X=X,
        covariates=frame,
    )
    report = _assert_public_report(rel, strict_json)
    assert report["guarantee"] == "aDP"
    assert report["epsilon"] is None and report["epsilon_per_set"] is None
    local = rel.diagnostics["epsilon_local_draws"]
    assert np.isfinite(local) and local > 0
    text = to_json(report)
    assert "epsilon_local" not in text and "lipschitz" not in text
    assert repr(local) not in text
    data = rel.data
    assert list(data.columns) == ["synthetic_set", "y", "x", "g"] and len(data) == 400
    for j in (1, 2):
        part = data[data["synthetic_set"] == j].reset_index(drop=True)
        pd.testing.assert_frame_equal(part[["x", "g"]], frame)
    assert any("public" in c for c in report["caveats"])


def test_add_remove_with_covariates_is_refused(beta_data):
    with pytest.raises(InputError) as exc:
        synthesize(
            beta_data,
            model="beta-regression",
            mechanism="censor-uw",
            neighbours="add-remove",
            n_synthetic=10,
            X=np.zeros((200, 1)),
        )
    assert exc.value.param == "neighbours"


# ----------------------------------------------------------------------------- convergence


@pytest.mark.slow
def test_unconverged_fit_is_released_with_the_same_label_and_a_poor_verdict(
    beta_data, tiny_sampler, converging_sampler
):
    """Once the data are read, a fit's convergence never refuses nor relabels a release
    (it would make the outcome depend on the data): the unconverged run and a converged one
    state the same guarantee and report keys; the confidential verdict of the unconverged
    one is poor, driven by its convergence, with its figures marked confidential."""
    kw = dict(y=beta_data, mechanism="censor-uw", epsilon=3.0, seed=SEED)
    bad = _quiet_seeded(**kw, sampler=tiny_sampler)
    good = _quiet_seeded(**kw, sampler=converging_sampler)
    assert not converged(bad.diagnostics["mcmc"]) and converged(good.diagnostics["mcmc"])
    for rel in (bad, good):
        assert rel.report["if_unseeded"]["guarantee"] == "DP"
        assert EXACT_DRAW_PREMISE in rel.report["caveats"]
    assert set(bad.report) == set(good.report) and set(bad.diagnostics) == set(good.diagnostics)
    verdict = bad.diagnostics["utility"]
    assert verdict["verdict"] == "poor" and verdict["converged"] is False
    assert verdict["rules"][0] == "convergence" and "CONFIDENTIAL" in verdict["next_step"]
    assert good.diagnostics["utility"].get("converged") is None
    with pytest.warns(DeprecationWarning, match="allow_unconverged has no effect"):
        _quiet_seeded(**kw, sampler=tiny_sampler, allow_unconverged=True)


def test_convergence_thresholds():
    ok = {"rhat_max": 1.005, "ess_bulk_min": 150.0, "divergences": 0}
    assert CONVERGENCE == {
        "rhat_max": 1.01,
        "rhat_scatter": 0.01,
        "ess_bulk_min": 100.0,
        "divergences": 0,
    }
    assert converged(ok)
    assert single.convergence_failures(ok) == []
    for change in (
        {"rhat_max": 1.011},
        {"rhat_max": float("nan")},
        {"ess_bulk_min": 99.0},
        {"ess_bulk_min": float("nan")},
        {"divergences": 1},
    ):
        bad = {**ok, **change}
        assert not converged(bad), change
        assert len(single.convergence_failures(bad)) == 1, change


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": 1e308}, "epsilon"),
        ({"epsilon": 1e-308}, "epsilon"),
        ({"m": 0}, "m"),
        ({"m": 1.5}, "m"),
        ({"mechanism": "magic"}, "mechanism"),
        ({"neighbours": "swap"}, "neighbours"),
        ({"neighbours": "add-remove"}, "n_synthetic"),
        ({"n_synthetic": 0}, "n_synthetic"),
        ({"radius": 2.0}, "radius"),  # an option PH would ignore
        ({"data_type": "binary"}, "data_type"),
        ({"reference": [0.1, 0.2]}, "reference"),
        ({"bounds": None}, "bounds"),
        ({"bounds": (10, 0)}, "bounds"),
    ],
)
def test_ph_refusals_name_the_parameter(uniform_data, kwargs, param):
    args = {"mechanism": "ph", "epsilon": 1.0, "bounds": (0, 10), **kwargs}
    with pytest.raises(InputError) as exc:
        synthesize(uniform_data, **args)
    assert exc.value.param == param


def test_options_a_stan_mechanism_ignores_are_refused(beta_data):
    for key, value in (("radius", 2.0), ("n_bins", 10), ("known_sd", 1.0)):
        with pytest.raises(InputError) as exc:
            synthesize(beta_data, mechanism="censor-uw", **{key: value})
        assert exc.value.param == key


# ----------------------------------------------------------------------------- SBS


def test_sbs_gaussian_multiple_sets(gauss, strict_json):
    rel = _quiet_seeded(
        y=gauss, mechanism="sbs", epsilon=2.0, bounds=(-4, 4), m=3, seed=SEED, column="y"
    )
    frame, report = rel.data, rel.report
    assert list(frame.columns) == ["synthetic_set", "y"]
    assert frame["synthetic_set"].dtype.kind == "i"
    assert frame.groupby("synthetic_set").size().to_dict() == {1: 200, 2: 200, 3: 200}
    assert frame["y"].between(-4, 4).all()
    assert report["mechanism"] == "sbs" and report["guarantee"] == "DP"
    assert report["n_records"] == 200 and report["m"] == 3
    assert report["internal_bound"]["bounding"] == "bit"
    assert report["internal_bound"]["data_type"] == "gaussian"
    _assert_total_budget(report, 2.0, 3)
    text = json.dumps(_assert_public_report(rel, strict_json))
    # only sanitized statistics are reported, never the raw ones
    assert repr(float(gauss.mean())) not in text and repr(float(gauss.var(ddof=1))) not in text
    assert all(s["mean"] != gauss.mean() for s in report["sanitized_statistics"])


def test_sbs_binary_single_set_and_reproducible():
    x = (np.random.default_rng(4).random(150) < 0.3).astype(float)
    kw = dict(y=x, mechanism="sbs", epsilon=1.0, seed=9, data_type="binary", column="value")
    a, b = _quiet_seeded(**kw), _quiet_seeded(**kw)
    assert list(a.data.columns) == ["value"] and len(a.data) == 150
    assert set(a.data["value"].unique()) <= {0, 1} and a.data["value"].dtype.kind == "i"
    assert a.data.equals(b.data)
    assert a.report["m"] == 1 and a.report["internal_bound"]["data_type"] == "binary"


def test_sbs_known_sd_and_truncation(gauss):
    rel = _quiet_seeded(
        y=gauss,
        mechanism="sbs",
        epsilon=1.0,
        bounds=(-4, 4),
        known_sd=1.0,
        m=2,
        bounding="truncation",
        seed=1,
    )
    bound = rel.report["internal_bound"]
    assert bound["bounding"] == "truncation" and bound["known_sd"] == 1.0
    assert rel.data["y"].between(-4, 4).all() and rel.data["synthetic_set"].nunique() == 2
    assert any("half budget" in c for c in rel.report["caveats"])


def test_sbs_individualized_allocation_in_report(gauss):
    rel = synthesize(gauss, mechanism="sbs", epsilon=1.0, bounds=(-4, 4), allocation=0.8)
    bound = rel.report["internal_bound"]
    assert bound["allocation"] == 0.8
    split = {s["statistic"]: s["epsilon"] for s in bound["budget_split_per_set"]}
    assert split == {"mean": pytest.approx(0.8), "variance": pytest.approx(0.2)}


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"bounds": None}, "bounds"),
        ({"bounds": (4, -4)}, "bounds"),
        ({"m": 0}, "m"),
        ({"m": -3}, "m"),
        ({"allocation": 0.0}, "allocation"),
        ({"allocation": 1.0}, "allocation"),
        ({"allocation": 1.5}, "allocation"),
        ({"allocation": 0.5, "sanitization": "communal"}, "allocation"),
        ({"known_sd": -1.0}, "known_sd"),
        ({"data_type": "binary"}, "y"),  # Gaussian values are not 0/1
        ({"data_type": "poisson"}, "data_type"),
        ({"neighbours": "add-remove", "n_synthetic": 200}, "neighbours"),
        ({"n_bins": 10}, "n_bins"),
    ],
)
def test_sbs_refusals_name_the_parameter(gauss, kwargs, param):
    args = {"mechanism": "sbs", "epsilon": 1.0, "bounds": (-4, 4), **kwargs}
    with pytest.raises(InputError) as exc:
        synthesize(gauss, **args)
    assert exc.value.param == param


@pytest.mark.parametrize(
    ("y", "match"),
    [
        (np.array([]), "non-empty"),
        (np.array([0.1, np.nan, 0.3]), r"missing values \[CONFIDENTIAL, from the data: 1 value"),
    ],
)
def test_sbs_refuses_empty_or_missing_values(y, match):
    with pytest.raises(InputError, match=match) as exc:
        synthesize(y, mechanism="sbs", epsilon=1.0, bounds=(-4, 4))
    assert exc.value.param == "y"


# ----------------------------------------------------------------------------- strict JSON, writing


def test_to_json_is_strict(strict_json):
    text = to_json({"a": float("nan"), "b": [np.float64("inf"), 1.5], "c": np.int64(3)})
    assert strict_json(text) == {"a": None, "b": [None, 1.5], "c": 3}
    with pytest.raises(ValueError):
        strict_json('{"a": NaN}')  # the parser used throughout refuses NaN


def _small_release(uniform_data) -> Release:
    return synthesize(uniform_data, mechanism="ph", epsilon=1.0, bounds=(0, 10))


def test_write_writes_every_file(uniform_data, tmp_path, strict_json, part_files):
    rel = _small_release(uniform_data)
    out, rep, diag = tmp_path / "o.csv", tmp_path / "r.json", tmp_path / "d.json"
    rel.write(out, rep, diag)
    assert pd.read_csv(out)["y"].to_numpy() == pytest.approx(rel.data["y"].to_numpy())
    assert strict_json(rep.read_text()) == strict_json(to_json(rel.report))
    diagnostics = strict_json(diag.read_text())
    assert list(diagnostics)[0] == "confidential" and diagnostics["seed"] == rel.diagnostics["seed"]
    assert str(rel.diagnostics["seed"]) not in rep.read_text()
    assert part_files(tmp_path) == []


def test_write_failing_target_leaves_nothing(uniform_data, tmp_path, part_files):
    rel = _small_release(uniform_data)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    with pytest.raises(OSError):
        rel.write(out, rep, tmp_path / "missing-folder" / "d.json")
    assert not out.exists() and not rep.exists()
    assert part_files(tmp_path) == []


def test_write_to_a_directory_leaves_nothing(uniform_data, tmp_path, part_files):
    rel = _small_release(uniform_data)
    (tmp_path / "r.json").mkdir()
    with pytest.raises(IsADirectoryError):
        rel.write(tmp_path / "o.csv", tmp_path / "r.json")
    assert not (tmp_path / "o.csv").exists()
    assert part_files(tmp_path) == []


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt, SystemExit])
def test_write_interrupted_midway_keeps_old_files(
    uniform_data, tmp_path, part_files, monkeypatch, error
):
    # the report's writer fails after the CSV's temporary is written: the files that were
    # there before keep their content, and no temporary is left
    rel = _small_release(uniform_data)
    out, rep = tmp_path / "o.csv", tmp_path / "r.json"
    out.write_text("old csv\n")
    rep.write_text("old report\n")

    def failing(obj):
        raise error()

    monkeypatch.setattr(io, "to_json", failing)
    with pytest.raises(error):
        rel.write(out, rep)
    assert out.read_text() == "old csv\n" and rep.read_text() == "old report\n"
    assert part_files(tmp_path) == []


# ----------------------------------------------------------------------------- user programs


def test_shipped_programs_follow_the_convention():
    for model in MODELS.values():
        # the data only stan_data supplies from the model's own declaration (a fixable
        # dispersion's two, a spread flag), which a user program could not: the check names
        # them and only them
        extra = []
        if model.spread_by_design is not None:
            extra.append("spread_by_design")
        if model.dispersion is not None:
            extra += [f"{model.dispersion}_fixed", f"{model.dispersion}_known"]
        if not extra:
            check_convention(model.stan_file)
            continue
        with pytest.raises(InputError, match=rf"cannot supply \({', '.join(extra)}\);"):
            check_convention(model.stan_file)
    check_convention(TEST_STAN / "broken_target.stan")  # broken only in what it computes
    check_convention(TEST_STAN / "broken_contrib.stan")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("  real<lower=0> M;\n", ""), "does not declare the data M"),
        (lambda t: t.replace("  vector[n] y;\n", "  vector[n] y;\n  real sigma;\n"), "sigma"),
        (lambda t: t.replace("real y_rep;", "real y_new;"), "y_rep"),
        (lambda t: t.replace("vector[want_contrib ? n : 0] contrib;", ""), "contrib"),
    ],
)
def test_programs_off_the_convention_are_refused_before_compiling(tmp_path, edit, message):
    text = edit((TEST_STAN / "broken_contrib.stan").read_text())
    path = tmp_path / "mine.stan"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as exc:
        check_convention(path)
    assert exc.value.param == "stan_file"


def test_program_needing_other_data_is_refused_through_synthesize(beta_data):
    # normal_known_sd.stan needs sigma, mu0, tau0: dpsynth cannot supply them
    model = Model.from_stan_file(TEST_STAN / "normal_known_sd.stan", "real")
    with pytest.raises(InputError, match="sigma") as exc:
        synthesize(beta_data, model=model, mechanism="censor-uw", epsilon=1.0)
    assert exc.value.param == "stan_file"


@pytest.mark.slow
def test_normal_known_sd_passes_the_censoring_check(converging_sampler):
    path = TEST_STAN / "normal_known_sd.stan"
    y = np.random.default_rng(6).normal(0.0, 1.0, 100)
    y[:3] = [6.0, -7.0, 8.0]  # records whose contributions are clamped
    M = 1.5
    data = {
        "n": 100,
        "alpha": np.ones(100),
        "censor": 1,
        "M": M,
        "want_contrib": 1,
        "want_rep": 0,
        "y": y,
        "sigma": 1.0,
        "mu0": 0.0,
        "tau0": 10.0,
    }
    s = converging_sampler
    fit = engine.fit(
        path,
        data,
        seed=3,
        chains=s.chains,
        iter_warmup=s.iter_warmup,
        iter_sampling=s.iter_sampling,
    )
    assert converged(fit.diagnostics), fit.diagnostics
    assert np.abs(fit.contrib).max() <= M
    assert np.abs(fit.contrib_uncensored).max() > M  # the clamp is active
    # draws of the posterior and far into the prior's range (tau0 = 10)
    params = [fit.draw(0), fit.draw(fit.n_draws - 1), {"mu": -25.0}, {"mu": 30.0}]
    check_censored(path, data, params, M, records=(0, 50, 99))  # what it claims
    check_censored(path, data, params, M / 2, records=(1, 2))  # at any bound
    # the same check refuses what it should: a program whose contrib is not clamped
    with pytest.raises(InputError, match="'clamp'") as exc:
        check_censored(TEST_STAN / "broken_contrib.stan", data, params, M)
    assert exc.value.param == "stan_file"


# A gallery of programs that are not the censored mechanism they claim to be (tests/stan/):
# each is refused by name of the failed check, before anything is written.
GALLERY = [
    ("leak_copies_y.stan", "outputs"),  # y_rep = y
    ("leak_statistic.stan", "outputs"),  # y_rep drawn around mean(y)
    ("leak_unclamped_term.stan", "prior"),  # + normal_lpdf(y | mu, 1), unweighted
    ("leak_data_prior.stan", "prior"),  # mu ~ normal(max(y), 0.5)
    ("leak_transformed_data.stan", "locality"),  # transformed data mix records
    ("leak_record_pair.stan", "locality"),  # record 5's term reads record 6
    ("broken_contrib.stan", "clamp"),  # contrib not clamped
    ("broken_target.stan", "sum"),  # target is not the sum of contrib
    ("leak_constant_widens.stan", "prior"),  # target += 1e10 + 1e-3 max(y)
    ("leak_order_statistic.stan", "locality"),  # every term reads max(y)
]


@pytest.mark.slow
@pytest.mark.parametrize(("program", "check"), GALLERY, ids=[g[0] for g in GALLERY])
def test_gallery_of_leaky_programs_is_refused(program, check, monkeypatch, stan_backend):
    from dpsynth.models import program_checks

    # 48 random halves: a two-record dependence escapes all with probability (3/4)^48 < 1e-5
    monkeypatch.setattr(program_checks, "SUBSETS", 48)
    y = np.random.default_rng(7).normal(0.0, 1.0, 60)
    model = Model.from_stan_file(TEST_STAN / program, "real")
    with pytest.raises(InputError, match=f"fails the check '{check}'") as exc:
        synthesize(
            y,
            model=model,
            mechanism="censor-uw",
            epsilon=1.0,
            sampler=Sampler(chains=2, iter_warmup=200, iter_sampling=200),
        )
    assert exc.value.param == "stan_file"
    assert not any(f"{v:.4f}" in str(exc.value) for v in y)  # no value in the message


@pytest.mark.slow
def test_prior_reading_n_is_refused_under_add_remove(stan_backend):
    """Under add-remove neighbours n is private: the prior check also removes a record."""
    y = np.random.default_rng(7).normal(0.0, 1.0, 60)
    model = Model.from_stan_file(TEST_STAN / "leak_prior_n.stan", "real")
    with pytest.raises(InputError, match="fails the check 'prior'.*a record removed"):
        synthesize(
            y,
            model=model,
            mechanism="censor-uw",
            epsilon=1.0,
            neighbours="add-remove",
            n_synthetic=60,
            sampler=Sampler(chains=2, iter_warmup=200, iter_sampling=200),
        )


@pytest.mark.slow
def test_copying_program_cannot_put_data_in_a_release_even_unchecked(monkeypatch, stan_backend):
    """Synthesis runs the program on public stand-ins: with its check switched off, a program
    whose y_rep copies y still releases no confidential value."""
    from dpsynth.models import program_checks

    monkeypatch.setattr(program_checks, "_check_outputs", lambda *a, **k: None)
    y = np.random.default_rng(8).normal(3.0, 1.0, 60)
    model = Model.from_stan_file(TEST_STAN / "leak_copies_y.stan", "real")
    rel = synthesize(
        y,
        model=model,
        mechanism="censor-uw",
        epsilon=1.0,
        sampler=Sampler(chains=2, iter_warmup=200, iter_sampling=200),
    )
    assert not np.isin(rel.data["y"].to_numpy(), y).any()
    assert set(rel.data["y"]) == {1.0}  # the public placeholder, copied


@pytest.mark.slow
def test_honest_user_program_is_released_not_established_with_its_checks_named(
    converging_sampler, stan_backend
):
    """A whole program passes the checks but is tested, not proved: never labelled DP."""
    from dpsynth.release.single import USER_PROGRAM_CAVEAT

    y = np.random.default_rng(9).normal(1.0, 1.0, 150)
    model = Model.from_stan_file(TEST_STAN / "honest_normal.stan", "real")
    # epsilon 8: M = 2, so records near the posterior mean are not clamped
    rel = synthesize(y, model=model, mechanism="censor-uw", epsilon=8.0, sampler=converging_sampler)
    report = rel.report
    assert report["guarantee"] == "not established", rel.diagnostics["mcmc"]
    assert report["epsilon"] is None and report["epsilon_budgeted"] == 8.0
    assert USER_PROGRAM_CAVEAT in report["caveats"]
    checks = report["program_checks"]
    assert set(checks["checks"]) == {"outputs", "prior", "locality", "clamp", "sum"}
    assert checks["posterior_draws"] == 4 and checks["prior_draws"] >= 2
    assert "not a proof" in checks["note"]
    assert not np.isin(rel.data["y"].to_numpy(), y).any()
    assert abs(rel.data["y"].mean() - 1.0) < 0.5  # a posterior predictive around the mean


@pytest.mark.slow
def test_user_program_release_is_checked_and_not_established(beta_data, converging_sampler):
    # the shipped beta program given as the user's own: no numpy mirrors, so the censoring
    # check runs on its Stan output and the synthetic sets come from its y_rep
    model = Model.from_stan_file(STAN_DIR / "beta.stan", "unit")
    assert model.record_log_lik is None and model.simulate is None
    rel = _quiet_seeded(
        y=beta_data, model=model, mechanism="censor-uw", epsilon=3.0, m=2, seed=5,
        sampler=converging_sampler,
    )  # fmt: skip
    assert rel.report["guarantee"] == "not established", rel.diagnostics["mcmc"]
    assert rel.report["model_program_sha256"] == MODELS["beta"].program_hash()
    assert rel.data.shape == (400, 2)
    assert rel.data["y"].between(0, 1, inclusive="neither").all()


# ----------------------------------------------------------------------------- curator feedback


def test_every_release_has_a_confidential_utility_verdict(uniform_data, strict_json):
    rel = synthesize(uniform_data, mechanism="ph", epsilon=3.0, m=2, bounds=(0, 10))
    verdict = rel.diagnostics["utility"]
    assert verdict["verdict"] in ("good", "fair", "poor") and verdict["next_step"]
    assert verdict["m"] == 2 and verdict["n"] == uniform_data.size
    # the confidential mean is in the diagnostics, never in the public report
    assert verdict["confidential"]["mean"] == pytest.approx(uniform_data.mean())
    public = to_json(rel.report)
    assert "verdict" not in public and "utility" not in public
    assert f"{uniform_data.mean():.6g}" not in public


def test_public_utility_figures_are_charged_to_the_total_budget(uniform_data):
    rel = synthesize(
        uniform_data, mechanism="ph", epsilon=3.0, m=3, bounds=(0, 10), public_utility=0.6
    )
    report = rel.report
    assert report["epsilon"] == pytest.approx(3.0)  # the total, utility figures included
    assert report["epsilon_per_set"] == pytest.approx(0.8)  # (3 - 0.6) / 3
    ledger = report["ledger"]
    assert ledger["spent"] == pytest.approx(3.0) and ledger["remaining"] == pytest.approx(0.0)
    assert sum(s["epsilon"] for s in ledger["spends"] if "utility" in s["what"]) == 0.6
    figures = report["public_utility"]
    assert len(figures["max_ecdf_noised_per_set"]) == 3
    # Laplace(b = 10 / 500 / 0.3): within 20 scales of the truth with overwhelming probability
    assert abs(figures["confidential_mean_noised"] - uniform_data.mean()) < 20 * 10 / 500 / 0.3
    assert figures["confidential_mean_noised"] != pytest.approx(uniform_data.mean(), abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"public_utility": 3.0}, "below the total"),
        ({"public_utility": 0.5, "bounds": None}, "bounds"),
        ({"public_utility": -1.0}, "> 0"),
    ],
)
def test_public_utility_refusals(uniform_data, kwargs, message):
    kw = {"mechanism": "ph", "epsilon": 3.0, "bounds": (0, 10), **kwargs}
    with pytest.raises(InputError, match=message) as exc:
        synthesize(uniform_data, **kw)
    assert exc.value.param in ("public_utility", "bounds")


def test_clip_to_bounds_is_explicit_and_its_count_confidential(uniform_data):
    y = uniform_data.copy()
    y[[3, 10, 99]] = [-1.0, 12.0, 50.0]
    with pytest.raises(InputError, match="record 4 ") as exc:
        synthesize(y, mechanism="ph", epsilon=2.0, bounds=(0, 10))
    assert exc.value.param == "y"
    rel = synthesize(y, mechanism="ph", epsilon=2.0, bounds=(0, 10), clip_to_bounds=True)
    assert rel.diagnostics["n_clipped_to_bounds"] == 3
    assert "clipped" not in to_json(rel.report)
    with pytest.raises(InputError) as exc:
        synthesize(y, mechanism="ph", epsilon=2.0, clip_to_bounds=True)
    assert exc.value.param in ("clip_to_bounds", "bounds")


def test_adapt_delta_is_validated():
    assert Sampler(adapt_delta=0.95).adapt_delta == 0.95
    for bad in (0.3, 1.0, 1.5):
        with pytest.raises(InputError) as exc:
            Sampler(adapt_delta=bad)
        assert exc.value.param == "adapt_delta"


@pytest.mark.parametrize(
    ("figures", "advice"),
    [
        ({"rhat_max": 1.83, "ess_bulk_min": 3.0, "divergences": 0}, "different modes"),
        ({"rhat_max": 1.005, "ess_bulk_min": 900.0, "divergences": 24}, "adapt_delta"),
        ({"rhat_max": 1.02, "ess_bulk_min": 80.0, "divergences": 0}, "longer chains"),
    ],
)
def test_convergence_notes_explain_and_mark_their_figures_confidential(figures, advice):
    from dpsynth.cli.commands import api_words_as_flags
    from dpsynth.engine.diagnostics import convergence_note

    text = convergence_note(figures)
    assert advice in text and "CONFIDENTIAL" in text
    assert "allow_unconverged" not in text  # there is nothing to allow: never refused
    cli = api_words_as_flags(text)
    if advice == "adapt_delta":
        assert "--adapt-delta" in cli


@pytest.mark.parametrize(
    ("centring", "message"),
    [
        ({"beta": [0.1, 0.2], "kappa": 5.0}, "beta needs 3 values, the intercept first"),
        ({"beta": [0.1, 0.2, 0.3]}, "needs a value for 'kappa'"),
        ({"beta": [0.1, 0.2, 0.3], "kappa": 4.0, "phi": 1.0}, "names no parameter"),
        ({"beta": "high", "kappa": 4.0}, "number"),
    ],
)
def test_centring_values_are_checked_by_name_and_shape(beta_data, centring, message):
    X = np.random.default_rng(4).normal(size=(beta_data.size, 2))
    with pytest.raises(InputError, match=message) as exc:
        synthesize(
            beta_data, model="beta-regression", X=X, mechanism="censor-uw", epsilon=4.0,
            centring=centring,
        )  # fmt: skip
    assert exc.value.param == "centring"


def test_a_record_with_no_finite_reference_centre_is_centred_at_zero():
    """Reference centring at public values where one record's log-likelihood is not finite
    (a beta record at 0): that record is centred at 0, a rule of the record alone, where
    the release was refused before (whether a release happens would reveal the record)."""
    from dpsynth.models.catalogue import stan_data
    from dpsynth.models.centring import record_centre

    model = MODELS["beta"]
    y = np.array([0.2, 0.5, 0.0, 0.7])
    data = stan_data(model, y, np.ones(4))
    centre = record_centre(model, data, {"beta1": 2.0, "beta2": 3.0})
    finite = record_centre(model, stan_data(model, y[[0, 1, 3]], np.ones(3)),
                           {"beta1": 2.0, "beta2": 3.0})  # fmt: skip
    assert centre[2] == 0.0 and np.all(np.isfinite(centre))
    np.testing.assert_array_equal(centre[[0, 1, 3]], finite)


@pytest.mark.slow
def test_centring_from_a_public_file_is_a_library_option():
    """``centring_from``: the release fits the model to the public file (the sampler's
    settings with its default step-size target) and centres at its posterior mean, the
    values :func:`dpsynth.release.reference.reference_point` gives; stated in the report."""
    from dpsynth.release.reference import reference_point

    rng = np.random.default_rng(11)
    y, ref = rng.beta(2, 3, 120), rng.beta(2, 3, 80)
    sampler = Sampler(chains=2, iter_warmup=150, iter_sampling=150, adapt_delta=0.95)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KnownSeedWarning)
        release = synthesize(
            y, model="beta", mechanism="censor-uw", epsilon=4.0, seed=5, sampler=sampler,
            centring_from=ref,
        )  # fmt: skip
    expected = reference_point(
        ref, "beta", sampler=Sampler(chains=2, iter_warmup=150, iter_sampling=150)
    )
    assert release.report["tuning"]["centring"] == pytest.approx(expected)


def test_a_ph_release_from_counts_is_the_release_from_the_records():
    """Integer records given as their counts (``CellCounts``): the same sets, report and
    diagnostics (seeded), the verdict to rounding; refused where the records are needed."""
    from dpsynth.mechanisms.histogram import CellCounts

    y = np.random.default_rng(3).integers(0, 12, 3000).astype(float)
    kw = dict(mechanism="ph", epsilon=1.0, m=2, seed=5, integer=True, bounds=(0, 11))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = single.synthesize(y, **kw, n_synthetic=20000)
        b = single.synthesize(CellCounts.of(y, (0, 11)), **kw, n_synthetic=20000)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert a.report == b.report
    assert {k: v for k, v in a.diagnostics.items() if k != "utility"} == {
        k: v for k, v in b.diagnostics.items() if k != "utility"
    }
    assert a.diagnostics["utility"]["summary"] == pytest.approx(b.diagnostics["utility"]["summary"])
    held = CellCounts.of(y, (0, 11))
    for bad, param in (
        ({**{k: v for k, v in kw.items() if k != "integer"}, "mechanism": "sbs"}, "y"),
        ({**kw, "integer": False}, "y"),
        ({**kw, "bounds": (0, 12)}, "bounds"),
        ({**kw, "public_utility": 0.5}, "y"),
    ):
        with pytest.raises(InputError) as exc:
            single.synthesize(held, **bad)
        assert exc.value.param == param
