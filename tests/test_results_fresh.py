"""Committed results record the code that produced them, and are not older than it.

Each ``results/<stem>/meta.json`` records ``code``, the SHA-256 of the study modules that
computed its tables, every dpsynth module they import and the Stan programs
(:func:`dpsynth.studies.results.code_hash`, the replicate cache's fingerprint). The
comparison is of file contents, never of file times, so a fresh clone gives the same answer
as the checkout that wrote the results.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from dpsynth.studies import results
from dpsynth.studies.runner import imported_modules

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(p.parent.name for p in (ROOT / "results").glob("*/meta.json"))
HELPERS = {"notebook", "plots", "results", "profiles", "runner", "knobs", "reproduction"}


def test_every_committed_result_has_declared_study_modules():
    unknown = [stem for stem in COMMITTED if stem not in results.STUDY_MODULES]
    assert not unknown, f"results without study modules in results.STUDY_MODULES: {unknown}"


@pytest.mark.parametrize("stem", COMMITTED)
def test_committed_results_are_not_older_than_the_code_they_import(stem):
    stale = results.staleness(stem)
    if stale is None:
        assert stem not in results.KNOWN_STALE, (
            f"results/{stem}/ were produced by this checkout's code: remove it from "
            "results.KNOWN_STALE"
        )
        return
    assert stem in results.KNOWN_STALE, (
        f"results/{stem}/ are older than the code they import ({stale}): regenerate them "
        f"with `make book/executed/{stem}.ipynb PROFILE=paper` ({results.REGENERATE} for all)"
    )


@pytest.mark.parametrize("stem", sorted(results.STUDY_MODULES))
def test_the_hash_covers_every_study_module_the_notebook_imports(stem):
    notebook = ROOT / "notebooks" / f"{stem}.md"
    if not notebook.is_file():
        pytest.skip(f"no notebook {notebook.name}")
    imported = set(re.findall(r"from (dpsynth\.studies\.\w+) import", notebook.read_text()))
    studies = {m for m in imported if m.rsplit(".", 1)[1] not in HELPERS}
    covered = {p for m in results.STUDY_MODULES[stem] for p in imported_modules(m)}
    missing = [m for m in studies if not set(imported_modules(m)) <= covered]
    assert not missing, f"{stem} imports study code its results' hash does not cover: {missing}"


def test_save_records_the_code_and_staleness_follows_it(tmp_path, monkeypatch):
    monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path))
    stem = "07_modips_inference"
    table = pd.DataFrame({"value": [1.0]}, index=pd.Index(["a"], name="quantity"))
    results.save(stem, {"summary": table}, {"seed": 1})
    meta = json.loads((tmp_path / stem / "meta.json").read_text())
    assert meta["code"] == results.code_hash(stem) and len(meta["code"]) == 64
    assert meta["code_modules"] == ["dpsynth.studies.modips_sections"]
    assert results.staleness(stem) is None
    monkeypatch.setattr(results, "code_hash", lambda s: "0" * 64)
    assert "recorded" in results.staleness(stem)
    assert results.load(stem).stale and "stale" in results.load(stem).label
    meta.pop("code")
    (tmp_path / stem / "meta.json").write_text(json.dumps(meta))
    assert "no code hash" in results.staleness(stem)
    assert results.staleness("01_beta_censoring") is None  # nothing committed there


def test_the_hash_is_of_contents_not_times(tmp_path):
    first = results.code_hash("07_modips_inference")
    for path in imported_modules("dpsynth.studies.modips_sections"):
        path.touch()
    assert results.code_hash("07_modips_inference") == first
