"""A CLI release with a fresh HOME, cache and temporary folder leaves no file derived from
the confidential data outside the outputs the user named (issue: releases that keep exactly
the guarantee they state)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
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


def test_cli_release_leaves_nothing_but_its_outputs(tmp_path: Path, stan_backend: str) -> None:
    """Fresh HOME, caches and TMPDIR, on each backend. Allowed besides the named outputs:
    empty build locks in the caches; nothing in TMPDIR (httpstan's per-chain sockets are
    removed since issue 27)."""
    _cache_with_compiled_beta(stan_backend, tmp_path)
    for name in ("home", "tmp", "work", "dpsynth-cache"):
        (tmp_path / name).mkdir(exist_ok=True)
    work = tmp_path / "work"
    rng = np.random.default_rng(4)
    (work / "in.csv").write_text(
        "y\n" + "\n".join(f"{v:.6f}" for v in rng.beta(2, 5, 150).clip(1e-4, 1 - 1e-4))
    )
    before = _files(tmp_path)
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "TMPDIR": str(tmp_path / "tmp"),
        "DPSYNTH_CACHE_DIR": str(tmp_path / "dpsynth-cache"),
        "DPSYNTH_STAN_BACKEND": stan_backend,
    }
    cmd = [sys.executable, "-m", "dpsynth", "synthesize", "in.csv", "--column", "y"]
    cmd += ["--mechanism", "censor-uw", "--epsilon", "6", "--m", "2", "--quiet"]
    cmd += ["--allow-unconverged", "--chains", "2", "--iter-warmup", "200"]
    cmd += ["--iter-sampling", "200", "--out", "out.csv", "--report", "report.json"]
    cmd += ["--diagnostics", "diag.json"]
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
