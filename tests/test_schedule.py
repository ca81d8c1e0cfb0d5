"""Column fits on Dask (``dpsynth.table.schedule``): the same release as in this process, a
lost worker refuses the table naming its column, the attempt is charged, nothing is left."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import tempfile
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from dpsynth.errors import InputError
from dpsynth.sampler import Sampler
from dpsynth.table import schedule
from dpsynth.table.pipeline import synthesize_table

SPEC = {
    "public": [{"name": "age", "type": "continuous", "bounds": [16, 90]}],
    "confidential": [
        {"name": "owner", "type": "binary", "levels": ["no", "yes"], "mechanism": "ph"},
        {"name": "income", "model": "lognormal-regression", "bounds": [100, 50000]},
        {"name": "spend", "model": "lognormal-regression", "bounds": [10, 20000]},
    ],
}
SHORT = Sampler(chains=2, iter_warmup=300, iter_sampling=300)


def _table(n: int = 200, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.uniform(20, 60, n)
    income = np.clip(np.exp(8 + 0.02 * (age - 40) + 0.5 * rng.normal(size=n)), 100, 50000)
    spend = np.clip(np.exp(np.log(income) - 1 + 0.2 * rng.normal(size=n)), 10, 20000)
    owner = np.where(rng.uniform(size=n) < 0.4, "yes", "no")
    return pd.DataFrame({"age": age, "owner": owner, "income": income, "spend": spend})


def _release(spec=SPEC, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return synthesize_table(_table(), spec, 6.0, seed=11, sampler=SHORT, m=2, **kw)


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded, non-daemonic worker processes (the in-process cluster's kind);
    a task lost with its worker is not retried (``allowed-failures`` 0)."""
    pytest.importorskip("distributed")
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(
        {
            "distributed.worker.daemon": False,
            "distributed.scheduler.allowed-failures": 0,
            "logging.distributed": "error",
        }
    ):
        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as lc:
            with Client(lc) as client:
                yield client


def test_local_workers_fit_the_chains_on_the_cores():
    assert schedule.local_workers(2, cores=2) == 1
    assert schedule.local_workers(4, cores=2) == 1
    assert schedule.local_workers(2, cores=8) == 4
    assert schedule.local_workers(1, cores=3) == 3


def test_a_seeded_table_is_the_same_release_on_a_cluster(cluster):
    here = _release()
    there = _release(client=cluster)
    pd.testing.assert_frame_equal(here.data, there.data)
    assert here.report["epsilon"] == there.report["epsilon"]
    for name in ("income", "spend", "owner"):
        assert there.diagnostics["columns"][name]["fit_seconds"] > 0


class _Sent:
    """A value scattered to the recording client (what a task holds instead of the value)."""

    def __init__(self, value):
        self.value = value


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def done(self):
        return True


class _RecordingClient:
    """A client that runs each task at once and records what was sent: scattered values
    and every task's arguments (the sizes a real cluster would ship)."""

    def __init__(self):
        self.scattered, self.tasks = [], []

    def scatter(self, value, direct=False):
        self.scattered.append(value)
        return _Sent(value)

    def submit(self, fn, *args, **kw):
        self.tasks.append(args)
        return _Done(fn(*(a.value if isinstance(a, _Sent) else a for a in args)))

    def cancel(self, futures, force=False):
        pass


def test_each_fit_is_sent_what_it_reads_and_no_more():
    """A fit's task carries handles to its own inputs (``columns.fit_inputs``), scattered
    apart from its message: a model column's values, its predecessors' and the public
    features at its fit's records only (``fit_records`` of n), a PH column's own values; the
    release is the same as in this process."""
    from dpsynth.mechanisms.histogram import CellCounts
    from dpsynth.table.columns import ConfidentialInputs, PublicInputs

    k, spec = 120, {**SPEC, "fit_records": 120}
    client = _RecordingClient()
    there = _release(client=client, spec=spec)
    assert len(client.tasks) == 3  # one per confidential column
    for args in client.tasks:  # (task, conf, public)
        assert not any(isinstance(a, (ConfidentialInputs, PublicInputs, np.ndarray)) for a in args)
        task, conf, pub = args[0], args[1].value, args[2].value
        assert pub.n == 200 and not pub.synthetic  # a centre: its own rows (the next test)
        if task.col.name == "owner":  # PH, first: its own levels' counts, no value or feature
            assert not conf.values and set(conf.histograms) == {"ph"}
            assert isinstance(conf.histograms["ph"], CellCounts)
            assert conf.histograms["ph"].n == 200 and conf.histograms["ph"].counts.size == 2
            assert pub.public.shape[0] == 0 and conf.rows is None
        else:
            assert set(conf.values) == {task.col.name, *(p.name for p in pub.done)}
            assert conf.rows.size == k and pub.public.shape == (k, 1)
            assert all(v.size == k for v in conf.values.values())
            marginal = conf.histograms.get("marginal")  # a marginal's: its own, every record
            assert set(conf.histograms) <= {"marginal"}
            assert marginal is None or np.size(marginal) <= 200
    assert len(client.scattered) == 6  # two per fit, none shared with the draws
    pd.testing.assert_frame_equal(_release(spec=spec).data, there.data)


def test_a_calibrated_model_fit_reads_its_own_column_whole_and_a_centre_its_rows():
    """A marginal centre's fit gets its values at its fit records, its marginal histogram's
    records (every record with a value) and the centre's public pseudo-design, chosen where
    the draws run: at most MARGINAL_CENTRE_ROWS rows, only records whose synthetic indicator
    says present. Gathered a partition at a time (997 records), exactly as from the whole."""
    from dpsynth.table import columns, gather
    from dpsynth.table.spec import parse_spec

    spec = parse_spec(
        {
            "public": [{"name": "age", "type": "continuous", "bounds": [16, 90]}],
            "confidential": [
                {"name": "income", "model": "lognormal-regression", "bounds": [100, 50000],
                 "centring": "marginal", "missing": "indicator"},
            ],
            "fit_records": 100,
        }
    )  # fmt: skip
    indicator, col = spec.order()
    n = 6000
    rng = np.random.default_rng(1)
    present = rng.uniform(size=n) < 0.5
    income = np.where(present, rng.uniform(200, 900, n), np.nan)
    frame = pd.DataFrame({"age": np.linspace(16, 90, n), "income": income})
    tasks = [columns.ColumnTask(c, j, 1.0, 1, 7, SHORT, {}) for j, c in enumerate(spec.order())]
    read = gather.gathered(gather.partitions(frame, 997), spec, n, tasks)
    conf = read.fits[col.name]
    rows = columns.fit_rows(100, n, tasks[1].col_seed)
    np.testing.assert_array_equal(conf.rows, rows)
    np.testing.assert_array_equal(conf.values[col.name], income[rows])
    np.testing.assert_array_equal(conf.values[indicator.name], (~present)[rows].astype(float))
    np.testing.assert_array_equal(conf.histograms["marginal"], income[present])
    pub = columns.PublicInputs(np.linspace(0, 1, n)[:, None], {}, (), 1)
    pub = pub.with_column(indicator, [(~present).astype(float)])
    reads = columns.fit_inputs(tasks[1], conf, pub)
    assert reads.conf is conf and reads.pub.public.shape == (100, 1)
    centre = reads.pub.centre
    assert centre.public.shape == (columns.MARGINAL_CENTRE_ROWS, 1)
    chosen = np.round(centre.public[:, 0] * (n - 1)).astype(int)  # the rows, from age
    assert present[chosen].all() and np.all(np.diff(chosen) > 0)
    ((p, v),) = centre.synthetic
    assert p is indicator and np.all(v == 0)


@pytest.mark.parametrize("records", [7, 50, 10**6])
def test_the_fits_inputs_are_gathered_a_partition_at_a_time(records):
    """The table is read once, a partition at a time: each fit's inputs are the whole
    table's codes at its fit records (a PH column: its counts), the clip counts add up, the
    public columns are kept whole, and a fit is queued with how to make its inputs; a value
    the spec refuses is refused before any fit, naming its column and counting its records
    over every partition, as from the whole table."""
    from dpsynth.mechanisms.histogram import CellCounts
    from dpsynth.table import gather, pipeline
    from dpsynth.table.design import column_codes
    from dpsynth.table.spec import parse_spec

    spec, frame = parse_spec({**SPEC, "fit_records": 120}), _table()
    tasks = [pipeline.ColumnTask(c, j, 1.0, 1, 3, SHORT, {}) for j, c in enumerate(spec.order())]
    read = gather.gathered(gather.partitions(frame, records), spec, 200, tasks)
    assert read.records == 200 and list(read.public.columns) == ["age"]
    owner, income, spend = spec.order()
    counts = read.fits["owner"].histograms["ph"]
    whole = column_codes(frame, owner)[0]
    assert isinstance(counts, CellCounts) and list(counts.counts) == [
        int(np.sum(whole == 0)), int(np.sum(whole == 1))
    ]  # fmt: skip
    for t in tasks[1:]:
        conf = read.fits[t.col.name]
        assert conf.rows.size == 120
        for name, values in conf.values.items():
            col = next(c for c in spec.order() if c.name == name)
            np.testing.assert_array_equal(values, column_codes(frame, col)[0][conf.rows])
    conf, pub = pipeline._inputs(read, spec, None, 1)
    fits = schedule.Fitter()  # no client: queued with the inputs it will read, not its reads
    fit, queued, reads = pipeline._submit(fits, tasks[1], conf, pub)
    assert queued is tasks[1] and callable(reads)  # how to make its inputs, not the inputs
    assert reads().conf is conf["income"]
    bad = frame.assign(spend=frame["spend"].where(~frame.index.isin([7, 160]), 1e9))
    read = gather.gathered(gather.partitions(bad, records), spec, 200, tasks)
    with pytest.raises(InputError) as got:
        pipeline._inputs(read, spec, None, 1)
    with pytest.raises(InputError) as want:
        column_codes(bad, spend)
    assert str(got.value) == str(want.value) and "2 record(s), the first at record 8" in str(
        got.value
    )


def test_a_release_read_in_small_partitions_is_the_same_release(monkeypatch):
    """The same release (seeded) whether its table is read whole or 37 records at a time:
    the same synthetic table, column diagnostics and clip counts, the table verdict's
    figures to rounding (its sums are added in another order)."""
    from dpsynth.table import gather

    spec = {**SPEC, "fit_records": 120}
    whole = _release(spec=spec)
    small = gather.partitions
    monkeypatch.setattr(gather, "partitions", lambda frame: small(frame, 37))
    parts = _release(spec=spec)
    pd.testing.assert_frame_equal(whole.data, parts.data)
    assert whole.report == parts.report
    for name, diag in whole.diagnostics["columns"].items():
        other = parts.diagnostics["columns"][name]
        assert {k: v for k, v in diag.items() if k != "fit_seconds"} == {
            k: v for k, v in other.items() if k != "fit_seconds"
        }
    a, b = whole.diagnostics["verdict"], parts.diagnostics["verdict"]
    assert a["verdict"] == b["verdict"] and len(a["figures"]) == len(b["figures"])
    for x, y in zip(a["figures"], b["figures"]):
        assert x["figure"] == y["figure"] and x["value"] == pytest.approx(y["value"], abs=1e-9)


def test_a_column_every_fit_reads_whole_is_gathered_once():
    """With ``fit_records = "all"`` each model fit reads every record of its predecessors:
    a column read by several fits is one array, not a copy per fit."""
    from dpsynth.table import gather, pipeline
    from dpsynth.table.design import column_codes
    from dpsynth.table.spec import parse_spec

    spec, frame = parse_spec({**SPEC, "fit_records": "all"}), _table()
    tasks = [pipeline.ColumnTask(c, j, 1.0, 1, 3, SHORT, {}) for j, c in enumerate(spec.order())]
    read = gather.gathered(gather.partitions(frame, 30), spec, 200, tasks)
    income, spend = read.fits["income"], read.fits["spend"]
    assert income.rows is None and spend.rows is None
    assert spend.values["income"] is income.values["income"]
    np.testing.assert_array_equal(spend.values["income"], column_codes(frame, spec.order()[1])[0])


def test_a_refusal_read_in_partitions_is_the_whole_tables():
    """Of refusals in different partitions, the table's is the first column's (synthesis
    order), its first kind of check (missing before bounds), its records counted over all."""
    from dpsynth.table import gather, pipeline
    from dpsynth.table.spec import parse_spec

    spec, frame = parse_spec(SPEC), _table()
    tasks = [pipeline.ColumnTask(c, j, 1.0, 1, 3, SHORT, {}) for j, c in enumerate(spec.order())]
    bad = frame.copy()
    bad.loc[[3, 150], "spend"] = 1e9  # a later column, early
    bad.loc[[120, 130, 190], "income"] = 1e9  # above the bound
    bad.loc[[170], "income"] = np.nan  # missing: checked before the bounds
    read = gather.gathered(gather.partitions(bad, 50), spec, 200, tasks)
    with pytest.raises(InputError) as got:
        pipeline._inputs(read, spec, None, 1)
    assert got.value.param == "missing" and "1 value(s), the first at record 171" in str(got.value)
    bad.loc[170, "income"] = 500.0
    read = gather.gathered(gather.partitions(bad, 50), spec, 200, tasks)
    with pytest.raises(InputError) as got:
        pipeline._inputs(read, spec, None, 1)
    assert got.value.param == "bounds" and "column 'income'" in str(got.value)
    assert "3 record(s), the first at record 121" in str(got.value)


def test_a_bad_client_is_refused_in_one_line():
    with pytest.raises(InputError, match="client") as err:
        _release(client=42)
    assert "\n" not in str(err.value)


def _fit_then_die(*args):  # the worker process dies in the middle of the fit
    os._exit(1)


def test_a_killed_worker_refuses_the_table_and_the_attempt_is_charged(
    cluster, tmp_path, monkeypatch
):
    import sys
    from dataclasses import replace

    import cloudpickle

    from dpsynth.table import columns, pipeline

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker cannot import tests
    dying = replace(columns.MODEL_COLUMN, fit=_fit_then_die)
    monkeypatch.setattr(
        pipeline, "kind_of", lambda col: dying if col.model else columns.kind_of(col)
    )
    budget = tmp_path / "budget.jsonl"
    from dpsynth.engine import pystan_backend

    cluster.run(pystan_backend._fits_folder)  # each worker's private fit folder, as after a fit
    pids = set(cluster.run(os.getpid).values())
    assert all(glob.glob(os.path.join(TMP, f"dpsynth-pystan-{pid}-*")) for pid in pids)
    with pytest.raises(InputError) as err:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            synthesize_table(
                _table(), SPEC, 6.0, sampler=SHORT, client=cluster,
                budget_file=budget, budget_total=20.0,
            )  # fmt: skip
    assert err.value.param == "client"
    assert "column 'income'" in str(err.value) and "nothing was released" in str(err.value)
    from dpsynth.privacy import budget as ledger

    summary = ledger.summary(budget)
    assert summary["spent"] == pytest.approx(6.0)  # the failed attempt counts
    assert summary["entries"][-1]["outcome"] != "released"
    deadline = time.monotonic() + 30  # its nanny reaps the dead worker a moment later
    while not (dead := {pid for pid in pids if not _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert dead  # the worker that took the fit
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a dead owner's folder is removed by its watcher
        left = [f for pid in dead for f in glob.glob(os.path.join(TMP, f"dpsynth-pystan-{pid}-*"))]
        if not left:
            break
        time.sleep(0.5)
    assert not left


TMP = tempfile.gettempdir()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie (exited, not yet reaped) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
    return True


def _cli_files(tmp_path):
    """DATA.csv and a TOML spec of SPEC; the command line's arguments (short chains)."""
    data = tmp_path / "data.csv"
    _table().to_csv(data, index=False)
    spec = tmp_path / "spec.toml"
    lines = ['[[public]]\nname = "age"\ntype = "continuous"\nbounds = [16, 90]\n']
    for col in SPEC["confidential"]:  # JSON strings and lists are TOML
        lines.append(
            "[[confidential]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in col.items())
        )
    spec.write_text("\n".join(lines))
    out = ["--out", str(tmp_path / "o.csv"), "--report", str(tmp_path / "r.json")]
    short = ["--chains", "2", "--iter-warmup", "300", "--iter-sampling", "300"]
    budget = ["--budget-file", str(tmp_path / "b.jsonl"), "--budget-total", "10"]
    head = ["synthesize-table", str(data), "--spec", str(spec), "--epsilon", "6"]
    return [*head, *out, *short, *budget]


def test_cli_a_scheduler_that_does_not_answer_is_refused_before_the_charge(tmp_path, capsys):
    from dpsynth.cli.commands import main

    argv = [*_cli_files(tmp_path), "--scheduler", "tcp://127.0.0.1:9", "--skip-preflight"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpsynth: error: --scheduler: no Dask scheduler")
    assert not (tmp_path / "b.jsonl").exists() and not (tmp_path / "o.csv").exists()


def test_cli_fits_on_the_cluster_at_an_address(cluster, tmp_path):
    from dpsynth.cli.commands import main

    address = cluster.scheduler.address
    argv = [*_cli_files(tmp_path), "--scheduler", address, "--skip-preflight", "--quiet"]
    assert main(argv) == 0
    assert len(pd.read_csv(tmp_path / "o.csv")) == 200
    assert json.loads((tmp_path / "r.json").read_text())["epsilon"] == pytest.approx(6.0)


def test_a_table_larger_than_a_chunk_is_drawn_a_chunk_at_a_time(monkeypatch):
    """Past ``DRAW_ROWS`` records a model column's sets are drawn from designs of at most that
    many rows (a pilot of that many, then partitions of ``PARTITION_RECORDS``, fewer: the
    release's memory does not hold a whole set's design), and the released
    table keeps its dependence (income and spend, log correlation): each record's spend is
    drawn at its own synthetic income, so the correlation stays far from the 0 of records
    misaligned with their predecessors. The chunked draw's post-processing steps read fewer
    rows, so its random numbers differ: at seed 11 the two releases' correlations were 0.50
    (whole) and 0.65 (in chunks, before the partition draw; 0.45 by partitions), their sets'
    from 0.46 to 0.72 (the data's 0.93); tolerance: above 0.3 and within 0.25 of the whole
    draw's."""
    from dpsynth import formats
    from dpsynth.models import synthesis
    from dpsynth.table import columns

    whole = _release()
    seen = []
    at = columns.SetDesign.at

    def recorded(self, part):
        out = at(self, part)
        seen.append(out.shape[0])
        return out

    monkeypatch.setattr(synthesis, "DRAW_ROWS", 64)
    monkeypatch.setattr(formats, "PARTITION_RECORDS", 48)
    monkeypatch.setattr(columns.SetDesign, "at", recorded)
    chunked = _release()
    assert seen and max(seen) == 64 and chunked.data.shape == whole.data.shape
    assert chunked.table.draw is not None  # drawn a partition at a time

    def corr(rel):  # over the m = 2 sets (400 records)
        return np.corrcoef(np.log(rel.data["income"]), np.log(rel.data["spend"]))[0, 1]

    assert corr(chunked) > 0.3 and abs(corr(chunked) - corr(whole)) < 0.25


def test_a_model_fit_given_the_whole_table_where_it_reads_a_subsample_is_refused():
    """The fit's epsilon is amplified for its k-of-n subsample: it refuses values that are
    not exactly the subsample the table's gathering draws (the whole table, a partial
    selection, or one without its rows)."""
    from dpsynth.table import columns, gather
    from dpsynth.table.spec import parse_spec

    spec = parse_spec(
        {
            "confidential": [
                {"name": "income", "model": "lognormal-regression", "bounds": [100, 50000],
                 "centring": "none"},
            ],
            "fit_records": 100,
        }
    )  # fmt: skip
    (col,) = spec.order()
    whole = columns.ConfidentialInputs({"income": np.full(500, 900.0)}, fit_records=100)
    pub = columns.PublicInputs(np.empty((500, 0)), {}, (), 1)
    task = columns.ColumnTask(col, 0, 1.0, 1, 7, SHORT, {})
    with pytest.raises(ValueError, match="gathering"):
        columns.fit_model_column(task, whole, pub)  # the whole table, not its subsample
    frame = pd.DataFrame({"income": np.full(500, 900.0)})
    conf = gather.gathered(gather.partitions(frame, 64), spec, 500, [task]).fits["income"]
    reads = columns.fit_inputs(task, conf, pub)
    assert reads.conf.values["income"].size == 100 and reads.conf.rows.size == 100
    half = dataclasses.replace(reads.conf, values={"income": np.full(50, 900.0)})
    with pytest.raises(ValueError, match="gathering"):
        columns.fit_model_column(task, half, reads.pub)
    unsampled = dataclasses.replace(reads.conf, rows=None)
    with pytest.raises(ValueError, match="gathering"):
        columns.fit_model_column(task, unsampled, reads.pub)


def test_a_count_that_is_not_whole_is_refused_naming_its_column_and_record():
    """A PH count column's histogram counts whole values: one that is not is refused before
    any fit, naming the column and its record's place in the table (not in its partition,
    nor among the present values)."""
    from dpsynth.errors import DataRefusal
    from dpsynth.table import columns, gather, pipeline
    from dpsynth.table.spec import parse_spec

    spec = parse_spec(
        {"confidential": [{"name": "kids", "type": "count", "mechanism": "ph", "bounds": [0, 10]}]}
    )
    kids = np.arange(300) % 7.0
    kids[123] = 2.5
    frame = pd.DataFrame({"kids": kids})
    tasks = [pipeline.ColumnTask(c, j, 1.0, 1, 3, SHORT, {}) for j, c in enumerate(spec.order())]
    read = gather.gathered(gather.partitions(frame, 50), spec, 300, tasks)
    with pytest.raises(InputError) as got:
        pipeline._inputs(read, spec, None, 1)
    assert got.value.param == "y" and "column 'kids': a record is not an integer" in str(got.value)
    assert "record 124]" in str(got.value)
    kids[[3, 40]] = np.nan  # missing before it: its place is not among the present values
    with pytest.raises(DataRefusal, match=r"record 124\]"):
        columns._counted(kids, (0, 10))
