"""A log-normal regression whose spread varies with its design (``spread = "by-parents"``):
the spec's key (default, choices, refusals naming the column), the program's flag, a known
answer for the spread's coefficient, and a table released with it (the report says so)."""

import copy

import numpy as np
import pandas as pd
import pytest

from dpsynth import engine
from dpsynth.errors import InputError
from dpsynth.models.catalogue import PublicDesign, get_model, stan_data
from dpsynth.sampler import Sampler
from dpsynth.table.design import column_model
from dpsynth.table.spec import SPREAD_DEFAULT, SPREADS, parse_spec

BASE = {
    "public": [{"name": "g", "type": "binary", "levels": ["a", "b"]}],
    "confidential": [{"name": "w", "model": "lognormal-regression", "bounds": [1, 1000]}],
}


def _spec(**entry):
    raw = copy.deepcopy(BASE)
    raw["confidential"][0].update(entry)
    if raw["confidential"][0]["model"] is None:  # a histogram column: a type, no model
        raw["confidential"][0].update(model=None, type="continuous")
        del raw["confidential"][0]["model"]
    return parse_spec(raw)


def test_a_lognormal_column_takes_its_default_spread_unless_the_spec_says():
    assert _spec().confidential[0].spread == SPREAD_DEFAULT
    for spread in SPREADS:
        col = _spec(spread=spread).confidential[0]
        assert col.spread == spread
        assert column_model(col).spread_by_design is (spread == "by-parents")


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"spread": "wide"}, r"^spread: column 'w': must be one of constant, by-parents"),
        (
            {"model": "gamma-regression", "spread": "by-parents"},
            r"^spread: column 'w': only a censored lognormal-regression column takes it",
        ),
        (
            {"model": None, "mechanism": "ph", "spread": "by-parents"},
            r"^spread: column 'w': only a censored lognormal-regression column takes it",
        ),
    ],
)
def test_a_spread_the_column_cannot_take_is_refused_naming_it(entry, message):
    with pytest.raises(InputError, match=message):
        _spec(**entry)


def test_only_a_program_that_declares_the_spread_takes_it():
    from dpsynth.models.catalogue import MODELS
    from dpsynth.table.spec import SPREAD_MODELS

    assert SPREAD_MODELS == tuple(n for n, m in MODELS.items() if m.spread_by_design is not None)
    with pytest.raises(InputError, match="^spread: model 'gamma-regression'"):
        get_model("gamma-regression").with_spread(True)
    model = get_model("lognormal-regression")
    X = np.zeros((4, 2)).view(PublicDesign)
    y = np.full(4, 0.5)
    assert stan_data(model, y, np.ones(4), X=X)["spread_by_design"] == 0
    assert stan_data(model.with_spread(True), y, np.ones(4), X=X)["spread_by_design"] == 1
    assert "spread_by_design" not in stan_data(get_model("gamma-regression"), y, np.ones(4), X=X)


def _two_spreads(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """log y ~ Normal(-2 + 0.5 g, 0.3 exp(log(3) g)): group g = 1 three times as spread."""
    rng = np.random.default_rng(seed)
    g = (rng.random(n) < 0.5).astype(float)
    y = np.exp(rng.normal(-2.0 + 0.5 * g, 0.3 * np.exp(np.log(3.0) * g)))
    return y, g[:, None]


@pytest.mark.slow
def test_the_spread_coefficient_is_recovered_and_one_sigma_misses_the_groups():
    """Known answer (uncensored, n = 400, seeded): gamma's posterior mean within 0.15 of
    log 3 and sigma within 20 % of 0.3; the synthetic records' sd of log y per group within
    15 % of the data's under the spread by the design, and one sigma misses group 0's by more
    than a third."""
    y, x = _two_spreads(400, 1)
    model = get_model("lognormal-regression")
    X = x.view(PublicDesign)
    sds = {}
    for by_design in (True, False):
        m = model.with_spread(by_design)
        data = stan_data(m, y, np.ones(y.size), X=X)
        fit = engine.fit(m.stan_file, data, seed=3, chains=2, iter_warmup=300, iter_sampling=300)
        if by_design:
            assert fit.draws["gamma"].shape == (600, 1)
            assert np.mean(fit.draws["gamma"]) == pytest.approx(np.log(3.0), abs=0.15)
            assert np.mean(fit.draws["sigma"]) == pytest.approx(0.3, rel=0.2)
        draw = fit.draw(fit.n_draws - 1)
        syn = m.simulate(draw, {"X": data["X"]}, y.size, np.random.default_rng(4))
        sds[by_design] = [np.std(np.log(syn[x[:, 0] == k])) for k in (0, 1)]
    truth = [np.std(np.log(y[x[:, 0] == k])) for k in (0, 1)]
    assert np.allclose(sds[True], truth, rtol=0.15)
    assert abs(sds[False][0] - truth[0]) > truth[0] / 3


@pytest.mark.slow
def test_a_table_releases_with_the_spread_by_its_parents():
    """A small table (PH level column, log-normal outcome by-parents) releases, its report
    names the column's spread, and the synthetic outcome lies within its public bounds."""
    from dpsynth.table.pipeline import synthesize_table

    rng = np.random.default_rng(5)
    y, x = _two_spreads(300, 6)
    frame = pd.DataFrame(
        {
            "g": np.where(x[:, 0] == 1, "b", "a"),
            "h": np.where(rng.random(300) < 0.4, "yes", "no"),
            "w": np.clip(1000 * y, 1, 1000),
        }
    )
    raw = copy.deepcopy(BASE)
    raw["confidential"].insert(0, {"name": "h", "type": "binary", "levels": ["no", "yes"]})
    raw["confidential"][1]["spread"] = "by-parents"
    out = synthesize_table(
        frame, raw, 6.0, seed=7, sampler=Sampler(chains=2, iter_warmup=300, iter_sampling=300)
    )
    assert out.data["w"].between(1, 1000).all() and len(out.data) == 300
    entry = next(c for c in out.report["confidential_columns"] if c["column"] == "w")
    assert entry["spread"] == "by-parents"
