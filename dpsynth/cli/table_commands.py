"""Command line for whole tables: ``synthesize-table`` and ``plan-table``.

Follows :mod:`dpsynth.cli.commands`'s contract: bad input gets one line on stderr naming
the flag (a spec's error names ``--spec``, its key and column:
:func:`dpsynth.cli.options_table.flag_of`), exit status 2, nothing written; the library's
settings (the budget's, the sampler's), the spec, the paths and the data's header are
checked before the scientific stack is loaded or any value is read; the budget is charged
before the data are read; every output is written atomically. The options are rows of
:data:`dpsynth.cli.options_table.OPTIONS`; :func:`dpsynth.cli.commands.build_parser` adds
them and runs these functions.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from dpsynth import formats
from dpsynth.cli.files import check_input_file, check_output_paths, read_csv
from dpsynth.cli.options_table import check_pairs_and_files, flag_of, keywords
from dpsynth.errors import InputError
from dpsynth.release.settings import BudgetSettings
from dpsynth.sampler import Sampler
from dpsynth.table.spec import TableSpec, load_spec, require_columns


def _checked(
    args: argparse.Namespace, data_label: str, outputs: dict[str, str | None]
) -> tuple[TableSpec, Sampler, dict[str, Path]]:
    """Every check that needs no scientific stack and no value: the library's settings (the
    budget's, the sampler's), then paths, the spec and the header."""
    BudgetSettings(args.epsilon, args.m, args.seed, args.allow_large_epsilon).validate()
    # each fit's progress in tenths (--quiet: none): a censored fit can take minutes
    sampler = Sampler(**keywords(args, args.command, "sampler"))
    checked = check_output_paths(args.input, outputs)
    check_pairs_and_files(args, args.command)
    spec = load_spec(args.spec)
    names = check_input_file(args.input, [], data_label)
    require_columns(spec, names, data_label)
    if spec.reference is not None:
        ref_names = check_input_file(spec.reference, [], "--spec")
        require_columns(spec, ref_names, "--spec")
    from dpsynth.table.pipeline import require_available_models, require_column_epsilons

    require_available_models(spec)
    require_column_epsilons(spec, args.epsilon)
    return spec, sampler, checked


def _run(
    args: argparse.Namespace, spec: TableSpec, sampler: Sampler, frame: Any, charge: Any
) -> Any:
    from dpsynth.release.single import KnownSeedWarning
    from dpsynth.table.pipeline import synthesize_table

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KnownSeedWarning)
        release = synthesize_table(
            frame,
            spec,
            args.epsilon,
            m=args.m,
            seed=args.seed,
            sampler=sampler,
            allow_large_epsilon=args.allow_large_epsilon,
            budget_file=charge,
            progress=not args.quiet,
            client=args.scheduler,
        )
    if any(issubclass(w.category, KnownSeedWarning) for w in caught):
        print("dpsynth: warning: --seed: a seeded release is NOT private", file=sys.stderr)
    return release


def synthesize_table_command(args: argparse.Namespace) -> int:
    """``dpsynth synthesize-table``: charge, read, release, write atomically, print."""
    outputs = {"--out": args.out, "--report": args.report, "--diagnostics": args.diagnostics}
    spec, sampler, checked = _checked(args, "DATA.csv", outputs)
    if args.scheduler is not None:  # before the preflight's minutes and the charge
        from dpsynth.table.schedule import check_scheduler

        check_scheduler(args.scheduler)
    if not args.skip_preflight:
        spec = _preflight(args, spec, sampler)  # with its remedy, if any
    charge = None
    if args.budget_file is not None:
        check_output_paths(args.input, {**outputs, "--budget-file": args.budget_file})
        from dpsynth.privacy import budget

        charge = budget.charge(
            args.budget_file,
            dataset_sha256=formats.sha256(args.input),
            epsilon=args.epsilon,
            what=f"table m={args.m} on {Path(args.input).name}",
            total=args.budget_total,
        )
    from dpsynth.privacy.budget import attempt

    with attempt(charge):
        release = _run(args, spec, sampler, args.input, charge)  # read in partitions
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


ADVICE_WORDS = ("iter_warmup", "iter_sampling", "adapt_delta")
"""The library words of the table's convergence advice that a refusal spells as flags."""


def _preflight(args: argparse.Namespace, spec: TableSpec, sampler: Sampler) -> TableSpec:
    """The spec run on public data before the budget is charged or a value of DATA.csv read
    (:func:`dpsynth.table.preflight.preflight`): its line (public figures), or its refusal;
    returns the spec the release runs (with the preflight's remedy, if any)."""
    where = "the public reference" if spec.reference is not None else "a public stand-in"
    if not args.quiet:
        print(f"[dpsynth] preflight: running the spec on {where} first", file=sys.stderr)
    from dpsynth.table.preflight import preflight

    n = (
        None
        if spec.reference is not None
        else formats.record_count(args.input, "DATA.csv", spec.columns)
    )
    reference = None if spec.reference is None else read_csv(spec.reference, "reference")
    large = args.allow_large_epsilon
    result = preflight(spec, args.epsilon, args.m, sampler, n, reference, allow_large_epsilon=large)
    if not result.ok:
        raise InputError(
            "--spec",
            f"{result.summary()}; nothing was charged or written (--skip-preflight releases "
            "without this check)",
            mentions=ADVICE_WORDS,
        )
    if not args.quiet:  # the advice's library words spelled as this command's flags
        line = InputError("--spec", result.summary(), mentions=ADVICE_WORDS)
        text = line.render(lambda param: flag_of(param, args.command))
        print(f"[dpsynth] {text.split(': ', 1)[1]} (public figures)", file=sys.stderr)
    return result.applied_to(spec)


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
    spec, sampler, _ = _checked(args, "PUBLIC.csv", {})
    release = _run(args, spec, sampler, read_csv(args.input, "PUBLIC.csv"), None)
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


def init_spec_command(args: argparse.Namespace) -> int:
    """``dpsynth init-spec``: a starter spec from a PUBLIC file, printed or written atomically."""
    check_input_file(args.input, [], "PUBLIC.csv")
    if args.out is not None:
        check_output_paths(args.input, {"--out": args.out})
        if Path(args.out).exists():
            raise InputError("--out", f"{args.out} exists: a starter spec never overwrites a spec")
    from dpsynth import io
    from dpsynth.table.starter import starter_spec

    text = starter_spec(read_csv(args.input, "PUBLIC.csv"), Path(args.input).name)
    if args.out is None:
        print(text, end="")
        return 0
    io.atomic_write_all([(Path(args.out), lambda p: Path(p).write_text(text))])
    print(f"wrote {args.out}: confirm every line marked 'confirm' before a release")
    return 0


__all__ = ["init_spec_command", "plan_table_command", "synthesize_table_command"]
