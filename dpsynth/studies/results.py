"""Committed paper-scale results: written by the ``paper`` profile, read back by ``ci``.

The ``ci`` book runs every study at a small scale (a few replicates of small databases),
which cannot be compared with a paper's R = 100 databases of n = 2,000 records. So each
study notebook ends with :func:`paper_scale`:

* under the ``paper`` profile (settings exactly the profile's, apart from worker counts), it
  writes the study's summary tables to ``results/<notebook stem>/<table>.csv`` with a
  ``meta.json`` (date, settings, dpsynth version), to be committed to git;
* under any other profile it reads them back, so the ci book shows the committed
  paper-scale numbers beside the paper's and beside its own small run, each labelled;
* when nothing is committed yet it says so in one line (no error).

CSV formatting is deterministic (fixed float format, ``\\n`` line ends, sorted meta keys):
rerunning the paper profile with the same code and seeds rewrites identical tables.

Each ``meta.json`` records ``code``: the SHA-256 of the code that produced the tables
(:func:`code_hash`: the study modules of :data:`STUDY_MODULES`, every dpsynth module they
import and the Stan programs, as the replicate cache keys them). :func:`staleness` compares it
with the code of this checkout, file contents only (no file times, so a fresh clone agrees);
``tests/test_results_fresh.py`` fails when committed results are older than the code they
import and not declared in :data:`KNOWN_STALE`, and when a declared entry is fresh after all.
``tests/test_results.py`` recomputes cheap tables and fails if a committed one drifts from
what the code produces, beyond stated Monte Carlo tolerances.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dpsynth.io import jsonable

__all__ = [
    "KNOWN_STALE",
    "REGENERATE",
    "RESULTS_ENV_VAR",
    "STUDY_MODULES",
    "code_hash",
    "staleness",
    "PaperScale",
    "is_paper_run",
    "load",
    "paper_scale",
    "results_dir",
    "run_label",
    "save",
]

RESULTS_ENV_VAR = "DPSYNTH_RESULTS_DIR"
"""Environment variable overriding the results root (default: ``results/`` in the repository)."""

FLOAT_FORMAT = "%.10g"
IGNORED_KEYS = ("profile", "n_jobs", "workers")

STUDY_MODULES: dict[str, tuple[str, ...]] = {
    "01_beta_censoring": ("dpsynth.studies.censoring",),
    "02_sdr_censoring": ("dpsynth.studies.censoring",),
    "03_vector_weighting": ("dpsynth.studies.vector_weighted",),
    "04_reweighting": ("dpsynth.studies.vector_weighted",),
    "05_sdr_salary": ("dpsynth.studies.vector_weighted",),
    "06_local_to_global": ("dpsynth.studies.vector_weighted",),
    "07_modips_inference": ("dpsynth.studies.modips_sections",),
    "09_real_data": ("dpsynth.studies.real_data",),
}
"""The study modules whose numbers each notebook's committed results hold (their code hash
covers every dpsynth module they import)."""

KNOWN_STALE: dict[str, str] = {
    stem: "committed before results recorded the code that produced them (issue 54); the "
    "library and the study modules have changed since"
    for stem in (
        "01_beta_censoring",
        "02_sdr_censoring",
        "03_vector_weighting",
        "04_reweighting",
        "05_sdr_salary",
        "06_local_to_global",
        "07_modips_inference",
        "09_real_data",
    )
}
"""Committed results known to be older than the code they import, and why: the book says so
(page "How a reproduction is judged") and :data:`REGENERATE` says how to refresh them. An
entry must go when its results are regenerated (the freshness test fails on a fresh entry)."""

REGENERATE = "make book PROFILE=paper"
"""The command that regenerates every committed paper-scale result (hours on two cores);
one notebook: ``make book/executed/<stem>.ipynb PROFILE=paper``."""
"""Settings that do not change results (worker processes) and so may differ from the profile."""


def results_root() -> Path:
    """``$DPSYNTH_RESULTS_DIR`` if set, else ``results/`` next to the ``dpsynth`` package."""
    env = os.environ.get(RESULTS_ENV_VAR)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "results"


def results_dir(stem: str) -> Path:
    """Directory of one notebook's committed tables: ``<root>/<stem>``."""
    if not stem or "/" in stem or stem.startswith("."):
        raise ValueError(f"not a notebook stem: {stem!r}")
    return results_root() / stem


def _settings(v: Any) -> Any:
    """Settings as JSON values (:func:`dpsynth.io.jsonable`; NaN kept, as ``meta.json`` has it)."""
    return jsonable(v, finite=False)


def is_paper_run(
    cfg: Mapping[str, Any],
    profiles: Mapping[str, Mapping[str, Any]],
    ignore: Iterable[str] = IGNORED_KEYS,
) -> bool:
    """True if ``cfg`` equals the ``paper`` profile in every key but ``ignore``.

    Only such runs write committed results: a paper profile with fewer replicates (an
    override) is not paper scale.
    """
    paper = profiles["paper"]
    skip = set(ignore)
    keys = (set(paper) | set(cfg)) - skip
    return all(_settings(cfg.get(k)) == _settings(paper.get(k)) for k in keys)


def save(
    stem: str,
    tables: Mapping[str, pd.DataFrame],
    cfg: Mapping[str, Any],
    *,
    date: str | None = None,
) -> Path:
    """Write ``tables`` as ``<stem>/<name>.csv`` and ``meta.json``; return the directory.

    Tables are written with their index, floats as ``%.10g`` and ``\\n`` line ends. The meta
    file records the date (UTC, ``YYYY-MM-DD``), the settings (without worker counts, which do
    not change results) and the dpsynth version. Rewriting identical tables under identical
    settings keeps the recorded date, so a rebuild that changes nothing changes no file.
    """
    from dpsynth import __version__

    out = results_dir(stem)
    out.mkdir(parents=True, exist_ok=True)
    texts = {}
    for name, table in tables.items():
        frame = table.copy()
        if isinstance(frame.columns, pd.MultiIndex):
            frame.columns = [" | ".join(map(str, c)) for c in frame.columns]
        texts[name] = frame.to_csv(float_format=FLOAT_FORMAT, lineterminator="\n")
    settings = _settings({k: v for k, v in cfg.items() if k not in IGNORED_KEYS})
    code = code_hash(stem)
    old = _unchanged_date(out, texts, settings, code)
    for name, text in texts.items():
        (out / f"{name}.csv").write_text(text)
    meta = {
        "stem": stem,
        "date": date or old or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "dpsynth": __version__,
        "code": code,
        "code_modules": list(STUDY_MODULES.get(stem, ())),
        "settings": settings,
        "tables": sorted(tables),
        "index_levels": {name: int(t.index.nlevels) for name, t in sorted(tables.items())},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out


def _unchanged_date(
    out: Path, texts: Mapping[str, str], settings: Any, code: str | None = None
) -> str | None:
    """The recorded date if ``out`` already holds exactly these tables, settings and code."""
    meta_file = out / "meta.json"
    if not meta_file.is_file():
        return None
    meta = json.loads(meta_file.read_text())
    if meta.get("settings") != settings or sorted(meta.get("tables", [])) != sorted(texts):
        return None
    if meta.get("code") != code:
        return None
    for name, text in texts.items():
        path = out / f"{name}.csv"
        if not path.is_file() or path.read_text() != text:
            return None
    return meta.get("date")


def code_hash(stem: str) -> str | None:
    """SHA-256 of the code behind ``stem``'s results (:data:`STUDY_MODULES`, their dpsynth
    imports, the Stan programs; :func:`dpsynth.studies.runner.module_fingerprint`), or None
    for a stem no study module is declared for."""
    from dpsynth.studies.runner import module_fingerprint

    modules = STUDY_MODULES.get(stem)
    return module_fingerprint(*modules) if modules else None


def staleness(stem: str) -> str | None:
    """Why ``stem``'s committed results are older than this checkout's code, or None if they
    were produced by it (the recorded ``code`` equals :func:`code_hash`). Compares file
    contents only. None also when nothing is committed or no study module is declared."""
    meta_file = results_dir(stem) / "meta.json"
    if not meta_file.is_file():
        return None
    current = code_hash(stem)
    if current is None:  # no study module declared: nothing to compare with
        return None
    recorded = json.loads(meta_file.read_text()).get("code")
    if recorded is None:
        return "no code hash recorded (committed before results recorded one)"
    if recorded != current:
        return f"code hash {recorded[:12]} recorded, {str(current)[:12]} in this checkout"
    return None


@dataclass
class PaperScale:
    """Committed paper-scale tables of one notebook (possibly none) and how to label them."""

    stem: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    written: bool = False

    @property
    def available(self) -> bool:
        return bool(self.tables)

    @property
    def stale(self) -> str | None:
        """Why these results are older than this checkout's code (:func:`staleness`), or None."""
        return None if self.written or not self.available else staleness(self.stem)

    @property
    def label(self) -> str:
        """Column label: "dpsynth at paper scale (committed, <date>[, stale])"."""
        stale = ", stale" if self.stale else ""
        return f"dpsynth at paper scale (committed, {self.meta.get('date', 'undated')}{stale})"

    @property
    def note(self) -> str:
        """One line saying what was written, read, or that nothing is committed yet."""
        where = f"results/{self.stem}/"
        if self.written:
            return f"paper profile: wrote {len(self.tables)} paper-scale tables to {where}"
        if self.available:
            text = f"read the committed paper-scale tables of {where} ({self.meta.get('date')})"
            if self.stale:
                text += (
                    f"; STALE: older than the code this build runs ({self.stale}); "
                    f"`{REGENERATE}` regenerates them"
                )
            return text
        return (
            f"no committed paper-scale results yet ({where} is empty): run this notebook "
            "with profile='paper' to produce them"
        )

    def get(self, name: str) -> pd.DataFrame | None:
        return self.tables.get(name)


def load(stem: str) -> PaperScale:
    """Read ``<stem>/*.csv`` and ``meta.json`` (an empty :class:`PaperScale` if absent).

    Each table gets back the index it was saved with (``meta.json`` records its levels).
    """
    where = results_dir(stem)
    meta_file = where / "meta.json"
    if not meta_file.is_file():
        return PaperScale(stem)
    meta = json.loads(meta_file.read_text())
    levels = meta.get("index_levels", {})
    tables = {}
    for name in meta.get("tables", []):
        path = where / f"{name}.csv"
        if path.is_file():
            tables[name] = pd.read_csv(path, index_col=list(range(int(levels.get(name, 1)))))
    return PaperScale(stem, tables, meta)


def paper_scale(
    stem: str,
    tables: Mapping[str, pd.DataFrame],
    cfg: Mapping[str, Any],
    profiles: Mapping[str, Mapping[str, Any]],
) -> PaperScale:
    """Write ``tables`` under a true paper-profile run (:func:`is_paper_run`), else read back.

    Returns the committed tables (those just written, or those read), with a ``note`` to
    print.
    """
    if is_paper_run(cfg, profiles):
        save(stem, tables, cfg)
        out = load(stem)
        out.written = True
        return out
    return load(stem)


def run_label(cfg: Mapping[str, Any], **sizes: Any) -> str:
    """Column label of this run: "this run (ci profile: R = 2, n = 300)".

    ``sizes``: the settings that say how big the run is, as name=value (e.g. R=2, n=300);
    a name given as None is looked up in ``cfg``.
    """
    parts = [f"{k} = {cfg.get(k) if v is None else v}" for k, v in sizes.items()]
    inner = f"{cfg.get('profile', '?')} profile" + (": " + ", ".join(parts) if parts else "")
    return f"this run ({inner})"
