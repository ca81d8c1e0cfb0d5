"""A CLI release with a fresh HOME, cache and temporary folder leaves no file derived from
the confidential data outside the outputs the user named (issue: releases that keep exactly
the guarantee they state)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpsynth import engine

pytestmark = pytest.mark.slow


def _files(root: Path) -> dict[str, int]:
    """Every non-directory path below ``root`` with its size (sockets count as size 0)."""
    out = {}
    for path in root.rglob("*"):
        mode = path.lstat().st_mode
        if not stat.S_ISDIR(mode):
            out[str(path.relative_to(root))] = 0 if stat.S_ISSOCK(mode) else path.stat().st_size
    return out


def _cache_with_compiled_beta(backend: str, tmp_path: Path) -> None:
    """Copy the compiled beta program into the fresh cache, so the run does not compile."""
    if backend == "pystan":
        import httpstan.cache

        model = engine.compile_program(engine.STAN_DIR / "beta.stan", backend=backend)
        version_dir = httpstan.cache.cache_directory()
        cache = tmp_path / "xdg" / "httpstan" / version_dir.name / model  # models/<id>
        shutil.copytree(version_dir / model, cache, ignore=shutil.ignore_patterns("fits"))
        return
    exe = Path(engine.compile_program(engine.STAN_DIR / "beta.stan", backend=backend))
    folder = tmp_path / "dpsynth-cache" / "cmdstan"
    folder.mkdir(parents=True)
    for path in (exe, exe.with_suffix(".stan")):  # the executable stays newer than its program
        shutil.copy2(path, folder / path.name)


def _fresh_env(tmp_path: Path, stan_backend: str) -> dict[str, str]:
    """The environment of a CLI run with a fresh HOME, caches and TMPDIR below ``tmp_path``."""
    for name in ("home", "tmp", "work", "dpsynth-cache"):
        (tmp_path / name).mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "TMPDIR": str(tmp_path / "tmp"),
        "DPSYNTH_CACHE_DIR": str(tmp_path / "dpsynth-cache"),
        "DPSYNTH_STAN_BACKEND": stan_backend,
    }


def _release_cmd(chains: int, iter_warmup: int) -> list[str]:
    """``dpsynth synthesize in.csv`` (censor-uw, beta) with its three named outputs."""
    cmd = [sys.executable, "-m", "dpsynth", "synthesize", "in.csv", "--column", "y"]
    cmd += ["--mechanism", "censor-uw", "--epsilon", "6", "--m", "2", "--quiet"]
    cmd += ["--chains", str(chains), "--iter-warmup", str(iter_warmup)]
    cmd += ["--iter-sampling", "200", "--out", "out.csv", "--report", "report.json"]
    return cmd + ["--diagnostics", "diag.json"]


def _processes_naming(text: str) -> list[int]:
    """Live processes whose arguments contain ``text`` (a watcher names its folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _wait_until(condition, timeout: float) -> bool:
    """Poll ``condition`` every 0.05 s for at most ``timeout`` seconds; its last value."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(condition())


def test_cli_release_leaves_nothing_but_its_outputs(tmp_path: Path, stan_backend: str) -> None:
    """Fresh HOME, caches and TMPDIR, on each backend. Allowed besides the named outputs:
    empty build locks in the caches; nothing in TMPDIR, not even an empty folder
    (httpstan's per-chain sockets are removed since issue 27, the private fit or run
    folder when the process ends) and no watcher process of a private folder left."""
    _cache_with_compiled_beta(stan_backend, tmp_path)
    env = _fresh_env(tmp_path, stan_backend)
    work = tmp_path / "work"
    rng = np.random.default_rng(4)
    (work / "in.csv").write_text(
        "y\n" + "\n".join(f"{v:.6f}" for v in rng.beta(2, 5, 150).clip(1e-4, 1 - 1e-4))
    )
    before = _files(tmp_path)
    cmd = _release_cmd(chains=2, iter_warmup=200)
    run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    new = {p: size for p, size in _files(tmp_path).items() if p not in before}
    named = {"work/out.csv", "work/report.json", "work/diag.json"}
    assert named <= set(new)
    leftovers = {p: size for p, size in new.items() if p not in named}

    def harmless(path: str, size: int) -> bool:
        outside = not path.startswith(("work/", "tmp/"))
        return size == 0 and path.endswith(".lock") and outside

    assert all(harmless(p, size) for p, size in leftovers.items()), leftovers
    assert list((tmp_path / "tmp").iterdir()) == []  # no private folder, even empty
    if Path("/proc/self/cmdline").is_file():  # the watcher ends with its folder
        assert _wait_until(lambda: not _processes_naming(str(tmp_path / "tmp")), 10.0)


# --- SIGKILL of a release in the middle of a fit (PyStan) --------------------------


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc")
def test_sweep_kills_recorded_workers_only_and_removes_outside_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale private folder (no owner holds its lock): the sweep kills the worker it
    records, not a process whose id is recorded with another start time (a reused id),
    and removes the file linked from ``.outside/``."""
    import tempfile

    from dpsynth.engine import private_dir

    folder = tmp_path / f"{private_dir.PREFIXES[1]}1-stale"
    folder.mkdir()
    (folder / private_dir.LOCK_NAME).touch()
    socket_file = tmp_path / "httpstan_x.sock"
    socket_file.touch()
    private_dir.register_outside(str(folder), str(socket_file))
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    worker, bystander = subprocess.Popen(sleep), subprocess.Popen(sleep)
    try:
        started = private_dir._start_time(worker.pid)
        assert started is not None
        (folder / private_dir.WORKERS_NAME).mkdir()
        (folder / private_dir.WORKERS_NAME / f"{worker.pid}-{started}").touch()
        (folder / private_dir.WORKERS_NAME / f"{bystander.pid}-1").touch()
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert private_dir.sweep_stale() == 1
        assert worker.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        worker.kill()
        bystander.kill()
    assert not folder.exists() and not socket_file.exists()


def _planted_csv(path: Path, records: int = 150) -> list[str]:
    """Write ``y`` values with 12 decimals; return their 10 digits after ``0.`` (what a
    file holding the data would contain, and what no other file does by chance)."""
    values = np.random.default_rng(11).uniform(0.05, 0.95, records)
    texts = [f"{v:.12f}" for v in values]
    path.write_text("y\n" + "\n".join(texts) + "\n")
    return [text[2:12] for text in texts]


def _files_holding(root: Path, needles: list[str], skip: set[Path]) -> dict[str, list[str]]:
    """Files below ``root`` (besides ``skip``) holding any of ``needles``, as text or in
    their gzip content: path -> the needles found."""
    import gzip
    import zlib

    found = {}
    for path in root.rglob("*"):
        if path in skip or path.is_symlink() or not path.is_file():
            continue
        content = path.read_bytes()
        if content[:2] == b"\x1f\x8b":
            with contextlib.suppress(OSError, EOFError, zlib.error):
                content += gzip.decompress(content)
        hits = [n for n in needles if n.encode() in content]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def _fit_files(tmp: Path, pid: int) -> list[Path]:
    """Fit files in the private folders of process ``pid`` below ``tmp``."""
    return list(tmp.glob(f"dpsynth-pystan-{pid}-*/models/*/fits/*.jsonlines.gz"))


_LINUX_PROC = pytest.mark.skipif(not Path("/proc/self/cmdline").is_file(), reason="needs /proc")


@_LINUX_PROC
@pytest.mark.skipif((os.cpu_count() or 1) >= 64, reason="needs a chain queued behind the others")
def test_sigkill_mid_fit_leaves_no_fit_and_no_process(tmp_path: Path) -> None:
    """SIGKILL of a PyStan release (the CLI process only, not its group) while chains
    sample and finished chains' fit files sit in its private folder: its sampler
    processes and its watcher end, the folder and its sockets go within 30 s, no output
    is written and no file below the fresh HOME, caches, TMPDIR and work folder holds a
    record's digits; no fit file anywhere (none in httpstan's cache).

    One chain more than cores: httpstan's pool samples one chain per core, so the last
    chain waits and the first ones' fit files are on disk while it samples (200,000
    warm-up iterations: about 10 s a chain on a 2-core machine)."""
    psutil = pytest.importorskip("psutil")
    _cache_with_compiled_beta("pystan", tmp_path)
    env = _fresh_env(tmp_path, "pystan")
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    planted = _planted_csv(work / "in.csv")
    before = set(_files(tmp_path))
    cmd = _release_cmd(chains=min(64, (os.cpu_count() or 1) + 1), iter_warmup=200_000)
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # for the clean-up below; the test kills the CLI alone
    )
    kids = []
    try:
        started = _wait_until(lambda: _fit_files(tmp, proc.pid) or proc.poll() is not None, 600)
        assert started and proc.poll() is None, proc.communicate()[1]
        kids = psutil.Process(proc.pid).children(recursive=True)  # workers and the watcher
        assert len(kids) >= 2
        proc.kill()
        proc.wait(timeout=10)

        def clean() -> bool:
            alive = [p for p in kids if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            return not alive and not list(tmp.iterdir())

        assert _wait_until(clean, 30.0), (list(tmp.rglob("*")), kids)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for kid in kids:
            with contextlib.suppress(psutil.Error):
                kid.kill()
        proc.wait(timeout=10)
    assert sorted(p.name for p in work.iterdir()) == ["in.csv"]  # no output, no temporary
    assert list(tmp_path.rglob("*.jsonlines.gz")) == []
    assert list((tmp_path / "xdg").rglob("fits/*")) == []
    new = {tmp_path / p for p in set(_files(tmp_path)) - before}
    assert all(p.suffix == ".lock" for p in new), new  # only empty build locks
    assert _files_holding(tmp_path, planted, skip={work / "in.csv"}) == {}
