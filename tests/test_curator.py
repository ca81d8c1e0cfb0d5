"""The curator's utility verdict: known answers, thresholds at their boundaries, rules."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpsynth.curator import column_verdict
from dpsynth.curator.column_verdict import format_summary, utility_verdict, verdict_of_release
from dpsynth.errors import InputError

PAGE = Path(__file__).parents[1] / "book" / "utility_verdict.md"


def _income(n=3000, seed=0):
    return np.random.default_rng(seed).lognormal(10.0, 0.8, n)


def test_synthetic_equal_to_confidential_is_good():
    y = _income()
    v = utility_verdict(y, np.vstack([y, y]), outcome="positive")
    assert v["verdict"] == "good" and v["m"] == 2 and v["n"] == y.size
    assert v["summary"] == {"mean_error": 0.0, "sd_error": 0.0, "max_ecdf": 0.0}
    assert v["rules"] == ["good"] and v["reasons"] == []
    assert v["confidential"]["q50"] == pytest.approx(np.median(y))


def test_shifted_synthetic_is_poor():
    y = _income()
    v = utility_verdict(y, 2.0 * y, outcome="positive")
    assert v["verdict"] == "poor"
    assert v["summary"]["mean_error"] == pytest.approx(1.0)  # mean(2y) / mean(y) - 1
    assert v["summary"]["sd_error"] == pytest.approx(1.0)
    assert v["levels"] == {"mean_error": "poor", "sd_error": "poor", "max_ecdf": "poor"}
    assert v["rules"] == ["off"]


@pytest.mark.parametrize(
    ("shift", "level"),
    [(100.0, "good"), (101.0, "fair"), (250.0, "fair"), (251.0, "poor")],
)
def test_mean_error_thresholds_at_the_boundary(shift, level):
    """y = 1..1999 has mean 1000: a shift by d gives a mean error of exactly d / 1000 (and
    the same sd); a boundary value counts as the better level."""
    y = np.arange(1.0, 2000.0)
    v = utility_verdict(y, y + shift, outcome="positive")
    assert v["summary"]["mean_error"] == shift / 1000
    assert v["summary"]["sd_error"] == pytest.approx(0.0, abs=1e-12)
    assert v["levels"]["mean_error"] == level
    assert column_verdict.GOOD_MEAN_ERROR == 0.10 and column_verdict.FAIR_MEAN_ERROR == 0.25


@pytest.mark.parametrize("figure", list(column_verdict.THRESHOLDS))
def test_every_threshold_boundary(figure):
    good, fair, direction = column_verdict.THRESHOLDS[figure]
    step = 1e-9 if direction == "at most" else -1e-9
    assert column_verdict._level(figure, good) == "good"
    assert column_verdict._level(figure, good + step) == "fair"
    assert column_verdict._level(figure, fair) == "fair"
    assert column_verdict._level(figure, fair + step) == "poor"
    assert column_verdict._level(figure, float("nan")) == "poor"


def test_real_outcome_mean_error_is_relative_unless_the_mean_is_near_zero():
    """A real outcome far from 0 (PH's "error 7.1%" was the sd-scaled 3.5%): relative. Near
    0 the error falls back to sd units and the printed line says so."""
    rng = np.random.default_rng(1)
    y = rng.normal(10.0, 2.0, 500)
    v = utility_verdict(y, y + 0.3, outcome="real")
    assert v["summary"]["mean_error"] == pytest.approx(0.3 / abs(np.mean(y)))
    assert v["mean_error_scale"] == "relative"
    assert "(relative error 3.0%" in format_summary(v)
    z = rng.normal(0.0, 2.0, 500)
    z -= z.mean() - 0.05  # mean 0.05: within MEAN_NEAR_ZERO sds of 0
    v = utility_verdict(z, z + 0.3, outcome="real")
    assert v["summary"]["mean_error"] == pytest.approx(0.3 / np.std(z, ddof=1))
    assert v["mean_error_scale"] == "sd"
    assert "sd-scaled, not relative" in format_summary(v)


def test_count_zero_share():
    y = np.array([0] * 40 + [1] * 30 + [5] * 30)
    syn = np.array([0] * 60 + [1] * 20 + [5] * 20)
    v = utility_verdict(y, syn, outcome="count")
    assert v["summary"]["zero_share_error"] == pytest.approx(0.2)
    assert v["levels"]["zero_share_error"] == "poor" and v["verdict"] == "poor"
    assert v["confidential"]["zero_share"] == 0.4 and v["synthetic"]["zero_share"] == 0.6
    assert "zero share" in format_summary(v)
    assert "zero_share" not in utility_verdict(y, syn, outcome="positive")["confidential"]


def test_regression_interval_overlap():
    rng = np.random.default_rng(2)
    n = 2000
    X = rng.normal(size=(n, 2))
    y = np.exp(1.0 + X @ np.array([0.5, -0.3]) + rng.normal(0, 0.5, n))
    same = utility_verdict(y, y, outcome="positive", X=X)
    assert same["summary"]["ci_overlap"] == pytest.approx(1.0)
    flipped = np.exp(1.5 + X @ np.array([-0.5, 0.3]) + rng.normal(0, 0.5, n))
    v = utility_verdict(y, flipped, outcome="positive", X=X)
    assert v["summary"]["ci_overlap"] < column_verdict.FAIR_CI_OVERLAP
    assert v["levels"]["ci_overlap"] == "poor" and "regression" in v["rules"]
    with pytest.raises(InputError, match="^X:"):
        utility_verdict(y, y[:-1], outcome="positive", X=X)
    with pytest.raises(InputError, match="^X:"):
        utility_verdict(y, y, outcome="positive", X=X[:-1])


def test_rules_pick_the_next_step():
    y = _income()
    bad = 2.0 * y
    v = utility_verdict(
        y, bad, outcome="positive", n_censored=2711, n=3000, mechanism="censor-uw", model="beta"
    )
    assert v["rules"] == ["censored", "beta_on_skewed"]
    assert v["next_step"].startswith("90% of the records were censored")
    assert v["shares"]["censored"] == pytest.approx(2711 / 3000)
    # below the censored threshold the model advice comes first
    v = utility_verdict(
        y, bad, outcome="positive", n_censored=10, mechanism="censor-uw", model="beta"
    )
    assert v["rules"] == ["beta_on_skewed"] and "lognormal" in v["next_step"]
    # the same figures with the lognormal model: no model advice
    v = utility_verdict(y, bad, outcome="positive", mechanism="censor-uw", model="lognormal")
    assert v["rules"] == ["off"]
    v = utility_verdict(y, bad, outcome="positive", n_zero_weight=600, mechanism="lw")
    assert v["rules"] == ["zero_weight"] and "20%" in v["next_step"]
    v = utility_verdict(y, bad, outcome="positive", mechanism="ph", bounds=(0.0, 1e7))
    assert v["rules"] == ["ph_wide_bounds"]
    v = utility_verdict(y, bad, outcome="positive", mechanism="ph", bounds=(0.0, 1e5))
    assert v["rules"] == ["off"]  # the 95% quantile is not in the lowest tenth of the range
    # a good release with many records censored: publishable, the note follows
    v = utility_verdict(y, y, outcome="positive", n_censored=2000, mechanism="censor-w")
    assert v["rules"] == ["good", "censored"]


def test_format_summary_starts_confidential():
    y = _income()
    v = utility_verdict(
        y, 1.3 * y, outcome="positive", n_censored=300, mechanism="censor-uw", model="gamma"
    )
    text = format_summary(v)
    assert text.startswith("CONFIDENTIAL")
    assert "verdict: POOR" in text and "records censored: 10.0%" in text
    assert text.splitlines()[-1].startswith("  next step: ")


def test_input_checks():
    y = _income(50)
    with pytest.raises(InputError, match="^outcome:"):
        utility_verdict(y, y, outcome="income")
    with pytest.raises(InputError, match="^synthetic_sets:"):
        utility_verdict(y, np.ones((2, 2, 2)), outcome="positive")
    with pytest.raises(InputError, match="^confidential:"):
        utility_verdict(np.r_[y, np.nan], y, outcome="positive")
    with pytest.raises(InputError, match="^bounds:"):
        utility_verdict(y, y, outcome="positive", mechanism="ph", bounds=(5.0, 5.0))


def test_verdict_of_release_reads_sets_and_diagnostics():
    y = _income(100)
    sets = np.vstack([y, 1.5 * y])
    release = SimpleNamespace(
        data=pd.DataFrame({"synthetic_set": np.repeat([1, 2], 100), "income": sets.ravel()}),
        report={"m": 2, "mechanism": "censor-uw", "model": "lognormal"},
        diagnostics={"n_censored": 40, "n_zero_weight": 0},
    )
    v = verdict_of_release(y, release, outcome="positive", column="income")
    assert v["m"] == 2 and v["sets"][0]["mean_error"] == 0.0
    assert v["sets"][1]["mean_error"] == pytest.approx(0.5)
    assert v["shares"]["censored"] == pytest.approx(0.4)
    assert v["rules"][0] == "censored" and v["mechanism"] == "censor-uw"


PAGE_SETTINGS = {
    "3%": "the simulated reference period's income shift (a setting)",
    "20%": "the drift case's income shift (a setting)",
    "10%": "the goal's tolerance for the mean (a setting)",
    "1.5": "the goal's tolerance for the max-ECDF (a setting)",
    "95%": "the intervals' nominal level (a definition)",
}
"""Decimals and percentages the page's prose may quote without glue, and why."""


def _page_glue() -> dict:
    """Run the page's code cells (in book/, as the build does), recording what they glue."""
    import os

    cells = re.findall(r"^```\{code-cell\} ipython3\n(.*?)^```$", PAGE.read_text(), re.M | re.S)
    code = "\n".join(re.sub(r"^:tags:.*$", "", c, flags=re.M) for c in cells)
    glued: dict = {}

    def glue(key, value, display=True):
        glued[key] = value

    cwd = os.getcwd()
    os.chdir(PAGE.parent)  # the page reads ../benchmarks/results as the build does
    try:
        exec(
            compile(code.replace("from myst_nb import glue", ""), str(PAGE), "exec"), {"glue": glue}
        )
    finally:
        os.chdir(cwd)
    return glued


def test_book_page_glues_constants_and_measured_figures():
    """Every {glue:text} key the page uses is computed by its own cells; thresholds come
    from the module constants; no decimal or percentage is hand-copied into the prose."""
    from test_book_numbers import quoted_numbers

    text = PAGE.read_text()
    glued = _page_glue()
    used = set(re.findall(r"\{glue:text\}`(\w+):", text))
    assert used and used <= set(glued)
    for name in ("GOOD_MEAN_ERROR", "GOOD_MAX_ECDF", "GOOD_CI_OVERLAP", "MANY_CENSORED"):
        assert glued[name.lower()] == getattr(column_verdict, name)
    assert glued["skewed"] == column_verdict.SKEWED
    hand = sorted(set(quoted_numbers(text)) - set(PAGE_SETTINGS))
    assert not hand, f"hand-copied numbers on the page: {hand}"


def _lost_effect(n=2200, seed=7):
    """Visits on poor health: the effect 0.269 in the data, 0.013 in the synthetic set,
    the other coefficients kept exactly (the same noise)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.binomial(1, 0.2, n), rng.normal(size=n)])
    noise = rng.normal(0.0, 0.6, n)
    y = 2.0 + 0.269 * X[:, 0] + 0.3 * X[:, 1] + noise
    syn = 2.0 + 0.013 * X[:, 0] + 0.3 * X[:, 1] + noise
    return y, syn, X


def test_regression_verdict_follows_the_worst_coefficient():
    """The mean overlap of three coefficients hides a lost effect (two ~1, one ~0: mean
    about 0.67, "good" before); the worst coefficient makes the verdict poor."""
    y, syn, X = _lost_effect()
    v = utility_verdict(y, syn, outcome="real", X=X)
    coefs = {c["coefficient"]: c for c in v["coefficients"]}
    assert set(coefs) == {"intercept", "x1", "x2"}
    assert np.mean([c["overlap"] for c in coefs.values()]) >= column_verdict.GOOD_CI_OVERLAP
    assert coefs["x1"]["overlap"] == pytest.approx(v["summary"]["ci_overlap"])
    assert coefs["x1"]["shift_se"] < -column_verdict.FAIR_COEF_SHIFT  # the effect shrank
    assert v["levels"]["ci_overlap"] == "poor" and v["levels"]["coef_shift"] == "poor"
    assert v["verdict"] == "poor" and v["rules"][0] == "regression"
    text = format_summary(v)
    assert "worst coefficient" in text and "x1: overlap" in text


def test_thresholds_of_the_coefficient_shift_match_the_overlap():
    """Equal-width 95% intervals: overlap 1 - d / (2 * 1.96) at a shift of d s.e."""
    for overlap, shift in (
        (column_verdict.GOOD_CI_OVERLAP, column_verdict.GOOD_COEF_SHIFT),
        (column_verdict.FAIR_CI_OVERLAP, column_verdict.FAIR_COEF_SHIFT),
    ):
        assert 1 - shift / (2 * 1.96) == pytest.approx(overlap, abs=0.01)


def test_verdict_judges_the_median_of_several_draws_and_shows_the_spread():
    y = _income()
    # the published draw is lucky (PH at eps 3: "good" once, "fair" on five reruns)
    sets = np.vstack([y, 1.15 * y, 1.2 * y, 1.3 * y, 1.02 * y])  # median draw: 1.15
    v = utility_verdict(y, sets, outcome="positive", n_published=1, extra_source="other draws")
    assert v["m"] == 1 and v["draws"] == {
        "total": 5,
        "published": 1,
        "extra": 4,
        "source": "other draws",
    }
    assert v["summary"]["mean_error"] == pytest.approx(0.15)
    assert v["spread"]["mean_error"]["min"] == 0.0
    assert v["spread"]["mean_error"]["max"] == pytest.approx(0.3)
    assert utility_verdict(y, sets[:1], outcome="positive")["verdict"] == "good"
    assert v["verdict"] != "good" and v["levels"]["mean_error"] == "fair"
    text = format_summary(v)
    assert "median over 5 synthetic draws" in text and "4 extra draws NOT published" in text
    assert "[min 0.0%, max 30.0%]" in text
    with pytest.raises(InputError, match="^n_published:"):
        utility_verdict(y, sets, outcome="positive", n_published=6)


def test_advice_never_repeats_what_the_run_did():
    """The three trial loops each get a different next step."""
    y = _income()
    # 1. centred at a public reference fit (--centring-from), 96% censored
    v = utility_verdict(
        y,
        2.0 * y,
        outcome="positive",
        n_censored=2880,
        mechanism="censor-uw",
        model="lognormal",
        centring="reference",
    )
    assert v["rules"][0] == "censored" and "centre" not in v["next_step"]
    assert "PH (mechanism ph)" in v["next_step"]
    uncentred = utility_verdict(
        y, 2.0 * y, outcome="positive", n_censored=2880, mechanism="censor-uw", model="lognormal"
    )
    assert "(centring_from)" in uncentred["next_step"]
    # 2. Censor_w with reference weights, a coefficient lost: censor-uw, not censor-w again
    ys, syn, X = _lost_effect()
    v = utility_verdict(
        ys,
        syn,
        outcome="real",
        X=X,
        mechanism="censor-w",
        reference_weights=True,
        centring="reference",
    )
    assert v["rules"][0] == "regression" and "censor-w" not in v["next_step"]
    assert "try censor-uw (no weights" in v["next_step"] and "centre" not in v["next_step"]
    assert "PH" not in v["next_step"]  # PH cannot carry a regression
    v = utility_verdict(ys, syn, outcome="real", X=X, mechanism="censor-uw")
    assert "censor-uw" not in v["next_step"] and "(centring_from)" in v["next_step"]


def test_convergence_note_proposes_centring_only_when_not_centred():
    from dpsynth.cli.commands import api_words_as_flags
    from dpsynth.engine.diagnostics import convergence_note

    modes = {"rhat_max": 1.83, "ess_bulk_min": 3.0, "divergences": 0}
    fresh = api_words_as_flags(convergence_note(modes))
    assert "--centring-from" in fresh and "--centring " not in fresh
    centred = api_words_as_flags(convergence_note(modes, centred=True))
    assert "centr" not in centred.replace("censored", "") and "--model" in centred
    assert centred != fresh


@pytest.mark.parametrize("mechanism", ["ph", "sbs"])
def test_release_verdict_adds_unpublished_draws(mechanism):
    """The release judges its published sets plus EXTRA_DRAWS fresh-noise draws that appear
    nowhere but in the verdict, and says so."""
    import warnings

    from dpsynth.release.single import EXTRA_SETS, synthesize

    y = np.random.default_rng(4).normal(50.0, 10.0, 300).clip(0, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = synthesize(
            y, model="normal", mechanism=mechanism, epsilon=3.0, m=2, bounds=(0.0, 100.0), seed=5
        )
    v = release.diagnostics["utility"]
    assert v["draws"]["published"] == 2 and v["draws"]["total"] == 2 + column_verdict.EXTRA_DRAWS
    assert "budget" in v["draws"]["source"] and len(v["sets"]) == 2 + column_verdict.EXTRA_DRAWS
    assert len(release.data) == 2 * y.size  # only the published sets are released
    assert EXTRA_SETS not in release.diagnostics
    assert "extra draws NOT published" in format_summary(v)


@pytest.mark.slow
def test_posterior_release_verdict_adds_other_retained_draws():
    """Censor_uw: the verdict's extra sets come from retained draws other than the published
    one (so they differ from it), and only the published set is released."""
    import warnings

    from dpsynth.release.single import synthesize
    from dpsynth.sampler import Sampler

    y = _income(200, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = synthesize(
            y, model="lognormal", mechanism="censor-uw", epsilon=5.0, bounds=(0.0, 1e6),
            seed=2,
            sampler=Sampler(chains=2, iter_warmup=150, iter_sampling=150),
        )  # fmt: skip
    v = release.diagnostics["utility"]
    assert v["draws"] == {
        "total": 1 + column_verdict.EXTRA_DRAWS,
        "published": 1,
        "extra": column_verdict.EXTRA_DRAWS,
        "source": "other retained posterior draws",
    }
    means = [row["synthetic_mean"] for row in v["sets"]]
    assert means[0] == pytest.approx(release.data["y"].mean())
    assert len(set(np.round(means, 6))) == len(means)  # distinct draws
    assert len(release.data) == y.size


def _same(a, b, path=""):
    """Nested verdicts equal, floats to 1e-12 relative (sums taken in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{path}[{i}]")
    elif isinstance(a, float) and not np.isnan(a):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), path
    else:
        assert a == b or (a != a and b != b), path


@pytest.mark.parametrize("lo,k,outcome", [(0, 2, "count"), (0, 24, "count"), (-3, 9, "real")])
def test_a_verdict_from_counts_is_the_verdict_from_the_records(lo, k, outcome):
    """Integer records held as their counts (a PH column's, made a partition at a time):
    every figure, level, rule and statistic as from the records themselves (seeded samples
    of several shapes, three sets of different sizes)."""
    from dpsynth.mechanisms.histogram import CellCounts

    rng = np.random.default_rng(k)
    p = rng.dirichlet(np.ones(k))
    y = lo + rng.choice(k, size=2001, p=p).astype(float)
    q = rng.dirichlet(np.ones(k) * 5)
    sets = lo + rng.choice(k, size=(3, 4000), p=0.7 * p + 0.3 * q).astype(float)
    kw = dict(outcome=outcome, bounds=(lo, lo + k - 1), n_published=1, mechanism="ph")
    held = CellCounts.of(y, (lo, lo + k - 1))
    _same(utility_verdict(y, sets, **kw), utility_verdict(held, sets, **kw))
    with pytest.raises(InputError) as exc:
        utility_verdict(held, sets, **kw, X=np.ones((2001, 1)))
    assert exc.value.param == "X"
