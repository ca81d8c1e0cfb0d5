"""``dpsynth.table.steps.sorted_quantiles``: numpy's default quantiles, bit for bit, by
indexing a sorted array (the rank mapping of a calibrated column reads n of them)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpsynth.table.steps import rank_mapped, sorted_quantiles

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 300), elements=finite),
    arrays(np.float64, st.integers(1, 300), elements=st.floats(0.0, 1.0)),
)
def test_equals_numpy_quantile_bit_for_bit(target, q):
    np.testing.assert_array_equal(sorted_quantiles(np.sort(target), q), np.quantile(target, q))


def test_ties_ends_and_nan_as_numpy_gives_them():
    t = np.array([3.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    q = np.array([0.0, 0.1, 0.5, 0.51, 0.99, 1.0])
    np.testing.assert_array_equal(sorted_quantiles(np.sort(t), q), np.quantile(t, q))
    with_nan = np.sort(np.array([1.0, np.nan, 2.0]))
    assert np.isnan(sorted_quantiles(with_nan, np.array([0.5]))).all()


def test_rank_mapping_keeps_the_order_and_takes_the_target_marginal():
    """Known answer: values 10, 30, 20 (NaN kept) mapped onto target 0..99 take its quantiles
    at 1/6, 5/6 and 3/6 in their own order."""
    values = np.array([10.0, np.nan, 30.0, 20.0])
    target = np.arange(100.0)
    out = rank_mapped(values, target, np.random.default_rng(0))
    assert np.isnan(out[1])
    np.testing.assert_array_equal(out[[0, 3, 2]], np.quantile(target, [1 / 6, 3 / 6, 5 / 6]))
