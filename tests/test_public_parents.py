"""A PH level column drawn given public level columns (by default within the cap,
``PH_PUBLIC_PARENTS``, or where ``given`` names them): the spec's checks, the dependence on
the public column kept (known answer, seeded), the draw reading public codes only, and the
report naming the parents."""

import copy

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.table.spec import DEFAULT_PH_CELLS, PH_PUBLIC_PARENTS, parse_spec, ph_parents

BASE = {
    "public": [
        {"name": "g", "type": "categorical", "levels": ["a", "b", "c"]},
        {"name": "age", "type": "continuous", "bounds": [18, 80]},
    ],
    "confidential": [
        {"name": "h", "type": "binary", "levels": ["no", "yes"], "mechanism": "ph"},
        {"name": "k", "type": "categorical", "levels": ["x", "y"], "mechanism": "ph"},
    ],
}


def _raw(given_h=None, given_k=None):
    raw = copy.deepcopy(BASE)
    for entry, given in zip(raw["confidential"], (given_h, given_k)):
        if given is not None:
            entry["given"] = given
    return raw


def test_given_may_name_a_public_level_column_first():
    spec = parse_spec(_raw(["g"], ["h", "g"]))
    order = spec.order()
    assert [p.name for p in ph_parents(order[0], [], spec.public)] == ["g"]
    assert [p.name for p in ph_parents(order[1], order[:1], spec.public)] == ["g", "h"]


@pytest.mark.parametrize(
    "given, message",
    [
        (["age"], r"^given: column 'h': 'age' is neither a public column with levels nor"),
        (["k"], r"^given: column 'h': 'k' is neither .* \(these are: g\)"),
    ],
)
def test_given_naming_a_column_it_cannot_be_drawn_given_is_refused(given, message):
    with pytest.raises(InputError, match=message):
        parse_spec(_raw(given))


def _frame(n: int, seed: int) -> pd.DataFrame:
    """h depends on the public g: P(yes | a, b, c) = 0.1, 0.5, 0.85."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n)
    p = pd.Series(g).map({"a": 0.1, "b": 0.5, "c": 0.85}).to_numpy()
    h = np.where(rng.random(n) < p, "yes", "no")
    k = rng.choice(["x", "y"], n)
    return pd.DataFrame({"g": g, "age": rng.uniform(18, 80, n), "h": h, "k": k})


def _yes_share(frame: pd.DataFrame) -> np.ndarray:
    return np.array([np.mean(frame.loc[frame.g == lv, "h"] == "yes") for lv in "abc"])


def test_by_default_a_ph_level_column_is_drawn_given_the_public_levels_within_the_cap():
    """PH_PUBLIC_PARENTS: the public level columns first, then the confidential level
    columns before it, where the joint cells stay within DEFAULT_PH_CELLS; past it, the
    confidential ones only (a public column never makes a PH column a censored fit)."""
    assert PH_PUBLIC_PARENTS
    spec = parse_spec(_raw())
    order = spec.order()
    assert [p.name for p in ph_parents(order[1], order[:1], spec.public)] == ["g", "h"]
    wide = _raw()
    wide["public"][0]["levels"] = [f"l{i}" for i in range(DEFAULT_PH_CELLS // 4 + 1)]
    spec = parse_spec(wide)
    order = spec.order()
    assert [p.name for p in ph_parents(order[1], order[:1], spec.public)] == ["h"]
    assert order[1].mechanism == "ph"


def test_the_dependence_on_a_public_parent_is_kept_only_when_drawn_given_it():
    """Known answer (n = 3,000, epsilon 6, seeded): given g (the default), each level of g's
    synthetic share of "yes" is within 0.05 of the data's; drawn alone (``given = []``), the
    three shares lie within 0.1 of one another (g's dependence lost) while the data's span
    0.75."""
    from dpsynth.table.pipeline import synthesize_table

    frame = _frame(3000, 1)
    truth = _yes_share(frame)
    given = synthesize_table(frame, _raw(), 6.0, seed=2)
    alone = synthesize_table(frame, _raw([]), 6.0, seed=2)
    assert np.all(np.abs(_yes_share(given.data) - truth) < 0.05)
    assert np.ptp(_yes_share(alone.data)) < 0.1 and np.ptp(truth) > 0.7
    entry = next(c for c in given.report["confidential_columns"] if c["column"] == "h")
    assert entry["predecessors"] == ["g"]


def test_the_draw_reads_a_public_parent_s_codes_not_the_data():
    """The draw of a column given a public parent reads :class:`PublicInputs` alone: its
    parents' values are the public codes made from the public features (the same in every
    set; a missing value the first level) and the synthetic sets."""
    from dpsynth.table.columns import PublicInputs
    from dpsynth.table.design import public_encoder, public_features

    spec = parse_spec(_raw(["g"], ["h", "g"]))
    frame = pd.DataFrame({"g": ["a", "c", "b", None], "age": [20.0, 30, 40, 50]})
    feats = public_features(frame, [public_encoder(frame, c) for c in spec.public])
    pub = PublicInputs(feats, {"h": (np.array([1.0, 0, 1, 0]),) * 2}, (), 2, spec.public)
    parents = ph_parents(spec.order()[1], spec.order()[:1], spec.public)
    for k in range(2):
        values = pub.parent_values(parents, k)
        assert np.array_equal(values["g"], [0, 2, 1, 0]) and np.array_equal(
            values["h"], [1, 0, 1, 0]
        )
