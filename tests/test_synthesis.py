"""dpsynth.models.synthesis: records are made from posterior draws and public inputs only.

The invariant is checked three ways: structurally (no function of the module has a
parameter that could name the confidential data, and its code never reads a confidential
entry or a fit's per-record output), at run time (every shipped model synthesizes from a
mapping that raises on any confidential entry; the Synthesizer hands synthesis its public
inputs only), and by output (confidential values in the input change nothing). No Stan fit:
draws are made up, so these run in seconds.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Mapping

import numpy as np
import pytest

from dpsynth.engine import StanFit
from dpsynth.errors import InputError
from dpsynth.mechanisms.posterior import Result, Synthesizer, WeightedFit
from dpsynth.models import synthesis
from dpsynth.models.catalogue import MODELS, stan_data

CONFIDENTIAL_NAMES = {"y", "data", "alpha", "centre", "weights", "fit", "stan_fit", "wf"}
"""Parameter names that could carry the confidential data or a fit to it."""
FIT_OUTPUTS = {"contrib", "contrib_uncensored", "record_log_lik", "log_lik", "stan_fit", "data"}
"""Attributes holding per-record outputs of a fit (functions of the confidential data)."""


def _own_functions(module) -> list:
    return [
        f
        for _, f in inspect.getmembers(module, inspect.isfunction)
        if f.__module__ == module.__name__
    ]


def _confidential_reads(tree: ast.AST) -> list[str]:
    """Loads of a confidential entry (``x["y"]``, ``x.get("alpha")``) or of a fit's
    per-record output attribute (``x.record_log_lik``), as source snippets."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in synthesis.CONFIDENTIAL_INPUTS:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if node.func.attr in ("get", "pop") and set(args) & set(synthesis.CONFIDENTIAL_INPUTS):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            if node.attr in FIT_OUTPUTS or node.attr in synthesis.CONFIDENTIAL_INPUTS:
                found.append(ast.unparse(node))
    return found


def test_no_function_takes_a_parameter_that_names_the_confidential_data():
    functions = _own_functions(synthesis)
    assert len(functions) >= 8  # the module's functions are found at all
    for f in functions:
        if f is synthesis.public_only:
            continue  # the gate: tested below to drop every confidential entry
        params = set(inspect.signature(f).parameters)
        assert not params & CONFIDENTIAL_NAMES, (f.__name__, params & CONFIDENTIAL_NAMES)


def test_the_module_never_reads_a_confidential_entry_or_a_fit_output():
    tree = ast.parse(inspect.getsource(synthesis))
    assert _confidential_reads(tree) == []
    # the checker itself finds such reads
    leaky = ast.parse('def f(d, fit):\n    return d["y"] + d.get("alpha") + fit.record_log_lik')
    assert len(_confidential_reads(leaky)) == 3


@pytest.mark.parametrize("name", list(MODELS))
def test_shipped_simulators_never_read_a_confidential_entry(name):
    """Each shipped ``Model.simulate`` (the numpy ``y_rep``) reads no confidential entry."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(MODELS[name].simulate)))
    assert _confidential_reads(tree) == []


class _Tripwire(Mapping):
    """A data dict that raises on any access to a confidential entry."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        if key in synthesis.CONFIDENTIAL_INPUTS:
            raise AssertionError(f"synthesis read {key!r}")
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def _made_up(name: str, n: int = 12, S: int = 5):
    """(model, convention data with confidential entries, S made-up draws) for a model."""
    model = MODELS[name]
    rng = np.random.default_rng(4)
    y = rng.poisson(2.0, n) if model.outcome == "count" else rng.uniform(0.1, 0.9, n)
    X = rng.normal(size=(n, 2)) if model.covariates else None
    data = stan_data(model, y, rng.uniform(0.2, 1.0, n), X=X, censor_bound=1.0)
    one = {
        "beta1": 2.0, "beta2": 3.0, "mu": 0.1, "sigma": 0.5, "shape": 2.0, "log_mean": 0.0,
        "phi": 3.0, "kappa": 5.0, "beta": np.array([0.2, 0.1, -0.1]),
    }  # fmt: skip
    draws = {k: np.repeat(np.asarray(v, float)[None, ...], S, axis=0) for k, v in one.items()}
    return model, data, draws


@pytest.mark.parametrize("name", list(MODELS))
def test_every_shipped_model_synthesizes_without_touching_confidential_entries(name):
    model, data, draws = _made_up(name)
    draw = {k: v[0] for k, v in draws.items()}
    n = int(data["n"])
    a = model.simulate(draw, _Tripwire(data), n, np.random.default_rng(1))
    b = model.simulate(draw, synthesis.public_only(data), n, np.random.default_rng(1))
    assert np.array_equal(a, b) and len(a) == n


def test_the_gate_drops_every_confidential_entry():
    _, data, _ = _made_up("poisson")
    public = synthesis.public_only(data)
    assert set(synthesis.CONFIDENTIAL_INPUTS) <= set(data)  # they were there
    assert not set(synthesis.CONFIDENTIAL_INPUTS) & set(public)
    assert public["X"] is data["X"] and public["M"] == data["M"]  # public inputs stay


@pytest.mark.parametrize("name", ["beta", "poisson", "gamma-regression"])
def test_confidential_values_change_no_synthetic_record(name):
    model, data, draws = _made_up(name)
    n = int(data["n"])
    other = dict(data, y=np.full_like(data["y"], data["y"].max()), alpha=np.ones(n))
    kw = {"bounds": None, "seed": 3}
    a = synthesis.sets_at(model, draws, data, [0, 2], n, np.random.default_rng(8), **kw)
    b = synthesis.sets_at(model, draws, other, [0, 2], n, np.random.default_rng(8), **kw)
    assert a.shape == (2, n) and np.array_equal(a, b)


def test_public_data_is_the_same_from_the_public_inputs_alone():
    model, data, _ = _made_up("beta-regression")
    full = synthesis.public_data(data, 0.5, int(data["n"]))
    alone = synthesis.public_data(synthesis.public_only(data), 0.5, int(data["n"]), centred=True)
    assert full.keys() == alone.keys()
    for key in full:
        assert np.array_equal(full[key], alone[key]), key
    assert np.array_equal(full["y"], np.full(int(data["n"]), 0.5))
    assert synthesis.public_data({"n": 3}, 1, 7)["y"].dtype.kind == "i"  # count placeholder


def test_picks_are_fixed_by_the_seed_and_verdict_draws_are_not_published():
    picks, _ = synthesis.published_picks(17, 50, 6)
    again, _ = synthesis.published_picks(17, 50, 6)
    assert np.array_equal(picks, again) and np.unique(picks).size == 6
    assert not np.array_equal(picks, synthesis.published_picks(18, 50, 6)[0])
    extra, _ = synthesis.verdict_picks(17, 50, 6, 10)
    assert extra.size == 10 and not set(extra) & set(picks)
    assert synthesis.verdict_picks(17, 8, 6, 10)[0].size == 2  # only the unpublished draws


def test_the_synthesizer_hands_synthesis_its_public_inputs_only(monkeypatch):
    model, data, draws = _made_up("beta")
    syn = Synthesizer(np.asarray(data["y"]), "beta", seed=21)
    fit = StanFit(draws, chains=1, diagnostics={}, backend="none", seed=0)
    result = Result("censor-uw", WeightedFit(fit, data["alpha"], None, 1.0, data), 2.0)
    seen = []
    real = synthesis.sets_at

    def spy(model, draws, public, *args, **kw):
        seen.append(dict(public))
        return real(model, draws, _Tripwire(public), *args, **kw)

    monkeypatch.setattr(synthesis, "sets_at", spy)
    first = syn.synthesize(result, m=2)
    assert np.array_equal(first, syn.synthesize(result, m=2))  # same seed, same records
    assert first.shape == (2, int(data["n"]))
    assert len(seen) == 2 and not set(synthesis.CONFIDENTIAL_INPUTS) & set(seen[0])
    with pytest.raises(InputError) as exc:
        syn.synthesize(result, m=6)  # more sets than retained draws
    assert exc.value.param == "m"


class _RowsOf:
    """A :class:`~dpsynth.models.synthesis.RowDesign` over an array, recording each request."""

    def __init__(self, X: np.ndarray) -> None:
        self.X, self.n, self.seen = X, X.shape[0], []

    def at(self, rows):
        out = self.X[rows]
        self.seen.append(out.shape[0])
        return out


def test_a_large_set_is_drawn_a_chunk_of_rows_at_a_time(monkeypatch):
    """A table's set design is made DRAW_ROWS rows at a time: up to that size it gives the
    same records as the whole design, value for value; past it no design holds more rows,
    the steps read the public step rows, and the records still follow the draw (OLS of
    log y on the design recovers the coefficients, n = 3,000 in chunks of 128)."""
    from dpsynth.models.catalogue import PublicDesign, get_model

    model = get_model("lognormal-regression")
    X = np.random.default_rng(3).uniform(size=(3000, 2)).view(PublicDesign)
    draw = {"beta": np.array([1.0, 0.5, -0.8]), "sigma": np.array(0.3)}
    whole = synthesis.sets_at_designs(model, [draw], np.random.default_rng(1), [X], None)[0][0]
    one, _ = synthesis.sets_at_designs(model, [draw], np.random.default_rng(1), [_RowsOf(X)], None)
    np.testing.assert_array_equal(whole, one[0])

    monkeypatch.setattr(synthesis, "DRAW_ROWS", 128)
    step_sizes = []

    def step(d, Xd, k):
        step_sizes.append(Xd.shape[0])
        return d

    rows = _RowsOf(X)
    y = synthesis.sets_at_designs(model, [draw], np.random.default_rng(1), [rows], None, [step])[0][
        0
    ]
    assert step_sizes == [128] and max(rows.seen) == 128
    assert sum(rows.seen[1:]) == 3000 and y.shape == (3000,)  # the step rows, then the chunks
    np.testing.assert_array_equal(synthesis.step_rows(3000), synthesis.step_rows(3000))
    design = np.column_stack([np.ones(3000), np.asarray(X)])
    coef, *_ = np.linalg.lstsq(design, np.log(y), rcond=None)
    se = 0.3 / (np.sqrt(3000) * np.sqrt(1 / 12))  # a slope's s.e. on a uniform(0, 1) column
    np.testing.assert_allclose(coef, draw["beta"], atol=4.5 * se)  # 0.085
    resid = np.log(y) - design @ coef
    assert abs(resid.std() - 0.3) < 0.02
