"""What a release promises the curator, checked in one place before and after the mechanism.

:func:`dpsynth.release.single.synthesize` calls these: the privacy-budget charge made before any
record is read (:func:`charge_budget`), missing values refused or dropped under a stated
neighbour map (:func:`missing_outcome`, :func:`require_complete_covariates`,
:func:`check_drop_missing`), and the report's statements of what the release used and what
its epsilon means (:func:`public_inputs`, :func:`add_fields`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.errors import (
    EPSILON_SANITY_LIMIT,
    InputError,
    count_first,
    from_data,
    require_drop_missing_usage,
)
from dpsynth.mechanisms import registry
from dpsynth.privacy import accounting, budget


def charge_budget(
    budget_file: str | Path | budget.Charge | None,
    budget_total: float | None,
    dataset_sha256: str | None,
    epsilon: float,
    what: str,
    arrays: tuple[Any, ...],
) -> budget.Charge | None:
    """The attempt's charge to the dataset's ledger (None without a ``budget_file``).

    A :class:`~dpsynth.privacy.budget.Charge` made by the caller (the CLI charges before it reads
    the file) is used as it is; a path is charged here, the dataset identified by
    ``dataset_sha256`` or else by a hash of ``arrays`` (the outcome and covariates).
    """
    if budget_file is None:
        if budget_total is not None or dataset_sha256 is not None:
            param = "budget_total" if budget_total is not None else "dataset_sha256"
            raise InputError(param, "only applies with budget_file")
        return None
    if isinstance(budget_file, budget.Charge):
        if abs(budget_file.epsilon - epsilon) > 1e-12 * max(epsilon, 1.0):
            raise InputError("budget_file", "the charge was made for another epsilon")
        return budget_file
    identity = dataset_sha256 or budget.array_sha256(*arrays)
    return budget.charge(
        budget_file, dataset_sha256=identity, epsilon=epsilon, what=what, total=budget_total
    )


def drop_incomplete_covariates(
    y: Any, X: Any, covariates: pd.DataFrame | None
) -> tuple[Any, Any, pd.DataFrame | None, int]:
    """The records whose public covariates are all present (``drop_missing`` in a regression).

    A row of ``X`` with a NaN, or of ``covariates`` with a missing value, is dropped from
    ``y``, ``X`` and ``covariates``. The covariates are public, so which records are dropped,
    and how many, is public too: the number of records (and of synthetic records) stays n.
    """
    Xa = np.asarray(X, dtype=float)
    keep = ~np.isnan(Xa.reshape(Xa.shape[0], -1)).any(axis=1)
    if covariates is not None:
        keep &= ~covariates.isna().any(axis=1).to_numpy()
    dropped = int((~keep).sum())
    if dropped == 0:
        return y, X, covariates, 0
    if not keep.any():
        raise InputError("covariates", "every record has a missing covariate")
    kept_cov = None if covariates is None else covariates.loc[keep].reset_index(drop=True)
    return np.asarray(y)[keep], Xa[keep], kept_cov, dropped


def missing_outcome(y: Any, column: str, drop: bool, regression: bool = False) -> tuple[Any, int]:
    """``y`` without missing values: refused (column, count, first record) or dropped.

    In a ``regression`` a missing outcome is refused even with ``drop``: the synthetic file
    lists the covariates of the records kept, which would tell whose outcome was missing."""
    try:
        arr = np.asarray(y, dtype=float).ravel()
    except (TypeError, ValueError):
        return y, 0  # not numeric: the model's checks name it
    missing = np.isnan(arr)
    k = int(missing.sum())
    if k == 0:
        return y, 0
    if not drop or regression:
        how = (
            "in a regression they cannot be dropped (the synthetic file lists the covariates "
            "of the records kept, which would tell whose outcome was missing): synthesize "
            "the table with synthesize-table, which synthesizes a missingness indicator"
            if regression
            else "drop such records with drop_missing=True (then give n_synthetic)"
        )
        raise InputError(
            "y",
            f"column {column!r} has missing values "
            f"{from_data(count_first(missing, 'value'))}; {how}",
        )
    if k == arr.size:
        raise InputError("y", f"every record of column {column!r} is missing")
    return arr[~missing], k


def require_complete_covariates(X: Any, covariates: pd.DataFrame | None) -> None:
    """Refuse missing covariate values, naming the covariate and the count (never recoded)."""
    if covariates is not None:
        for name in covariates.columns:
            missing = covariates[name].isna().to_numpy()
            if missing.any():
                raise _missing_covariate(repr(str(name)), missing)
    if X is None:
        return
    try:
        Xa = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        return
    Xa = Xa[:, None] if Xa.ndim == 1 else Xa
    for j in range(Xa.shape[1] if Xa.ndim == 2 else 0):
        if np.isnan(Xa[:, j]).any():
            raise _missing_covariate(f"column {j + 1} of X", np.isnan(Xa[:, j]))


def _missing_covariate(name: str, missing: np.ndarray) -> InputError:
    return InputError(
        "covariates",
        f"covariate {name} has missing values {from_data(count_first(missing, 'value'))}; "
        "a regression needs every covariate, and "
        "missing values are never recoded: complete or remove them in the file, drop such "
        "records (drop_missing: the covariates are public, so this costs no privacy), or "
        "synthesize the table with synthesize-table (missingness indicators)",
    )


def check_drop_missing(
    drop: bool,
    mechanism: str,
    X: Any,
    n_synthetic: int | None,
    bounds: tuple[float, float] | None,
    tuning: dict[str, Any],
) -> dict[str, Any]:
    """Refuse ``drop_missing`` where dropping would leak or change the bound; return ``tuning``.

    Dropping makes the number of records kept private, so the number of synthetic
    records must be public (``n_synthetic``); a regression writes one record per kept
    covariate row (which rows were kept would tell whose outcome was missing) and SBS's
    sensitivities assume n public, so both are refused. PH's default number of bins then
    comes from ``n_synthetic``.
    """
    require_drop_missing_usage(
        drop, mechanism, X is not None, n_synthetic, registry.needs_public_n(mechanism)
    )
    if not drop:
        return tuning
    if registry.histogram(mechanism) and tuning.get("n_bins") is None:
        from dpsynth.mechanisms.histogram import ph_bins

        bins = ph_bins(int(n_synthetic), bounds, bool(tuning.get("integer")))
        return {**tuning, "n_bins": bins}
    return tuning


def design_names(X: Any, covariates: pd.DataFrame | None) -> list[str]:
    """The names of the design's columns, matched against ``covariates`` as given.

    A numeric covariate equal to the next column of ``X`` keeps its name; otherwise its
    levels, dummy-coded as :func:`dpsynth.models.catalogue.covariate_matrix` does (first level
    dropped), name the next columns (``sex_male``). Where the columns do not match (a design
    built otherwise), ``x1 ... xp``.
    """
    Xa = np.asarray(X, dtype=float)
    Xa = Xa[:, None] if Xa.ndim == 1 else Xa
    fallback = [f"x{j + 1}" for j in range(Xa.shape[1])]
    if covariates is None or len(covariates) != Xa.shape[0]:
        return fallback
    names: list[str] = []
    for c in covariates.columns:
        col, j = covariates[c], len(names)
        if pd.api.types.is_numeric_dtype(col) and j < Xa.shape[1]:
            if np.allclose(col.to_numpy(dtype=float), Xa[:, j], equal_nan=True):
                names.append(str(c))
                continue
        dummies = pd.get_dummies(col.astype(str), prefix=str(c), drop_first=True, dtype=float)
        k = dummies.shape[1]
        if j + k > Xa.shape[1] or not np.array_equal(dummies.to_numpy(), Xa[:, j : j + k]):
            return fallback
        names += [str(d) for d in dummies.columns]
    return names if len(names) == Xa.shape[1] else fallback


def public_inputs(
    column: str,
    X: Any,
    covariates: pd.DataFrame | None,
    bounds: tuple[float, float] | None,
) -> dict[str, Any]:
    """The report's statement of the public inputs: outcome column, covariates, bounds."""
    if covariates is not None:
        names = [str(c) for c in covariates.columns]
    elif X is not None:
        Xa = np.asarray(X)
        names = [f"x{j + 1}" for j in range(1 if Xa.ndim == 1 else Xa.shape[1])]
    else:
        names = []
    return {
        "outcome_column": column,
        "covariates": names,
        "bounds": None if bounds is None else [float(b) for b in bounds],
        "bounds_meaning": (
            "public bounds of the outcome, set by the curator (never read from the data): "
            "every record lies within them and so does every synthetic record"
            if bounds is not None
            else "no public bounds"
        ),
    }


LARGE_EPSILON_MEANING = (
    "epsilon {eps:g} is above dpsynth's sanity limit of {limit:g} per release and was "
    "allowed explicitly: the release can change anyone's odds about one record by a factor "
    "up to e^epsilon = {factor:.3g}, which protects almost nothing; treat it as a "
    "release without a meaningful privacy guarantee"
)


def add_fields(
    release: Any,
    epsilon: float,
    charge: budget.Charge | None,
    drop_missing: bool,
    n_dropped: int,
    public_files: dict[str, str] | None,
) -> None:
    """Add the safeguards' statements to the report and their counts to the diagnostics."""
    report, diag = release.report, release.diagnostics
    if epsilon > EPSILON_SANITY_LIMIT:
        text = LARGE_EPSILON_MEANING.format(
            eps=epsilon, limit=EPSILON_SANITY_LIMIT, factor=float(np.exp(min(epsilon, 700)))
        )
        report["large_epsilon"] = text
        report.setdefault("caveats", []).append(text)
    if charge is not None:
        report["budget"] = charge.to_report()
        diag["budget"] = charge.to_diagnostics()
    if drop_missing:
        diag["n_dropped_missing"] = n_dropped
    if drop_missing and report.get("covariates"):
        report["missing_values"] = {
            "dropped": f"{n_dropped} record(s) with a missing covariate were dropped before "
            "the release; the covariates are public, so this selection (and its count) is "
            "public and the number of records n is unchanged in meaning",
        }
    elif drop_missing:
        report["missing_values"] = {
            "dropped": "records with a missing outcome were dropped before the release; "
            "how many is in the confidential diagnostics only",
            "neighbour_map": accounting.DROPPED_RECORDS_MAP[report.get("neighbours", "")],
        }
    if public_files:
        report["public_files_sha256"] = dict(public_files)
