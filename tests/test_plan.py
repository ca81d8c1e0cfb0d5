"""Planning on a public reference file: split, reference point, the table of candidates."""

import warnings

import numpy as np
import pytest

from dpsynth.curator.column_verdict import VERDICTS
from dpsynth.errors import InputError
from dpsynth.release.plan import (
    COLUMNS,
    _checked_advice,
    plan,
    reference_point,
    resize_stand_in,
    sizes_line,
    split_reference,
)
from dpsynth.release.single import KnownSeedWarning
from dpsynth.sampler import Sampler

SHORT = Sampler(chains=2, iter_warmup=150, iter_sampling=150)


@pytest.fixture(scope="module")
def public_incomes() -> np.ndarray:
    """400 public incomes (log-normal), inside the bounds [0, 1e5]."""
    return np.random.default_rng(3).lognormal(10.0, 0.6, 400).clip(0, 1e5)


def test_split_reference_halves_are_disjoint_and_fixed_by_the_seed():
    y = np.arange(11.0)
    X = np.column_stack([y, -y])
    a, Xa, b, Xb = split_reference(y, X, seed=4)
    assert a.size == 5 and b.size == 6
    assert sorted(np.r_[a, b]) == list(y)
    assert np.array_equal(Xa[:, 0], a) and np.array_equal(Xb[:, 1], -b)
    again = split_reference(y, X, seed=4)
    assert np.array_equal(again[0], a)
    assert not np.array_equal(split_reference(y, X, seed=5)[0], a)
    with pytest.raises(InputError, match="^reference_X:"):
        split_reference(y, X[:-1])
    with pytest.raises(InputError, match="^reference_y:"):
        split_reference([1.0, 2.0])


def _row(candidate, mechanism, centring, verdict, moves=(), step="x: try y"):
    return {
        "candidate": candidate, "mechanism": mechanism, "centring": centring,
        "verdict": verdict, "mean_error_pct": 4.25, "max_ecdf": 0.0612,
        "next_step": step, "next_moves": list(moves),
    }  # fmt: skip


def test_plan_advice_says_what_the_alternative_gives_on_the_public_file():
    """A next step proposing other candidates quotes their verdicts on the same public file,
    in the order of the moves; moves the table cannot check (epsilon) are passed over; a
    proposed candidate that was not run is named with how to check it."""
    w = _row("censor-w", "censor-w", "none", "fair", ["censor_uw", "epsilon"])
    uw = _row("censor-uw", "censor-uw", "none", "good")
    ph = _row("ph", "ph", "none", "refused")
    assert _checked_advice(w, [w, uw, ph]).endswith(
        "(on this public file: censor-uw gives good: mean error 4.2%, max-ECDF 0.061)"
    )
    centred = _row("censor-uw", "censor-uw", "none", "poor", ["centre_reference", "ph"])
    good_ph = _row("ph", "ph", "none", "good")
    assert _checked_advice(centred, [centred, good_ph]).endswith(
        "(on this public file: censor-uw+reference not run here (add it to the mechanisms "
        "to compare); ph gives good: mean error 4.2%, max-ECDF 0.061)"
    )
    only_eps = _row("censor-uw", "censor-uw", "none", "poor", ["epsilon", "model"])
    assert _checked_advice(only_eps, [only_eps]) == "x: try y"
    to_ph = _row("censor-uw", "censor-uw", "none", "poor", ["ph"])
    assert _checked_advice(to_ph, [to_ph, ph]).endswith("(on this public file: ph was refused)")


@pytest.mark.slow
def test_plan_tabulates_candidates_best_first(public_incomes):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = plan(
            public_incomes,
            model="lognormal",
            epsilon=5.0,
            m=2,
            bounds=(0.0, 1e5),
            mechanisms=("censor-uw", "ph", "censor-uw+reference", "censor-w"),
            sampler=SHORT,
            seed=1,
        )
    assert not [w for w in caught if issubclass(w.category, KnownSeedWarning)]
    assert list(table.columns) == list(COLUMNS)
    assert sorted(table["candidate"]) == ["censor-uw", "censor-uw+reference", "censor-w", "ph"]
    # judged at the public file's size (the default confidential size), not at its half
    assert table.attrs["n_stand_in"] == 400 and table.attrs["n_reference"] == 200
    assert set(table.attrs["reference_point"]) == {"mu", "sigma"}
    # best first: verdict rank, then max-ECDF
    rank = table["verdict"].map(VERDICTS.index).to_numpy()
    assert np.all(np.diff(rank) >= 0)
    for _, group in table.groupby("verdict"):
        assert group["max_ecdf"].is_monotonic_increasing
    ph = table.set_index("candidate").loc["ph"]
    assert ph["guarantee"] == "DP" and np.isnan(ph["censored_share"])
    assert table.set_index("candidate").loc["censor-uw", "censored_share"] >= 0
    assert table["next_step"].map(len).min() > 0
    assert np.all(table["max_ecdf"].between(0, 1))


@pytest.mark.slow
def test_plan_refuses_what_the_release_path_refuses(public_incomes):
    table = plan(public_incomes, model="lognormal", epsilon=5.0, mechanisms=("ph",), sampler=SHORT)
    assert table.loc[0, "verdict"] == "refused" and table.loc[0, "next_step"].startswith("bounds")


def test_plan_input_checks(public_incomes):
    with pytest.raises(InputError, match="^mechanisms:"):
        plan(public_incomes, model="lognormal", epsilon=5.0, mechanisms=("magic",))
    with pytest.raises(InputError, match="^mechanisms:"):
        plan(public_incomes, model="lognormal", epsilon=5.0, mechanisms=())


@pytest.mark.slow
def test_reference_point_of_a_regression_is_on_the_target_design():
    """Coefficients fitted on the reference's standardized design, moved onto the design of
    the data they will centre: the same linear predictor on the raw covariate scale."""
    from dpsynth.models.catalogue import design_matrix

    rng = np.random.default_rng(5)
    X_ref, X = rng.normal(2.0, 3.0, (300, 1)), rng.normal(0.0, 1.0, (250, 1))
    y_ref = np.exp(-2.0 + 0.3 * X_ref[:, 0] + rng.normal(0, 0.3, 300))
    point = reference_point(y_ref, "lognormal-regression", reference_X=X_ref, X=X, sampler=SHORT)
    assert set(point) == {"beta", "sigma"} and len(point["beta"]) == 2
    eta = design_matrix(250, X) @ np.asarray(point["beta"])
    assert np.allclose(eta, -2.0 + 0.3 * X[:, 0], atol=0.15)


@pytest.mark.slow
def test_reference_point_names_only_what_the_mirror_reads():
    """The beta model's draws hold phi, lambda, beta1 and beta2; its mirror (and so a
    centring mapping, which the release path checks by name) reads beta1 and beta2 only."""
    y = np.random.default_rng(6).beta(2.0, 5.0, 200)
    point = reference_point(y, "beta", sampler=SHORT)
    assert set(point) == {"beta1", "beta2"}
    assert point["beta1"] / (point["beta1"] + point["beta2"]) == pytest.approx(2 / 7, abs=0.05)


def test_resize_stand_in_to_the_confidential_size():
    y = np.arange(10.0)
    X = np.column_stack([y, -y])
    big, Xbig = resize_stand_in(y, X, 25, seed=1)
    assert big.size == 25 and set(big) <= set(y) and np.array_equal(Xbig[:, 1], -big)
    small, _ = resize_stand_in(y, None, 6, seed=1)
    assert small.size == 6 and len(set(small)) == 6  # without replacement
    same, Xsame = resize_stand_in(y, X, 10)
    assert same is y and Xsame is X
    with pytest.raises(InputError, match="^n_confidential:"):
        resize_stand_in(y, X, 1)


def test_plan_judges_at_the_stated_confidential_size_and_says_so(public_incomes):
    """The trial's plan judged ~550 records where the confidential file had 2,200."""
    kw = {"model": "lognormal", "epsilon": 5.0, "bounds": (0.0, 1e5), "mechanisms": ("ph",)}
    stated = plan(public_incomes, n_confidential=1100, **kw)
    assert stated.attrs["n_stand_in"] == 1100 and stated.attrs["n_half"] == 200
    assert stated.loc[0, "verdict"] in VERDICTS
    line = sizes_line(stated)
    assert "1100 records" in line and "as stated (--n-confidential)" in line
    default = plan(public_incomes, **kw)
    assert default.attrs["n_stand_in"] == 400 and not default.attrs["n_confidential_stated"]
    assert "default: the public file's size" in sizes_line(default)


def test_cli_plan_prints_the_sizes(tmp_path, public_incomes, capsys):
    from dpsynth.cli.commands import main

    path = tmp_path / "reference.csv"
    path.write_text("income\n" + "\n".join(f"{v:.2f}" for v in public_incomes) + "\n")
    argv = ["plan", str(path), "--column", "income", "--model", "lognormal", "--epsilon", "5"]
    argv += ["--bounds", "0", "100000", "--mechanisms", "ph", "--n-confidential", "900"]
    assert main(argv) == 0
    assert "resampled to 900 records" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("settings", "param"),
    [
        ({"epsilon": 25.0}, "epsilon"),
        ({"m": 0}, "m"),
        ({"n_confidential": 1}, "n_confidential"),
        ({"mechanisms": ("nope",)}, "mechanisms"),
    ],
)
def test_plan_refuses_its_settings_before_any_fit(settings, param):
    """The plan's own rules (its epsilon limit, m, the stated size, the candidates) are
    PlanSettings', checked before the file is split or any candidate is run."""
    kw = {"model": "beta", "epsilon": 3.0, "bounds": (0.0, 1.0), **settings}
    with pytest.raises(InputError) as exc:
        plan(np.random.default_rng(0).beta(2, 2, 40), **kw)
    assert exc.value.param == param
    if param == "epsilon":
        assert "plan compares releases up to the sanity limit" in str(exc.value)
