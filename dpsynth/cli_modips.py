"""CLI hooks for modips.SBS synthesis and for combining inferences from m synthetic datasets.

``dpsynth/cli.py`` owns parsing of the shared options (``--epsilon``, ``--bounds``, ``--m``,
``--seed``, ``--column``); this module adds the SBS-only options, runs SBS (Liu, Algorithm 1 with
modips.SBS) and registers the ``combine`` subcommand (Liu, Theorem 7 and Section 5.2 rules).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.errors import InputError, require_bounds, require_finite_positive
from dpsynth.inference import ESTIMANDS, RULES, combine_frame
from dpsynth.mechanisms import SET_COLUMN
from dpsynth.modips import BOUNDINGS, DATA_TYPES, SANITIZATIONS, modips, sbs_model
from dpsynth.primitives import BudgetLedger


def add_sbs_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options used only by ``--mechanism sbs`` to the synthesize parser."""
    g = parser.add_argument_group("modips.SBS options (--mechanism sbs)")
    g.add_argument(
        "--data-type",
        choices=DATA_TYPES,
        default="gaussian",
        help="binary (0/1, uniform prior) or gaussian (default)",
    )
    g.add_argument(
        "--bounding",
        choices=BOUNDINGS,
        default="bit",
        help="legitimize out-of-bound values: bit (default) or truncation",
    )
    g.add_argument(
        "--sanitization",
        choices=SANITIZATIONS,
        default="individualized",
        help="Gaussian, unknown variance: communal (Def 5) or individualized (Def 6, default)",
    )
    g.add_argument(
        "--allocation",
        type=float,
        default=None,
        metavar="W",
        help="individualized: share of each set's budget for the mean, in (0,1); default 0.5",
    )
    g.add_argument(
        "--known-sd",
        type=float,
        default=None,
        metavar="SD",
        help="Gaussian with known standard deviation SD (sanitizes the mean only)",
    )


def _validate_values(values: Any, column: str, data_type: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError("--column", f"column {column!r} must be numeric") from None
    if arr.size == 0:
        raise InputError("--column", f"column {column!r} is empty")
    if np.isnan(arr).any():
        raise InputError(
            "--column",
            f"column {column!r} has {int(np.isnan(arr).sum())} missing (NaN) value(s)",
        )
    if not np.isfinite(arr).all():
        raise InputError("--column", f"column {column!r} has infinite values")
    if data_type == "binary" and not np.isin(arr, (0.0, 1.0)).all():
        raise InputError("--column", f"--data-type binary needs 0/1 values in column {column!r}")
    if data_type == "gaussian" and arr.size < 2:
        raise InputError("--column", "Gaussian SBS needs at least 2 records")
    return arr


def synthesize_sbs(
    values: np.ndarray, args: argparse.Namespace
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run modips.SBS: m synthetic datasets, each from a posterior sample sanitized with ε/m.

    Returns the synthetic records (column ``args.column`` and, when m > 1, ``synthetic_set`` 1..m)
    and a JSON-able report holding only DP outputs (sanitized statistics) and public settings.
    Truncation of sanitized statistics runs the Laplace noise at half the per-statistic budget so
    that the released statistic is ε-DP (rejection truncation at ε would only be 2ε-DP).
    """
    column = str(getattr(args, "column", None) or "value")
    epsilon = require_finite_positive("--epsilon", getattr(args, "epsilon", None))
    m = getattr(args, "m", 1)
    if m is None or isinstance(m, bool) or int(m) != m or int(m) < 1:
        raise InputError("--m", f"must be an integer >= 1 (got {m!r})")
    m = int(m)
    data_type = getattr(args, "data_type", "gaussian")
    bounding = getattr(args, "bounding", "bit")
    sanitization = getattr(args, "sanitization", "individualized")
    allocation = getattr(args, "allocation", None)
    known_sd = getattr(args, "known_sd", None)
    for param, value, choices in (
        ("--data-type", data_type, DATA_TYPES),
        ("--bounding", bounding, BOUNDINGS),
        ("--sanitization", sanitization, SANITIZATIONS),
    ):
        if value not in choices:
            raise InputError(param, f"must be one of {', '.join(choices)} (got {value!r})")
    bounds = getattr(args, "bounds", None)
    if data_type == "gaussian":
        if bounds is None:
            raise InputError("--bounds", "public bounds LO HI are required for Gaussian data")
        if len(bounds) != 2:
            raise InputError("--bounds", "give exactly two numbers LO HI")
        lo, hi = require_bounds("--bounds", *bounds)
    else:
        lo, hi = 0.0, 1.0
    if known_sd is not None:
        known_sd = require_finite_positive("--known-sd", known_sd)
    if allocation is not None:
        if data_type != "gaussian" or known_sd is not None or sanitization != "individualized":
            raise InputError(
                "--allocation",
                "only applies to Gaussian data with unknown variance "
                "and --sanitization individualized",
            )
        allocation = float(allocation)
        if not (0.0 < allocation < 1.0):
            raise InputError("--allocation", f"must lie in (0, 1) (got {allocation!r})")
    w = 0.5 if allocation is None else allocation
    arr = _validate_values(values, column, data_type)
    seed = getattr(args, "seed", None)
    rng = np.random.default_rng(seed)
    ledger = BudgetLedger(epsilon, param="--epsilon")
    model = sbs_model(
        data_type,
        bounds=(lo, hi),
        known_sd=known_sd,
        bounding=bounding,
        sanitization=sanitization,
        allocation=w,
        strict_truncation=True,
    )
    result = modips(arr, model, m, epsilon, rng, ledger=ledger, data_label=column)
    frame = result.to_frame(column, SET_COLUMN)
    if data_type == "binary":
        frame[column] = frame[column].astype(int)
    sanitized = [{"set": i, **draw.sanitized} for i, draw in enumerate(result.thetas, start=1)]
    report: dict[str, Any] = {
        "mechanism": "sbs",
        "guarantee": "DP",
        "neighbouring": "bounded (substitution of one record; n public)",
        "epsilon_target": epsilon,
        "epsilon": ledger.spent,
        "epsilon_per_set": epsilon / m,
        "n_records": int(arr.size),
        "n_rows": len(frame),
        "m": m,
        "seed": seed,
        "data_type": data_type,
        "model": result.model,
        "bounding": bounding,
        "bounds": [lo, hi] if data_type == "gaussian" else None,
        "known_sd": known_sd,
        "sanitization": (sanitization if data_type == "gaussian" and known_sd is None else None),
        "allocation": (
            w
            if data_type == "gaussian" and known_sd is None and sanitization == "individualized"
            else None
        ),
        "budget_split_per_set": [
            {"statistic": what, "epsilon": e} for what, e in result.thetas[0].spends
        ],
        "sanitized_statistics": sanitized,
        "ledger": ledger.to_dict(),
        "notes": [
            "Keep the seed secret: with it the noise, hence the raw statistics, can be recomputed.",
        ],
    }
    if bounding == "truncation":
        report["notes"].append(
            "Truncated sanitized statistics use Laplace noise at half budget (ε-DP)."
        )
    json.dumps(report)  # fail here, not at write time, if anything is not JSON-able
    return frame, report


def add_combine_command(subparsers: Any) -> None:
    """Register ``combine SYNTH.csv --column C --estimand E [--rule R] [--set-column S]``."""
    p = subparsers.add_parser(
        "combine",
        help="combine inferences from m synthetic datasets (Liu, Theorem 7)",
        description="Per-set estimate and variance of a mean or proportion, combined across sets.",
    )
    p.add_argument("synth", metavar="SYNTH.csv", help="synthetic data CSV (all sets stacked)")
    p.add_argument("--column", required=True, help="column to analyse")
    p.add_argument("--estimand", required=True, choices=ESTIMANDS)
    p.add_argument(
        "--rule",
        choices=RULES,
        default="thm7",
        help="thm7 (default), rubin, raghunathan, raab, or single (one set)",
    )
    p.add_argument("--set-column", default=SET_COLUMN, help="column numbering the sets")
    p.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    p.set_defaults(func=combine_handler)


def combine_handler(args: argparse.Namespace) -> int:
    """Handler of ``combine``: read the CSV, combine, print a summary or JSON; 0 on success."""
    path = Path(args.synth)
    if not path.is_file():
        raise InputError("SYNTH.csv", f"file not found: {path}")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError("SYNTH.csv", f"cannot read CSV: {exc}") from None
    if args.column not in df.columns:
        raise InputError(
            "--column",
            f"column {args.column!r} not in {path.name} (have {list(df.columns)})",
        )
    if df.empty:
        raise InputError("SYNTH.csv", "no records")
    has_sets = args.set_column in df.columns
    if args.rule != "single" and not has_sets:
        raise InputError(
            "--set-column",
            f"column {args.set_column!r} not found; rule {args.rule!r} "
            "needs m >= 2 sets (use --rule single for one set)",
        )
    if has_sets and df[args.set_column].isna().any():
        raise InputError("--set-column", f"column {args.set_column!r} has missing values")
    m = int(df[args.set_column].nunique()) if has_sets else 1
    if args.rule == "single" and m != 1:
        raise InputError("--rule", f"'single' needs exactly one synthetic set (found {m})")
    if args.rule in ("thm7", "rubin", "raghunathan") and m < 2:
        raise InputError("--rule", f"rule {args.rule!r} needs m >= 2 synthetic sets (found {m})")
    try:
        res = combine_frame(df, args.column, args.estimand, args.rule, args.set_column)
    except InputError as exc:  # re-label library parameter names with the CLI's
        cli = {"column": "--column", "estimand": "--estimand", "rule": "--rule"}.get(
            exc.param, "--column"
        )
        raise InputError(cli, str(exc).split(": ", 1)[-1]) from None
    if args.json:
        print(
            json.dumps(
                {"column": args.column, "estimand": args.estimand, **res.to_dict()},
                indent=2,
            )
        )
        return 0
    df_txt = "inf (normal)" if np.isinf(res.df) else f"{res.df:.4g}"
    print(f"{args.estimand} of {args.column!r} from m = {res.m} synthetic set(s), rule {res.rule}")
    print(f"  estimate  {res.estimate:.6g}")
    print(f"  variance  {res.variance:.6g}   (SE {res.se:.6g})")
    print(f"  df        {df_txt}")
    print(f"  {round(res.level * 100)}% CI    [{res.lower:.6g}, {res.upper:.6g}]")
    return 0
