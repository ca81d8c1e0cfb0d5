"""A table column's draw cannot see the data: checked on the structure, not on an example.

Each kind of column has a fit (reads :class:`ConfidentialInputs`) and a draw that takes the
fit's draw inputs and :class:`PublicInputs` only; none of the types a draw receives has a
field through which a confidential value, a fit's data or its posterior sample could be
reached; a model fit keeps only the m draws its release publishes.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing

import numpy as np
import pytest

from dpsynth import entropy
from dpsynth.models import synthesis
from dpsynth.models.catalogue import PublicDesign, get_model
from dpsynth.table import columns, design, published, steps
from dpsynth.table.spec import parse_spec

DRAW_TYPES = (columns.PublicInputs, columns.CentreRows, columns.ModelFit, columns.HistogramFit,
              columns.ModelPlan, design.PublicFeatures, design.EncodedPublic,
              published.PartitionDraw)  # fmt: skip
FORBIDDEN = ("ConfidentialInputs", "Release", "Result", "WeightedFit", "DataFrame", "StanFit")


@pytest.mark.parametrize("kind", [columns.MODEL_COLUMN, columns.HISTOGRAM_COLUMN])
def test_a_draw_takes_its_fit_and_the_public_inputs_only(kind):
    params = list(inspect.signature(kind.draw).parameters.values())
    hints = typing.get_type_hints(kind.draw)
    assert [p.name for p in params] == ["fit", "pub"]
    assert hints["pub"] is columns.PublicInputs
    assert hints["fit"] in (columns.ModelFit, columns.HistogramFit)


@pytest.mark.parametrize("kind", [columns.MODEL_COLUMN, columns.HISTOGRAM_COLUMN])
def test_a_pilot_and_a_partition_draw_take_the_fit_and_public_inputs_only(kind):
    """A large table's draws (a pilot, then each partition from what the pilot fixed) take
    the fit, public inputs and public positions, as the whole draw does."""
    for fn, names in (
        (kind.pilot, ["fit", "pub", "rows"]),
        (kind.part, ["fit", "plan", "pub", "k", "rows", "rng"]),
    ):
        hints = typing.get_type_hints(fn)
        assert list(inspect.signature(fn).parameters) == names
        assert hints["pub"] is columns.PublicInputs
        assert hints["fit"] in (columns.ModelFit, columns.HistogramFit)
        assert not any(word in str(h) for h in hints.values() for word in FORBIDDEN)


@pytest.mark.parametrize("cls", DRAW_TYPES)
def test_no_field_of_what_a_draw_reads_leads_to_confidential_data(cls):
    for f in dataclasses.fields(cls):
        text = str(f.type)
        assert not any(word in text for word in FORBIDDEN), f"{cls.__name__}.{f.name}: {text}"


def _function_source(name: str) -> ast.FunctionDef:
    tree = ast.parse(inspect.getsource(columns))
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("name", ["draw_model_column", "draw_histogram_column",
                                  "pilot_model_column", "pilot_histogram_column",
                                  "part_model_column", "part_histogram_column"])  # fmt: skip
def test_a_draw_names_nothing_confidential(name):
    names = {n.id for n in ast.walk(_function_source(name)) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(_function_source(name)) if isinstance(n, ast.Attribute)}
    assert not names & {"conf", "ConfidentialInputs", "rel", "frame"}
    assert not attrs & {"values", "confidential", "stan_fit", "data", "diagnostics"}


def test_the_steps_module_never_sees_the_confidential_inputs():
    tree = ast.parse(inspect.getsource(steps))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "dpsynth.table.columns" not in imported and "ConfidentialInputs" not in names


class _Fit:
    """A posterior sample of S draws, as a fit's ``stan_fit`` holds it."""

    def __init__(self, S: int, p: int, rng: np.random.Generator):
        self.n_draws = S
        self.draws = {"beta": rng.normal(0, 0.3, (S, p + 1)), "sigma": rng.uniform(0.5, 1, S)}


def test_a_model_fit_keeps_the_m_published_draws_not_the_sample():
    rng = np.random.default_rng(3)
    fit = _Fit(400, 2, rng)
    draws, gen = synthesis.published_draws(fit.draws, fit.n_draws, seed=11, m=3)
    picks, _ = synthesis.published_picks(11, 400, 3)
    assert len(draws) == 3
    for d, s in zip(draws, picks, strict=True):
        np.testing.assert_array_equal(d["beta"], fit.draws["beta"][s])
        assert np.ndim(d["sigma"]) == 0
    assert isinstance(gen, np.random.Generator)


def test_a_model_draw_from_public_inputs_alone_is_reproducible_and_in_bounds():
    """A draw built from hand-made published draws and public inputs only: same seed, same
    sets; every value inside the column's public bounds; a missing indicator's NaN rows."""
    spec = parse_spec(
        {
            "public": [{"name": "age", "type": "continuous", "bounds": [16, 90]}],
            "confidential": [
                {"name": "income", "model": "lognormal-regression", "bounds": [100, 50000]}
            ],
        }
    )
    col = spec.order()[0]
    model = get_model("lognormal-regression")
    n, m = 50, 2
    public = np.random.default_rng(1).uniform(0, 1, (n, 1))
    pub = columns.PublicInputs(public, {}, (), m)

    def sets():
        draws, gen = synthesis.published_draws(
            _Fit(100, 1, np.random.default_rng(2)).draws, 100, 5, m
        )
        fit = columns.ModelFit(col, model, draws, gen, (), None, None)
        return columns.draw_model_column(fit, pub)

    a, b = sets(), sets()
    assert len(a) == m and all(s.shape == (n,) for s in a)
    for s, t in zip(a, b, strict=True):
        np.testing.assert_array_equal(s, t)
        assert np.all((s >= 100) & (s <= 50000))
    assert isinstance(np.empty((0, 0)).view(PublicDesign), PublicDesign)


def test_streams_are_named_and_distinct():
    assert len(set(entropy.STREAMS.values())) == len(entropy.STREAMS)
    a = entropy.stream(7, "rank-map").random(3)
    b = entropy.stream(7, "fit-rows").random(3)
    assert not np.allclose(a, b)
    with pytest.raises(KeyError):
        entropy.stream(7, "no-such-stream")
