"""The curator's utility verdict: known answers, thresholds at their boundaries, rules."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpsynth import curator
from dpsynth.curator import format_summary, utility_verdict, verdict_of_release
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
    assert curator.GOOD_MEAN_ERROR == 0.10 and curator.FAIR_MEAN_ERROR == 0.25


@pytest.mark.parametrize("figure", list(curator.THRESHOLDS))
def test_every_threshold_boundary(figure):
    good, fair, direction = curator.THRESHOLDS[figure]
    step = 1e-9 if direction == "at most" else -1e-9
    assert curator._level(figure, good) == "good"
    assert curator._level(figure, good + step) == "fair"
    assert curator._level(figure, fair) == "fair"
    assert curator._level(figure, fair + step) == "poor"
    assert curator._level(figure, float("nan")) == "poor"


def test_real_outcome_mean_error_is_relative_to_the_sd():
    y = np.random.default_rng(1).normal(0.0, 2.0, 500)
    v = utility_verdict(y, y + 0.3, outcome="real")
    assert v["summary"]["mean_error"] == pytest.approx(0.3 / np.std(y, ddof=1))


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
    assert v["summary"]["ci_overlap"] < curator.FAIR_CI_OVERLAP
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
        assert glued[name.lower()] == getattr(curator, name)
    assert glued["skewed"] == curator.SKEWED
    hand = sorted(set(quoted_numbers(text)) - set(PAGE_SETTINGS))
    assert not hand, f"hand-copied numbers on the page: {hand}"
