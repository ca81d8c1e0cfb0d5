"""The published table of a whole-table release, made and written a partition at a time
(:mod:`dpsynth.table.published`): the same records as the table made whole, the same file,
and a release that is never made whole unless its ``data`` is read."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from dpsynth import formats
from dpsynth.release.single import SET_COLUMN
from dpsynth.table.design import decoded
from dpsynth.table.pipeline import synthesize_table, table_verdict_of
from dpsynth.table.published import SyntheticTable
from dpsynth.table.spec import parse_spec

SPEC = {
    "public": [
        {"name": "age", "type": "continuous", "bounds": [16, 90]},
        {"name": "region", "type": "categorical", "levels": ["n", "s", "e"]},
    ],
    "confidential": [
        {"name": "visits", "type": "count", "bounds": [0, 12], "mechanism": "ph"},
        {
            "name": "owner",
            "type": "categorical",
            "levels": ["a", "b", "c"],
            "mechanism": "ph",
            "missing": "level",
        },
    ],
}


def _frame(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    owner = rng.choice(np.array(["a", "b", "c", None], dtype=object), n)
    return pd.DataFrame(
        {
            "age": rng.uniform(20, 80, n),
            "region": rng.choice(["n", "s", "e"], n),
            "owner": owner,
            "visits": rng.poisson(3, n).clip(0, 12),
        }
    )


def _whole(public: pd.DataFrame, spec, synthetic, m: int) -> pd.DataFrame:
    """The published table made whole set by set (how a release made it before)."""
    sets = []
    for k in range(m):
        out = public[[c.name for c in spec.public]].copy()
        for col in spec.order():
            out[col.name] = decoded(col, synthetic[col.name][k])
        if m > 1:
            out.insert(0, SET_COLUMN, k + 1)
        sets.append(out)
    return pd.concat(sets, ignore_index=True)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The same records read back from a file (missing as missing, whatever its type)."""

    def plain(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.astype(object).where(frame.notna(), None)

    pd.testing.assert_frame_equal(plain(got), plain(want), check_dtype=False)


@pytest.mark.parametrize("m", [1, 3])
def test_the_table_made_in_partitions_is_the_table_made_whole(m, tmp_path):
    """Its parts (7 records each, so partitions end inside and between sets) join to the
    table made whole, dtypes included (a level written back as missing, a count as Int64);
    a CSV written part by part is the same bytes, a Parquet file the same table."""
    spec, n = parse_spec(SPEC), 40
    rng = np.random.default_rng(m)
    public = _frame(n)[["age", "region"]]
    synthetic = {
        "owner": tuple(rng.integers(0, 4, n).astype(float) for _ in range(m)),
        "visits": tuple(np.where(rng.uniform(size=n) < 0.1, np.nan, rng.integers(0, 13, n))
                        for _ in range(m)),
    }  # fmt: skip
    table, want = SyntheticTable(public, spec, synthetic, m, n), _whole(public, spec, synthetic, m)
    assert len(table) == n * m
    pd.testing.assert_frame_equal(table.frame(), want)
    parts = list(table.parts(7))
    assert max(len(p) for p in parts) == 7 and len(parts) == m * 6
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), want)
    formats.write_parts(table.parts(7), tmp_path / "parts.csv", "csv")
    formats.write_table(want, tmp_path / "whole.csv", "csv")
    assert (tmp_path / "parts.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    formats.write_parts(table.parts(7), tmp_path / "parts.parquet", "parquet")
    back = pd.read_parquet(tmp_path / "parts.parquet")
    _same(back, want)
    assert back["visits"].isna().sum() == want["visits"].isna().sum() > 0


def test_a_parquet_column_without_values_in_its_first_part_is_text(tmp_path):
    """A level column with no value in the first part is typed as text, so that a later
    part's levels can be written (the first part alone would type it as null)."""
    parts = [pd.DataFrame({"x": [None, None]}, dtype=object), pd.DataFrame({"x": ["a", None]})]
    formats.write_parts(iter(parts), tmp_path / "t.parquet", "parquet")
    _same(pd.read_parquet(tmp_path / "t.parquet"), pd.DataFrame({"x": [None, None, "a", None]}))


def test_a_table_release_is_written_without_being_made_whole(tmp_path):
    """A table release (PH columns, m = 2) holds its sets, not its published table: writing
    it leaves it unmade; the file is its ``data``; its verdict is the one of the
    confidential table against the first set made whole."""
    frame, spec = _frame(300), parse_spec(SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(frame, spec, 4.0, m=2, seed=5)
    paths = [tmp_path / "out.csv", tmp_path / "r.json", tmp_path / "d.json"]
    rel.write(*paths)
    assert rel._frame is None  # written a partition at a time, never whole
    data = rel.data
    assert len(data) == 600 and list(data[SET_COLUMN].unique()) == [1, 2]
    back = pd.read_csv(paths[0], keep_default_na=False, na_values=[""])
    _same(back, data)
    got, want = rel.diagnostics["verdict"], table_verdict_of(frame, data.iloc[:300], spec)
    assert [f["value"] for f in got["figures"]] == [f["value"] for f in want["figures"]]
    assert got["verdict"] == want["verdict"]
    rel.write(tmp_path / "again.csv", tmp_path / "r2.json")  # from the frame, once it is made
    assert (tmp_path / "again.csv").read_bytes() == paths[0].read_bytes()


def test_a_column_release_without_its_data_frees_the_data():
    """A table keeps each column's release without its synthetic data
    (``pipeline._without_data``): the data's memory is freed, not kept alive by an empty
    slice of it (which pandas makes as a view of the whole arrays)."""
    import gc
    import tracemalloc

    from dpsynth.release.single import Release
    from dpsynth.table import pipeline

    tracemalloc.start()
    try:
        rel = Release(pd.DataFrame({"y": np.ones(10**6), "z": np.ones(10**6)}), {"a": 1}, {})
        held = tracemalloc.get_traced_memory()[0]
        kept = pipeline._without_data(rel)
        del rel
        gc.collect()
        freed = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert list(kept.data.columns) == ["y", "z"] and len(kept.data) == 0
    assert kept.report == {"a": 1}
    assert freed > 15e6  # the two columns' 16 MB
