"""A table read and written in partitions (dpsynth.formats.read_partitions, write_table;
dpsynth.table.source): the same values as a whole read, only the spec's columns, level
columns stored compactly, a value outside the spec's levels refused with its record number
across partitions, and a release from a path identical to one from the frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dpsynth import formats
from dpsynth.cli.commands import main
from dpsynth.errors import InputError
from dpsynth.table import source
from dpsynth.table.design import column_codes, public_encoder, public_matrix
from dpsynth.table.pipeline import synthesize_table
from dpsynth.table.spec import load_spec

pytestmark = pytest.mark.filterwarnings("ignore:a release made with a known seed")

SPEC = {
    "public": [{"name": "region", "type": "categorical", "levels": ["n", "s", "w"]}],
    "confidential": [
        {"name": "sex", "type": "binary", "mechanism": "ph", "levels": [0, 1]},
        {"name": "k", "type": "categorical", "mechanism": "ph", "levels": list(range(8))},
        {"name": "x", "type": "continuous", "mechanism": "ph", "bounds": [0, 1], "given": ["sex"]},
    ],
}


def _frame(n: int = 95) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "note": [f"record {i}" for i in range(n)],  # a column not in the spec
            "region": rng.choice(["n", "s", "w"], n),
            "sex": rng.integers(0, 2, n),
            "k": rng.integers(0, 8, n),
            "x": rng.uniform(0, 1, n).round(4),
        }
    )


def _write(frame: pd.DataFrame, path, kind: str):
    if kind == "dir":
        path.mkdir()
        for j, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
            frame.iloc[part].to_parquet(path / f"part-{j}.parquet", index=False)
    elif kind == "parquet":
        frame.to_parquet(path, index=False)
    elif kind == "stata":
        frame.to_stata(path, write_index=False)
    else:
        frame.to_csv(path, index=False)
    return path


KINDS = [("csv", "t.csv"), ("parquet", "t.parquet"), ("dir", "parts"), ("stata", "t.dta")]


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_partitions_are_the_whole_table_in_pieces_of_the_named_columns(tmp_path, kind, name):
    frame = _frame()
    path = _write(frame, tmp_path / name, kind)
    parts = list(formats.read_partitions(path, "data", ["x", "region"], records=10))
    assert all(len(p) <= 10 for p in parts) and len(parts) >= 10
    assert all(sorted(p.columns) == ["region", "x"] for p in parts)  # "note" is never read
    got = pd.concat(parts, ignore_index=True)
    whole = formats.read_table(path, "data")
    pd.testing.assert_frame_equal(got[["x", "region"]], whole[["x", "region"]])


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_the_spec_columns_read_compactly_encode_as_the_frame_does(tmp_path, kind, name):
    frame = _frame()
    spec = load_spec(SPEC)
    compact = source.read_spec_columns(_write(frame, tmp_path / name, kind), spec, "data")
    assert list(compact.columns) == ["region", "sex", "k", "x"]
    assert isinstance(compact["region"].dtype, pd.CategoricalDtype)
    assert list(compact["region"].cat.categories) == ["n", "s", "w"]  # the spec's order
    for col in spec.confidential:  # the codes the release fits to: identical
        np.testing.assert_array_equal(column_codes(compact, col)[0], column_codes(frame, col)[0])
    enc = [public_encoder(frame, c) for c in spec.public]
    enc_c = [public_encoder(compact, c) for c in spec.public]
    np.testing.assert_array_equal(public_matrix(compact, enc_c), public_matrix(frame, enc))


def test_a_level_column_is_held_at_a_small_fraction_of_its_text(tmp_path):
    frame = _frame(20_000)
    path = _write(frame, tmp_path / "t.csv", "csv")
    compact = source.read_spec_columns(path, load_spec(SPEC), "data")
    text = formats.read_table(path, "data")["region"].memory_usage(deep=True)
    assert compact["region"].memory_usage(deep=True) < text / 4  # a byte against ~9


def test_a_level_outside_the_spec_is_refused_with_its_record_across_partitions(tmp_path):
    frame = _frame()
    frame.loc[[41, 77], "region"] = "e"  # the fifth and eighth partitions of ten records
    path = _write(frame, tmp_path / "t.csv", "csv")
    spec = load_spec(SPEC)
    parts = [source.compact(p, spec) for p in formats.read_partitions(path, "data", records=10)]
    compact = source.concat_compact(parts)
    assert list(compact["region"].cat.categories) == ["n", "s", "w", "e"]
    enc = public_encoder(compact, spec.public[0])
    with pytest.raises(InputError) as got:
        public_matrix(compact, [enc])
    with pytest.raises(InputError) as want:
        public_matrix(frame, [public_encoder(frame, spec.public[0])])
    assert str(got.value) == str(want.value)
    assert "2 record(s), the first at record 42" in str(got.value)


def test_a_path_that_is_not_a_table_is_refused_before_any_charge(tmp_path):
    ledger = tmp_path / "budget.jsonl"
    with pytest.raises(InputError, match="^data: no such file"):
        synthesize_table(tmp_path / "absent.csv", SPEC, 1.0, budget_file=ledger, budget_total=3)
    with pytest.raises(InputError, match=r"^data: no column\(s\) 'sex' named by the spec"):
        path = _write(_frame().drop(columns="sex"), tmp_path / "t.parquet", "parquet")
        synthesize_table(path, SPEC, 1.0, budget_file=ledger, budget_total=3)
    assert not ledger.exists()  # nothing was charged


def test_an_empty_table_is_refused_naming_the_parameter(tmp_path):
    path = tmp_path / "t.csv"
    _frame().iloc[:0].to_csv(path, index=False)
    with pytest.raises(InputError, match="^data: the data are empty"):
        source.read_spec_columns(path, load_spec(SPEC), "data")


ODD_LINES = {
    "a line of blanks": "   \n",
    "a line of a tab": "\t\n",
    "an empty line": "\n",
    "a line of commas": ",,,,\n",
}
"""Lines a confidential CSV may hold between records: Python's csv module counted the blank
ones as records and pandas skips them, so a count by the one and a read by the other
disagreed on one record's line (a refusal after the charge that one record decided)."""


@pytest.mark.parametrize("line", list(ODD_LINES), ids=list(ODD_LINES))
def test_the_record_count_is_the_reader_s_whatever_lines_a_csv_holds(tmp_path, line):
    path = tmp_path / "t.csv"
    text = _frame(30).to_csv(index=False).splitlines(keepends=True)
    path.write_text("\ufeff" + "".join(text[:12] + [ODD_LINES[line]] + text[12:]) + "  ")
    spec = load_spec(SPEC)
    n = formats.record_count(path, "data", spec.columns)
    assert n == len(source.read_spec_columns(path, spec, "data"))
    assert formats.record_count(path, "data") == n  # the first column alone: the same count
    if line != "a line of commas":  # a record of missing values is refused as one
        assert len(synthesize_table(path, SPEC, 3.0, seed=3).data) == n


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_table_written_in_partitions_reads_back_whole(tmp_path, fmt):
    frame = _frame(95).drop(columns="note")
    frame["k"] = frame["k"].astype("Int64")
    frame.loc[3, "k"] = pd.NA
    path = tmp_path / f"out.{fmt}"
    formats.write_table(frame, path, fmt, records=10)
    if fmt == "parquet":
        assert pq.ParquetFile(path).num_row_groups == 10  # a row group per partition
        back = pd.read_parquet(path)
        pd.testing.assert_frame_equal(back, frame)
    else:
        assert path.read_text() == frame.to_csv(index=False)


@pytest.mark.parametrize(("kind", "name"), [("csv", "t.csv"), ("dir", "parts")])
def test_a_release_from_a_path_is_the_release_from_its_frame(tmp_path, kind, name):
    frame = _frame()
    path = _write(frame, tmp_path / name, kind)
    from_path = synthesize_table(path, SPEC, 3.0, m=2, seed=11)
    from_frame = synthesize_table(frame, SPEC, 3.0, m=2, seed=11)
    assert from_path.data.astype(str).equals(from_frame.data.astype(str))
    assert from_path.report == from_frame.report
    assert from_path.report["input_columns_not_released"] == ["note"]
    assert from_path.diagnostics["verdict"] == from_frame.diagnostics["verdict"]


def test_the_command_line_reads_the_table_in_partitions_and_names_the_unreleased(tmp_path, capsys):
    import json

    frame = _frame()
    path = _write(frame, tmp_path / "t.csv", "csv")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[[public]]\nname = "region"\ntype = "categorical"\nlevels = ["n", "s", "w"]\n\n'
        '[[confidential]]\nname = "k"\ntype = "count"\nmechanism = "ph"\nbounds = [0, 7]\n'
    )
    out, rep = tmp_path / "syn.csv", tmp_path / "r.json"
    argv = ["synthesize-table", str(path), "--spec", str(spec), "--epsilon", "1"]
    argv += ["--out", str(out), "--report", str(rep), "--skip-preflight", "--seed", "3"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "not in the spec, so not released: note, sex, x" in err
    syn = pd.read_csv(out)
    assert list(syn.columns) == ["region", "k"] and len(syn) == len(frame)
    assert list(syn["region"]) == list(frame["region"])  # public columns copied
    assert json.loads(rep.read_text())["input_columns_not_released"] == ["note", "sex", "x"]


def test_the_public_features_are_made_at_the_rows_read_and_held_as_codes():
    """Known answer: the public features at any rows equal the whole matrix's rows (a level
    column one-hot, a bounded and an unbounded numeric column scaled, each with missing values
    and its indicator); a level column is held as one 2-byte code a record, not k - 1 floats."""
    from dpsynth.table.design import public_features
    from dpsynth.table.spec import PublicColumn

    rng = np.random.default_rng(3)
    n = 500
    frame = pd.DataFrame(
        {
            "g": rng.choice(["a", "b", "c", "d", None], n),
            "u": np.where(rng.random(n) < 0.1, np.nan, rng.uniform(2, 8, n)),
            "v": rng.normal(5, 2, n),
        }
    )
    cols = [PublicColumn("g", "categorical", levels=("a", "b", "c", "d")),
            PublicColumn("u", "continuous", bounds=(0.0, 10.0)), PublicColumn("v", "continuous")]  # fmt: skip
    enc = [public_encoder(frame, c) for c in cols]
    whole, lazy = public_matrix(frame, enc), public_features(frame, enc)
    assert whole.shape == lazy.shape == (n, 3 + 1 + 1 + 1 + 1)  # g: 3 dummies + indicator
    rows = np.sort(rng.choice(n, 60, replace=False))
    np.testing.assert_array_equal(lazy[rows], whole[rows])
    np.testing.assert_array_equal(lazy[:0], whole[:0])
    np.testing.assert_array_equal(lazy[frame.v.to_numpy() > 5], whole[frame.v.to_numpy() > 5])
    assert whole[:, 3].sum() == frame.g.isna().sum()  # the indicator
    assert lazy.columns[0].values.nbytes == 2 * n < whole[:, :4].nbytes / 10


@pytest.mark.parametrize("records", [1, 7, 64, 1000])
def test_a_files_partitions_are_rechunked_to_the_release_s_size(records):
    """Whatever sizes a file's partitions have (here 0 to 40 records, seeded), the release
    reads them as partitions of exactly ``records`` records but the last, in order, each
    level column a categorical on the spec's levels: what it computes does not depend on
    how the file was written."""
    spec = load_spec(SPEC)
    frame = _frame(300)
    rng = np.random.default_rng(records)
    cuts = np.sort(rng.integers(0, 301, 12))
    ends = [0, *cuts.tolist(), 300]
    parts = [source.compact(frame.iloc[a:b], spec) for a, b in zip(ends[:-1], ends[1:])]
    got = list(source.rechunked(parts, records))
    assert [len(p) for p in got[:-1]] == [records] * (len(got) - 1)
    assert 0 < len(got[-1]) <= records and sum(len(p) for p in got) == 300
    whole = source.concat_compact([p.reset_index(drop=True) for p in got])
    want = source.concat_compact([p.copy() for p in parts if len(p)])
    pd.testing.assert_frame_equal(whole.astype(str), want.astype(str))
