"""A non-editable install works outside the repository: the Stan programs ship in the package.

The project is built into a wheel (offline: the venv's setuptools, no build isolation, no
index), installed with ``pip install --target`` into a folder of its own, and a small release
is run by the venv's Python from another folder with only that install on ``PYTHONPATH``. The
release must import the installed copy (not the editable checkout) and find its Stan programs
and pieces examples inside it (``dpsynth.engine.STAN_DIR``). The compiled beta program is
taken from httpstan's cache (keyed by program text), so nothing compiles here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

RELEASE = """
import json
from pathlib import Path

import numpy as np

import dpsynth
from dpsynth import engine
from dpsynth.sampler import Sampler
from dpsynth.release.single import synthesize

y = np.random.default_rng(1).beta(1.5, 1.5, 100)
rel = synthesize(
    y,
    model="beta",
    mechanism="censor-uw",
    epsilon=3.0,
    seed=7,
    sampler=Sampler(chains=2, iter_warmup=150, iter_sampling=150),
)
print(json.dumps({
    "dpsynth": dpsynth.__file__,
    "stan_dir": str(engine.STAN_DIR),
    "beta": (engine.STAN_DIR / "beta.stan").is_file(),
    "functions": (engine.STAN_DIR / engine.SHARED_FUNCTIONS).is_file(),
    "pieces": sorted(p.name for p in (engine.STAN_DIR / "examples" / "pieces").glob("*.pieces")),
    "rows": len(rel.data),
    "mechanism": rel.report["mechanism"],
}))
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd[:4]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_installed_wheel_releases_from_another_folder(tmp_path: Path) -> None:
    # the sources of the build: pyproject.toml and the package, copied so that building
    # leaves no build/ or egg-info in the checkout
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", src / "pyproject.toml")
    shutil.copytree(
        ROOT / "dpsynth", src / "dpsynth", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    wheels, site, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    offline = ["--no-deps", "--no-index"]  # nothing is downloaded
    _run([*pip, "wheel", *offline, "--no-build-isolation", "-w", str(wheels), str(src)], tmp_path)
    (wheel,) = wheels.glob("dpsynth-*.whl")
    _run([*pip, "install", *offline, "--target", str(site), str(wheel)], tmp_path)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(site)
    env["PYTHONWARNINGS"] = "ignore"
    out = _run([sys.executable, "-c", RELEASE], elsewhere, env)
    found = json.loads(out.strip().splitlines()[-1])

    installed = site.resolve()
    assert Path(found["dpsynth"]).resolve().is_relative_to(installed), found  # not the checkout
    assert Path(found["stan_dir"]) == installed / "dpsynth" / "stan", found
    assert found["beta"] and found["functions"]
    shipped = sorted(p.name for p in (ROOT / "dpsynth" / "stan" / "examples" / "pieces").glob("*"))
    assert found["pieces"] == shipped and "normal_known_sd.pieces" in shipped
    assert found["rows"] == 100 and found["mechanism"] == "censor-uw"
