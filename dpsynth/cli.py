"""Command line: ``python -m dpsynth synthesize ...`` and ``python -m dpsynth combine ...``.

Bad input gets one line on stderr naming the parameter, exit status 2, and no
output file. Long runs report progress on stderr; stdout carries only results.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dpsynth import __version__
from dpsynth.errors import InputError, require_finite_positive
from dpsynth.mechanisms import (
    MECHANISMS,
    Release,
    Sampler,
    synthesize,
)
from dpsynth.models import MODELS, Model, covariate_matrix

CLI_MECHANISMS = (*MECHANISMS, "sbs")


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"dpsynth: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The ``dpsynth`` parser with its subcommands."""
    from dpsynth.cli_modips import add_combine_command, add_sbs_arguments

    parser = _Parser(prog="dpsynth", description="Differentially private Bayesian data synthesis")
    parser.add_argument("--version", action="version", version=f"dpsynth {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("synthesize", help="release synthetic data with a privacy report")
    s.add_argument("input", metavar="IN.csv")
    s.add_argument("--column", required=True, help="the confidential outcome column")
    s.add_argument("--model", default="beta", help=f"one of {', '.join(MODELS)}")
    s.add_argument("--stan-file", default=None, help="your own Stan program (dpsynth convention)")
    s.add_argument(
        "--outcome",
        choices=("unit", "count", "real"),
        default="real",
        help="support of y for --stan-file models",
    )
    s.add_argument("--mechanism", required=True, help=f"one of {', '.join(CLI_MECHANISMS)}")
    s.add_argument("--epsilon", required=True, help="target epsilon (recorded for aDP mechanisms)")
    s.add_argument("--covariates", default=None, help="comma-separated covariate columns")
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
    s.add_argument("--m", type=int, default=1, help="number of synthetic datasets")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, metavar="OUT.csv")
    s.add_argument("--report", required=True, metavar="REPORT.json")
    t = s.add_argument_group("weights and tuning")
    t.add_argument("--c", type=float, default=1.0, help="weight scale c (Algorithms 1-2)")
    t.add_argument("--g", type=float, default=0.0, help="weight shift g (Algorithms 1-2)")
    t.add_argument("--radius", type=float, default=None, help="CW radius r (Algorithm 2)")
    t.add_argument("--reweight", action="store_true", help="re-weighting (Algorithm 3), lw/cw")
    t.add_argument("--k", type=float, default=0.95, help="starting k of the re-weighting search")
    t.add_argument(
        "--downscale",
        type=float,
        default=None,
        help="factor in (0,1] applied to LW weights before censoring (censor-w)",
    )
    t.add_argument(
        "--target-lipschitz", type=float, default=None, help="SW target Delta (default epsilon/2)"
    )
    t.add_argument("--n-bins", type=int, default=None, help="PH bins (default ceil(sqrt(n)))")
    mc = s.add_argument_group("MCMC")
    mc.add_argument("--chains", type=int, default=4)
    mc.add_argument("--iter-warmup", type=int, default=1000)
    mc.add_argument("--iter-sampling", type=int, default=1000)
    mc.add_argument("--backend", choices=("auto", "cmdstanpy", "pystan"), default=None)
    mc.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_sbs_arguments(s)
    s.set_defaults(func=_synthesize_command)

    add_combine_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"dpsynth: error: {exc}", file=sys.stderr)
        return 2


def _synthesize_command(args: argparse.Namespace) -> int:
    frame = read_input(args.input, args.column)
    if args.mechanism not in CLI_MECHANISMS:
        raise InputError(
            "--mechanism",
            f"unknown mechanism {args.mechanism!r}; choose one of {', '.join(CLI_MECHANISMS)}",
        )
    epsilon = require_finite_positive("--epsilon", args.epsilon)
    if args.m < 1:
        raise InputError("--m", f"must be an integer >= 1 (got {args.m})")
    if args.mechanism == "sbs":
        from dpsynth.cli_modips import synthesize_sbs

        args.epsilon = epsilon
        data, report = synthesize_sbs(frame[args.column].to_numpy(), args)
        release = Release(data, report)
    else:
        model: str | Model = args.model
        if args.stan_file:
            model = Model.from_stan_file(args.stan_file, args.outcome)
        elif args.model not in MODELS:
            raise InputError(
                "--model", f"unknown model {args.model!r}; choose one of {', '.join(MODELS)}"
            )
        X = covariate_matrix(frame, args.covariates, args.categorical)
        sampler = Sampler(
            args.chains, args.iter_warmup, args.iter_sampling, args.backend, quiet=args.quiet
        )
        release = synthesize(
            frame[args.column].to_numpy(),
            model=model,
            mechanism=args.mechanism,
            epsilon=epsilon,
            X=X,
            bounds=tuple(args.bounds) if args.bounds else None,
            m=args.m,
            seed=args.seed,
            column=args.column,
            sampler=sampler,
            progress=not args.quiet,
            c=args.c,
            g=args.g,
            radius=args.radius,
            reweight=args.reweight,
            k=args.k,
            downscale=args.downscale,
            target_lipschitz=args.target_lipschitz,
            n_bins=args.n_bins,
        )
    release.report["input_columns"] = {"outcome": args.column, "covariates": args.covariates}
    release.write(args.out, args.report)
    if not args.quiet:
        print(f"[dpsynth] wrote {args.out} and {args.report}", file=sys.stderr)
    return 0


def read_input(path: str, column: str) -> pd.DataFrame:
    """Read IN.csv and check the outcome column exists and is non-empty."""
    p = Path(path)
    if not p.is_file():
        raise InputError("IN.csv", f"no such file: {path}")
    try:
        frame = pd.read_csv(p)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise InputError("IN.csv", f"cannot read {path}: {exc}") from None
    if column not in frame.columns:
        raise InputError("--column", f"no column {column!r} in {path}")
    if len(frame) == 0:
        raise InputError("--column", "the data are empty")
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().any() or not np.all(np.isfinite(values.to_numpy(dtype=float))):
        raise InputError("--column", f"{column!r} contains NaN, non-numeric or infinite values")
    return frame


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
