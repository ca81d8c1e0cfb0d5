"""dpsynth.models.program_checks and the synthesis data of user programs: known answers.

The end-to-end refusals of broken programs (the gallery in tests/stan/) are in
tests/test_release.py; here the pieces: the public stand-in data, the changed-data
generator, and the engine's evaluation of a program at fixed parameters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models import program_checks
from dpsynth.models.synthesis import public_data

TEST_STAN = Path(__file__).resolve().parent / "stan"


def _data(n=6, **extra):
    return {
        "n": n,
        "alpha": np.linspace(0.2, 1.0, n),
        "censor": 1,
        "M": 1.5,
        "want_contrib": 1,
        "want_rep": 0,
        "y": np.arange(n, dtype=float) + 0.5,
        **extra,
    }


def test_public_data_replaces_everything_that_may_hold_confidential_data():
    X = np.ones((6, 2))
    data = _data(centre=np.full(6, 3.0), X=X, K=2)
    public = public_data(data, 1.0, 6)
    assert np.array_equal(public["y"], np.ones(6))
    assert np.array_equal(public["alpha"], np.zeros(6))
    assert np.array_equal(public["centre"], np.zeros(6))
    assert public["X"] is X and public["M"] == 1.5 and public["K"] == 2  # public inputs stay
    assert public["want_rep"] == 1 and public["want_contrib"] == 0
    with pytest.raises(InputError) as exc:
        public_data(data, 1.0, 10)  # a regression: one record per covariate row
    assert exc.value.param == "n_synthetic"
    counts = public_data(_data(y=np.arange(6)), 0, 9)  # intercept-only: any n
    assert counts["n"] == 9 and counts["y"].dtype.kind == "i"


def test_changes_touch_only_their_records():
    y = np.arange(20, dtype=float)
    changes = program_checks._changes(y, (0, 19), (0.0, 1.0), 5, np.random.default_rng(1))
    assert len(changes) == 2 * 3 + 5  # per record: a public value, beyond max, beyond min
    first_label, where, new = changes[0]
    assert first_label == "record 1 changed" and new[0] == 1.0  # 0.0 equals y[0]: the next
    for _, where, new in changes:
        outside = np.setdiff1d(np.arange(20), where)
        assert np.array_equal(new[outside], y[outside])
    _, half, new = changes[-1]
    assert half.size == 10 and np.all(new[half] != y[half])  # a rotation moves every one
    assert sorted(new[half]) == sorted(y[half])  # ... among the half's own values
    # changes that move order statistics and sums (a program reading only max(y), min(y)
    # or sum(y) is seen): beyond the maximum and minimum, and scaled halves
    singles = [new for label, where, new in changes if where.size == 1]
    assert any(new.max() > y.max() for new in singles)
    assert any(new.min() < y.min() for new in singles)
    halves = [new for label, where, new in changes if where.size > 1]
    assert any(new.sum() != y.sum() for new in halves)


def test_beyond_values_stay_in_the_support():
    counts = np.array([2, 5, 9])
    assert program_checks._beyond(counts, "count") == (19, 1)
    unit = np.array([0.2, 0.6])
    top, bottom = program_checks._beyond(unit, "unit")
    assert 0.6 < top < 1 and 0 < bottom < 0.2
    top, bottom = program_checks._beyond(np.array([0.5, 2.0]), "positive")
    assert top > 2.0 and 0 < bottom < 0.5


def test_whole_program_drawing_random_numbers_in_transformed_data_is_refused(tmp_path):
    """Check evaluations run with httpstan's fixed seeds; a program that could tell them
    from the fit (an _rng in transformed data) is refused before anything runs."""
    text = (
        (TEST_STAN / "honest_normal.stan")
        .read_text()
        .replace(
            "vector[n] z = 0.5 * square(y);",
            "vector[n] z = 0.5 * square(y);\n  real u = uniform_rng(0, 1);",
        )
    )
    path = tmp_path / "detects_checks.stan"
    path.write_text(text)
    with pytest.raises(InputError, match="random numbers in its transformed data") as exc:
        program_checks.check_convention(path)
    assert exc.value.param == "stan_file"


@pytest.mark.slow
def test_outputs_at_and_log_density_known_answers(stan_backend):
    path = TEST_STAN / "normal_known_sd.stan"
    data = _data(sigma=2.0, mu0=0.0, tau0=10.0)
    params = [{"mu": 0.3}, {"mu": -1.0}]
    outs = engine.outputs_at(path, data, params)
    y = data["y"]
    for p, out in zip(params, outs, strict=True):
        ll = -0.5 * ((y - p["mu"]) / 2.0) ** 2 - np.log(2.0) - 0.5 * np.log(2 * np.pi)
        np.testing.assert_allclose(out["record_log_lik"], ll, rtol=1e-12)
        np.testing.assert_allclose(out["contrib"], np.clip(data["alpha"] * ll, -1.5, 1.5))
        assert "mu" not in out  # parameters are not outputs
    # the target without the Jacobian: the normal prior plus the clamped sum
    target = engine.log_density(path, data, params)
    for p, t, out in zip(params, target, outs, strict=True):
        prior = -0.5 * (p["mu"] / 10.0) ** 2  # Stan's ~ drops constants
        assert t == pytest.approx(prior + out["contrib"].sum(), rel=1e-10)
    # the generated quantities' random numbers start from the same seed every call
    rep = dict(data, want_rep=1)
    a, b = engine.outputs_at(path, rep, params[:1]), engine.outputs_at(path, rep, params[:1])
    assert np.array_equal(a[0]["y_rep"], b[0]["y_rep"])
