"""Tests of dpsynth.mechanisms.inference (Liu, Theorem 7 and Section 5.2 rules) and the coverage studies."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.mechanisms.inference import analyze_each, combine, combine_frame, estimate_proportion
from dpsynth.mechanisms.modips import modips, sbs_model
from dpsynth.studies.modips_simulation import (
    bounded_normal_moments,
    simulate_sbs,
    study_allocation,
    synthetic_gaussian_stats,
)

# Hand-worked example: q = (1, 2, 3), v = (0.5, 0.5, 0.5), m = 3.
#   q̄ = 2;  w̄ = 0.5;  b = ((1-2)² + 0 + (3-2)²) / (3 - 1) = 1.
Q, V = [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]


def _t(df):
    return stats.t.ppf(0.975, df)


def test_theorem7_hand_worked():
    r = combine(Q, V, "thm7")
    T = 0.5 + 1 / 3  # w̄ + b/m = 5/6
    nu = 2 * (1 + 3 * 0.5 / 1) ** 2  # (m-1)(1 + m w̄ / b)² = 2 · 2.5² = 12.5
    assert (r.estimate, r.m, r.within, r.between) == (2.0, 3, 0.5, 1.0)
    assert r.variance == pytest.approx(T)
    assert r.df == pytest.approx(12.5) and nu == 12.5
    half = _t(12.5) * math.sqrt(T)
    assert (r.lower, r.upper) == (pytest.approx(2 - half), pytest.approx(2 + half))


def test_rubin_hand_worked():
    r = combine(Q, V, "rubin")
    assert r.variance == pytest.approx(0.5 + 4 / 3)  # w̄ + (1 + 1/m) b
    assert r.df == pytest.approx(2 * (1 + 0.5 / (4 / 3)) ** 2)  # = 3.78125
    assert r.upper - r.estimate == pytest.approx(_t(3.78125) * math.sqrt(11 / 6))


def test_raghunathan_hand_worked_and_fallback():
    # Liu, Section 5.2: T = (1 + 1/m) b - w̄ with a standard normal reference.
    r = combine(Q, V, "raghunathan")
    assert r.variance == pytest.approx(4 / 3 - 0.5) and math.isinf(r.df) and not r.fallback
    assert r.upper - r.estimate == pytest.approx(1.959964 * math.sqrt(5 / 6), rel=1e-6)
    # b = 0.005, (1 + 1/2) b - w̄ < 0  ->  T = w̄ (normal), flagged as a fallback
    f = combine([1.0, 1.1], [1.0, 1.0], "raghunathan")
    assert f.variance == pytest.approx(1.0) and math.isinf(f.df) and f.fallback
    assert f.upper - f.estimate == pytest.approx(1.959964, rel=1e-6)


def test_raab_and_single_hand_worked():
    r = combine(Q, V, "raab")
    assert r.variance == pytest.approx((1 + 2 / 3) * 0.5) and math.isinf(r.df)
    assert r.upper - r.estimate == pytest.approx(1.959964 * math.sqrt(5 / 6), rel=1e-6)
    s = combine([0.4], [0.01], "single")
    assert (s.estimate, s.variance) == (0.4, 0.01)
    assert (s.lower, s.upper) == (
        pytest.approx(0.4 - 0.1959964),
        pytest.approx(0.4 + 0.1959964),
    )


def test_zero_between_variance_gives_normal_reference():
    r = combine([1.0, 1.0, 1.0], [0.04, 0.04, 0.04])
    assert r.variance == pytest.approx(0.04) and math.isinf(r.df)
    d = r.to_dict()
    json.dumps(d)
    assert d["df"] is None and d["reference"] == "normal"


@pytest.mark.parametrize(
    ("q", "v", "rule", "param"),
    [
        ([1.0], [0.1], "thm7", "estimates"),  # m = 1 cannot give b
        ([1.0, 2.0], [0.1], "thm7", "variances"),
        ([1.0, float("nan")], [0.1, 0.1], "thm7", "estimates"),
        ([1.0, 2.0], [0.1, -0.1], "thm7", "variances"),
        ([1.0, 2.0], [0.1, 0.1], "bogus", "rule"),
        ([1.0, 2.0], [0.1, 0.1], "single", "rule"),
        ([], [], "thm7", "estimates"),
    ],
)
def test_combine_bad_input(q, v, rule, param):
    with pytest.raises(InputError) as exc:
        combine(q, v, rule)
    assert exc.value.param == param


def test_combine_frame_mean_and_proportion_by_hand():
    df = pd.DataFrame({"y": [1.0, 3.0, 2.0, 6.0], "b": [0, 1, 1, 1], "synthetic_set": [1, 1, 2, 2]})
    r = combine_frame(df, "y", "mean")
    # set 1: mean 2, s² = 2, v = 1; set 2: mean 4, s² = 8, v = 4  ->  q̄ = 3, w̄ = 2.5, b = 2
    assert (r.estimate, r.within, r.between) == (3.0, 2.5, 2.0)
    assert r.variance == pytest.approx(2.5 + 2 / 2)
    p = combine_frame(df, "b", "proportion")
    # set 1: 0.5, 0.125; set 2: 1.0, 0  ->  q̄ = 0.75, w̄ = 0.0625, b = 0.125
    assert (p.estimate, p.within, p.between) == (0.75, 0.0625, 0.125)
    s = combine_frame(df.drop(columns="synthetic_set"), "y", "mean", rule="single")
    assert s.m == 1 and s.estimate == 3.0
    with pytest.raises(InputError, match="column"):
        combine_frame(df, "nope", "mean")
    with pytest.raises(InputError, match="0/1"):
        combine_frame(df, "y", "proportion")


def test_analyze_each_applies_user_function():
    est, var = analyze_each([np.array([0, 1, 1, 1]), np.array([0, 0, 1, 1])], estimate_proportion)
    assert est.tolist() == [0.75, 0.5] and var.tolist() == [0.75 * 0.25 / 4, 0.25 / 4]
    with pytest.raises(InputError, match="analysis_fn"):
        analyze_each([np.zeros(3)], lambda d: 1.0)


def test_theorem7_coverage_end_to_end_binary():
    # 400 seeded repetitions of the full modips.SBS pipeline (n = 100, p = 0.3, ε = 1, m = 5):
    # the Theorem 7 interval covers p in [0.91, 0.99] of runs (binomial SE of the rate ≈ 0.011).
    rng = np.random.default_rng(2016)
    model = sbs_model("binary")
    hits = 0
    reps = 400
    for _ in range(reps):
        x = (rng.random(100) < 0.3).astype(float)
        res = modips(x, model, m=5, epsilon=1.0, rng=rng)
        est, var = analyze_each(res.datasets, estimate_proportion)
        r = combine(est, var, "thm7")
        hits += r.lower <= 0.3 <= r.upper
    assert 0.91 <= hits / reps <= 0.99


def test_vectorized_study_coverage_and_single_synthesis_undercoverage():
    df = simulate_sbs("binary", 100, 1.0, m_values=(5, 10), reps=3000, rng=7, p=0.5)
    thm7 = df[df.rule == "thm7"]
    assert thm7.coverage.between(0.93, 0.97).all()
    assert abs(thm7.bias).max() < 0.01
    single = df[df.rule == "single"].coverage.iloc[0]
    assert single < 0.85  # ignores between-set variance (Liu, Table 1)
    assert df[df.rule == "rubin"].coverage.min() > thm7.coverage.max()  # over-conservative


def test_bounded_normal_moments_match_references():
    # BIT (clipping) vs Monte Carlo; truncation vs scipy's truncated normal, incl. far tails.
    z = np.random.default_rng(8).normal(3.5, 1.0, 400_000)
    m, v = bounded_normal_moments(np.array([3.5]), np.array([1.0]), -4.0, 4.0, "bit")
    assert m[0] == pytest.approx(np.clip(z, -4, 4).mean(), abs=3e-3)
    assert v[0] == pytest.approx(np.clip(z, -4, 4).var(), rel=1e-2)
    for mu, sd in [(0.2, 1.0), (3.5, 1.0), (5.0, 0.5), (-6.0, 0.5), (14.0, 0.5)]:
        m, v = bounded_normal_moments(np.array([mu]), np.array([sd]), -4.0, 4.0, "truncation")
        ref = stats.truncnorm.stats((-4 - mu) / sd, (4 - mu) / sd, loc=mu, scale=sd, moments="mv")
        assert m[0] == pytest.approx(float(ref[0]), abs=1e-6)
        assert v[0] == pytest.approx(float(ref[1]), rel=1e-3)


def test_fast_synthetic_stats_agree_with_exact():
    rng = np.random.default_rng(9)
    mu, sd = np.full(3000, 3.6), np.full(3000, 1.0)
    fast = synthetic_gaussian_stats(mu, sd, 30, -4.0, 4.0, "bit", rng, exact=False)
    exact = synthetic_gaussian_stats(mu, sd, 30, -4.0, 4.0, "bit", rng, exact=True)
    assert stats.ks_2samp(fast[0], exact[0]).pvalue > 0.01
    assert np.mean(fast[1]) == pytest.approx(np.mean(exact[1]), rel=0.05)


def test_allocation_study_shape():
    df = study_allocation(
        allocations=(0.2, 0.8),
        m=3,
        reps=200,
        ns=(100,),
        bounds_list=((-4.0, 4.0),),
        boundings=("bit",),
    )
    assert set(df.rule) == {"original", "thm7"}
    assert sorted(df.dropna(subset=["allocation"]).allocation.unique()) == [0.2, 0.8]
    assert (df.sanitization == "communal").any()


def test_study_reproduces_table1_gaussian_row():
    # Liu Table 1(b), ε = 100, n = 10, m = 10: Thm 7 0.951, Raab 0.946, Raghunathan 0.825,
    # Rubin 0.997, single 0.743. 3000 seeded reps: binomial SE of a rate ≈ 0.004-0.008.
    df = simulate_sbs("gaussian", 10, 100.0, m_values=(10,), reps=3000, rng=11)
    cov = df.set_index("rule").coverage
    assert 0.93 <= cov["thm7"] <= 0.97 and 0.93 <= cov["raab"] <= 0.97
    assert 0.78 <= cov["raghunathan"] <= 0.87
    assert cov["rubin"] > 0.985 and 0.68 <= cov["single"] <= 0.78


def test_combine_frame_refuses_a_missing_or_incomplete_set_column():
    """The set column's rules are the library's (the CLI checked them before): a frame
    without it is one set, which only the rule 'single' combines; missing set numbers are
    refused; the settings are checked without the data (CombineSettings)."""
    from dpsynth.mechanisms.combining import CombineSettings

    one = pd.DataFrame({"y": [1.0, 2.0, 3.0]})
    with pytest.raises(InputError) as exc:
        combine_frame(one, "y", "mean")
    assert exc.value.param == "set_column" and "rule 'thm7' needs m >= 2 sets" in str(exc.value)
    assert combine_frame(one, "y", "mean", rule="single").m == 1
    holes = pd.DataFrame({"synthetic_set": [1, None, 2, 2], "y": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(InputError, match="has missing values") as exc:
        combine_frame(holes, "y", "mean")
    assert exc.value.param == "set_column"
    with pytest.raises(InputError) as exc:
        CombineSettings("y", "median").validate()
    assert exc.value.param == "estimand"
