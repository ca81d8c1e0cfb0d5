"""The default mechanism of a confidential column whose spec names none (spec.DEFAULT_PH_CELLS):
chosen from the spec alone, recorded on the column and stated in the public report; a
mechanism the spec names always wins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.table import pipeline
from dpsynth.table.spec import (
    DEFAULT_MECHANISM_MEANING,
    DEFAULT_PH_CELLS,
    parse_spec,
)

FIVE_COLUMNS = {
    "reference": "reference.csv",
    "public": [{"name": "g", "type": "binary", "levels": ["a", "b"]}],
    "confidential": [
        {"name": "c", "model": "categorical", "levels": ["w", "x", "y", "z"]},
        {"name": "b", "model": "logistic", "levels": [0, 1]},
        {"name": "k", "model": "negbin", "bounds": [0, 20]},
        {"name": "y", "model": "lognormal-regression", "bounds": [1, 100]},
    ],
    "analysis": {"formula": "y ~ g + c + b + k"},
}
"""A curator's five-column table: names, models, public levels and bounds, a reference and an
analysis, nothing else (the shape of the held-out table the rule was made for)."""


def _mechanisms(raw: dict) -> dict[str, tuple[str, str | None, bool]]:
    return {c.name: (c.mechanism, c.model, c.mechanism_auto) for c in parse_spec(raw).order()}


def test_a_five_column_spec_gets_ph_for_its_level_columns_and_censored_fits_for_the_rest():
    assert _mechanisms(FIVE_COLUMNS) == {
        "c": ("ph", None, True),  # 4 cells
        "b": ("ph", None, True),  # 2 x 4 cells: the named logistic model is not fitted
        "k": ("censor-uw", "negbin-regression", True),
        "y": ("censor-uw", "lognormal-regression", True),
    }
    spec = parse_spec(FIVE_COLUMNS)
    assert {c.name: c.type for c in spec.confidential} == {
        "c": "categorical",
        "b": "binary",
        "k": "count",
        "y": "continuous",
    }


def _levels(name: str, k: int, **keys) -> dict:
    return {"name": name, "type": "categorical", "levels": [f"l{i}" for i in range(k)], **keys}


def test_many_joint_cells_give_a_censored_fit_of_the_named_or_the_type_s_model():
    raw = {
        "confidential": [
            _levels("education", 5),
            _levels("race", 4),
            _levels("maritl", 5),  # 100 cells
            {"name": "jobclass", "model": "logistic", "levels": ["i", "j"]},  # 200
            {"name": "insured", "type": "binary"},  # 400: at the cap, no model named
            _levels("sector", 3),  # 3 x 400: censored, its model by its type
            {"name": "union", "model": "logistic", "levels": ["n", "y"]},  # 2 x 1200: censored
        ]
    }
    assert DEFAULT_PH_CELLS == 400
    assert _mechanisms(raw) == {
        "education": ("ph", None, True),
        "race": ("ph", None, True),
        "maritl": ("ph", None, True),
        "jobclass": ("ph", None, True),
        "insured": ("ph", None, True),
        "sector": ("censor-uw", "categorical", True),
        "union": ("censor-uw", "logistic", True),
    }


def test_the_cap_counts_the_levels_of_the_columns_before_and_of_a_missingness_indicator():
    raw = {"confidential": [_levels("a", 20), _levels("b", 20)]}
    assert _mechanisms(raw)["b"][0] == "ph"  # 400 cells
    raw = {"confidential": [_levels("a", 20), _levels("b", 21)]}
    assert _mechanisms(raw)["b"][0] == "censor-uw"  # 420 cells
    with_indicator = {
        "confidential": [
            {
                "name": "x",
                "model": "lognormal-regression",
                "bounds": [1, 9],
                "missing": "indicator",
            },
            _levels("a", 20),
            _levels("b", 10),
        ]
    }
    got = _mechanisms(with_indicator)
    assert got["x_missing"][0] == "ph" and got["x"][0] == "censor-uw"
    assert got["a"][0] == "ph" and got["b"][0] == "ph"  # 10 x 20 x 2 = 400
    with_indicator["confidential"][2] = _levels("b", 11)  # 11 x 20 x 2 = 440
    assert _mechanisms(with_indicator)["b"][:2] == ("censor-uw", "categorical")


@pytest.mark.parametrize("mechanism", ["censor-uw", "ph"])
def test_a_mechanism_the_spec_names_always_wins(mechanism):
    raw = {
        "confidential": [
            _levels("a", 20),
            _levels("b", 30, mechanism=mechanism),  # 600 cells: the rule would say censored
            {"name": "c", "type": "binary", "mechanism": mechanism},  # 2 x 600
        ]
    }
    if mechanism == "censor-uw":
        raw["confidential"][1]["model"] = "categorical"
        raw["confidential"][2]["model"] = "logistic"
    got = _mechanisms(raw)
    assert got["a"] == ("ph", None, True)
    assert got["b"][0] == got["c"][0] == mechanism and not got["b"][2] and not got["c"][2]
    named = {"confidential": [{"name": "b", "model": "logistic", "mechanism": "censor-uw"}]}
    assert _mechanisms(named)["b"] == ("censor-uw", "logistic", False)


def test_a_key_only_one_kind_takes_decides():
    raw = {
        "confidential": [
            {"name": "a", "model": "logistic", "clamp": "smooth"},  # censored only
            {"name": "b", "model": "categorical", "levels": ["x", "y", "z"], "centring": "none"},
            _levels("c", 3, missing="level"),  # ph only
            {"name": "d", "model": "logistic", "missing": "indicator"},  # ph cannot follow it
            {"name": "e", "model": "lognormal-regression", "bounds": [1, 9]},
            {"name": "f", "type": "binary", "given": ["e"]},  # ph only
        ]
    }
    got = _mechanisms(raw)
    assert got["a"] == ("censor-uw", "logistic", True)
    assert got["b"] == ("censor-uw", "categorical", True)
    assert got["c"] == ("ph", None, True)
    assert got["d"] == ("censor-uw", "logistic", True)
    assert got["f"] == ("ph", None, True)


def test_a_column_the_rule_cannot_place_is_refused_as_before():
    clash = {"confidential": [{"name": "a", "type": "binary", "model": "categorical"}]}
    with pytest.raises(InputError) as err:
        parse_spec(clash)
    assert err.value.param == "type"
    count = {"confidential": [{"name": "a", "type": "count", "bounds": [0, 9]}]}
    with pytest.raises(InputError) as err:
        parse_spec(count)
    assert err.value.param == "model"  # a count column still needs a model (or ph named)
    nolevels = {"confidential": [{"name": "a", "type": "categorical"}]}
    with pytest.raises(InputError) as err:
        parse_spec(nolevels)
    assert err.value.param == "levels"


def test_the_public_report_states_the_rule_where_it_chose():
    rng = np.random.default_rng(5)
    n = 200
    frame = pd.DataFrame(
        {
            "g": rng.choice(["a", "b"], n),
            "c": rng.choice(["w", "x", "y", "z"], n),
            "b": rng.choice([0, 1], n),
            "d": rng.choice(["p", "q"], n),
        }
    )
    raw = {
        "public": [{"name": "g", "type": "binary", "levels": ["a", "b"]}],
        "confidential": [
            {"name": "c", "model": "categorical", "levels": ["w", "x", "y", "z"]},
            {"name": "b", "model": "logistic", "levels": [0, 1]},
            {"name": "d", "type": "binary", "levels": ["p", "q"], "mechanism": "ph"},
        ],
    }
    with pytest.warns(Warning):  # a known seed: a research run
        out = pipeline.synthesize_table(frame, raw, 3.0, seed=11)
    cols = {c["column"]: c for c in out.report["confidential_columns"]}
    assert cols["c"]["mechanism"] == cols["b"]["mechanism"] == cols["d"]["mechanism"] == "ph"
    assert cols["c"]["mechanism_rule"] == DEFAULT_MECHANISM_MEANING
    assert cols["b"]["mechanism_rule"] == DEFAULT_MECHANISM_MEANING
    assert "mechanism_rule" not in cols["d"]  # named in the spec
    assert cols["b"]["predecessors"] == ["g", "c"]  # PH given the public g and its parent c
    assert cols["c"]["predecessors"] == ["g"]  # the public level column (PH_PUBLIC_PARENTS)
    assert f"at most {DEFAULT_PH_CELLS}" in DEFAULT_MECHANISM_MEANING
    assert set(out.data["b"].unique()) <= {0, 1}


def test_a_censored_column_the_rule_chose_says_so_in_its_choices():
    spec = parse_spec(FIVE_COLUMNS)
    k = next(c for c in spec.confidential if c.name == "k")
    assert pipeline._column_choices(k)["mechanism_rule"] == DEFAULT_MECHANISM_MEANING
    named = parse_spec(
        {
            "confidential": [
                {"name": "k", "model": "negbin", "bounds": [0, 9], "mechanism": "censor-uw"}
            ]
        }
    )
    assert "mechanism_rule" not in pipeline._column_choices(named.confidential[0])
