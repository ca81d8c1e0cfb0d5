"""The table verdict (dpsynth.curator.table_verdict): known answers, hand computations, the label.

Every frame is drawn with a fixed seed; tolerances are stated where a figure is fitted
(the pMSE's propensity model) or sampled.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

from dpsynth.curator import table_verdict as tv
from dpsynth.errors import InputError

SPEC = {
    "x": {"type": "continuous", "bounds": (0, 100)},
    "z": {"type": "continuous", "bounds": (0, 100)},
    "b": {"type": "binary"},
    "g": {"type": "categorical", "levels": ["a", "b", "c"]},
    "k": {"type": "count", "bounds": (0, 30)},
}


def _table(seed: int, n: int = 2000) -> pd.DataFrame:
    """x ~ N(50, 10); z = x + N(0, 5) (correlation about 0.9); b logistic in x; g uniform on
    three levels; k Poisson with a mean rising in x."""
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(50, 10, n), 0, 100)
    return pd.DataFrame(
        {
            "x": x,
            "z": np.clip(x + rng.normal(0, 5, n), 0, 100),
            "b": (rng.random(n) < 1 / (1 + np.exp(-(x - 50) / 10))).astype(int),
            "g": rng.choice(["a", "b", "c"], n),
            "k": np.clip(rng.poisson(5 + (x - 50) / 10), 0, 30),
        }
    )


def test_identical_tables_have_zero_distances_and_a_good_verdict():
    conf = _table(1)
    v = tv.table_verdict(conf, conf.copy(), SPEC, analysis="z ~ x + b + g")
    by = {(e["figure"], tuple(e["columns"]), e.get("name")): e["value"] for e in v["figures"]}
    tvds = [val for (f, _, _), val in by.items() if f in ("one_way_tvd", "two_way_tvd")]
    assert len(tvds) == 5 + 10 and max(tvds) == 0.0
    assert by[("correlation_difference", ("x", "z"), None)] == pytest.approx(0.0, abs=1e-12)
    pmse = next(e for e in v["figures"] if e["figure"] == "pmse_ratio")
    assert pmse["value"] <= 1.0  # identical tables: the propensity model finds nothing
    overlaps = [e["value"] for e in v["figures"] if e["figure"] == "ci_overlap"]
    assert len(overlaps) == 5 and np.allclose(overlaps, 1.0)
    assert v["verdict"] == "good" and v["reasons"] == []
    assert v["next_step"].startswith("none needed")


def test_pmse_ratio_of_two_samples_of_one_distribution_is_near_one():
    """Under the null the ratio is about chi2_{k-1} / (k - 1): mean 1, sd sqrt(2 / (k - 1))
    (about 0.1 here); two independent tables from one process land within [0.6, 1.6]."""
    cols = tv.describe(SPEC)
    out = tv.pmse(cols, _table(2), _table(3))
    assert out["parameters"] > 100
    assert 0.6 <= out["pmse_ratio"] <= 1.6
    assert out["pmse_expected"] == pytest.approx(
        (out["parameters"] - 1) * 0.5 * 0.5 / 4000, rel=1e-12
    )


def test_shuffling_one_column_raises_its_pairs_only():
    """Known answer: a permutation of z keeps every one-way marginal and every pair without
    z exactly; the pairs with z move, and the correlation difference is |r(x, z) - r*(x, z)|
    with r* the shuffled correlation, both computed here by numpy."""
    conf = _table(4)
    syn = conf.copy()
    syn["z"] = np.random.default_rng(5).permutation(syn["z"].to_numpy())
    cols = tv.describe(SPEC)
    for c in cols:
        assert tv.column_figures(c, conf[c.name], syn[c.name])["one_way_tvd"] == 0.0
    pairs = tv.two_way_tvd(cols, conf, syn)
    assert all(v == 0.0 for (a, b), v in pairs.items() if "z" not in (a, b))
    assert pairs[("x", "z")] > tv.FAIR_TWO_WAY_TVD  # a correlation of 0.9 lost: poor
    assert pairs[("z", "b")] > 0.05 and pairs[("z", "k")] > 0.05
    value, pair = tv.correlation_difference(cols, conf, syn)
    expected = abs(np.corrcoef(conf.x, conf.z)[0, 1] - np.corrcoef(syn.x, syn.z)[0, 1])
    assert pair == ("x", "z") and value == pytest.approx(expected, rel=1e-10)
    v = tv.table_verdict(conf, syn, SPEC)
    assert v["verdict"] == "poor" and "z" in v["driven_by"]["columns"]
    assert "'z'" in v["next_step"]  # the later column of the pair carries the dependence


def test_the_worst_figure_drives_the_label():
    """The verdict is the worst level of all figures; the entry named as the driver has it;
    a mean shift of one column makes that column's one-way figures drive a fair or poor
    verdict, and the next step names the column."""
    conf = _table(6)
    syn = _table(7)
    syn["k"] = np.clip(syn["k"] + 2, 0, 30)  # counts shifted by 2: a mean error near 0.4
    v = tv.table_verdict(conf, syn, SPEC)
    levels = [e["level"] for e in v["figures"]]
    worst = max(levels, key=tv.VERDICTS.index)
    assert v["verdict"] == worst == v["driven_by"]["level"] == "poor"
    assert v["driven_by"]["columns"] == ["k"]
    assert v["driven_by"]["figure"] in ("one_way_tvd", "max_ecdf", "mean_error")
    assert "'k'" in v["next_step"]
    assert len(v["reasons"]) == sum(level != "good" for level in levels)


def test_levels_at_the_thresholds():
    assert tv.level("one_way_tvd", tv.GOOD_ONE_WAY_TVD) == "good"
    assert tv.level("one_way_tvd", np.nextafter(tv.GOOD_ONE_WAY_TVD, 1)) == "fair"
    assert tv.level("one_way_tvd", tv.FAIR_ONE_WAY_TVD + 1e-9) == "poor"
    assert tv.level("ci_overlap", tv.THRESHOLDS["ci_overlap"][0]) == "good"
    assert tv.level("ci_overlap", 0.0) == "poor"
    assert tv.level("pmse_ratio", float("inf")) == "poor"


def _tiny():
    conf = pd.DataFrame({"x": [1.0, 2, 6, 7, 8, 9], "g": ["a", "a", "b", "b", "a", "b"]})
    syn = pd.DataFrame({"x": [1.0, 6, 6, 7, 2, 3], "g": ["a", "b", "b", "a", "a", "a"]})
    cols = tv.describe(
        {
            "x": {"type": "continuous", "bounds": (0, 10), "bins": 2},
            "g": {"type": "categorical", "levels": ["a", "b"]},
        }
    )
    return conf, syn, cols


def test_figures_agree_with_a_hand_computation():
    """Bins [0, 5) and [5, 10] of x: confidential 2 / 4, synthetic 3 / 3, TVD 1/6; g: 3 / 3
    against 4 / 2, TVD 1/6; the (x, g) cells (low a, low b, high a, high b): 2, 0, 1, 3
    against 3, 0, 1, 2, TVD 1/6. ECDFs: largest gap 2/6 (at 6 and at 7). Means 33/6 and
    25/6: relative error 8/33."""
    conf, syn, cols = _tiny()
    fx = tv.column_figures(cols[0], conf.x, syn.x)
    assert fx["one_way_tvd"] == pytest.approx(1 / 6)
    assert fx["max_ecdf"] == pytest.approx(1 / 3)
    assert fx["mean_error"] == pytest.approx(8 / 33)
    assert tv.column_figures(cols[1], conf.g, syn.g) == {"one_way_tvd": pytest.approx(1 / 6)}
    assert tv.two_way_tvd(cols, conf, syn) == {("x", "g"): pytest.approx(1 / 6)}


def test_pmse_agrees_with_a_hand_computation():
    """One categorical column: the logistic model on its dummy is saturated, so each record's
    propensity is its level's synthetic share: a 4 / 7, b 2 / 5. c = 1/2, N = 12:
    pMSE = (7 (4/7 - 1/2)^2 + 5 (2/5 - 1/2)^2) / 12; k = 2, E = (1/2)(1/2) / 12."""
    conf, syn, cols = _tiny()
    out = tv.pmse(cols[1:], conf, syn)
    hand = (7 * (4 / 7 - 0.5) ** 2 + 5 * (2 / 5 - 0.5) ** 2) / 12
    assert out["parameters"] == 2
    assert out["pmse"] == pytest.approx(hand, rel=1e-4)  # L-BFGS to its tolerance
    assert out["pmse_expected"] == pytest.approx(0.25 / 12)
    assert out["pmse_ratio"] == pytest.approx(hand / (0.25 / 12), rel=1e-4)


def test_coefficient_overlap_agrees_with_a_hand_computation():
    """y ~ x by the textbook formulas (slope Sxy / Sxx, se from the residual variance, t on
    n - 2 degrees of freedom) and Karr's overlap of the 95% intervals."""
    from scipy import stats

    rng = np.random.default_rng(8)
    conf = pd.DataFrame({"x": rng.normal(size=40)})
    conf["y"] = 1 + 2 * conf.x + rng.normal(size=40)
    syn = pd.DataFrame({"x": rng.normal(size=40)})
    syn["y"] = 1.5 + 1.6 * syn.x + rng.normal(size=40)
    spec = {n: {"type": "continuous", "bounds": (-10, 10)} for n in ("x", "y")}

    def slope_interval(f):
        x, y = f.x.to_numpy(), f.y.to_numpy()
        sxx = ((x - x.mean()) ** 2).sum()
        b = ((x - x.mean()) * (y - y.mean())).sum() / sxx
        resid = y - (y.mean() - b * x.mean()) - b * x
        se = np.sqrt((resid**2).sum() / (len(x) - 2) / sxx)
        t = stats.t.ppf(0.975, len(x) - 2)
        return b, se, b - t * se, b + t * se

    b1, se1, lo1, hi1 = slope_interval(conf)
    b2, _, lo2, hi2 = slope_interval(syn)
    inter = min(hi1, hi2) - max(lo1, lo2)
    hand = max(0.0, 0.5 * (inter / (hi1 - lo1) + inter / (hi2 - lo2)))
    coefs = tv.coefficient_overlap(tv.describe(spec), conf, syn, "y ~ x")
    assert [c["name"] for c in coefs] == ["(intercept)", "x"]
    assert coefs[1]["overlap"] == pytest.approx(hand, rel=1e-9)
    assert coefs[1]["shift"] == pytest.approx((b2 - b1) / se1, rel=1e-9)


def test_a_public_level_no_record_has_leaves_the_other_coefficients_estimable():
    """Public levels a-d of g; the confidential records have no d, the synthetic ones no c.
    g[d] is not estimable from the data: it is left out, and every other coefficient is the
    OLS fit without its (all-zero) dummy, as R's lm reports it. g[c], which the synthetic
    table cannot estimate, gets overlap 0 and shift inf; the rest are still judged (the
    synthetic fit keeps g[d], which its records have)."""
    rng = np.random.default_rng(3)
    conf = pd.DataFrame({"x": rng.normal(size=60), "g": rng.choice(["a", "b", "c"], 60)})
    syn = pd.DataFrame({"x": rng.normal(size=60), "g": rng.choice(["a", "b", "d"], 60)})
    for f in (conf, syn):
        f["y"] = 1 + 2 * f.x + (f.g == "b") + rng.normal(size=60)
    cols = tv.describe(
        {
            "x": {"type": "continuous", "bounds": (-10, 10)},
            "g": {"type": "categorical", "levels": ["a", "b", "c", "d"]},
            "y": {"type": "continuous", "bounds": (-30, 30)},
        }
    )
    coefs = {c["name"]: c for c in tv.coefficient_overlap(cols, conf, syn, "y ~ x + g")}
    assert list(coefs) == ["(intercept)", "x", "g[b]", "g[c]"]
    X = np.column_stack([np.ones(60), conf.x, conf.g == "b", conf.g == "c"]).astype(float)
    hand = np.linalg.lstsq(X, conf.y.to_numpy(), rcond=None)[0]
    assert [coefs[n]["confidential"] for n in coefs] == pytest.approx(hand, rel=1e-9)
    assert coefs["g[c]"]["overlap"] == 0.0 and coefs["g[c]"]["shift"] == float("inf")
    Xs = np.column_stack([np.ones(60), syn.x, syn.g == "b", syn.g == "d"]).astype(float)
    hand_syn = np.linalg.lstsq(Xs, syn.y.to_numpy(), rcond=None)[0][:3]
    judged = [coefs[n]["synthetic"] for n in ("(intercept)", "x", "g[b]")]
    assert judged == pytest.approx(hand_syn, rel=1e-9)
    assert all(coefs[n]["overlap"] > 0 for n in ("(intercept)", "x"))


def test_categorical_predictors_are_coded_on_public_levels():
    conf, _, cols = _tiny()
    X, names = tv.analysis_design(cols, conf, ["g", "x"])
    assert names == ["(intercept)", "g[b]", "x"]
    assert X[:, 1].tolist() == [0, 0, 1, 1, 0, 1]


def test_bad_input_is_refused_in_one_line_naming_the_parameter():
    conf, syn, cols = _tiny()
    with pytest.raises(InputError, match="^synthetic: has no column"):
        tv.table_verdict(conf, syn.drop(columns="g"), cols)
    bad = syn.copy()
    bad.loc[3, "g"] = "zz"
    with pytest.raises(
        InputError,
        match=r"^synthetic: column 'g' has a value that is not one of .*\[CONFIDENTIAL, from the data: record 4\]",
    ):
        tv.table_verdict(conf, bad, cols)
    with pytest.raises(InputError, match="^columns: 'x': needs public bounds"):
        tv.describe({"x": {"type": "continuous"}})
    with pytest.raises(InputError, match="^columns: 'x': type must be"):
        tv.describe({"x": {"type": "date"}})
    with pytest.raises(InputError, match="^analysis: names no described column w"):
        tv.table_verdict(conf, syn, cols, analysis="w ~ x")


def test_missing_values_are_a_cell_of_their_own():
    """A missing value is its own cell in every marginal (x: 1 missing of 4 against none:
    TVD 1/4), the ECDF and mean are of the values present, the correlations and the analysis
    use the complete records; binary columns with text levels count as 0/1."""
    spec = {
        "x": {"type": "continuous", "bounds": (0, 10), "bins": 2},
        "s": {"type": "binary", "levels": ["no", "yes"]},
    }
    cols = tv.describe(spec)
    conf = pd.DataFrame({"x": [1.0, 2.0, 7.0, np.nan], "s": ["no", "no", "yes", "yes"]})
    syn = pd.DataFrame({"x": [1.0, 2.0, 7.0, 8.0], "s": ["no", "no", "yes", None]})
    fx = tv.column_figures(cols[0], conf.x, syn.x)
    assert fx["one_way_tvd"] == pytest.approx(1 / 4)
    assert fx["max_ecdf"] == pytest.approx(1 / 4)  # {1, 2, 7} against {1, 2, 7, 8}
    assert tv.column_figures(cols[1], conf.s, syn.s)["one_way_tvd"] == pytest.approx(1 / 4)
    # (x, s) cells: conf (low, no) 2, (high, yes) 1, (missing, yes) 1; syn (low, no) 2,
    # (high, yes) 1, (high, missing) 1: half of the last two cells' mass moves
    assert tv.two_way_tvd(cols, conf, syn) == {("x", "s"): pytest.approx(1 / 4)}
    value, pair = tv.correlation_difference(cols, conf, syn)
    assert pair == ("x", "s") and value == pytest.approx(0.0, abs=1e-12)  # same complete pairs
    assert tv.numeric_values(cols[1], syn.s).tolist()[:3] == [0.0, 0.0, 1.0]
    with pytest.raises(
        InputError,
        match=r"^synthetic: column 's' has a value that is not one of .*\[CONFIDENTIAL, from the data: record 2\]",
    ):
        tv.column_figures(cols[1], conf.s, pd.Series(["no", "maybe"]))


def test_constant_tables_have_nothing_to_tell_apart():
    conf, _, cols = _tiny()
    same = pd.DataFrame({"x": [1.0] * 6, "g": ["a"] * 6})
    out = tv.pmse(cols, same, same.copy())
    assert out["pmse"] == 0.0 and out["parameters"] == 1 and out["pmse_ratio"] == 0.0
    v = tv.table_verdict(conf, conf.copy(), cols, analysis="x ~ g")
    assert v["verdict"] == "good" and v["driven_by"]["name"] in ("(intercept)", "g[b]")


def test_a_censored_level_column_behind_the_worst_figure_is_sent_to_ph():
    """Advice that moves: the binary column b fitted by a censored model and collapsed to
    one level drives the verdict, and the next step is PH for it; once b is PH (or public,
    or its mechanism unknown) the same figures give the share advice instead."""
    conf = _table(8)
    syn = conf.copy()
    syn["b"] = 0  # the collapse a nearly flat censored logistic fit gives
    for mech, expected in [("censor-uw", "synthesize 'b' by ph"), ("ph", "share of epsilon")]:
        spec = {**SPEC, "b": {"type": "binary", "mechanism": mech}}
        v = tv.table_verdict(conf, syn, spec)
        assert v["verdict"] == "poor" and "b" in v["driven_by"]["columns"]
        assert expected in v["next_step"], v["next_step"]


def test_a_ph_column_given_parents_behind_a_one_way_figure_is_told_to_calibrate():
    """z (a PH column) drawn from a shifted marginal drives the verdict by its one-way TVD.
    Drawn given b, uncalibrated: the next step is calibrate_share; calibrated already, or
    drawn alone (no parents), the share advice."""
    conf = _table(4)
    syn = conf.copy()
    syn["z"] = np.clip(syn["z"] + 40, 0, 100)
    z = {"type": "continuous", "bounds": (0, 100), "mechanism": "ph"}
    cases = [
        ({**z, "given": ["b"]}, "give 'z' a calibrate_share (drawn given b"),
        ({**z, "given": ["b"], "calibrated": True}, "raise the share of epsilon of 'z'"),
        ({**z, "given": []}, "raise the share of epsilon of 'z'"),
    ]
    for change, expected in cases:
        v = tv.table_verdict(conf, syn, {**SPEC, "z": change})
        assert v["verdict"] == "poor" and v["driven_by"]["figure"] == "one_way_tvd", v
        assert v["driven_by"]["columns"] == ["z"] and expected in v["next_step"], v["next_step"]


def test_a_ph_column_that_ignores_its_worst_partner_is_told_to_name_it():
    """The shuffled z (a PH column) drives the verdict through its pair with x. Drawn given
    b only, the next step names x for its given; given x, the share advice; with x public,
    a model (PH never reads public columns)."""
    conf = _table(4)
    syn = conf.copy()
    syn["z"] = np.random.default_rng(5).permutation(syn["z"].to_numpy())
    z = {"type": "continuous", "bounds": (0, 100), "mechanism": "ph"}
    cases = [
        ({"z": {**z, "given": ["b"]}}, "draw 'z' given 'x' too"),
        ({"z": {**z, "given": ["x"]}}, "raise the share of epsilon of 'z'"),
        ({"x": {**SPEC["x"], "public": True}, "z": {**z, "given": []}}, "give 'z' a model"),
    ]
    for change, expected in cases:
        v = tv.table_verdict(conf, syn, {**SPEC, **change})
        assert v["verdict"] == "poor" and v["driven_by"]["columns"] == ["x", "z"], v["driven_by"]
        assert expected in v["next_step"], v["next_step"]


def test_a_coefficient_behind_the_verdict_of_a_subsampled_outcome_proposes_more_records():
    """The analysis's outcome z drives the verdict by a coefficient's overlap. When z's
    model was fitted to a 2,000-record subsample the next step also proposes a larger
    fit_records; fitted to every record, it does not."""
    worst = {"level": "poor", "figure": "ci_overlap", "columns": ["z"], "name": "x"}
    for fit_records, expected in [(2000, True), (None, False)]:
        cols = tv.describe({**SPEC, "z": {**SPEC["z"], "fit_records": fit_records}})
        step = tv.next_step(worst, cols, [], "z ~ x + b")
        assert step.startswith("raise the share of epsilon of the analysis's outcome 'z'")
        assert ("fit it to more than 2,000 records (fit_records)" in step) is expected, step


def test_a_file_that_stores_levels_as_numbers_meets_the_specs_text_levels():
    """A month read as 1..12 (integers from Parquet, floats from a CSV with gaps) is the
    spec's level "1".."12", as in the release's own design: the verdict is computed."""
    levels = [str(k) for k in range(1, 13)]
    col = tv.ColumnInfo("month", "categorical", levels=levels)
    as_int = tv.public_bins(col, np.array([1, 12, 5]))
    as_float = tv.public_bins(col, np.array([1.0, 12.0, np.nan]))
    assert as_int.tolist() == [0, 11, 4]
    assert as_float.tolist() == [0, 11, 12]  # missing: the last code
    with pytest.raises(InputError, match="month"):
        tv.public_bins(col, np.array([13]))


def test_a_many_level_column_enters_the_products_as_runs_of_its_cells():
    """Known answer: with every cell filled, a 60-level and a 31-level column (plus their
    missing cells) give 60 + 31 main dummies and (11 - 1) x (11 - 1) products (each merged into
    PMSE_GROUPS = 11 runs); two columns of at most 11 cells keep their full product."""
    big = {"m": {"type": "categorical", "levels": [str(k) for k in range(60)]},
           "d": {"type": "categorical", "levels": [str(k) for k in range(31)]}}  # fmt: skip
    cols = tv.describe(big)
    codes = {
        "m": np.r_[np.arange(61), np.arange(61)],
        "d": np.r_[np.arange(61) % 32, np.arange(61)[::-1] % 32],
    }
    merged = tv.propensity_design(cols, codes)
    assert tv.PMSE_GROUPS == 11
    assert 91 < merged.shape[1] <= 91 + 10 * 10  # every main dummy; at most 100 products
    whole = tv.propensity_design(cols, codes, groups=100)
    assert whole.shape[1] > 91 + 10 * 10  # unmerged: products of filled cells, far more
    assert tv._rank(merged) <= merged.shape[1]
    small = tv.describe(SPEC)
    t = _table(2)
    codes = {c.name: tv.public_bins(c, t[c.name]) for c in small}
    np.testing.assert_array_equal(
        tv.propensity_design(small, codes).toarray(),
        tv.propensity_design(small, codes, groups=10**6).toarray(),
    )


def test_a_table_beyond_pmse_records_is_judged_on_a_subsample(monkeypatch):
    """Known answer: with PMSE_RECORDS = 500, tables of 2,000 and 1,500 records are judged on
    500 of each: N = 1,000, c = 1/2, and the expectation is (k - 1) / 4 / 1,000; a table within
    the cap is read whole (N = 4,000 below the cap)."""
    cols = tv.describe(SPEC)
    monkeypatch.setattr(tv, "PMSE_RECORDS", 500)
    out = tv.pmse(cols, _table(2), _table(3, n=1500))
    assert out["pmse_expected"] == pytest.approx((out["parameters"] - 1) * 0.25 / 1000, rel=1e-12)
    assert 0.4 <= out["pmse_ratio"] <= 2.0  # the null, about chi2_{k-1} / (k - 1) at smaller N
    monkeypatch.setattr(tv, "PMSE_RECORDS", 2000)
    whole = tv.pmse(cols, _table(2), _table(3))
    assert whole["pmse_expected"] == pytest.approx((whole["parameters"] - 1) * 0.25 / 4000)


def _design_by_parts(columns, codes, groups=tv.PMSE_GROUPS):
    """The propensity design as it was built before 2026-11-29: a sparse matrix per main
    effect and per product column, stacked (the reference the row-wise build must equal)."""
    from scipy import sparse

    def dummies(code, k):
        n = len(code)
        return sparse.csr_matrix((np.ones(n), (np.arange(n), code)), shape=(n, k))[:, 1:]

    mains = [dummies(codes[c.name], tv.cells(c)) for c in columns]
    merged = [
        dummies(codes[c.name] * groups // tv.cells(c), groups) if tv.cells(c) > groups else d
        for c, d in zip(columns, mains, strict=True)
    ]
    parts = list(mains)
    for a, b in itertools.combinations(merged, 2):
        parts += [a.multiply(b[:, j]) for j in range(b.shape[1])]
    X = sparse.hstack(parts, format="csc")
    return X[:, np.flatnonzero(X.getnnz(axis=0) > 0)].tocsr()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_row_wise_propensity_design_and_its_rank_equal_the_stacked_ones(seed, monkeypatch):
    """The design built from one column index per part (its memory: N x parts integers) is
    the stacked design entry for entry, column for column, on tables with empty cells, a
    many-level column merged into runs, and missing cells; its rank, summed in blocks,
    the rank of the whole Gram matrix."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    spec = {"a": {"type": "categorical", "levels": [str(k) for k in range(40)]},
            "b": {"type": "binary", "levels": ["0", "1"]},
            "c": {"type": "categorical", "levels": list("xyzw")},
            "d": {"type": "continuous", "bounds": [0, 1]}}  # fmt: skip
    cols = tv.describe(spec)
    n = 3000
    codes = {c.name: rng.integers(0, tv.cells(c) - (c.name == "c"), n) for c in cols}
    want = _design_by_parts(cols, codes)
    got = tv.propensity_design(cols, codes)
    assert got.shape == want.shape and got.has_canonical_format
    assert (got != want).nnz == 0
    one = sparse.csr_matrix(np.ones((n, 1)))
    full = sparse.hstack([one, want], format="csr")
    eig = np.linalg.eigvalsh((full.T @ full).toarray())
    rank = int(np.sum(eig > eig.max() * full.shape[1] * np.finfo(float).eps)) - 1
    monkeypatch.setattr(tv, "RANK_BLOCK", 700)  # several blocks
    assert tv._rank(got) == rank
    assert 0 < rank <= got.shape[1]


def _with_gaps(seed: int, n: int) -> pd.DataFrame:
    """:func:`_table` with about 5% of x, g and k missing (pairwise-complete correlations)."""
    t = _table(seed, n)
    rng = np.random.default_rng(seed + 100)
    for c in ("x", "g", "k"):
        t[c] = t[c].astype(object).mask(rng.random(n) < 0.05)
    return t


@pytest.mark.parametrize("records", [1, 97, 1000, 10**6])
def test_the_verdict_of_a_table_added_in_partitions_is_that_of_the_whole(records):
    """Invariant: counts, sums and the R factor add, and the subsample's positions do not
    depend on the partitions: the figures of tables added ``records`` at a time equal those
    of the whole (counts exactly; sums and least squares to 1e-9), the pMSE included."""
    cols, analysis = tv.describe(SPEC), "z ~ x + b + g"
    conf, syn = _with_gaps(4, 600), _with_gaps(5, 450)
    whole = tv.table_verdict(conf, syn, SPEC, analysis)
    a = tv.summed(cols, conf, "confidential", analysis, records=records)
    parts = tv.verdict_of(a, tv.summed(cols, syn, "synthetic", analysis, records=records))
    assert [e["figure"] for e in parts["figures"]] == [e["figure"] for e in whole["figures"]]
    for e, f in zip(whole["figures"], parts["figures"], strict=True):
        assert e["columns"] == f["columns"] and e["level"] == f["level"]
        assert f["value"] == pytest.approx(e["value"], rel=1e-9, abs=1e-12), e["figure"]
    assert parts["verdict"] == whole["verdict"] and parts["next_step"] == whole["next_step"]


def test_the_sums_agree_with_pandas_and_least_squares_on_the_whole_table():
    """Known answers: the pairwise-complete Pearson correlations equal pandas' ``corr``, the
    moments numpy's, and the analysis's least squares numpy's ``lstsq`` on the complete records
    (sums added 37 records at a time)."""
    from dpsynth.curator.column_verdict import ols_from_r

    cols, t = tv.describe(SPEC), _with_gaps(6, 500)
    s = tv.summed(cols, t, "confidential", "z ~ x + k", records=37)
    numeric = pd.DataFrame({c: pd.to_numeric(t[c]) for c in ["x", "z", "b", "k"]})
    np.testing.assert_allclose(s.correlations(), numeric.corr().to_numpy(), rtol=1e-10)
    x = numeric["x"].dropna().to_numpy()
    n, mean, sd = s.moments("x")
    assert (n, mean, sd) == (x.size, pytest.approx(x.mean()), pytest.approx(x.std(ddof=1)))
    keep = numeric[["z", "x", "k"]].dropna()
    X = np.column_stack([np.ones(len(keep)), keep["x"], keep["k"]])
    coef, se, _ = ols_from_r(s.ols_r, s.ols_n)
    np.testing.assert_allclose(coef, np.linalg.lstsq(X, keep["z"], rcond=None)[0], rtol=1e-9)
    resid = keep["z"] - X @ coef
    cov = resid @ resid / (len(keep) - 3) * np.linalg.inv(X.T @ X)
    np.testing.assert_allclose(se, np.sqrt(np.diag(cov)), rtol=1e-9)


def test_a_refusal_in_a_later_partition_names_the_records_place_in_the_table():
    """A level outside the public ones at record 1,234 is refused naming record 1,234 when
    the table is added 500 records at a time (its third partition)."""
    t = _table(7, 2000)
    t.loc[1233, "g"] = "zz"
    with pytest.raises(InputError, match=r"'g'.*record 1234\b"):
        tv.summed(tv.describe(SPEC), t, "confidential", records=500)


def test_the_max_ecdf_of_a_large_table_reads_its_subsample(monkeypatch):
    """Known answer: beyond PMSE_RECORDS (set to 300) the max-ECDF compares the two tables'
    subsamples (positions from the sizes alone), exactly; within it, the whole tables."""
    from dpsynth.curator.utility import ecdf_measures

    col = tv.describe(SPEC)[0]
    conf, syn = _table(8, 1000), _table(9, 800)
    whole = tv.column_figures(col, conf.x, syn.x)["max_ecdf"]
    assert whole == ecdf_measures(conf.x, syn.x)["max_ecdf"]
    monkeypatch.setattr(tv, "PMSE_RECORDS", 300)
    at_c, at_s = tv.subsample_positions(1000), tv.subsample_positions(800)
    assert at_c.size == at_s.size == 300 and np.all(np.diff(at_c) > 0)
    sub = tv.column_figures(col, conf.x, syn.x)["max_ecdf"]
    assert sub == ecdf_measures(conf.x.to_numpy()[at_c], syn.x.to_numpy()[at_s])["max_ecdf"]


def test_a_wide_tables_products_merge_cells_to_keep_the_design_within_its_bound():
    """Known answers: ten-level columns (11 cells with missing) keep PMSE_GROUPS = 11 up to the
    bound (12 of them: 120 + 66 x 100 <= 7,000); 20 of them merge into 6 groups
    (200 + 190 x 25 <= 7,000 < 200 + 190 x 36), 50 into 3, 100 into 2; the design of a
    30-column table stays within PMSE_PARAMETERS."""
    ten = {"type": "categorical", "levels": [str(k) for k in range(10)]}
    wide = {c: tv.describe({f"c{i}": ten for i in range(c)}) for c in (12, 20, 30, 50, 100)}
    assert tv.PMSE_PARAMETERS == 7_000 and tv.interaction_groups(wide[12]) == tv.PMSE_GROUPS
    assert [tv.interaction_groups(wide[c]) for c in (20, 50, 100)] == [6, 3, 2]
    assert tv.interaction_groups(wide[20], at_most=10**6) == tv.PMSE_GROUPS
    rng = np.random.default_rng(12)
    codes = {c.name: rng.integers(0, 11, 3000) for c in wide[30]}
    X = tv.propensity_design(wide[30], codes, groups=tv.interaction_groups(wide[30]))
    assert 0 < X.shape[1] <= tv.PMSE_PARAMETERS
    full = tv.propensity_design(wide[30], codes)
    assert full.shape[1] > 4 * tv.PMSE_PARAMETERS  # unmerged: far beyond it
