"""Plan a release before touching the confidential data: try the mechanisms on a public file.

Which mechanism, model and centring will give a useful release at a given epsilon depends on
the data (a beta model on skewed income kept half the mean). The curator can learn
it without reading the confidential data: :func:`plan` runs each candidate on a **public**
reference file (an earlier period, a public-use sample), as if that file were the confidential
data, through the one release path :func:`dpsynth.release.single.synthesize`, and tabulates the
verdict of :func:`dpsynth.curator.column_verdict.utility_verdict` per candidate, best first.

How the public file is used. It is split at random (a fixed seed) into two halves: the
*stand-in* half plays the confidential data; the other half plays the public reference that
the real release will have (the earlier period of the censoring paper's Section 4.5), from
which Censor_w takes its weights and reference centring its parameter value
(:func:`reference_point`). So the plan runs the same steps, with the same kind of public
information, as the release it predicts. Utility depends on n, so the stand-in is then
resampled to the confidential file's size (``n_confidential``, a public number the curator
states; default: the public file's size): with replacement when it is larger than the half,
without when smaller. The table's ``attrs`` and :func:`sizes_line` state the sizes used.
Everything is public, so fixed seeds are fine: the warnings
that seeded releases are not private are silenced here, and the plan's releases are never
published.

Only the reference-file route is implemented. When only public parameters are known (n,
epsilon, bounds), simulate a reference from a public distribution yourself (e.g. a
log-normal with published moments, ``numpy.random.default_rng(0).lognormal(...)``) and pass
it as ``reference_y``; the plan is then as good as that distribution.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.curator.column_verdict import VERDICTS
from dpsynth.errors import InputError
from dpsynth.mechanisms import registry
from dpsynth.models.catalogue import get_model
from dpsynth.privacy import relations
from dpsynth.release.reference import reference_point
from dpsynth.release.settings import CANDIDATES, DEFAULT_CANDIDATES, PlanSettings
from dpsynth.release.single import KnownSeedWarning, synthesize
from dpsynth.sampler import Sampler

__all__ = [
    "CANDIDATES",
    "DEFAULT_CANDIDATES",
    "plan",
    "reference_point",
    "resize_stand_in",
    "sizes_line",
    "split_reference",
]

COLUMNS = (
    "candidate",
    "mechanism",
    "centring",
    "guarantee",
    "verdict",
    "mean_error_pct",
    "sd_error_pct",
    "max_ecdf",
    "ci_overlap",
    "zero_share_error",
    "censored_share",
    "zero_weight_share",
    "next_step",
    "seconds",
)


def split_reference(
    reference_y: Any, reference_X: Any = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """Split a public file at random into (stand-in y, stand-in X, reference y, reference X)."""
    y = np.asarray(reference_y, dtype=float).ravel()
    if y.size < 4:
        raise InputError("reference_y", "needs at least 4 records to split into two halves")
    order = np.random.default_rng(seed).permutation(y.size)
    a, b = np.sort(order[: y.size // 2]), np.sort(order[y.size // 2 :])
    if reference_X is None:
        return y[a], None, y[b], None
    X = np.asarray(reference_X, dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    if X.shape[0] != y.size:
        raise InputError("reference_X", f"needs one row per record of reference_y ({y.size})")
    return y[a], X[a], y[b], X[b]


def resize_stand_in(
    y: np.ndarray, X: np.ndarray | None, n: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """The stand-in half resampled to ``n`` records (the confidential size): with replacement
    when n exceeds the half, without when it does not; X rows follow their records."""
    n = int(n)
    if n < 2:
        raise InputError("n_confidential", f"must be at least 2 records (got {n})")
    if n == y.size:
        return y, X
    rng = np.random.default_rng([seed, 4])
    idx = np.sort(rng.choice(y.size, size=n, replace=n > y.size))
    return y[idx], None if X is None else X[idx]


def sizes_line(table: pd.DataFrame) -> str:
    """The sizes a plan used, in words (for the curator's terminal)."""
    a = table.attrs
    how = (
        "as stated (--n-confidential)"
        if a["n_confidential_stated"]
        else ("default: the public file's size; state the confidential size with --n-confidential")
    )
    return (
        f"plan sizes: public file {a['n_public']} records, split into a stand-in half of "
        f"{a['n_half']} and a reference half of {a['n_reference']}; the stand-in was resampled "
        f"to {a['n_stand_in']} records, the confidential size ({how})"
    )


def plan(
    reference_y: Any,
    *,
    model: str,
    epsilon: float,
    m: int = 1,
    bounds: tuple[float, float] | None = None,
    mechanisms: Sequence[str] = DEFAULT_CANDIDATES,
    reference_X: Any = None,
    seed: int | None = None,
    sampler: Sampler | None = None,
    neighbours: relations.Neighbours = relations.DEFAULT_NEIGHBOURS,
    n_confidential: int | None = None,
) -> pd.DataFrame:
    """Expected utility of each candidate on the public ``reference_y``, best first.

    ``mechanisms`` are names of :data:`CANDIDATES`. Each runs one release of ``m`` sets at
    total ``epsilon`` on the stand-in half of the file (:func:`split_reference`), Censor_w
    weights and reference centres from the other half, and is judged by
    :func:`dpsynth.curator.column_verdict.utility_verdict` against the stand-in half. ``seed`` (default 0:
    the file is public) fixes the split and every fit. Rows are sorted by verdict, then
    max-ECDF, then mean error; a candidate that the release path refuses (e.g. PH without
    bounds) gets the verdict "refused" and the reason as its next step, at the end.
    ``n_confidential`` (public: the size of the file the real release will use; default the
    size of ``reference_y``) is the number of records each candidate is judged at
    (:func:`resize_stand_in`); ``attrs`` hold the sizes used (:func:`sizes_line`).
    """
    checked = PlanSettings(epsilon, m, tuple(mechanisms), bounds, n_confidential, neighbours)
    mechanisms = checked.validate().mechanisms
    seed = 0 if seed is None else int(seed)
    spec = get_model(model)
    y, X, ref_y, ref_X = split_reference(reference_y, reference_X, seed)
    n_half, n_public = y.size, y.size + ref_y.size
    n_conf = n_public if n_confidential is None else n_confidential
    y, X = resize_stand_in(y, X, n_conf, seed)
    point = None
    if any(CANDIDATES[c][1] == "reference" for c in mechanisms):
        point = reference_point(
            ref_y, model, bounds=bounds, reference_X=ref_X, X=X, sampler=sampler, seed=seed + 1
        )
    settings = {
        "epsilon": epsilon,
        "m": m,
        "bounds": bounds,
        "seed": seed,
        "sampler": sampler,
        "neighbours": neighbours,
    }
    rows = [
        _candidate_row(c, (y, X), (ref_y, ref_X), point, spec.name, spec.outcome, settings)
        for c in mechanisms
    ]
    for row in rows:
        row["next_step"] = _checked_advice(row, rows)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    rank = frame["verdict"].map({v: i for i, v in enumerate((*VERDICTS, "refused"))})
    order = np.lexsort(
        (frame["mean_error_pct"].fillna(np.inf), frame["max_ecdf"].fillna(np.inf), rank)
    )
    frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs.update(
        {
            "n_public": int(n_public),
            "n_half": int(n_half),
            "n_stand_in": int(y.size),
            "n_reference": int(ref_y.size),
            "n_confidential_stated": n_confidential is not None,
            "reference_point": point,
        }
    )
    return frame


def _candidate_row(
    candidate: str,
    stand_in: tuple[np.ndarray, np.ndarray | None],
    reference: tuple[np.ndarray, np.ndarray | None],
    point: Mapping[str, Any] | None,
    model: str,
    outcome: str,
    settings: Mapping[str, Any],
) -> dict[str, Any]:
    """One candidate's release on the stand-in half and its verdict (one table row)."""
    (y, X), (ref_y, ref_X) = stand_in, reference
    mechanism, centring = CANDIDATES[candidate]
    tuning: dict[str, Any] = {}
    if centring == "reference":
        tuning["centring"] = dict(point or {})
    if registry.histogram(mechanism) and outcome == "count":
        tuning["integer"] = True
    extra: dict[str, Any] = {}
    if registry.takes_reference(mechanism):
        extra = {"reference": ref_y, "reference_X": ref_X}
    row: dict[str, Any] = {"candidate": candidate, "mechanism": mechanism, "centring": centring}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KnownSeedWarning)
            release = synthesize(
                y,
                model=model,
                mechanism=mechanism,
                epsilon=settings["epsilon"],
                m=settings["m"],
                neighbours=settings["neighbours"],
                X=X,
                bounds=settings["bounds"],
                n_synthetic=y.size if settings["neighbours"] == "add-remove" else None,
                seed=settings["seed"],
                sampler=settings["sampler"],
                **extra,
                **tuning,
            )
    except InputError as exc:
        return {**row, "verdict": "refused", "next_step": str(exc), "seconds": _since(start)}
    v = release.diagnostics["utility"]  # every release carries the curator's verdict
    if v.get("verdict") not in VERDICTS:
        return {
            **row,
            "verdict": "refused",
            "next_step": v.get("reason", ""),
            "seconds": _since(start),
        }
    summary, shares = v["summary"], v["shares"]
    # the plan's releases are seeded; the guarantee an unseeded release would state
    guarantee = release.report.get("if_unseeded", release.report).get("guarantee")
    return {
        **row,
        "guarantee": guarantee,
        "verdict": v["verdict"],
        "mean_error_pct": 100 * summary["mean_error"],
        "sd_error_pct": 100 * summary["sd_error"],
        "max_ecdf": summary["max_ecdf"],
        "ci_overlap": summary.get("ci_overlap"),
        "zero_share_error": summary.get("zero_share_error"),
        "censored_share": shares["censored"],
        "zero_weight_share": shares["zero_weight"],
        "next_step": _unseeded_next_step(v, guarantee),
        "next_moves": v.get("next_moves", []),
        "seconds": _since(start),
    }


def _move_candidate(move: str, mechanism: str, centring: str) -> str | None:
    """The candidate of :data:`CANDIDATES` that makes a next step's move (None: not one)."""
    reference = "+reference" if centring == "reference" else ""
    return {
        "censor_uw": f"censor-uw{reference}",
        "centre_reference": f"{mechanism}+reference",
        "ph": "ph",
        "model_based": "censor-uw+reference",
    }.get(move)


def _checked_advice(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> Any:
    """The row's next step, with what each of its checkable moves gives on the same public
    file: the verdict and figures of the candidate that makes the move, or how to check it
    when that candidate was not run (moves such as "a larger epsilon" are not candidates)."""
    by_name = {r["candidate"]: r for r in rows}
    notes: list[str] = []
    for move in row.get("next_moves") or ():
        name = _move_candidate(move, row["mechanism"], row["centring"])
        if name is None or name not in CANDIDATES or name == row["candidate"]:
            continue
        other = by_name.get(name)
        if other is None:
            notes.append(f"{name} not run here (add it to the mechanisms to compare)")
        elif other.get("verdict") not in VERDICTS:
            notes.append(f"{name} was refused")
        else:
            notes.append(
                f"{name} gives {other['verdict']}: mean error {other['mean_error_pct']:.1f}%, "
                f"max-ECDF {other['max_ecdf']:.3f}"
            )
    if not notes:
        return row.get("next_step")
    return f"{row.get('next_step')} (on this public file: {'; '.join(notes)})"


def _unseeded_next_step(verdict: dict[str, Any], guarantee: str | None) -> str:
    """The verdict's next step as an unseeded release would get it (the plan's runs are
    seeded, so a good verdict says "no DP guarantee" even for a strict-DP candidate)."""
    if verdict.get("rules", [None])[0] == "good_not_dp" and guarantee == "DP":
        from dpsynth.curator.column_verdict import RULES

        return dict(RULES)["good"]
    return verdict["next_step"]


def _since(start: float) -> float:
    return round(time.perf_counter() - start, 2)
