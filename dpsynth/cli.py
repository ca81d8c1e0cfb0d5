"""Command line: ``python -m dpsynth synthesize ...`` and ``python -m dpsynth combine ...``.

A thin adapter over :func:`dpsynth.release.synthesize` and
:func:`dpsynth.inference.combine_frame`: it parses, checks paths, calls the library,
maps the library's parameter names to flags in one place (:data:`FLAGS`) and prints.

Contract: bad input gets one line on stderr naming the flag, exit status 2, nothing
written and the input untouched (:data:`REFUSALS` lists the families; the book's CLI
page is generated from it). Ctrl-C exits 130 and SIGTERM 143, leaving no output and no
temporary file. Messages name parameters and record positions, never data values.
Which mechanism to choose for which data: the book's page "Which mechanism for my data?".
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpsynth import __version__
from dpsynth.errors import InputError, require_epsilon, require_sane_epsilon

if TYPE_CHECKING:  # the scientific stack is imported only once the arguments are checked
    import pandas as pd

MECHANISM_CHOICES = (
    "unweighted",
    "lw",
    "cw",
    "sw",
    "weighted-e",
    "censor-w",
    "censor-uw",
    "ph",
    "sbs",
)

FLAGS = {
    "y": "--column",
    "column": "--column",
    "data": "IN.csv",
    "epsilon": "--epsilon",
    "m": "--m",
    "bounds": "--bounds",
    "mechanism": "--mechanism",
    "model": "--model",
    "stan_file": "--stan-file",
    "pieces": "--pieces",
    "outcome": "--outcome",
    "X": "--covariates",
    "covariates": "--covariates",
    "neighbours": "--neighbours",
    "n_synthetic": "--n-synthetic",
    "n_confidential": "--n-confidential",
    "radius": "--radius",
    "c": "--c",
    "g": "--g",
    "k": "--k",
    "reweight": "--reweight",
    "downscale": "--downscale",
    "centring": "--centring",
    "centring_from": "--centring-from",
    "truncation": "--truncation",
    "target_lipschitz": "--target-lipschitz",
    "n_bins": "--n-bins",
    "integer": "--integer",
    "reference": "--weights-from",
    "alpha": "--weights-from",
    "data_type": "--data-type",
    "known_sd": "--known-sd",
    "allocation": "--allocation",
    "sanitization": "--sanitization",
    "bounding": "--bounding",
    "seed": "--seed",
    "backend": "--backend",
    "chains": "--chains",
    "iter_warmup": "--iter-warmup",
    "iter_sampling": "--iter-sampling",
    "sampler": "--allow-unconverged",
    "allow_unconverged": "--allow-unconverged",
    "adapt_delta": "--adapt-delta",
    "clip_to_bounds": "--clip-to-bounds",
    "public_utility": "--public-utility",
    "allow_large_epsilon": "--allow-large-epsilon",
    "budget_file": "--budget-file",
    "budget_total": "--budget-total",
    "dataset_sha256": "IN.csv",
    "drop_missing": "--drop-missing",
    "estimand": "--estimand",
    "rule": "--rule",
    "set_column": "--set-column",
    "estimates": "SYNTH.csv",
    "variances": "SYNTH.csv",
    "datasets": "SYNTH.csv",
}
"""Library parameter name -> the flag a CLI user sets (the one place they are mapped)."""

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
        "without --n-synthetic, with --covariates or sbs",
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
        "add-remove), a record function that raises on the public outcome grid",
        "--pieces",
    ),
    ("columns", "a --covariates column the file lacks (the file's columns are listed)", "IN.csv"),
    (
        "convergence",
        "strict-DP fit with R-hat > 1.01, ESS < 100 or divergences",
        "--allow-unconverged (or longer --chains/--iter-*)",
    ),
]
"""What the CLI refuses and why: (family, cases, flag). Tests and the book use this table."""

SEED_MAX = 2**63 - 1
INT_RANGES = {
    "m": (1, 10_000),
    "seed": (0, SEED_MAX),
    "chains": (1, 64),
    "iter_warmup": (0, 1_000_000),
    "iter_sampling": (1, 1_000_000),
    "n_bins": (1, 10_000_000),
    "n_synthetic": (1, 100_000_000),
    "n_confidential": (2, 100_000_000),
}


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"dpsynth: error: {message}{_model_name_hint(message)}", file=sys.stderr)
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
    """The ``dpsynth`` parser with its subcommands."""
    parser = _Parser(
        prog="dpsynth",
        description="Differentially private Bayesian data synthesis. Which mechanism for "
        "which data: see the book's page 'Which mechanism for my data?'.",
    )
    parser.add_argument("--version", action="version", version=f"dpsynth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_synthesize(sub)
    _add_plan(sub)
    _add_combine(sub)
    __import__("dpsynth.cli_table").cli_table.add_table_commands(sub)  # issue 29
    return parser


def _subcommand(sub: Any, name: str, summary: str, description: str, file: tuple) -> Any:
    """A subcommand parser with its input file and ``--column`` arguments."""
    p = sub.add_parser(name, help=summary, description=description)
    dest, metavar, file_help, column_help = file
    p.add_argument(dest, metavar=metavar, help=file_help)
    p.add_argument("--column", required=True, help=column_help)
    return p


def _add_synthesize(sub: Any) -> None:
    s = _subcommand(
        sub,
        "synthesize",
        "release synthetic data with a privacy report",
        "Release m synthetic datasets under a total privacy budget --epsilon.",
        ("input", "IN.csv", "confidential data (UTF-8 CSV)", "the confidential outcome column"),
    )
    s.add_argument(
        "--model",
        default=None,
        choices=MODELS,
        metavar="MODEL",
        help="%(choices)s (default beta); any model with --covariates is a regression "
        "(e.g. --model negbin --covariates age,region)",
    )
    s.add_argument("--stan-file", default=None, help="your own Stan program (dpsynth convention)")
    s.add_argument(
        "--pieces",
        default=None,
        help="your model as pieces (parameters, prior, one record's lpdf and rng): DP by "
        "construction (book: Bringing your own model)",
    )
    s.add_argument(
        "--outcome",
        choices=("unit", "count", "real", "positive"),
        default=None,
        help="support of y for --stan-file models (default real)",
    )
    s.add_argument("--mechanism", required=True, choices=MECHANISM_CHOICES)
    s.add_argument(
        "--epsilon",
        required=True,
        type=float,
        help="TOTAL privacy budget of the release; each of the m sets gets epsilon/m "
        "(at most 20 without --allow-large-epsilon)",
    )
    s.add_argument(
        "--allow-large-epsilon",
        action="store_true",
        help="accept --epsilon above the sanity limit of 20 (the report says what it means)",
    )
    s.add_argument(
        "--budget-file",
        default=None,
        metavar="BUDGET.jsonl",
        help="CONFIDENTIAL privacy-budget ledger of this dataset: every attempt (refused and "
        "failed ones too) charges --epsilon before the data are read; refused if the cap "
        "would be exceeded",
    )
    s.add_argument(
        "--budget-total",
        type=float,
        default=None,
        metavar="E",
        help="the dataset's total epsilon cap, given once, when --budget-file is created",
    )
    s.add_argument(
        "--drop-missing",
        action="store_true",
        help="drop records with a missing outcome instead of refusing them (needs "
        "--n-synthetic; no covariates; the count goes to the confidential diagnostics)",
    )
    s.add_argument(
        "--neighbours",
        default="substitution",
        choices=("substitution", "add-remove"),
        help="neighbouring databases: substitution (default, n public) or add-remove",
    )
    s.add_argument(
        "--n-synthetic",
        type=int,
        default=None,
        help="number of synthetic records (public; required with add-remove)",
    )
    s.add_argument(
        "--covariates",
        default=None,
        help="comma-separated covariate columns (treated as public, written to OUT); any "
        "--model takes them and becomes a regression",
    )
    s.add_argument(
        "--categorical",
        default=None,
        help="comma-separated covariates to dummy-code (text columns always are)",
    )
    s.add_argument(
        "--bounds",
        nargs=2,
        type=float,
        default=None,
        metavar=("LO", "HI"),
        help="public bounds of the outcome (never read from the data)",
    )
    s.add_argument("--m", type=int, default=1, help="number of synthetic datasets (default 1)")
    s.add_argument(
        "--seed",
        type=int,
        default=None,
        help="research runs only: a known seed makes the release NOT private",
    )
    s.add_argument("--out", required=True, metavar="OUT.csv", help="synthetic data (publishable)")
    s.add_argument(
        "--report", required=True, metavar="REPORT.json", help="privacy report (publishable)"
    )
    s.add_argument(
        "--diagnostics",
        default=None,
        metavar="DIAG.json",
        help="CONFIDENTIAL diagnostics (bounds, censored counts, MCMC); never publish",
    )
    s.add_argument(
        "--weights-from",
        default=None,
        metavar="REFERENCE.csv",
        help="censor-w: public/earlier-period data to set the weights (strict DP)",
    )
    s.add_argument(
        "--allow-unconverged",
        action="store_true",
        help="release even if MCMC diagnostics fail (no DP guarantee then)",
    )
    s.add_argument(
        "--clip-to-bounds",
        action="store_true",
        help="clamp records outside --bounds to the bounds instead of refusing them "
        "(how many were clamped goes to the confidential diagnostics)",
    )
    s.add_argument(
        "--public-utility",
        type=float,
        default=None,
        metavar="EPS",
        help="also publish noised utility figures in the report (mean, max-ECDF per set), "
        "spending EPS of the total --epsilon on them (needs --bounds)",
    )
    t = s.add_argument_group("weights and tuning")
    t.add_argument("--c", type=float, default=None, help="weight scale c (Algorithms 1-2)")
    t.add_argument("--g", type=float, default=None, help="weight shift g (Algorithms 1-2)")
    t.add_argument("--radius", type=float, default=None, help="CW radius r (Algorithm 2)")
    t.add_argument(
        "--reweight",
        action="store_true",
        help="re-weighting (Algorithm 3): lw/cw (k searched), censor-w (fixed k, Eq. 6)",
    )
    t.add_argument(
        "--k",
        type=float,
        default=None,
        help="re-weighting k: starting value of the search (lw/cw), the k used (censor-w)",
    )
    t.add_argument(
        "--truncation",
        choices=("weighted-fit", "lw-bound"),
        default=None,
        help="weighted-e: record bound compared with M: alpha_i f_i from the Unweighted fit "
        "(lw-bound, default: reproduces the censoring paper's Table 1) or the maximum over "
        "the Weighted fit's draws (weighted-fit)",
    )
    t.add_argument(
        "--downscale",
        type=float,
        default=None,
        help="factor in (0,1] applied to LW weights before censoring (censor-w)",
    )
    t.add_argument(
        "--centring",
        type=_centring_arg,
        default=None,
        metavar="none|saturated|JSON",
        help="censor-w/censor-uw: clamp alpha (ll - c(x)) with c the record's saturated "
        "log-likelihood, or ll at public parameter values given as a JSON object "
        "(dpsynth's extension), e.g. '{\"beta\": [0.1, 0.3], \"kappa\": 5}'; a regression's "
        "beta has one value per design column: the intercept first, then the covariates in "
        "the order given, a categorical covariate as one column per level but its first",
    )
    t.add_argument(
        "--centring-from",
        default=None,
        metavar="REFERENCE.csv",
        help="censor-w/censor-uw: centre at the posterior mean of the model fitted to a "
        "PUBLIC reference file (an earlier period, a public-use sample), with the same "
        "--column and --covariates; the values are public and stated in the report",
    )
    t.add_argument(
        "--target-lipschitz",
        type=float,
        default=None,
        help="SW target Delta (default from epsilon)",
    )
    t.add_argument("--n-bins", type=int, default=None, help="PH bins (default ceil(sqrt(n)))")
    t.add_argument(
        "--integer",
        action="store_true",
        help="PH for counts: one bin per integer in --bounds, integer output",
    )
    mc = s.add_argument_group("MCMC")
    mc.add_argument("--chains", type=int, default=2, help="default 2 (see the book's choices)")
    mc.add_argument("--iter-warmup", type=int, default=1000, help="warmup iterations per chain")
    mc.add_argument("--iter-sampling", type=int, default=2000, help="draws kept per chain")
    mc.add_argument(
        "--adapt-delta",
        type=float,
        default=0.8,
        help="step-size target in [0.5, 1) (default 0.8; 0.95-0.99 against divergences)",
    )
    mc.add_argument("--backend", choices=("auto", "cmdstanpy", "pystan"), default=None)
    mc.add_argument("--quiet", action="store_true", help="no progress on stderr")
    g = s.add_argument_group("modips.SBS options (--mechanism sbs)")
    for flag, kind, meta, text in _SBS_OPTIONS:
        options = {"choices": kind} if isinstance(kind, tuple) else {"type": kind}
        g.add_argument(flag, default=None, metavar=meta, help=text, **options)
    s.set_defaults(func=_synthesize_command)


# modips.SBS flags: (flag, choices or type, metavar, help).
_SBS_OPTIONS: tuple[tuple[str, Any, str | None, str], ...] = (
    ("--data-type", ("binary", "gaussian"), None, "binary (0/1) or gaussian (default)"),
    (
        "--bounding",
        ("bit", "truncation"),
        None,
        "legitimize out-of-bound statistics: bit (default) or truncation",
    ),
    (
        "--sanitization",
        ("communal", "individualized"),
        None,
        "Gaussian, unknown variance: communal or individualized (default)",
    ),
    (
        "--allocation",
        float,
        "W",
        "individualized: share of each set's budget for the mean, in (0,1)",
    ),
    (
        "--known-sd",
        float,
        "SD",
        "Gaussian with known standard deviation SD (sanitizes the mean only)",
    ),
)


class _LazyChoices:
    """A tuple of choices defined in a library module, imported only when argparse asks."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def _values(self) -> tuple[str, ...]:
        """The names, read from the module's source where they are a literal tuple (no import:
        a usage error stays cheap); otherwise from the imported module (e.g. a dict's keys)."""
        import ast
        import importlib
        import importlib.util

        spec = importlib.util.find_spec(self.module)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            for node in ast.parse(Path(spec.origin).read_text()).body:
                target = (
                    getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
                )
                if (
                    isinstance(target, ast.Name)
                    and target.id == self.name
                    and node.value is not None
                ):
                    try:
                        return tuple(ast.literal_eval(node.value))
                    except ValueError:
                        break
        return tuple(getattr(importlib.import_module(self.module), self.name))

    def __contains__(self, value: object) -> bool:
        return value in self._values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __repr__(self) -> str:  # what help's %(choices)s and sphinx-argparse print
        return ", ".join(self._values())


MODELS = _LazyChoices("dpsynth.models", "MODELS")
"""The shipped models' names (``dpsynth.models.MODELS``), loaded when argparse asks."""


def _add_plan(sub: Any) -> None:
    p = _subcommand(
        sub,
        "plan",
        "expected utility of each mechanism, from a PUBLIC reference file (spends no budget)",
        "Run the candidate mechanisms on a public reference file (an earlier period, a "
        "public-use sample) as if it were the confidential data, and print the expected "
        "utility of each, best first. Never give it the confidential data.",
        ("reference", "REFERENCE.csv", "public reference data (UTF-8 CSV)", "the outcome column"),
    )
    p.add_argument("--model", required=True, choices=MODELS, metavar="MODEL", help="%(choices)s")
    p.add_argument("--epsilon", type=float, required=True, help="total budget of the release")
    p.add_argument("--m", type=int, default=1, help="synthetic sets of the release (default 1)")
    p.add_argument("--bounds", type=float, nargs=2, default=None, metavar=("LO", "HI"))
    p.add_argument("--covariates", default=None, help="comma-separated public covariates")
    p.add_argument("--categorical", default=None, help="which covariates are categorical")
    p.add_argument(
        "--mechanisms",
        default=None,
        help="comma-separated candidates (default: ph, censor-uw, censor-uw+reference, "
        "censor-w, censor-w+reference)",
    )
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--iter-warmup", type=int, default=1000)
    p.add_argument("--iter-sampling", type=int, default=1000)
    p.add_argument(
        "--n-confidential",
        type=int,
        default=None,
        metavar="N",
        help="records in the confidential file the release will use (a public number you "
        "state); each candidate is judged at this size (default: the reference file's size)",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=_plan_command)


def _plan_command(args: argparse.Namespace) -> int:
    _check_ints(args)
    require_epsilon("epsilon", args.epsilon)
    check_input_file(args.reference, [args.column, *_names(args.covariates)], "REFERENCE.csv")

    from dpsynth.mechanisms import Sampler
    from dpsynth.models import covariate_matrix
    from dpsynth.plan import DEFAULT_CANDIDATES, plan, sizes_line

    frame = read_input(args.reference, args.column, "REFERENCE.csv")
    X = covariate_matrix(frame, args.covariates, args.categorical)
    table = plan(
        frame[args.column].to_numpy(),
        model=args.model,
        epsilon=args.epsilon,
        m=args.m,
        bounds=tuple(args.bounds) if args.bounds else None,
        mechanisms=tuple(_names(args.mechanisms)) or DEFAULT_CANDIDATES,
        reference_X=X,
        sampler=Sampler(args.chains, args.iter_warmup, args.iter_sampling),
        n_confidential=args.n_confidential,
    )
    print(sizes_line(table), file=sys.stderr)
    if args.json:
        print(table.to_json(orient="records", indent=2))
        return 0
    shown = ["candidate", "guarantee", "verdict", "mean_error_pct", "max_ecdf", "next_step"]
    with _pandas_display():
        print(table[[c for c in shown if c in table.columns]].to_string(index=False))
    return 0


def _pandas_display() -> Any:
    import pandas as pd

    return pd.option_context("display.max_colwidth", 80, "display.width", 200)


def _add_combine(sub: Any) -> None:
    ESTIMANDS = _LazyChoices("dpsynth.inference", "ESTIMANDS")  # noqa: N806
    RULES = _LazyChoices("dpsynth.inference", "RULES")  # noqa: N806
    p = _subcommand(
        sub,
        "combine",
        "combine inferences from m synthetic datasets (Liu, Theorem 7)",
        "Per-set estimate and variance of a mean or proportion, combined across sets.",
        ("synth", "SYNTH.csv", "synthetic data CSV (all sets stacked)", "column to analyse"),
    )
    # a metavar keeps argparse from listing the (lazy) choices until it prints help
    p.add_argument(
        "--estimand", required=True, choices=ESTIMANDS, metavar="ESTIMAND", help="%(choices)s"
    )
    p.add_argument(
        "--rule",
        choices=RULES,
        default="thm7",
        metavar="RULE",
        help="%(choices)s (default thm7; single: one set)",
    )
    p.add_argument("--set-column", default="synthetic_set", help="column numbering the sets")
    p.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    p.set_defaults(func=_combine_command)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0, 2 bad input, 130 Ctrl-C, 143 SIGTERM)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"dpsynth: error: {flag_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpsynth: interrupted; nothing was written", file=sys.stderr)
        return 130
    except SystemExit as exc:
        if exc.code == 143:
            print("dpsynth: terminated; nothing was written", file=sys.stderr)
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: one line, never a traceback
        print(
            f"dpsynth: internal error ({type(exc).__name__}); nothing was written. "
            "Please report it.",
            file=sys.stderr,
        )
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(143)


def flag_message(exc: InputError) -> str:
    """The error's message with the library parameter replaced by the user's flag."""
    text = str(exc)
    flag = FLAGS.get(exc.param, exc.param)
    prefix = f"{exc.param}: "
    body = text[len(prefix) :] if text.startswith(prefix) else text
    return one_line(f"{flag}: {api_words_as_flags(body)}")


def api_words_as_flags(text: str) -> str:
    """Library words in a message as CLI flags: ``allow_unconverged=True`` and parameter
    names in parentheses, ``(centring)`` or ``(iter_warmup, iter_sampling)``."""

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


# ----------------------------------------------------------------------------- synthesize


def _synthesize_command(args: argparse.Namespace) -> int:
    # every check that needs no data and no scientific stack first: a usage error costs
    # a fraction of a second
    _check_ints(args)
    require_epsilon("epsilon", args.epsilon)
    outputs = check_output_paths(
        args.input, {"--out": args.out, "--report": args.report, "--diagnostics": args.diagnostics}
    )
    stan_mechanism = args.mechanism not in ("ph", "sbs")
    if not stan_mechanism:
        for flag, value in (
            ("--stan-file", args.stan_file),
            ("--pieces", args.pieces),
            ("--model", args.model),
            ("--covariates", args.covariates),
        ):
            if value is not None:
                raise InputError(flag, f"does not apply to the {args.mechanism} mechanism")
    if args.outcome is not None and args.stan_file is None:
        raise InputError("--outcome", "only applies with --stan-file")
    if args.stan_file is not None and args.model is not None:
        raise InputError("--model", "give either --model or --stan-file, not both")
    if args.stan_file is not None and not Path(args.stan_file).is_file():
        raise InputError("--stan-file", f"no such file: {args.stan_file}")
    if args.pieces is not None and (args.model is not None or args.stan_file is not None):
        raise InputError("--pieces", "give one of --model, --stan-file and --pieces")
    if args.pieces is not None and not Path(args.pieces).is_file():
        raise InputError("--pieces", f"no such file: {args.pieces}")
    if args.weights_from is not None and args.mechanism != "censor-w":
        raise InputError("--weights-from", "only applies to --mechanism censor-w")
    if args.centring_from is not None:
        if args.centring is not None:
            raise InputError("--centring-from", "give either --centring or --centring-from")
        if args.mechanism not in ("censor-w", "censor-uw"):
            raise InputError("--centring-from", "only applies to censor-w and censor-uw")
    wanted = [args.column, *_names(args.covariates)]
    check_input_file(args.input, wanted, "IN.csv")
    for flag in ("--weights-from", "--centring-from"):
        if (path := getattr(args, flag[2:].replace("-", "_"))) is not None:
            check_input_file(path, wanted, flag)
    require_sane_epsilon("epsilon", args.epsilon, args.allow_large_epsilon)
    charge = _charge_budget(args, outputs)

    from dpsynth.budget import attempt

    with attempt(charge):  # the outcome goes to the ledger, whatever happens
        return _release_command(args, outputs, stan_mechanism, charge)


def _charge_budget(args: argparse.Namespace, outputs: dict[str, Path]) -> Any:
    """``--budget-file``: charge ``--epsilon`` to the dataset's ledger before IN.csv is read."""
    if args.budget_file is None:
        if args.budget_total is not None:
            raise InputError("--budget-total", "only applies with --budget-file")
        return None
    check_output_paths(args.input, {**outputs, "--budget-file": args.budget_file})
    from dpsynth import budget

    return budget.charge(
        args.budget_file,
        dataset_sha256=budget.file_sha256(args.input),
        epsilon=args.epsilon,
        what=f"{args.mechanism} m={args.m} on {Path(args.input).name}",
        total=args.budget_total,
    )


def _release_command(
    args: argparse.Namespace, outputs: dict[str, Path], stan_mechanism: bool, charge: Any
) -> int:
    """Read the data (after the budget charge), release, write the files, print."""
    from dpsynth.mechanisms import Sampler
    from dpsynth.models import Model, covariate_matrix, require_reference_levels
    from dpsynth.release import KnownSeedWarning, synthesize

    frame = read_input(args.input, args.column, "IN.csv", allow_missing=args.drop_missing)
    model: str | Model = args.model or "beta"
    if args.stan_file:
        model = Model.from_stan_file(args.stan_file, args.outcome or "real")
    if args.pieces:
        from dpsynth.pieces import from_pieces

        model = from_pieces(args.pieces)
    X = covariate_matrix(frame, args.covariates, args.categorical) if stan_mechanism else None
    covariates = frame[_names(args.covariates)] if args.covariates else None
    reference = reference_X = None
    public_files = _public_file_hashes(args)
    if args.weights_from is not None:
        ref = read_input(args.weights_from, args.column, "--weights-from")
        require_reference_levels(frame, ref, args.covariates, args.categorical, "--weights-from")
        reference = ref[args.column].to_numpy()
        reference_X = covariate_matrix(ref, args.covariates, args.categorical)
    if args.centring_from is not None:
        ref = read_input(args.centring_from, args.column, "--centring-from")
        require_reference_levels(frame, ref, args.covariates, args.categorical, "--centring-from")
        args.centring = _reference_centre(args, model, X, sampler_of(args))
    sampler = Sampler(
        args.chains,
        args.iter_warmup,
        args.iter_sampling,
        args.backend,
        quiet=args.quiet,
        adapt_delta=args.adapt_delta,
    )
    tuning = {
        "c": args.c,
        "g": args.g,
        "radius": args.radius,
        "reweight": args.reweight,
        "k": args.k,
        "downscale": args.downscale,
        "centring": args.centring,
        "truncation": args.truncation,
        "target_lipschitz": args.target_lipschitz,
        "n_bins": args.n_bins,
        "integer": args.integer,
        "data_type": args.data_type,
        "known_sd": args.known_sd,
        "sanitization": args.sanitization,
        "allocation": args.allocation,
        "bounding": args.bounding,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KnownSeedWarning)
        release = synthesize(
            frame[args.column].to_numpy(),
            model=model,
            mechanism=args.mechanism,
            epsilon=args.epsilon,
            m=args.m,
            neighbours=args.neighbours,
            X=X,
            covariates=covariates,
            bounds=tuple(args.bounds) if args.bounds else None,
            n_synthetic=args.n_synthetic,
            seed=args.seed,
            column=args.column,
            sampler=sampler,
            reference=reference,
            reference_X=reference_X,
            allow_unconverged=args.allow_unconverged,
            progress=not args.quiet,
            clip_to_bounds=args.clip_to_bounds,
            public_utility=args.public_utility,
            allow_large_epsilon=args.allow_large_epsilon,
            budget_file=charge,
            drop_missing=args.drop_missing,
            public_files=public_files,
            **{k: v for k, v in tuning.items() if v is not None and v is not False},
        )
    for w in caught:
        if issubclass(w.category, KnownSeedWarning):
            print(f"dpsynth: warning: --seed: {w.message}", file=sys.stderr)
    release.write(outputs["--out"], outputs["--report"], outputs.get("--diagnostics"))
    if not args.quiet:
        _print_verdict(release.diagnostics.get("utility", {}), release.report.get("guarantee"))
        named = ", ".join(str(p) for p in outputs.values())
        print(f"[dpsynth] wrote {named}", file=sys.stderr)
    return 0


def sampler_of(args: argparse.Namespace) -> Any:
    """The MCMC settings the flags give."""
    from dpsynth.mechanisms import Sampler

    return Sampler(args.chains, args.iter_warmup, args.iter_sampling, args.backend, quiet=True)


def _reference_centre(args: argparse.Namespace, model: Any, X: Any, sampler: Any) -> dict:
    """``--centring-from``: public parameter values fitted to the public reference file."""
    from dpsynth.models import covariate_matrix
    from dpsynth.plan import reference_point

    ref = read_input(args.centring_from, args.column, "--centring-from")
    if not args.quiet:
        print("[dpsynth] fitting the model to the public reference file", file=sys.stderr)
    return reference_point(
        ref[args.column].to_numpy(),
        model,
        bounds=tuple(args.bounds) if args.bounds else None,
        reference_X=covariate_matrix(ref, args.covariates, args.categorical),
        X=X,
        sampler=sampler,
    )


def _print_verdict(verdict: dict[str, Any], guarantee: str | None = None) -> None:
    """The curator's utility verdict on stderr, marked confidential (never in a file but
    the confidential diagnostics); first word "NOT DP" for a release without a guarantee."""
    from dpsynth.curator import format_summary, not_dp_line

    if verdict.get("verdict") in ("good", "fair", "poor"):
        text = api_words_as_flags(format_summary({"guarantee": guarantee, **verdict}))
    else:
        text = f"CONFIDENTIAL: no utility verdict ({verdict.get('reason', 'unavailable')})"
        if (not_dp := not_dp_line(guarantee)) is not None:
            text = f"{not_dp}\n{text}"
    for line in text.splitlines():
        print(f"[dpsynth] {line}", file=sys.stderr)


def _centring_arg(text: str) -> str | dict[str, Any]:
    """``--centring``: ``none``, ``saturated``, or a JSON object of public parameter values."""
    if text in ("none", "saturated"):
        return text
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            "give none, saturated, or public parameter values as a JSON object, "
            'e.g. \'{"beta": [1.1], "phi": 0.4}\''
        )
    return value


def _check_ints(args: argparse.Namespace) -> None:
    for name, (lo, hi) in INT_RANGES.items():
        value = getattr(args, name, None)
        if value is not None and not lo <= value <= hi:
            raise InputError(name, f"must lie in [{lo}, {hi:,}] (got {value})")


def check_output_paths(input_path: str, outputs: dict[str, str | None]) -> dict[str, Path]:
    """Output paths must be files in existing, writable folders, distinct from the input
    and from each other (so no run can overwrite the confidential data)."""
    seen = {_resolved(input_path): "IN.csv"}
    checked: dict[str, Path] = {}
    for flag, value in outputs.items():
        if value is None:
            continue
        path = Path(value)
        key = _resolved(value)
        if key in seen:
            raise InputError(flag, f"is the same file as {seen[key]}")
        seen[key] = flag
        if path.is_dir():
            raise InputError(flag, f"{value} is a directory")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(flag, f"folder {folder} does not exist")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise InputError(flag, f"{value} is not writable")
        checked[flag] = path
    return checked


def _resolved(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _names(columns: str | None) -> list[str]:
    """A comma-separated list of column names (``--covariates``)."""
    return [c.strip() for c in (columns or "").split(",") if c.strip()]


def check_input_file(path: str, columns: list[str], param: str) -> list[str]:
    """Check a CSV file's existence, encoding and header, and that it has ``columns``.

    Reads the header line only (no scientific stack). A missing column is refused with the
    list of the columns the file has, and a hint when the header looks like another
    delimiter (``;`` or tab). Returns the header's names.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(param, f"no such file: {path}")
    if p.is_dir():
        raise InputError(param, f"{path} is a directory")
    try:
        with p.open(encoding="utf-8-sig", newline="") as fh:
            header = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise InputError(param, "is not UTF-8 text (save it as UTF-8 CSV)") from None
    except OSError:
        raise InputError(param, f"cannot read {path}") from None
    if not header:
        raise InputError(param, "is empty")
    names = [h.strip() for h in header]
    if any(not h for h in names):
        raise InputError(param, f"column {names.index('') + 1} has an empty name")
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise InputError(param, f"duplicated column name(s): {', '.join(dupes)}")
    for column in columns:
        if column not in names:
            flag = "--column" if column == columns[0] else "--covariates"
            raise InputError(flag, f"no column {column!r} in {path}{_columns_hint(names)}")
    return names


def _columns_hint(names: list[str]) -> str:
    """The columns a file has, and a delimiter hint when its header looks like one column."""
    shown = ", ".join(repr(n) for n in names[:20]) + (" ..." if len(names) > 20 else "")
    hint = f"; its columns are {shown}"
    if len(names) == 1 and (";" in names[0] or "\t" in names[0]):
        sep = "semicolons" if ";" in names[0] else "tabs"
        hint += f" (the file seems to be separated by {sep}: save it with commas)"
    return hint


def _public_file_hashes(args: argparse.Namespace) -> dict[str, str]:
    """SHA-256 of every public reference file the release uses, by flag (for the report)."""
    from dpsynth.budget import file_sha256

    return {
        flag: file_sha256(path)
        for flag, path in (
            ("--weights-from", args.weights_from),
            ("--centring-from", args.centring_from),
        )
        if path is not None
    }


def read_input(path: str, column: str, param: str, allow_missing: bool = False) -> pd.DataFrame:
    """Read a UTF-8 CSV (a BOM is fine), refusing unreadable files and ambiguous headers.

    Missing outcome values are refused with the column's name and their count, unless
    ``allow_missing`` (``--drop-missing``: the library drops them); non-numeric and
    infinite values are always refused."""
    import numpy as np
    import pandas as pd

    check_input_file(path, [column], param)
    try:
        frame = pd.read_csv(Path(path), encoding="utf-8-sig")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError):
        raise InputError(param, "cannot be parsed as CSV") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if len(frame) == 0:
        raise InputError("--column", "the data are empty")
    missing = frame[column].isna().to_numpy()
    if missing.any() and not allow_missing:
        hint = "; --drop-missing drops such records" if param == "IN.csv" else ""
        raise InputError(
            "--column",
            f"column {column!r} of {path} has {int(missing.sum())} missing value(s) (first at "
            f"record {int(np.flatnonzero(missing)[0]) + 1}){hint}",
        )
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) & ~missing)
    if bad.size:
        raise InputError(
            "--column",
            f"record {int(bad[0]) + 1} of column {column!r} of {path} is non-numeric or infinite",
        )
    frame[column] = values
    return frame


# ----------------------------------------------------------------------------- combine


def _combine_command(args: argparse.Namespace) -> int:
    import json

    import numpy as np
    import pandas as pd

    from dpsynth.inference import combine_frame

    path = Path(args.synth)
    if not path.is_file():
        raise InputError("SYNTH.csv", f"file not found: {path}")
    try:
        df = pd.read_csv(path, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise InputError("SYNTH.csv", "cannot be read as a UTF-8 CSV") from None
    if df.empty:
        raise InputError("SYNTH.csv", "no records")
    has_sets = args.set_column in df.columns
    if args.rule != "single" and not has_sets:
        raise InputError(
            "set_column",
            f"column {args.set_column!r} not found; rule {args.rule!r} needs m >= 2 sets "
            "(use --rule single for one set)",
        )
    if has_sets and df[args.set_column].isna().any():
        raise InputError("set_column", f"column {args.set_column!r} has missing values")
    m = int(df[args.set_column].nunique()) if has_sets else 1
    if args.rule == "single" and m != 1:
        raise InputError("rule", f"'single' needs exactly one synthetic set (found {m})")
    if args.rule in ("thm7", "rubin", "raghunathan") and m < 2:
        raise InputError("rule", f"rule {args.rule!r} needs m >= 2 synthetic sets (found {m})")
    res = combine_frame(df, args.column, args.estimand, args.rule, args.set_column)
    if args.json:
        payload = {"column": args.column, "estimand": args.estimand, **res.to_dict()}
        print(json.dumps(payload, indent=2, allow_nan=False, default=str))
        return 0
    df_txt = "inf (normal)" if np.isinf(res.df) else f"{res.df:.4g}"
    print(f"{args.estimand} of {args.column!r} from m = {res.m} synthetic set(s), rule {res.rule}")
    print(f"  estimate  {res.estimate:.6g}")
    print(f"  variance  {res.variance:.6g}   (SE {res.se:.6g})")
    print(f"  df        {df_txt}")
    print(f"  {round(res.level * 100)}% CI    [{res.lower:.6g}, {res.upper:.6g}]")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
