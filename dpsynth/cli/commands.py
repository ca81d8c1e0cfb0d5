"""Command line: ``python -m dpsynth synthesize ...``, ``plan``, ``combine`` and the table commands.

A thin adapter over :func:`dpsynth.release.single.synthesize`, :func:`dpsynth.release.plan.plan`,
:func:`dpsynth.mechanisms.inference.combine_frame` and :mod:`dpsynth.cli.table_commands`: it
parses, makes the library's settings objects (:class:`dpsynth.sampler.Sampler`,
:mod:`dpsynth.release.settings`, :class:`dpsynth.mechanisms.combining.CombineSettings`, which
refuse a bad setting before any budget is charged or file read), checks paths, calls the
library and prints; it re-checks nothing. Every option is declared once in
:data:`dpsynth.cli.options_table.OPTIONS`, from which the parser, the flags a library error
is spelled with (:func:`dpsynth.cli.options_table.flag_of`, through
:meth:`dpsynth.errors.InputError.render`) and the library's keyword arguments follow.

Contract: bad input gets one line on stderr naming the flag, exit status 2, nothing
written and the input untouched (:data:`REFUSALS` lists the families; the book's CLI
page is generated from it). Ctrl-C exits 130 and SIGTERM 143, leaving no output and no
temporary file. Messages name parameters and record positions, never data values (a
count or position read from the data only inside ``errors.from_data``'s CONFIDENTIAL banner).
Which mechanism to choose for which data: the book's page "Which mechanism for my data?".
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

from dpsynth import __version__, formats
from dpsynth.cli.files import check_input_file, check_output_paths, read_input
from dpsynth.cli.options_table import (
    COMMANDS,
    FLAGS,
    MODELS,
    OPTIONS,
    add_options,
    check_pairs_and_files,
    flag_of,
    keywords,
    options_of,
)
from dpsynth.cli.table_commands import (
    init_spec_command,
    plan_table_command,
    synthesize_table_command,
)
from dpsynth.errors import InputError
from dpsynth.mechanisms import registry
from dpsynth.mechanisms.combining import CombineSettings
from dpsynth.release.settings import (
    DEFAULT_CANDIDATES,
    INPUTS,
    PlanSettings,
    ScalarSettings,
)
from dpsynth.sampler import Sampler

__all__ = [
    "FLAGS",
    "MODELS",
    "OPTIONS",
    "REFUSALS",
    "api_words_as_flags",
    "build_parser",
    "check_input_file",
    "check_output_paths",
    "flag_message",
    "main",
    "one_line",
    "read_input",
]

REFUSALS: list[tuple[str, str, str]] = [
    ("input file", "missing, a directory, not UTF-8 text, empty or not CSV", "IN.csv"),
    ("columns", "duplicated or empty column names; an unknown --column", "IN.csv / --column"),
    ("outcome values", "missing, non-numeric, outside the model's support or bounds", "--column"),
    ("counts", "counts beyond Stan's 32-bit integers", "--column"),
    ("output paths", "a directory, a missing folder, not writable", "--out/--report"),
    ("output paths", "equal to the input or to another output", "--out/--report/--diagnostics"),
    ("epsilon", "not a number, <= 0, outside [1e-6, 1000]", "--epsilon"),
    ("epsilon", "above the sanity limit 20 per release", "--allow-large-epsilon"),
    (
        "budget",
        "the release would exceed the dataset's cap, the file belongs to another dataset, "
        "no cap for a new file",
        "--budget-file / --budget-total",
    ),
    (
        "missing values",
        "a missing outcome or covariate value (column and count named); --drop-missing "
        "without --n-synthetic or with sbs; a missing outcome with --covariates, even with "
        "--drop-missing",
        "--column / --covariates / --drop-missing / --n-synthetic",
    ),
    (
        "reference levels",
        "a public reference file lacking a level of a categorical covariate",
        "--weights-from / --centring-from",
    ),
    ("m", "< 1, more sets than posterior draws", "--m"),
    ("seed", "negative or >= 2^63", "--seed"),
    ("MCMC sizes", "chains outside 1-64, iterations outside their ranges", "--chains/--iter-*"),
    ("bins", "< 1 or more than 10,000,000", "--n-bins"),
    ("bounds", "LO >= HI, not finite, missing where required", "--bounds"),
    ("options", "an option the chosen mechanism would ignore", "the option"),
    ("neighbours", "add-remove without --n-synthetic, or with covariates or SBS", "--neighbours"),
    ("user program", "fails to parse or compile, or breaks the convention", "--stan-file"),
    (
        "user program",
        "fails a program check: outputs read the data, a data-dependent prior or unclamped "
        "term, records mixed, contributions not clamped or not the target's terms",
        "--stan-file",
    ),
    (
        "pieces",
        "a missing file, a block that is not a piece, print/reject/fatal_error, #include, a "
        "dpsynth_ name, a piece naming confidential data (outcome, weights, n under "
        "add-remove), no public --bounds, more public cells than a fit may evaluate, a "
        "record function that raises at a public cell at a prior draw",
        "--pieces",
    ),
    ("columns", "a --covariates column the file lacks (the file's columns are listed)", "IN.csv"),
]
"""What the CLI refuses and why: (family, cases, flag). Tests and the book use this table."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        text = one_line(message) or message  # an echoed argument may hold a line break
        if text.endswith(":"):  # an empty argument echoed as nothing
            text += " ''"
        print(f"dpsynth: error: {text}{_model_name_hint(text)}", file=sys.stderr)
        raise SystemExit(2)


def _model_name_hint(message: str) -> str:
    """A hint for ``--model negbin-regression`` and the like: any model takes covariates."""
    found = re.search(r"argument --model: invalid choice: '([^']*)'", message)
    if not found:
        return ""
    base = re.sub(r"[-_ ]?regression$", "", found[1])
    if base != found[1] and base in MODELS:
        return f"; every model is a regression when given --covariates: use --model {base} --covariates COLS"
    return "; any model takes --covariates (it then is a regression)"


def build_parser() -> argparse.ArgumentParser:
    """The ``dpsynth`` parser with its subcommands, from :data:`COMMANDS` and the option table."""
    parser = _Parser(
        prog="dpsynth",
        description="Differentially private Bayesian data synthesis. Which mechanism for "
        "which data: see the book's page 'Which mechanism for my data?'.",
    )
    parser.add_argument("--version", action="version", version=f"dpsynth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (summary, description) in COMMANDS.items():
        command = sub.add_parser(name, help=summary, description=description)
        add_options(command, name)
        command.set_defaults(func=_RUNNERS[name])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0, 2 bad input, 130 Ctrl-C, 143 SIGTERM)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"dpsynth: error: {flag_message(exc, args.command)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpsynth: interrupted; nothing was written", file=sys.stderr)
        return 130
    except SystemExit as exc:
        if exc.code == 143:
            print("dpsynth: terminated; nothing was written", file=sys.stderr)
        raise
    except OSError as exc:  # a full disk, a folder made unwritable during the run
        print(f"dpsynth: error: {_os_message(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the contract: one line, never a traceback
        print(
            f"dpsynth: internal error ({type(exc).__name__}); {WHOLE_OR_ABSENT}. Please report it.",
            file=sys.stderr,
        )
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


WHOLE_OR_ABSENT = "each output is whole or absent (files are replaced atomically)"
"""What a run that stops after its checks leaves: outputs are written all or none."""


def _os_message(exc: OSError) -> str:
    """An operating-system error during a run, in one line: what failed, on which path."""
    where = f" ({exc.filename})" if exc.filename else ""
    what = exc.strerror or type(exc).__name__
    return one_line(f"{what}{where}: the run stopped; {WHOLE_OR_ABSENT}")


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(143)


def flag_message(exc: InputError, command: str = "synthesize") -> str:
    """The error as ``command``'s user reads it: its parameter and the parameters it
    mentions spelled as their flags (:func:`dpsynth.cli.options_table.flag_of`)."""
    return one_line(exc.render(lambda param: flag_of(param, command)))


def api_words_as_flags(text: str) -> str:
    """The curator's and the engine's advice (a verdict's next step, a convergence note:
    text, not errors) with library words as CLI flags: ``name=True`` and parameter names
    in parentheses, ``(centring)`` or ``(iter_warmup, iter_sampling)``."""

    def flag(name: str) -> str:
        return FLAGS.get(name, name)

    text = re.sub(r"\b([a-z][a-z_]*)=True\b", lambda m: flag(m[1]) if m[1] in FLAGS else m[0], text)
    return re.sub(
        r"\(([a-z][a-z_]*(?:, [a-z][a-z_]*)*)\)",
        lambda m: "(" + ", ".join(flag(w) for w in m[1].split(", ")) + ")",
        text,
    )


def one_line(text: str) -> str:
    """A multi-line message (stanc's, say) as one line: blank and ruler lines dropped."""
    lines = [line.strip() for line in text.splitlines()]
    return " ".join(line for line in lines if line and set(line) - set("-^ "))


# ----------------------------------------------------------------------------- checks
# Before the budget is charged and before IN.csv is read, the CLI makes the library's
# settings objects (ScalarSettings, Sampler, PlanSettings, CombineSettings), which refuse
# what needs no data, then checks its own words, which the library never sees: file
# paths, --outcome without --stan-file, --budget-total without --budget-file.


def _settings_of(args: argparse.Namespace) -> ScalarSettings:
    """``synthesize``'s settings that need no data, as the library checks them (the public
    inputs given by name: a model, covariates, reference files)."""
    fields = {f.name for f in dataclasses.fields(ScalarSettings)}
    given = {k: v for k, v in keywords(args, "synthesize", "synthesize").items() if k in fields}
    inputs = tuple(
        str(o.keyword) for o in options_of("synthesize") if o.keyword in INPUTS and o.given(args)
    )
    return ScalarSettings(
        **given,
        regression=bool(_names(args.covariates)),
        inputs=inputs,
        tuning=keywords(args, "synthesize", "tuning"),
    )


def _check_synthesize(args: argparse.Namespace) -> tuple[Sampler, dict[str, Path]]:
    """Every check of ``synthesize`` that needs no data; returns the sampler and the
    checked output paths."""
    _settings_of(args).validate()
    sampler = Sampler(**keywords(args, "synthesize", "sampler"))
    outputs = check_output_paths(
        args.input, {"--out": args.out, "--report": args.report, "--diagnostics": args.diagnostics}
    )
    check_pairs_and_files(args, "synthesize")
    wanted = [args.column, *_names(args.covariates)]
    check_input_file(args.input, wanted, "IN.csv")
    for flag in ("--weights-from", "--centring-from"):
        if (path := getattr(args, flag[2:].replace("-", "_"))) is not None:
            check_input_file(path, wanted, flag)
    return sampler, outputs


def _names(columns: str | None) -> list[str]:
    """A comma-separated list of column names (``--covariates``)."""
    return [c.strip() for c in (columns or "").split(",") if c.strip()]


# ----------------------------------------------------------------------------- synthesize


def _synthesize_command(args: argparse.Namespace) -> int:
    """``synthesize``: check the arguments, charge the budget, then release."""
    sampler, outputs = _check_synthesize(args)
    charge = _charge_budget(args, outputs)

    from dpsynth.privacy.budget import attempt

    with attempt(charge):  # the outcome goes to the ledger, whatever happens
        return _release_command(args, sampler, outputs, charge)


def _charge_budget(args: argparse.Namespace, outputs: dict[str, Path]) -> Any:
    """``--budget-file``: charge ``--epsilon`` to the dataset's ledger before IN.csv is read."""
    if args.budget_file is None:
        return None
    check_output_paths(args.input, {**outputs, "--budget-file": args.budget_file})
    from dpsynth.privacy import budget

    return budget.charge(
        args.budget_file,
        dataset_sha256=formats.sha256(args.input),
        epsilon=args.epsilon,
        what=f"{args.mechanism} m={args.m} on {Path(args.input).name}",
        total=args.budget_total,
    )


def _release_command(
    args: argparse.Namespace, sampler: Sampler, outputs: dict[str, Path], charge: Any
) -> int:
    """Read the data (after the budget charge), release, write the files, print."""
    frame = read_input(
        args.input,
        args.column,
        "IN.csv",
        allow_missing=args.drop_missing,
        regression=bool(_names(args.covariates)),
    )
    release = _call_synthesize(args, frame, _file_inputs(args, frame), sampler, charge)
    release.write(outputs["--out"], outputs["--report"], outputs.get("--diagnostics"))
    if not args.quiet:
        _print_verdict(release.diagnostics.get("utility", {}), release.report.get("guarantee"))
        named = ", ".join(str(p) for p in outputs.values())
        print(f"[dpsynth] wrote {named}", file=sys.stderr)
    return 0


def _model_of(args: argparse.Namespace) -> Any:
    """The model ``--model``, ``--stan-file`` or ``--pieces`` names (argparse: at most one)."""
    if args.stan_file:
        from dpsynth.models.catalogue import Model

        return Model.from_stan_file(args.stan_file, args.outcome or "real")
    if args.pieces:
        from dpsynth.models.pieces import from_pieces

        return from_pieces(args.pieces)
    return args.model or "beta"


def _file_inputs(args: argparse.Namespace, frame: Any) -> dict[str, Any]:
    """``release.synthesize``'s keywords that come from files: the model, the covariates, the
    public reference data (``--weights-from``, ``--centring-from``)."""
    from dpsynth.models.catalogue import covariate_matrix, require_reference_levels

    model = _model_of(args)
    fits_model = registry.get(args.mechanism).fits_model
    X = (
        covariate_matrix(frame, args.covariates, args.categorical, args.drop_missing)
        if fits_model
        else None
    )
    given: dict[str, Any] = {
        "model": model,
        "X": X,
        "covariates": frame[_names(args.covariates)] if args.covariates else None,
        "reference": None,
        "reference_X": None,
        "public_files": _public_file_hashes(args),
    }
    if args.weights_from is not None:
        ref = read_input(args.weights_from, args.column, "--weights-from")
        require_reference_levels(frame, ref, args.covariates, args.categorical, "--weights-from")
        given["reference"] = ref[args.column].to_numpy()
        given["reference_X"] = covariate_matrix(ref, args.covariates, args.categorical)
    if args.centring_from is not None:
        ref = read_input(args.centring_from, args.column, "--centring-from")
        require_reference_levels(frame, ref, args.covariates, args.categorical, "--centring-from")
        given["centring_from"] = ref[args.column].to_numpy()
        given["centring_from_X"] = covariate_matrix(ref, args.covariates, args.categorical)
    return given


def _call_synthesize(
    args: argparse.Namespace, frame: Any, given: dict[str, Any], sampler: Sampler, charge: Any
) -> Any:
    """:func:`dpsynth.release.single.synthesize` with the table's keywords; its known-seed warning
    as one line on stderr."""
    from dpsynth.release.single import KnownSeedWarning, synthesize

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KnownSeedWarning)
        release = synthesize(
            frame[args.column].to_numpy(),
            **keywords(args, "synthesize", "synthesize"),
            **given,
            sampler=sampler,
            progress=not args.quiet,
            budget_file=charge,
            **keywords(args, "synthesize", "tuning"),
        )
    for w in caught:
        if issubclass(w.category, KnownSeedWarning):
            print(f"dpsynth: warning: --seed: {w.message}", file=sys.stderr)
    return release


def _print_verdict(verdict: dict[str, Any], guarantee: str | None = None) -> None:
    """The curator's utility verdict on stderr, marked confidential (never in a file but
    the confidential diagnostics); first word "NOT DP" for a release without a guarantee."""
    from dpsynth.curator.column_verdict import format_summary, not_dp_line

    if verdict.get("verdict") in ("good", "fair", "poor"):
        text = api_words_as_flags(format_summary({"guarantee": guarantee, **verdict}))
    else:
        text = f"CONFIDENTIAL: no utility verdict ({verdict.get('reason', 'unavailable')})"
        if (not_dp := not_dp_line(guarantee)) is not None:
            text = f"{not_dp}\n{text}"
    for line in text.splitlines():
        print(f"[dpsynth] {line}", file=sys.stderr)


def _public_file_hashes(args: argparse.Namespace) -> dict[str, str]:
    """SHA-256 of every public reference file the release uses, by flag (for the report)."""
    from dpsynth.privacy.budget import file_sha256

    return {
        flag: file_sha256(path)
        for flag, path in (
            ("--weights-from", args.weights_from),
            ("--centring-from", args.centring_from),
        )
        if path is not None
    }


def _pandas_display() -> Any:
    import pandas as pd

    return pd.option_context("display.max_colwidth", 80, "display.width", 200)


# ----------------------------------------------------------------------------- plan


def _plan_command(args: argparse.Namespace) -> int:
    """``plan``: every candidate mechanism run on a PUBLIC reference file, best first."""
    given = keywords(args, "plan", "plan")
    candidates = tuple(_names(args.mechanisms)) or DEFAULT_CANDIDATES
    settings = PlanSettings(
        given["epsilon"], given["m"], candidates, given["bounds"], given["n_confidential"]
    ).validate()
    sampler = Sampler(**keywords(args, "plan", "sampler"))
    check_input_file(args.reference, [args.column, *_names(args.covariates)], "REFERENCE.csv")

    from dpsynth.models.catalogue import covariate_matrix
    from dpsynth.release.plan import plan, sizes_line

    frame = read_input(args.reference, args.column, "REFERENCE.csv")
    table = plan(
        frame[args.column].to_numpy(),
        **given,
        mechanisms=settings.mechanisms,
        reference_X=covariate_matrix(frame, args.covariates, args.categorical),
        sampler=sampler,
    )
    if "next_step" in table.columns:  # the curator's advice as this command line's flags
        table["next_step"] = table["next_step"].map(
            lambda t: api_words_as_flags(t) if isinstance(t, str) else t
        )
    print(sizes_line(table), file=sys.stderr)
    if args.json:
        print(table.to_json(orient="records", indent=2))
        return 0
    shown = ["candidate", "guarantee", "verdict", "mean_error_pct", "max_ecdf", "next_step"]
    with _pandas_display():
        print(table[[c for c in shown if c in table.columns]].to_string(index=False))
    return 0


# ----------------------------------------------------------------------------- combine


def _combine_command(args: argparse.Namespace) -> int:
    """``combine``: the m sets of SYNTH.csv combined into one inference (Liu, Theorem 7)."""
    import json

    given = keywords(args, "combine", "combine_frame")
    CombineSettings(**given).validate()
    df = _read_synthetic(args)

    from dpsynth.mechanisms.inference import combine_frame

    res = combine_frame(df, **given)
    if args.json:
        payload = {"column": args.column, "estimand": args.estimand, **res.to_dict()}
        print(json.dumps(payload, indent=2, allow_nan=False, default=str))
        return 0
    df_txt = "inf (normal)" if res.df == float("inf") else f"{res.df:.4g}"
    print(f"{args.estimand} of {args.column!r} from m = {res.m} synthetic set(s), rule {res.rule}")
    print(f"  estimate  {res.estimate:.6g}")
    print(f"  variance  {res.variance:.6g}   (SE {res.se:.6g})")
    print(f"  df        {df_txt}")
    print(f"  {round(res.level * 100)}% CI    [{res.lower:.6g}, {res.upper:.6g}]")
    return 0


def _read_synthetic(args: argparse.Namespace) -> Any:
    """SYNTH.csv as a frame (the file's checks; the set column's and the rules' are the
    library's, :func:`dpsynth.mechanisms.inference.combine_frame`)."""
    import pandas as pd

    path = Path(args.synth)
    if not path.is_file() and not (path.is_dir() and formats.input_format(path) == "parquet"):
        raise InputError("SYNTH.csv", f"file not found: {path}")
    if formats.input_format(path) != "csv":  # a Parquet, Stata or SAS release
        return formats.read_table(path, "SYNTH.csv")
    try:
        df = pd.read_csv(path, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise InputError("SYNTH.csv", "cannot be read as a UTF-8 CSV") from None
    if df.empty:
        raise InputError("SYNTH.csv", "no records")
    return df


_RUNNERS = {
    "synthesize": _synthesize_command,
    "plan": _plan_command,
    "combine": _combine_command,
    "synthesize-table": synthesize_table_command,
    "plan-table": plan_table_command,
    "init-spec": init_spec_command,
}
"""Subcommand -> the function that runs it."""


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
