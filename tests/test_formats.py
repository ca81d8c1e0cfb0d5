"""Tables as agencies hold them: CSV, Parquet (a file or a directory of partitions), Stata
and SAS in; CSV or Parquet out, by extension (dpsynth.formats), for every command."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpsynth import formats
from dpsynth.cli.commands import main
from dpsynth.errors import InputError
from dpsynth.privacy import budget


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame(
        {
            "income": rng.uniform(0, 1, n).round(4),
            "region": pd.Categorical(rng.choice(["n", "s"], n)),
            "k": rng.integers(0, 8, n),
        }
    )


def _write(frame: pd.DataFrame, path, kind: str):
    if kind == "parquet":
        frame.to_parquet(path, index=False)
    elif kind == "dir":
        path.mkdir()
        half = len(frame) // 2
        frame.iloc[:half].to_parquet(path / "part-0.parquet", index=False)
        frame.iloc[half:].to_parquet(path / "part-1.parquet", index=False)
    elif kind == "stata":
        frame.to_stata(path, write_index=False)
    else:
        frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("kind", "name"),
    [("csv", "t.csv"), ("parquet", "t.parquet"), ("dir", "parts"), ("stata", "t.dta")],
)
def test_each_format_reads_its_header_and_values(tmp_path, kind, name):
    frame = _frame()
    path = _write(frame, tmp_path / name, kind)
    if kind != "csv":
        assert formats.header(path, "data") == ["income", "region", "k"]
    got = formats.read_table(path, "data")
    assert list(got.columns) == ["income", "region", "k"]
    np.testing.assert_allclose(got["income"].to_numpy(float), frame["income"].to_numpy(float))
    np.testing.assert_array_equal(got["k"].to_numpy(int), frame["k"].to_numpy(int))
    # a category (a Stata value label, a Parquet dictionary) comes in as plain text
    assert not isinstance(got["region"].dtype, pd.CategoricalDtype)
    assert list(got["region"].astype(str)) == list(frame["region"].astype(str))


def test_a_blank_text_value_in_stata_or_sas_is_missing_as_an_empty_csv_field(tmp_path):
    # Stata has no missing text value but "" (and SAS an all-blank one): read as missing
    frame = _frame(6).assign(region=["n", "", "s", "", "n", "s"])
    path = _write(frame, tmp_path / "t.dta", "stata")
    whole = formats.read_table(path, "data")["region"]
    parts = pd.concat(list(formats.read_partitions(path, "data", ["region"], records=4)))
    for got in (whole, parts["region"]):
        assert got.isna().tolist() == [False, True, False, True, False, False]
        assert got.dropna().tolist() == ["n", "s", "n", "s"]
    sas = formats._plain(pd.DataFrame({"r": ["n", "   ", "s", None]}), "sas")["r"]
    assert sas.isna().tolist() == [False, True, False, True]
    kept = formats._plain(pd.DataFrame({"r": ["n", "", "s"]}), "csv")["r"]  # a CSV's "" read
    assert kept.tolist() == ["n", "", "s"]  # as given: only Stata and SAS mean missing by it


def _table_argv(tmp_path, inp, confidential: str, out) -> list[str]:
    """A ``synthesize-table`` command on ``inp`` with a public count column ``k`` and the one
    confidential column whose spec entry is ``confidential``, no preflight."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[[public]]\nname = "k"\ntype = "count"\nbounds = [0, 7]\n\n[[confidential]]\n'
        + confidential
    )
    argv = ["synthesize-table", str(inp), "--spec", str(spec), "--epsilon", "1", "--out", str(out)]
    return [*argv, "--report", str(tmp_path / "r.json"), "--skip-preflight", "--quiet"]


def test_a_table_release_reads_a_stata_file_whose_level_column_has_missing_text(tmp_path, capsys):
    frame = _frame().assign(region=lambda f: f["region"].astype(str))
    frame.loc[::5, "region"] = ""  # Stata's missing text
    inp = _write(frame, tmp_path / "in.dta", "stata")
    confidential = 'name = "region"\ntype = "binary"\nmechanism = "ph"\nlevels = ["n", "s"]\n'
    out = tmp_path / "syn.csv"
    argv = _table_argv(tmp_path, inp, confidential + 'missing = "level"\n', out)
    assert main(argv) == 0, capsys.readouterr().err
    syn = pd.read_csv(out)
    assert len(syn) == 60 and set(syn["region"].dropna()) <= {"n", "s"}


def test_unreadable_files_are_refused_naming_the_parameter(tmp_path):
    sas = tmp_path / "t.sas7bdat"
    sas.write_bytes(b"not a SAS file at all" * 10)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    for path in (sas, tmp_path / "bad.parquet", empty_dir):
        if path.suffix == ".parquet":
            path.write_text("a,b\n1,2\n")
        with pytest.raises(InputError) as exc:
            formats.read_table(path, "DATA.csv")
        assert exc.value.param == "DATA.csv"


def test_a_directory_hash_covers_every_partition_and_a_file_hash_is_the_ledgers(tmp_path):
    frame = _frame()
    path = _write(frame, tmp_path / "parts", "dir")
    before = formats.sha256(path)
    (path / "part-1.parquet").write_bytes((path / "part-1.parquet").read_bytes() + b"\0")
    assert formats.sha256(path) != before
    csv = _write(frame, tmp_path / "t.csv", "csv")
    assert formats.sha256(csv) == budget.file_sha256(csv)


def _ph(tmp_path, inp, out, capsys):
    args = ["synthesize", str(inp), "--column", "income", "--mechanism", "ph", "--bounds", "0"]
    args += ["1", "--epsilon", "1", "--out", str(out), "--report", str(tmp_path / "r.json")]
    code = main([*args, "--quiet"])
    return code, capsys.readouterr()


@pytest.mark.parametrize(
    ("kind", "name"), [("parquet", "in.parquet"), ("dir", "in_parts"), ("stata", "in.dta")]
)
def test_synthesize_reads_each_format_and_writes_parquet_by_extension(tmp_path, capsys, kind, name):
    inp = _write(_frame(), tmp_path / name, kind)
    out = tmp_path / "syn.parquet"
    code, streams = _ph(tmp_path, inp, out, capsys)
    assert code == 0, streams.err
    syn = pd.read_parquet(out)
    assert list(syn.columns) == ["income"] and len(syn) == 60
    assert syn["income"].between(0, 1).all()
    assert json.loads((tmp_path / "r.json").read_text())["mechanism"] == "ph"


def test_a_table_release_from_a_parquet_directory_to_parquet(tmp_path, capsys):
    inp = _write(_frame(), tmp_path / "parts", "dir")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[[public]]\nname = "k"\ntype = "count"\nbounds = [0, 7]\n\n'
        '[[confidential]]\nname = "region"\ntype = "binary"\nmechanism = "ph"\n'
        'levels = ["n", "s"]\n'
    )
    out, ledger = tmp_path / "syn.parquet", tmp_path / "budget.jsonl"
    argv = ["synthesize-table", str(inp), "--spec", str(spec), "--epsilon", "1", "--out", str(out)]
    argv += ["--report", str(tmp_path / "r.json"), "--budget-file", str(ledger)]
    argv += ["--budget-total", "3", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    syn = pd.read_parquet(out)
    assert set(syn["region"]) <= {"n", "s"} and len(syn) == 60
    assert formats.sha256(inp) in ledger.read_text()  # the directory's identity is charged


def test_init_spec_and_combine_read_parquet(tmp_path, capsys):
    inp = _write(_frame(), tmp_path / "pub.parquet", "parquet")
    assert main(["init-spec", str(inp)]) == 0
    assert 'name = "income"' in capsys.readouterr().out
    sets = pd.DataFrame({"synthetic_set": [1] * 30 + [2] * 30, "v": np.linspace(0, 1, 60)})
    syn = tmp_path / "syn.parquet"
    sets.to_parquet(syn, index=False)
    assert main(["combine", str(syn), "--column", "v", "--estimand", "mean"]) == 0
    assert capsys.readouterr().out


def _dated(n: int = 60) -> pd.DataFrame:
    born = pd.Timestamp("1950-01-01") + pd.to_timedelta(np.arange(n) * 97, unit="D")
    return _frame(n).assign(born=born)


def test_dates_and_times_are_told_apart_from_numbers_and_text():
    dated = _dated()
    assert formats.holds_times(dated["born"])
    for unit in ("s", "ms", "us"):  # SAS, Stata and Parquet each give dates their own unit
        assert formats.holds_times(dated["born"].astype(f"datetime64[{unit}]"))
    assert formats.holds_times(dated["born"] - dated["born"].min())  # durations
    assert formats.holds_times(pd.Series(dated["born"].dt.date, dtype=object))  # Parquet date32
    assert formats.holds_times(dated["born"].dt.to_period("M"))
    for plain in ("income", "region", "k"):
        assert not formats.holds_times(dated[plain])
    assert not formats.holds_times(pd.Series(["2020-01-01", "x"], dtype=object))  # text stays text


@pytest.mark.parametrize(("kind", "name"), [("parquet", "in.parquet"), ("stata", "in.dta")])
def test_a_date_column_read_as_a_number_is_refused_naming_it_and_nothing_is_written(
    tmp_path, capsys, kind, name
):
    # Before: a date became its count of seconds (SAS), milliseconds (Stata) or
    # microseconds (Parquet) since 1970, so one spec's bounds meant other dates per format.
    inp = _write(_dated(), tmp_path / name, kind)
    before = formats.sha256(inp)
    out = tmp_path / "syn.csv"
    confidential = 'name = "born"\ntype = "continuous"\nmechanism = "ph"\nbounds = [0, 2e15]\n'
    assert main(_table_argv(tmp_path, inp, confidential, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "column 'born' holds dates or times" in err[0]
    assert not out.exists() and not (tmp_path / "r.json").exists()
    assert formats.sha256(inp) == before
    args = ["synthesize", str(inp), "--column", "born", "--mechanism", "ph", "--bounds", "0"]
    args += ["2e15", "--epsilon", "1", "--out", str(out), "--report", str(tmp_path / "r.json")]
    assert main([*args, "--quiet"]) == 2
    assert "--column: column 'born'" in capsys.readouterr().err and not out.exists()


def test_init_spec_leaves_a_date_column_out_saying_why(tmp_path, capsys):
    inp = _write(_dated(), tmp_path / "pub.dta", "stata")
    assert main(["init-spec", str(inp)]) == 0
    text = capsys.readouterr().out
    assert "# 'born': left out (it holds dates or times" in text
    assert 'name = "born"' not in text and 'name = "income"' in text
