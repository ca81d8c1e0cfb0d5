"""The perturbed histogram (dpsynth.mechanisms.histogram.perturbed_histogram): known answers, bins,
sensitivity per neighbour definition, refusals, and the OpenDP noise path."""

from __future__ import annotations

import numpy as np
import pytest

from dpsynth.errors import InputError
from dpsynth.mechanisms import histogram
from dpsynth.mechanisms.histogram import MAX_BINS, perturbed_histogram, ph_bins

SEED = 20240601


@pytest.fixture
def counts() -> np.ndarray:
    """300 Poisson(4) counts clipped to the public bounds [0, 10], seed 5."""
    return np.clip(np.random.default_rng(5).poisson(4.0, 300), 0, 10).astype(float)


def test_integer_ph_returns_integers_in_bounds_with_unit_bins(counts):
    sets = perturbed_histogram(counts, (0, 10), 1.0, np.random.default_rng(SEED), m=3, integer=True)
    assert sets.shape == (3, 300)
    assert np.array_equal(sets, np.round(sets))  # integer values, no within-bin jitter
    assert sets.min() >= 0 and sets.max() <= 10
    # unit bins: one per integer in [0, 10]; with eps = 1 and n = 300 the synthetic
    # counts follow the data's mass (mean 4.0): within 1 of it in every set
    assert ph_bins(300, (0, 10), integer=True) == 11
    assert np.all(np.abs(sets.mean(axis=1) - counts.mean()) < 1.0)


def test_integer_ph_known_answer_at_a_huge_budget():
    # every record is 3; eps = 1000 gives noise of scale 0.002 on counts (200, 0, ..., 0):
    # the empty bins' noisy counts are below 0.02 (> 10 scales out: probability < 1e-4 each),
    # a chance of at most 10 * 0.02 / 200 = 0.001 per synthetic record to leave bin 3.
    # Seeded: the answer is exactly 3 everywhere.
    y = np.full(200, 3.0)
    sets = perturbed_histogram(y, (0, 10), 1000.0, np.random.default_rng(SEED), integer=True)
    assert np.all(sets == 3.0)


def test_continuous_ph_known_answer_at_a_huge_budget():
    # all records in the bin [0.2, 0.3) of 10 equal bins on [0, 1] (ph_bins(100) = 10):
    # synthetic values are uniform inside that bin
    y = np.full(100, 0.25)
    sets = perturbed_histogram(y, (0.0, 1.0), 1000.0, np.random.default_rng(SEED))
    assert ph_bins(100) == 10
    assert sets.min() >= 0.2 and sets.max() <= 0.3
    assert len(np.unique(sets)) == 100  # drawn within the bin, not copies of the data


def test_ph_bins_are_data_independent_and_counts_aware():
    assert ph_bins(2000) == 45  # ceil(sqrt(2000)) = ceil(44.72)
    assert ph_bins(100) == 10
    assert ph_bins(100, (0, 10)) == 10  # continuous: sqrt(n) whatever the bounds
    assert ph_bins(100, (0, 10), integer=True) == 11  # counts: one bin per integer
    assert ph_bins(5, (-2, 2), integer=True) == 5


@pytest.mark.parametrize(
    ("neighbours", "n_synthetic", "sensitivity"),
    [("substitution", None, 2.0), ("add-remove", 250, 1.0)],
)
def test_count_sensitivity_per_neighbour_definition(
    monkeypatch, neighbours, n_synthetic, sensitivity
):
    # substitution moves one record between two bins (l1 change 2); add/remove changes one
    # count by 1. The noise scale is sensitivity / epsilon.
    seen = []
    real = histogram.laplace_mechanism

    def spy(value, sens, eps, rng=None):
        seen.append((sens, eps))
        return real(value, sens, eps, rng)

    monkeypatch.setattr(histogram, "laplace_mechanism", spy)
    y = np.random.default_rng(1).uniform(0, 1, 200)
    sets = perturbed_histogram(
        y,
        (0, 1),
        0.5,
        np.random.default_rng(SEED),
        m=2,
        neighbours=neighbours,
        n_synthetic=n_synthetic,
    )
    assert seen == [(sensitivity, 0.5)] * 2  # one noisy histogram per set, eps each
    assert sets.shape == (2, n_synthetic or 200)


def test_add_remove_needs_a_public_number_of_records():
    with pytest.raises(InputError) as exc:
        perturbed_histogram(
            [0.1, 0.2], (0, 1), 1.0, np.random.default_rng(0), neighbours="add-remove"
        )
    assert exc.value.param == "n_synthetic"


def test_all_noisy_counts_zero_falls_back_to_uniform_bins(monkeypatch):
    # every noisy count clamped to 0: each bin equally likely (not a division by zero)
    monkeypatch.setattr(histogram, "laplace_mechanism", lambda v, s, e, rng=None: -np.ones_like(v))
    y = np.full(400, 0.05)
    sets = perturbed_histogram(y, (0.0, 1.0), 1.0, np.random.default_rng(SEED), n_bins=4)
    per_bin = np.bincount(np.minimum((sets[0] * 4).astype(int), 3), minlength=4)
    # 400 uniform bin choices: each count is Binomial(400, 1/4), sd 8.7; 60..140 is > 4.6 sd
    assert np.all((per_bin > 60) & (per_bin < 140))


def test_more_bins_than_max_bins_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError) as exc:
        perturbed_histogram([0.5], (0, 1), 1.0, rng, n_bins=MAX_BINS + 1)
    assert exc.value.param == "n_bins" and f"{MAX_BINS:,}" in str(exc.value)
    # counts-aware bins: the bounds alone can ask for too many
    with pytest.raises(InputError) as exc:
        perturbed_histogram([1.0], (0, 2 * MAX_BINS), 1.0, rng, integer=True)
    assert exc.value.param == "n_bins"
    with pytest.raises(InputError) as exc:
        perturbed_histogram([0.5], (0, 1), 1.0, rng, n_bins=0)
    assert exc.value.param == "n_bins"


def test_out_of_bounds_record_named_by_position_not_value():
    y = [0.1, 0.2, 7.123456, 0.4]
    with pytest.raises(InputError) as exc:
        perturbed_histogram(y, (0.0, 1.0), 1.0, np.random.default_rng(0))
    message = str(exc.value)
    assert exc.value.param == "y"
    assert "record 3" in message
    assert "7.12" not in message and "7.1" not in message


def test_non_integer_count_named_by_position():
    with pytest.raises(InputError) as exc:
        perturbed_histogram([1.0, 2.0, 2.5], (0, 10), 1.0, np.random.default_rng(0), integer=True)
    assert exc.value.param == "y" and "record 3" in str(exc.value) and "2.5" not in str(exc.value)
    with pytest.raises(InputError) as exc:
        perturbed_histogram([1.0], (0, 10.5), 1.0, np.random.default_rng(0), integer=True)
    assert exc.value.param == "bounds"


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"bounds": None}, "bounds"),
        ({"bounds": (1.0, 0.0)}, "bounds"),
        ({"bounds": (0.0, float("inf"))}, "bounds"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"m": 0}, "m"),
        ({"y": []}, "y"),
        ({"y": [0.1, float("nan")]}, "y"),
        ({"neighbours": "swap"}, "neighbours"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, param):
    args = {"y": [0.1, 0.2], "bounds": (0.0, 1.0), "epsilon": 1.0}
    extra = {k: v for k, v in kwargs.items() if k not in args}
    args.update({k: v for k, v in kwargs.items() if k in args})
    with pytest.raises(InputError) as exc:
        perturbed_histogram(
            args["y"], args["bounds"], args["epsilon"], np.random.default_rng(0), **extra
        )
    assert exc.value.param == param


def test_opendp_path_gives_finite_values_within_bounds():
    # rng None: OpenDP noise and an OS-seeded generator (a real release)
    y = np.random.default_rng(2).uniform(-3.0, 5.0, 400)
    sets = perturbed_histogram(y, (-3.0, 5.0), 0.5, m=2)
    assert sets.shape == (2, 400)
    assert np.all(np.isfinite(sets)) and sets.min() >= -3.0 and sets.max() <= 5.0
    counts = np.random.default_rng(3).integers(0, 6, 100).astype(float)
    ints = perturbed_histogram(counts, (0, 5), 0.5, integer=True)
    assert np.array_equal(ints, np.round(ints)) and ints.min() >= 0 and ints.max() <= 5


def test_seeded_runs_agree_and_unseeded_runs_differ():
    y = np.random.default_rng(4).uniform(0, 1, 300)
    a = perturbed_histogram(y, (0, 1), 1.0, np.random.default_rng(9))
    b = perturbed_histogram(y, (0, 1), 1.0, np.random.default_rng(9))
    assert np.array_equal(a, b)
    c, d = perturbed_histogram(y, (0, 1), 1.0), perturbed_histogram(y, (0, 1), 1.0)
    assert not np.array_equal(c, d)  # continuous draws from the OS: equal with probability 0


def test_add_remove_bins_and_output_size_depend_only_on_public_numbers():
    """Under add/remove n is private: neither the number of bins nor the number of
    synthetic records may depend on it (both follow the public n_synthetic)."""
    from dpsynth.release.single import synthesize

    reports = []
    for n in (100, 2500):
        y = np.linspace(0.01, 0.99, n)
        rel = synthesize(
            y,
            mechanism="ph",
            epsilon=1.0,
            bounds=(0.0, 1.0),
            neighbours="add-remove",
            n_synthetic=400,
        )
        assert len(rel.data) == 400
        reports.append(rel.report["internal_bound"])
    assert reports[0]["n_bins"] == reports[1]["n_bins"] == 20
    assert reports[0]["count_sensitivity_l1"] == 1.0


def test_simplex_consistency_is_the_projection_keeping_the_noisy_total():
    """consistency "simplex": a known answer, then on 200 seeded vectors the projection's
    optimality conditions: non-negative, the noisy total kept, every positive count lowered
    by one common amount tau and every zeroed count at most tau."""
    v = np.array([5.0, -2.0, 3.0, 0.5, -1.0])  # total 5.5: lower by 1.25
    np.testing.assert_allclose(histogram.consistent_counts(v, "simplex"), [3.75, 0, 1.75, 0, 0])
    np.testing.assert_allclose(histogram.consistent_counts(v, "clamp"), [5, 0, 3, 0.5, 0])
    assert not histogram.consistent_counts(-np.ones(3), "simplex").any()  # total <= 0
    rng = np.random.default_rng(4)
    for _ in range(200):
        noisy = rng.laplace(rng.uniform(0, 20), rng.uniform(0.5, 30), rng.integers(1, 300))
        if noisy.sum() <= 0:
            continue
        out = histogram.consistent_counts(noisy, "simplex")
        assert (out >= 0).all() and np.isclose(out.sum(), noisy.sum())
        tau = (noisy - out)[out > 0]
        assert np.allclose(tau, tau[0]) and (noisy[out == 0] <= tau[0] + 1e-9).all()


def test_simplex_consistency_beats_clamping_on_a_sparse_histogram():
    """On 200 unit bins of which 20 hold the 2,000 records, at epsilon 0.2 (Laplace scale
    10), clamping gives every empty bin about half a scale (180 bins x 5: about 900
    spurious records of 2,000); the projection takes most of it back. Mean TVD of the
    synthetic sample to the data over 20 seeded releases: simplex at most 0.6 x clamp's
    (seeded trial: 0.16 against 0.32)."""
    x = np.repeat(np.arange(0, 200, 10), 100).astype(float)
    truth = np.bincount(x.astype(int), minlength=200) / x.size
    tvd = {}
    for how in ("clamp", "simplex"):
        rng = np.random.default_rng(9)
        sets = perturbed_histogram(
            x, (0, 199), 0.2, rng, integer=True, m=20, consistency=how
        )  # fmt: skip
        tvd[how] = np.mean(
            [0.5 * np.abs(np.bincount(s.astype(int), minlength=200) / s.size - truth).sum()
             for s in sets]
        )  # fmt: skip
    assert tvd["simplex"] < 0.6 * tvd["clamp"], tvd
    with pytest.raises(InputError, match="consistency"):
        perturbed_histogram(x, (0, 199), 1.0, np.random.default_rng(1), consistency="round")


def test_systematic_draw_gives_each_cell_its_share_to_within_one_record():
    """``drawn_cells`` "systematic" (Madow): in every row, each cell's count is the floor or
    the ceiling of n_r x its share (a zero share gets none), the records of a row come in a
    random order, and the expected count is n_r x share (400 seeds, a row of 7 records:
    standard error at most 0.025 per cell, 0.1 asked). "iid" is the cumulative-share
    comparison of one uniform per record, the stream the table drew before."""
    shares = np.random.default_rng(1).dirichlet(np.ones(5), size=6)
    shares[2, 1] = 0.0
    shares[2] /= shares[2].sum()
    rows = np.random.default_rng(2).integers(0, 6, 3000)
    codes = histogram.drawn_cells(shares, rows, np.random.default_rng(3), "systematic")
    for r in range(6):
        got = np.bincount(codes[rows == r], minlength=5)
        assert np.all(np.abs(got - (rows == r).sum() * shares[r]) < 1 + 1e-9), (r, got)
    assert np.bincount(codes[rows == 2], minlength=5)[1] == 0
    assert not np.all(np.diff(codes[rows == 0]) >= 0)  # not handed out in cell order
    p = np.array([[0.13, 0.5, 0.37]])
    seven = np.zeros(7, np.int64)
    mean = np.mean(
        [np.bincount(histogram.drawn_cells(p, seven, np.random.default_rng(s), "systematic"),
                     minlength=3) for s in range(400)], axis=0,
    )  # fmt: skip
    np.testing.assert_allclose(mean, 7 * p[0], atol=0.1)
    u = np.random.default_rng(4).random(rows.size)
    iid = histogram.drawn_cells(shares, rows, np.random.default_rng(4), "iid")
    cdf = np.cumsum(shares, axis=1)
    assert np.array_equal(iid, np.minimum((u[:, None] >= cdf[rows]).sum(axis=1), 4))


def test_systematic_ph_reproduces_the_counts_at_a_huge_budget():
    """At epsilon 1e6 (Laplace scale 2e-6 on counts) a systematic draw's histogram is the
    data's to within one record per bin; an independent draw's is not (multinomial noise of
    about sqrt(n p) records in the larger bins). An unknown draw is refused by name."""
    y = np.random.default_rng(3).normal(size=5000)
    edges = np.linspace(-5, 5, 21)
    real = np.histogram(y, edges)[0]
    diff = {}
    for draw in ("iid", "systematic"):
        s = perturbed_histogram(y, (-5, 5), 1e6, np.random.default_rng(4), n_bins=20, draw=draw)
        diff[draw] = np.abs(np.histogram(s[0], edges)[0] - real).max()
    assert diff["systematic"] <= 1 and diff["iid"] > 5, diff
    with pytest.raises(InputError, match="draw"):
        perturbed_histogram(y, (-5, 5), 1.0, np.random.default_rng(1), draw="sorted")


# ----------------------------------------------------------------------------- CellCounts


@pytest.mark.parametrize("consistency,draw", [("clamp", "iid"), ("simplex", "systematic")])
def test_counts_release_the_same_sets_as_the_records(counts, consistency, draw):
    """Integer records given as their counts: the same m sets, draw for draw (seeded)."""
    kw = dict(m=3, integer=True, consistency=consistency, draw=draw, n_synthetic=1000)
    given = histogram.CellCounts.of(counts, (0, 10))
    a = perturbed_histogram(counts, (0, 10), 1.0, np.random.default_rng(SEED), **kw)
    b = perturbed_histogram(given, (0, 10), 1.0, np.random.default_rng(SEED), **kw)
    np.testing.assert_array_equal(a, b)
    assert given.n == 300 and given.counts.sum() == 300 and given.counts.size == 11


def test_counts_made_a_partition_at_a_time_add_up_to_the_whole(counts):
    whole = histogram.CellCounts.of(counts, (0, 10))
    parts = [histogram.CellCounts.of(p, (0, 10)) for p in np.array_split(counts, 7)]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    np.testing.assert_array_equal(total.counts, whole.counts)
    np.testing.assert_array_equal(whole.records(), np.sort(counts))
    codes = histogram.CellCounts.of_codes(counts.astype(int), 11)
    np.testing.assert_array_equal(codes.counts, whole.counts)


def test_counts_refusals_name_the_record_and_the_parameter(counts):
    bad = counts.copy()
    bad[41] = 11
    with pytest.raises(InputError, match=r"record 1042\b") as exc:  # its place in the table
        histogram.CellCounts.of(bad, (0, 10), first=1001)
    assert exc.value.param == "y" and "11" not in exc.value.message.replace("1042", "")
    with pytest.raises(InputError) as exc:
        histogram.CellCounts.of(counts, (0, 10)) + histogram.CellCounts.of(counts, (0, 12))
    assert exc.value.param == "counts"
    with pytest.raises(InputError) as exc:
        histogram.CellCounts.of_codes(np.array([0, 3]), 3)
    assert exc.value.param == "codes"
    given = histogram.CellCounts.of(counts, (0, 10))
    for kw in ({"integer": False}, {"integer": True, "bounds": (0, 12)}):
        with pytest.raises(InputError) as exc:
            perturbed_histogram(given, kw.pop("bounds", (0, 10)), 1.0, **kw)
        assert exc.value.param == "y"
    empty = histogram.CellCounts.of(np.array([]), (0, 10))
    with pytest.raises(InputError, match="empty"):
        perturbed_histogram(empty, (0, 10), 1.0, integer=True)
