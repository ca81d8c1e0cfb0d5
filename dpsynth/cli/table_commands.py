"""Command line for whole tables: ``synthesize-table`` and ``plan-table``.

Follows :mod:`dpsynth.cli.commands`'s contract and uses its helpers: bad input gets one line on
stderr naming the flag (a spec's error names ``--spec``, its key and column), exit
status 2, nothing written; the spec, the paths and the data's header are checked before
the scientific stack is loaded or any value is read; the budget is charged before the
data are read; every output is written atomically. Registered by
:func:`add_table_commands` (one line in :func:`dpsynth.cli.commands.build_parser`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from dpsynth.cli.files import check_input_file, check_output_paths, read_csv
from dpsynth.cli.options_table import check_ranges
from dpsynth.errors import (
    InputError,
    require_adapt_delta,
    require_epsilon,
    require_sane_epsilon,
)
from dpsynth.table.spec import (
    TABLE_ADAPT_DELTA,
    TABLE_ITER_SAMPLING,
    TableSpec,
    load_spec,
    require_columns,
)

TABLE_FLAGS = {
    "epsilon": "--epsilon",
    "m": "--m",
    "seed": "--seed",
    "chains": "--chains",
    "iter_warmup": "--iter-warmup",
    "iter_sampling": "--iter-sampling",
    "sampler": "--chains/--iter-*",
    "adapt_delta": "--adapt-delta",
    "budget_file": "--budget-file",
    "budget_total": "--budget-total",
    "data": "DATA.csv",
    "DATA.csv": "DATA.csv",
    "PUBLIC.csv": "PUBLIC.csv",
}
"""Library parameter -> flag for the table commands; any other parameter is a spec key,
reported as ``--spec: KEY: ...``."""


def add_table_commands(sub: Any) -> None:
    """Add ``synthesize-table`` and ``plan-table`` to the ``dpsynth`` subparsers."""
    s = sub.add_parser(
        "synthesize-table",
        help="release a whole synthetic table (several confidential columns, one budget)",
        description="Release m synthetic copies of a table under a total budget --epsilon: "
        "the confidential columns of --spec in order, each a censored regression on the "
        "public columns and the columns before it (book: A whole table).",
    )
    s.add_argument("input", metavar="DATA.csv", help="confidential table (UTF-8 CSV)")
    _common(s)
    s.add_argument("--out", required=True, metavar="OUT.csv", help="synthetic table")
    s.add_argument("--report", required=True, metavar="REPORT.json", help="public report")
    s.add_argument(
        "--diagnostics", metavar="DIAG.json", help="CONFIDENTIAL diagnostics (never publish)"
    )
    s.add_argument("--budget-file", default=None, help="the dataset's privacy-budget ledger")
    s.add_argument("--budget-total", type=float, default=None, help="cap of a new budget file")
    s.set_defaults(func=synthesize_table_command)
    p = sub.add_parser(
        "plan-table",
        help="try a table spec on a public reference file first",
        description="Run the same table release on a PUBLIC file and print the plan: per "
        "column its epsilon, convergence and utility (nothing confidential is read).",
    )
    p.add_argument("input", metavar="PUBLIC.csv", help="public reference table (UTF-8 CSV)")
    _common(p)
    p.set_defaults(func=plan_table_command)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="SPEC.toml", help="the table spec")
    p.add_argument("--epsilon", type=float, required=True, help="total budget of the table")
    p.add_argument("--m", type=int, default=1, help="number of synthetic sets (each costs)")
    p.add_argument("--seed", type=int, default=None, help="research runs only: NOT private")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--iter-warmup", type=int, default=1000, help="per chain (default 1000)")
    p.add_argument(
        "--iter-sampling",
        type=int,
        default=TABLE_ITER_SAMPLING,
        help=f"per chain (default {TABLE_ITER_SAMPLING})",
    )
    p.add_argument(
        "--adapt-delta",
        type=float,
        default=TABLE_ADAPT_DELTA,
        help=f"Stan's step-size target (default {TABLE_ADAPT_DELTA})",
    )
    p.add_argument("--allow-large-epsilon", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _as_flags(exc: InputError) -> InputError:
    """A library error with its parameter as the table command's flag (spec keys under --spec)."""
    text = str(exc)
    body = text[len(exc.param) + 2 :] if text.startswith(f"{exc.param}: ") else text
    if exc.param.startswith("-") or exc.param in ("DATA.csv", "PUBLIC.csv"):
        return exc
    if exc.param in TABLE_FLAGS:
        return InputError(TABLE_FLAGS[exc.param], body)
    return InputError("--spec", f"{exc.param}: {body}")


def _checked(args: argparse.Namespace, data_label: str, outputs: dict[str, str | None]):
    """Every check that needs no scientific stack and no value: flags, spec, paths, header."""
    check_ranges(args, "synthesize")  # the option table's ranges (chains, iterations, m)
    if args.m < 1:
        raise InputError("--m", f"must be a positive integer (got {args.m})")
    require_adapt_delta("--adapt-delta", args.adapt_delta)  # the Sampler's rule, before any charge
    require_epsilon("--epsilon", args.epsilon)
    checked = check_output_paths(args.input, outputs)
    try:
        spec = load_spec(args.spec)
    except InputError as exc:
        raise _as_flags(exc) from None
    names = check_input_file(args.input, [], data_label)
    require_columns(spec, names, data_label)
    if spec.reference is not None:
        ref_names = check_input_file(spec.reference, [], "--spec")
        require_columns(spec, ref_names, "--spec")
    require_sane_epsilon("--epsilon", args.epsilon, args.allow_large_epsilon)
    from dpsynth.table.pipeline import require_available_models

    try:
        require_available_models(spec)
    except InputError as exc:
        raise _as_flags(exc) from None
    return spec, checked


def _sampler(args: argparse.Namespace) -> Any:
    from dpsynth.mechanisms.posterior import Sampler

    return Sampler(
        args.chains,
        args.iter_warmup,
        args.iter_sampling,
        adapt_delta=args.adapt_delta,
        quiet=args.quiet,  # each fit's progress in tenths: a censored fit can take minutes
    )


def _run(args: argparse.Namespace, spec: TableSpec, frame: Any, charge: Any) -> Any:
    from dpsynth.release.single import KnownSeedWarning
    from dpsynth.table.pipeline import synthesize_table

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KnownSeedWarning)
        try:
            release = synthesize_table(
                frame,
                spec,
                args.epsilon,
                m=args.m,
                seed=args.seed,
                sampler=_sampler(args),
                allow_large_epsilon=args.allow_large_epsilon,
                budget_file=charge,
                progress=not args.quiet,
            )
        except InputError as exc:
            raise _as_flags(exc) from None
    if any(issubclass(w.category, KnownSeedWarning) for w in caught):
        print("dpsynth: warning: --seed: a seeded release is NOT private", file=sys.stderr)
    return release


def synthesize_table_command(args: argparse.Namespace) -> int:
    """``dpsynth synthesize-table``: charge, read, release, write atomically, print."""
    outputs = {"--out": args.out, "--report": args.report, "--diagnostics": args.diagnostics}
    spec, checked = _checked(args, "DATA.csv", outputs)
    charge = None
    if args.budget_file is not None:
        check_output_paths(args.input, {**outputs, "--budget-file": args.budget_file})
        from dpsynth.privacy import budget

        charge = budget.charge(
            args.budget_file,
            dataset_sha256=budget.file_sha256(args.input),
            epsilon=args.epsilon,
            what=f"table m={args.m} on {Path(args.input).name}",
            total=args.budget_total,
        )
    elif args.budget_total is not None:
        raise InputError("--budget-total", "only applies with --budget-file")
    from dpsynth.privacy.budget import attempt

    with attempt(charge):
        release = _run(args, spec, read_csv(args.input, "DATA.csv"), charge)
        release.write(checked["--out"], checked["--report"], checked.get("--diagnostics"))
    if not args.quiet:
        _print_table_verdict(release.diagnostics.get("verdict", {}))
        rep = release.report
        if rep.get("input_columns_not_released"):
            left = ", ".join(rep["input_columns_not_released"])
            print(f"[dpsynth] not in the spec, so not released: {left}", file=sys.stderr)
        print(f"[dpsynth] guarantee: {rep['guarantee']}; epsilon {rep['epsilon']}", file=sys.stderr)
        print(f"[dpsynth] wrote {', '.join(str(p) for p in checked.values())}", file=sys.stderr)
    return 0


def _print_table_verdict(verdict: dict[str, Any]) -> None:
    """The table verdict on stderr, under the CONFIDENTIAL banner (never in a public file);
    first, for a table without a DP guarantee, the NOT DP line."""
    if verdict.get("not_dp"):
        print(f"[dpsynth] {verdict['not_dp']}", file=sys.stderr)
    print(
        "[dpsynth] CONFIDENTIAL (from the confidential data, no noise): table verdict "
        f"{verdict.get('verdict', 'unavailable')}",
        file=sys.stderr,
    )
    if "driven_by" in verdict:
        d = verdict["driven_by"]
        print(
            f"[dpsynth] CONFIDENTIAL: driven by {d['figure']} {d['value']:.3g} on "
            f"{', '.join(d['columns']) or 'the table'}; next: {verdict.get('next_step')}",
            file=sys.stderr,
        )
    elif "reason" in verdict:
        print(f"[dpsynth] CONFIDENTIAL: {verdict['reason']}", file=sys.stderr)


def plan_table_command(args: argparse.Namespace) -> int:
    """``dpsynth plan-table``: the same table release on a PUBLIC file; prints the plan."""
    spec, _ = _checked(args, "PUBLIC.csv", {})
    release = _run(args, spec, read_csv(args.input, "PUBLIC.csv"), None)
    print(f"plan for {Path(args.input).name} (a public file: these figures may be shown)")
    for col in release.report["confidential_columns"]:
        diag = release.diagnostics["columns"][col["column"]]
        mcmc = diag.get("mcmc", {})
        verdict = diag.get("column_verdict_at_confidential_predecessors", {}).get("verdict")
        print(
            f"  {col['column']:<20} {col['mechanism']:<10} eps {col['epsilon_allocated']:.3g}  "
            f"centring {col.get('centring', '-')}  "
            f"clamp {col.get('clamp', '-').split(':')[0]}  "
            f"censored {diag.get('n_censored', '-')}  max R-hat {mcmc.get('rhat_max', '-')}  "
            f"verdict {verdict}"
        )
    print(f"  total epsilon {sum(release.report['epsilon_per_column'].values()):.3g}")
    verdict = release.diagnostics.get("verdict", {})
    print(
        f"  table verdict {verdict.get('verdict')}: {verdict.get('next_step') or verdict.get('reason', '')}"
    )
    return 0


__all__ = ["add_table_commands", "plan_table_command", "synthesize_table_command"]
