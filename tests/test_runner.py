"""Tests of dpsynth.studies.runner: seeds, serial = processes = Dask, cache, nested processes."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dpsynth.errors import InputError
from dpsynth.studies import runner
from dpsynth.studies.runner import (
    CACHE_ENV_VAR,
    cache_key,
    default_cache_dir,
    replicate_seed,
    run_replicate,
    run_replicates,
)

SEED = 2024


def draw(params: dict, replicate: int, seed: int) -> dict:
    """Replicate function: a seeded draw; leaves one marker file per call in log_dir."""
    log_dir = params.get("log_dir")
    if log_dir:
        Path(log_dir, f"{replicate}-{uuid.uuid4().hex}").touch()
    x = np.random.default_rng(seed).normal(params["mu"], 1.0, size=params["n"])
    return {"replicate": replicate, "seed": seed, "x": x, "pid": os.getpid()}


def _square(k: int) -> int:
    return k * k


def nested(params: dict, replicate: int, seed: int) -> dict:
    """Replicate function that starts its own process pool, as PyStan does inside a worker."""
    with ProcessPoolExecutor(max_workers=2) as pool:
        squares = list(pool.map(_square, range(params["k"])))
    return {"replicate": replicate, "total": sum(squares), "pid": os.getpid()}


def _strip_pid(results: list[dict]) -> list[tuple]:
    return [(r["replicate"], r["seed"], r["x"].tolist()) for r in results]


def test_replicate_seed_matches_seedsequence_spawn() -> None:
    children = np.random.SeedSequence(SEED).spawn(5)
    expected = [int(c.generate_state(1, dtype=np.uint32)[0]) for c in children]
    assert [replicate_seed(SEED, r) for r in range(5)] == expected
    assert len(set(expected)) == 5
    assert all(0 <= s < 2**32 for s in expected)


def test_parallel_equals_serial() -> None:
    params = {"mu": 3.0, "n": 4}
    serial = run_replicates(draw, params, 6, seed=SEED, cache_dir=None, n_jobs=1, progress=False)
    parallel = run_replicates(draw, params, 6, seed=SEED, cache_dir=None, n_jobs=3, progress=False)
    assert [r["replicate"] for r in parallel] == list(range(6))
    assert _strip_pid(parallel) == _strip_pid(serial)
    assert all(r["pid"] == os.getpid() for r in serial)
    assert all(r["pid"] != os.getpid() for r in parallel)  # really ran in worker processes


def test_cache_hit_reruns_nothing(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    log.mkdir()
    cache = tmp_path / "cache"
    params = {"mu": 0.0, "n": 3, "log_dir": str(log)}
    first = run_replicates(draw, params, 4, seed=SEED, cache_dir=cache, n_jobs=2, progress=False)
    assert len(list(log.iterdir())) == 4
    assert len(list(cache.rglob("*.pkl"))) == 4  # one pickle per replicate
    again = run_replicates(draw, params, 4, seed=SEED, cache_dir=cache, n_jobs=2, progress=False)
    assert len(list(log.iterdir())) == 4  # nothing recomputed
    assert [r["pid"] for r in again] == [r["pid"] for r in first]  # came from the pickles
    more = run_replicates(draw, params, 6, seed=SEED, cache_dir=cache, n_jobs=1, progress=False)
    calls = sorted(p.name.split("-")[0] for p in log.iterdir())
    assert calls == ["0", "1", "2", "3", "4", "5"]  # only replicates 4 and 5 were new
    assert _strip_pid(more[:4]) == _strip_pid(first)
    run_replicates(draw, {**params, "mu": 1.0}, 1, seed=SEED, cache_dir=cache, progress=False)
    run_replicates(draw, params, 1, seed=SEED + 1, cache_dir=cache, progress=False)
    assert len(list(log.iterdir())) == 8  # new params or seed: new keys


def test_replicate_alone_equals_replicate_in_batch(tmp_path: Path) -> None:
    params = {"mu": -1.0, "n": 5}
    batch = run_replicates(draw, params, 5, seed=SEED, cache_dir=None, n_jobs=2, progress=False)
    alone = run_replicate(draw, params, 3, seed=SEED, cache_dir=None)
    direct = draw(params, 3, replicate_seed(SEED, 3))
    assert _strip_pid([alone]) == _strip_pid([batch[3]]) == _strip_pid([direct])
    # run_replicate shares cache entries with run_replicates
    cache = tmp_path / "cache"
    run_replicates(draw, params, 5, seed=SEED, cache_dir=cache, n_jobs=1, progress=False)
    names = {p.name for p in cache.rglob("*.pkl")}
    assert f"{cache_key(draw, params, SEED, 3)}.pkl" in names
    cached = run_replicate(draw, params, 3, seed=SEED, cache_dir=cache)
    assert cached["pid"] == batch[3]["pid"] or _strip_pid([cached]) == _strip_pid([alone])


def test_worker_may_start_its_own_processes() -> None:
    params = {"k": 4}
    out = run_replicates(nested, params, 2, seed=SEED, cache_dir=None, n_jobs=2, progress=False)
    assert [r["total"] for r in out] == [0 + 1 + 4 + 9] * 2
    assert all(r["pid"] != os.getpid() for r in out)


def test_dask_client_and_address_equal_serial() -> None:
    distributed = pytest.importorskip("distributed")
    params = {"mu": 2.0, "n": 3}
    serial = run_replicates(draw, params, 4, seed=SEED, cache_dir=None, n_jobs=1, progress=False)
    with distributed.LocalCluster(
        n_workers=1, processes=False, threads_per_worker=2, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            via_client = run_replicates(
                draw,
                params,
                4,
                seed=SEED,
                cache_dir=None,
                client=client,
                progress=False,
            )
        via_address = run_replicates(
            draw,
            params,
            4,
            seed=SEED,
            cache_dir=None,
            client=cluster.scheduler_address,
            progress=False,
        )
    assert _strip_pid(via_client) == _strip_pid(serial)
    assert _strip_pid(via_address) == _strip_pid(serial)


def test_default_cache_dir_env_and_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "root"))
    assert default_cache_dir() == tmp_path / "root" / "runner"
    run_replicates(draw, {"mu": 0.0, "n": 2}, 2, seed=SEED, n_jobs=1)
    assert len(list((tmp_path / "root" / "runner").rglob("*.pkl"))) == 2
    assert "2/2" in capsys.readouterr().err  # tqdm bar on stderr
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.chdir(tmp_path)
    assert default_cache_dir() == tmp_path / ".dpsynth-cache" / "runner"


def fail_at_two(params: dict, replicate: int, seed: int) -> int:
    """Replicate function that fails on replicate 2."""
    if replicate == 2:
        raise RuntimeError("replicate 2 failed")
    return replicate


def test_failure_propagates_and_keeps_finished_replicates(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="replicate 2 failed"):
        run_replicates(fail_at_two, {}, 4, seed=SEED, cache_dir=tmp_path, n_jobs=1, progress=False)
    assert len(list(tmp_path.rglob("*.pkl"))) == 2  # replicates 0 and 1 were cached
    with pytest.raises(RuntimeError, match="replicate 2 failed"):
        run_replicates(fail_at_two, {}, 4, seed=SEED, cache_dir=None, n_jobs=2, progress=False)


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="^func:"):
        run_replicates(lambda p, r, s: r, {}, 1, seed=0, cache_dir=None)
    with pytest.raises(InputError, match="^n_jobs:"):
        run_replicates(draw, {"mu": 0, "n": 1}, 1, seed=0, cache_dir=None, n_jobs=0)
    with pytest.raises(InputError, match="^params:"):
        run_replicates(draw, {"mu": object()}, 1, seed=0, cache_dir=None)
    with pytest.raises(InputError, match="^seed:"):
        run_replicates(draw, {"mu": 0, "n": 1}, 1, seed=-1, cache_dir=None)


def test_code_change_invalidates_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsynth.studies.runner as runner

    log = tmp_path / "calls"
    log.mkdir()
    params = {"mu": 0.0, "n": 3, "log_dir": str(log)}
    run_replicates(draw, params, 2, seed=SEED, cache_dir=tmp_path / "c", n_jobs=1, progress=False)
    assert len(list(log.iterdir())) == 2
    key_before = cache_key(draw, params, SEED, 0)
    monkeypatch.setattr(runner, "code_fingerprint", lambda func=None: "edited-library")
    assert cache_key(draw, params, SEED, 0) != key_before
    run_replicates(draw, params, 2, seed=SEED, cache_dir=tmp_path / "c", n_jobs=1, progress=False)
    assert len(list(log.iterdir())) == 4  # recomputed after the (simulated) code change


def test_fingerprint_follows_the_study_imports():
    """The cache key covers what a study imports (mechanisms, models, ...) and not the
    modules it does not (plots, the CLI): no hand-kept exclusion list."""
    names = {p.name for p in runner.imported_modules("dpsynth.studies.censoring")}
    assert {"posterior.py", "catalogue.py", "accounting.py", "censoring.py", "weights.py"} <= names
    assert not {"plots.py", "commands.py", "single.py", "modips.py"} & names
    modips_names = {p.name for p in runner.imported_modules("dpsynth.studies.modips_sections")}
    assert "modips.py" in modips_names and "posterior.py" not in modips_names
