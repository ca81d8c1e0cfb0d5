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


CHAINED = {
    "public": SPEC["public"],
    "confidential": [
        SPEC["confidential"][0],
        {**SPEC["confidential"][1], "given": ["visits", "region"], "calibrate_share": 0.2},
    ],
}


def _partitioned(monkeypatch, pilot: int, records: int) -> None:
    """Tables larger than ``pilot`` records drawn ``records`` at a time (small, for tests)."""
    from dpsynth.models import synthesis

    monkeypatch.setattr(synthesis, "DRAW_ROWS", pilot)
    monkeypatch.setattr(formats, "PARTITION_RECORDS", records)


def _two_way(data: pd.DataFrame, a: str, b: str) -> pd.Series:
    return data.groupby([a, b], dropna=False).size() / len(data)


def test_a_large_table_is_drawn_a_partition_at_a_time(monkeypatch, tmp_path, capsys):
    """A table larger than its pilot holds no synthetic set: each partition is drawn when it
    is published, the same records each time (the verdict's pass, the file, ``data``); a PH
    column without parents publishes its PH sample's values (dealt to the partitions), one
    with parents keeps the pilot's raked shares (the two-way table of a whole draw, to sampling error)."""
    _partitioned(monkeypatch, pilot=800, records=700)
    frame, spec = _frame(3000), parse_spec(CHAINED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = synthesize_table(
            frame, spec, 40.0, m=2, seed=5, allow_large_epsilon=True, progress=True
        )
    table = rel.table
    assert table.draw is not None and dict(table.synthetic) == {}
    a, b = table.draw.columns(1, 2), table.draw.columns(1, 2)
    assert all(np.array_equal(a[c], b[c], equal_nan=True) for c in a)
    assert not np.array_equal(a["owner"], table.draw.columns(1, 3)["owner"][: a["owner"].size])
    assert "800 public random" in rel.report["drawn"]
    assert "each partition of 700 records" in rel.report["drawn"]
    paths = [tmp_path / "out.csv", tmp_path / "r.json"]
    capsys.readouterr()
    rel.write(*paths)
    said = capsys.readouterr().err.splitlines()
    assert said[-1] == "[dpsynth] set 2/2: 5 of 5 partitions drawn" and len(said) == 10
    assert rel._frame is None
    data = rel.data
    assert len(data) == 6000
    _same(pd.read_csv(paths[0], keep_default_na=False, na_values=[""]), data)
    got = rel.diagnostics["verdict"]
    want = table_verdict_of(frame, data[data[SET_COLUMN] == 1].drop(columns=SET_COLUMN), spec)
    values = [[f["value"] for f in v["figures"]] for v in (got, want)]
    np.testing.assert_allclose(*values, rtol=1e-9, atol=1e-12)  # sums added by partition
    monkeypatch.setattr(formats, "PARTITION_RECORDS", 10**6)  # and drawn whole: the same law
    from dpsynth.models import synthesis

    monkeypatch.setattr(synthesis, "DRAW_ROWS", 10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = synthesize_table(frame, spec, 40.0, m=2, seed=5, allow_large_epsilon=True).data
    for k in (1, 2):  # each set's PH sample, dealt to the partitions in a new order
        mine, theirs = (d.loc[d[SET_COLUMN] == k, "visits"] for d in (data, whole))
        assert sorted(mine) == sorted(theirs)
    assert data["visits"].tolist() != whole["visits"].tolist()
    for x, y in (("owner", "visits"), ("owner", "region")):
        p, q = _two_way(data, x, y), _two_way(whole, x, y)
        tvd = 0.5 * p.sub(q, fill_value=0).abs().sum()
        assert tvd < 0.05, (x, y, tvd)  # 6,000 records a side: sampling error about 0.02


MODELLED = {
    "public": SPEC["public"],
    "confidential": [
        {
            "name": "income",
            "model": "beta-regression",
            "bounds": [0, 1000],
            "missing": "indicator",
            "calibrate_bins": 10,
            "centring": "marginal",
        },
        {**SPEC["confidential"][1], "given": ["region"]},
    ],
}


def test_a_large_model_column_is_drawn_at_its_pilots_steps(monkeypatch):
    """A model column drawn a partition at a time (missing values, a marginal centre, a
    rank map onto its histogram sample): missing exactly where its synthetic indicator says,
    inside its bounds, and each set's marginal that of a whole draw of the same fit (the
    same seed) to sampling error."""
    from dpsynth.sampler import Sampler

    rng = np.random.default_rng(8)
    frame = _frame(2400, seed=4)
    income = 200 + 300 * (frame["region"] == "n") + rng.gamma(2.0, 60.0, len(frame))
    frame["income"] = np.where(rng.random(len(frame)) < 0.2, np.nan, income.clip(0, 1000))
    spec, fast = parse_spec(MODELLED), Sampler(chains=2, iter_warmup=150, iter_sampling=150)

    def release(pilot: int, records: int):
        _partitioned(monkeypatch, pilot, records)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return synthesize_table(
                frame, spec, 40.0, seed=2, sampler=fast, allow_large_epsilon=True
            )

    parts, whole = release(700, 500), release(10**6, 10**6)
    assert parts.table.draw is not None and whole.table.draw is None
    a, b = parts.data, whole.data
    drawn = parts.table.draw.columns(0, 3)
    assert np.array_equal(np.isnan(drawn["income"]), drawn["income_missing"] == 1)
    assert a["income"].between(0, 1000).sum() == a["income"].notna().sum()
    assert abs(a["income"].isna().mean() - b["income"].isna().mean()) < 0.04
    q = np.linspace(0.1, 0.9, 9)
    gap = np.abs(np.nanquantile(a["income"], q) - np.nanquantile(b["income"], q))
    assert gap.max() < 10, gap  # the same histogram sample (seeded): within a tenth of a bin
    by_region = [d.groupby("region")["income"].mean() for d in (a, b)]
    assert (by_region[0] - by_region[1]).abs().max() < 15  # the slope kept (n vs e, s: 300)


@pytest.mark.parametrize("integer", [True, False])
def test_a_dealt_sample_gives_each_partition_a_random_share_of_its_bins(integer):
    """A PH sample held as its bins' counts (``steps.DealtSample``): the partitions' values
    together fall in the sample's bins exactly (an integer sample's values are its values),
    each partition its size, inside its bins; a partition's share of a bin is hypergeometric
    (mean over 400 deals within 4 standard errors of size x share); the same partition drawn
    twice from one seed is the same values; a continuous value is uniform within its bin; a
    partition it does not hold is refused."""
    from dpsynth.mechanisms.histogram import ph_edges, sample_bins
    from dpsynth.table.steps import DealtSample

    rng = np.random.default_rng(1)
    edges = ph_edges((0, 9), 5, integer)
    weights = np.linspace(1, 3, edges.size - 1)
    bins = rng.choice(edges.size - 1, 1030, p=weights / weights.sum())
    sample = np.rint(edges[bins] + 0.5) if integer else rng.uniform(edges[bins], edges[bins + 1])
    dealt = DealtSample.of(sample, edges, integer, 300, np.random.default_rng(2))
    parts = [dealt.at(slice(a, min(a + 300, 1030)), np.random.default_rng(a)) for a in dealt.starts]
    assert [p.size for p in parts] == [300, 300, 300, 130]
    joined = np.concatenate(parts)
    want = np.bincount(sample_bins(sample, edges, integer), minlength=edges.size - 1)
    assert np.array_equal(
        np.bincount(sample_bins(joined, edges, integer), minlength=want.size), want
    )
    if integer:
        assert sorted(joined) == sorted(sample)
    else:  # uniform within its bin: the mean place in it 1/2 (standard error 0.009)
        at = sample_bins(joined, edges, integer)
        place = (joined - edges[at]) / (edges[at + 1] - edges[at])
        assert abs(place.mean() - 0.5) < 0.04
    assert joined.min() >= edges[0] and joined.max() <= edges[-1]
    assert np.array_equal(parts[1], dealt.at(slice(300, 600), np.random.default_rng(300)))
    shares = np.array(
        [
            DealtSample.of(sample, edges, integer, 300, np.random.default_rng(s)).counts[0]
            for s in range(400)
        ]
    )
    N, K, n = 1030, want, 300
    sd = np.sqrt(n * K / N * (1 - K / N) * (N - n) / (N - 1))
    assert np.all(np.abs(shares.mean(axis=0) - n * K / N) < 4 * sd / np.sqrt(400))
    with pytest.raises(ValueError, match="no partition"):
        dealt.at(slice(10, 310), rng)


def test_public_features_at_rows_keep_their_codes():
    """The public features at some records (``PublicFeatures.take``) are those records'
    features, and a level column's codes made from them are ``design.public_codes`` there
    (a missing value the first level): what a PH column's public parent reads."""
    from dpsynth.table.design import public_codes, public_encoder, public_features

    spec = parse_spec(SPEC)
    frame = _frame(50)
    frame.loc[[3, 7], "region"] = None
    encoders = [public_encoder(frame, c) for c in spec.public]
    feats = public_features(frame, encoders)
    rows = np.array([40, 3, 7, 11])
    assert np.array_equal(feats.take(rows)[:], feats[rows])
    assert np.array_equal(feats.take(slice(5, 9))[:], feats[5:9])
    region = public_codes(frame, encoders[1])
    assert np.array_equal(feats.take(rows).level_codes("region"), region[rows])
    assert feats.level_codes("age") is None and feats.take(slice(5, 9)).shape[0] == 4


def test_a_large_continuous_ph_column_keeps_its_samples_bins(monkeypatch):
    """A parentless PH column drawn a partition at a time publishes its PH sample dealt to
    the partitions: a continuous column's values fall in the mechanism's own bins (its
    default number, sqrt(n)) exactly as the whole draw's do, set by set, inside its bounds;
    a level column's counts are the whole draw's; the records' order is new."""
    from dpsynth.mechanisms.histogram import ph_bins, ph_edges, sample_bins

    rng = np.random.default_rng(0)
    n = 3000
    frame = _frame(n).assign(wage=rng.gamma(2, 10, n).clip(0, 100))
    spec = parse_spec(
        {
            "public": SPEC["public"],
            "confidential": [
                {"name": "wage", "type": "continuous", "bounds": [0, 100], "mechanism": "ph"},
                {**SPEC["confidential"][1], "given": []},
            ],
        }
    )

    def release(pilot: int, records: int) -> pd.DataFrame:
        _partitioned(monkeypatch, pilot, records)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return synthesize_table(frame, spec, 20.0, m=2, seed=4, allow_large_epsilon=True).data

    parts, whole = release(800, 700), release(10**6, 10**6)
    k = ph_bins(n, (0, 100))
    edges = ph_edges((0, 100), k, False)
    for s in (1, 2):
        a, b = (d[d[SET_COLUMN] == s] for d in (parts, whole))
        bins = [
            np.bincount(sample_bins(d["wage"].to_numpy(), edges, False), minlength=k)
            for d in (a, b)
        ]
        assert np.array_equal(*bins)
        assert a["wage"].between(0, 100).all()
        assert (
            a["owner"]
            .value_counts(dropna=False)
            .sort_index()
            .equals(b["owner"].value_counts(dropna=False).sort_index())
        )
    assert not np.array_equal(parts["wage"].to_numpy(), whole["wage"].to_numpy())
