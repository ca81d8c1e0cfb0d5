"""Known-answer tests for dpsynth.studies.teaching: the book's exercises and its grid posteriors.

Each exercise in the Foundations pages (and ``book/choosing.md``) asserts its answer when the
book is built; these tests check the same answers under pytest, fast and without the book.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.privacy import accounting
from dpsynth.studies import teaching

BOOK = Path(__file__).resolve().parent.parent / "book"


@pytest.mark.parametrize("label", teaching.exercise_labels())
def test_exercise_answer_matches_closed_form(label):
    got = teaching.exercise_answer(label)
    assert got.shape == teaching.EXPECTED[label].shape
    assert np.allclose(got, teaching.EXPECTED[label], rtol=1e-9, atol=1e-12)
    teaching.check_answer(label, got)  # the assertion the book's solutions make


def test_exercise_answers_by_hand():
    # a few of the closed forms written out once more, in the book's words
    assert teaching.EXPECTED["ex-dp-laplace"][1] == pytest.approx(0.006738, abs=1e-6)
    assert teaching.EXPECTED["ex-dp-bernoulli"][0] == pytest.approx(2.995732, abs=1e-6)
    assert teaching.EXPECTED["ex-modips-sdd"][0] == pytest.approx(0.527438, abs=1e-6)
    assert teaching.EXPECTED["ex-modips-combine"][2] == pytest.approx(0.053333, abs=1e-6)
    assert teaching.EXPECTED["ex-cens-ph"][2] == pytest.approx(0.303265, abs=1e-6)


def test_check_answer_rejects_a_wrong_answer():
    with pytest.raises(AssertionError, match="ex-cens-m"):
        teaching.check_answer("ex-cens-m", [1.0, 0.5])  # the two neighbour cases swapped
    with pytest.raises(AssertionError):
        teaching.check_answer("ex-cens-m", [0.5])  # wrong shape
    with pytest.raises(InputError, match="^label:"):
        teaching.exercise_answer("ex-nonexistent")


def test_every_checked_exercise_is_in_the_book():
    """Each label with an answer appears in a page as an exercise and in a check_answer call."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in BOOK.glob("*.md"))
    labels_in_book = set(re.findall(r":label: (ex-[a-z-]+)", text))
    checked_in_book = set(re.findall(r'check_answer\(\s*"(ex-[a-z-]+)"', text))
    assert set(teaching.exercise_labels()) <= labels_in_book
    assert set(teaching.exercise_labels()) <= checked_in_book


def test_beta_log_lik_matches_scipy():
    y = np.array([0.01, 0.3, 0.9])
    a = np.array([0.5, 2.0])
    ll = teaching.beta_log_lik(y, a, 3.0)
    assert ll.shape == (2, 3)
    assert np.allclose(ll, stats.beta.logpdf(y[None, :], a[:, None], 3.0))
    with pytest.raises(InputError, match="^y:"):
        teaching.beta_log_lik([0.0, 0.5], 1.0, 1.0)


def test_normal_log_lik_unit_shift():
    # rescaling y, mu and sigma by k shifts every log-density by -log k (book/choosing.md)
    y = np.array([1.0, 2.5, -0.3])
    k = 37.0
    base = teaching.normal_log_lik(y, [0.5, 1.0], 2.0)
    scaled = teaching.normal_log_lik(k * y, [0.5 * k, 1.0 * k], 2.0 * k)
    assert np.allclose(scaled - base, -math.log(k))


def test_grid_posterior_weights_and_clamp():
    grid = np.linspace(0.05, 3.0, 300)
    y = np.array([0.001, 0.05, 0.2, 0.4])
    ll = teaching.beta_log_lik(y, grid, 3.0)
    post = teaching.grid_posterior(ll)
    assert post.sum() == pytest.approx(1.0)
    # weights 1 and no clamp: the ordinary posterior, exp(sum of log-likelihoods) normalised
    direct = np.exp(ll.sum(1) - ll.sum(1).max())
    assert np.allclose(post, direct / direct.sum())
    # weight 0 removes a record exactly
    alpha = np.array([0.0, 1.0, 1.0, 1.0])
    assert np.allclose(teaching.grid_posterior(ll, alpha), teaching.grid_posterior(ll[:, 1:]))
    # a huge M clamps nothing; M = 0 leaves the flat prior
    assert np.allclose(teaching.grid_posterior(ll, None, 1e6), post)
    assert np.allclose(teaching.grid_posterior(ll, None, 0.0), 1.0 / grid.size)


def test_grid_privacy_loss_within_two_m():
    grid = np.linspace(0.05, 3.0, 300)
    y = np.random.default_rng(0).beta(0.5, 3.0, 30)
    ll = teaching.beta_log_lik(y, grid, 3.0)
    for m in (0.25, 1.0, 2.0):
        loss = teaching.grid_privacy_loss(ll, None, m)
        assert loss.shape == (30,)
        assert loss.max() <= 2 * m + 1e-9
    # fixed weights keep the bound; the unclamped posterior has a much larger loss
    alpha = np.linspace(0.2, 1.0, 30)
    assert teaching.grid_privacy_loss(ll, alpha, 0.5).max() <= 1.0 + 1e-9
    assert teaching.grid_privacy_loss(ll).max() > 4.0


def test_grid_record_bounds_and_draws():
    grid = np.linspace(0.05, 3.0, 200)
    y = np.array([0.001, 0.05, 0.2])
    ll = teaching.beta_log_lik(y, grid, 3.0)
    b = teaching.grid_record_bounds(ll, size=500, seed=1)
    assert np.array_equal(b, teaching.grid_record_bounds(ll, size=500, seed=1))
    assert b.shape == (3,) and np.all(b <= np.abs(ll).max(axis=0) + 1e-12)
    assert teaching.grid_record_bounds(ll, censor_bound=0.5).max() <= 0.5
    draws = teaching.grid_draws(grid, teaching.grid_posterior(ll), 100, np.random.default_rng(2))
    assert draws.shape == (100,) and np.all(np.isin(draws, grid))


def test_laplace_mean_errors_match_the_scale():
    y = np.random.default_rng(3).uniform(size=200)
    eps = [0.5, 2.0]
    err = teaching.laplace_mean_errors(
        y, (0.0, 1.0), eps, reps=20_000, rng=np.random.default_rng(4)
    )
    # E|Laplace(0, b)| = b = 1 / (n eps)
    assert np.allclose(err, [1 / (200 * e) for e in eps], rtol=0.05)


def test_ph_max_ecdf_improves_with_epsilon():
    y = np.random.default_rng(5).beta(0.5, 3.0, 500)
    curve = teaching.ph_max_ecdf(y, (0.0, 1.0), [0.05, 20.0], reps=10, rng=np.random.default_rng(6))
    assert curve.shape == (2,) and np.all((curve >= 0) & (curve <= 1))
    assert curve[1] < curve[0]


def test_binomial_posterior_bounds():
    a_bound, g_bound = teaching.binomial_posterior_bounds(10, (0.1, 0.9))
    # brute force over s and a fine grid of p
    p = np.linspace(0.1, 0.9, 8001)
    logf = np.array([stats.beta.logpdf(p, s + 1, 11 - s) for s in range(11)])
    assert a_bound == pytest.approx(np.abs(logf).max(), rel=1e-9)
    assert g_bound == pytest.approx(np.exp(logf.max()), rel=1e-6)
    with pytest.raises(InputError, match="^support:"):
        teaching.binomial_posterior_bounds(10, (0.0, 0.9))


def test_censor_bound_round_trip_used_in_the_book():
    # the book's by-hand chapter: epsilon 4 per draw (add/remove) -> M = 2 -> epsilon 2M
    m = accounting.censor_bound(4.0, "add-remove")
    assert m == 2.0 and accounting.epsilon_of(m, "add-remove") == 4.0
    assert (
        accounting.epsilon_of(accounting.censor_bound(4.0, "substitution"), "substitution") == 4.0
    )


CODING = re.compile(
    r"```\{solution-start\} (ex-[a-z-]+-code-[a-z-]+)\n.*?```\{code-cell\} ipython3\n(.*?)```",
    re.S,
)


def coding_solutions() -> dict[str, str]:
    """The solution code of every coding exercise (label ``ex-<page>-code-...``), by label."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(BOOK.glob("*.md")))
    return dict(CODING.findall(text))


def test_coding_exercises_in_three_foundations_chapters():
    pages = {"dp_primer", "pseudo_posterior", "censoring", "reweighting", "modips"}
    with_code = {p.stem for p in BOOK.glob("*.md") if p.stem in pages and "-code-" in p.read_text()}
    assert len(with_code) >= 3, with_code


@pytest.mark.parametrize("label", sorted(coding_solutions()))
def test_coding_exercise_solution_runs(label, capsys):
    """The solution runs (its own assertions included) as the book build runs it."""
    from dpsynth.mechanisms import weights

    scope = {"np": np, "accounting": accounting, "teaching": teaching, "weights": weights}
    exec(compile(coding_solutions()[label], label, "exec"), scope)
    assert capsys.readouterr().out.strip()
